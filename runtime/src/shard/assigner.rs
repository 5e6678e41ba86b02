//! The assigner: one replica of the ring (elected on the Lease `<ring>-assigner`, so there is
//! nothing extra to deploy) decides which member owns each object and writes it down.
//!
//! ```text
//!  member Leases (label shard.ferrokube.dev/ring) ──watch──▶ liveness, on this replica's clock
//!      │ every tick: fence the dead, renew or lift fences; states changed? ─▶ new HashRing, queue all
//!  primary objects (all) ──watch──▶ queue of keys ──▶ worker: desired = ring.owner(key)
//!
//!   owner label    what the worker does                                          metric
//!   ────────────   ───────────────────────────────────────────────────────────   ───────────
//!   none           label it desired (resourceVersion precondition)              assignments
//!   = desired      nothing
//!   live A         label drain = desired, unless a drain is already set: A      drains
//!                  hands it over to the drain's member when its worker gets to
//!                  it (see super::gate); a drain is never changed or cleared
//!                  while A is live, so a handover retried halfway goes on to
//!                  the same member (a later move fixes a target that is no
//!                  longer right)
//!   unknown A      nothing yet (wait until A is seen renewing, or not)
//!   dead A         nothing yet: the next tick fences A's Lease
//!   fenced A       relabel A's children of it (from one LIST of A's label, and   moves
//!                  of the drain member's label if a handover was under way),
//!                  then the object: owner = desired, handover annotation
//! ```
//!
//! **Dead** means: the Lease was released (no holder), or has not changed for the lease duration
//! as measured on this replica's monotonic clock, or a label names a member that has had no Lease
//! for that long. The member's own write gate shut a renew deadline after its last renewal, which
//! is earlier, so nothing it sends can land once it is dead (the same argument as leader
//! election's). A new assigner counts from when it first sees each Lease, so it may take up to one
//! lease duration to notice a member that died before it was elected.
//!
//! **Fenced**: before it moves anything of a dead member, the assigner writes its own holder into
//! that member's Lease (creating it if there is none), and renews it, so that no incarnation of the
//! member, not even one restarted under the same name, can join while its objects are half moved.
//! Once no object is labelled for it, the assigner deletes the Lease: the member may join again,
//! and a member that never returns leaves nothing behind.
//!
//! The assigner's writes go through a client gated by its own election. Object writes carry the
//! object's resourceVersion as a precondition, so an assigner deposed mid-write, or working from a
//! stale cache, fails with a conflict instead of overwriting; the relabels of children carry none
//! (they only set the label, and a child already relabelled is relabelled again to the same).
//!
//! **Cost.** The assigner caches every primary object (not the dependents): for the ReplicaSet
//! sample, the ReplicaSets and not the Pods. A new object is labelled one watch event and one PATCH
//! after its creation (`shard_assignment_seconds`); until then no member reconciles it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::ShardError;
use super::dependents::{ChildRef, DependentKind, MovedChildren};
use super::marks::RING_LABEL;
use super::member::ShardMember;
use super::ring::HashRing;
use crate::leader::{LeaderElector, Leadership, RunOutcome};
use ferrokube_client::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use ferrokube_client::list_watch::ListWatch;
use ferrokube_client::{Api, Client, DynamicObject};
use ferrokube_core::pipeline_event;
use ferrokube_core::{ApiResource, Kind, Object};
use ferrokube_core::{LabelSelector, ObjectKey, Scope};
use ferrokube_informer::{HandlerFns, SharedIndexInformer};
use ferrokube_workqueue::WorkQueue;

/// How often the assigner re-reads the member Leases for liveness.
const TICK: Duration = Duration::from_millis(500);

/// Keys the assigner works on at once.
const WORKERS: usize = 4;

/// Runs this replica's candidacy for the assigner's Lease until `shutdown`, assigning objects of
/// `K` in `scope` while elected. A lost election is campaigned for again.
pub(crate) async fn run_candidacy<K: Kind>(
    member: ShardMember,
    dynamic: K::DynamicType,
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
                // The elector stopped (shutdown, or between two campaigns): wait for the next.
                tokio::time::sleep(member.timings().retry_period).await;
                continue;
            }
            let assigner =
                Assigner::<K>::new(&member, &dynamic, &scope, dependents.clone(), &leadership);
            let lost = leadership.lost();
            tokio::select! {
                // The loss first: a former assigner must not assign on.
                biased;
                () = lost => {}
                () = assigner.run() => {}
            }
            assigner.stop();
            tracing::info!(ring = %member.marks().ring(), member = %member.identity(), "no longer the assigner");
        }
    };
    let campaigns = async {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let outcome = elector.run(shutdown.as_mut()).await?;
            match outcome {
                RunOutcome::Lost(reason) => {
                    tracing::warn!(ring = %member.marks().ring(), %reason, "lost the assigner Lease; campaigning again");
                }
                outcome => {
                    tracing::info!(ring = %member.marks().ring(), ?outcome, "assigner candidacy ended");
                    return Ok::<(), ShardError>(());
                }
            }
        }
    };
    tokio::select! {
        // The campaigns first: they carry the outcome (a shutdown, an error); `assigning` never
        // ends by itself.
        biased;
        ended = campaigns => ended?,
        () = assigning => {}
    }
    Ok(())
}

