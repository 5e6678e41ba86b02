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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube_client::api::PostParams;
use ferrokube_client::{Api, Client};
use ferrokube_core::{ApiResource, Scope};
use ferrokube_runtime::controller::{Action, Controller, from_fn};
use ferrokube_runtime::leader::Timings;
use ferrokube_runtime::shard::ranges::{self, Narrowing, ShardKey};
use ferrokube_runtime::shard::{HashRing, ShardMember};
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

/// One member's tasks: its driver (the epochs) and its membership.
struct Running {
    driver: JoinHandle<()>,
    membership: JoinHandle<()>,
}

impl Running {
    /// The process dies: nothing of it runs any more, and its Lease is left as it was.
    fn kill(self) {
        // The membership first: it ends gracefully (releasing the Lease, as a member leaving
        // does) when the driver ends, so the driver must not end first.
        self.membership.abort();
        self.driver.abort();
    }
}

fn start(client: &Client, lease_namespace: &str, name: &str, record: &Arc<Record>) -> Running {
    let member = ShardMember::builder(client.clone(), lease_namespace, RING)
        .identity(name)
        .timings(TIMINGS)
        .build()
        .expect("member");
    let (driver_done, mut driver_stopped) = watch::channel(false);
    let (name, record, run_member) = (name.to_string(), record.clone(), member.clone());
    let driver_name = name.clone();
    let driver = tokio::spawn(async move {
        let make = |epoch: ranges::Epoch| {
            let scope = epoch.scope(Scope::all().labels(&format!("{STORY_LABEL}=shard-selector")));
            let mut controller = Controller::<ConfigMap>::new(epoch.client(), scope)
                .name(&format!("{RING}-{name}"))
                .workers(2);
            if let Some(member) = epoch.label_member() {
                controller = controller.shard(member);
            }
            let narrowing = epoch.narrowing().clone();
            record
                .modes
                .lock()
                .push((name.clone(), matches!(narrowing, Narrowing::Ranges(_))));
            let (record, name) = (record.clone(), name.clone());
            let reconciler = from_fn(move |cm: Arc<ConfigMap>, ctx| {
                let (record, name, narrowing) = (record.clone(), name.clone(), narrowing.clone());
                async move {
                    let key = ctx.key().to_string();
                    let busy = record.enter(&key, &name);
                    if let Narrowing::Ranges(selector) = &narrowing
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
            });
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
    Running { driver, membership }
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
pub async fn shard_selector_story(client: Client, server_side: bool) {
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

    let m1 = start(&client, &lease_namespace, "m1", &record);
    let m2 = start(&client, &lease_namespace, "m2", &record);
    placed(&record, &keys, &["m1", "m2"], server_side).await;

    let m3 = start(&client, &lease_namespace, "m3", &record);
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
    let m4 = start(&client, &lease_namespace, "m4", &record);
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
