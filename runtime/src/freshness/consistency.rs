//! # The consistency store: never reconcile from a cache older than your own last write
//!
//! The most common controller bug in the field is acting on a stale cache. A reconcile writes (a
//! status, a child), and the key comes back before the informer has shown that write: the cache
//! still has the object as it was, so the reconcile decides again from the old state. It writes
//! again with the old resourceVersion (409 Conflict), repeats an action it already took, or writes
//! a status that goes backwards:
//!
//! ```text
//!  t0  reconcile #1: cache has rs@100        → PUT status  (server: rs@105)
//!  t1  a pod event queues the key again       (the watch has not delivered rs@105 yet)
//!  t2  reconcile #2: cache has rs@100         → PUT status with resourceVersion 100  ✗ 409
//!  t3  rs@105 arrives in the cache
//! ```
//!
//! [`Expectations`](super::Expectations) cover one case of this (children created or deleted but
//! not yet seen, counted). This store covers every write, by resourceVersion: each write the
//! controller makes *for a key* records the resourceVersion the server gave it, against each
//! informer of the controller that caches that kind. Before a worker reconciles the key, it asks
//! whether every one of those informers' stores has caught up
//! ([`SharedIndexInformer::last_store_sync_resource_version`](ferrokube_informer::SharedIndexInformer::last_store_sync_resource_version)
//! ≥ the write's version). If not, the reconcile is skipped and the key comes back after
//! [`DEFAULT_STALE_REQUEUE`] (or sooner: the write's own watch event usually brings it), counted in
//! `stale_sync_skips_total{controller}`. This is kube-controller-manager 1.36's stale controller
//! handling (KEP-5647).
//!
//! ```text
//!  reconcile(key, ctx) ─ write through ctx ─▶ server ─▶ resourceVersion r
//!        │                                                          │ recorded: key → (informer, r)
//!  worker takes key: every recorded informer's store at ≥ r? ─ yes ─▶ forget them; reconcile
//!                                                           └─ no ──▶ skip; requeue after 100 ms
//! ```
//!
//! ## Recording writes
//!
//! A reconcile records nothing by hand. Its [`Context`](crate::controller::Context) hands out a client (and
//! `Api`s built on it) whose [write observer](ferrokube_client::write_observer) is a [`Writes`]
//! for the key being reconciled: every create, replace, patch, status write and delete the server
//! commits through it is recorded before the write's `await` returns, and so is every write of a
//! toolkit helper given such an `Api` (finalizers, status, `create_or_update`, adoptions and
//! releases of a [`Claimer`](crate::toolkit::claim::Claimer)). Outside a reconcile, [`Writes::client`] and
//! [`Writes::api`] attach the same observer to a client of your own. A delete answered with the
//! object (a graceful delete, finalizers) records its resourceVersion; one answered with a
//! `Status` (gone at once) records that the informer must no longer hold the object.
//!
//! What gets a record: only writes to a kind one of the controller's informers caches (matched by
//! API group and kind, so a `Compact<Pod>` informer counts for writes through an `Api<Pod>`), and
//! only for informers whose scope holds the written object (its namespace, and its labels if the
//! scope has a label selector) or whose store holds it when the write returns (a write that moved
//! it out of the scope: the informer will see a delete). An informer with a field selector gets
//! records only by the second rule: whether it will ever show a new object cannot be told here,
//! and waiting for it could wait forever.
//!
//! **A write that ends an object is a deletion.** A write whose answer is an object being deleted
//! with no finalizer left and no grace period to wait out (the PATCH that removes the last
//! finalizer of a terminating object) ended it: the server removes it at once. kube-apiserver
//! answers that PATCH with a resourceVersion its watch has already delivered (the object still
//! terminating), and sends the DELETED event one revision later; a check by version would pass
//! while the cache still holds the object, and the next reconcile would find the finalizer still
//! there and clean up a second time. So such a write records that the informers must no longer
//! hold the object (its uid), as a delete answered with a `Status` does.
//!
//! One case is not covered: a delete answered with a `Status` of an object the informer has not
//! shown yet (created by someone else a moment ago) is "gone" at once, and its creation and
//! deletion still arrive later. A controller deletes what its cache showed it, so this needs a
//! delete of an object it never saw; the [read-your-own-writes client](super::read_your_writes)
//! handles it by remembering the uid.
//!
//! ## Comparing resourceVersions
//!
//! ResourceVersions are opaque strings in general. Only where the server's are integers (etcd's
//! revisions: every kube-apiserver so far, and ferrokube's embedded server) does "the store is at
//! ≥ r" mean anything. The first version that is not an integer turns the protection off for this
//! controller, with a warning in the log: from then on nothing is recorded and nothing skipped.
//! A store that has not listed yet (`""`) counts as behind.
//!
//! ## Bounds
//!
//! Per key, one record per informer (the highest version written; a newer write replaces it) plus
//! one per object deleted with a `Status` answer. Records go when a check finds their informer
//! caught up, when the key's object is deleted (the worker clears the key before
//! [`Reconciler::deleted`](crate::controller::Reconciler::deleted)), and in a sweep that runs whenever the
//! number of keys with records doubles (from 1,024): so the store holds at most about twice the
//! keys whose writes some informer has not shown yet, or 1,024. When no key has a record, the check
//! costs one atomic load.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use ferrokube_core::{ObjectKey, Scope, ScopeMatcher};
use ferrokube_informer::{SharedIndexInformer, StoreRevision};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::{Mutex, RwLock};