/// The holder the assigner writes into a dead member's Lease while it moves that member's objects
/// (see [`Liveness::Fenced`]). Not a valid member name, so no member can mistake it for itself.
const FENCE_HOLDER: &str = "ferrokube.dev/fenced-by-assigner";

/// What the assigner knows of one member, on its own monotonic clock: the tokio runtime's
/// (`tokio::time::Instant`), which its tick and every elector's renewals count on too. Real time
/// in production (so liveness is judged as before); in a run on a paused runtime, virtual time,
/// in step with the members' electors.
/// (The server-side mode's members judge their peers with the same record; see `super::ranges`.)
pub(super) struct Seen {
    /// Its Lease's resourceVersion (`None`: no Lease).
    pub(super) resource_version: Option<String>,
    pub(super) first_seen: Instant,
    /// When the Lease last changed since this assigner first saw it; `None`: not yet.
    pub(super) changed_at: Option<Instant>,
    /// When this assigner last wrote the fence.
    pub(super) fence_renewed: Option<Instant>,
}

/// A member as the assigner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Liveness {
    /// Its Lease names it and changed within the lease duration: it gets objects.
    Live,
    /// Its Lease names it but this assigner has not seen it renewed yet (it was elected less than a
    /// lease duration ago), or a label names it and it has no Lease (yet): its objects stay where
    /// they are, no object is assigned or drained until it is known.
    Unknown,
    /// Released, not renewed for the lease duration, or without a Lease for that long: its write
    /// gate is shut; the assigner fences its Lease before moving anything.
    Dead,
    /// Its Lease holds the fence: no incarnation of it can be active, so its objects (children
    /// first, then the object) move to live members. Without the fence, a member restarted under
    /// the same name would see an object still labelled for it whose children had already been
    /// moved away, and create them again.
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

