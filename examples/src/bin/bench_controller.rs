//! Controller benchmark: ferrokube's `Controller` against kube-runtime 5.0's `Controller` and
//! controller-runtime v0.25's, on the same embedded API server, in the same run (protocol and
//! results: benches/peers/CONTROLLER.md).
//!
//! ```text
//! (cd benches/peers/kube-runtime && CARGO_TARGET_DIR=~/.cache/ferrokube/peer-target \
//!     cargo build --release --bin kube-rs-controller-peer)
//! benches/peers/controller-runtime-v0.25/build.sh controller
//! cargo run --release -p ferrokube-examples --bin bench_controller -- --reps 3
//!     [--objects 10000] [--workers 16] [--rate 1000] [--writers 32]
//!     [--impls ferrokube,ferrokube-compact,kube-rs,controller-runtime,ferrokube-baseline]
//!     [--peer PATH] [--controller-runtime PATH]
//!     [--baseline PATH-OF-AN-OLDER-BUILD] [--out FILE.jsonl]
//! ```
//!
//! The driver (this process) starts the embedded server, seeds `--objects` realistic Pods in
//! namespace `bench`, writes a kubeconfig, then runs each implementation once per repetition, each
//! in a process of its own (so that its peak RSS is its own), the order rotated from one repetition
//! to the next. ferrokube's side is this binary again with `--role ferrokube [--compact]`; the
//! kube-rs side is `benches/peers/kube-runtime/src/bin/controller.rs`, the controller-runtime side
//! `benches/peers/controller-runtime-v0.25/controller/main.go`. All take the same commands on stdin
//! and answer with the same JSON lines on stdout:
//!
//! ```text
//!  (start)                       → {"event":"initial", initial_ms, ...}  every object reconciled once
//!  phase <id> <timeout_s>        → {"event":"armed"} ... {"event":"phase", lags, rate, ...}
//!  spin <id> <warmup_ms> <win_ms>→ {"event":"armed"} ... {"event":"spin", reconciles_per_sec}
//!  quit                          → {"event":"final", hwm_kib}
//! ```
//!
//! After each `armed`, the driver PATCHes every Pod once, stamping the annotation
//! `ferrokube.bench/sent` with `<id>:<unix nanos>` right before the request is sent: as fast as
//! `--writers` concurrent writers go (phase `burst`, and `spin`), or at `--rate` per second
//! (phase `paced`). Each reconcile records `now - sent` first thing.

use ferrokube_examples::shared::{args, realistic_pod};

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use ferrokube::api::{Patch, PatchParams, PostParams};
use ferrokube::apiserver::ApiServer;
use ferrokube::controller::{Action, Context, Controller, Reconciler};
use ferrokube::core::Scope;
use ferrokube::informer::{Compact, SharedInformerFactory};
use ferrokube::{Api, Client, Config, Object};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

const SENT: &str = "ferrokube.bench/sent";
/// Stamped by the measured process itself, `<unix nanos>`, when the watch event carrying a write
/// comes off the wire: ferrokube's primary informer's transform, kube-runtime's `WatchStreamExt::modify`
/// on the watcher stream. Both run as the event is decoded, before the cache and the queue.
const ARRIVED: &str = "ferrokube.bench/arrived";
const NAMESPACE: &str = "bench";

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// KiB from a `/proc/<pid>/status` line such as `VmHWM:  12345 kB`.
fn proc_status_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU seconds of a process, from `/proc/<pid>/stat` (clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // Fields after the command name, which is in parentheses and may hold spaces.
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = fields.get(11)?.parse().ok()?;
            let stime: f64 = fields.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(f64::NAN)
}

fn percentile_ms(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e6
}

