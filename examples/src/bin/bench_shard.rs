//! The server-side sharding benchmark's tools (issue 45 item 4, sharded part), for
//! `scripts/bench-shard.sh`:
//!
//! ```text
//! bench_shard seed   --namespaces 100 --pods 100     # a ReplicaSet and its Pods per namespace
//! bench_shard member --ring R --identity m1 --members 4 --lease-namespace shard-bench [--labels]
//! bench_shard member --unsharded                     # one process caching everything
//! bench_shard rs-prepare --namespaces 40 --replicas 25   # the ReplicaSet run's objects, no pods
//! bench_shard rs-wait    --namespaces 40 --replicas 25   # seconds until they have converged
//! bench_shard rs-scale   --namespaces 40 --replicas 50   # scale them all; seconds to converge
//! ```
//!
//! **Members.** A member is a `ferrokube::manager::Manager` built with `.shard(member)` and a
//! controller of ReplicaSets that owns Pods, added by `Manager::add_sharded_controller` (namespace
//! hashing: a ReplicaSet and its Pods together): the server-side mode when the server filters by
//! `shardSelector`, the label mode otherwise or with `--labels`. The reconciler does nothing: the
//! benchmark measures what sharding saves a member, its cache, its memory and its traffic, not
//! the work. The informers talk to the API server through a TCP proxy inside the process that
//! counts the bytes each way (TLS records and all: what crossed the socket, not a re-encoding);
//! the member's Lease traffic (and, in the label mode, its assigner's) goes around it. Once the
//! member acts on a ring of `--members` members and its caches have held still for `--settle`
//! seconds, it prints one JSON line (and, sharded, stays in the ring until SIGINT, so as not to
//! change the ring the others settle on): the objects it caches, its RSS (VmRSS, VmHWM), the bytes
//! its informers read and wrote, how long it took from start to that point; then it exits.
//!
//! **The ReplicaSet run** times the sample controller (`replicaset --shard-ring`, run by the
//! script as processes) converging ReplicaSets `rsrun` in namespaces `c<index>-rsrun`: every
//! ReplicaSet's `status.replicas` and live pod count at the wanted replicas, polled every 200 ms
//! (so each figure is up to 0.2 s late).
//!
//! Namespaces are named with the index first: the server's hash (FNV-1a, no finaliser) barely
//! moves a name's ring position for a change in its last characters, so names that differ only
//! at the end would crowd onto one member.

use ferrokube_examples::shared::realistic_pod;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ferrokube::controller::{Action, from_fn};
use ferrokube::core::Scope;
use ferrokube::informer::HandlerFns;
use ferrokube::leader::Timings;
use ferrokube::manager::{Manager, ShardedParts};
use ferrokube::shard::ShardKey;
use ferrokube::shard::ShardMember;
use ferrokube::{Api, Client, Config};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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
    /// The ReplicaSet run's namespaces and ReplicaSets at `--replicas`, with no pods.
    RsPrepare(RsRun),
    /// Wait until the ReplicaSet run's objects converge at `--replicas`; print the seconds.
    RsWait(RsRun),
    /// Scale the ReplicaSet run's ReplicaSets to `--replicas`, wait until converged; print the
    /// seconds.
    RsScale(RsRun),
}

#[derive(Args, Debug)]
struct RsRun {
    #[arg(long, default_value_t = 40)]
    namespaces: usize,
    #[arg(long, default_value_t = 25)]
    replicas: i32,
    /// Give up after this many seconds (exit 1).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
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
    /// Shard by the assigner's labels even when the server has shardSelector.
    #[arg(long)]
    labels: bool,
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

/// What a member's current epoch caches.
#[derive(Default)]
struct Counts {
    replicasets: AtomicUsize,
    pods: AtomicUsize,
    /// Members of the ring the current epoch acts on (0: none yet; 1 unsharded).
    ring: AtomicUsize,
    /// Bumped by each cache change, so that "held still" can be told.
    changes: AtomicU64,
}

/// Bytes through the informers' proxy: `read` from the server, `written` to it.
#[derive(Default)]
struct Wire {
    read: AtomicU64,
    written: AtomicU64,
}

/// Copies `from` to `to`, counting into `counter`, until either side closes.
async fn copy_counting(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    counter: &AtomicU64,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// A TCP proxy on loopback to `upstream`, counting the bytes each way into `wire`; its address.
async fn counting_proxy(upstream: SocketAddr, wire: Arc<Wire>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let wire = wire.clone();
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = (inbound.set_nodelay(true), outbound.set_nodelay(true));
                let (from_client, to_client) = inbound.into_split();
                let (from_server, to_server) = outbound.into_split();
                tokio::join!(
                    copy_counting(from_server, to_client, &wire.read),
                    copy_counting(from_client, to_server, &wire.written),
                );
            });
        }
    });
    Ok(addr)
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

