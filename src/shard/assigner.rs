//! The assigner: one replica of the ring (elected on the Lease `<ring>-assigner`, so there is
//! nothing extra to deploy) decides which member owns each object and writes it down.
//!
//! ```text
//!  Leases <ring>-shard-*  ──watch──▶ liveness (each Lease's last change, on this replica's clock)
//!                                        │ every tick: live set changed? ─▶ new HashRing, queue every object
//!  primary objects (all) ──watch──▶ queue of keys ──▶ worker: desired = ring.owner(key)
//!
//!   owner label   what the worker does                                         metric
//!   ───────────   ──────────────────────────────────────────────────────────   ──────────────
//!   none          label it desired (resourceVersion precondition)             assignments
//!   = desired     nothing (clears a stale drain label)
//!   live A        label drain = desired; A hands it over when its worker      drains
//!                 gets to it (see super::gate)
//!   dead A        relabel A's children of it (found by a LIST of A's label,   moves
//!                 once per dead member), then the object: owner = desired,
//!                 handover annotation = last child's resourceVersion
//! ```
//!
//! **Dead** means: the Lease was released (no holder), is gone, or has not changed for its
//! `leaseDurationSeconds` as measured on this replica's monotonic clock. The member's own write
//! gate shut a renew deadline after its last renewal, which is earlier, so by the time its
//! objects move nothing it sends can land (the same argument as leader election's). A new assigner
//! starts counting from when it first sees each Lease, so it may take up to one lease duration to
//! notice a member that died before it was elected.
//!
//! Every write the assigner makes goes through a client gated by its own election, and carries the
//! object's resourceVersion as a precondition, so an assigner deposed mid-write, or working from
//! a stale cache, fails with a conflict instead of overwriting.
//!
//! **Cost.** The assigner caches every primary object (not the dependents): for the ReplicaSet
//! sample, the ReplicaSets and not the Pods. A new object is labelled one watch event and one PATCH
//! after its creation (`shard_assignment_seconds`); until then no member reconciles it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::ShardError;
use super::dependents::{ChildRef, DependentKind, relabel};
use super::member::ShardMember;
use super::ring::HashRing;
use crate::api::{Patch, PatchParams, PostParams};
use crate::informer::{HandlerFns, Lister, ObjectKey, Scope, SharedIndexInformer};
use crate::leader::{LeaderElector, Leadership};
use crate::workqueue::WorkQueue;
use crate::{Api, ApiResource, Client, DynamicObject, ListWatch, Object};

/// How often the assigner re-reads the member Leases for liveness.
const TICK: Duration = Duration::from_millis(500);

/// Keys the assigner works on at once.
const WORKERS: usize = 4;

/// Runs this replica's candidacy for the assigner's Lease until `shutdown`, assigning objects of
/// `K` in `scope` while elected.
pub(crate) async fn run_candidacy<K: Object + k8s_openapi::Resource>(
    member: ShardMember,
    scope: Scope,
    dependents: Vec<Arc<dyn DependentKind>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ShardError> {
    let elector = LeaderElector::builder(
        member.base_client(),
        member.namespace(),
        &member.marks().assigner_lease(),
    )
    .identity(member.identity())
    .timings(member.timings())
    .release_on_cancel(true)
    .build()?;
    let leadership = elector.leadership();
    let assigning = async {
        loop {
            if leadership.acquired().await.is_err() {
                // Not yet: the elector stopped (shutdown); nothing more to do.
                std::future::pending::<()>().await;
            }
            let assigner = Assigner::<K>::new(&member, &scope, dependents.clone(), &leadership);
            let lost = leadership.lost();
            tokio::select! {
                () = lost => {}
                () = assigner.run() => {}
            }
            assigner.stop();
            tracing::info!(ring = %member.marks().ring(), member = %member.identity(), "no longer the assigner");
        }
    };
    tokio::select! {
        outcome = elector.run(shutdown) => {
            tracing::info!(ring = %member.marks().ring(), ?outcome, "assigner candidacy ended");
            outcome?;
        }
        () = assigning => {}
    }
    Ok(())
}

/// The holder the assigner writes into a dead member's Lease while it moves that member's objects
/// (see [`Liveness::Fenced`]). Not a valid member name, so no member can mistake it for itself.
const FENCE_HOLDER: &str = "ferrokube.dev/fenced-by-assigner";

/// What the assigner knows of one member Lease, on its own monotonic clock.
struct Seen {
    resource_version: String,
    first_seen: Instant,
    /// When the Lease last changed since this assigner first saw it; `None`: not yet.
    changed_at: Option<Instant>,
    /// When this assigner last wrote the fence.
    fence_renewed: Option<Instant>,
}

/// A member as the assigner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    /// Its Lease names it and changed within the lease duration: it gets objects.
    Live,
    /// Its Lease names it, but this assigner has not yet seen it renewed (it was elected less than
    /// a lease duration ago): its objects stay where they are, it gets no new ones, and no live
    /// member is drained until it is known.
    Unknown,
    /// Released, or not renewed for the lease duration: its write gate is shut; the assigner
    /// fences its Lease before moving anything.
    Dead,
    /// Its Lease holds the fence: no incarnation of it can be active, so its objects (children
    /// first, then the object) move to live members. The fence is renewed until it owns nothing,
    /// then lifted (released), and the member may join again. Without the fence, a member
    /// restarted under the same name would see an object still labelled for it whose children
    /// had already been moved away, and create them again.
    Fenced,
}

