//! Read-your-writes benchmark: how long a cached read waits right after the client's own write,
//! ferrokube's `ReadYourWrites` against controller-runtime v0.25's opt-in read-your-writes client,
//! on the same server, in the same run (protocol: benches/peers/READ_YOUR_WRITES.md).
//!
//! ```text
//! benches/peers/controller-runtime-v0.25/build.sh ryw
//! cargo run --release -p ferrokube-examples --bin bench_read_your_writes -- --reps 3
//!     [--objects 100] [--writes 1000] [--warmup 20] [--modes ryw,plain] [--max-wait-ms 3000]
//!     [--impls ferrokube,controller-runtime] [--controller-runtime PATH]
//!     [--kubeconfig FILE] [--out FILE.jsonl]
//! ```
//!
//! The driver (this process) starts the embedded API server (or, with `--kubeconfig`, uses the
//! server that kubeconfig names, e.g. `scripts/kube-apiserver.sh up`'s), makes namespace `ryw`,
//! seeds `--objects` realistic Pods `pod-00000 …` there (those that do not exist yet), then runs
//! each implementation once per repetition and mode, each in a process of its own, the order
//! rotated from one repetition to the next. ferrokube's side is this binary again with
//! `--role ferrokube`; controller-runtime's is
//! `benches/peers/controller-runtime-v0.25/ryw/main.go`. Both print the same two JSON lines:
//!
//! ```text
//!  {"event":"synced", "impl", "mode", "sync_ms", "pods"}
//!  {"event":"result", "impl", "mode", "writes", "fresh", "stale", "errors",
//!   "read_p50_ms", "read_p99_ms", "read_max_ms", "read_mean_ms", "write_p50_ms", "write_p99_ms"}
//! ```
//!
//! In between, `--warmup` then `--writes` iterations, one after the other, each on the next Pod in
//! turn: merge-PATCH the annotation `ferrokube.bench/ryw` = `<run>:<i>` through the client, then at
//! once read that Pod from the cache through the same client. `read` is from the PATCH's return to
//! the read's return; the read is *fresh* if it shows the value just written. Mode `ryw`: the
//! read-your-writes client (ferrokube: `ReadYourWrites::get`, bounded by `--max-wait-ms`;
//! controller-runtime: `client.CacheOptions.EnableReadYourWritesConsistency`, the Get under a
//! context of the same length). Mode `plain`: the plain cached read, which does not wait (ferrokube:
//! the informer's lister; controller-runtime: the default cached client): the baseline, and how
//! often a read right after a write misses it.

use ferrokube_examples::shared::{args, realistic_pod};

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ferrokube::api::{ListParams, Patch, PatchParams, PostParams};
use ferrokube::apiserver::ApiServer;
use ferrokube::controller::ReadYourWrites;
use ferrokube::core::Scope;
use ferrokube::informer::SharedInformerFactory;
use ferrokube::{Api, Client, Config};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const ANNOTATION: &str = "ferrokube.bench/ryw";