use ferrokube_client::Client;
use ferrokube_client::api::Api;
use ferrokube_client::write_observer::{DeleteNote, DeleteOutcome, WriteObserver};
use ferrokube_core::{ApiResource, Kind, Object};

/// How long a skipped key waits before it is tried again, unless an event brings it sooner
/// (which the write's own watch event usually does). Long enough for a healthy watch (a few
/// milliseconds behind the write) to have delivered, short enough to go unnoticed next to the
/// requests a reconcile makes. Set with
/// [`Controller::stale_requeue`](crate::controller::Controller::stale_requeue).
pub const DEFAULT_STALE_REQUEUE: Duration = Duration::from_millis(100);

/// Keys with records at which the first sweep runs; later sweeps run each time the count doubles.
const FIRST_SWEEP: usize = 1024;

/// Why a key may not be reconciled yet: one of the informers it wrote through has not caught up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cache of {informer} for {key} is stale: it is at resourceVersion {store_version:?}, the last write for the key needs {needs}"
)]
pub struct StaleCache {
    pub key: ObjectKey,
    /// The informer's name (`pods`, `replicasets/demo`, …).
    pub informer: String,
    /// What the write needs: `>= <resourceVersion>`, or that an object be gone.
    pub needs: String,
    /// The informer's store resourceVersion when checked.
    pub store_version: String,
}

/// What the store needs of one informer, whatever its type: the informer's own answers.
trait Progress: Send + Sync {
    fn store_revision(&self) -> StoreRevision;
    /// The store holds `key` (with this uid, if given).
    fn holds(&self, key: &ObjectKey, uid: Option<&str>) -> bool;
}

impl<K: Object> Progress for SharedIndexInformer<K> {
    fn store_revision(&self) -> StoreRevision {
        SharedIndexInformer::store_revision(self)
    }
    fn holds(&self, key: &ObjectKey, uid: Option<&str>) -> bool {
        SharedIndexInformer::holds(self, key, uid)
    }
}

/// One informer of the controller, and which objects its scope holds.
struct Watched {
    name: String,
    scope: Scope,
    /// The scope as a test of metadata; `None` if its label selector did not parse (then only
    /// the "store holds it" rule records anything).
    matcher: Option<ScopeMatcher>,
    progress: Box<dyn Progress>,
}

impl Watched {
    /// Whether the informer will show a write of an object with this metadata.
    fn holds_scope_of(&self, meta: &ObjectMeta) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.matches(meta))
    }
}

/// The API group and kind of a resource: how writes find the informers caching them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKind {
    group: String,
    kind: String,
}

/// One thing a key waits for before it may be reconciled.
enum Wait {
    /// The informer's store must reach `version`.
    Version {
        informer: Arc<Watched>,
        version: u64,
    },
    /// The informer's store must no longer hold `object` (with `uid`, if known).
    Gone {
        informer: Arc<Watched>,
        object: ObjectKey,
        uid: Option<String>,
    },
}