impl Liveness {
    fn as_str(self) -> &'static str {
        match self {
            Liveness::Live => "live",
            Liveness::Unknown => "unknown",
            Liveness::Dead => "dead",
            Liveness::Fenced => "fenced",
        }
    }
}

/// The liveness of `member` whose Lease names `holder`, given what was `seen` of it by `now`.
fn liveness(
    member: &str,
    holder: Option<&str>,
    seen: &Seen,
    now: Instant,
    lease: Duration,
) -> Liveness {
    match holder {
        Some(FENCE_HOLDER) => Liveness::Fenced,
        Some(holder) if holder == member => match seen.changed_at {
            Some(changed) if now.duration_since(changed) < lease => Liveness::Live,
            Some(_) => Liveness::Dead,
            None if now.duration_since(seen.first_seen) < lease => Liveness::Unknown,
            None => Liveness::Dead,
        },
        _ => Liveness::Dead,
    }
}

/// One elected term of the assigner.
struct Assigner<K> {
    member: ShardMember,
    client: Client,
    resource: ApiResource,
    primaries: SharedIndexInformer<K>,
    leases: SharedIndexInformer<Lease>,
    dependents: Vec<Arc<dyn DependentKind>>,
    queue: WorkQueue<ObjectKey>,
    /// Which members are live, and the ring over them.
    ring: watch::Sender<Members>,
    /// When each object still without a member was first seen (for `shard_assignment_seconds`).
    unassigned_since: Arc<Mutex<HashMap<ObjectKey, Instant>>>,
    /// Children of dead members, by member then owner uid, from one LIST each: the list's
    /// resourceVersion and what it found still to relabel.
    sweeps: tokio::sync::Mutex<HashMap<String, Sweep>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Members {
    /// Every member with a Lease.
    states: BTreeMap<String, Liveness>,
    /// The live ones: the ring is over them.
    live: BTreeSet<String>,
    ring: HashRing,
}

impl Members {
    fn insert(&mut self, member: &str, liveness: Liveness) {
        self.states.insert(member.to_string(), liveness);
        if liveness == Liveness::Live {
            self.live.insert(member.to_string());
        }
    }

    fn state(&self, member: &str) -> Liveness {
        // No Lease at all (deleted, or a label naming a member that never joined): nothing can
        // act as it without first creating its Lease, which the assigner would see.
        self.states.get(member).copied().unwrap_or(Liveness::Fenced)
    }