#[derive(Parser, Debug)]
#[command(
    name = "bench_read_your_writes",
    about = "Read-your-writes benchmark: ferrokube's ReadYourWrites against controller-runtime's \
             read-your-writes client (benches/peers/READ_YOUR_WRITES.md).",
    args_override_self = true
)]
struct Args {
    /// `driver` runs the benchmark; `ferrokube` is the measured process the driver starts.
    #[arg(long, value_enum, default_value_t = Role::Driver)]
    role: Role,
    /// The Pods' namespace.
    #[arg(long, value_name = "NS", default_value = "ryw")]
    namespace: String,
    /// Pods seeded, written and read in turn.
    #[arg(long, value_name = "N", default_value_t = 100)]
    objects: u64,
    /// Measured write-then-read iterations per run.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    writes: u64,
    /// Iterations before the measured ones.
    #[arg(long, value_name = "N", default_value_t = 20)]
    warmup: u64,
    /// With `--role ferrokube`: `ryw` or `plain`.
    #[arg(long, value_name = "MODE", default_value = "ryw")]
    mode: String,
    /// The driver: which modes to run, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "ryw,plain")]
    modes: String,
    /// How long a read may wait for the cache.
    #[arg(long, value_name = "MS", default_value_t = 3_000)]
    max_wait_ms: u64,
    /// With `--role ferrokube`: the prefix of the written values.
    #[arg(long, value_name = "ID", default_value = "r")]
    run: String,
    /// Repetitions (the order of the implementations rotates).
    #[arg(long, value_name = "N", default_value_t = 3)]
    reps: u64,
    /// Which implementations to run, comma-separated.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "ferrokube,controller-runtime"
    )]
    impls: String,
    /// The controller-runtime probe [default:
    /// $XDG_CACHE_HOME/ferrokube/bin/controller-runtime-v0.25-ryw, ~/.cache without it]
    #[arg(long, value_name = "PATH")]
    controller_runtime: Option<PathBuf>,
    /// Use the server of this kubeconfig instead of starting the embedded one.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Append the raw JSON lines here [default: benches/read-your-writes/results-DATE.jsonl]
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
        Role::Ferrokube => runtime.block_on(measured(&args)),
    }
}

fn percentile_ms(sorted: &[u64], p: f64) -> Value {
    if sorted.is_empty() {
        return Value::Null;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    json!(sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e6)
}

// ------------------------------------------------------------------------------------------------
// The measured side (a subprocess): an informer on the namespace's Pods, written and read.

async fn measured(args: &Args) {
    let started = Instant::now();
    let namespace = args.namespace.as_str();
    let ryw_mode = match args.mode.as_str() {
        "ryw" => true,
        "plain" => false,
        other => panic!("--mode {other}: ryw or plain"),
    };
    let mut config = Config::infer().expect("a kubeconfig (KUBECONFIG)");
    // No client-side rate limit: controller-runtime's side runs with QPS -1.
    config.qps = None;
    let client = Client::new(config).expect("client");
    let scope = Scope::namespace(namespace);
    let factory = SharedInformerFactory::new(client.clone());
    let informer = factory.informer::<Pod>(&scope);
    factory.start().expect("start the informers");
    assert!(factory.wait_for_cache_sync().await, "synced");
    let api: Api<Pod> = Api::namespaced(client, namespace);
    // Only in mode ryw is there a ReadYourWrites (whose Api records the writes); plain mode writes
    // through a plain Api and reads the lister.
    let ryw = ryw_mode.then(|| {
        ReadYourWrites::new(api.clone(), informer.clone(), &scope)
            .max_wait(Duration::from_millis(args.max_wait_ms))
    });
    let lister = informer.lister();
    println!(
        "{}",
        json!({"event": "synced", "impl": "ferrokube", "mode": args.mode,
               "sync_ms": started.elapsed().as_secs_f64() * 1e3, "pods": informer.store().len()})
    );

    let (mut write_ns, mut read_ns) = (Vec::new(), Vec::new());
    let (mut fresh, mut stale, mut errors) = (0u64, 0u64, 0u64);
    for i in 0..args.warmup + args.writes {
        let name = format!("pod-{:05}", i % args.objects);
        let value = format!("{}:{i}", args.run);
        let patch = json!({"metadata": {"annotations": {ANNOTATION: value}}});
        let writer = ryw.as_ref().map_or(&api, ReadYourWrites::api);

        let t0 = Instant::now();
        writer
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch {name}: {e}"));
        let t1 = Instant::now();
        let read: Result<Option<Arc<Pod>>, String> = match &ryw {
            Some(ryw) => ryw
                .get(Some(namespace), &name)
                .await
                .map_err(|e| e.to_string()),
            None => Ok(lister.get(Some(namespace), &name)),
        };
        let t2 = Instant::now();
        if i < args.warmup {
            continue;
        }
        write_ns.push((t1 - t0).as_nanos() as u64);
        read_ns.push((t2 - t1).as_nanos() as u64);
        match read {
            Err(error) => {
                errors += 1;
                eprintln!("read {name} after write {value}: {error}");
            }
            Ok(pod) => {
                let seen = pod.as_ref().and_then(|p| {
                    p.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(ANNOTATION))
                });
                if seen == Some(&value) {
                    fresh += 1;
                } else {
                    stale += 1;
                }
            }
        }
    }
    let mean_ms = read_ns.iter().sum::<u64>() as f64 / read_ns.len().max(1) as f64 / 1e6;
    write_ns.sort_unstable();
    read_ns.sort_unstable();
    println!(
        "{}",
        json!({"event": "result", "impl": "ferrokube", "mode": args.mode,
               "writes": read_ns.len(), "fresh": fresh, "stale": stale, "errors": errors,
               "read_p50_ms": percentile_ms(&read_ns, 50.0),
               "read_p99_ms": percentile_ms(&read_ns, 99.0),
               "read_max_ms": percentile_ms(&read_ns, 100.0), "read_mean_ms": mean_ms,
               "write_p50_ms": percentile_ms(&write_ns, 50.0),
               "write_p99_ms": percentile_ms(&write_ns, 99.0),
               "max_wait_ms": args.max_wait_ms})
    );
    factory.shutdown();
}