/// The command line: the driver's flags, and `--role ferrokube [--compact]` for the measured side.
#[derive(Parser, Debug)]
#[command(
    name = "bench_controller",
    about = "Controller benchmark: ferrokube's Controller against kube-runtime's and \
             controller-runtime's, on the same embedded API server (benches/peers/CONTROLLER.md).",
    args_override_self = true
)]
struct Args {
    /// `driver` runs the benchmark; `ferrokube` is the measured process the driver starts.
    #[arg(long, value_enum, default_value_t = Role::Driver)]
    role: Role,
    /// With `--role ferrokube`: cache `Compact<Pod>` rather than `Pod`.
    #[arg(long)]
    compact: bool,
    /// The namespace of the measured side's objects.
    #[arg(long, value_name = "NS", default_value = NAMESPACE)]
    namespace: String,
    /// Pods seeded and watched.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    objects: u64,
    /// Reconcile workers (kube-rs: concurrency; controller-runtime: MaxConcurrentReconciles).
    #[arg(long, value_name = "N", default_value_t = 16)]
    workers: u64,
    /// Concurrent writers of the `burst` phase and of `spin`.
    #[arg(long, value_name = "N", default_value_t = 32)]
    writers: u64,
    /// Writes per second of the `paced` phase.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    rate: u64,
    /// Repetitions (the order of the implementations rotates).
    #[arg(long, value_name = "N", default_value_t = 3)]
    reps: u64,
    /// Which implementations to run, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "ferrokube,ferrokube-compact,kube-rs,controller-runtime"
    )]
    impls: String,
    /// The kube-rs peer's binary [default:
    /// $XDG_CACHE_HOME/ferrokube/peer-target/release/kube-rs-controller-peer, ~/.cache without it]
    #[arg(long, value_name = "PATH")]
    peer: Option<PathBuf>,
    /// The controller-runtime peer's binary [default:
    /// $XDG_CACHE_HOME/ferrokube/bin/controller-runtime-v0.25-controller, ~/.cache without it]
    #[arg(long, value_name = "PATH")]
    controller_runtime: Option<PathBuf>,
    /// Another build of this benchmark (an older commit's), run as implementation
    /// `ferrokube-baseline` with `--role ferrokube`: before/after comparisons in one run.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
    /// Append the raw JSON lines here [default: benches/controller/results-DATE.jsonl]
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// `--role`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Role {
    Driver,
    Ferrokube,
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match args.role {
        Role::Driver => runtime.block_on(drive(&args)),
        Role::Ferrokube if args.compact => {
            runtime.block_on(measured::<Compact<Pod>>(&args, "ferrokube-compact"))
        }
        Role::Ferrokube => runtime.block_on(measured::<Pod>(&args, "ferrokube")),
    }
}

// ------------------------------------------------------------------------------------------------
// The measured side (a subprocess): ferrokube's Controller with a reconcile that does no I/O.
// The recording code does what the kube-rs peer's does (benches/peers/kube-runtime/src/bin/controller.rs).

/// The reconciles of the phase being measured: which objects (by the index in their name) were
/// reconciled with the phase's stamp, and how long after their write.
struct Phase {
    id: String,
    seen: Vec<bool>,
    distinct: usize,
    lags_ns: Vec<u64>,
    /// `reconcile start − watch event arrival` (the issue's definition of the lag).
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
            if let Some(i) = index.filter(|&i| i < p.seen.len())
                && (p.id == "*" || p.id == phase)
                && !p.seen[i]
            {
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

    fn summary(&self) -> Value {
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
        json!({
            "phase": p.id, "reconciled": p.distinct, "lags": lags.len(),
            "lag_p50_ms": percentile_ms(&lags, 50.0), "lag_p99_ms": percentile_ms(&lags, 99.0),
            "lag_max_ms": percentile_ms(&lags, 100.0),
            "event_lags": event_lags.len(),
            "event_lag_p50_ms": percentile_ms(&event_lags, 50.0),
            "event_lag_p99_ms": percentile_ms(&event_lags, 99.0),
            "event_lag_max_ms": percentile_ms(&event_lags, 100.0),
            "sent_to_last_ms": sent_to_last_ms, "first_to_last_ms": first_to_last_ms,
            "reconciles_per_sec": p.distinct as f64 / (sent_to_last_ms / 1e3),
        })
    }
}

/// The no-I/O reconcile: record, then await a change (or requeue at once while spinning).
struct Bench(Arc<Recorder>);

impl<K: Object> Reconciler<K> for Bench {
    type Error = Infallible;