    fn any_unknown(&self) -> bool {
        self.states.values().any(|l| *l == Liveness::Unknown)
    }
}

struct Sweep {
    version: u64,
    by_owner: HashMap<String, Vec<(usize, ChildRef)>>,
}

impl<K: Object + k8s_openapi::Resource> Assigner<K> {
    fn new(
        member: &ShardMember,
        scope: &Scope,
        dependents: Vec<Arc<dyn DependentKind>>,
        leadership: &Leadership,
    ) -> Assigner<K> {
        let base = member.base_client();
        let mut api: Api<K> = Api::all(base.clone());
        if let Some(namespace) = &scope.namespace {
            api = api.in_namespace(namespace);
        }
        let mut list_watch = ListWatch::new(api);
        if let Some(labels) = &scope.label_selector {
            list_watch = list_watch.labels(labels);
        }
        if let Some(fields) = &scope.field_selector {
            list_watch = list_watch.fields(fields);
        }
        let leases = ListWatch::new(Api::<Lease>::namespaced(base.clone(), member.namespace()));
        Assigner {
            member: member.clone(),
            client: base.with_write_gate(leadership.clone()),
            resource: ApiResource::of::<K>(),
            primaries: SharedIndexInformer::builder(list_watch).build(),
            leases: SharedIndexInformer::builder(leases).build(),
            dependents,
            queue: WorkQueue::builder()
                .name(format!("{}-assigner", member.marks().ring()))
                .build(),
            ring: watch::Sender::new(Members::default()),
            unassigned_since: Arc::new(Mutex::new(HashMap::new())),
            sweeps: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    fn stop(&self) {
        self.queue.shut_down();
        self.primaries.stop();
        self.leases.stop();
    }

    async fn run(&self) {
        let ring_name = self.member.marks().ring().to_string();
        tracing::info!(ring = %ring_name, member = %self.member.identity(), "assigning");
        let owner_label = self.member.marks().owner_label().to_string();
        let queue = self.queue.clone();
        let unassigned = self.unassigned_since.clone();
        let queue_update = self.queue.clone();
        let unassigned_update = self.unassigned_since.clone();
        let label_of = move |object: &K| {
            object
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(&owner_label))
                .is_some()
        };
        let label_of_update = label_of.clone();
        let handlers = HandlerFns::<K>::new()
            .on_add(move |object, _| {
                let key = ObjectKey::of(object.as_ref());
                if !label_of(object) {
                    unassigned
                        .lock()
                        .entry(key.clone())
                        .or_insert_with(Instant::now);
                }
                queue.add(key);
            })
            .on_update(move |_, object| {
                let key = ObjectKey::of(object.as_ref());
                if !label_of_update(object) {
                    unassigned_update
                        .lock()
                        .entry(key.clone())
                        .or_insert_with(Instant::now);
                }
                queue_update.add(key);
            });
        let started = self
            .leases
            .start()
            .and_then(|()| self.primaries.start())
            .and_then(|()| self.primaries.add_event_handler(handlers).map(|_| ()));
        if let Err(error) = started {
            tracing::error!(ring = %ring_name, %error, "assigner could not start its informers");
            return;
        }
        if !(self.leases.wait_for_cache_sync().await && self.primaries.wait_for_cache_sync().await)
        {
            return;
        }
        let workers = futures_util::future::join_all((0..WORKERS).map(|_| self.work()));
        tokio::select! {
            () = self.watch_members() => {}
            _ = workers => {}
        }
    }

    /// Re-reads the member Leases every tick: works out each member's [`Liveness`], fences dead
    /// members, renews and lifts fences; when the set changes, rebuilds the ring and queues every
    /// object.
    async fn watch_members(&self) {
        let marks = self.member.marks().clone();
        let mut seen: HashMap<String, Seen> = HashMap::new();
        let lister: Lister<Lease> = self.leases.lister();
        let mut ticks = tokio::time::interval(TICK);
        loop {
            ticks.tick().await;
            let now = Instant::now();
            let mut members = Members::default();
            for lease in lister.list(&crate::informer::LabelSelector::everything()) {
                let Some(name) = lease.metadata.name.as_deref() else {
                    continue;
                };
                let Some(member) = marks.member_of_lease(name) else {
                    continue;
                };
                let version = lease.resource_version().to_string();
                let entry = seen.entry(member.to_string()).or_insert_with(|| Seen {
                    resource_version: version.clone(),
                    first_seen: now,
                    changed_at: None,
                    fence_renewed: None,
                });
                if entry.resource_version != version {
                    entry.resource_version = version;
                    entry.changed_at = Some(now);
                }
                let holder = lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref());
                let liveness = liveness(
                    member,
                    holder,
                    entry,
                    now,
                    self.member.timings().lease_duration,
                );
                members.insert(member, liveness);
                match liveness {
                    Liveness::Dead => self.fence(&lease, entry).await,
                    Liveness::Fenced => {
                        if self.owns_nothing(member) {
                            self.lift_fence(&lease, member).await;
                        } else if entry.fence_renewed.is_none_or(|at| {
                            now.duration_since(at) >= self.member.timings().retry_period
                        }) {
                            self.fence(&lease, entry).await;
                        }
                    }
                    Liveness::Live | Liveness::Unknown => {}
                }
            }
            members.ring = HashRing::new(members.live.iter().cloned());
            let changed = self.ring.send_if_modified(|current| {
                if current.states == members.states {
                    false
                } else {
                    *current = members.clone();
                    true
                }
            });
            if changed {
                tracing::info!(ring = %marks.ring(), members = ?members.states, "members changed; rebalancing");
                for (member, liveness) in &members.states {
                    pipeline_event!(stage = "shard", op = "member", instance = %marks.ring(), key = %member, state = liveness.as_str());
                }
                if let Some(metrics) = self.member.metrics() {
                    metrics.set_members(marks.ring(), members.live.len());
                }
                for object in self.primaries.store().list() {
                    self.queue.add(ObjectKey::of(object.as_ref()));
                }
            }
        }
    }

