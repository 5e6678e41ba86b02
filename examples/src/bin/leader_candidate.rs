//! One candidate for a Lease, elected with `ferrokube::leader`: the ferrokube side of the
//! leader-election benchmark (`examples/src/bin/bench_leader.rs`, protocol in
//! benches/peers/LEADER.md).
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

use ferrokube_examples::shared::go_duration;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;
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

/// The command line: the same flags as the client-go twin's (Go durations: `15s`, `1m30s`, `500ms`).
#[derive(Parser, Debug)]
#[command(
    name = "leader_candidate",
    about = "One candidate for a Lease, elected with ferrokube::leader (the leader-election \
             benchmark's ferrokube side): one JSON line per election event on stdout.",
    args_override_self = true
)]
struct Args {
    /// The cluster [default: $KUBECONFIG]
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The Lease's namespace.
    #[arg(long, value_name = "NS", default_value = "default")]
    namespace: String,
    /// The Lease's name.
    #[arg(long, value_name = "LEASE", required = true)]
    name: String,
    /// This candidate's identity in the Lease.
    #[arg(long, value_name = "ID", required = true)]
    identity: String,
    /// How long a Lease holds without renewal.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = go_duration::parse)]
    lease_duration: std::time::Duration,
    /// How long the leader tries to renew before it gives up.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = go_duration::parse)]
    renew_deadline: std::time::Duration,
    /// How often to try to acquire or renew.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = go_duration::parse)]
    retry_period: std::time::Duration,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    match candidate(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("leader_candidate: {e}");
            ExitCode::from(2)
        }
    }
}

async fn candidate(args: Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let kubeconfig = args
        .kubeconfig
        .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from))
        .unwrap_or_default();
    let Args {
        namespace,
        name,
        identity,
        ..
    } = args;
    if name.is_empty() || identity.is_empty() || kubeconfig.as_os_str().is_empty() {
        return Err("--name, --identity and --kubeconfig (or $KUBECONFIG) are required".into());
    }
    let config = Config::from_kubeconfig_files(&[kubeconfig], None)?;
    let client = Client::new(config)?;

    let id: Arc<str> = identity.clone().into();
    let (started, stopped, new_leader) = (id.clone(), id.clone(), id);
    let elector = LeaderElector::builder(client, &namespace, &name)
        .identity(identity)
        .lease_duration(args.lease_duration)
        .renew_deadline(args.renew_deadline)
        .retry_period(args.retry_period)
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