/// The outcome of looking at one wait.
enum Met {
    Yes,
    No(StaleCache),
    /// The store's version is not an integer: the protection must go.
    Unusable(String),
}

impl Wait {
    fn informer(&self) -> &Arc<Watched> {
        match self {
            Wait::Version { informer, .. } | Wait::Gone { informer, .. } => informer,
        }
    }

    fn met(&self, key: &ObjectKey) -> Met {
        let informer = self.informer();
        let stale = |needs: String, store_version: String| StaleCache {
            key: key.clone(),
            informer: informer.name.clone(),
            needs,
            store_version,
        };
        match self {
            Wait::Version { version, .. } => match informer.progress.store_revision() {
                revision if revision.reached(*version) => Met::Yes,
                StoreRevision::Opaque(current) => Met::Unusable(current),
                behind => Met::No(stale(format!(">= {version}"), behind.to_string())),
            },
            Wait::Gone { object, uid, .. } => {
                if informer.progress.holds(object, uid.as_deref()) {
                    let current = informer.progress.store_revision().to_string();
                    Met::No(stale(format!("{object} gone"), current))
                } else {
                    Met::Yes
                }
            }
        }
    }
}

/// The records, by key. Invariant: no key maps to an empty list.
struct Pending {
    waits: HashMap<ObjectKey, Vec<Wait>>,
    /// Sweep when `waits` grows past this.
    sweep_at: usize,
}

struct Inner {
    /// The controller's name, for logs.
    controller: RwLock<String>,
    /// The protection is wanted (a builder option).
    enabled: AtomicBool,
    /// A resourceVersion was not an integer: the protection is off for good.
    unusable: AtomicBool,
    informers: RwLock<HashMap<GroupKind, Vec<Arc<Watched>>>>,
    pending: Mutex<Pending>,
    /// `pending.waits.len()`, readable without the lock: the check's fast path.
    keys: AtomicUsize,
    skips: AtomicU64,
}

/// Records a controller's writes per key and says whether its caches show them yet: see the
/// [module docs](self). Cheap to clone; clones share one store. A controller makes one
/// ([`Controller::consistency`](crate::controller::Controller::consistency)); its workers check
/// it before each reconcile, and its reconciler records through [`writes`](Self::writes).
#[derive(Clone)]
pub struct ConsistencyStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ConsistencyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsistencyStore")
            .field("controller", &*self.inner.controller.read())
            .field("active", &self.is_active())
            .field("keys", &self.pending_keys())
            .finish()
    }
}

impl ConsistencyStore {
    /// An empty store for controller `controller` (a name for logs), with no informers: writes
    /// are recorded only for informers added with [`track`](Self::track) (the controller adds
    /// its own when it runs).
    pub fn new(controller: &str) -> ConsistencyStore {
        ConsistencyStore {
            inner: Arc::new(Inner {
                controller: RwLock::new(controller.to_string()),
                enabled: AtomicBool::new(true),
                unusable: AtomicBool::new(false),
                informers: RwLock::new(HashMap::new()),
                pending: Mutex::new(Pending {
                    waits: HashMap::new(),
                    sweep_at: FIRST_SWEEP,
                }),
                keys: AtomicUsize::new(0),
                skips: AtomicU64::new(0),
            }),
        }
    }

    /// Renames the controller (in logs).
    pub(crate) fn set_controller(&self, name: &str) {
        *self.inner.controller.write() = name.to_string();
    }

    /// Turns the protection on or off (on by default). Off, nothing is recorded and every check
    /// passes: the controller behaves as one without it.
    pub fn set_enabled(&self, enabled: bool) {
        self.inner.enabled.store(enabled, Ordering::Relaxed);
        if !enabled {
            self.clear_all();
        }
    }

    /// Whether writes are recorded and checked: enabled, and no resourceVersion so far was
    /// anything but an integer.
    pub fn is_active(&self) -> bool {
        self.inner.enabled.load(Ordering::Relaxed) && !self.inner.unusable.load(Ordering::Relaxed)
    }

