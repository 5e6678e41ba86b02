//! A scripted churn for the ReplicaSet sample, to measure what acting on a stale cache costs.
//!
//! The same script runs against the controller with and without its stale-cache protection
//! (`ferrokube::controller::consistency`), on the embedded server with watch delivery delayed (its
//! fault injection) or on the real kube-apiserver. It starts the controller in-process, drives a
//! fresh namespace through the script, and counts, from the server's audit log of writes (so the
//! controller's own bookkeeping cannot hide anything):
//!
//! - **409s**: the controller's writes the server refused with Conflict (a write based on an old
//!   resourceVersion: the cache had not shown the controller's previous write yet);
//! - **status writes that went backwards**: a ReplicaSet's status, as a watch of our own sees it
//!   change, reporting an older `observedGeneration` than it already had (a status computed from a
//!   ReplicaSet older than one already answered);
//! - **pods created or deleted beyond the need**: the script knows how many creates and deletes its
//!   steps require; anything above is a repeated action. A watch of our own also records the most
//!   live pods any ReplicaSet had above its `spec.replicas` when a new pod of it appeared.
//!
//! ```text
//!  create N ReplicaSets × 4 ─▶ converged? ─▶ scale to 7 ─▶ converged? ─▶ scale to 3 ─▶ converged?
//!    ─▶ kill one pod of each (seeded choice) ─▶ converged? ─▶ again ─▶ converged?   (then count)
//! ```
//!
//! Run by `examples/tests/replicaset/stale.rs` (asserts the protection's zeros on the embedded
//! server), `examples/tests/replicaset/stale_e2e.rs` (the real kube-apiserver) and
//! `examples/src/bin/bench_stale.rs` (the table).
//!
//! [`run_external`] drives the same script while a controller running elsewhere reconciles (the
//! upstream kube-controller-manager, on a real server): its writes are told apart by their
//! User-Agent, and the caller fills in what that controller says about its own skips (for
//! kube-controller-manager 1.36 and later, its `replicaset_controller_stale_sync_skips_total`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use ferrokube::apiserver::AuditEntry;
use ferrokube::watch::WatchEvent;
use ferrokube::{Api, Client, Config};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::controller::{ControllerOptions, Running};
use crate::shared::replica_set::replica_set;

use super::world::World;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The User-Agent of the controller under test, so that its writes can be told from the script's.
pub const CONTROLLER_AGENT: &str = "ferrokube-stale-churn-controller";

/// The script's settings.
#[derive(Debug, Clone)]
pub struct Script {
    /// ReplicaSets in the namespace (default 5).
    pub replicasets: usize,
    /// Seed for choosing the pods to kill (default 1).
    pub seed: u64,
    /// Whether pods become ready by themselves (the embedded server's kubelet simulator); on a
    /// server without kubelets only live pods and `status.replicas` are awaited.
    pub pods_become_ready: bool,
    /// The longest wait for one convergence (default 120 s).
    pub within: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            replicasets: 5,
            seed: 1,
            pods_become_ready: true,
            within: Duration::from_secs(120),
        }
    }
}

/// The sizes the script goes through, in order.
const START: i32 = 4;
const UP: i32 = 7;
const DOWN: i32 = 3;
const KILL_ROUNDS: usize = 2;

/// What one run counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Who reconciled: `ferrokube` for the sample, else what [`run_external`] was told.
    pub controller: String,
    pub protection: bool,
    /// The controller's writes refused with 409 Conflict.
    pub conflicts: u64,
    /// Every write the controller sent (POST, PUT, PATCH, DELETE; events included).
    pub writes: u64,
    /// `PUT replicasets/status` that the server accepted.
    pub status_writes: u64,
    /// Status changes that went backwards (see the [module docs](self)).
    pub backwards_status: u64,
    /// Pods created beyond what the script needed (can be negative if fewer were needed than
    /// assumed, which would be a bug of the script).
    pub extra_creates: i64,
    pub extra_deletes: i64,
    /// The most live pods any ReplicaSet had above its `spec.replicas` when one of its pods
    /// appeared (a pod created when enough already existed).
    pub worst_excess: i32,
    /// Reconciles the protection skipped (`stale_sync_skips_total`); for [`run_external`], 0 until
    /// the caller fills in what the controller itself reports.
    pub stale_skips: u64,
    /// From the first create to the last convergence.
    pub millis: u128,
}

impl Outcome {
    /// The outcome as one JSON line (for `benches/stale/`).
    pub fn json(&self, server: &str, delay: Duration) -> String {
        json!({
            "server": server,
            "controller": self.controller,
            "watch_delay_ms": delay.as_millis() as u64,
            "protection": self.protection,
            "conflicts_409": self.conflicts,
            "controller_writes": self.writes,
            "status_writes": self.status_writes,
            "backwards_status": self.backwards_status,
            "extra_creates": self.extra_creates,
            "extra_deletes": self.extra_deletes,
            "worst_excess_live": self.worst_excess,
            "stale_skips": self.stale_skips,
            "seconds": (self.millis as f64 / 100.0).round() / 10.0,
        })
        .to_string()
    }
}

