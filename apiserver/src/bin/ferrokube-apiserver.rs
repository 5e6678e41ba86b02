//! `ferrokube-apiserver`: the embedded API server as a process, for kubectl and other clients.
//!
//! ```text
//! ferrokube-apiserver [--port N] [--tls] [--token T | --token-file PATH] [--kubeconfig PATH]
//!                     [--kubelet] [--history N] [--legacy-service-account-tokens] [--publish-root-ca]
//!                     [--no-builtin-controllers]
//! ```
//!
//! It writes a kubeconfig (default `./ferrokube.kubeconfig`, mode 0600: it holds the token), prints
//! where, and serves until Ctrl-C. `--help` describes the options; bad usage exits with 2, and so
//! does a `--token-file` that gives no token. With a token, every request but the health checks
//! needs it, the fault switches included: `curl -H "Authorization: Bearer $T" ...`.
//!
//! `--token T` is seen by every user of the machine (`ps`, `/proc/PID/cmdline`); `--token-file PATH`
//! is not: the token is the file's first line, trimmed, so `--token-file <(printf %s "$T")` or a
//! file only its owner reads keep it private. (kube-apiserver takes its tokens from a file too:
//! `--token-auth-file`, a CSV of tokens and users.)
//!
//! Faults can be switched over HTTP: `curl -X PUT $URL/ferrokube/faults -d '{"failWrites":0.05}'`,
//! `curl -X POST "$URL/ferrokube/faults?closeWatches=1&compact=1"`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
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
    /// Other users of the machine see T (`ps`): prefer --token-file.
    #[arg(long, value_name = "T")]
    token: Option<String>,
    /// Like --token, with the token read from the first line of this file (trimmed), so that it does
    /// not show in `ps`. An empty or unreadable file is an error.
    #[arg(long, value_name = "PATH", conflicts_with = "token")]
    token_file: Option<PathBuf>,
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
    /// Give every ServiceAccount a token Secret, as Kubernetes did before 1.24 (its e2e framework
    /// waits for them); default none, as 1.24 and later.
    #[arg(long)]
    legacy_service_account_tokens: bool,
    /// Publish a kube-root-ca.crt ConfigMap in every namespace, as kube-controller-manager does;
    /// default none (kube-apiserver alone does not).
    #[arg(long)]
    publish_root_ca: bool,
    /// Run none of the controllers kube-controller-manager would run (garbage collection, namespace
    /// deletion, default ServiceAccounts, quota usage): kube-apiserver alone, as envtest has it.
    #[arg(long)]
    no_builtin_controllers: bool,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("kubeconfig", &self.kubeconfig)
            .field("kubelet", &self.kubelet)
            .field("history", &self.history)
            .field(
                "legacy_service_account_tokens",
                &self.legacy_service_account_tokens,
            )
            .field("publish_root_ca", &self.publish_root_ca)
            .field("no_builtin_controllers", &self.no_builtin_controllers)
            .finish()
    }
}

impl Cli {
    /// The token: `--token`'s, or the first line of `--token-file`. A file that gives none is a usage
    /// error, reported as clap reports its own (exit code 2).
    fn token(&self) -> Result<Option<String>, clap::Error> {
        match (&self.token, &self.token_file) {
            (Some(token), _) => Ok(Some(token.clone())),
            (None, Some(path)) => read_token_file(path).map(Some).map_err(|e| {
                Cli::command().error(ErrorKind::ValueValidation, format!("--token-file: {e}"))
            }),
            (None, None) => Ok(None),
        }
    }
}

/// A `--token-file` that gives no token.
#[derive(Debug, thiserror::Error)]
enum TokenFileError {
    /// Missing, unreadable, or not UTF-8.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Nothing but spaces before the first line break. (An empty token would be no authentication
    /// at all, the opposite of what passing a token file asks for.)
    #[error("{} has no token: its first line is empty", path.display())]
    Empty { path: PathBuf },
}

/// The first line of the file at `path`, trimmed (so a trailing newline or CR LF is not part of it).
fn read_token_file(path: &std::path::Path) -> Result<String, TokenFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let token = text.lines().next().unwrap_or_default().trim();
    if token.is_empty() {
        return Err(TokenFileError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(token.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let token = match cli.token() {
        Ok(token) => token,
        Err(usage) => usage.exit(),
    };
    let mut server = ApiServer::new();
    if let Some(port) = cli.port {
        server = server.address(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if cli.tls {
        server = server.tls(true);
    }
    if let Some(token) = &token {
        server = server.token(token);
    }
    server = server
        .legacy_service_account_tokens(cli.legacy_service_account_tokens)
        .publish_root_ca(cli.publish_root_ca)
        .builtin_controllers(!cli.no_builtin_controllers);
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

    /// A fresh directory for one test's token files.
    fn scratch(test: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ferrokube-apiserver-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        dir
    }

    fn parse_with_token_file(path: &std::path::Path) -> Cli {
        Cli::parse_from([
            "ferrokube-apiserver".as_ref(),
            "--token-file".as_ref(),
            path.as_os_str(),
        ])
    }

    #[test]
    fn abuse_the_token_file_keeps_the_token_off_the_command_line() {
        let dir = scratch("token-file");
        let path = dir.join("token");
        for (content, token) in [
            ("file-secret-7\n", "file-secret-7"),
            ("  file-secret-7 \r\nsecond line\n", "file-secret-7"),
            ("file-secret-7", "file-secret-7"),
        ] {
            std::fs::write(&path, content).expect("a token file");
            let cli = parse_with_token_file(&path);
            assert_eq!(cli.token().expect("a token").as_deref(), Some(token));
            assert!(!format!("{cli:?}").contains(token), "{cli:?}");
        }
        // No token at all without either option.
        let cli = Cli::parse_from(["ferrokube-apiserver"]);
        assert_eq!(cli.token().expect("no token").as_deref(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn abuse_a_token_file_without_a_token_is_a_usage_error() {
        let dir = scratch("token-file-empty");
        let no_token = "has no token: its first line is empty";
        let cases: [(&str, Option<&[u8]>, &str); 5] = [
            ("empty", Some(b""), no_token),
            ("blank", Some(b"  \t\r\n"), no_token),
            ("later", Some(b"\nsecret-on-line-2\n"), no_token),
            ("not-utf8", Some(b"\xff\xfe\n"), "cannot read"),
            ("missing", None, "cannot read"),
        ];
        for (name, content, message) in cases {
            let path = dir.join(name);
            if let Some(content) = content {
                std::fs::write(&path, content).expect("a token file");
            }
            let error = parse_with_token_file(&path).token().expect_err(name);
            assert_eq!(error.exit_code(), 2, "{name}");
            let printed = error.to_string();
            assert!(
                printed.contains("error: --token-file: ")
                    && printed.contains(&path.display().to_string())
                    && printed.contains(message),
                "{name}: {printed}"
            );
            assert!(!printed.contains("secret-on-line-2"), "{printed}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_token_and_the_token_file_exclude_each_other() {
        let both = Cli::try_parse_from([
            "ferrokube-apiserver",
            "--token",
            "t",
            "--token-file",
            "/some/file",
        ])
        .expect_err("conflicting options");
        assert_eq!(both.kind(), ErrorKind::ArgumentConflict);
        assert_eq!(both.exit_code(), 2);
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("--token-file <PATH>"), "{help}");
        assert!(help.contains("does not show in `ps`"), "{help}");
    }
}
