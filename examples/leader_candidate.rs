//! One candidate for a Lease, elected with `ferrokube::leader`: the ferrokube side of the
//! leader-election benchmark (`examples/bench_leader.rs`, protocol in benches/peers/LEADER.md).
//! Its client-go twin is `benches/peers/client-go-leader/main.go`; both take the same flags and
//! print the same lines.
//!
//! ```text
//! leader_candidate --kubeconfig FILE --namespace NS --name LEASE --identity ID
//!     [--lease-duration 15s] [--renew-deadline 10s] [--retry-period 2s]
//! ```
//!
//! `release_on_cancel(true)`: SIGTERM or SIGINT ends the election, a leader hands the Lease back,
//! and the process exits with status 0; a second signal exits at once with status 130. Losing the
//! Lease without a signal exits with status 1. The client has ferrokube's defaults (5 QPS, burst 10).
//!
//! stdout carries one JSON line per event, nothing else; `unix_nanos` is this machine's wall
//! clock when the elector's callback ran:
//!
//! ```text
//! {"event":"started_leading","identity":ID,"unix_nanos":N}
//! {"event":"stopped_leading","identity":ID,"unix_nanos":N}
//! {"event":"new_leader","identity":ID,"leader":HOLDER,"unix_nanos":N}
//! ```
//!
//! Logs (`RUST_LOG`, default `info`) go to stderr.

#[path = "shared/args.rs"]
mod args;
#[path = "shared/go_duration.rs"]
mod go_duration;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use args::Args;
use ferrokube::leader::{LeaderElector, RunOutcome};
use ferrokube::{Client, Config};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Writes one event line to stdout (the lock keeps lines whole; `println!` flushes at the newline).
fn emit(event: &str, identity: &str, leader: Option<&str>) {
    let now = unix_nanos();
    let mut line = json!({"event": event, "identity": identity, "unix_nanos": now});
    if let Some(leader) = leader {
        line["leader"] = json!(leader);
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        eprintln!("leader_candidate: writing stdout failed");
    }
}

fn duration(args: &Args, flag: &str, default: &str) -> Result<std::time::Duration, String> {
    go_duration::parse(&args.value(flag, default)).map_err(|e| format!("{flag}: {e}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    match candidate().await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("leader_candidate: {e}");
            ExitCode::from(2)
        }
    }
}

async fn candidate() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let args = Args::from_env();
    let kubeconfig = args.value(
        "--kubeconfig",
        &std::env::var("KUBECONFIG").unwrap_or_default(),
    );
    let namespace = args.value("--namespace", "default");
    let name = args.value("--name", "");
    let identity = args.value("--identity", "");
    if name.is_empty() || identity.is_empty() || kubeconfig.is_empty() {
        return Err("--name, --identity and --kubeconfig (or $KUBECONFIG) are required".into());
    }
    let config = Config::from_kubeconfig_files(&[PathBuf::from(&kubeconfig)], None)?;
    let client = Client::new(config)?;

    let id: Arc<str> = identity.clone().into();
    let (started, stopped, new_leader) = (id.clone(), id.clone(), id);
    let elector = LeaderElector::builder(client, &namespace, &name)
        .identity(identity)
        .lease_duration(duration(&args, "--lease-duration", "15s")?)
        .renew_deadline(duration(&args, "--renew-deadline", "10s")?)
        .retry_period(duration(&args, "--retry-period", "2s")?)
        .release_on_cancel(true)
        .on_started_leading(move |_lost| {
            emit("started_leading", &started, None);
            async {}
        })
        .on_stopped_leading(move || emit("stopped_leading", &stopped, None))
        .on_new_leader(move |leader| emit("new_leader", &new_leader, Some(leader)))
        .build()?;

    // The first SIGTERM/SIGINT ends the election (release, then exit 0); a second exits at once.
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let (signalled, shutdown) = oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        let _ = signalled.send(());
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        std::process::exit(130);
    });

    let outcome = elector
        .run(async {
            let _ = shutdown.await;
        })
        .await?;
    match outcome {
        RunOutcome::ShutdownWhileFollowing => Ok(ExitCode::SUCCESS),
        RunOutcome::ShutdownWhileLeading { released } => {
            if !released {
                eprintln!("leader_candidate: shut down while leading; the release failed");
            }
            Ok(ExitCode::SUCCESS)
        }
        RunOutcome::Lost(reason) => {
            eprintln!("leader_candidate: leadership lost: {reason}");
            Ok(ExitCode::from(1))
        }
    }
}
