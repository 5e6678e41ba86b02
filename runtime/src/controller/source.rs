//! Sources: how informer events and outside signals become keys of the primary type in the queue.
//!
//! A controller reconciles one type, its *primary* `K`, but many things call for a reconcile: the
//! primary changed, a child it owns changed, some other object it depends on changed, or the world
//! outside Kubernetes changed. Each of these is a source, and every source ends the same way, as an
//! [`ObjectKey`] of a `K` added to the controller's queue:
//!
//! ```text
//!  primary informer ─ K ──────────────────▶ its own key ──────────────┐
//!  owned informer ── C ──▶ controller ownerReference of kind K ──────▶├─ filters ─▶ Enqueue ─▶ WorkQueue
//!  watched informer ─ O ──▶ your mapper (zero or more keys) ─────────▶┘  (informer       (priority)
//!  a Stream of keys (channel, timer, poll of an outside system) ─────────  sources only)
//! ```
//!
//! **Priorities** (as controller-runtime's priority queue): an event that something *changed* is
//! added at priority 0; objects of an informer's first list and resyncs (nothing changed) at
//! [`LOW_PRIORITY`]. After a restart, the thousands of keys of the first list then wait behind the
//! few objects that are actually changing, and a resync never delays a real change.
//!
//! **Deletions of the primary**: the informer's delete (or the tombstone a relist finds, or an update
//! whose uid changed: the object was deleted and re-created between two events) is recorded under
//! its key before the key is queued, so that the worker can hand the last known state to
//! [`Reconciler::deleted`](super::Reconciler::deleted).
//!
//! Handlers run on the informer's handler thread for this controller: they only compute keys and
//! add them to the queue, which never blocks.
//!
//! ## Keys that name no primary
//!
//! A key a source adds must be able to name a primary object: with a namespace for a namespaced
//! primary, without one for a cluster-scoped primary. A mapper that forgets the namespace would
//! otherwise queue a key no object has, and the worker would find nothing and do nothing, without
//! a word. Each informer source's [`Enqueue`] checks its keys and refuses such a key where it is
//! made: it never reaches the queue, it is counted in `controller_mapper_keys_refused_total`
//! (labels `controller` and `mapper`, the source's name, e.g. `watches::<Secret>`), and the first
//! one of each source is logged at warn level with the mapper's name.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_core::ObjectKey;
use ferrokube_informer::{DeletedObject, EventHandler};
use ferrokube_workqueue::{AddOptions, WorkQueue};
use parking_lot::Mutex;

use super::filter::{Change, Filters};
use ferrokube_core::{ApiResource, Object};
use ferrokube_core::{pipeline_enabled, pipeline_event};

/// The priority of keys that come from an informer's first list or a resync
/// (controller-runtime's `LowPriority`, -100). Real changes are added at 0.
pub const LOW_PRIORITY: i32 = -100;

/// The keys one source may add: those that can name a primary. A namespaced primary's key has a
/// namespace, a cluster-scoped primary's has none; any other key would reach a worker that finds
/// no such object and reconciles nothing, without a word. So a source's keys are checked as they
/// are added, and one that cannot name a primary is refused there: counted
/// (`controller_mapper_keys_refused_total{controller, mapper}`) and logged at warn level the first
/// time per source, with the source's name.
pub(crate) struct KeyCheck {
    /// Whether the primary kind is namespaced.
    pub(crate) namespaced: bool,
    pub(crate) controller: String,
    /// Names the source in the log and the metric (`watches::<Secret>`, ...).
    pub(crate) source: String,
    /// Where in the author's code the mapper is (its closure's type name), for the log.
    pub(crate) mapper: &'static str,
    /// Where refusals are counted; the series is made at the first refusal, so a source that
    /// never refuses a key shows none.
    pub(crate) metrics: Option<super::metrics::Metrics>,
    /// Invariant: false until the first refusal was logged, then true for good (logged once).
    pub(crate) logged: std::sync::atomic::AtomicBool,
}

impl KeyCheck {
    /// Whether `key` can name a primary; if not, counts it (and logs the first).
    fn accepts(&self, key: &ObjectKey) -> bool {
        if key.namespace().is_some() == self.namespaced && !key.name().is_empty() {
            return true;
        }
        if let Some(metrics) = &self.metrics {
            metrics.mapper_refused(&self.controller, &self.source).inc();
        }
        if !self.logged.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let needs = if self.namespaced {
                "a namespace (the primary kind is namespaced)"
            } else {
                "no namespace (the primary kind is cluster-scoped)"
            };
            tracing::warn!(
                controller = %self.controller,
                source = %self.source,
                mapper = self.mapper,
                %key,
                "a source returned a key that names no primary object: refused (it needs {needs} \
                 and a name); further refusals of this source are only counted in \
                 controller_mapper_keys_refused_total"
            );
        }
        false
    }
}

