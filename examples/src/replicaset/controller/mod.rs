//! A ReplicaSet controller with the behaviour of Kubernetes' own (`pkg/controller/replicaset`).
//!
//! # How a change flows through it
//!
//! ```text
//!  API server ──watch──▶ ReplicaSet informer ─┐  handlers map each event to ReplicaSet keys
//!             ──watch──▶ Pod informer ────────┤  (a pod → its controller, or an orphan → every
//!                                             │   ReplicaSet whose selector matches it)
//!                                             ▼
//!                              rate-limited WorkQueue<key>  (dedups; one worker per key at a time)
//!                                             │  5 workers: get → sync(key) → forget / add_rate_limited
//!                                             ▼
//!  sync(key): read the ReplicaSet and its namespace's pods from the listers (never the server)
//!     1. claim: adopt matching orphans, release owned pods that no longer match     (PATCH pods)
//!     2. manage: if expectations are satisfied, create or delete the difference    (POST/DELETE pods)
//!        (deletes only down to the highest replicas seen in the last second: see below)
//!     3. status: replicas, ready, available, observedGeneration, ReplicaFailure    (PUT …/status)
//! ```
//!
//! The controller is **edge-triggered** (only an event, a resync or a retry runs a sync) and
//! **level-driven**: a sync never asks *what happened*, only *what is wanted* (`spec.replicas`) and *what
//! is* (the cached pods), so a missed, duplicated or reordered event cannot lead it astray; the next
//! sync of that key repairs it. What the cache cannot know yet — the pods it just created or deleted —
//! is covered by [`expectations`](ferrokube::controller::expectations).
//!
//! One deliberate difference from upstream: **scale-down stabilization**
//! ([`ControllerOptions::scale_down_window`], default 1 s). Pods are created as soon as they are
//! wanted, but deleted only down to the highest `spec.replicas` this controller saw within the last
//! second ([`Stabilization`], the HPA's scale-down rule). A ReplicaSet whose replicas flap between
//! 0 and N then keeps its pods instead of deleting and re-creating them on every flip; a single
//! scale-down waits one second before its deletes (and before the status that goes with them).
//! A ReplicaSet that keeps changing gets a longer window, twice the interval of its changes up to
//! 10 s ([`ControllerOptions::scale_down_adaptive`]), so slower flaps cost no deletes either.
//!
//! Errors go back to the queue: a failed sync's key is re-added with per-key exponential backoff
//! (5 ms doubling to 1000 s, and a 10 qps/100 burst overall bucket: client-go's default controller rate
//! limiter), a successful one's backoff is forgotten. A 409 on the status write is such an error; it is
//! not retried in place.
//!
//! The module's parts: [`pod`] (pod predicates), [`pod_control`] (writes to pods, and their
//! events), [`ranking`] (which pods to delete first), [`status`] (status computation and write),
//! [`running`] (start and stop it all). What it waits to see
//! ([`expectations`](ferrokube::controller::expectations)) and its event recorder
//! ([`events`](ferrokube::controller::events)) are ferrokube's controller toolkit.

pub mod mutant;
pub mod pod;
pub mod pod_control;
pub mod ranking;
pub mod running;
pub mod status;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ferrokube::Client;
use ferrokube::Error;
use ferrokube::controller::Metrics;
use ferrokube::controller::claim::{ClaimError, Claimer};
use ferrokube::controller::expectations::EXPECTATIONS_TIMEOUT;
use ferrokube::controller::owner;
use ferrokube::controller::{
    Action, ConsistencyStore, Context, Controller, Enqueue, EventRecorder, Expectations,
    ObjectEvent, Reconciler, Stabilization, controller_queue,
};
use ferrokube::core::{LabelSelector, ObjectKey, Scope, drop_managed_fields};
use ferrokube::informer::{Lister, SharedIndexInformer, SharedInformerFactory};
use ferrokube::manager::{Manager, ShardedParts};
use ferrokube::toolkit::Adaptive;
use ferrokube::workqueue::WorkQueue;
use futures_util::future::join_all;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

pub use mutant::Mutant;
use pod_control::PodControl;
pub use running::Running;

/// The `source.component` of every event (upstream's name for this controller).
pub const COMPONENT: &str = "replicaset-controller";

