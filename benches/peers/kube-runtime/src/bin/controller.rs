//! The kube-rs side of ferrokube's controller benchmark (examples/src/bin/bench_controller.rs,
//! protocol in benches/peers/CONTROLLER.md): kube-runtime 5.0's `Controller` over the Pods of one
//! namespace, with a reconcile that does no I/O, driven by commands on stdin and answering one JSON
//! line per command on stdout.
//!
//! ```text
//! kube-rs-controller-peer --namespace bench --objects 10000 [--concurrency 16]
//! ```
//!
//! The controller is what `Controller::new(api, watcher::Config::default())` builds, spelled out
//! with `Controller::for_stream` (feature `unstable-runtime-stream-control`) so that one step can be
//! added: `WatchStreamExt::modify` stamps each written object with `ferrokube.bench/arrived` (unix
//! nanos) as its watch event comes off the wire, before the reflector's store and the scheduler,
//! the same point where ferrokube's side stamps it (its informer's transform).
//!
//! Settings: `watcher::Config::default()` (what `Controller::new` is documented with);
//! `controller::Config::concurrency(N)` when `--concurrency` is above 0 (0 is kube-runtime's
//! default, unbounded). kube-rs has no client-side rate limiter.
//!
//! The reconcile records, first thing, the time it started against the `ferrokube.bench/sent`
//! annotation (`<phase>:<unix nanos>`, stamped by the driver right before each PATCH), then returns
//! `Action::requeue(0)` while a `spin` command runs and `Action::await_change()` otherwise. The
//! recording code is the same as ferrokube's side, line for line in what it does; it also records
//! the time since `ferrokube.bench/arrived`.

use std::convert::Infallible;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube_client::{Api, Client};
use kube_runtime::controller::{self, Action, Controller};
use kube_runtime::reflector::{self, reflector};
use kube_runtime::{watcher, WatchStreamExt};

const SENT: &str = "ferrokube.bench/sent";
const ARRIVED: &str = "ferrokube.bench/arrived";
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

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e6
}

/// The reconciles of the phase being measured: which objects (by the index in their name) were
/// reconciled with the phase's stamp, and how long after their write.
struct Phase {
    id: String,
    seen: Vec<bool>,
    distinct: usize,
    lags_ns: Vec<u64>,
    event_lags_ns: Vec<u64>,
    first_sent: u64,
    first_start: u64,
    last_start: u64,
}

impl Phase {
    fn new(id: &str, objects: usize) -> Phase {
        Phase {
            id: id.to_string(),
            seen: vec![false; objects],
            distinct: 0,
            lags_ns: Vec::with_capacity(objects),
            event_lags_ns: Vec::with_capacity(objects),
            first_sent: u64::MAX,
            first_start: u64::MAX,
            last_start: 0,
        }
    }
}

struct Recorder {
    phase: Mutex<Phase>,
    /// Every reconcile since the start.
    total: AtomicU64,
    /// The phase has all its objects: reconciles no longer take the lock.
    complete: AtomicBool,
    /// Reconciles ask to be run again at once.
    spin: AtomicBool,
    objects: usize,
}

