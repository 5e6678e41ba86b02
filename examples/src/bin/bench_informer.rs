//! The informer benchmark's three tools, for `scripts/bench-informer-peers.sh` (which runs this
//! side by side with the client-go and kube-rs peers in `benches/peers/`):
//!
//! ```text
//! bench_informer seed   --namespace bench --count 10000        # make realistic Pods (idempotent)
//! bench_informer run    --namespace bench --round 3 --updates 2000 [--strip] [--compact] [--streaming]
//! bench_informer update --namespace bench --round 3 --count 2000               # the load
//! ```
//!
//! `run` follows the protocol every peer follows (benches/peers/INFORMER.md): read RSS, start an
//! informer on the namespace's Pods, wait until synced, print one `synced` JSON line, then time the
//! updates whose `ferrokube.bench/sent` annotation carries this round (`<round>:<unix nanos>`,
//! stamped by `update` right before each PATCH) from that stamp to the handler, and print one
//! `result` JSON line. Without `--strip` the informer keeps `managedFields`
//! (`ManagedFields::Keep`: everything the server sent, as client-go's defaults keep); `--strip` is
//! ferrokube's default, `managedFields` skipped while decoding (never built), plus a transform that
//! drops the last-applied-configuration annotation before the object is stored. `--compact` caches
//! `Compact<Pod>` (typed metadata, the rest as JSON bytes) instead of `Pod`. `--streaming` fills the
//! cache with a streaming list (`ListMode::Streaming`: one watch with `sendInitialEvents=true`,
//! falling back to list + watch if the server refuses it) instead of the default paginated list;
//! the lines then say `"list_mode": "streaming"` and whether the server refused it
//! (`"streaming_refused"`), to be compared with client-go v0.37's WatchListClient.
//!
//! All three use the kubeconfig (`KUBECONFIG`); `run` uses client QPS/burst from `--qps`/`--burst`
//! (default 50/100, the same the peers get). `bench_informer <tool> --help` lists a tool's options.

use ferrokube_examples::shared::realistic_pod;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use ferrokube::api::{ListParams, Patch, PatchParams, PostParams};
use ferrokube::core::{ManagedFields, drop_managed_fields};
use ferrokube::informer::{
    Compact, EventHandler, FirstList, ListMode, ReflectorOptions, SharedIndexInformer,
};
use ferrokube::{Api, Client, Config, ListWatch, Object};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use parking_lot::Mutex;
use serde_json::json;

const SENT: &str = "ferrokube.bench/sent";

fn client(qps: f32, burst: u32) -> Client {
    let mut config = Config::infer().expect("a kubeconfig (KUBECONFIG)");
    config.qps = Some(qps);
    config.burst = burst;
    // Protobuf reads are the default; FERROKUBE_CONTENT_TYPE=json measures the JSON-only client.
    if std::env::var("FERROKUBE_CONTENT_TYPE").is_ok_and(|v| v.eq_ignore_ascii_case("json")) {
        config.content_type = ferrokube::config::ContentType::Json;
    }
    // gzip is asked for by default (client-go's default too); FERROKUBE_COMPRESSION=off measures
    // the client without it (`Config::disable_compression`).
    config.disable_compression = !compression();
    Client::new(config).expect("client")
}

/// Whether the client asks for gzip (FERROKUBE_COMPRESSION, default on).
fn compression() -> bool {
    !std::env::var("FERROKUBE_COMPRESSION").is_ok_and(|v| v.eq_ignore_ascii_case("off"))
}

/// The informer benchmark's tools (scripts/bench-informer-peers.sh; protocol in
/// benches/peers/INFORMER.md). All use the kubeconfig (KUBECONFIG).
#[derive(Parser, Debug)]
#[command(name = "bench_informer", args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    tool: Tool,
}

#[derive(Subcommand, Debug)]
enum Tool {
    /// Make realistic Pods pod-00000 … (idempotent).
    Seed(SeedArgs),
    /// The load: patch Pods, each stamped with the round and the time right before its PATCH.
    Update(UpdateArgs),
    /// The measured side: an informer on the namespace's Pods, timing the round's updates.
    Run(RunArgs),
}

#[derive(Args, Debug)]
struct SeedArgs {
    /// The Pods' namespace.
    #[arg(long, value_name = "NS", default_value = "bench")]
    namespace: String,
    /// Pods to have.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    count: u64,
    /// Creates in flight.
    #[arg(long, value_name = "N", default_value_t = 32)]
    concurrency: usize,
}