/// Default [`ControllerOptions::scale_down_window`].
pub const SCALE_DOWN_WINDOW: Duration = Duration::from_secs(1);

/// Default [`ControllerOptions::scale_down_adaptive`]: a ReplicaSet whose replicas keep changing
/// gets a window of twice the interval between its last two changes, up to 10 s (so flips up to
/// 5 s apart cost no deletes; see the guide's "Flapping at any rate").
pub const SCALE_DOWN_ADAPTIVE: Adaptive = Adaptive {
    factor: 2,
    max: Duration::from_secs(10),
};

/// The controller's settings; every field has a default equal to kube-controller-manager's.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Syncs that run at once (`--concurrent-replicaset-syncs`, default 5).
    pub workers: usize,
    /// Most pods created or deleted by one sync (upstream's `BurstReplicas`, default 500).
    pub burst_replicas: usize,
    /// How often every cached ReplicaSet is synced again with nothing changed. Default 12 h
    /// (kube-controller-manager's `--min-resync-period`; it picks 12–24 h at random).
    pub resync: Duration,
    /// How long unmet expectations hold a ReplicaSet back (default 5 min).
    pub expectations_timeout: Duration,
    /// Skip a sync while a cache is older than this controller's own last write for the key
    /// (kube-controller-manager 1.36's stale controller handling; default on).
    pub stale_protection: bool,
    /// Scale-down stabilization: delete pods only down to the highest `spec.replicas` seen within
    /// this window (see [`Stabilization`]); creating is never held back. Default 1 s, where
    /// kube-controller-manager has none (it deletes at once): a ReplicaSet whose replicas flap
    /// between 0 and N then costs no deletes and re-creates, and a single scale-down waits one
    /// second. `Duration::ZERO` gives upstream's behaviour.
    pub scale_down_window: Duration,
    /// Let each ReplicaSet's window follow the interval of its `spec.replicas` changes (see
    /// [`Adaptive`]); `None` keeps it fixed. Default [`SCALE_DOWN_ADAPTIVE`]; ignored when
    /// `scale_down_window` is zero.
    pub scale_down_adaptive: Option<Adaptive>,
    /// Append one JSON line per sync to this file (`--reconcile-log`): which replica synced which
    /// key, from when to when (Unix nanoseconds). The sharding drills read it to check that no two
    /// replicas ever synced one ReplicaSet at once. Default: none.
    pub reconcile_log: Option<ReconcileLog>,
    /// A deliberate bug, for the fault explorer's mutant corpus (see [`Mutant`]). Default none:
    /// the controller as described above.
    pub mutant: Option<Mutant>,
}

/// See [`ControllerOptions::reconcile_log`].
#[derive(Debug, Clone)]
pub struct ReconcileLog {
    replica: String,
    file: Arc<parking_lot::Mutex<std::fs::File>>,
}

impl ReconcileLog {
    /// Appends to `path` (created if missing) as `replica`.
    pub fn open(path: &std::path::Path, replica: &str) -> std::io::Result<ReconcileLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(ReconcileLog {
            replica: replica.to_string(),
            file: Arc::new(parking_lot::Mutex::new(file)),
        })
    }

    fn record(&self, key: &str, start: std::time::SystemTime, ok: bool) {
        use std::io::Write;
        let nanos = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        };
        let line = serde_json::json!({
            "replica": self.replica,
            "key": key,
            "start": nanos(start) as u64,
            "end": nanos(std::time::SystemTime::now()) as u64,
            "ok": ok,
        });
        // One write(2) per line (O_APPEND), so lines of concurrent syncs and of other replicas
        // sharing the file never interleave.
        let line = format!("{line}\n");
        if let Err(error) = self.file.lock().write_all(line.as_bytes()) {
            tracing::warn!(%error, "cannot append to the reconcile log");
        }
    }
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            workers: 5,
            burst_replicas: 500,
            resync: Duration::from_secs(12 * 3600),
            expectations_timeout: EXPECTATIONS_TIMEOUT,
            stale_protection: true,
            scale_down_window: SCALE_DOWN_WINDOW,
            scale_down_adaptive: Some(SCALE_DOWN_ADAPTIVE),
            reconcile_log: None,
            mutant: None,
        }
    }
}