    /// Whether no object in the cache is labelled as `member`'s any more.
    fn owns_nothing(&self, member: &str) -> bool {
        let label = self.member.marks().owner_label();
        !self.primaries.store().list().iter().any(|object| {
            object
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(label))
                .map(String::as_str)
                == Some(member)
        })
    }

    /// Writes (or renews) the fence on a dead member's Lease: holder [`FENCE_HOLDER`], so that no
    /// incarnation of that member can join while its objects move. A conflict (the member took
    /// its Lease again first) is left for the next tick.
    async fn fence(&self, lease: &Lease, seen: &mut Seen) {
        let mut fenced = lease.clone();
        let spec = fenced.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(FENCE_HOLDER.to_string());
        spec.renew_time = Some(crate::leader::record::now());
        let name = lease.metadata.name.clone().unwrap_or_default();
        let api = Api::<Lease>::namespaced(self.client.clone(), self.member.namespace());
        match api.replace(&name, &PostParams::default(), &fenced).await {
            Ok(_) => {
                seen.fence_renewed = Some(Instant::now());
                tracing::debug!(ring = %self.member.marks().ring(), lease = %name, "fenced");
            }
            Err(error) => {
                tracing::debug!(ring = %self.member.marks().ring(), lease = %name, %error, "fence not written")
            }
        }
    }

    /// Releases a fenced Lease whose member owns nothing any more: the member may join again.
    async fn lift_fence(&self, lease: &Lease, member: &str) {
        let mut released = lease.clone();
        let spec = released.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(String::new());
        spec.renew_time = Some(crate::leader::record::now());
        let name = lease.metadata.name.clone().unwrap_or_default();
        let api = Api::<Lease>::namespaced(self.client.clone(), self.member.namespace());
        match api.replace(&name, &PostParams::default(), &released).await {
            Ok(_) => {
                tracing::info!(ring = %self.member.marks().ring(), %member, "every object moved; the member may join again")
            }
            Err(error) => {
                tracing::debug!(ring = %self.member.marks().ring(), lease = %name, %error, "fence not lifted")
            }
        }
    }

    async fn work(&self) {
        while let Some(key) = self.queue.get().await {
            match self.assign(&key).await {
                Ok(()) => self.queue.forget(&key),
                Err(error) => {
                    tracing::warn!(ring = %self.member.marks().ring(), %key, %error, "assignment failed; retrying");
                    self.queue.add_rate_limited(key.clone());
                }
            }
            self.queue.done(&key);
        }
    }

