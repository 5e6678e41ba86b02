//! The sharded runtime's story, shared by the embedded server's test (main.rs)
//! and kube-apiserver's (e2e.rs): members of one ring reconcile ConfigMaps in
//! a dozen namespaces through `shard::ranges::run`, which picks the server-side mode when the
//! server filters by `shardSelector` and the label mode when it does not.
//!
//! 1. m1 and m2 start: every object ends up last reconciled by its owner in the ring {m1, m2}.
//! 2. m3 joins: the same for {m1, m2, m3}.
//! 3. m2 dies (its tasks are aborted; its Lease is left to expire): {m1, m3}, and none of m2's
//!    objects is reconciled by another member before m2's Lease can have expired.
//! 4. m4 joins and m1 dies at once, mid-handover: {m3, m4}.
//!
//! Throughout, no object is ever reconciled by two members at once, and in the server-side mode
//! every reconcile is of an object inside the member's ranges.
//!
//! A member runs either `ranges::run` by hand ([`Driver::Ranges`]) or a [`Manager`] built with
//! `.shard(member)` and the controller added by `add_sharded_controller` ([`Driver::Manager`]),
//! each manager in a runtime of its own on its own thread, so that killing it (dropping that
//! runtime) stops everything of it at once, its Lease's renewals included, as a process dies.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube_client::api::PostParams;
use ferrokube_client::{Api, Client};
use ferrokube_core::{ApiResource, Scope};
use ferrokube_runtime::controller::{Action, Controller, from_fn};
use ferrokube_runtime::leader::Timings;
use ferrokube_runtime::manager::{Manager, ShardedParts};
use ferrokube_runtime::shard::ranges::{self, Narrowing, ShardKey};
use ferrokube_runtime::shard::{HashRing, ShardMember};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const RING: &str = "cms";
const STORY_LABEL: &str = "ferrokube.dev/story";
const PER_NAMESPACE: usize = 3;
/// Short, but not so short that a loaded machine (two cores, several builds) loses a Lease.
const TIMINGS: Timings = Timings {
    lease_duration: Duration::from_millis(3000),
    renew_deadline: Duration::from_millis(2000),
    retry_period: Duration::from_millis(500),
};

/// How each member placed its objects, as the story sees it.
#[derive(Default)]
struct Record {
    /// Key → the member reconciling it right now.
    busy: Mutex<HashMap<String, String>>,
    /// Key → the member that reconciled it last, and when that began.
    last: Mutex<HashMap<String, (String, Instant)>>,
    /// Every reconcile: when it began, by whom, of what.
    log: Mutex<Vec<(Instant, String, String)>>,
    /// Broken promises: overlaps, objects outside a member's ranges.
    violations: Mutex<Vec<String>>,
    /// The narrowing of every epoch started: the mode each member ran in.
    modes: Mutex<Vec<(String, bool)>>,
    /// Every epoch a `ranges::run` member started (by hand): the member, and the ring it adopted.
    adoptions: Mutex<Vec<(String, Option<String>)>>,
}

/// A reconcile in progress; it leaves `busy` however it ends (an aborted member's too).
struct Busy {
    record: Arc<Record>,
    key: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.record.busy.lock().remove(&self.key);
    }
}

impl Record {
    fn enter(self: &Arc<Self>, key: &str, member: &str) -> Busy {
        let now = Instant::now();
        let mut busy = self.busy.lock();
        if let Some(other) = busy.get(key) {
            self.violations.lock().push(format!(
                "{key} reconciled by {member} while {other} was at it"
            ));
        }
        busy.insert(key.to_string(), member.to_string());
        self.last
            .lock()
            .insert(key.to_string(), (member.to_string(), now));
        self.log
            .lock()
            .push((now, member.to_string(), key.to_string()));
        Busy {
            record: self.clone(),
            key: key.to_string(),
        }
    }
}

/// How the members of a story run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `ranges::run` and `ShardMember::run` as tasks, by hand.
    Ranges,
    /// A sharded [`Manager`] with the controller added by `add_sharded_controller`.
    Manager,
}

/// Makes a member's client (a Manager member gets one of its own: its connections live and die
/// with its runtime).
pub type MakeClient = Arc<dyn Fn() -> Client + Send + Sync>;