/// Why a sync failed. The key is retried with backoff either way.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] Error),
    /// Adopting or releasing pods failed, or the fresh read before adopting found the ReplicaSet
    /// gone, replaced or being deleted.
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// A pod template without labels could never be matched by the selector.
    #[error("unable to create pods for ReplicaSet {key}: the pod template has no labels")]
    TemplateWithoutLabels { key: String },
}

/// Counters for the live view and `/metrics` (as `replicaset_controller_<name>_total`); all
/// monotonic. Prometheus counters, so the manager's registry serves them as they are.
#[derive(Debug, Default)]
pub struct Stats {
    pub syncs: Counter,
    pub failed_syncs: Counter,
    pub pods_created: Counter,
    pub pods_deleted: Counter,
    pub status_writes: Counter,
    /// Status writes the server refused with 409 Conflict (the sync read a stale ReplicaSet).
    pub status_conflicts: Counter,
    pub replicaset_events: Counter,
    pub pod_events: Counter,
}

impl Stats {
    /// New counters, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Arc<Stats> {
        let stats = Arc::new(Stats::default());
        let counters: [(&str, &str, &Counter); 8] = [
            ("syncs", "ReplicaSet syncs run", &stats.syncs),
            (
                "failed_syncs",
                "Syncs that failed and were retried",
                &stats.failed_syncs,
            ),
            ("pods_created", "Pods created", &stats.pods_created),
            ("pods_deleted", "Pods deleted", &stats.pods_deleted),
            (
                "status_writes",
                "Status updates written",
                &stats.status_writes,
            ),
            (
                "status_conflicts",
                "Status updates refused with 409 Conflict",
                &stats.status_conflicts,
            ),
            (
                "replicaset_events",
                "ReplicaSet informer events handled",
                &stats.replicaset_events,
            ),
            (
                "pod_events",
                "Pod informer events handled",
                &stats.pod_events,
            ),
        ];
        for (name, help, counter) in counters {
            registry.register(
                format!("replicaset_controller_{name}"),
                help,
                counter.clone(),
            );
        }
        stats
    }
    fn bump(counter: &Counter) {
        counter.inc();
    }
    pub fn get(counter: &Counter) -> u64 {
        counter.get()
    }
}

/// See the [module docs](self).
pub struct ReplicaSetController {
    shared: Arc<Shared>,
    pods: SharedIndexInformer<Pod>,
    replicasets: SharedIndexInformer<ReplicaSet>,
    queue: WorkQueue<ObjectKey>,
}

/// What the pod handler and the workers share: the reconciler's context.
struct Shared {
    replicasets: Lister<ReplicaSet>,
    pods: Lister<Pod>,
    expectations: Expectations,
    /// `spec.replicas` per key over the last scale-down window: deletes go no lower than its floor.
    scale_down: Stabilization,
    pod_control: PodControl,
    /// The controller's own writes per key; its workers skip a key while a cache is older.
    consistency: ConsistencyStore,
    events: EventRecorder,
    options: ControllerOptions,
    stats: Arc<Stats>,
}

/// Where the controller takes its informers, client, metrics and [`Controller`] from: the
/// [`Manager`] (one controller for the process), or one shard epoch's [`ShardedParts`] (sharded:
/// `Manager::add_sharded_controller` builds the controller again for each epoch, its informers
/// narrowed to the epoch's share).
pub trait Parts {
    fn factory(&self) -> &Arc<SharedInformerFactory<Client>>;
    fn client(&self) -> Client;
    fn metrics(&self) -> &Metrics;
    /// `base` narrowed as the controller's own informers are.
    fn scope(&self, base: Scope) -> Scope;
    /// The ReplicaSet controller, before the sample's settings.
    fn controller(&self) -> Controller<ReplicaSet>;
}

impl Parts for Manager {
    fn factory(&self) -> &Arc<SharedInformerFactory<Client>> {
        Manager::factory(self)
    }
    fn client(&self) -> Client {
        Manager::client(self)
    }
    fn metrics(&self) -> &Metrics {
        Manager::metrics(self)
    }
    fn scope(&self, base: Scope) -> Scope {
        base
    }
    fn controller(&self) -> Controller<ReplicaSet> {
        Manager::controller(self, Scope::all())
    }
}

