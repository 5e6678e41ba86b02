//! Parity of the sample ReplicaSet controller (examples/src/replicaset) with the upstream one, on a real
//! kube-apiserver with no controller manager of its own (scripts/e2e.sh).
//!
//! The same scenarios run twice, each time in a fresh namespace: once with ours running (in this
//! process, with kube-controller-manager's client limits, 20 QPS / burst 30), once with the upstream
//! kube-controller-manager (`--controllers=replicaset`, the same release as the apiserver;
//! `FERROKUBE_KCM` names the binary, [`super::kcm`] starts it with the flags its release accepts).
//! Nothing else runs, so the test plays the kubelet: it marks pods Running and Ready when a step wants
//! them ready.
//!
//! After each step the test waits for the ReplicaSets to settle, then records every ReplicaSet's
//! spec.replicas, its live controlled pods and its status (replicas, fullyLabeledReplicas,
//! readyReplicas, availableReplicas, observedGeneration current, condition types), every pod's labels,
//! owner reference (by owner name) and whether it is active; at the end, the events' reasons per
//! ReplicaSet. The two recordings must be equal.
//!
//! What kube-controller-manager 1.37 does that 1.20 did not, seen here:
//! - `status.terminatingReplicas`: the count of its pods that are terminating (deletionTimestamp set),
//!   written by the ReplicaSet controller since the `DeploymentReplicaSetTerminatingReplicas` feature
//!   (beta, on by default since 1.35). Here it is always 0 (pods that were never scheduled are deleted
//!   at once), so 1.37 writes `terminatingReplicas: 0`. The sample follows 1.37 and writes it too;
//!   a 1.20 server drops the field, so on 1.20 both sides show it unset. Compared.
//! - its syncs may be skipped while its informers lag behind its own writes (1.36+; counted in
//!   `replicaset_controller_stale_sync_skips_total`, printed at the end): the recorded outcomes stay the
//!   same, which is what this test checks.
//! - the events and their reasons (SuccessfulCreate, SuccessfulDelete, FailedCreate) and the
//!   ReplicaFailure condition are the same on both.
//!
//! Steps: create `a` (3) · scale `a` to 5 · scale `a` to 2 · delete one of `a`'s pods · an orphan pod
//! labelled `app=b`, then create `b` (2): adopted, plus one created · relabel one of `b`'s pods: released,
//! and replaced · `c` (2) with minReadySeconds 10: ready but not yet available, then available · (events
//! recorded here) · `d` (1) while a ResourceQuota of 0 pods makes the server reject pods: the
//! ReplicaFailure condition (FailedCreate) · the quota removed: `d` gets its pod, the condition goes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ferrokube::{Api, Client};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod, ResourceQuota};
use serde_json::json;

use ferrokube_examples::replicaset::controller;

use ferrokube_testkit as common;

use controller::{ControllerOptions, Running};

use super::kcm::{self, Kcm};

/// One ReplicaSet as recorded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ReplicaSetView {
    desired: i32,
    /// Active pods on the server controlled by this ReplicaSet.
    live: i32,
    replicas: i32,
    fully_labeled: i32,
    ready: i32,
    available: i32,
    observed_current: bool,
    conditions: Vec<String>,
}

/// One pod as recorded (names are random, so pods are compared as a sorted list of these).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct PodView {
    labels: BTreeMap<String, String>,
    /// `ReplicaSet/<name> controller=… blockOwnerDeletion=…` for each owner reference.
    owners: Vec<String>,
    active: bool,
}

#[derive(Debug, Clone)]
struct Snapshot {
    replicasets: BTreeMap<String, ReplicaSetView>,
    pods: Vec<PodView>,
    /// Per ReplicaSet, `status.terminatingReplicas`.
    terminating: BTreeMap<String, Option<i32>>,
}

impl PartialEq for Snapshot {
    fn eq(&self, other: &Snapshot) -> bool {
        self.replicasets == other.replicasets
            && self.pods == other.pods
            && self.terminating == other.terminating
    }
}