/// One member's tasks.
enum Running {
    /// Its driver (the epochs) and its membership.
    Ranges {
        driver: JoinHandle<()>,
        membership: JoinHandle<()>,
    },
    /// Its manager's thread, and how to kill it.
    Manager {
        kill: tokio::sync::oneshot::Sender<()>,
        thread: std::thread::JoinHandle<()>,
    },
}

impl Running {
    /// The process dies: nothing of it runs any more, and its Lease is left as it was.
    fn kill(self) {
        match self {
            Running::Ranges { driver, membership } => {
                // The membership first: it ends gracefully (releasing the Lease, as a member
                // leaving does) when the driver ends, so the driver must not end first.
                membership.abort();
                driver.abort();
            }
            Running::Manager { kill, thread } => {
                let _ = kill.send(());
                // The thread drops its runtime at once (no graceful stop): returns promptly.
                let _ = thread.join();
            }
        }
    }
}

/// The story's reconciler for member `name`, of an epoch narrowed as `narrowing` says.
fn reconciler(
    record: &Arc<Record>,
    name: &str,
    narrowing: Option<Narrowing>,
) -> impl ferrokube_runtime::controller::Reconciler<ConfigMap> + use<> {
    if let Some(narrowing) = &narrowing {
        record
            .modes
            .lock()
            .push((name.to_string(), matches!(narrowing, Narrowing::Ranges(_))));
    }
    let (record, name) = (record.clone(), name.to_string());
    from_fn(move |cm: Arc<ConfigMap>, ctx| {
        let (record, name, narrowing) = (record.clone(), name.clone(), narrowing.clone());
        async move {
            let key = ctx.key().to_string();
            let busy = record.enter(&key, &name);
            if let Some(Narrowing::Ranges(selector)) = &narrowing
                && !selector.matches(&cm.metadata)
            {
                record
                    .violations
                    .lock()
                    .push(format!("{name} reconciled {key} outside its ranges"));
            }
            // Widens the window in which an overlap would be caught; nothing waits on it.
            tokio::time::sleep(Duration::from_millis(2)).await;
            drop(busy);
            Ok::<_, ferrokube_client::Error>(Action::await_change())
        }
    })
}

fn story_scope() -> Scope {
    Scope::all().labels(&format!("{STORY_LABEL}=shard-selector"))
}

fn member(client: Client, lease_namespace: &str, name: &str) -> ShardMember {
    ShardMember::builder(client, lease_namespace, RING)
        .identity(name)
        .timings(TIMINGS)
        .build()
        .expect("member")
}

/// A member as a sharded [`Manager`] on a thread and runtime of its own.
fn start_manager(
    client: Client,
    lease_namespace: &str,
    name: &str,
    record: &Arc<Record>,
) -> Running {
    let member = member(client.clone(), lease_namespace, name);
    let (name, record) = (name.to_string(), record.clone());
    let (kill, killed) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a member's runtime");
        // The manager runs as a task; this thread only waits for the kill. Dropping the manager
        // while its runtime still runs would be a graceful stop, not a death: its driver ending
        // lets the membership task release the Lease (as a member leaving does), and peers would
        // take m2's objects at once. Shutting the runtime down first drops every task unpolled.
        let _manager = runtime.spawn(async move {
            let mut manager = Manager::builder(client)
                .shard(member)
                .build()
                .expect("manager");
            let controller_name = format!("{RING}-{name}");
            manager.add_sharded_controller(ShardKey::Namespace, move |parts: &ShardedParts| {
                let narrowing = parts.epoch().map(|epoch| epoch.narrowing().clone());
                let controller = parts
                    .controller::<ConfigMap>(story_scope())
                    .name(&controller_name)
                    .workers(2);
                (controller, reconciler(&record, &name, narrowing))
            });
            let result = manager.run_until(std::future::pending()).await;
            eprintln!("a manager member stopped by itself: {result:?}");
        });
        let _ = killed.blocking_recv();
        // Killed: every task of the member is dropped where it stands.
        runtime.shutdown_background();
    });
    Running::Manager { kill, thread }
}