impl Parts for ShardedParts {
    fn factory(&self) -> &Arc<SharedInformerFactory<Client>> {
        ShardedParts::factory(self)
    }
    fn client(&self) -> Client {
        ShardedParts::client(self)
    }
    fn metrics(&self) -> &Metrics {
        ShardedParts::metrics(self)
    }
    fn scope(&self, base: Scope) -> Scope {
        ShardedParts::scope(self, base)
    }
    fn controller(&self) -> Controller<ReplicaSet> {
        ShardedParts::controller(self, Scope::all())
    }
}

impl ReplicaSetController {
    /// Declares the controller on the Pod and ReplicaSet informers of `parts`' factory (created
    /// without managedFields if the factory has none yet), writing with its client (gated by
    /// leadership or membership). Returns it, the [`Controller`] to give
    /// [`Manager::add_controller`] (or return from `add_sharded_controller`'s `make`) with
    /// [`reconciler`](Self::reconciler), and the task that posts its events (spawn that).
    pub fn new(
        parts: &impl Parts,
        options: ControllerOptions,
        stats: Arc<Stats>,
    ) -> (
        ReplicaSetController,
        Controller<ReplicaSet>,
        impl Future<Output = ()> + Send + 'static,
    ) {
        // The controller never reads managedFields (informers skip them by default) nor kubectl's
        // last-applied annotation: the transform drops that too. (An informer the factory
        // already had keeps its own settings.)
        let (factory, client) = (parts.factory(), parts.client());
        // Sharded: every cache holds only this epoch's share, selected on the server (by hash
        // ranges, or by the member's label), as the controller's own informers are.
        let scope = parts.scope(Scope::all());
        let pods = factory.informer_with::<Pod>(&scope, |b| b.transform(drop_managed_fields));
        let replicasets =
            factory.informer_with::<ReplicaSet>(&scope, |b| b.transform(drop_managed_fields));
        // Mutant::UnwatchedPodCache: the syncs count pods from an informer of their own, which
        // neither the expectations (kept by `pods`' events) nor the consistency store follow.
        let counted_pods = match options.mutant {
            Some(Mutant::UnwatchedPodCache) => factory
                .informer_with::<Pod>(&scope.clone().fields("status.phase!=Failed"), |b| {
                    b.transform(drop_managed_fields)
                }),
            _ => pods.clone(),
        };
        let (events, post_events) = EventRecorder::new(client.clone(), COMPONENT);
        // The controller's queue, made here (as the controller would make it) to show its depth.
        let queue = controller_queue("replicaset", Some(parts.metrics()));
        let builder = parts
            .controller()
            .name("replicaset")
            .with_queue(queue.clone())
            .workers(options.workers)
            .resync(Some(options.resync))
            .stale_protection(options.stale_protection);
        let shared = Arc::new(Shared {
            consistency: builder.consistency(),
            pod_control: PodControl::new(events.clone()),
            replicasets: replicasets.lister(),
            pods: counted_pods.lister(),
            expectations: Expectations::new(options.expectations_timeout),
            scale_down: Stabilization::new(options.scale_down_window)
                .adaptive(options.scale_down_adaptive),
            events,
            stats,
            options,
        });
        let pod_events = PodEvents(shared.clone());
        let replicaset_events = shared.clone();
        // Pods are the ReplicaSets' dependents: `owns_with` narrows them to this member's label
        // and moves them with their owner when sharded. The handler keeps the expectations.
        let builder = builder
            .owns_with::<Pod>(Scope::all(), move |enqueue, event| {
                pod_events.handle(enqueue, event)
            })
            // Counted for the live view, and every replicas value seen goes into the scale-down
            // window (a sync busy for a while would miss the flips in between); the primary
            // source queues the keys.
            .watches_with::<ReplicaSet>(scope, move |_, event| {
                replicaset_events.replicaset_event(event)
            });
        let controller = ReplicaSetController {
            queue,
            shared,
            pods,
            replicasets,
        };
        (controller, builder, post_events)
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.shared.stats
    }

    /// Syncs skipped so far because a cache had not caught up with this controller's own write.
    pub fn stale_skips(&self) -> u64 {
        self.shared.consistency.skips()
    }

    pub fn queue(&self) -> &WorkQueue<ObjectKey> {
        &self.queue
    }

    pub fn replicasets(&self) -> &SharedIndexInformer<ReplicaSet> {
        &self.replicasets
    }