/// Adds keys to a controller's queue at the priority of the event being handled. Cheap to clone.
#[derive(Clone)]
pub struct Enqueue {
    queue: WorkQueue<ObjectKey>,
    priority: i32,
    /// The key of the object whose event is being handled, if any: the pipeline's events say
    /// which object's change put a key in the queue.
    cause: Option<ObjectKey>,
    /// The source's check of its keys; none for keys added from outside a source.
    check: Option<Arc<KeyCheck>>,
}

impl Enqueue {
    pub(crate) fn new(queue: WorkQueue<ObjectKey>) -> Enqueue {
        Enqueue {
            queue,
            priority: 0,
            cause: None,
            check: None,
        }
    }

    /// This queue, for one source whose keys `check` checks.
    pub(crate) fn checked(&self, check: KeyCheck) -> Enqueue {
        Enqueue {
            check: Some(Arc::new(check)),
            ..self.clone()
        }
    }

    fn at(&self, priority: i32, cause: Option<ObjectKey>) -> Enqueue {
        Enqueue {
            queue: self.queue.clone(),
            priority,
            cause,
            check: self.check.clone(),
        }
    }

    fn accepts(&self, key: &ObjectKey) -> bool {
        self.check.as_ref().is_none_or(|check| check.accepts(key))
    }

    /// Queues `key` (deduplicated with a waiting one; a higher priority moves it up). A key that
    /// cannot name a primary object is refused (see the [module docs](self#keys-that-name-no-primary)).
    pub fn add(&self, key: ObjectKey) {
        if !self.accepts(&key) {
            return;
        }
        self.trace_enqueue(&key, None);
        self.queue
            .add_with(key, AddOptions::new().priority(self.priority));
    }

    /// Queues `key` after `delay` (an earlier add still brings it sooner); refused as
    /// [`add`](Self::add) refuses.
    pub fn add_after(&self, key: ObjectKey, delay: Duration) {
        if !self.accepts(&key) {
            return;
        }
        self.trace_enqueue(&key, Some(delay));
        self.queue
            .add_with(key, AddOptions::new().priority(self.priority).after(delay));
    }

    /// The priority keys are added at: 0 for a change, [`LOW_PRIORITY`] for a first list or resync.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    fn trace_enqueue(&self, key: &ObjectKey, delay: Option<Duration>) {
        if let Some(cause) = &self.cause {
            pipeline_event!(
                stage = "handler",
                op = "enqueue",
                instance = %self.queue.name(),
                key = %cause,
                // What the handler did; the key's slot in the stage is its notification's.
                state = "gone",
                queue_key = %key,
                priority = i64::from(self.priority),
                delay_ms = delay.map_or(0, |d| d.as_millis() as u64),
            );
        }
    }
}

/// One informer event of a type `O`, as a [`watches_with`](super::Controller::watches_with)
/// handler receives it.
#[derive(Debug)]
pub enum ObjectEvent<'a, O> {
    /// `initial`: the object came with the informer's first list.
    Added {
        object: &'a Arc<O>,
        initial: bool,
    },
    /// For a resync, `old` and `new` are the same `Arc`.
    Updated {
        old: &'a Arc<O>,
        new: &'a Arc<O>,
    },
    Deleted(&'a DeletedObject<O>),
}

impl<O: Object> ObjectEvent<'_, O> {
    fn change(&self) -> Change<'_> {
        match self {
            ObjectEvent::Added { object, initial } => Change::Added {
                meta: object.meta(),
                initial: *initial,
            },
            ObjectEvent::Updated { old, new } => Change::Updated {
                old: old.meta(),
                new: new.meta(),
            },
            ObjectEvent::Deleted(gone) => Change::Deleted {
                meta: gone.object().meta(),
            },
        }
    }

    /// A first-list add or a resync: nothing changed that the controller has not seen.
    fn is_low_priority(&self) -> bool {
        match self {
            ObjectEvent::Added { initial, .. } => *initial,
            ObjectEvent::Updated { old, new } => Arc::ptr_eq(old, new),
            ObjectEvent::Deleted(_) => false,
        }
    }

    /// The object (the new state of an update), and for an update the old one too.
    pub fn objects(&self) -> (&Arc<O>, Option<&Arc<O>>) {
        match self {
            ObjectEvent::Added { object, .. } => (object, None),
            ObjectEvent::Updated { old, new } => (new, Some(old)),
            ObjectEvent::Deleted(gone) => (gone.object(), None),
        }
    }
}