impl Recorder {
    /// Called first thing in every reconcile; says whether to requeue at once.
    fn record(&self, name: &str, stamp: Option<&str>, arrived: Option<&str>) -> bool {
        let now = unix_nanos();
        self.total.fetch_add(1, Ordering::Relaxed);
        if !self.complete.load(Ordering::Relaxed) {
            let index = name
                .rsplit('-')
                .next()
                .and_then(|i| i.parse::<usize>().ok());
            let (phase, sent) = match stamp.and_then(|s| s.split_once(':')) {
                Some((phase, sent)) => (phase, sent.parse::<u64>().ok()),
                None => ("", None),
            };
            let mut p = self.phase.lock().expect("recorder lock");
            if let Some(i) = index.filter(|&i| i < p.seen.len()) {
                if (p.id == "*" || p.id == phase) && !p.seen[i] {
                    p.seen[i] = true;
                    p.distinct += 1;
                    if let Some(sent) = sent.filter(|_| p.id != "*") {
                        p.lags_ns.push(now.saturating_sub(sent));
                        p.first_sent = p.first_sent.min(sent);
                        if let Some(arrived) = arrived.and_then(|a| a.parse::<u64>().ok()) {
                            p.event_lags_ns.push(now.saturating_sub(arrived));
                        }
                    }
                    p.first_start = p.first_start.min(now);
                    p.last_start = now;
                    if p.distinct == p.seen.len() {
                        self.complete.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        self.spin.load(Ordering::Relaxed)
    }

    fn arm(&self, id: &str) {
        *self.phase.lock().expect("recorder lock") = Phase::new(id, self.objects);
        self.complete.store(false, Ordering::Relaxed);
    }

    /// Waits until every object was reconciled in this phase, or `timeout`.
    async fn wait_complete(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.complete.load(Ordering::Relaxed) {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        true
    }

    fn summary(&self) -> serde_json::Value {
        let p = self.phase.lock().expect("recorder lock");
        let mut lags = p.lags_ns.clone();
        lags.sort_unstable();
        let mut event_lags = p.event_lags_ns.clone();
        event_lags.sort_unstable();
        let sent_to_last_ms = if p.first_sent == u64::MAX {
            f64::NAN
        } else {
            p.last_start.saturating_sub(p.first_sent) as f64 / 1e6
        };
        let first_to_last_ms = p.last_start.saturating_sub(p.first_start) as f64 / 1e6;
        serde_json::json!({
            "phase": p.id, "reconciled": p.distinct, "lags": lags.len(),
            "lag_p50_ms": percentile(&lags, 50.0), "lag_p99_ms": percentile(&lags, 99.0),
            "lag_max_ms": percentile(&lags, 100.0),
            "event_lags": event_lags.len(),
            "event_lag_p50_ms": percentile(&event_lags, 50.0),
            "event_lag_p99_ms": percentile(&event_lags, 99.0),
            "event_lag_max_ms": percentile(&event_lags, 100.0),
            "sent_to_last_ms": sent_to_last_ms, "first_to_last_ms": first_to_last_ms,
            "reconciles_per_sec": p.distinct as f64 / (sent_to_last_ms / 1e3),
        })
    }
}

fn say(value: serde_json::Value) {
    println!("{value}");
}

#[tokio::main]
async fn main() {
    let started = Instant::now();
    let namespace = arg("--namespace", "bench");
    let objects: usize = arg("--objects", "10000").parse().expect("--objects");
    let concurrency: u16 = arg("--concurrency", "16").parse().expect("--concurrency");
    let client = Client::try_default().await.expect("kubeconfig");
    let recorder = Arc::new(Recorder {
        phase: Mutex::new(Phase::new("*", objects)),
        total: AtomicU64::new(0),
        complete: AtomicBool::new(false),
        spin: AtomicBool::new(false),
        objects,
    });

    let api: Api<Pod> = Api::namespaced(client, &namespace);
    let (reader, writer) = reflector::store();
    let stamped = watcher(api, watcher::Config::default()).modify(|pod: &mut Pod| {
        if let Some(annotations) = pod.metadata.annotations.as_mut() {
            if annotations.contains_key(SENT) {
                annotations.insert(ARRIVED.to_string(), unix_nanos().to_string());
            }
        }
    });
    let trigger = reflector(writer, stamped).applied_objects();
    let controller = Controller::for_stream(trigger, reader)
        .with_config(controller::Config::default().concurrency(concurrency));
    let reconcile = |pod: Arc<Pod>, recorder: Arc<Recorder>| async move {
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let annotation = |key| {
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        let spin = recorder.record(name, annotation(SENT), annotation(ARRIVED));
        if spin {
            Ok::<_, Infallible>(Action::requeue(Duration::ZERO))
        } else {
            Ok(Action::await_change())
        }
    };
    let error_policy = |_: Arc<Pod>, _: &Infallible, _: Arc<Recorder>| Action::await_change();
    let run = controller.run(reconcile, error_policy, recorder.clone());
    tokio::spawn(run.for_each(|_| async {}));

    // The commands come from a plain thread (stdin is blocking) through a channel.
    let (commands, mut next) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if commands.send(line).is_err() {
                return;
            }
        }
    });

    let initial = recorder.wait_complete(Duration::from_secs(300)).await;
    let initial_ms = started.elapsed().as_secs_f64() * 1e3;
    say(
        serde_json::json!({"event": "initial", "impl": IMPL, "complete": initial,
        "initial_ms": initial_ms, "rss_kib": proc_status_kib("VmRSS:"),
        "hwm_kib": proc_status_kib("VmHWM:"),
        "total_reconciles": recorder.total.load(Ordering::Relaxed)}),
    );

    while let Some(line) = next.recv().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["phase", id, timeout_s] => {
                let timeout = Duration::from_secs(timeout_s.parse().expect("timeout"));
                let before = recorder.total.load(Ordering::Relaxed);
                recorder.arm(id);
                say(serde_json::json!({"event": "armed", "phase": id}));
                let complete = recorder.wait_complete(timeout).await;
                let mut result = recorder.summary();
                result["event"] = "phase".into();
                result["impl"] = IMPL.into();
                result["complete"] = complete.into();
                result["total_reconciles"] =
                    (recorder.total.load(Ordering::Relaxed) - before).into();
                say(result);
            }
            ["spin", id, warmup_ms, window_ms] => {
                let warmup = Duration::from_millis(warmup_ms.parse().expect("warmup"));
                let window = Duration::from_millis(window_ms.parse().expect("window"));
                recorder.spin.store(true, Ordering::Relaxed);
                recorder.arm(id);
                say(serde_json::json!({"event": "armed", "phase": id}));
                let complete = recorder.wait_complete(Duration::from_secs(120)).await;
                tokio::time::sleep(warmup).await;
                let (from, at) = (recorder.total.load(Ordering::Relaxed), Instant::now());
                tokio::time::sleep(window).await;
                let counted = recorder.total.load(Ordering::Relaxed) - from;
                let seconds = at.elapsed().as_secs_f64();
                recorder.spin.store(false, Ordering::Relaxed);
                // Let the keys in flight settle before the next command.
                tokio::time::sleep(Duration::from_millis(500)).await;
                say(
                    serde_json::json!({"event": "spin", "impl": IMPL, "phase": id,
                    "complete": complete, "reconciles": counted, "window_s": seconds,
                    "reconciles_per_sec": counted as f64 / seconds}),
                );
            }
            ["quit"] => {
                say(serde_json::json!({"event": "final", "impl": IMPL,
                    "rss_kib": proc_status_kib("VmRSS:"), "hwm_kib": proc_status_kib("VmHWM:"),
                    "total_reconciles": recorder.total.load(Ordering::Relaxed)}));
                std::process::exit(0);
            }
            _ => eprintln!("unknown command {line:?}"),
        }
    }
}