    async fn reconcile(&self, object: Arc<K>, _: Context) -> Result<Action, Infallible> {
        let meta = object.meta();
        let name = meta.name.as_deref().unwrap_or("");
        let annotation = |key| {
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        let spin = self.0.record(name, annotation(SENT), annotation(ARRIVED));
        if spin {
            Ok(Action::requeue(Duration::ZERO))
        } else {
            Ok(Action::await_change())
        }
    }
}

/// Adds [`ARRIVED`] to an object that carries the driver's [`SENT`] stamp (the objects of the
/// initial list do not, and are left alone).
fn stamp_arrival<K: Object>(mut object: K) -> K {
    if let Some(annotations) = object.meta_mut().annotations.as_mut()
        && annotations.contains_key(SENT)
    {
        annotations.insert(ARRIVED.to_string(), unix_nanos().to_string());
    }
    object
}

fn say(value: Value) {
    println!("{value}");
}

async fn measured<K>(args: &Args, name: &'static str)
where
    K: Object + k8s_openapi::Resource,
{
    let started = Instant::now();
    let namespace = args.namespace.clone();
    let objects = args.objects as usize;
    let workers = args.workers as usize;
    let mut config = Config::infer().expect("a kubeconfig (KUBECONFIG)");
    // No client-side rate limit: kube-rs has none.
    config.qps = None;
    let client = Client::new(config).expect("client");
    let recorder = Arc::new(Recorder {
        phase: Mutex::new(Phase::new("*", objects)),
        total: AtomicU64::new(0),
        complete: AtomicBool::new(false),
        spin: AtomicBool::new(false),
        objects,
    });
    // The primary informer is made first, with the transform that stamps each written object's
    // arrival; the controller then finds it in the factory.
    let scope = Scope::namespace(&namespace);
    let factory = Arc::new(SharedInformerFactory::new(client.clone()));
    factory.informer_with::<K>(&scope, |builder| builder.transform(stamp_arrival::<K>));
    let controller = Controller::<K>::new(client, scope)
        .with_factory(factory)
        .workers(workers);
    let bench = Bench(recorder.clone());
    tokio::spawn(async move {
        if let Err(error) = controller.run(bench, std::future::pending()).await {
            eprintln!("[{name}] controller failed: {error}");
            std::process::exit(1);
        }
    });

    // The commands come from a plain thread (stdin is blocking) through a channel.
    let (commands, mut next) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
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
        json!({"event": "initial", "impl": name, "complete": initial,
        "initial_ms": initial_ms, "rss_kib": proc_status_kib("self", "VmRSS:"),
        "hwm_kib": proc_status_kib("self", "VmHWM:"),
        "total_reconciles": recorder.total.load(Ordering::Relaxed)}),
    );

    while let Some(line) = next.recv().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["phase", id, timeout_s] => {
                let timeout = Duration::from_secs(timeout_s.parse().expect("timeout"));
                let before = recorder.total.load(Ordering::Relaxed);
                recorder.arm(id);
                say(json!({"event": "armed", "phase": id}));
                let complete = recorder.wait_complete(timeout).await;
                let mut result = recorder.summary();
                result["event"] = "phase".into();
                result["impl"] = name.into();
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
                say(json!({"event": "armed", "phase": id}));
                let complete = recorder.wait_complete(Duration::from_secs(120)).await;
                tokio::time::sleep(warmup).await;
                let (from, at) = (recorder.total.load(Ordering::Relaxed), Instant::now());
                tokio::time::sleep(window).await;
                let counted = recorder.total.load(Ordering::Relaxed) - from;
                let seconds = at.elapsed().as_secs_f64();
                recorder.spin.store(false, Ordering::Relaxed);
                // Let the keys in flight settle before the next command.
                tokio::time::sleep(Duration::from_millis(500)).await;
                say(json!({"event": "spin", "impl": name, "phase": id,
                    "complete": complete, "reconciles": counted, "window_s": seconds,
                    "reconciles_per_sec": counted as f64 / seconds}));
            }
            ["quit"] => {
                say(json!({"event": "final", "impl": name,
                    "rss_kib": proc_status_kib("self", "VmRSS:"),
                    "hwm_kib": proc_status_kib("self", "VmHWM:"),
                    "total_reconciles": recorder.total.load(Ordering::Relaxed)}));
                std::process::exit(0);
            }
            _ => eprintln!("unknown command {line:?}"),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The driver: server, seed, subprocesses, load, results.

/// Creates Pods `pod-00000 …` in the benchmark namespace, 32 at a time.
async fn seed(client: &Client, objects: u64) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let started = Instant::now();
    realistic_pod::create_all(&pods, 0..objects, 32).await;
    eprintln!(
        "[driver] seeded {objects} pods in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// PATCHes every Pod once with `<id>:<unix nanos>` in the `SENT` annotation: `writers` at a time,
/// as fast as they go, or paced to `rate` per second overall.
async fn write_all(
    pods: &Api<Pod>,
    id: &str,
    objects: u64,
    writers: u64,
    rate: Option<f64>,
) -> Value {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (pods, id) = (pods.clone(), id.to_string());
        tasks.push(tokio::spawn(async move {
            let mut tick = rate.map(|rate| {
                let mut tick =
                    tokio::time::interval(Duration::from_secs_f64(writers as f64 / rate));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                tick
            });
            let mut took = Vec::new();
            for i in (w..objects).step_by(writers as usize) {
                if let Some(tick) = tick.as_mut() {
                    tick.tick().await;
                }
                let name = format!("pod-{i:05}");
                let sent = unix_nanos();
                let patch = json!({"metadata": {"annotations": {SENT: format!("{id}:{sent}")}}});
                pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap_or_else(|e| panic!("patch {name}: {e}"));
                took.push(unix_nanos().saturating_sub(sent));
            }
            took
        }));
    }
    let mut took = Vec::new();
    for task in tasks {
        took.extend(task.await.expect("writer"));
    }
    let seconds = started.elapsed().as_secs_f64();
    took.sort_unstable();
    json!({"writes": took.len(), "seconds": seconds, "writes_per_sec": took.len() as f64 / seconds,
           "write_p50_ms": percentile_ms(&took, 50.0), "write_p99_ms": percentile_ms(&took, 99.0)})
}

/// One implementation's process: its stdin, and its stdout's lines.
struct Measured {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    name: String,
}

impl Measured {
    async fn send(&mut self, command: &str) {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .expect("write to the measured process");
        self.stdin.flush().await.expect("flush");
    }

    /// The next JSON line with `"event": event`, within `timeout`.
    async fn expect(&mut self, event: &str, timeout: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("{}: no {event:?} line within {timeout:?}", self.name))
                .expect("read the measured process's stdout")
                .unwrap_or_else(|| panic!("{}: exited before {event:?}", self.name));
            match serde_json::from_str::<Value>(&line) {
                Ok(value) if value["event"] == event => return value,
                _ => eprintln!("[{}] {line}", self.name),
            }
        }
    }
}

/// Runs one implementation through every phase; returns its record.
async fn run_one(
    name: &str,
    command: &[String],
    kubeconfig: &Path,
    pods: &Api<Pod>,
    run_id: &str,
    args: &Args,
) -> Value {
    let objects = args.objects;
    let writers = args.writers;
    let rate = args.rate as f64;
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {name} ({}): {e}", command[0]));
    let pid = child.id().expect("pid");
    let stdin = child.stdin.take().expect("stdin");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut measured = Measured {
        child,
        stdin,
        lines,
        name: name.to_string(),
    };
    let mut record = BTreeMap::<String, Value>::new();

    let initial = measured.expect("initial", Duration::from_secs(320)).await;
    eprintln!(
        "[{name}] initial: {:.0} ms",
        initial["initial_ms"].as_f64().unwrap_or(f64::NAN)
    );
    record.insert("initial".into(), initial);

    // (b) as fast as the writers go; (c) paced; then the requeue loop.
    for (phase, pace) in [("burst", None), ("paced", Some(rate))] {
        let id = format!("{run_id}{phase}");
        measured.send(&format!("phase {id} 120")).await;
        measured.expect("armed", Duration::from_secs(10)).await;
        let writes = write_all(pods, &id, objects, writers, pace).await;
        let result = measured.expect("phase", Duration::from_secs(130)).await;
        eprintln!(
            "[{name}] {phase}: {:.0} reconciles/s, lag p50 {:.2} ms p99 {:.2} ms (from the watch event: p50 {:.2} ms p99 {:.2} ms); writes {:.0}/s",
            result["reconciles_per_sec"].as_f64().unwrap_or(f64::NAN),
            result["lag_p50_ms"].as_f64().unwrap_or(f64::NAN),
            result["lag_p99_ms"].as_f64().unwrap_or(f64::NAN),
            result["event_lag_p50_ms"].as_f64().unwrap_or(f64::NAN),
            result["event_lag_p99_ms"].as_f64().unwrap_or(f64::NAN),
            writes["writes_per_sec"].as_f64().unwrap_or(f64::NAN),
        );
        record.insert(phase.into(), result);
        record.insert(format!("{phase}_writes"), writes);
    }
    let id = format!("{run_id}spin");
    measured.send(&format!("spin {id} 1000 5000")).await;
    measured.expect("armed", Duration::from_secs(10)).await;
    let writes = write_all(pods, &id, objects, writers, None).await;
    let spin = measured.expect("spin", Duration::from_secs(150)).await;
    eprintln!(
        "[{name}] spin: {:.0} reconciles/s",
        spin["reconciles_per_sec"].as_f64().unwrap_or(f64::NAN)
    );
    record.insert("spin".into(), spin);
    record.insert("spin_writes".into(), writes);

    let pid_text = pid.to_string();
    record.insert(
        "hwm_kib".into(),
        json!(proc_status_kib(&pid_text, "VmHWM:")),
    );
    record.insert("cpu_s".into(), json!(cpu_seconds(pid)));
    measured.send("quit").await;
    let last = measured.expect("final", Duration::from_secs(10)).await;
    record.insert("final".into(), last);
    let _ = measured.child.wait().await;
    json!(record)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

async fn drive(args: &Args) {
    let reps = args.reps;
    let objects = args.objects;
    let workers = args.workers;
    let root = args::repository_root();
    let out = args::results_file(args.out.as_deref(), "controller");
    let cache = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache")
        });
    let peer = args
        .peer
        .clone()
        .unwrap_or_else(|| cache.join("ferrokube/peer-target/release/kube-rs-controller-peer"));
    let controller_runtime = args
        .controller_runtime
        .clone()
        .unwrap_or_else(|| cache.join("ferrokube/bin/controller-runtime-v0.25-controller"));
    let mut impls: Vec<String> = args.impls.split(',').map(str::to_string).collect();
    if impls.iter().any(|i| i == "kube-rs") && !peer.exists() {
        eprintln!(
            "[driver] no kube-rs peer at {} (build it: cd benches/peers/kube-runtime && \
             CARGO_TARGET_DIR=~/.cache/ferrokube/peer-target cargo build --release --bin \
             kube-rs-controller-peer); running without it",
            peer.display()
        );
        impls.retain(|i| i != "kube-rs");
    }
    if impls.iter().any(|i| i == "controller-runtime") && !controller_runtime.exists() {
        eprintln!(
            "[driver] no controller-runtime peer at {} (build it: \
             benches/peers/controller-runtime-v0.25/build.sh controller); running without it",
            controller_runtime.display()
        );
        impls.retain(|i| i != "controller-runtime");
    }
    let baseline = args
        .baseline
        .as_ref()
        .map(|p| p.to_string_lossy().to_string());
    if impls.iter().any(|i| i == "ferrokube-baseline") && baseline.is_none() {
        eprintln!("[driver] ferrokube-baseline needs --baseline PATH; running without it");
        impls.retain(|i| i != "ferrokube-baseline");
    }
    let me = std::env::current_exe()
        .expect("own path")
        .to_string_lossy()
        .to_string();
    let common = [
        "--namespace".to_string(),
        NAMESPACE.to_string(),
        "--objects".to_string(),
        objects.to_string(),
    ];
    let command = |name: &str| -> Vec<String> {
        let mut command = match name {
            "ferrokube" => vec![me.clone(), "--role".into(), "ferrokube".into()],
            "ferrokube-compact" => vec![
                me.clone(),
                "--role".into(),
                "ferrokube".into(),
                "--compact".into(),
            ],
            "ferrokube-baseline" => vec![
                baseline.clone().unwrap_or_default(),
                "--role".into(),
                "ferrokube".into(),
            ],
            "kube-rs" => vec![peer.to_string_lossy().to_string()],
            "controller-runtime" => vec![controller_runtime.to_string_lossy().to_string()],
            other => panic!("unknown implementation {other}"),
        };
        command.extend(common.iter().cloned());
        command.push(
            if name == "kube-rs" || name == "controller-runtime" {
                "--concurrency"
            } else {
                "--workers"
            }
            .into(),
        );
        command.push(workers.to_string());
        command
    };