/// What a source does with an event that passed the filters.
pub(crate) type MapEvent<O> = dyn Fn(&Enqueue, &ObjectEvent<'_, O>) + Send + Sync;

/// The [`EventHandler`] of every informer source: filter, pick the priority, map to keys.
pub(crate) struct SourceHandler<O> {
    pub(crate) filters: Filters,
    pub(crate) enqueue: Enqueue,
    pub(crate) map: Box<MapEvent<O>>,
}

impl<O: Object> SourceHandler<O> {
    fn handle(&self, event: ObjectEvent<'_, O>) {
        let (object, _) = event.objects();
        if !self.filters.pass(&event.change()) {
            pipeline_event!(stage = "handler", op = "filtered", instance = %self.enqueue.queue.name(), key = %ObjectKey::of(object.as_ref()), state = "gone");
            return;
        }
        let priority = if event.is_low_priority() {
            LOW_PRIORITY
        } else {
            0
        };
        // The object's key is only for the pipeline's events: not built (an allocation per
        // event) unless someone listens.
        let cause = pipeline_enabled!().then(|| ObjectKey::of(object.as_ref()));
        (self.map)(&self.enqueue.at(priority, cause), &event);
    }
}

impl<O: Object> EventHandler<O> for SourceHandler<O> {
    fn on_add(&self, object: &Arc<O>, initial: bool) {
        self.handle(ObjectEvent::Added { object, initial });
    }
    fn on_update(&self, old: &Arc<O>, new: &Arc<O>) {
        self.handle(ObjectEvent::Updated { old, new });
    }
    fn on_delete(&self, gone: &DeletedObject<O>) {
        self.handle(ObjectEvent::Deleted(gone));
    }
}

/// Deletions of primary objects not yet handed to a worker, by key.
///
/// Invariant: every deletion the primary informer reported (a delete, a relist's tombstone, or an
/// update that replaced the uid) is in here from before its key is queued until a worker takes it
/// out with [`take`](Self::take); so each reaches `Reconciler::deleted` once, in order, before any
/// reconcile of a re-created object under the same key. What it holds is bounded by the deletions
/// not yet handled.
pub(crate) struct Tombstones<K>(Mutex<HashMap<ObjectKey, Vec<Arc<K>>>>);

impl<K> Default for Tombstones<K> {
    fn default() -> Self {
        Tombstones(Mutex::new(HashMap::new()))
    }
}

impl<K> Tombstones<K> {
    fn record(&self, key: ObjectKey, last_known: Arc<K>) {
        self.0.lock().entry(key).or_default().push(last_known);
    }

    /// The deletions recorded under `key`, oldest first.
    pub(crate) fn take(&self, key: &ObjectKey) -> Vec<Arc<K>> {
        self.0.lock().remove(key).unwrap_or_default()
    }

    /// Puts back deletions whose hook failed, ahead of any recorded since.
    pub(crate) fn put_back(&self, key: ObjectKey, mut pending: Vec<Arc<K>>) {
        if pending.is_empty() {
            return;
        }
        let mut map = self.0.lock();
        let entry = map.entry(key).or_default();
        pending.append(entry);
        *entry = pending;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().values().map(Vec::len).sum()
    }
}

/// The primary source: each object's own key, its deletions recorded in `tombstones` first.
pub(crate) fn primary<K: Object>(tombstones: Arc<Tombstones<K>>) -> Box<MapEvent<K>> {
    Box::new(move |enqueue, event| {
        let (object, _) = event.objects();
        let key = ObjectKey::of(object.as_ref());
        match event {
            ObjectEvent::Deleted(gone) => tombstones.record(gone.key(), object.clone()),
            ObjectEvent::Updated { old, new } if old.meta().uid != new.meta().uid => {
                // Deleted and re-created under the same name between two events.
                tombstones.record(key.clone(), (*old).clone());
            }
            _ => {}
        }
        enqueue.add(key);
    })
}

/// The key of the object of kind `owner_kind` that controls `child`, from its controller
/// ownerReference, if it is of that kind (same kind and group; any version).
pub(crate) fn controller_key<C: Object>(owner_kind: &ApiResource, child: &C) -> Option<ObjectKey> {
    let owner = crate::toolkit::owner::controller_of(child.meta())?;
    if owner.kind != owner_kind.kind
        || crate::toolkit::owner::group_of(&owner.api_version) != owner_kind.group
    {
        return None;
    }
    // An owner is in its child's namespace, or cluster-scoped.
    let namespace = if owner_kind.namespaced {
        child.meta().namespace.as_deref()
    } else {
        None
    };
    Some(ObjectKey::new(namespace, &owner.name))
}

/// Maps each object an event involves (both states of an update) with `keys`, and queues the
/// distinct keys: an update that moves an object from one owner to another reaches both.
pub(crate) fn mapped<O: Object>(
    keys: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
) -> Box<MapEvent<O>> {
    Box::new(move |enqueue, event| {
        let (object, old) = event.objects();
        let mut found = keys(object);
        if let Some(old) = old.filter(|old| !Arc::ptr_eq(old, object)) {
            for key in keys(old) {
                if !found.contains(&key) {
                    found.push(key);
                }
            }
        }
        for key in found {
            enqueue.add(key);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod(owner: Option<(&str, &str, &str)>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                owner_references: owner.map(|(api_version, kind, name)| {
                    vec![OwnerReference {
                        api_version: api_version.into(),
                        kind: kind.into(),
                        name: name.into(),
                        uid: "u".into(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]
                }),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn controller_owner_keys_need_the_right_kind_and_group() {
        let owned = pod(Some(("apps/v1", "ReplicaSet", "web")));
        assert_eq!(
            controller_key(&ApiResource::of::<ReplicaSet>(), &owned).as_deref(),
            Some("ns/web")
        );
        let other_group = pod(Some(("example.com/v1", "ReplicaSet", "web")));
        assert_eq!(
            controller_key(&ApiResource::of::<ReplicaSet>(), &other_group),
            None
        );
        let other_kind = pod(Some(("apps/v1", "StatefulSet", "web")));
        assert_eq!(
            controller_key(&ApiResource::of::<ReplicaSet>(), &other_kind),
            None
        );
        assert_eq!(
            controller_key(&ApiResource::of::<ReplicaSet>(), &pod(None)),
            None
        );
        // A cluster-scoped owner's key has no namespace.
        let by_namespace = pod(Some(("v1", "Namespace", "team")));
        assert_eq!(
            controller_key(&ApiResource::of::<Namespace>(), &by_namespace).as_deref(),
            Some("team")
        );
    }

    #[test]
    fn controller_tombstones_come_back_in_order_and_failed_ones_go_first() {
        let tombstones = Tombstones::<Pod>::default();
        let key = ObjectKey::from("ns/p");
        let (a, b, c) = (
            Arc::new(pod(None)),
            Arc::new(pod(None)),
            Arc::new(pod(None)),
        );
        tombstones.record(key.clone(), a.clone());
        tombstones.record(key.clone(), b.clone());
        let taken = tombstones.take(&key);
        assert!(Arc::ptr_eq(&taken[0], &a) && Arc::ptr_eq(&taken[1], &b));
        assert_eq!(tombstones.len(), 0);
        tombstones.record(key.clone(), c.clone());
        tombstones.put_back(key.clone(), taken);
        let again = tombstones.take(&key);
        assert_eq!(again.len(), 3);
        assert!(Arc::ptr_eq(&again[0], &a) && Arc::ptr_eq(&again[2], &c));
    }

    #[tokio::test]
    async fn controller_sources_apply_the_filters_and_put_real_changes_ahead_of_the_initial_list() {
        use crate::controller::filter::Filter;
        let queue: WorkQueue<ObjectKey> = WorkQueue::new();
        let handler = SourceHandler {
            filters: Filters::new(vec![Filter::labels_changed()]),
            enqueue: Enqueue::new(queue.clone()),
            map: mapped(|pod: &Pod| vec![ObjectKey::of(pod)]),
        };
        let named = |name: &str, label: &str| {
            let mut pod = pod(None);
            pod.metadata.name = Some(name.into());
            pod.metadata.labels = Some([("app".to_string(), label.to_string())].into());
            Arc::new(pod)
        };
        // The first list: low priority.
        for name in ["a", "b", "c"] {
            handler.on_add(&named(name, "x"), true);
        }
        // A status-only change of `d` is filtered out; a relabel of `c` is a real change.
        handler.on_update(&named("d", "x"), &named("d", "x"));
        handler.on_update(&named("c", "x"), &named("c", "y"));
        // A resync of `a` passes no built-in filter... and a resync that did pass would be low.
        let a = named("a", "x");
        handler.on_update(&a, &a);
        assert_eq!(queue.len(), 3, "d filtered, c deduplicated");
        let first = queue.get().await.unwrap();
        assert_eq!(first.as_str(), "ns/c", "the real change goes first");
        queue.done(&first);
        handler.on_delete(&DeletedObject::Object(named("e", "x")));
        let second = queue.get().await.unwrap();
        assert_eq!(second.as_str(), "ns/e", "a delete is a real change");
    }
}
