//! The sample controller: Kubernetes' ReplicaSet controller, built on ferrokube, and the project's
//! main demo.
//!
//! ```text
//! cargo run --example replicaset                      # the demo: embedded API server, a scripted story
//! cargo run --example replicaset -- --keep-running    # ... and stay up afterwards (Ctrl-C stops)
//! cargo run --example replicaset -- --kubeconfig ~/.kube/config   # be that cluster's RS controller
//! ```
//!
//! **The demo** (no `--kubeconfig`, no `KUBECONFIG`, not in a pod; or `--embedded`) starts ferrokube's
//! embedded API server with its pod simulator (pods get a node, then Running and Ready after 500 ms,
//! and take 300 ms to terminate), runs the controller against it over HTTP, and plays a story: create
//! two ReplicaSets, scale one up, kill some of its pods, scale it down, drop every watch, and force a
//! relist by compacting the server's history while changing things behind the informers' backs. A
//! live view shows each ReplicaSet's desired/current/ready pods, the queue, reconciles per second,
//! retries and informer events (plain log lines when stdout is not a terminal). At the end one line
//! says whether the world converged, checked against a fresh list from the server; the exit code is 0
//! only if it did.
//!
//! **Against a cluster** (`--kubeconfig PATH`, `$KUBECONFIG`, or in-cluster credentials) it runs as
//! that cluster's ReplicaSet controller until Ctrl-C — do not run it beside kube-controller-manager's.
//!
//! Options: `--workers N` (5), `--qps Q` / `--burst B` (20 / 30, kube-controller-manager's
//! `--kube-api-qps` / `--kube-api-burst`), `--metrics-addr HOST:PORT` (Prometheus text at `/metrics`),
//! `--resync SECONDS` (43200). Logs go to stderr through `tracing`; set `RUST_LOG` (default `warn`,
//! `error` under the live view).
//!
//! The controller itself is in [`controller`]; this file wires it up, [`story`] plays the demo,
//! [`view`] draws it, [`metrics`] serves the metrics.

mod controller;
mod metrics;
mod story;
mod view;
mod world;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ferrokube::Config;
use prometheus_client::registry::Registry;

use controller::{ControllerOptions, Running};

const USAGE: &str = "usage: replicaset [--embedded | --kubeconfig PATH] [--keep-running] [--workers N] \
[--qps Q] [--burst B] [--resync SECONDS] [--metrics-addr HOST:PORT]";

/// The command line.
#[derive(Debug, Clone)]
pub struct Args {
    embedded: bool,
    kubeconfig: Option<PathBuf>,
    keep_running: bool,
    workers: usize,
    qps: f32,
    burst: u32,
    resync: Duration,
    metrics_addr: Option<SocketAddr>,
}

impl Args {
    fn parse(mut words: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut args = Args {
            embedded: false,
            kubeconfig: None,
            keep_running: false,
            workers: 5,
            qps: 20.0,
            burst: 30,
            resync: ControllerOptions::default().resync,
            metrics_addr: None,
        };
        while let Some(word) = words.next() {
            let mut value = |flag: &str| words.next().ok_or(format!("{flag} needs a value"));
            match word.as_str() {
                "--embedded" => args.embedded = true,
                "--keep-running" => args.keep_running = true,
                "--kubeconfig" => args.kubeconfig = Some(value(&word)?.into()),
                "--workers" => args.workers = number(&word, &value(&word)?)?,
                "--qps" => args.qps = number(&word, &value(&word)?)?,
                "--burst" => args.burst = number(&word, &value(&word)?)?,
                "--resync" => args.resync = Duration::from_secs(number(&word, &value(&word)?)?),
                "--metrics-addr" => args.metrics_addr = Some(number(&word, &value(&word)?)?),
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(args)
    }

    /// Whether to run the demo rather than join a cluster.
    fn wants_embedded(&self) -> bool {
        let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        let kubeconfig_env = std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty());
        self.embedded || (self.kubeconfig.is_none() && !kubeconfig_env && !in_cluster)
    }

    fn options(&self) -> ControllerOptions {
        ControllerOptions {
            workers: self.workers,
            resync: self.resync,
            ..ControllerOptions::default()
        }
    }
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{flag}: {text:?} is not a valid value"))
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("replicaset: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let embedded = args.wants_embedded();
    let live = embedded && std::io::stdout().is_terminal();
    init_tracing(if live { "error" } else { "warn" });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("replicaset: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        if embedded {
            story::run(&args, live).await
        } else {
            run_in_cluster(&args).await.map(|()| true)
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("replicaset: {error}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

pub use controller::running::BoxError;

/// Runs as the replicaset controller of the configured cluster until Ctrl-C.
async fn run_in_cluster(args: &Args) -> Result<(), BoxError> {
    let config = match &args.kubeconfig {
        Some(path) => Config::from_kubeconfig_files(std::slice::from_ref(path), None)?,
        None => Config::infer()?,
    };
    let running = start(config, args).await?;
    eprintln!(
        "replicaset controller running ({} workers, qps {} burst {}); Ctrl-C stops",
        args.workers, args.qps, args.burst
    );
    tokio::signal::ctrl_c().await?;
    eprintln!("Ctrl-C: stopping the controller (syncs in flight finish), then the informers");
    running.stop().await;
    Ok(())
}

/// Starts the controller with the command line's settings, and its metrics endpoint if asked for.
pub async fn start(mut config: Config, args: &Args) -> Result<Running, BoxError> {
    config.qps = Some(args.qps);
    config.burst = args.burst;
    let mut registry = Registry::default();
    let running = Running::start(config, args.options(), Some(&mut registry)).await?;
    if let Some(addr) = args.metrics_addr {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        tracing::info!(%addr, "serving metrics at /metrics");
        tokio::spawn(metrics::serve(
            listener,
            Arc::new(registry),
            running.controller.stats().clone(),
        ));
    }
    Ok(running)
}
