//! `ferrokube-apiserver`: the embedded API server as a process, for kubectl and other clients.
//!
//! ```text
//! ferrokube-apiserver [--port N] [--tls] [--token T] [--kubeconfig PATH] [--kubelet] [--history N]
//! ```
//!
//! It writes a kubeconfig (default `./ferrokube.kubeconfig`), prints where, and serves until Ctrl-C.
//! Faults can be switched over HTTP: `curl -X PUT $URL/ferrokube/faults -d '{"failWrites":0.05}'`,
//! `curl -X POST "$URL/ferrokube/faults?closeWatches=1&compact=1"`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use ferrokube_apiserver::{ApiServer, KubeletSettings};

fn usage() -> ExitCode {
    eprintln!(
        "usage: ferrokube-apiserver [--port N] [--tls] [--token T] [--kubeconfig PATH] [--kubelet] [--history N]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut server = ApiServer::new();
    let mut kubeconfig = PathBuf::from("ferrokube.kubeconfig");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => match args.next().and_then(|p| p.parse::<u16>().ok()) {
                Some(port) => server = server.address(SocketAddr::from(([127, 0, 0, 1], port))),
                None => return usage(),
            },
            "--tls" => server = server.tls(true),
            "--token" => match args.next() {
                Some(token) => server = server.token(&token),
                None => return usage(),
            },
            "--kubeconfig" => match args.next() {
                Some(path) => kubeconfig = PathBuf::from(path),
                None => return usage(),
            },
            "--kubelet" => server = server.kubelet(KubeletSettings::default()),
            "--history" => match args.next().and_then(|h| h.parse::<usize>().ok()) {
                Some(history) => server = server.history(history),
                None => return usage(),
            },
            _ => return usage(),
        }
    }
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