    /// Makes writes of `informer`'s kind count against it (`scope`: the objects it caches). An
    /// informer already tracked with the same scope is not added twice.
    pub fn track<K: Kind<DynamicType = ()>>(
        &self,
        informer: &SharedIndexInformer<K>,
        scope: &Scope,
    ) {
        self.track_kind(informer, &K::api_resource(&()), scope);
    }

    /// [`track`](Self::track) for an informer of any kind, named by `resource` (a controller's
    /// `DynamicObject` informers).
    pub(crate) fn track_kind<K: Object>(
        &self,
        informer: &SharedIndexInformer<K>,
        resource: &ApiResource,
        scope: &Scope,
    ) {
        let kind = GroupKind {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
        };
        let mut informers = self.inner.informers.write();
        let list = informers.entry(kind).or_default();
        if list.iter().any(|w| w.scope == *scope) {
            return;
        }
        let matcher = scope
            .matcher()
            .inspect_err(|error| {
                tracing::warn!(
                    controller = %self.inner.controller.read(), informer = informer.name(), %error,
                    "the informer's label selector does not parse here; only writes of objects it \
                     already caches will wait for it"
                );
            })
            .ok();
        list.push(Arc::new(Watched {
            name: informer.name().to_string(),
            scope: scope.clone(),
            matcher,
            progress: Box::new(informer.clone()),
        }));
    }

    /// Tracks a stand-in for an informer of `resource`'s kind over `scope`, for tests.
    #[cfg(test)]
    fn track_progress(&self, resource: &ApiResource, scope: &Scope, progress: Box<dyn Progress>) {
        let kind = GroupKind {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
        };
        self.inner
            .informers
            .write()
            .entry(kind)
            .or_default()
            .push(Arc::new(Watched {
                name: "fake".into(),
                scope: scope.clone(),
                matcher: scope.matcher().ok(),
                progress,
            }));
    }

    /// A handle that records writes made for `key` (the key being reconciled).
    pub fn writes(&self, key: ObjectKey) -> Writes {
        Writes {
            store: self.clone(),
            key,
        }
    }

    /// Records that a write made for `key` left `written` (the metadata of the object as the
    /// server answered it) at its resourceVersion, in the informers caching `resource`'s kind that
    /// hold it.
    pub fn wrote(&self, key: &ObjectKey, resource: &ApiResource, written: &ObjectMeta) {
        if !self.is_active() {
            return;
        }
        let version = written.resource_version.as_deref().unwrap_or_default();
        let Ok(version) = version.parse::<u64>() else {
            self.turn_off(&format!("a write answered resourceVersion {version:?}"));
            return;
        };
        let object = ObjectKey::new(
            written.namespace.as_deref(),
            written.name.as_deref().unwrap_or_default(),
        );
        let ended = ends_the_object(written);
        let waits: Vec<Wait> = self
            .informers_of(resource)
            .into_iter()
            // In its scope now, or cached (then the write moved it out of the scope, and the
            // informer will hear of that as a delete at this version).
            .filter(|informer| {
                informer.holds_scope_of(written) || informer.progress.holds(&object, None)
            })
            .map(|informer| {
                if ended {
                    // Its answer's version may be one the cache shows already, the object
                    // still in it (kube-apiserver's): only the object's absence says the
                    // cache has seen the end.
                    Wait::Gone {
                        informer,
                        object: object.clone(),
                        uid: written.uid.clone(),
                    }
                } else {
                    Wait::Version { informer, version }
                }
            })
            .collect();
        self.record(key, waits);
    }

    /// Records that a write made for `key` deleted `object` (of `resource`'s kind), and the
    /// server answered `outcome`: the object while it waits (a grace period, finalizers), whose
    /// resourceVersion is recorded as for any write; or a `Status`, after which the informers must
    /// no longer hold it.
    pub fn deleted(
        &self,
        key: &ObjectKey,
        resource: &ApiResource,
        object: &ObjectKey,
        outcome: DeleteOutcome<'_>,
    ) {
        match outcome {
            DeleteOutcome::Pending(still_there) => self.wrote(key, resource, still_there),
            DeleteOutcome::Gone { uid } => {
                if !self.is_active() {
                    return;
                }
                let waits = self
                    .informers_of(resource)
                    .into_iter()
                    .map(|informer| Wait::Gone {
                        informer,
                        object: object.clone(),
                        uid: uid.map(str::to_string),
                    })
                    .collect();
                self.record(key, waits);
            }
        }
    }