fn start(client: &Client, lease_namespace: &str, name: &str, record: &Arc<Record>) -> Running {
    let member = member(client.clone(), lease_namespace, name);
    let (driver_done, mut driver_stopped) = watch::channel(false);
    let (name, record, run_member) = (name.to_string(), record.clone(), member.clone());
    let driver_name = name.clone();
    let driver = tokio::spawn(async move {
        let make = |epoch: ranges::Epoch| {
            record
                .adoptions
                .lock()
                .push((name.clone(), epoch.adopted().map(|a| a.text())));
            let mut controller =
                Controller::<ConfigMap>::new(epoch.client(), epoch.scope(story_scope()))
                    .name(&format!("{RING}-{name}"))
                    .workers(2);
            if let Some(member) = epoch.label_member() {
                controller = controller.shard(member);
            }
            let reconciler = reconciler(&record, &name, Some(epoch.narrowing().clone()));
            let stopped = epoch.stopped();
            async move {
                let _ = controller.run(reconciler, stopped).await;
            }
        };
        ranges::run(
            &run_member,
            &ApiResource::of::<ConfigMap>(),
            ShardKey::Namespace,
            make,
            std::future::pending(),
        )
        .await;
        eprintln!("member {driver_name} stopped sharding (shut down, or its membership lost)");
        let _ = driver_done.send(true);
    });
    let membership = tokio::spawn(async move {
        let _ = member
            .run(async move {
                let _ = driver_stopped.wait_for(|stopped| *stopped).await;
            })
            .await;
    });
    Running::Ranges { driver, membership }
}

/// Namespace names for this run such that, in every ring the story passes through, each member
/// owns at least one (so every step moves something in the server-side mode).
fn namespaces(run: &str) -> Vec<String> {
    let rings: [&[&str]; 5] = [
        &["m1", "m2"],
        &["m1", "m2", "m3"],
        &["m1", "m3"],
        &["m1", "m3", "m4"],
        &["m3", "m4"],
    ];
    let mut names: Vec<String> = Vec::new();
    for i in 0..1000 {
        let covered = rings.iter().all(|members| {
            let ring = HashRing::new(members.iter().copied());
            members
                .iter()
                .all(|m| names.iter().any(|ns| ring.owner_of_value(ns) == Some(*m)))
        });
        if covered && names.len() >= 12 {
            break;
        }
        // The index first: FNV-1a (the server's hash, with no finaliser) moves the high bits, and
        // so the ring position, little for a change in the last characters of a name.
        names.push(format!("s{i}-{run}"));
    }
    names
}

/// The member that should own `key` (`namespace/name`) on the ring of `members`.
fn owner(members: &[&str], server_side: bool, key: &str) -> Option<String> {
    let ring = HashRing::new(members.iter().copied());
    let owner = if server_side {
        ring.owner_of_value(key.split('/').next().unwrap_or_default())
    } else {
        ring.owner(key)
    };
    owner.map(str::to_string)
}