/// The liveness of `member` whose Lease names `holder` (`None` inside: no Lease at all), given
/// what was `seen` of it by `now`.
pub(super) fn liveness(
    member: &str,
    holder: Option<Option<&str>>,
    seen: &Seen,
    now: Instant,
    lease: Duration,
) -> Liveness {
    let Some(holder) = holder else {
        return if now.duration_since(seen.first_seen) < lease {
            Liveness::Unknown
        } else {
            Liveness::Dead
        };
    };
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
    /// Real time: the first sighting is stamped by an informer handler on its own thread, outside
    /// the runtime, so the runtime's clock cannot be read there; only a metric depends on it.
    unassigned_since: Arc<Mutex<HashMap<ObjectKey, std::time::Instant>>>,
    /// Children of fenced members, from one LIST each: what is still to relabel, by owner uid.
    sweeps: tokio::sync::Mutex<HashMap<String, Sweep>>,
    /// Moves begun and not finished: the children relabelled so far.
    moved: MovedChildren,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Members {
    /// Every member with a Lease, or named by an object's label.
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

    /// A member the last tick did not see (its label appeared since): unknown until it does.
    fn state(&self, member: &str) -> Liveness {
        self.states
            .get(member)
            .copied()
            .unwrap_or(Liveness::Unknown)
    }

    fn any_unknown(&self) -> bool {
        self.states.values().any(|l| *l == Liveness::Unknown)
    }
}

/// A fenced member's children, listed once (again when an object moved to it after the list).
struct Sweep {
    version: u64,
    by_owner: HashMap<String, Vec<(usize, ChildRef)>>,
}

impl<K: Kind> Assigner<K> {
    fn new(
        member: &ShardMember,
        dynamic: &K::DynamicType,
        scope: &Scope,
        dependents: Vec<Arc<dyn DependentKind>>,
        leadership: &Leadership,
    ) -> Assigner<K> {
        let base = member.base_client();
        let list_watch = ListWatch::<K>::scoped(base.clone(), dynamic, scope);
        let leases = ListWatch::new(Api::<Lease>::namespaced(base.clone(), member.namespace()))
            .labels(&format!("{RING_LABEL}={}", member.marks().ring()));
        Assigner {
            member: member.clone(),
            client: base.with_write_gate(leadership.clone()),
            resource: K::api_resource(dynamic),
            primaries: SharedIndexInformer::builder(list_watch).build(),
            leases: SharedIndexInformer::builder(leases).build(),
            dependents,
            queue: WorkQueue::builder()
                .name(format!("{}-assigner", member.marks().ring()))
                .build(),
            ring: watch::Sender::new(Members::default()),
            unassigned_since: Arc::new(Mutex::new(HashMap::new())),
            sweeps: tokio::sync::Mutex::new(HashMap::new()),
            moved: MovedChildren::default(),
        }
    }

    fn stop(&self) {
        self.queue.shut_down();
        self.primaries.stop();
        self.leases.stop();
        if let Some(metrics) = self.member.metrics() {
            metrics.set_members(self.member.marks().ring(), 0);
        }
    }

    async fn run(&self) {
        let ring_name = self.member.marks().ring().to_string();
        tracing::info!(ring = %ring_name, member = %self.member.identity(), "assigning");
        let owner_label = self.member.marks().owner_label().to_string();
        let queue = self.queue.clone();
        let unassigned = self.unassigned_since.clone();
        // Every added or changed object is queued; one without a member is timed from now.
        let seen = Arc::new(move |object: &Arc<K>| {
            let key = ObjectKey::of(object.as_ref());
            let has_owner = object
                .meta()
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(&owner_label));
            if !has_owner {
                unassigned
                    .lock()
                    .entry(key.clone())
                    .or_insert_with(std::time::Instant::now);
            }
            queue.add(key);
        });
        let on_update = seen.clone();
        let handlers = HandlerFns::<K>::new()
            .on_add(move |object, _| seen(object))
            .on_update(move |_, object| on_update(object));
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
            // Neither ends while the term lasts (the members loop never does; the workers when
            // the queue shuts down): a fixed order for repeatable runs.
            biased;
            () = self.watch_members() => {}
            _ = workers => {}
        }
    }

    /// Every tick: works out each member's [`Liveness`] from its Lease (or its absence, for a
    /// member only a label names), fences dead members, renews fences and lifts those of members
    /// that own nothing any more; when a state changes, rebuilds the ring and queues every object.
    async fn watch_members(&self) {
        let marks = self.member.marks().clone();
        let lease_duration = self.member.timings().lease_duration;
        let retry_period = self.member.timings().retry_period;
        let mut seen: HashMap<String, Seen> = HashMap::new();
        let mut ticks = tokio::time::interval(TICK);
        loop {
            ticks.tick().await;
            let now = Instant::now();
            let leases: HashMap<String, Arc<Lease>> = self
                .leases
                .lister()
                .list(&LabelSelector::everything())
                .into_iter()
                .filter_map(|lease| {
                    let name = lease.metadata.name.as_deref()?;
                    let member = marks.member_of_lease(name)?.to_string();
                    Some((member, lease))
                })
                .collect();
            let labelled = self.labelled_members();
            let names: BTreeSet<String> = leases.keys().cloned().chain(labelled.clone()).collect();
            seen.retain(|member, _| names.contains(member));
            let mut members = Members::default();
            for member in &names {
                let lease = leases.get(member);
                let version = lease.map(|l| l.resource_version().to_string());
                let entry = seen.entry(member.clone()).or_insert_with(|| Seen {
                    resource_version: version.clone(),
                    first_seen: now,
                    changed_at: None,
                    fence_renewed: None,
                });
                if entry.resource_version != version {
                    entry.resource_version = version;
                    entry.changed_at = Some(now);
                }
                let holder =
                    lease.map(|l| l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()));
                let state = match liveness(member, holder, entry, now, lease_duration) {
                    Liveness::Dead => {
                        if self.fence(member, lease.map(Arc::as_ref)).await {
                            entry.fence_renewed = Some(now);
                            Liveness::Fenced
                        } else {
                            Liveness::Dead
                        }
                    }
                    Liveness::Fenced if !labelled.contains(member) => {
                        if let Some(lease) = lease {
                            self.lift_fence(member, lease).await;
                        }
                        // Gone from the ring's books either way: a member that joins again
                        // starts as unknown.
                        continue;
                    }
                    Liveness::Fenced => {
                        let due = entry
                            .fence_renewed
                            .is_none_or(|at| now.duration_since(at) >= retry_period);
                        if due && self.fence(member, lease.map(Arc::as_ref)).await {
                            entry.fence_renewed = Some(now);
                        }
                        Liveness::Fenced
                    }
                    other => other,
                };
                members.insert(member, state);
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

    /// The members some cached object is labelled for.
    fn labelled_members(&self) -> BTreeSet<String> {
        let label = self.member.marks().owner_label();
        self.primaries
            .store()
            .list()
            .iter()
            .filter_map(|object| object.meta().labels.as_ref()?.get(label).cloned())
            .collect()
    }

    /// Writes (or renews) the fence on `member`'s Lease, creating the Lease if it has none: holder
    /// [`FENCE_HOLDER`], so that no incarnation of that member can join while its objects move.
    /// False if the write failed (a conflict: the member took its Lease again first; the next tick
    /// sees it).
    async fn fence(&self, member: &str, lease: Option<&Lease>) -> bool {
        let marks = self.member.marks();
        let api = Api::<Lease>::namespaced(self.client.clone(), self.member.namespace());
        let name = marks.member_lease(member);
        let now = Some(crate::leader::record::now());
        let result = match lease {
            Some(lease) => {
                let mut fenced = lease.clone();
                let spec = fenced.spec.get_or_insert_with(Default::default);
                spec.holder_identity = Some(FENCE_HOLDER.to_string());
                spec.renew_time = now;
                api.replace(&name, &PostParams::default(), &fenced).await
            }
            None => {
                let fenced = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(self.member.namespace().to_string()),
                        labels: Some([(RING_LABEL.to_string(), marks.ring().to_string())].into()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(FENCE_HOLDER.to_string()),
                        renew_time: now,
                        ..LeaseSpec::default()
                    }),
                };
                api.create(&PostParams::default(), &fenced).await
            }
        };
        match result {
            Ok(_) => {
                tracing::debug!(ring = %marks.ring(), %member, "fenced");
                true
            }
            Err(error) => {
                tracing::debug!(ring = %marks.ring(), %member, %error, "fence not written");
                false
            }
        }
    }

    /// Deletes the fenced Lease of a member no object is labelled for any more (precondition: the
    /// fence's own resourceVersion): the member may join again, and one that never does leaves
    /// nothing behind.
    async fn lift_fence(&self, member: &str, lease: &Lease) {
        let marks = self.member.marks();
        let api = Api::<Lease>::namespaced(self.client.clone(), self.member.namespace());
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: None,
                resource_version: lease.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(&marks.member_lease(member), &params).await {
            Ok(_) => {
                tracing::info!(ring = %marks.ring(), %member, "every object moved; fence lifted")
            }
            Err(error) => {
                tracing::debug!(ring = %marks.ring(), %member, %error, "fence not lifted")
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
            // While a member is unknown the ring may still change: wait (at most a lease
            // duration) rather than assign or move twice.
            _ if members.any_unknown() => {}
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
            Some(owner) if *owner == desired && drain.is_none() => {}
            Some(owner) if members.state(owner) == Liveness::Live => {
                // A drain already set stays until the owner hands over (then the object is
                // moved again if its target is no longer right).
                if drain.is_none() {
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
                // Dead but not yet fenced: the next tick fences it, and queues everything again.
            }
            Some(dead) => {
                self.move_children(key, &object, dead, drain.map(String::as_str), &desired)
                    .await?;
                let annotation = self.moved.annotation(key);
                self.write(
                    &object,
                    json!({marks.owner_label(): desired, marks.drain_label(): Value::Null}),
                    Some(annotation),
                )
                .await?;
                self.moved.finish(key);
                if let Some(metrics) = self.member.metrics() {
                    metrics.moved(ring, &desired);
                }
                tracing::info!(%ring, %key, from = %dead, to = %desired, "moved from a dead member");
                pipeline_event!(stage = "shard", op = "owner", instance = %ring, key = %key, state = %desired, moved_from = %dead);
            }
        }
        Ok(())
    }

    /// Relabels to `to` the children of `object` that the fenced member `dead` holds (from one
    /// LIST of its label per kind) and, if a handover to `draining_to` was under way, those
    /// already moved to that member (from a LIST of its label in the object's namespace). Each
    /// child leaves the sweep only once relabelled, and its version is kept in `moved`, so a
    /// retry after a failure goes on where this one stopped.
    async fn move_children(
        &self,
        key: &ObjectKey,
        object: &K,
        dead: &str,
        draining_to: Option<&str>,
        to: &str,
    ) -> Result<(), ShardError> {
        if self.dependents.is_empty() {
            return Ok(());
        }
        let uid = object.meta().uid.clone().unwrap_or_default();
        let object_version: u64 = object.resource_version().parse().unwrap_or(u64::MAX);
        let marks = self.member.marks();
        let mut sweeps = self.sweeps.lock().await;
        if sweeps.get(dead).is_none_or(|s| s.version < object_version) {
            let mut by_owner: HashMap<String, Vec<(usize, ChildRef)>> = HashMap::new();
            let mut version = u64::MAX;
            for (index, dependents) in self.dependents.iter().enumerate() {
                let (listed_at, children) = self.list(dependents.as_ref(), dead, None).await?;
                version = version.min(listed_at);
                for child in children {
                    let owner = child.owner_uid.clone().unwrap_or_default();
                    by_owner.entry(owner).or_default().push((index, child));
                }
            }
            sweeps.insert(dead.to_string(), Sweep { version, by_owner });
        }
        let mut children: Vec<(usize, ChildRef)> = sweeps
            .get(dead)
            .and_then(|s| s.by_owner.get(&uid))
            .cloned()
            .unwrap_or_default();
        drop(sweeps);
        if let Some(target) = draining_to.filter(|t| *t != dead && *t != to) {
            for (index, dependents) in self.dependents.iter().enumerate() {
                let (_, listed) = self
                    .list(
                        dependents.as_ref(),
                        target,
                        object.meta().namespace.as_deref(),
                    )
                    .await?;
                children.extend(
                    listed
                        .into_iter()
                        .filter(|c| c.owner_uid.as_deref() == Some(uid.as_str()))
                        .map(|c| (index, c)),
                );
            }
        }
        for (index, child) in &children {
            let dependents = self.dependents[*index].as_ref();
            self.moved
                .relabel(key, &self.client, marks, dependents, child, to)
                .await?;
            if let Some(sweep) = self.sweeps.lock().await.get_mut(dead)
                && let Some(left) = sweep.by_owner.get_mut(&uid)
            {
                left.retain(|(_, c)| c != child);
            }
        }
        Ok(())
    }

    async fn list(
        &self,
        dependents: &dyn DependentKind,
        member: &str,
        namespace: Option<&str>,
    ) -> Result<(u64, Vec<ChildRef>), ShardError> {
        dependents
            .list_marked(&self.client, self.member.marks(), member, namespace)
            .await
            .map_err(|source| ShardError::Read {
                what: format!("list {} of {member}", dependents.resource().kind),
                source,
            })
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
            resource_version: Some("1".into()),
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
        let held = Some(Some("a"));
        // Never seen renewing: unknown for a lease duration from first sight, then dead.
        assert_eq!(
            liveness("a", held, &seen(t0, None), at(14), lease),
            Liveness::Unknown
        );
        assert_eq!(
            liveness("a", held, &seen(t0, None), at(15), lease),
            Liveness::Dead
        );
        // Seen renewing: live until a lease duration passes without a change.
        assert_eq!(
            liveness("a", held, &seen(t0, Some(at(3))), at(17), lease),
            Liveness::Live
        );
        assert_eq!(
            liveness("a", held, &seen(t0, Some(at(3))), at(18), lease),
            Liveness::Dead
        );
        // Released, or held by someone else: dead at once; the fence is the fence.
        let after = seen(t0, Some(at(3)));
        assert_eq!(
            liveness("a", Some(Some("")), &after, at(4), lease),
            Liveness::Dead
        );
        assert_eq!(
            liveness("a", Some(None), &after, at(4), lease),
            Liveness::Dead
        );
        assert_eq!(
            liveness("a", Some(Some("b")), &after, at(4), lease),
            Liveness::Dead
        );
        let fenced = Some(Some(FENCE_HOLDER));
        assert_eq!(
            liveness("a", fenced, &seen(t0, None), at(0), lease),
            Liveness::Fenced
        );
        // No Lease at all (a label names it): unknown for a lease duration, then dead.
        assert_eq!(
            liveness("a", None, &seen(t0, None), at(14), lease),
            Liveness::Unknown
        );
        assert_eq!(
            liveness("a", None, &seen(t0, None), at(15), lease),
            Liveness::Dead
        );
    }

    #[test]
    fn shard_members_not_seen_yet_are_unknown() {
        let mut members = Members::default();
        members.insert("a", Liveness::Live);
        members.insert("b", Liveness::Fenced);
        assert_eq!(members.state("a"), Liveness::Live);
        assert_eq!(members.state("b"), Liveness::Fenced);
        assert_eq!(members.state("new"), Liveness::Unknown);
        assert!(!members.any_unknown());
        members.insert("c", Liveness::Unknown);
        assert!(members.any_unknown());
        assert_eq!(members.live.iter().collect::<Vec<_>>(), ["a"]);
    }
}