// ------------------------------------------------------------------------------------------------
// The driver.

/// Makes the namespace (if missing) and the Pods `pod-00000 …` that do not exist yet.
async fn seed(client: &Client, namespace: &str, objects: u64) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let object: Namespace =
        serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("namespace");
    if let Err(e) = namespaces.create(&PostParams::default(), &object).await
        && !e.is_already_exists()
    {
        panic!("create namespace {namespace}: {e}");
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let existing: HashSet<String> = pods
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let missing: Vec<u64> = (0..objects)
        .filter(|i| !existing.contains(&format!("pod-{i:05}")))
        .collect();
    let created = missing.len();
    realistic_pod::create_all(&pods, missing, 32).await;
    eprintln!("[driver] {created} pods created in {namespace}");
}

/// Runs one implementation in one mode; returns its result line with the synced line's figures.
async fn run_one(name: &str, command: &[String], kubeconfig: &PathBuf, timeout: Duration) -> Value {
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {name} ({}): {e}", command[0]));
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut synced = Value::Null;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("{name}: no result within {timeout:?}"))
            .expect("read the measured process's stdout")
            .unwrap_or_else(|| panic!("{name}: exited before its result"));
        match serde_json::from_str::<Value>(&line) {
            Ok(value) if value["event"] == "synced" => synced = value,
            Ok(mut value) if value["event"] == "result" => {
                let _ = child.wait().await;
                value["sync_ms"] = synced["sync_ms"].clone();
                value["pods"] = synced["pods"].clone();
                return value;
            }
            _ => eprintln!("[{name}] {line}"),
        }
    }
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
    let root = args::repository_root();
    let out = args::results_file(args.out.as_deref(), "read-your-writes");
    let cache = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache")
        });
    let controller_runtime = args
        .controller_runtime
        .clone()
        .unwrap_or_else(|| cache.join("ferrokube/bin/controller-runtime-v0.25-ryw"));
    let mut impls: Vec<String> = args.impls.split(',').map(str::to_string).collect();
    if impls.iter().any(|i| i == "controller-runtime") && !controller_runtime.exists() {
        eprintln!(
            "[driver] no controller-runtime probe at {} (build it: \
             benches/peers/controller-runtime-v0.25/build.sh ryw); running without it",
            controller_runtime.display()
        );
        impls.retain(|i| i != "controller-runtime");
    }
    let modes: Vec<String> = args.modes.split(',').map(str::to_string).collect();

    // The server: the embedded one unless a kubeconfig names another.
    let (kubeconfig, server, _embedded) = match &args.kubeconfig {
        Some(path) => (path.clone(), path.display().to_string(), None),
        None => {
            let server = ApiServer::new().start().await.expect("server starts");
            let dir = root.join("target/bench-read-your-writes");
            std::fs::create_dir_all(&dir).expect("target/bench-read-your-writes");
            let path = dir.join("kubeconfig");
            server.write_kubeconfig(&path).expect("write kubeconfig");
            (path, "embedded".to_string(), Some(server))
        }
    };
    let mut config =
        Config::from_kubeconfig_files(std::slice::from_ref(&kubeconfig), None).expect("kubeconfig");
    config.qps = None;
    let client = Client::new(config).expect("client");
    seed(&client, &args.namespace, args.objects).await;

    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).expect("results folder");
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .expect("results file");
    let me = std::env::current_exe()
        .expect("own path")
        .to_string_lossy()
        .to_string();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Each read waits at most max_wait; a run is bounded by that per iteration, plus a minute.
    let timeout = Duration::from_secs(60)
        + Duration::from_millis(args.max_wait_ms + 1_000) * (args.warmup + args.writes) as u32;
    let mut results = Vec::new();
    for rep in 0..args.reps {
        let mut order = impls.clone();
        order.rotate_left(rep as usize % impls.len().max(1));
        eprintln!("[driver] rep {} order {order:?}", rep + 1);
        for mode in &modes {
            for (position, name) in order.iter().enumerate() {
                let run = format!("{started}r{rep}{mode}{position}");
                let common = [
                    "--namespace".to_string(),
                    args.namespace.clone(),
                    "--objects".into(),
                    args.objects.to_string(),
                    "--writes".into(),
                    args.writes.to_string(),
                    "--warmup".into(),
                    args.warmup.to_string(),
                    "--mode".into(),
                    mode.clone(),
                    "--run".into(),
                    run,
                ];
                let mut command = match name.as_str() {
                    "ferrokube" => vec![
                        me.clone(),
                        "--role".into(),
                        "ferrokube".into(),
                        "--max-wait-ms".into(),
                        args.max_wait_ms.to_string(),
                    ],
                    "controller-runtime" => vec![
                        controller_runtime.to_string_lossy().to_string(),
                        "--max-wait".into(),
                        format!("{}ms", args.max_wait_ms),
                    ],
                    other => panic!("unknown implementation {other}"),
                };
                command.extend(common);
                let mut record = run_one(name, &command, &kubeconfig, timeout).await;
                eprintln!(
                    "[{name}] {mode}: read p50 {:.3} ms p99 {:.3} ms max {:.3} ms; fresh {} stale {} errors {}; write p50 {:.3} ms",
                    record["read_p50_ms"].as_f64().unwrap_or(f64::NAN),
                    record["read_p99_ms"].as_f64().unwrap_or(f64::NAN),
                    record["read_max_ms"].as_f64().unwrap_or(f64::NAN),
                    record["fresh"],
                    record["stale"],
                    record["errors"],
                    record["write_p50_ms"].as_f64().unwrap_or(f64::NAN),
                );
                record["bench_impl"] = json!(name);
                record["rep"] = json!(rep);
                record["position"] = json!(position);
                record["objects"] = json!(args.objects);
                record["warmup"] = json!(args.warmup);
                record["server"] = json!(server);
                record["started_unix"] = json!(started);
                use std::io::Write;
                writeln!(file, "{record}").expect("write results");
                results.push(record);
            }
        }
    }
    eprintln!("[driver] raw results appended to {}", out.display());

    // Medians over the repetitions, one row per implementation and mode.
    let figures = [
        "read_p50_ms",
        "read_p99_ms",
        "read_max_ms",
        "write_p50_ms",
        "fresh",
        "stale",
        "errors",
    ];
    println!(
        "| implementation | mode | {} |",
        figures.join(" (median) | ") + " (median)"
    );
    println!("|---|---|{}", "---|".repeat(figures.len()));
    let mut rows: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for r in &results {
        rows.entry((
            r["bench_impl"].as_str().unwrap_or("").to_string(),
            r["mode"].as_str().unwrap_or("").to_string(),
        ))
        .or_default()
        .push(r);
    }
    for ((name, mode), records) in rows {
        let cells: Vec<String> = figures
            .iter()
            .map(|f| {
                let m = median(records.iter().filter_map(|r| r[*f].as_f64()).collect());
                format!("{m:.3}")
            })
            .collect();
        println!("| {name} | {mode} | {} |", cells.join(" | "));
    }
}
