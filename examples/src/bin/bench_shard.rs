//! The server-side sharding benchmark's tools (issue 45 item 4, sharded part), for
//! `scripts/bench-shard.sh`:
//!
//! ```text
//! bench_shard seed   --namespaces 100 --pods 100     # a ReplicaSet and its Pods per namespace
//! bench_shard member --ring R --identity m1 --members 4 --lease-namespace shard-bench
//! bench_shard member --unsharded                     # one process caching everything
//! ```
//!
//! A member runs `ferrokube::shard::ranges::run` (the server-side mode when the server filters by
//! `shardSelector`; the label mode otherwise) with a controller of ReplicaSets that owns Pods,
//! both informers narrowed by the epoch (namespace hashing: a ReplicaSet and its Pods together).
//! The reconciler does nothing: the benchmark measures what sharding saves a member, its cache
//! and its memory, not the work. Once the member acts on a ring of `--members` members and its
//! caches have held still for `--settle` seconds, it prints one JSON line (and, sharded, stays in
//! the ring until SIGINT, so as not to change the ring the others settle on): the objects it caches,
//! its RSS (VmRSS, VmHWM), the bytes of the objects its informers delivered (each object
//! re-encoded as JSON: a proxy for what its list and watches carried, not wire bytes), how long
//! it took from start to that point; then it exits.
//!
//! Namespaces are named `b<index>-shard`, the index first: the server's hash (FNV-1a, no
//! finaliser) barely moves a name's ring position for a change in its last characters, so names
//! that differ only at the end would crowd onto one member.

use ferrokube_examples::shared::realistic_pod;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use ferrokube::api::PostParams;
use ferrokube::controller::{Action, Controller, from_fn};
use ferrokube::core::Scope;
use ferrokube::informer::{HandlerFns, SharedInformerFactory};
use ferrokube::leader::Timings;
use ferrokube::shard::ShardMember;
use ferrokube::shard::ranges::{self, ShardKey};
use ferrokube::{Api, ApiResource, Client, Config};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::json;

const LABEL: &str = "ferrokube.bench/shard";

#[derive(Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    tool: Tool,
}

#[derive(Subcommand, Debug)]
enum Tool {
    /// Make the namespaces, a ReplicaSet per namespace and its Pods (idempotent).
    Seed(Seed),
    /// Run one member (or one unsharded process) until it has settled; print its JSON line.
    Member(Member),
}

#[derive(Args, Debug)]
struct Seed {
    #[arg(long, default_value_t = 100)]
    namespaces: usize,
    /// Pods per namespace.
    #[arg(long, default_value_t = 100)]
    pods: u64,
}

#[derive(Args, Debug)]
struct Member {
    #[arg(long, default_value = "bench")]
    ring: String,
    #[arg(long, default_value = "m1")]
    identity: String,
    /// How many members the ring will have: the member reports once it acts on a ring this big.
    #[arg(long, default_value_t = 1)]
    members: usize,
    #[arg(long, default_value = "shard-bench")]
    lease_namespace: String,
    /// One process caching everything, no ring.
    #[arg(long)]
    unsharded: bool,
    /// Seconds the caches must hold still before the member reports.
    #[arg(long, default_value_t = 3)]
    settle: u64,
    /// A label for the line (which run of the script).
    #[arg(long, default_value = "")]
    run: String,
}

fn client() -> Client {
    let mut config = Config::infer().expect("a kubeconfig (KUBECONFIG)");
    config.qps = Some(200.0);
    config.burst = 400;
    Client::new(config).expect("client")
}

fn namespace_name(i: usize) -> String {
    format!("b{i:03}-shard")
}

