//! `ferrokube-apiserver`: the embedded API server as a process, for kubectl and other clients.
//!
//! ```text
//! ferrokube-apiserver [--port N] [--tls] [--token T] [--kubeconfig PATH] [--kubelet] [--history N]
//! ```
//!
//! It writes a kubeconfig (default `./ferrokube.kubeconfig`, mode 0600: it holds the token), prints
//! where, and serves until Ctrl-C. `--help` describes the options; bad usage exits with 2. With
//! `--token`, every request but the health checks needs it, the fault switches included:
//! `curl -H "Authorization: Bearer $T" ...`.
//! Faults can be switched over HTTP: `curl -X PUT $URL/ferrokube/faults -d '{"failWrites":0.05}'`,
//! `curl -X POST "$URL/ferrokube/faults?closeWatches=1&compact=1"`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ferrokube_apiserver::{ApiServer, KubeletSettings};

/// The embedded Kubernetes API server as a process, for kubectl and other clients: it writes a
/// kubeconfig, prints where, and serves on loopback until Ctrl-C.
// No derived `Debug`: it would print the token (see the `Debug` below).
#[derive(Parser)]
#[command(name = "ferrokube-apiserver", args_override_self = true)]
struct Cli {
    /// Port on 127.0.0.1 (default: one the OS picks).
    #[arg(long, value_name = "N")]
    port: Option<u16>,
    /// Serve HTTPS with a fresh self-signed CA (the kubeconfig carries it); default plain HTTP.
    #[arg(long)]
    tls: bool,
    /// Require `Authorization: Bearer T` (the kubeconfig carries it); default no authentication.
    #[arg(long, value_name = "T")]
    token: Option<String>,
    /// Where to write the kubeconfig.
    #[arg(long, value_name = "PATH", default_value = "ferrokube.kubeconfig")]
    kubeconfig: PathBuf,
    /// Run a stand-in kubelet that makes pods Running and Ready (default: pods stay Pending).
    #[arg(long)]
    kubelet: bool,
    /// How many changes the watch history keeps; older resourceVersions get 410 Gone (default
    /// 10000).
    #[arg(long, value_name = "N")]
    history: Option<usize>,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("kubeconfig", &self.kubeconfig)
            .field("kubelet", &self.kubelet)
            .field("history", &self.history)
            .finish()
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut server = ApiServer::new();
    if let Some(port) = cli.port {
        server = server.address(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if cli.tls {
        server = server.tls(true);
    }
    if let Some(token) = &cli.token {
        server = server.token(token);
    }
    if cli.kubelet {
        server = server.kubelet(KubeletSettings::default());
    }
    if let Some(history) = cli.history {
        server = server.history(history);
    }
    let kubeconfig = cli.kubeconfig;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ferrokube-apiserver: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let running = match server.start().await {
            Ok(running) => running,
            Err(e) => {
                eprintln!("ferrokube-apiserver: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(e) = running.write_kubeconfig(&kubeconfig) {
            eprintln!("ferrokube-apiserver: writing {}: {e}", kubeconfig.display());
            return ExitCode::FAILURE;
        }
        println!("serving {}", running.url());
        println!("export KUBECONFIG={}", kubeconfig.display());
        let _ = tokio::signal::ctrl_c().await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abuse_debug_of_the_command_line_hides_the_token() {
        let cli = Cli::parse_from(["ferrokube-apiserver", "--token", "cli-secret-42"]);
        for printed in [format!("{cli:?}"), format!("{cli:#?}")] {
            assert!(!printed.contains("cli-secret-42"), "{printed}");
            assert!(printed.contains("<redacted>"), "{printed}");
        }
    }
}