/// Waits until every object was last reconciled by its owner on the ring of `members`.
async fn placed(record: &Record, keys: &[String], members: &[&str], server_side: bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let wrong: BTreeMap<&String, (Option<String>, Option<String>)> = {
            let last = record.last.lock();
            keys.iter()
                .filter_map(|key| {
                    let want = owner(members, server_side, key);
                    let got = last.get(key).map(|(m, _)| m.clone());
                    (want != got).then_some((key, (want, got)))
                })
                .collect()
        };
        if wrong.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not placed on {members:?} (key: (want, last reconciled by)): {wrong:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The story (see the module docs). `server_side`: what the server supports, found out by the
/// caller; the members must have found the same.
pub async fn shard_selector_story(make_client: MakeClient, server_side: bool, driver: Driver) {
    let client = make_client();
    let start = |name: &str, record: &Arc<Record>, lease_namespace: &str| match driver {
        Driver::Ranges => start(&client, lease_namespace, name, record),
        Driver::Manager => start_manager(make_client(), lease_namespace, name, record),
    };
    let run = format!("{:06x}", ferrokube_core::random::range_u64(0, 1 << 24));
    let names = namespaces(&run);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut keys = Vec::new();
    for ns in &names {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for i in 0..PER_NAMESPACE {
            let mut cm = ferrokube_testkit::config_map(&format!("cm-{i}"), "v");
            cm.metadata.labels = Some(BTreeMap::from([(
                STORY_LABEL.to_string(),
                "shard-selector".to_string(),
            )]));
            api.create(&PostParams::default(), &cm).await.expect("cm");
            keys.push(format!("{ns}/cm-{i}"));
        }
    }
    let lease_namespace = names[0].clone();
    let record = Arc::new(Record::default());

    let m1 = start("m1", &record, &lease_namespace);
    let m2 = start("m2", &record, &lease_namespace);
    placed(&record, &keys, &["m1", "m2"], server_side).await;

    let m3 = start("m3", &record, &lease_namespace);
    placed(&record, &keys, &["m1", "m2", "m3"], server_side).await;

    // m2 dies. Its objects may go to another member only once its Lease can have expired: its
    // last renewal was at most a retry period before the kill, and a peer counts a lease duration
    // from when it saw that renewal (a poll, a retry period apart, later).
    let m2_keys: Vec<&String> = keys
        .iter()
        .filter(|key| owner(&["m1", "m2", "m3"], server_side, key).as_deref() == Some("m2"))
        .collect();
    let killed = Instant::now();
    m2.kill();
    placed(&record, &keys, &["m1", "m3"], server_side).await;
    let earliest = killed + TIMINGS.lease_duration - TIMINGS.retry_period * 2;
    let early: Vec<String> = record
        .log
        .lock()
        .iter()
        .filter(|(at, member, key)| {
            *at > killed && *at < earliest && member != "m2" && m2_keys.contains(&key)
        })
        .map(|(at, member, key)| format!("{key} by {member} {:?} after the kill", *at - killed))
        .collect();
    assert!(
        early.is_empty(),
        "m2's objects taken before its Lease expired: {early:?}"
    );

    // m4 joins and m1 dies at once, in the middle of the handover to m4.
    let m4 = start("m4", &record, &lease_namespace);
    m1.kill();
    placed(&record, &keys, &["m3", "m4"], server_side).await;

    let violations = record.violations.lock().clone();
    assert!(violations.is_empty(), "{violations:#?}");
    let modes = record.modes.lock().clone();
    assert!(
        !modes.is_empty() && modes.iter().all(|(_, ranges)| *ranges == server_side),
        "every epoch in the mode the server supports (server-side: {server_side}): {modes:?}"
    );
    m3.kill();
    m4.kill();
    for ns in &names {
        let _ = namespaces.delete(ns, &Default::default()).await;
    }
}

/// Cold start: m1 starts, and as soon as its Lease is written (so it may read the Leases before
/// the others have any) m2, m3 and m4 start, all within a fraction of a retry period. Each member
/// must adopt the ring of all four as its first and only ring: no member acts alone first, and
/// nobody's epoch is restarted as the others appear.
pub async fn shard_selector_cold_start_story(make_client: MakeClient) {
    let client = make_client();
    let run = format!("{:06x}", ferrokube_core::random::range_u64(0, 1 << 24));
    let lease_namespace = format!("cold-{run}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(lease_namespace.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace");
    let record = Arc::new(Record::default());
    let leases: Api<Lease> = Api::namespaced(client.clone(), &lease_namespace);
    let m1_lease = member(client.clone(), &lease_namespace, "m1")
        .marks()
        .member_lease("m1");
    let mut running = vec![start(&client, &lease_namespace, "m1", &record)];
    let deadline = Instant::now() + Duration::from_secs(30);
    while leases.get_opt(&m1_lease).await.expect("get").is_none() {
        assert!(Instant::now() < deadline, "m1 never wrote its Lease");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for name in ["m2", "m3", "m4"] {
        running.push(start(&client, &lease_namespace, name, &record));
    }
    let all = "m1,m2,m3,m4";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let adoptions = record.adoptions.lock().clone();
        let settled = ["m1", "m2", "m3", "m4"].iter().all(|m| {
            adoptions
                .iter()
                .any(|(who, ring)| who == m && ring.as_deref() == Some(all))
        });
        if settled {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every member adopted {all}: {adoptions:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let adoptions = record.adoptions.lock().clone();
    for m in ["m1", "m2", "m3", "m4"] {
        let epochs: Vec<&Option<String>> = adoptions
            .iter()
            .filter(|(who, _)| who == m)
            .map(|(_, ring)| ring)
            .collect();
        assert_eq!(
            epochs,
            [&Some(all.to_string())],
            "{m}: one epoch, on the full ring, at a simultaneous start (all: {adoptions:?})"
        );
    }
    for member in running {
        member.kill();
    }
    let _ = namespaces
        .delete(&lease_namespace, &Default::default())
        .await;
}