#[derive(Args, Debug)]
struct UpdateArgs {
    /// The Pods' namespace.
    #[arg(long, value_name = "NS", default_value = "bench")]
    namespace: String,
    /// The round stamped into each update.
    #[arg(long, value_name = "N", default_value_t = 1)]
    round: u64,
    /// Updates to send.
    #[arg(long, value_name = "N", default_value_t = 2_000)]
    count: u64,
    /// Pods to update, round robin.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pods: u64,
    /// Patches in flight.
    #[arg(long, value_name = "N", default_value_t = 16)]
    concurrency: usize,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The Pods' namespace.
    #[arg(long, value_name = "NS", default_value = "bench")]
    namespace: String,
    /// The round whose updates are timed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    round: u64,
    /// Updates to wait for.
    #[arg(long, value_name = "N", default_value_t = 2_000)]
    updates: usize,
    /// Drop managedFields and the last-applied-configuration annotation before storing.
    #[arg(long)]
    strip: bool,
    /// Cache `Compact<Pod>` (typed metadata, the rest as JSON bytes) instead of `Pod`.
    #[arg(long)]
    compact: bool,
    /// Fill the cache with a streaming list (`sendInitialEvents`) instead of list + watch.
    #[arg(long)]
    streaming: bool,
    /// Objects in the first list page (the reflector's `page_size`; 0: one unpaginated list).
    #[arg(long, value_name = "N", default_value_t = 500)]
    page_size: u32,
    /// The largest list page: later pages double up to it (the reflector's `max_page_size`;
    /// 500 with the default `--page-size`: pages of one size, the reflector before 2026-11-29).
    #[arg(long, value_name = "N", default_value_t = ferrokube::informer::DEFAULT_MAX_PAGE_SIZE)]
    max_page_size: u32,
    /// The first list from the server's cache (`resourceVersion=0`, client-go's list) instead of
    /// a consistent one (our default).
    #[arg(long)]
    from_cache: bool,
    /// Client requests per second.
    #[arg(long, value_name = "Q", default_value_t = 50.0)]
    qps: f32,
    /// Client burst.
    #[arg(long, value_name = "B", default_value_t = 100)]
    burst: u32,
}

fn main() {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match &cli.tool {
        Tool::Seed(args) => runtime.block_on(seed(args)),
        Tool::Update(args) => runtime.block_on(update(args)),
        Tool::Run(args) => runtime.block_on(run(args)),
    }
}

