//! The sharding drills of the ReplicaSet sample, shared by `shard.rs` (the embedded API server, in
//! `cargo test`) and `shard_e2e.rs` (the real kube-apiserver, in `scripts/e2e.sh`).
//!
//! Twelve ReplicaSets, three replicas of the sample with `--shard-ring drill`, then:
//!
//! | drill | what is done | what must happen |
//! |---|---|---|
//! | join | a 4th replica starts, some ReplicaSets scale up | it gets a share (about a quarter, moved from the others by handover); everything converges |
//! | kill | SIGKILL one replica, some ReplicaSets scale up | its ReplicaSets move to the others once its Lease expires; everything converges |
//! | freeze | SIGSTOP one replica for `cluster.freeze`, some ReplicaSets scale up | its ReplicaSets move once its Lease expires; woken, it writes nothing and exits 1 |
//! | restart | SIGTERM one replica (it leaves: exit 0), start it again, a ReplicaSet scales down | it gets a share back; everything converges |
//!
//! Then the audit: the pods created and deleted (from the server's audit log, every replica) are
//! exactly what the scaling asked for; the frozen replica wrote nothing once frozen; and in the
//! replicas' sync log no two replicas ever synced one ReplicaSet at the same time (a killed or
//! frozen replica's syncs count until it was killed or frozen).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferrokube::Api;
use ferrokube::api::PostParams;
use ferrokube::shard::HashRing;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::json;

use super::{Cluster, Replica, Write, converged, eventually, replica_set, scale};

/// The ring is named after the drills' namespace, so that runs on a server that outlives them
/// (kube-apiserver in `scripts/e2e.sh`) never see each other's objects (the sample shards every
/// namespace's ReplicaSets).
fn label(namespace: &str) -> String {
    format!("shard.ferrokube.dev/{namespace}")
}
const COUNT: usize = 12;

/// The figures the drills measured.
#[derive(Debug, Default)]
pub struct ShardReport {
    /// ReplicaSets per member after each step.
    pub shares: Vec<(String, BTreeMap<String, usize>)>,
    /// ReplicaSets that changed member when the 4th replica joined.
    pub moved_on_join: usize,
    /// From creating a ReplicaSet to reading it back with its member label (a ReplicaSet of 0
    /// pods, created and deleted between the first steps: no pods to count).
    pub assigned_after: Duration,
    pub kill_moved_after: Duration,
    pub freeze_moved_after: Duration,
    /// Syncs in the log, and pairs of syncs of one key by two replicas that overlapped (must be 0).
    pub syncs: usize,
    pub overlaps: usize,
}

/// A namespace for the drills, `prefix-N`, whose ReplicaSets the hash ring spreads so that every
/// step moves something: each of s1–s3 owns some with three members, and the 4th gets at least
/// two when it joins (with a few objects, an unlucky name could leave a member with none).
pub fn namespace_for_drills(prefix: &str) -> String {
    let spread = |namespace: &str, members: &[&str], least: usize| {
        let ring = HashRing::new(members.iter().copied());
        members.iter().all(|member| {
            names()
                .iter()
                .filter(|rs| ring.owner(&format!("{namespace}/{rs}")) == Some(*member))
                .count()
                >= least
        })
    };
    (0..)
        .map(|n| format!("{prefix}-{n}"))
        .find(|namespace| {
            spread(namespace, &["s1", "s2", "s3"], 1)
                && spread(namespace, &["s1", "s2", "s3", "s4"], 2)
        })
        .unwrap_or_else(|| prefix.to_string())
}

fn names() -> Vec<String> {
    (0..COUNT).map(|i| format!("rs-{i}")).collect()
}