async fn snapshot(client: &Client, namespace: &str) -> Snapshot {
    let replicasets = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .expect("list replicasets");
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .expect("list pods");
    let names: BTreeMap<String, String> = replicasets
        .items
        .iter()
        .map(|rs| {
            (
                rs.metadata.uid.clone().unwrap_or_default(),
                rs.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    let terminating = replicasets
        .items
        .iter()
        .map(|rs| {
            let name = rs.metadata.name.clone().unwrap_or_default();
            (
                name,
                rs.status.as_ref().and_then(|s| s.terminating_replicas),
            )
        })
        .collect();
    let replicasets = replicasets
        .items
        .iter()
        .map(|rs| {
            let status = rs.status.clone().unwrap_or_default();
            let view = ReplicaSetView {
                desired: rs.spec.replicas.unwrap_or(1),
                live: pods
                    .items
                    .iter()
                    .filter(|p| controller::pod::is_active(p))
                    .filter(|p| {
                        ferrokube::controller::owner::controller_of(&p.metadata)
                            .is_some_and(|o| Some(&o.uid) == rs.metadata.uid.as_ref())
                    })
                    .count() as i32,
                replicas: status.replicas,
                fully_labeled: status.fully_labeled_replicas.unwrap_or(0),
                ready: status.ready_replicas.unwrap_or(0),
                available: status.available_replicas.unwrap_or(0),
                observed_current: status.observed_generation == rs.metadata.generation,
                conditions: status
                    .conditions
                    .unwrap_or_default()
                    .iter()
                    .map(|c| format!("{:?}={:?} {:?}", c.type_, c.status, c.reason))
                    .collect(),
            };
            (rs.metadata.name.clone().unwrap_or_default(), view)
        })
        .collect();
    let mut pods: Vec<PodView> = pods
        .items
        .iter()
        .map(|pod| PodView {
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            owners: pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|o| {
                    let owner = names.get(&o.uid).map_or("<unknown uid>", String::as_str);
                    format!(
                        "{} {}/{owner} controller={:?} blockOwnerDeletion={:?}",
                        o.api_version, o.kind, o.controller, o.block_owner_deletion
                    )
                })
                .collect(),
            active: controller::pod::is_active(pod),
        })
        .collect();
    pods.sort();
    Snapshot {
        replicasets,
        pods,
        terminating,
    }
}

/// Waits until every ReplicaSet has exactly `spec.replicas` active controlled pods and its status
/// says so for the current generation; then marks the pods ready and waits for `readyReplicas` too
/// (and `availableReplicas`, when `available`).
async fn settle(client: &Client, namespace: &str, available: bool) {
    let structural = |now: &Snapshot| {
        now.replicasets
            .values()
            .all(|rs| rs.live == rs.desired && rs.replicas == rs.desired && rs.observed_current)
    };
    wait_until(client, namespace, structural).await;
    mark_ready(client, namespace).await;
    wait_until(client, namespace, |now| {
        structural(now)
            && now
                .replicasets
                .values()
                .all(|rs| rs.ready == rs.desired && (!available || rs.available == rs.desired))
    })
    .await;
}

/// Waits (up to 60 s) until `done` holds for the namespace, then a quiet second.
async fn wait_until(client: &Client, namespace: &str, done: impl Fn(&Snapshot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = snapshot(client, namespace).await;
        if done(&now) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{namespace}: still waiting: {now:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The kubelet's part: every active pod not yet ready becomes Running and Ready now.
async fn mark_ready(client: &Client, namespace: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pods = api
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items;
    let now = ferrokube::controller::now();
    for pod in pods
        .iter()
        .filter(|p| controller::pod::is_active(p) && !controller::pod::is_ready(p))
    {
        let patch = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now.to_string()}
        ]}});
        api.patch_status(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .expect("mark pod ready");
    }
}

async fn scale(client: &Client, namespace: &str, name: &str, replicas: i32) {
    Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scale");
}

async fn pod_names(client: &Client, namespace: &str, app: &str) -> Vec<String> {
    let mut names: Vec<String> = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(controller::pod::is_active)
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// Plays every step in a fresh namespace; returns the recordings, named by step.
async fn scenarios(client: &Client, who: &str) -> Vec<(&'static str, Snapshot)> {
    let ns = common::namespace(client, &format!("rs-parity-{who}")).await;
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let post = PostParams::default();
    let mut recorded = Vec::new();

    // The orphan b adopts later, created first: the controller's pod cache has certainly seen it
    // by the time b exists, since converging a below needs the pods it creates after it (one
    // watch delivers in order). Created right before b, kube-controller-manager sometimes synced b
    // before its cache had the orphan, created two pods and deleted one.
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "labels": {"app": "b"}},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]},
    }))
    .expect("pod json");
    pods.create(&post, &orphan).await.expect("create orphan");

    replicasets
        .create(&post, &common::replica_set("a", 3, 0))
        .await
        .expect("create a");
    settle(client, &ns, true).await;
    recorded.push(("create a (3)", snapshot(client, &ns).await));

    scale(client, &ns, "a", 5).await;
    settle(client, &ns, true).await;
    recorded.push(("scale a to 5", snapshot(client, &ns).await));

    scale(client, &ns, "a", 2).await;
    settle(client, &ns, true).await;
    recorded.push(("scale a to 2", snapshot(client, &ns).await));

    let victim = pod_names(client, &ns, "a").await.remove(0);
    pods.delete(&victim, &DeleteParams::default())
        .await
        .expect("delete pod");
    settle(client, &ns, true).await;
    recorded.push(("delete a pod of a", snapshot(client, &ns).await));

    replicasets
        .create(&post, &common::replica_set("b", 2, 0))
        .await
        .expect("create b");
    settle(client, &ns, true).await;
    recorded.push(("orphan adopted by b", snapshot(client, &ns).await));

    pods.patch(
        "orphan",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "released"}}})),
    )
    .await
    .expect("relabel");
    settle(client, &ns, true).await;
    recorded.push(("relabelled pod released by b", snapshot(client, &ns).await));

    replicasets
        .create(&post, &common::replica_set("c", 2, 10))
        .await
        .expect("create c");
    settle(client, &ns, false).await;
    recorded.push(("c ready, not yet available", snapshot(client, &ns).await));
    settle(client, &ns, true).await;
    recorded.push((
        "c available after minReadySeconds",
        snapshot(client, &ns).await,
    ));

    // Events are posted asynchronously; give them a moment, then count reasons per ReplicaSet.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list events");
    let mut reasons: BTreeMap<String, ReplicaSetView> = BTreeMap::new();
    let mut counts: BTreeMap<(String, String), i32> = BTreeMap::new();
    for event in events.items {
        let object = event.involved_object.name.unwrap_or_default();
        let reason = event.reason.unwrap_or_default();
        *counts.entry((object, reason)).or_default() += event.count.unwrap_or(1);
    }
    for ((object, reason), count) in counts {
        // Reuse the snapshot shape: one pseudo-ReplicaSet per (object, reason) with its count.
        reasons.insert(
            format!("events {object} {reason}"),
            ReplicaSetView {
                desired: count,
                live: 0,
                replicas: 0,
                fully_labeled: 0,
                ready: 0,
                available: 0,
                observed_current: true,
                conditions: Vec::new(),
            },
        );
    }
    recorded.push((
        "events by reason",
        Snapshot {
            replicasets: reasons,
            pods: Vec::new(),
            terminating: BTreeMap::new(),
        },
    ));

    // A rejected pod: a ResourceQuota of 0 pods (its status written by hand: no quota controller
    // runs here) makes the API server refuse every pod create in the namespace.
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
    let quota: ResourceQuota =
        serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "0"}}}))
            .expect("quota json");
    quotas.create(&post, &quota).await.expect("create quota");
    quotas
        .patch_status(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}})),
        )
        .await
        .expect("quota status");
    replicasets
        .create(&post, &common::replica_set("d", 1, 0))
        .await
        .expect("create d");
    wait_until(client, &ns, |now| {
        now.replicasets
            .get("d")
            .is_some_and(|d| !d.conditions.is_empty() && d.observed_current)
    })
    .await;
    recorded.push((
        "d cannot create: ReplicaFailure",
        snapshot(client, &ns).await,
    ));
    quotas
        .delete("q", &DeleteParams::default())
        .await
        .expect("delete quota");
    settle(client, &ns, true).await;
    recorded.push(("d recovers: condition removed", snapshot(client, &ns).await));
    recorded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_outcomes_as_kube_controller_manager() {
    let client = common::client(None);

    let mut config = common::config(None);
    config.qps = Some(20.0);
    config.burst = 30;
    let ours = Running::start(config, ControllerOptions::default())
        .await
        .expect("our controller starts");
    let ours_recorded = scenarios(&client, "ours").await;
    ours.stop().await.expect("stop our controller");

    let upstream = Kcm::start("replicaset", 20, 30).await;
    let upstream_recorded = scenarios(&client, "kcm").await;
    let version = upstream.version;
    let skips = upstream.stale_skips();
    upstream.stop().await;

    let mut differences = Vec::new();
    for ((step, ours), (_, theirs)) in ours_recorded.iter().zip(&upstream_recorded) {
        if ours != theirs {
            differences.push(format!(
                "step {step:?}:\n ours:     {ours:#?}\n upstream: {theirs:#?}"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} steps differ:\n{}",
        differences.len(),
        ours_recorded.len(),
        differences.join("\n")
    );
    println!(
        "replicaset parity: {} steps, all equal to kube-controller-manager {version}'s",
        ours_recorded.len()
    );
    println!(
        "kube-controller-manager {version}: {} = {}",
        kcm::STALE_SKIPS_METRIC,
        match (skips, version.has_stale_sync_skips()) {
            (Some(n), _) => n.to_string(),
            (None, true) => "0 (not yet exposed: no skip counted)".to_string(),
            (None, false) => "absent (no such metric before 1.36)".to_string(),
        }
    );
}
