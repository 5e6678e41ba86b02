//! Stale caches, measured: the ReplicaSet sample through the same scripted churn
//! (`examples/src/replicaset/churn.rs`) with and without its stale-cache protection, interleaved, on
//! the embedded API server with watch delivery delayed (200 ms and 2 s by default), or on a real
//! cluster.
//!
//! ```text
//! cargo run --release -p ferrokube-examples --bin bench_stale   # embedded server, 200 ms and 2 s
//! cargo run --release -p ferrokube-examples --bin bench_stale -- --delays 0,200 --reps 2
//! # pods never ready:
//! cargo run --release -p ferrokube-examples --bin bench_stale -- --no-kubelet --replicasets 50
//! # a real server:
//! cargo run --release -p ferrokube-examples --bin bench_stale -- --kubeconfig PATH --audit-log FILE
//! ```
//!
//! Each run starts the controller in-process with a fresh namespace, plays the script, and counts
//! from the server's audit log: 409s, status writes that went backwards, pods created or deleted
//! beyond the need (see the churn module). One JSON line per run is appended to
//! `benches/stale/results-<date>.jsonl` (or `--out FILE`), and a table is printed at the end.

use std::time::Duration;

use ferrokube::apiserver::{ApiServer, KubeletSettings};
use ferrokube::config::Kubeconfig;
use ferrokube::{Client, Config};

use clap::Parser;
use ferrokube_examples::replicaset::churn::{self, BoxError, Outcome, Script};
use ferrokube_examples::shared::args;

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "bench_stale",
    about = "Stale caches, measured: the ReplicaSet sample through a scripted churn with and without \
             its stale-cache protection, on the embedded API server with delayed watches or on a \
             real cluster.",
    args_override_self = true
)]
struct Cli {
    /// Repetitions (odd ones run without the protection first).
    #[arg(long, value_name = "N", default_value_t = 1)]
    reps: u64,
    /// ReplicaSets in the script.
    #[arg(long, value_name = "N", default_value_t = 5)]
    replicasets: usize,
    /// Embedded server: its watch delivery delays, in milliseconds, comma-separated.
    #[arg(long, value_name = "MS,...", default_value = "200,2000")]
    delays: String,
    /// Embedded server: no pod simulator (pods never get ready).
    #[arg(long)]
    no_kubelet: bool,
    /// Run on this kubeconfig's cluster instead of the embedded server (needs --audit-log).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<String>,
    /// The real server's audit log, where the counts come from.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<std::path::PathBuf>,
    /// Append the raw JSON lines here [default: benches/stale/results-DATE.jsonl]
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let cli = Cli::parse();
    let reps = cli.reps;
    let replicasets = cli.replicasets;
    let out = args::results_file(cli.out.as_deref(), "stale");
    let mut rows: Vec<(String, Duration, Outcome)> = Vec::new();
    let kubeconfig = cli.kubeconfig.clone().unwrap_or_default();
    for rep in 0..reps {
        // Odd repetitions run without the protection first.
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        if kubeconfig.is_empty() {
            let delays = &cli.delays;
            for delay in delays.split(',') {
                let delay = Duration::from_millis(delay.trim().parse()?);
                for protection in order {
                    let kubelet = !cli.no_kubelet;
                    let outcome = embedded(delay, protection, replicasets, kubelet).await?;
                    rows.push(("embedded".into(), delay, outcome));
                    record(&out, rows.last());
                }
            }
        } else {
            let audit = cli.audit_log.clone().unwrap_or_default();
            let config = Config::from_kubeconfig(
                &Kubeconfig::read(std::path::Path::new(&kubeconfig))?,
                None,
            )?;
            for protection in order {
                let namespace = format!(
                    "stale-{}-{}-{rep}",
                    if protection { "on" } else { "off" },
                    std::process::id()
                );
                let script = Script {
                    replicasets,
                    pods_become_ready: false,
                    ..Script::default()
                };
                let outcome = churn::run(config.clone(), &namespace, protection, &script, || {
                    ferrokube::apiserver::audit::read_kube_apiserver_log(&audit).unwrap_or_default()
                })
                .await?;
                delete_namespace(&config, &namespace).await?;
                rows.push(("kube-apiserver".into(), Duration::ZERO, outcome));
                record(&out, rows.last());
            }
        }
    }
    println!(
        "{:<15} {:>6} {:>10} {:>5} {:>7} {:>7} {:>9} {:>8} {:>8} {:>6} {:>6} {:>7}",
        "server",
        "delay",
        "protection",
        "409s",
        "writes",
        "status",
        "backwards",
        "+creates",
        "+deletes",
        "excess",
        "skips",
        "seconds"
    );
    for (server, delay, o) in &rows {
        println!(
            "{:<15} {:>6} {:>10} {:>5} {:>7} {:>7} {:>9} {:>8} {:>8} {:>6} {:>6} {:>7.1}",
            server,
            format!("{}ms", delay.as_millis()),
            if o.protection { "on" } else { "off" },
            o.conflicts,
            o.writes,
            o.status_writes,
            o.backwards_status,
            o.extra_creates,
            o.extra_deletes,
            o.worst_excess,
            o.stale_skips,
            o.millis as f64 / 1000.0
        );
    }
    println!("raw lines appended to {}", out.display());
    Ok(())
}

/// One run on a fresh embedded server with its kubelet simulator and `delay` on every watch event.
async fn embedded(
    delay: Duration,
    protection: bool,
    replicasets: usize,
    kubelet: bool,
) -> Result<Outcome, BoxError> {
    let mut server = ApiServer::new().audit(true);
    if kubelet {
        server = server.kubelet(KubeletSettings::default());
    }
    let server = server.start().await?;
    server.faults().delay_watches(delay);
    let config = Config::new(server.url().parse()?);
    let script = Script {
        replicasets,
        pods_become_ready: kubelet,
        ..Script::default()
    };
    churn::run(config, "stale", protection, &script, || {
        server.audit_log().entries()
    })
    .await
}

fn record(out: &std::path::Path, row: Option<&(String, Duration, Outcome)>) {
    use std::io::Write;
    let Some((server, delay, outcome)) = row else {
        return;
    };
    let line = outcome.json(server, *delay);
    println!("{line}");
    if let Some(parent) = out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
    {
        Ok(mut file) => {
            let _ = writeln!(file, "{line}");
        }
        Err(error) => eprintln!("cannot append to {}: {error}", out.display()),
    }
}

async fn delete_namespace(config: &Config, namespace: &str) -> Result<(), BoxError> {
    let client = Client::new(config.clone())?;
    let namespaces: ferrokube::Api<k8s_openapi::api::core::v1::Namespace> =
        ferrokube::Api::all(client);
    namespaces
        .delete(namespace, &ferrokube::api::DeleteParams::default())
        .await?;
    Ok(())
}