    pub fn pods(&self) -> &SharedIndexInformer<Pod> {
        &self.pods
    }

    /// The reconciler to run the controller with.
    pub fn reconciler(&self) -> ReplicaSetSync {
        ReplicaSetSync(self.shared.clone())
    }
}

/// The reconciler: one sync per ReplicaSet key, and the bookkeeping of deleted ones.
pub struct ReplicaSetSync(Arc<Shared>);

impl Reconciler<ReplicaSet> for ReplicaSetSync {
    type Error = SyncError;

    async fn reconcile(&self, rs: Arc<ReplicaSet>, ctx: Context) -> Result<Action, SyncError> {
        let Some(log) = &self.0.options.reconcile_log else {
            return self.0.sync(&ctx, rs).await;
        };
        let start = std::time::SystemTime::now();
        let result = self.0.sync(&ctx, rs).await;
        log.record(ctx.key().as_str(), start, result.is_ok());
        result
    }

    async fn deleted(&self, rs: Arc<ReplicaSet>, _: Context) -> Result<(), SyncError> {
        tracing::debug!(rs = ?rs.metadata.name, "ReplicaSet has been deleted");
        let key = ObjectKey::of(rs.as_ref());
        self.0.expectations.forget(key.as_str());
        self.0.scale_down.forget(key.as_str());
        if let Some(uid) = rs.metadata.uid.as_deref() {
            self.0.events.forget(uid);
        }
        Ok(())
    }
}

impl Shared {
    /// Counts a ReplicaSet event and records the replicas it wants in the scale-down window.
    fn replicaset_event(&self, event: &ObjectEvent<'_, ReplicaSet>) {
        Stats::bump(&self.stats.replicaset_events);
        if let ObjectEvent::Added { object: rs, .. } | ObjectEvent::Updated { new: rs, .. } = event
        {
            let key = ObjectKey::of(rs.as_ref());
            self.scale_down
                .observe(key.as_str(), i64::from(replicas_of(rs)));
        }
    }

    /// The ReplicaSet an owner reference points at, if it is one we know with that uid.
    fn resolve(&self, namespace: Option<&str>, owner: &OwnerReference) -> Option<Arc<ReplicaSet>> {
        if owner.kind != "ReplicaSet" {
            return None;
        }
        let rs = self.replicasets.get(namespace, &owner.name)?;
        (rs.metadata.uid.as_deref() == Some(owner.uid.as_str())).then_some(rs)
    }