/// What our own watches saw.
#[derive(Default)]
struct Witness {
    /// Per ReplicaSet name: the highest observedGeneration its status has had.
    observed: HashMap<String, i64>,
    backwards: u64,
    /// pod name → (owner uid, owner name), for live pods.
    live: HashMap<String, (String, String)>,
    desired: HashMap<String, i32>,
    worst_excess: i32,
}

impl Witness {
    fn replicaset(&mut self, rs: &ReplicaSet) {
        let name = rs.metadata.name.clone().unwrap_or_default();
        self.desired
            .insert(name.clone(), rs.spec.replicas.unwrap_or(1));
        let Some(generation) = rs.status.as_ref().and_then(|s| s.observed_generation) else {
            return;
        };
        let highest = self.observed.entry(name).or_insert(generation);
        if generation < *highest {
            self.backwards += 1;
        }
        *highest = (*highest).max(generation);
    }

    fn pod(&mut self, pod: &Pod, gone: bool) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let added = match ferrokube::controller::owner::controller_of(&pod.metadata) {
            Some(owner) if !gone && super::controller::pod::is_active(pod) => self
                .live
                .insert(name, (owner.uid.clone(), owner.name.clone()))
                .is_none(),
            _ => {
                self.live.remove(&name);
                false
            }
        };
        // Only a pod that appears can be an over-creation (after a scale down, the pods still to
        // be deleted are above the new `spec.replicas` for a while, rightly).
        if !added {
            return;
        }
        let mut per_owner: HashMap<&str, i32> = HashMap::new();
        for (_, owner) in self.live.values() {
            *per_owner.entry(owner).or_default() += 1;
        }
        for (owner, live) in per_owner {
            let desired = self.desired.get(owner).copied().unwrap_or(i32::MAX);
            self.worst_excess = self.worst_excess.max(live.saturating_sub(desired));
        }
    }
}

/// Watches `api` from its list's resourceVersion until the task is aborted, handing each object to
/// `seen` (with `true` when deleted). Resumes after a dropped watch, relists after 410.
async fn witness<K: ferrokube::core::Object>(api: Api<K>, seen: impl Fn(&K, bool)) {
    loop {
        let Ok(list) = api.list(&ListParams::default()).await else {
            // The server is away (or the namespace not there yet): try again shortly.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        for item in &list.items {
            seen(item, false);
        }
        let mut version = list.resource_version().to_string();
        loop {
            let Ok(mut stream) = api.watch(&WatchParams::default(), &version).await else {
                break;
            };
            let mut gone = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                        version = o.meta().resource_version.clone().unwrap_or_default();
                        seen(&o, false);
                    }
                    Ok(WatchEvent::Deleted(o)) => {
                        version = o.meta().resource_version.clone().unwrap_or_default();
                        seen(&o, true);
                    }
                    Ok(WatchEvent::Bookmark(b)) => version = b.resource_version,
                    Ok(WatchEvent::Error(_)) => {
                        gone = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            if gone {
                break;
            }
        }
    }
}

/// Runs the script once in namespace `namespace` (created here) against a controller started
/// from `config`, with the protection on or off. `audit` returns the server's audit log so far.
/// The controller is stopped before this returns; the namespace is left for the caller.
pub async fn run(
    config: Config,
    namespace: &str,
    protection: bool,
    script: &Script,
    audit: impl Fn() -> Vec<AuditEntry>,
) -> Result<Outcome, BoxError> {
    run_with(
        config,
        namespace,
        Some(protection),
        script,
        audit,
        CONTROLLER_AGENT,
        "ferrokube",
    )
    .await
}

/// Runs the script once in namespace `namespace` (created here) while a controller that is already
/// running elsewhere reconciles: its writes are the audited ones whose User-Agent starts with
/// `user_agent_prefix`, and `controller` names it in the outcome. The outcome's `protection` is false
/// and its `stale_skips` 0: the caller knows better (and sets them).
pub async fn run_external(
    config: Config,
    namespace: &str,
    script: &Script,
    audit: impl Fn() -> Vec<AuditEntry>,
    user_agent_prefix: &str,
    controller: &str,
) -> Result<Outcome, BoxError> {
    run_with(
        config,
        namespace,
        None,
        script,
        audit,
        user_agent_prefix,
        controller,
    )
    .await
}