    fn informers_of(&self, resource: &ApiResource) -> Vec<Arc<Watched>> {
        let kind = GroupKind {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
        };
        self.inner
            .informers
            .read()
            .get(&kind)
            .cloned()
            .unwrap_or_default()
    }

    fn record(&self, key: &ObjectKey, waits: Vec<Wait>) {
        if waits.is_empty() {
            return;
        }
        let mut pending = self.inner.pending.lock();
        let list = pending.waits.entry(key.clone()).or_default();
        for wait in waits {
            merge(list, wait);
        }
        if pending.waits.len() > pending.sweep_at {
            sweep(&mut pending);
            pending.sweep_at = (pending.waits.len() * 2).max(FIRST_SWEEP);
        }
        self.inner
            .keys
            .store(pending.waits.len(), Ordering::Relaxed);
    }

    /// `Ok` if every informer `key`'s recorded writes went through has caught up (forgetting
    /// those records); else which one is behind. Always `Ok` when the protection is off.
    pub fn ensure_fresh(&self, key: &ObjectKey) -> Result<(), StaleCache> {
        self.fresh_in(key, None)
    }

    /// Waits until the informer named `informer` shows every write recorded for `key` that it
    /// must show, woken by each move of its store (`versions`), for at most `max_wait`; the
    /// reconcile context's cached reads wait this way.
    pub(crate) async fn wait_fresh_in(
        &self,
        key: &ObjectKey,
        informer: &str,
        mut versions: tokio::sync::watch::Receiver<String>,
        max_wait: Duration,
    ) -> Result<(), StaleCache> {
        let deadline = crate::deadline::saturating_deadline(tokio::time::Instant::now(), max_wait);
        loop {
            let stale = match self.fresh_in(key, Some(informer)) {
                Ok(()) => return Ok(()),
                Err(stale) => stale,
            };
            match tokio::time::timeout_at(deadline, versions.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return Err(stale),
            }
        }
    }

    /// [`ensure_fresh`](Self::ensure_fresh), for the records of the informer named `only` if
    /// given, else of all.
    fn fresh_in(&self, key: &ObjectKey, only: Option<&str>) -> Result<(), StaleCache> {
        if self.inner.keys.load(Ordering::Relaxed) == 0 || !self.is_active() {
            return Ok(());
        }
        let mut pending = self.inner.pending.lock();
        let Some(list) = pending.waits.get_mut(key) else {
            return Ok(());
        };
        let mut behind = None;
        let mut unusable = None;
        let concerned = |wait: &Wait| only.is_none_or(|name| wait.informer().name == name);
        list.retain(|wait| {
            if !concerned(wait) {
                return true;
            }
            match wait.met(key) {
                Met::Yes => false,
                Met::No(stale) => {
                    behind.get_or_insert(stale);
                    true
                }
                Met::Unusable(version) => {
                    unusable = Some(version);
                    true
                }
            }
        });
        if list.is_empty() {
            pending.waits.remove(key);
        }
        self.inner
            .keys
            .store(pending.waits.len(), Ordering::Relaxed);
        drop(pending);
        if let Some(version) = unusable {
            self.turn_off(&format!(
                "an informer's store is at resourceVersion {version:?}"
            ));
            return Ok(());
        }
        match behind {
            Some(stale) => Err(stale),
            None => Ok(()),
        }
    }

    /// Forgets every record of `key` (its object was deleted).
    pub fn forget(&self, key: &ObjectKey) {
        if self.inner.keys.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut pending = self.inner.pending.lock();
        pending.waits.remove(key);
        self.inner
            .keys
            .store(pending.waits.len(), Ordering::Relaxed);
    }

    /// Keys with records now.
    pub fn pending_keys(&self) -> usize {
        self.inner.keys.load(Ordering::Relaxed)
    }