/// The member label of every ReplicaSet (unlabelled ones as "").
async fn members(cluster: &Cluster, namespace: &str) -> Option<BTreeMap<String, String>> {
    let list = Api::<ReplicaSet>::namespaced(cluster.client.clone(), namespace)
        .list(&Default::default())
        .await
        .ok()?;
    Some(
        list.items
            .iter()
            .map(|rs| {
                let member = rs
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(&label(namespace)))
                    .cloned()
                    .unwrap_or_default();
                (rs.metadata.name.clone().unwrap_or_default(), member)
            })
            .collect(),
    )
}

fn shares(members: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut shares = BTreeMap::new();
    for member in members.values() {
        *shares.entry(member.clone()).or_default() += 1;
    }
    shares
}

fn start(cluster: &Cluster, namespace: &str, identity: &str) -> Replica {
    // The label mode's drills (assigner, labels, handovers): forced, whatever the server has.
    Replica::start_with(
        cluster,
        namespace,
        identity,
        &["--shard-ring", namespace, "--shard-labels"],
    )
}

/// Waits until every ReplicaSet has its pods and status, and is labelled for the member the hash
/// ring over `live` gives it (computed here with the library's [`HashRing`], as every replica does).
async fn settled(
    cluster: &Cluster,
    namespace: &str,
    want: &[(String, i32)],
    live: &[&str],
    within: Duration,
    what: &str,
) -> BTreeMap<String, String> {
    let want: Vec<(&str, i32)> = want.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    let ring = HashRing::new(live.iter().copied());
    eventually(what, within, || async {
        let members = members(cluster, namespace).await?;
        let placed = members.len() == COUNT
            && members
                .iter()
                .all(|(rs, m)| ring.owner(&format!("{namespace}/{rs}")) == Some(m.as_str()));
        (placed && converged(&cluster.client, namespace, &want).await).then_some(members)
    })
    .await
}