/// [`run`] (`protection` is `Some`: our controller starts here, with [`CONTROLLER_AGENT`]) or
/// [`run_external`] (`None`).
async fn run_with(
    config: Config,
    namespace: &str,
    protection: Option<bool>,
    script: &Script,
    audit: impl Fn() -> Vec<AuditEntry>,
    agent: &str,
    controller: &str,
) -> Result<Outcome, BoxError> {
    // The script's own requests are not rate-limited; the controller gets kube-controller-manager's
    // client limits (QPS 20, burst 30).
    let driver = Client::new(Config {
        qps: None,
        ..config.clone()
    })?;
    let namespaces: Api<Namespace> = Api::all(driver.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.to_string());
    namespaces.create(&PostParams::default(), &ns).await?;
    let audited_before = audit().len();

    let running = match protection {
        Some(protection) => {
            let mut controller_config = config;
            controller_config.user_agent = Some(CONTROLLER_AGENT.to_string());
            controller_config.qps = Some(20.0);
            controller_config.burst = 30;
            let options = ControllerOptions {
                stale_protection: protection,
                ..ControllerOptions::default()
            };
            Some(Running::start(controller_config, options).await?)
        }
        None => None,
    };

    let witness_state = Arc::new(Mutex::new(Witness::default()));
    let replicasets: Api<ReplicaSet> = Api::namespaced(driver.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(driver.clone(), namespace);
    let watchers = [
        tokio::spawn({
            let state = witness_state.clone();
            witness(replicasets.clone(), move |rs, _| {
                state.lock().replicaset(rs)
            })
        }),
        tokio::spawn({
            let state = witness_state.clone();
            witness(pods.clone(), move |pod, gone| state.lock().pod(pod, gone))
        }),
    ];

    let started = Instant::now();
    let result = drive(&driver, namespace, script).await;
    let millis = started.elapsed().as_millis();
    let stale_skips = running
        .as_ref()
        .and_then(|r| r.controller.as_ref())
        .map_or(0, |c| c.stale_skips());
    if let Some(running) = running {
        running.stop().await?;
    }
    for watcher in watchers {
        watcher.abort();
    }
    let kills = result?;

    let writes: Vec<AuditEntry> = audit()
        .into_iter()
        .skip(audited_before)
        .filter(|e| e.user_agent.starts_with(agent))
        .filter(|e| e.path.contains(&format!("/namespaces/{namespace}/")))
        .collect();
    let count = |method: &str, suffix: &str, ok: bool| {
        writes
            .iter()
            .filter(|e| e.method == method && e.path.ends_with(suffix))
            .filter(|e| !ok || (200..300).contains(&e.code))
            .count() as i64
    };
    let n = script.replicasets as i64;
    let needed_creates = n * i64::from(START) + n * i64::from(UP - START) + kills as i64;
    let needed_deletes = n * i64::from(UP - DOWN);
    let witness_state = witness_state.lock();
    Ok(Outcome {
        controller: controller.to_string(),
        protection: protection.unwrap_or(false),
        conflicts: writes.iter().filter(|e| e.code == 409).count() as u64,
        writes: writes.len() as u64,
        status_writes: count("PUT", "/status", true) as u64,
        backwards_status: witness_state.backwards,
        extra_creates: count("POST", "/pods", true) - needed_creates,
        extra_deletes: writes
            .iter()
            .filter(|e| e.method == "DELETE" && e.path.contains("/pods/"))
            .filter(|e| (200..300).contains(&e.code))
            .count() as i64
            - needed_deletes,
        worst_excess: witness_state.worst_excess,
        stale_skips,
        millis,
    })
}

/// The script's steps; returns how many pods it killed.
async fn drive(driver: &Client, namespace: &str, script: &Script) -> Result<usize, BoxError> {
    let replicasets: Api<ReplicaSet> = Api::namespaced(driver.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(driver.clone(), namespace);
    let names: Vec<String> = (0..script.replicasets)
        .map(|i| format!("churn-{i}"))
        .collect();
    for name in &names {
        replicasets
            .create(&PostParams::default(), &replica_set(name, START)?)
            .await?;
    }
    converge(driver, namespace, script).await?;
    for replicas in [UP, DOWN] {
        for name in &names {
            let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
            replicasets
                .patch(name, &PatchParams::default(), &patch)
                .await?;
        }
        converge(driver, namespace, script).await?;
    }
    let mut rng = StdRng::seed_from_u64(script.seed);
    let mut kills = 0;
    for _ in 0..KILL_ROUNDS {
        let mut live: Vec<Pod> = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(super::controller::pod::is_active)
            .collect();
        live.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for name in &names {
            let mine: Vec<&Pod> = live
                .iter()
                .filter(|p| {
                    ferrokube::controller::owner::controller_of(&p.metadata)
                        .is_some_and(|o| &o.name == name)
                })
                .collect();
            if mine.is_empty() {
                continue;
            }
            let victim = mine[rng.random_range(0..mine.len())];
            let victim = victim.metadata.name.as_deref().unwrap_or_default();
            let gone = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            pods.delete(victim, &gone).await?;
            kills += 1;
        }
        converge(driver, namespace, script).await?;
    }
    Ok(kills)
}

/// Waits until every ReplicaSet has converged, checked against fresh lists from the server.
async fn converge(driver: &Client, namespace: &str, script: &Script) -> Result<(), BoxError> {
    let deadline = Instant::now() + script.within;
    loop {
        let world = World::observe(driver, namespace).await?;
        let done = world.replicasets.iter().all(|rs| {
            if script.pods_become_ready {
                rs.converged()
            } else {
                rs.observed && rs.live == rs.desired && rs.replicas == rs.desired
            }
        });
        if done {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("not converged within {:?}: {world}", script.within).into());
        }
        // A fresh list costs two requests; look again shortly.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