async fn seed(args: Seed) {
    let client = client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0..args.namespaces {
        let ns = namespace_name(i);
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace");
        let _ = namespaces.create(&PostParams::default(), &namespace).await;
        let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web", "labels": {LABEL: "yes"}},
            "spec": {
                "replicas": args.pods,
                "selector": {"matchLabels": {"app": "web", LABEL: "yes"}},
                "template": {
                    "metadata": {"labels": {"app": "web", LABEL: "yes"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
                }
            }
        }))
        .expect("a ReplicaSet");
        let rs = match replicasets.create(&PostParams::default(), &rs).await {
            Ok(rs) => rs,
            Err(_) => replicasets.get("web").await.expect("the ReplicaSet"),
        };
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        futures_util::stream::iter(0..args.pods)
            .for_each_concurrent(16, |i| {
                let (pods, uid) = (&pods, &uid);
                async move {
                    let mut pod = realistic_pod::pod(&format!("web-{i:04}"), i);
                    pod.metadata
                        .labels
                        .get_or_insert_with(Default::default)
                        .insert(LABEL.to_string(), "yes".to_string());
                    pod.metadata.owner_references = Some(vec![
                        serde_json::from_value(json!({
                            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                            "uid": uid, "controller": true, "blockOwnerDeletion": true
                        }))
                        .expect("an owner reference"),
                    ]);
                    let _ = pods.create(&PostParams::default(), &pod).await;
                }
            })
            .await;
        eprintln!("seeded {ns}");
    }
}

/// What a member's current epoch caches, and what its informers delivered.
#[derive(Default)]
struct Counts {
    replicasets: AtomicUsize,
    pods: AtomicUsize,
    bytes: AtomicU64,
    /// Members of the ring the current epoch acts on (0: none yet; 1 unsharded).
    ring: AtomicUsize,
    /// Bumped by each cache change, so that "held still" can be told.
    changes: AtomicU64,
}