    /// Every ReplicaSet in the pod's namespace whose selector matches the pod's labels.
    fn replicasets_matching(&self, pod: &Pod) -> Vec<Arc<ReplicaSet>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        self.replicasets
            .namespace(namespace)
            .list(&LabelSelector::everything())
            .into_iter()
            .filter(|rs| selector_of(rs).is_ok_and(|s| s.matches(pod.metadata.labels.as_ref())))
            .collect()
    }

    /// One sync of one ReplicaSet: see the [module docs](self).
    async fn sync(&self, ctx: &Context, rs: Arc<ReplicaSet>) -> Result<Action, SyncError> {
        Stats::bump(&self.stats.syncs);
        let result = self.sync_inner(ctx, rs).await;
        if result.is_err() {
            Stats::bump(&self.stats.failed_syncs);
        }
        result
    }

    /// Every write goes through `ctx`, so it is recorded for the key: the next sync waits until
    /// the caches show them (the workers check before calling us).
    async fn sync_inner(&self, ctx: &Context, rs: Arc<ReplicaSet>) -> Result<Action, SyncError> {
        let key = ctx.key();
        // Mutant::NoExpectations: manage whether or not the last sync's creates and deletes
        // have been seen.
        let may_manage = self.expectations.satisfied(key.as_str())
            || self.options.mutant == Some(Mutant::NoExpectations);
        let selector = match selector_of(&rs) {
            Ok(selector) => selector,
            Err(reason) => {
                // Validation makes this impossible; retrying would not help.
                tracing::error!(%key, %reason, "ReplicaSet has an unusable selector");
                return Ok(Action::await_change());
            }
        };
        let namespace = key.namespace().unwrap_or_default();
        let (active, inactive): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = self
            .pods
            .namespace(namespace)
            .list(&LabelSelector::everything())
            .into_iter()
            .partition(|p| pod::is_active(p));
        // `status.terminatingReplicas` (1.33+, on by default since 1.35): its own pods, matching
        // its selector, that are being deleted and have not finished.
        let terminating = inactive
            .iter()
            .filter(|p| pod::is_terminating(p))
            .filter(|p| {
                owner::controller_of(&p.metadata)
                    .is_some_and(|o| Some(o.uid.as_str()) == rs.metadata.uid.as_deref())
            })
            .filter(|p| selector.matches(p.metadata.labels.as_ref()))
            .count();
        // Adopt matching orphans, release owned pods that no longer match (the ReplicaSet is
        // re-read from the server once before adopting); pods of other controllers are left alone.
        let claimed = Claimer::new(ctx.api_for_object(rs.as_ref()), rs.clone(), selector)?
            .claim(active)
            .await?;

        let desired = i64::from(replicas_of(&rs));
        let active = claimed.len() as i64;
        // Observed on every sync, managing or not, so the window holds each value the controller
        // saw. A surplus is deleted only down to the highest count wanted within the window.
        let floor = self.scale_down.observe(key.as_str(), desired);
        let diff = match active - desired {
            surplus if surplus > 0 => surplus.min(active - floor.floor).max(0),
            diff => diff,
        };
        let held_back = floor.recheck_in.filter(|_| active - desired > diff.max(0));
        if let Some(wait) = held_back {
            tracing::debug!(%key, desired, floor = floor.floor, ?wait, "scale-down held back");
        }
        let managed = if may_manage && rs.metadata.deletion_timestamp.is_none() {
            self.manage_replicas(ctx, &rs, &claimed, diff).await
        } else {
            Ok(ManageOutcome::Nothing)
        };
        let failure = managed
            .as_ref()
            .err()
            .map(|error| status::ManageFailure { diff, error });
        if let Ok(ManageOutcome::Wrote) = managed {
            // Pods were created or deleted: the status computed from the pods claimed above is
            // already out of date, and the events of those writes bring the key back at once, to a
            // sync that sees them (the workers wait for the cache to). Writing it now would only
            // be replaced a moment later (upstream writes it anyway: twice per ReplicaSet per
            // scale instead of once).
            return Ok(Action::await_change());
        }
        if let (Some(wait), Ok(ManageOutcome::Nothing)) = (held_back, &managed) {
            // Deletes are held back: the status written now (the surplus pods, the new
            // observedGeneration) would be replaced when they are made, one window from now.
            return Ok(Action::requeue(wait));
        }
        let new_status = status::calculate(&rs, &claimed, terminating, failure);
        let (written, changed) = match status::update(ctx, &rs, new_status).await {
            Ok(outcome) => outcome,
            // Mutant::ConflictAsSuccess: a refused status write counts as done.
            Err(error)
                if error.is_conflict()
                    && self.options.mutant == Some(Mutant::ConflictAsSuccess) =>
            {
                (rs.as_ref().clone(), false)
            }
            Err(error) => {
                if error.is_conflict() {
                    Stats::bump(&self.stats.status_conflicts);
                }
                return Err(error.into());
            }
        };
        if changed {
            Stats::bump(&self.stats.status_writes);
        }
        managed?;

        // With minReadySeconds, pods become available with no event to say so: look again then.
        let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
        let status = written.status.unwrap_or_default();
        let (ready, available) = (
            status.ready_replicas.unwrap_or(0),
            status.available_replicas.unwrap_or(0),
        );
        if min_ready > 0 && ready == replicas_of(&rs) && available != ready {
            let wait = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0));
            return Ok(Action::requeue(wait));
        }
        Ok(Action::await_change())
    }

    /// Creates or deletes pods to close the gap `diff` (= active − desired), at most the burst.
    async fn manage_replicas(
        &self,
        ctx: &Context,
        rs: &ReplicaSet,
        pods: &[Arc<Pod>],
        diff: i64,
    ) -> Result<ManageOutcome, SyncError> {
        let key = ctx.key();
        let burst = self.options.burst_replicas;
        let count = usize::try_from(diff.unsigned_abs())
            .unwrap_or(usize::MAX)
            .min(burst);
        if diff < 0 {
            self.expectations.expect_creations(key.as_str(), count);
            tracing::debug!(%key, need = count, "too few replicas; creating");
            let (created, result) = slow_start_batch(count, || self.create_pod(ctx, rs)).await;
            // The informer will never see the pods not created: stop expecting them.
            for _ in created..count {
                self.expectations.creation_observed(key.as_str());
            }
            return result.map(|()| ManageOutcome::wrote(created));
        }
        if diff > 0 {
            let related = self.related_pods(rs);
            let victims = ranking::pods_to_delete(pods, &related, count);
            self.expectations.expect_deletions(
                key.as_str(),
                victims
                    .iter()
                    .map(|p| ObjectKey::of(p.as_ref()).to_string()),
            );
            tracing::debug!(%key, count, "too many replicas; deleting");
            let deletes = victims.iter().map(|victim| async move {
                let name = victim.metadata.name.as_deref().unwrap_or_default();
                (victim, self.pod_control.delete(ctx, rs, name).await)
            });
            let mut first_error = None;
            let mut deleted = 0;
            for (victim, result) in join_all(deletes).await {
                match result {
                    Ok(()) => {
                        Stats::bump(&self.stats.pods_deleted);
                        deleted += 1;
                    }
                    Err(error) => {
                        // No delete event will come for it (or it already came): stop expecting it.
                        self.expectations.deletion_observed(
                            key.as_str(),
                            ObjectKey::of(victim.as_ref()).as_str(),
                        );
                        if !error.is_not_found() {
                            first_error.get_or_insert(SyncError::from(error));
                        }
                    }
                }
            }
            return first_error.map_or(Ok(ManageOutcome::wrote(deleted)), Err);
        }
        Ok(ManageOutcome::Nothing)
    }

    async fn create_pod(&self, ctx: &Context, rs: &ReplicaSet) -> Result<(), SyncError> {
        match self.pod_control.create(ctx, rs).await {
            Ok(()) => {
                Stats::bump(&self.stats.pods_created);
                Ok(())
            }
            // Every create would fail in a namespace being deleted; not an error of ours.
            Err(SyncError::Api(error)) if is_namespace_terminating(&error) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Pods controlled by any ReplicaSet with the same controller as `rs` (its Deployment's), or by
    /// `rs` alone if it has no controller: the family the deletion ranking spreads over nodes.
    fn related_pods(&self, rs: &ReplicaSet) -> Vec<Arc<Pod>> {
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        let owner_uid = controller_uid(&rs.metadata.owner_references);
        let family: HashSet<String> = match owner_uid {
            None => rs.metadata.uid.iter().cloned().collect(),
            Some(owner) => self
                .replicasets
                .namespace(namespace)
                .list(&LabelSelector::everything())
                .into_iter()
                .filter(|other| controller_uid(&other.metadata.owner_references) == Some(owner))
                .filter_map(|other| other.metadata.uid.clone())
                .collect(),
        };
        self.pods
            .namespace(namespace)
            .list(&LabelSelector::everything())
            .into_iter()
            .filter(|p| owner::controller_of(&p.metadata).is_some_and(|o| family.contains(&o.uid)))
            .collect()
    }
}

/// What managing replicas did, when it did not fail.
enum ManageOutcome {
    /// No pod was created or deleted.
    Nothing,
    /// Pods were created or deleted.
    Wrote,
}

impl ManageOutcome {
    fn wrote(count: usize) -> ManageOutcome {
        if count > 0 {
            ManageOutcome::Wrote
        } else {
            ManageOutcome::Nothing
        }
    }
}

/// Runs `count` calls of `call`, first 1 at once, then 2, 4, 8, …, stopping after the first batch
/// with a failure: a quota or admission error then costs one request, not hundreds. Returns how many
/// succeeded and the first error.
async fn slow_start_batch<F, Fut>(count: usize, call: F) -> (usize, Result<(), SyncError>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), SyncError>>,
{
    let mut succeeded = 0;
    let mut batch = count.min(1);
    while batch > 0 {
        let results = join_all((0..batch).map(|_| call())).await;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(()) => succeeded += 1,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if let Some(error) = first_error {
            return (succeeded, Err(error));
        }
        batch = (batch * 2).min(count - succeeded);
    }
    (succeeded, Ok(()))
}

fn selector_of(rs: &ReplicaSet) -> Result<LabelSelector, String> {
    LabelSelector::from_spec(&rs.spec.selector).map_err(|e| e.to_string())
}

/// `spec.replicas`, which the API server defaults to 1.
fn replicas_of(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

fn controller_uid(owners: &Option<Vec<OwnerReference>>) -> Option<&str> {
    owners
        .as_deref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

fn is_namespace_terminating(error: &Error) -> bool {
    error
        .api()
        .and_then(|api| api.details.as_ref())
        .and_then(|details| details.causes.as_ref())
        .is_some_and(|causes| {
            causes
                .iter()
                .any(|c| c.reason.as_deref() == Some("NamespaceTerminating"))
        })
}

/// Pod events: lower expectations and queue the pod's ReplicaSet(s).
struct PodEvents(Arc<Shared>);

impl PodEvents {
    fn handle(&self, enqueue: &Enqueue, event: &ObjectEvent<'_, Pod>) {
        Stats::bump(&self.0.stats.pod_events);
        match event {
            ObjectEvent::Added { object, .. } => self.added(enqueue, object),
            ObjectEvent::Updated { old, new } => self.updated(enqueue, old, new),
            ObjectEvent::Deleted(gone) => self.deleted(enqueue, gone.object()),
        }
    }

    /// The controlling ReplicaSet of `pod`, if it is one we know.
    fn owner(&self, pod: &Pod) -> Option<Arc<ReplicaSet>> {
        let owner = owner::controller_of(&pod.metadata)?;
        self.0.resolve(pod.metadata.namespace.as_deref(), owner)
    }

    fn enqueue_matching(&self, enqueue: &Enqueue, pod: &Pod) {
        for rs in self.0.replicasets_matching(pod) {
            enqueue.add(ObjectKey::of(rs.as_ref()));
        }
    }

    fn added(&self, enqueue: &Enqueue, pod: &Arc<Pod>) {
        if pod.metadata.deletion_timestamp.is_some() {
            // Already being deleted when we first see it (e.g. after a restart): a deletion, not a
            // creation we were waiting for.
            return self.deleted(enqueue, pod);
        }
        if owner::controller_of(&pod.metadata).is_some() {
            if let Some(rs) = self.owner(pod) {
                let key = ObjectKey::of(rs.as_ref());
                self.0.expectations.creation_observed(key.as_str());
                enqueue.add(key);
            }
            return;
        }
        // An orphan: every ReplicaSet that might adopt it should look.
        self.enqueue_matching(enqueue, pod);
    }

    fn updated(&self, enqueue: &Enqueue, old: &Arc<Pod>, new: &Arc<Pod>) {
        if old.metadata.resource_version == new.metadata.resource_version {
            // A resync; pods that did not change need no sync.
            return;
        }
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() {
            // A graceful delete has begun: for the controller the pod is gone now, not when the
            // kubelet finishes. If its labels changed too, the old owner may need to know.
            self.deleted(enqueue, new);
            if labels_changed {
                self.deleted(enqueue, old);
            }
            return;
        }
        let (old_ref, new_ref) = (
            owner::controller_of(&old.metadata),
            owner::controller_of(&new.metadata),
        );
        let ref_changed = old_ref != new_ref;
        if ref_changed {
            if let Some(rs) = self.owner(old) {
                enqueue.add(ObjectKey::of(rs.as_ref()));
            }
        }
        if new_ref.is_some() {
            if let Some(rs) = self.owner(new) {
                enqueue.add(ObjectKey::of(rs.as_ref()));
                // Becoming ready starts the minReadySeconds clock; look again when it has run.
                let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
                if min_ready > 0 && !pod::is_ready(old) && pod::is_ready(new) {
                    let wait = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0) + 1);
                    enqueue.add_after(ObjectKey::of(rs.as_ref()), wait);
                }
            }
            return;
        }
        if labels_changed || ref_changed {
            self.enqueue_matching(enqueue, new);
        }
    }

    fn deleted(&self, enqueue: &Enqueue, pod: &Pod) {
        if let Some(rs) = self.owner(pod) {
            let key = ObjectKey::of(rs.as_ref());
            self.0
                .expectations
                .deletion_observed(key.as_str(), ObjectKey::of(pod).as_str());
            enqueue.add(key);
        }
    }
}