    /// One object's assignment step (see the table in the [module docs](self)).
    async fn assign(&self, key: &ObjectKey) -> Result<(), ShardError> {
        let Some(object) = self.primaries.lister().get(key.namespace(), key.name()) else {
            self.unassigned_since.lock().remove(key);
            return Ok(());
        };
        let members = self.ring.borrow().clone();
        let Some(desired) = members.ring.owner(key.as_str()).map(str::to_string) else {
            return Ok(()); // no live member: nothing to give it to yet
        };
        let marks = self.member.marks();
        let labels = object.meta().labels.clone().unwrap_or_default();
        let owner = labels.get(marks.owner_label());
        let drain = labels.get(marks.drain_label());
        let ring = marks.ring();
        match owner {
            None => {
                self.write(
                    &object,
                    json!({marks.owner_label(): desired, marks.drain_label(): Value::Null}),
                    None,
                )
                .await?;
                let since = self.unassigned_since.lock().remove(key);
                if let Some(metrics) = self.member.metrics() {
                    metrics.assigned(ring, &desired, since.map(|s| s.elapsed().as_secs_f64()));
                }
                tracing::debug!(%ring, %key, to = %desired, "assigned");
                pipeline_event!(stage = "shard", op = "owner", instance = %ring, key = %key, state = %desired, cause = "assigned");
            }
            Some(owner) if *owner == desired => {
                if drain.is_some() {
                    self.write(&object, json!({marks.drain_label(): Value::Null}), None)
                        .await?;
                }
            }
            Some(owner) if members.state(owner) == Liveness::Live => {
                // While a member is unknown the ring may still change: move nothing between
                // live members yet.
                if drain != Some(&desired) && !members.any_unknown() {
                    self.write(&object, json!({marks.drain_label(): desired}), None)
                        .await?;
                    if let Some(metrics) = self.member.metrics() {
                        metrics.drain_asked(ring, owner);
                    }
                    tracing::debug!(%ring, %key, from = %owner, to = %desired, "asked to hand over");
                    pipeline_event!(stage = "shard", op = "owner", instance = %ring, key = %key, state = %owner, draining_to = %desired);
                }
            }
            Some(owner) if members.state(owner) != Liveness::Fenced => {
                // Unknown (wait to see it renew) or dead but not yet fenced (next tick): later.
            }
            Some(dead) => {
                let last = self.move_children(&object, dead, &desired).await?;
                let annotation = last.map_or(Value::Null, |v| Value::String(v.to_string()));
                self.write(
                    &object,
                    json!({marks.owner_label(): desired, marks.drain_label(): Value::Null}),
                    Some(annotation),
                )
                .await?;
                if let Some(metrics) = self.member.metrics() {
                    metrics.moved(ring, &desired);
                }
                tracing::info!(%ring, %key, from = %dead, to = %desired, "moved from a dead member");
                pipeline_event!(stage = "shard", op = "owner", instance = %ring, key = %key, state = %desired, moved_from = %dead);
            }
        }
        Ok(())
    }