/// One epoch's controller (ReplicaSets owning Pods, a reconciler that does nothing), built from
/// the manager's parts; its caches are counted into `counts` until the epoch stops.
fn epoch_controller(
    parts: &ShardedParts,
    members: usize,
    counts: &Arc<Counts>,
) -> (
    ferrokube::controller::Controller<ReplicaSet>,
    impl ferrokube::controller::Reconciler<ReplicaSet> + use<>,
) {
    let scope = Scope::all().labels(&format!("{LABEL}=yes"));
    // The informers the controller runs (the same scope, narrowed as the controller narrows it,
    // on the epoch's factory): counted here.
    let cached = parts.scope(scope.clone());
    let pods = parts.factory().informer_for::<Pod>(&(), &cached, |b| b);
    let replicasets = parts
        .factory()
        .informer_for::<ReplicaSet>(&(), &cached, |b| b);
    let controller = parts
        .controller::<ReplicaSet>(scope.clone())
        .name("bench-shard")
        .owns::<Pod>(scope);
    let changed = counts.clone();
    let _ = pods.add_event_handler(
        HandlerFns::<Pod>::new()
            .on_add({
                let changed = changed.clone();
                move |_, _| {
                    changed.changes.fetch_add(1, Ordering::Relaxed);
                }
            })
            .on_update(move |_, _| {
                changed.changes.fetch_add(1, Ordering::Relaxed);
            }),
    );
    // The label mode's ring is the assigner's: taken as complete once acting.
    let ring = parts.epoch().map_or(1, |epoch| {
        epoch.adopted().map_or(members, |adopted| adopted.len())
    });
    let stopped = parts.epoch().map(|epoch| epoch.stopped());
    let counts = counts.clone();
    counts.ring.store(0, Ordering::SeqCst);
    tokio::spawn(async move {
        let watching = async {
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
        };
        match stopped {
            Some(stopped) => {
                tokio::select! {
                    () = stopped => {}
                    () = watching => {}
                }
            }
            None => watching.await,
        }
    });
    let reconcile =
        |_: Arc<ReplicaSet>, _| async { Ok::<_, std::convert::Infallible>(Action::await_change()) };
    (controller, from_fn(reconcile))
}