    /// Reconciles skipped so far because a cache was stale.
    pub fn skips(&self) -> u64 {
        self.inner.skips.load(Ordering::Relaxed)
    }

    pub(crate) fn count_skip(&self) {
        self.inner.skips.fetch_add(1, Ordering::Relaxed);
    }

    fn turn_off(&self, why: &str) {
        if !self.inner.unusable.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                controller = %self.inner.controller.read(),
                "{why}, which is not an integer: resourceVersions cannot be compared on this \
                 server, so the stale-cache protection is off for this controller"
            );
        }
        self.clear_all();
    }

    fn clear_all(&self) {
        let mut pending = self.inner.pending.lock();
        pending.waits.clear();
        self.inner.keys.store(0, Ordering::Relaxed);
    }
}

/// Whether a write answered with `written` ended its object: it is being deleted
/// (`deletionTimestamp`), with no grace period left to wait out and no finalizer left to hold it,
/// so the server removes it now. The write that removes the last finalizer of a terminating
/// object is the usual one. (A Pod's graceful delete has a grace period: it stays until then.)
fn ends_the_object(written: &ObjectMeta) -> bool {
    written.deletion_timestamp.is_some()
        && written.finalizers.as_ref().is_none_or(Vec::is_empty)
        && written.deletion_grace_period_seconds.unwrap_or(0) == 0
}

/// Adds `wait` to a key's list: a version wait replaces an older one for the same informer.
fn merge(list: &mut Vec<Wait>, wait: Wait) {
    if let Wait::Version { informer, version } = &wait {
        for existing in list.iter_mut() {
            if let Wait::Version {
                informer: held,
                version: held_version,
            } = existing
            {
                if Arc::ptr_eq(held, informer) {
                    *held_version = (*held_version).max(*version);
                    return;
                }
            }
        }
    }
    list.push(wait);
}

/// Drops every wait already met (a store that caught up), and keys left with none.
fn sweep(pending: &mut Pending) {
    pending.waits.retain(|key, list| {
        list.retain(|wait| !matches!(wait.met(key), Met::Yes));
        !list.is_empty()
    });
}

/// Records the writes made for one key: see the [module docs](self). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Writes {
    store: ConsistencyStore,
    key: ObjectKey,
}

impl Writes {
    /// The key the writes are made for.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// `client`, with every write the server commits through it (through any `Api` built on it)
    /// recorded for this key. The reconcile context hands each reconcile such a client.
    pub fn client(&self, client: &Client) -> Client {
        client.with_write_observer(Arc::new(self.clone()))
    }

    /// `api`, with every write the server commits through it recorded for this key (see
    /// [`client`](Self::client)).
    pub fn api<O: Object>(&self, api: Api<O>) -> Api<O> {
        api.with_write_observer(Arc::new(self.clone()))
    }

    /// Records a write made some other way: `written` is the object of kind `resource` as the
    /// server answered it.
    pub fn wrote<O: Object>(&self, resource: &ApiResource, written: &O) {
        self.store.wrote(&self.key, resource, written.meta());
    }

    /// The store the writes are recorded in.
    pub(crate) fn store(&self) -> &ConsistencyStore {
        &self.store
    }
}

/// Each write committed through a client observed by a `Writes` is recorded for its key.
impl WriteObserver for Writes {
    fn committed(&self, resource: &ApiResource, written: &ObjectMeta) {
        self.store.wrote(&self.key, resource, written);
    }