/// Runs the drills in `namespace` (created here). Panics on any broken promise.
pub async fn run(cluster: &Cluster, namespace: &str) -> ShardReport {
    let client = &cluster.client;
    let lease = cluster.timing.lease;
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("namespace"),
        )
        .await
        .expect("create the drills' namespace");
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let mut want: Vec<(String, i32)> = names().into_iter().map(|n| (n, 2)).collect();
    for (name, replicas) in &want {
        replicasets
            .create(
                &PostParams::default(),
                &replica_set(name, *replicas).expect("a ReplicaSet"),
            )
            .await
            .expect("create a ReplicaSet");
    }
    let mut report = ShardReport::default();
    let mut replicas: HashMap<&str, Replica> = ["s1", "s2", "s3"]
        .into_iter()
        .map(|id| (id, start(cluster, namespace, id)))
        .collect();
    let converge = lease * 3 + cluster.slack * 6;
    let first = settled(
        cluster,
        namespace,
        &want,
        &["s1", "s2", "s3"],
        converge,
        "three members converge",
    )
    .await;
    report.shares.push(("start".into(), shares(&first)));

    // How fast a new object gets its member: create one, poll its label.
    let started = Instant::now();
    replicasets
        .create(
            &PostParams::default(),
            &replica_set("late", 0).expect("a ReplicaSet"),
        )
        .await
        .expect("create a ReplicaSet");
    eventually("the new ReplicaSet is labelled", converge, || async {
        let rs = replicasets.get("late").await.ok()?;
        rs.metadata
            .labels
            .as_ref()?
            .get(&label(namespace))
            .map(|_| ())
    })
    .await;
    report.assigned_after = started.elapsed();
    replicasets
        .delete("late", &Default::default())
        .await
        .expect("delete the ReplicaSet");
    eventually("the new ReplicaSet is gone", converge, || async {
        members(cluster, namespace)
            .await
            .filter(|m| m.len() == COUNT)
            .map(|_| ())
    })
    .await;

    // Join: a 4th member takes about a quarter, by handover from the live owners.
    replicas.insert("s4", start(cluster, namespace, "s4"));
    for (_, replicas) in want.iter_mut().take(4) {
        *replicas = 3;
    }
    for (name, count) in want.iter().take(4) {
        scale(client, namespace, name, *count).await;
    }
    let joined = settled(
        cluster,
        namespace,
        &want,
        &["s1", "s2", "s3", "s4"],
        converge,
        "the 4th member gets a share",
    )
    .await;
    report.moved_on_join = first
        .iter()
        .filter(|(rs, m)| joined.get(*rs) != Some(m))
        .count();
    assert!(
        report.moved_on_join >= 1,
        "the 4th member got no share: {joined:?}"
    );
    assert!(
        first
            .iter()
            .all(|(rs, m)| joined[rs] == *m || joined[rs] == "s4"),
        "a join moves objects only to the newcomer: before {first:?}, after {joined:?}"
    );
    report.shares.push(("join".into(), shares(&joined)));

    // Kill: s1's ReplicaSets move once its Lease expires.
    let killed_at = SystemTime::now();
    let started = Instant::now();
    replicas.get_mut("s1").expect("s1").kill();
    for (_, replicas) in want.iter_mut().skip(4).take(4) {
        *replicas = 3;
    }
    for (name, count) in want.iter().skip(4).take(4) {
        scale(client, namespace, name, *count).await;
    }
    let after_kill = settled(
        cluster,
        namespace,
        &want,
        &["s2", "s3", "s4"],
        converge,
        "s1's ReplicaSets move after the kill",
    )
    .await;
    report.kill_moved_after = started.elapsed();
    report.shares.push(("kill".into(), shares(&after_kill)));

    // Freeze: s2 is stopped past its Lease; its ReplicaSets move; woken, it must not write.
    let frozen_at = SystemTime::now();
    let started = Instant::now();
    replicas["s2"].signal("STOP");
    for (_, replicas) in want.iter_mut().skip(8) {
        *replicas = 3;
    }
    for (name, count) in want.iter().skip(8) {
        scale(client, namespace, name, *count).await;
    }
    let after_freeze = settled(
        cluster,
        namespace,
        &want,
        &["s3", "s4"],
        converge,
        "s2's ReplicaSets move while it is frozen",
    )
    .await;
    report.freeze_moved_after = started.elapsed();
    report.shares.push(("freeze".into(), shares(&after_freeze)));
    tokio::time::sleep(cluster.freeze.saturating_sub(started.elapsed())).await;
    replicas["s2"].signal("CONT");
    let mut woken = replicas.remove("s2").expect("s2");
    let code = woken.exit_code(lease * 2 + cluster.slack * 4).await;
    assert_eq!(
        code,
        Some(1),
        "a member that lost its Lease exits 1; its log:\n{}",
        woken.log_text()
    );

    // Restart: s3 leaves gracefully and comes back: either at once (the assigner had not yet
    // seen the release: its share never moved), or after the assigner fenced its Lease, moved
    // its share away and deleted the Lease; either way with a share at the end.
    let old_lease = member_lease_uid(cluster, namespace, "s3").await;
    let mut leaving = replicas.remove("s3").expect("s3");
    leaving.signal("TERM");
    let code = leaving.exit_code(Duration::from_secs(30)).await;
    assert_eq!(
        code,
        Some(0),
        "a SIGTERMed member exits 0; its log:\n{}",
        leaving.log_text()
    );
    replicas.insert("s3", start(cluster, namespace, "s3"));
    eventually("the restarted s3 holds a new Lease", converge, || async {
        let uid = member_lease_uid(cluster, namespace, "s3").await;
        (uid.is_some() && uid != old_lease).then_some(())
    })
    .await;
    want[0].1 = 1;
    scale(client, namespace, &want[0].0, 1).await;
    let restarted = settled(
        cluster,
        namespace,
        &want,
        &["s3", "s4"],
        converge,
        "s3 is back with a share",
    )
    .await;
    report.shares.push(("restart".into(), shares(&restarted)));

    // The audit.
    let writes = (cluster.audit)();
    let late: Vec<&Write> = writes
        .iter()
        .filter(|w| w.user_agent == woken.user_agent())
        .filter(|w| w.received > frozen_at + Duration::from_millis(200))
        .filter(|w| w.code < 400)
        .collect();
    assert!(
        late.is_empty(),
        "the frozen replica wrote after it was frozen: {late:#?}"
    );
    let (created, deleted) = super::pod_writes(&writes, namespace);
    assert_eq!(
        created,
        2 * COUNT + 12,
        "pods created: 24 at first, then +4, +4, +4"
    );
    assert_eq!(deleted, 2, "pods deleted: rs-0 from 3 to 1");
    let (syncs, overlaps) = overlaps(
        &cluster.logs.join("reconciles.jsonl"),
        &[("s1", killed_at), ("s2", frozen_at)],
    );
    report.syncs = syncs;
    report.overlaps = overlaps.len();
    assert!(
        overlaps.is_empty(),
        "two replicas synced one ReplicaSet at once: {overlaps:#?}"
    );

    for replica in replicas.values() {
        if replica.identity != "s1" {
            replica.signal("TERM");
        }
    }
    for (id, replica) in replicas.iter_mut() {
        if *id == "s1" {
            continue;
        }
        let code = replica.exit_code(Duration::from_secs(30)).await;
        assert_eq!(
            code,
            Some(0),
            "{id} exits 0 on SIGTERM; its log:\n{}",
            replica.log_text()
        );
    }
    report
}