async fn member(args: Member) {
    let started = Instant::now();
    let client = client();
    // The informers' client goes through the counting proxy; everything else goes direct.
    let wire = Arc::new(Wire::default());
    let mut config = Config::infer().expect("a kubeconfig (KUBECONFIG)");
    config.qps = Some(200.0);
    config.burst = 400;
    let upstream: SocketAddr = {
        let authority = config
            .cluster_url
            .authority()
            .expect("the server's URL has a host")
            .as_str()
            .to_string();
        tokio::net::lookup_host(authority)
            .await
            .expect("the server's address")
            .next()
            .expect("an address")
    };
    let proxy = counting_proxy(upstream, wire.clone())
        .await
        .expect("the counting proxy");
    let scheme = config
        .cluster_url
        .scheme_str()
        .unwrap_or("https")
        .to_string();
    config.cluster_url = format!("{scheme}://{proxy}")
        .parse()
        .expect("the proxy's URL");
    // The certificate names the server's address, not the proxy's port: only the port changed.
    let informer_client = Client::new(config).expect("the informers' client");
    let counts = Arc::new(Counts::default());
    let mut builder = Manager::builder(client.clone()).informer_client(informer_client);
    let mode = if args.unsharded {
        "unsharded"
    } else {
        let member = ShardMember::builder(client.clone(), &args.lease_namespace, &args.ring)
            .identity(&args.identity)
            .timings(Timings {
                lease_duration: Duration::from_secs(6),
                renew_deadline: Duration::from_secs(4),
                retry_period: Duration::from_secs(1),
            })
            .server_side(!args.labels)
            .build()
            .expect("member");
        builder = builder.shard(member);
        let probe: Api<ReplicaSet> = Api::all(client.clone());
        if !args.labels && probe.supports_shard_selector().await.unwrap_or(false) {
            "server-side"
        } else {
            "labels"
        }
    };
    let mut manager = builder.build().expect("manager");
    let members = args.members;
    let make_counts = counts.clone();
    manager.add_sharded_controller(ShardKey::Namespace, move |parts: &ShardedParts| {
        epoch_controller(parts, members, &make_counts)
    });
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let work = tokio::spawn(manager.run_until(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
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
        "informer_wire_bytes_read": wire.read.load(Ordering::Relaxed),
        "informer_wire_bytes_written": wire.written.load(Ordering::Relaxed),
        "rss_kib": proc_kib("VmRSS:"),
        "hwm_kib": proc_kib("VmHWM:"),
        "seconds_to_settled": started.elapsed().as_secs_f64() - args.settle as f64,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
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

const RS_LABEL: &str = "ferrokube.bench/rsrun";

fn rs_namespace(i: usize) -> String {
    format!("c{i:03}-rsrun")
}

/// Namespaces and ReplicaSets of the ReplicaSet run at `replicas`, every pod of theirs deleted.
async fn rs_prepare(args: RsRun) {
    let client = client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for i in 0..args.namespaces {
        let ns = rs_namespace(i);
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace");
        let _ = namespaces.create(&PostParams::default(), &namespace).await;
        let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
        // A fresh ReplicaSet each time: no owner label, status or expectations from a run before.
        let _ = replicasets.delete("rsrun", &DeleteParams::default()).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let _ = pods
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
    }
    // Unscheduled pods go at once; the ReplicaSets too (no finalizers without a garbage collector).
    let every = ListParams::default().labels(&format!("{RS_LABEL}=yes"));
    loop {
        let pods = Api::<Pod>::all(client.clone()).list(&every).await;
        let sets = Api::<ReplicaSet>::all(client.clone()).list(&every).await;
        if pods.is_ok_and(|p| p.items.is_empty()) && sets.is_ok_and(|s| s.items.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for i in 0..args.namespaces {
        let ns = rs_namespace(i);
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "rsrun", "labels": {RS_LABEL: "yes"}},
            "spec": {
                "replicas": args.replicas,
                "selector": {"matchLabels": {"app": "rsrun", RS_LABEL: "yes"}},
                "template": {
                    "metadata": {"labels": {"app": "rsrun", RS_LABEL: "yes"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
                }
            }
        }))
        .expect("a ReplicaSet");
        Api::<ReplicaSet>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &rs)
            .await
            .expect("create the ReplicaSet");
    }
}

/// Whether every ReplicaSet of the run has `replicas` in its status and in live pods.
async fn rs_converged(client: &Client, args: &RsRun) -> bool {
    let every = ListParams::default().labels(&format!("{RS_LABEL}=yes"));
    let (Ok(pods), Ok(sets)) = (
        Api::<Pod>::all(client.clone()).list(&every).await,
        Api::<ReplicaSet>::all(client.clone()).list(&every).await,
    ) else {
        return false;
    };
    let live = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    sets.items.len() == args.namespaces
        && live == args.namespaces * args.replicas as usize
        && sets.items.iter().all(|rs| {
            rs.spec.replicas == Some(args.replicas)
                && rs
                    .status
                    .as_ref()
                    .is_some_and(|s| s.replicas == args.replicas)
        })
}

/// Seconds from `since` until converged; exits 1 past the timeout.
async fn rs_wait_from(client: &Client, args: &RsRun, since: Instant) -> f64 {
    loop {
        if rs_converged(client, args).await {
            return since.elapsed().as_secs_f64();
        }
        if since.elapsed() > Duration::from_secs(args.timeout) {
            eprintln!("not converged within {} s", args.timeout);
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn rs_scale(args: RsRun) {
    let client = client();
    let since = Instant::now();
    for i in 0..args.namespaces {
        Api::<ReplicaSet>::namespaced(client.clone(), &rs_namespace(i))
            .patch(
                "rsrun",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": args.replicas}})),
            )
            .await
            .expect("scale");
    }
    println!("{}", rs_wait_from(&client, &args, since).await);
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
        Tool::RsPrepare(args) => rs_prepare(args).await,
        Tool::RsWait(args) => {
            let client = client();
            println!("{}", rs_wait_from(&client, &args, Instant::now()).await);
        }
        Tool::RsScale(args) => rs_scale(args).await,
    }
}