    fn deleted(
        &self,
        resource: &ApiResource,
        object: &ObjectKey,
        _: DeleteNote,
        outcome: DeleteOutcome<'_>,
    ) {
        self.store.deleted(&self.key, resource, object, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config_map(resource_version: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.name = Some("x".into());
        cm.metadata.resource_version = Some(resource_version.into());
        cm
    }

    #[test]
    fn stale_protection_turns_off_for_good_on_a_resource_version_that_is_not_an_integer() {
        let store = ConsistencyStore::new("test");
        let key = ObjectKey::from("ns/x");
        let resource = ApiResource::of::<ConfigMap>();
        // No informer caches ConfigMaps: an integer version records nothing to wait for.
        store.wrote(&key, &resource, &config_map("12").metadata);
        assert!(store.is_active());
        assert_eq!(store.pending_keys(), 0);
        assert!(store.ensure_fresh(&key).is_ok());
        // An opaque version: nothing can be compared on this server any more.
        store.wrote(&key, &resource, &config_map("a1b2").metadata);
        assert!(!store.is_active());
        store.wrote(&key, &resource, &config_map("13").metadata);
        assert_eq!(store.pending_keys(), 0);
        assert!(store.ensure_fresh(&key).is_ok());
    }

    /// An informer whose answers the test sets: the store's revision, and whether it holds `ns/x`.
    struct Fake {
        revision: AtomicU64,
        holds: AtomicBool,
    }

    impl Progress for Arc<Fake> {
        fn store_revision(&self) -> StoreRevision {
            StoreRevision::of(&self.revision.load(Ordering::Relaxed).to_string())
        }
        fn holds(&self, _: &ObjectKey, _: Option<&str>) -> bool {
            self.holds.load(Ordering::Relaxed)
        }
    }

    /// kube-apiserver answers the PATCH that removes a terminating object's last finalizer with
    /// a resourceVersion its cache already shows, and the DELETED event comes one revision later.
    /// The write ended the object: the key waits until the cache has dropped it, however early
    /// the version was (else the next reconcile finds the finalizer still there and cleans up
    /// again).
    #[test]
    fn author_trap_a_write_that_removes_the_last_finalizer_waits_for_the_object_to_go() {
        let store = ConsistencyStore::new("test");
        let fake = Arc::new(Fake {
            revision: AtomicU64::new(20),
            holds: AtomicBool::new(true),
        });
        store.track_progress(
            &ApiResource::of::<ConfigMap>(),
            &Scope::all(),
            Box::new(fake.clone()),
        );
        let key = ObjectKey::from("ns/x");
        let mut ended = config_map("20");
        ended.metadata.uid = Some("u1".into());
        ended.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        ended.metadata.deletion_grace_period_seconds = Some(0);
        ended.metadata.finalizers = Some(Vec::new());
        store.wrote(&key, &ApiResource::of::<ConfigMap>(), &ended.metadata);
        assert!(
            store.ensure_fresh(&key).is_err(),
            "the cache is at the answered version but still holds the object"
        );
        fake.revision.store(21, Ordering::Relaxed);
        fake.holds.store(false, Ordering::Relaxed);
        assert!(store.ensure_fresh(&key).is_ok(), "gone: fresh");
        // A graceful delete (a Pod's 30 s) keeps the object: the version is enough there.
        let mut graceful = config_map("30");
        graceful.metadata.deletion_timestamp = ended.metadata.deletion_timestamp.clone();
        graceful.metadata.deletion_grace_period_seconds = Some(30);
        fake.revision.store(30, Ordering::Relaxed);
        fake.holds.store(true, Ordering::Relaxed);
        store.wrote(&key, &ApiResource::of::<ConfigMap>(), &graceful.metadata);
        assert!(
            store.ensure_fresh(&key).is_ok(),
            "still there, as it should be"
        );
        // A finalizer left: the object stays; the version is enough.
        let mut kept = ended.clone();
        kept.metadata.resource_version = Some("31".into());
        kept.metadata.finalizers = Some(vec!["other.example.com/cleanup".into()]);
        fake.revision.store(31, Ordering::Relaxed);
        store.wrote(&key, &ApiResource::of::<ConfigMap>(), &kept.metadata);
        assert!(
            store.ensure_fresh(&key).is_ok(),
            "another finalizer keeps it"
        );
    }

    #[test]
    fn stale_protection_switched_off_records_nothing() {
        let store = ConsistencyStore::new("test");
        store.set_enabled(false);
        assert!(!store.is_active());
        let key = ObjectKey::from("ns/x");
        store.wrote(
            &key,
            &ApiResource::of::<ConfigMap>(),
            &config_map("12").metadata,
        );
        assert_eq!(store.pending_keys(), 0);
        assert!(store.ensure_fresh(&key).is_ok());
    }
}
