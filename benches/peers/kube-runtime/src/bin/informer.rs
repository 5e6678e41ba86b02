//! The kube-rs side of ferrokube's informer benchmark (scripts/bench-informer-peers.sh): the same
//! protocol as examples/src/bin/bench_informer.rs and the client-go peer
//! (benches/peers/INFORMER.md), on kube-runtime's `watcher` + `reflector` store (kube 5.0).
//!
//! ```text
//! kube-rs-informer-peer --namespace bench --round 3 --updates 2000 [--strip]
//! ```
//!
//! Settings as the other two: the initial list is served from the watch cache
//! (`any_semantic()`, resourceVersion "0", as client-go and ferrokube do by default); `--strip`
//! drops managedFields and the last-applied annotation with `modify` before the store sees the
//! object. kube-rs has no client-side rate limiter, so `--qps`/`--burst` are accepted and unused.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube_client::{Api, Client};
use kube_runtime::{reflector, watcher, WatchStreamExt};

const SENT: &str = "ferrokube.bench/sent";
const IMPL: &str = "kube-rs-5.0";

fn arg(flag: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() {
    let namespace = arg("--namespace", "bench");
    let round = arg("--round", "1");
    let updates: usize = arg("--updates", "2000").parse().expect("--updates");
    let strip = std::env::args().any(|a| a == "--strip");
    let started = Instant::now();
    let client = Client::try_default().await.expect("kubeconfig");
    let baseline = proc_status_kib("VmRSS:");

    let api: Api<Pod> = Api::namespaced(client, &namespace);
    let (reader, writer) = reflector::store();
    let samples: Arc<Mutex<Vec<(f64, Instant)>>> = Arc::default();
    let recorded = samples.clone();
    let want = format!("{round}:");
    let stream = watcher(api, watcher::Config::default().any_semantic())
        .modify(move |pod: &mut Pod| {
            if strip {
                pod.metadata.managed_fields = None;
                if let Some(a) = pod.metadata.annotations.as_mut() {
                    a.remove("kubectl.kubernetes.io/last-applied-configuration");
                }
            }
        })
        .reflect(writer)
        .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            match stream.try_next().await {
                Ok(Some(pod)) => {
                    let now = unix_nanos();
                    let stamp = pod.metadata.annotations.as_ref().and_then(|a| a.get(SENT));
                    if let Some(sent) = stamp.and_then(|s| s.strip_prefix(&want)) {
                        if let Ok(sent) = sent.parse::<u128>() {
                            let lag = now.saturating_sub(sent) as f64 / 1e6;
                            recorded.lock().unwrap().push((lag, Instant::now()));
                        }
                    }
                }
                Ok(None) => return,
                Err(error) => eprintln!("watch error: {error}"),
            }
        }
    });
    reader.wait_until_ready().await.expect("synced");
    let sync_ms = started.elapsed().as_secs_f64() * 1e3;
    let rss = proc_status_kib("VmRSS:");
    let hwm = proc_status_kib("VmHWM:");
    let cached = reader.len();
    println!(
        "{}",
        serde_json::json!({"event": "synced", "impl": IMPL, "pods": cached, "sync_ms": sync_ms,
                           "baseline_rss_kib": baseline, "rss_kib": rss, "hwm_kib": hwm})
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    while samples.lock().unwrap().len() < updates && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let got = samples.lock().unwrap().clone();
    let mut lags: Vec<f64> = got.iter().map(|(l, _)| *l).collect();
    lags.sort_by(f64::total_cmp);
    let span = match (got.first(), got.last()) {
        (Some(a), Some(b)) => b.1.duration_since(a.1).as_secs_f64(),
        _ => 0.0,
    };
    println!(
        "{}",
        serde_json::json!({"event": "result", "impl": IMPL, "strip": strip, "pods": cached,
            "sync_ms": sync_ms, "baseline_rss_kib": baseline, "rss_kib": rss, "hwm_kib": hwm,
            "updates_seen": lags.len(), "lag_p50_ms": percentile(&lags, 50.0),
            "lag_p99_ms": percentile(&lags, 99.0),
            "updates_per_sec": lags.len() as f64 / span.max(1e-9)})
    );
    std::process::exit(0);
}