/// Creates Pods `pod-00000 … pod-<count-1>` that do not exist yet, `--concurrency` at a time.
async fn seed(args: &SeedArgs) {
    let namespace = &args.namespace;
    let count = args.count;
    let concurrency = args.concurrency;
    let client = client(5_000.0, 10_000);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get(namespace).await.is_err() {
        let object: Namespace =
            serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("namespace");
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .expect("create namespace");
    }
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let existing: std::collections::HashSet<String> = pods
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let missing: Vec<u64> = (0..count)
        .filter(|i| !existing.contains(&format!("pod-{i:05}")))
        .collect();
    let started = Instant::now();
    let created = missing.len();
    realistic_pod::create_all(&pods, missing, concurrency).await;
    eprintln!(
        "[seed] {created} pods created in {:.1} s ({} existed)",
        started.elapsed().as_secs_f64(),
        existing.len()
    );
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Patches `--count` Pods (round robin over `--pods`), each stamped with this round and the time
/// right before its PATCH is sent.
async fn update(args: &UpdateArgs) {
    let namespace = &args.namespace;
    let round = args.round;
    let count = args.count;
    let pods_total = args.pods;
    let concurrency = args.concurrency;
    let pods: Api<Pod> = Api::namespaced(client(5_000.0, 10_000), namespace);
    let started = Instant::now();
    futures_util::stream::iter(0..count)
        .for_each_concurrent(concurrency, |n| {
            let pods = pods.clone();
            async move {
                let name = format!("pod-{:05}", (n * 7 + round * 13) % pods_total);
                let stamp = format!("{round}:{}", unix_nanos());
                let patch = json!({"metadata": {"annotations": {SENT: stamp}}});
                pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap_or_else(|e| panic!("patch {name}: {e}"));
            }
        })
        .await;
    eprintln!(
        "[update] {count} patches in {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// KiB from a `/proc/self/status` line such as `VmRSS:  12345 kB`.
fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
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

/// Lags (ms) of this round's stamped updates, and when each arrived.
#[derive(Clone)]
struct LagRecorder {
    round: String,
    lags: Arc<Mutex<Vec<(f64, Instant)>>>,
}

impl LagRecorder {
    fn record(&self, pod: &impl Object) {
        let now = unix_nanos();
        let Some(stamp) = pod.meta().annotations.as_ref().and_then(|a| a.get(SENT)) else {
            return;
        };
        let Some((round, sent)) = stamp.split_once(':') else {
            return;
        };
        if round != self.round {
            return;
        }
        if let Ok(sent) = sent.parse::<u128>() {
            let lag_ms = now.saturating_sub(sent) as f64 / 1e6;
            self.lags.lock().push((lag_ms, Instant::now()));
        }
    }
}

impl<K: Object> EventHandler<K> for LagRecorder {
    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        self.record(&**new);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn run(args: &RunArgs) {
    if args.compact {
        measure::<Compact<Pod>>(args, "ferrokube-compact").await
    } else {
        measure::<Pod>(args, "ferrokube").await
    }
}

/// The measured side, caching Pods as `K` (`Pod`, or `Compact<Pod>` with `--compact`).
async fn measure<K>(args: &RunArgs, name: &str)
where
    K: Object + k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let namespace = &args.namespace;
    let round = args.round;
    let updates = args.updates;
    let strip_fields = args.strip;
    let qps = args.qps;
    let burst = args.burst;
    let started = Instant::now();
    let client = client(qps, burst);
    let baseline_kib = proc_status_kib("VmRSS:");

    let pods: Api<K> = Api::namespaced(client, namespace);
    let mut builder = SharedIndexInformer::builder(ListWatch::new(pods)).name("pods");
    if strip_fields {
        builder = builder.transform(drop_managed_fields);
    }
    let list_mode = if args.streaming {
        ListMode::Streaming
    } else {
        ListMode::ListWatch
    };
    builder = builder.reflector(ReflectorOptions {
        list_mode,
        page_size: if args.page_size == 0 {
            u32::MAX
        } else {
            args.page_size
        },
        max_page_size: args.max_page_size,
        first_list: if args.from_cache {
            FirstList::FromCache
        } else {
            FirstList::Consistent
        },
        managed_fields: if strip_fields {
            ManagedFields::Drop
        } else {
            ManagedFields::Keep
        },
        ..ReflectorOptions::default()
    });
    let list_mode = match list_mode {
        ListMode::Streaming => "streaming",
        ListMode::ListWatch => "list-watch",
    };
    let informer = builder.build();
    let recorder = LagRecorder {
        round: round.to_string(),
        lags: Arc::default(),
    };
    informer
        .add_event_handler(recorder.clone())
        .expect("handler");
    informer.start().expect("start");
    assert!(informer.wait_for_cache_sync().await, "synced");
    let sync_ms = started.elapsed().as_secs_f64() * 1e3;
    let rss_kib = proc_status_kib("VmRSS:");
    let hwm_kib = proc_status_kib("VmHWM:");
    let cached = informer.store().len();
    let streaming_refused = informer.reflector_status().streaming_unsupported();
    println!(
        "{}",
        json!({"event": "synced", "impl": name, "pods": cached, "sync_ms": sync_ms,
               "baseline_rss_kib": baseline_kib, "rss_kib": rss_kib, "hwm_kib": hwm_kib,
               "list_mode": list_mode, "streaming_refused": streaming_refused,
               "page_size": args.page_size, "max_page_size": args.max_page_size,
               "from_cache": args.from_cache})
    );

    let deadline = Instant::now() + Duration::from_secs(180);
    while recorder.lags.lock().len() < updates && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let lags = recorder.lags.lock().clone();
    let mut sorted: Vec<f64> = lags.iter().map(|(lag, _)| *lag).collect();
    sorted.sort_by(f64::total_cmp);
    let span = match (lags.first(), lags.last()) {
        (Some(first), Some(last)) => last.1.duration_since(first.1).as_secs_f64(),
        _ => 0.0,
    };
    let summary: BTreeMap<&str, serde_json::Value> = BTreeMap::from([
        ("event", json!("result")),
        ("impl", json!(name)),
        ("strip", json!(strip_fields)),
        ("pods", json!(cached)),
        ("sync_ms", json!(sync_ms)),
        ("baseline_rss_kib", json!(baseline_kib)),
        ("rss_kib", json!(rss_kib)),
        ("hwm_kib", json!(hwm_kib)),
        ("list_mode", json!(list_mode)),
        ("streaming_refused", json!(streaming_refused)),
        ("gzip", json!(compression())),
        ("updates_seen", json!(sorted.len())),
        ("lag_p50_ms", json!(percentile(&sorted, 50.0))),
        ("lag_p99_ms", json!(percentile(&sorted, 99.0))),
        (
            "updates_per_sec",
            json!(sorted.len() as f64 / span.max(1e-9)),
        ),
    ]);
    println!("{}", json!(summary));
    informer.stop();
}