fn proc_kib(field: &str) -> u64 {
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

/// The epoch's controller: ReplicaSets owning Pods, both narrowed, a reconciler that does
/// nothing; its caches counted into `counts` until the epoch stops.
fn epoch_run(
    client: Client,
    scope: Scope,
    label_member: Option<ShardMember>,
    ring: usize,
    counts: Arc<Counts>,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let scope = scope.labels(&format!("{LABEL}=yes"));
    // The informers the controller runs, from a factory shared with the counting below: in the
    // label mode narrowed to the member's label, as the controller narrows them.
    let cached = match &label_member {
        Some(member) => member.scope(scope.clone()),
        None => scope.clone(),
    };
    let factory = Arc::new(SharedInformerFactory::new(client.clone()));
    let pods = factory.informer_for::<Pod>(&(), &cached, |b| b);
    let replicasets = factory.informer_for::<ReplicaSet>(&(), &cached, |b| b);
    let mut controller = Controller::<ReplicaSet>::new(client, scope.clone())
        .name("bench-shard")
        .with_factory(factory)
        .owns::<Pod>(scope.clone());
    if let Some(member) = &label_member {
        controller = controller.shard(member);
    }
    let (on_add, on_update) = (counts.clone(), counts.clone());
    let delivered = |counts: &Counts, pod: &Pod| {
        let size = serde_json::to_vec(pod).map_or(0, |b| b.len());
        counts.bytes.fetch_add(size as u64, Ordering::Relaxed);
        counts.changes.fetch_add(1, Ordering::Relaxed);
    };
    let _ = pods.add_event_handler(
        HandlerFns::<Pod>::new()
            .on_add(move |pod, _| delivered(&on_add, pod))
            .on_update(move |_, pod| delivered(&on_update, pod)),
    );
    let reconcile =
        |_: Arc<ReplicaSet>, _| async { Ok::<_, std::convert::Infallible>(Action::await_change()) };
    async move {
        counts.ring.store(0, Ordering::SeqCst);
        let watching = {
            let counts = counts.clone();
            async move {
                let mut every = tokio::time::interval(Duration::from_millis(200));
                loop {
                    every.tick().await;
                    counts.pods.store(pods.store().len(), Ordering::Relaxed);
                    counts
                        .replicasets
                        .store(replicasets.store().len(), Ordering::Relaxed);
                    if pods.has_synced() && replicasets.has_synced() {
                        counts.ring.store(ring, Ordering::SeqCst);
                    }
                }
            }
        };
        tokio::select! {
            _ = controller.run(from_fn(reconcile), stopped) => {}
            () = watching => {}
        }
    }
}

async fn member(args: Member) {
    let started = Instant::now();
    let client = client();
    let counts = Arc::new(Counts::default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut mode = "unsharded";
    let work = if args.unsharded {
        let counts = counts.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(epoch_run(
            client.clone(),
            Scope::all(),
            None,
            1,
            counts,
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            },
        ))
    } else {
        let member = ShardMember::builder(client.clone(), &args.lease_namespace, &args.ring)
            .identity(&args.identity)
            .timings(Timings {
                lease_duration: Duration::from_secs(6),
                renew_deadline: Duration::from_secs(4),
                retry_period: Duration::from_secs(1),
            })
            .build()
            .expect("member");
        let probe: Api<ReplicaSet> = Api::all(client.clone());
        if probe.supports_shard_selector().await.unwrap_or(false) {
            mode = "server-side";
        } else {
            mode = "labels";
        }
        let counts = counts.clone();
        let members = args.members;
        let mut stopped_driver = stopped.clone();
        let membership = member.clone();
        tokio::spawn(async move {
            let mut stopped_member = stopped_driver.clone();
            let lease = tokio::spawn(async move {
                let _ = membership
                    .run(async move {
                        let _ = stopped_member.wait_for(|s| *s).await;
                    })
                    .await;
            });
            let make = |epoch: ranges::Epoch| {
                // The label mode's ring is the assigner's: taken as complete.
                let ring = epoch.adopted().map_or(members, |adopted| adopted.len());
                epoch_run(
                    epoch.client(),
                    epoch.scope(Scope::all()),
                    epoch.label_member().cloned(),
                    ring,
                    counts.clone(),
                    epoch.stopped(),
                )
            };
            ranges::run(
                &member,
                &ApiResource::of::<ReplicaSet>(),
                ShardKey::Namespace,
                make,
                async move {
                    let _ = stopped_driver.wait_for(|s| *s).await;
                },
            )
            .await;
            let _ = lease.await;
        })
    };
    // Settled: acting on a ring of the expected size, caches synced, nothing changed for
    // `settle` seconds.
    let mut last = (u64::MAX, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let changes = counts.changes.load(Ordering::Relaxed);
        if changes != last.0 {
            last = (changes, Instant::now());
        }
        if counts.ring.load(Ordering::SeqCst) >= args.members.max(1)
            && last.1.elapsed() >= Duration::from_secs(args.settle)
        {
            break;
        }
    }
    let line = json!({
        "run": args.run,
        "who": if args.unsharded { "unsharded".to_string() } else { format!("{}-of-{}", args.identity, args.members) },
        "mode": mode,
        "members": if args.unsharded { 1 } else { args.members },
        "replicasets_cached": counts.replicasets.load(Ordering::Relaxed),
        "pods_cached": counts.pods.load(Ordering::Relaxed),
        "object_bytes_delivered": counts.bytes.load(Ordering::Relaxed),
        "rss_kib": proc_kib("VmRSS:"),
        "hwm_kib": proc_kib("VmHWM:"),
        "seconds_to_settled": started.elapsed().as_secs_f64() - args.settle as f64,
    });
    println!("{line}");
    if !args.unsharded {
        // A member that left would change the ring the others are settling on: it stays until
        // the script has every member's line and ends them all.
        let _ = tokio::signal::ctrl_c().await;
    }
    stop.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), work).await;
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().tool {
        Tool::Seed(args) => seed(args).await,
        Tool::Member(args) => member(args).await,
    }
}