    // A watcher that falls this far behind would be closed and relist; the buffer and history
    // are large enough that neither implementation ever is, so both see the same event stream.
    let server = ApiServer::new()
        .history(200_000)
        .watch_buffer(100_000)
        .start()
        .await
        .expect("server starts");
    let dir = root.join("target/bench-controller");
    std::fs::create_dir_all(&dir).expect("target/bench-controller");
    let kubeconfig = dir.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("write kubeconfig");
    let mut config = Config::new(server.url().parse().expect("url"));
    config.qps = None;
    let client = Client::new(config).expect("client");
    seed(&client, objects).await;
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);

    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).expect("results folder");
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .expect("results file");
    let started = unix_nanos() / 1_000_000_000;
    let mut results: Vec<Value> = Vec::new();
    for rep in 0..reps {
        // Rotate the order each repetition: whoever goes first in one goes last in the next.
        let mut order = impls.clone();
        order.rotate_left(rep as usize % impls.len().max(1));
        if rep % 2 == 1 {
            order.reverse();
        }
        eprintln!("[driver] rep {} order {order:?}", rep + 1);
        for (position, name) in order.iter().enumerate() {
            let run_id = format!("r{rep}i{position}");
            let mut record = run_one(name, &command(name), &kubeconfig, &pods, &run_id, args).await;
            record["impl"] = json!(name);
            record["rep"] = json!(rep);
            record["position"] = json!(position);
            record["objects"] = json!(objects);
            record["workers_or_concurrency"] = json!(workers);
            record["rate"] = json!(args.rate);
            record["writers"] = json!(args.writers);
            record["started_unix"] = json!(started);
            use std::io::Write;
            writeln!(file, "{record}").expect("write results");
            results.push(record);
        }
    }
    eprintln!("[driver] raw results appended to {}", out.display());
    print_table(&impls, &results);
}