/// Which acquisition of `member`'s Lease holds it now (the Lease's uid and `acquireTime`), while
/// `member` holds it. A restarted member either takes its released Lease again at once (a new
/// `acquireTime`) or, if the assigner fenced it first, waits until its objects have moved and
/// the Lease was deleted, and creates a new one (a new uid).
async fn member_lease_uid(cluster: &Cluster, namespace: &str, member: &str) -> Option<String> {
    let lease = Api::<Lease>::namespaced(cluster.client.clone(), namespace)
        .get(&format!("{namespace}-shard-{member}"))
        .await
        .ok()?;
    let spec = lease.spec.as_ref()?;
    let held = spec.holder_identity.as_deref() == Some(member);
    let acquired = spec.acquire_time.as_ref().map(|t| format!("{:?}", t.0));
    held.then(|| format!("{:?}@{acquired:?}", lease.metadata.uid))
}

/// Reads the sync log; returns how many syncs it holds and every pair of syncs of one key by two
/// replicas whose intervals overlap. A replica in `cut` counts only until the given time (killed
/// or frozen then; the audit checks separately that a frozen one wrote nothing afterwards).
pub fn overlaps(log: &std::path::Path, cut: &[(&str, SystemTime)]) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut by_key: HashMap<String, Vec<(String, u64, u64)>> = HashMap::new();
    let mut syncs = 0;
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
            panic!("a malformed line in the sync log: {line:?}");
        };
        let replica = entry["replica"].as_str().unwrap_or_default().to_string();
        let key = entry["key"].as_str().unwrap_or_default().to_string();
        let start = entry["start"].as_u64().unwrap_or(0);
        let mut end = entry["end"].as_u64().unwrap_or(0);
        if let Some((_, at)) = cut.iter().find(|(r, _)| *r == replica) {
            let at = at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            if start >= at {
                continue; // after the freeze: its writes are checked by the audit
            }
            end = end.min(at);
        }
        syncs += 1;
        by_key.entry(key).or_default().push((replica, start, end));
    }
    let mut found = Vec::new();
    for (key, mut intervals) in by_key {
        intervals.sort_by_key(|(_, start, _)| *start);
        for (i, (a, a_start, a_end)) in intervals.iter().enumerate() {
            for (b, b_start, b_end) in intervals.iter().skip(i + 1) {
                if b_start >= a_end {
                    break;
                }
                if a != b {
                    found.push(format!(
                        "{key}: {a} [{a_start}, {a_end}] and {b} [{b_start}, {b_end}]"
                    ));
                }
            }
        }
    }
    (syncs, found)
}