    /// Relabels `dead`'s children of `object` to `to`; the resourceVersion of the last relabel.
    async fn move_children(
        &self,
        object: &K,
        dead: &str,
        to: &str,
    ) -> Result<Option<u64>, ShardError> {
        if self.dependents.is_empty() {
            return Ok(None);
        }
        let uid = object.meta().uid.clone().unwrap_or_default();
        let object_version: u64 = object.resource_version().parse().unwrap_or(u64::MAX);
        let mut sweeps = self.sweeps.lock().await;
        let stale = sweeps.get(dead).is_none_or(|s| s.version < object_version);
        if stale {
            let mut by_owner: HashMap<String, Vec<(usize, ChildRef)>> = HashMap::new();
            let mut version = u64::MAX;
            for (index, dependents) in self.dependents.iter().enumerate() {
                let (listed_at, children) = dependents
                    .list_marked(&self.client, self.member.marks(), dead)
                    .await
                    .map_err(|source| ShardError::Write {
                        what: format!("list {} of {dead}", dependents.resource().kind),
                        source,
                    })?;
                version = version.min(listed_at);
                for child in children {
                    let owner = child.owner_uid.clone().unwrap_or_default();
                    by_owner.entry(owner).or_default().push((index, child));
                }
            }
            sweeps.insert(dead.to_string(), Sweep { version, by_owner });
        }
        let children = sweeps
            .get_mut(dead)
            .and_then(|s| s.by_owner.remove(&uid))
            .unwrap_or_default();
        drop(sweeps);
        let mut last = None;
        for (index, child) in &children {
            let dependents = &self.dependents[*index];
            let written = relabel(
                &self.client,
                dependents.resource(),
                self.member.marks(),
                child,
                to,
            )
            .await
            .map_err(|source| ShardError::Write {
                what: format!("relabel {} {}", dependents.resource().kind, child.name),
                source,
            })?;
            if let Some(version) = written {
                last = Some(last.map_or(version, |l: u64| l.max(version)));
            }
        }
        Ok(last)
    }

    /// A merge patch of `object`'s labels (and the handover annotation), with its
    /// resourceVersion as precondition.
    async fn write(
        &self,
        object: &K,
        labels: Value,
        handover: Option<Value>,
    ) -> Result<(), ShardError> {
        let mut metadata = json!({
            "resourceVersion": object.resource_version(),
            "labels": labels,
        });
        if let Some(annotation) = handover {
            metadata["annotations"] =
                json!({self.member.marks().handover_annotation(): annotation});
        }
        let api = Api::dynamic(
            self.client.clone(),
            self.resource.clone(),
            object.meta().namespace.as_deref(),
        );
        let name = object.meta().name.clone().unwrap_or_default();
        let _: DynamicObject = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": metadata})),
            )
            .await
            .map_err(|source| ShardError::Write {
                what: format!("label {}", ObjectKey::of(object)),
                source,
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(first_seen: Instant, changed_at: Option<Instant>) -> Seen {
        Seen {
            resource_version: "1".into(),
            first_seen,
            changed_at,
            fence_renewed: None,
        }
    }

    #[test]
    fn shard_liveness_of_a_member_lease() {
        let lease = Duration::from_secs(15);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Never seen renewing: unknown for a lease duration from first sight, then dead.
        assert_eq!(
            liveness("a", Some("a"), &seen(t0, None), at(14), lease),
            Liveness::Unknown
        );
        assert_eq!(
            liveness("a", Some("a"), &seen(t0, None), at(15), lease),
            Liveness::Dead
        );
        // Seen renewing: live until a lease duration passes without a change.
        assert_eq!(
            liveness("a", Some("a"), &seen(t0, Some(at(3))), at(17), lease),
            Liveness::Live
        );
        assert_eq!(
            liveness("a", Some("a"), &seen(t0, Some(at(3))), at(18), lease),
            Liveness::Dead
        );
        // Released, or held by someone else: dead at once; the fence is the fence.
        assert_eq!(
            liveness("a", Some(""), &seen(t0, Some(at(3))), at(4), lease),
            Liveness::Dead
        );
        assert_eq!(
            liveness("a", None, &seen(t0, Some(at(3))), at(4), lease),
            Liveness::Dead
        );
        assert_eq!(
            liveness("a", Some("b"), &seen(t0, Some(at(3))), at(4), lease),
            Liveness::Dead
        );
        assert_eq!(
            liveness("a", Some(FENCE_HOLDER), &seen(t0, None), at(0), lease),
            Liveness::Fenced
        );
    }

    #[test]
    fn shard_members_without_a_lease_count_as_fenced() {
        let mut members = Members::default();
        members.insert("a", Liveness::Live);
        members.insert("b", Liveness::Unknown);
        assert_eq!(members.state("a"), Liveness::Live);
        assert_eq!(members.state("gone"), Liveness::Fenced);
        assert!(members.any_unknown());
        assert_eq!(members.live.iter().collect::<Vec<_>>(), ["a"]);
    }
}