/// Markdown table of medians over the repetitions.
fn print_table(impls: &[String], results: &[Value]) {
    let rows: &[(&str, &[&str], f64)] = &[
        (
            "start → all 10k reconciled once (ms)",
            &["initial", "initial_ms"],
            1.0,
        ),
        (
            "burst: reconciles/s (first write → last reconcile)",
            &["burst", "reconciles_per_sec"],
            1.0,
        ),
        (
            "burst: driver writes/s",
            &["burst_writes", "writes_per_sec"],
            1.0,
        ),
        ("burst: lag p99 (ms)", &["burst", "lag_p99_ms"], 1.0),
        (
            "requeue loop: reconciles/s",
            &["spin", "reconciles_per_sec"],
            1.0,
        ),
        ("1,000/s: lag p50 (ms)", &["paced", "lag_p50_ms"], 1.0),
        ("1,000/s: lag p99 (ms)", &["paced", "lag_p99_ms"], 1.0),
        (
            "1,000/s: watch event → reconcile p50 (ms)",
            &["paced", "event_lag_p50_ms"],
            1.0,
        ),
        (
            "1,000/s: watch event → reconcile p99 (ms)",
            &["paced", "event_lag_p99_ms"],
            1.0,
        ),
        (
            "1,000/s: write p99 (ms, driver)",
            &["paced_writes", "write_p99_ms"],
            1.0,
        ),
        ("peak RSS VmHWM (MiB)", &["hwm_kib"], 1.0 / 1024.0),
        ("CPU user+sys (s)", &["cpu_s"], 1.0),
    ];
    println!(
        "| figure (median of {} reps) | {} |",
        results.len() / impls.len().max(1),
        impls.join(" | ")
    );
    println!("|---|{}", "---|".repeat(impls.len()));
    for &(label, path, scale) in rows {
        let cells: Vec<String> = impls
            .iter()
            .map(|name| {
                let values = results
                    .iter()
                    .filter(|r| r["impl"] == name.as_str())
                    .filter_map(|r| path.iter().try_fold(r, |v, key| v.get(key)))
                    .filter_map(Value::as_f64)
                    .map(|v| v * scale)
                    .collect();
                format!("{:.1}", median(values))
            })
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
}
