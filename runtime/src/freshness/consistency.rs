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
//! A delete answered with a `Status` of an object the informer has not shown yet (created by
//! someone else a moment ago) is "gone" at once, while its creation and deletion still arrive
//! later: its uid is remembered and left out of the context's cached reads
//! ([`Context::cache`](crate::controller::Context::cache)), as the read-your-own-writes client
//! does (the [record](super::record)'s delete rule).
//!
//! ## Comparing resourceVersions
//!
//! ResourceVersions are opaque strings in general. Only where the server's are integers (etcd's
//! revisions: every kube-apiserver so far, and ferrokube's embedded server) does "the store is at
//! ≥ r" mean anything. The first version that is not an integer turns the protection off for this
//! controller, with a warning in the log: from then on nothing is recorded and nothing skipped.
//! A store that has not listed yet (`""`) counts as behind.
//!
//! ## One record, two views
//!
//! The store is a view over the [write record](super::record), whose accounts are the
//! controller's keys: what is recorded, when a wait is met and how the record stays bounded
//! (met waits forgotten, the key's waits cleared when its object is deleted, before
//! [`Reconciler::deleted`](crate::controller::Reconciler::deleted), and a sweep) are the record's,
//! shared with the [read-your-own-writes client](super::read_your_writes). A stale key is a
//! [`Stale`]: the informer behind, the version wanted and the one seen, the objects still to go.
//! When no key has a record, the check costs one atomic load.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferrokube_core::{ObjectKey, Scope};
use ferrokube_informer::SharedIndexInformer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::record::{Recorder, Stale, WriteRecord};
use ferrokube_client::Client;
use ferrokube_client::api::Api;
use ferrokube_client::write_observer::{DeleteNote, DeleteOutcome, WriteObserver};
use ferrokube_core::{ApiResource, Kind, Object};

/// How long a skipped key waits before it is tried again, unless an event brings it sooner
/// (which the write's own watch event usually does). Not a timeout: the workers never wait for
/// a cache, they skip and come back. Long enough for a healthy watch (a few milliseconds behind
/// the write) to have delivered, short enough to go unnoticed next to the requests a reconcile
/// makes. Set with [`Controller::stale_requeue`](crate::controller::Controller::stale_requeue).
pub const DEFAULT_STALE_REQUEUE: Duration = Duration::from_millis(100);

/// Records a controller's writes per key and says whether its caches show them yet: see the
/// [module docs](self). A view over the [write record](super::record), whose accounts are the
/// controller's keys. Cheap to clone; clones share one store. A controller makes one
/// ([`Controller::consistency`](crate::controller::Controller::consistency)); its workers check
/// it before each reconcile, and its reconciler records through [`writes`](Self::writes).
#[derive(Clone)]
pub struct ConsistencyStore {
    record: WriteRecord<ObjectKey>,
    /// Reconciles skipped so far because a cache was stale.
    skips: Arc<AtomicU64>,
}

impl std::fmt::Debug for ConsistencyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsistencyStore")
            .field("controller", &self.record.owner())
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
            record: WriteRecord::new(controller),
            skips: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Renames the controller (in logs).
    pub(crate) fn set_controller(&self, name: &str) {
        self.record.rename(name);
    }

    /// Turns the protection on or off (on by default). Off, nothing is recorded and every check
    /// passes: the controller behaves as one without it.
    pub fn set_enabled(&self, enabled: bool) {
        self.record.set_enabled(enabled);
    }

    /// Whether writes are recorded and checked: enabled, and no resourceVersion so far was
    /// anything but an integer.
    pub fn is_active(&self) -> bool {
        self.record.is_active()
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
        self.record
            .track(resource, informer.name(), scope, Box::new(informer.clone()));
    }

    /// A handle that records writes made for `key` (the key being reconciled).
    pub fn writes(&self, key: ObjectKey) -> Writes {
        Writes {
            store: self.clone(),
            recorder: Arc::new(self.record.recorder(key)),
        }
    }

    /// Records that a write made for `key` left `written` (the metadata of the object as the
    /// server answered it) at its resourceVersion, in the informers caching `resource`'s kind that
    /// hold it.
    pub fn wrote(&self, key: &ObjectKey, resource: &ApiResource, written: &ObjectMeta) {
        self.record.wrote(key, resource, written);
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
        self.record
            .deleted(key, resource, object, DeleteNote::empty(), outcome);
    }

    /// `Ok` if every informer `key`'s recorded writes went through has caught up (forgetting
    /// those records); else which one is behind, and what it misses. Always `Ok` when the
    /// protection is off.
    pub fn ensure_fresh(&self, key: &ObjectKey) -> Result<(), Stale> {
        self.record
            .settle(key, None)
            .map_err(|stale| stale.for_key(key))
    }

    /// Waits until the informer named `informer` shows every write recorded for `key` that it
    /// must show, woken by each move of its store (`versions`), for at most `max_wait`; the
    /// reconcile context's cached reads wait this way.
    pub(crate) async fn wait_fresh_in(
        &self,
        key: &ObjectKey,
        informer: &str,
        versions: tokio::sync::watch::Receiver<String>,
        max_wait: Duration,
    ) -> Result<(), Stale> {
        let check = || self.record.settle(key, Some(informer));
        super::record::wait_until(check, versions, max_wait)
            .await
            .map_err(|stale| stale.for_key(key))
    }

    /// Whether `meta` is of an object a write of this controller deleted before any of its
    /// caches showed it (its creation may still arrive): reads leave it out.
    pub(crate) fn is_hidden(&self, meta: &ObjectMeta) -> bool {
        self.record.is_hidden(meta)
    }

    /// Leaves out of `objects` those [hidden](Self::is_hidden).
    pub(crate) fn drop_hidden<K: Object>(&self, objects: &mut Vec<Arc<K>>) {
        self.record.drop_hidden(objects);
    }

    /// Forgets every record of `key` (its object was deleted).
    pub fn forget(&self, key: &ObjectKey) {
        self.record.forget(key);
    }

    /// Keys with records now.
    pub fn pending_keys(&self) -> usize {
        self.record.accounts()
    }

    /// Reconciles skipped so far because a cache was stale.
    pub fn skips(&self) -> u64 {
        self.skips.load(Ordering::Relaxed)
    }

    pub(crate) fn count_skip(&self) {
        self.skips.fetch_add(1, Ordering::Relaxed);
    }

    /// Tracks a stand-in for an informer of `resource`'s kind over `scope`, for tests.
    #[cfg(test)]
    fn track_progress(
        &self,
        resource: &ApiResource,
        scope: &Scope,
        progress: Box<dyn super::record::Progress>,
    ) {
        self.record.track(resource, "fake", scope, progress);
    }
}

/// Records the writes made for one key: see the [module docs](self). Cheap to clone.
#[derive(Clone)]
pub struct Writes {
    store: ConsistencyStore,
    /// The record's write observer for this key: what every client and `Api` handed out carries.
    recorder: Arc<Recorder<ObjectKey>>,
}

impl std::fmt::Debug for Writes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writes")
            .field("store", &self.store)
            .field("key", self.key())
            .finish()
    }
}

impl Writes {
    /// The key the writes are made for.
    pub fn key(&self) -> &ObjectKey {
        self.recorder.account()
    }

    /// `client`, with every write the server commits through it (through any `Api` built on it)
    /// recorded for this key. The reconcile context hands each reconcile such a client.
    pub fn client(&self, client: &Client) -> Client {
        client.with_write_observer(self.recorder.clone())
    }

    /// `api`, with every write the server commits through it recorded for this key (see
    /// [`client`](Self::client)).
    pub fn api<O: Object>(&self, api: Api<O>) -> Api<O> {
        api.with_write_observer(self.recorder.clone())
    }

    /// Records a write made some other way: `written` is the object of kind `resource` as the
    /// server answered it.
    pub fn wrote<O: Object>(&self, resource: &ApiResource, written: &O) {
        self.store.wrote(self.key(), resource, written.meta());
    }

    /// The store the writes are recorded in.
    pub(crate) fn store(&self) -> &ConsistencyStore {
        &self.store
    }
}

/// A `Writes` is its key's write observer too (for writes reported to it by hand, as the event
/// recorder's posting task does): it hands each to the record's one observer.
impl WriteObserver for Writes {
    fn committed(&self, resource: &ApiResource, written: &ObjectMeta) {
        self.recorder.committed(resource, written);
    }

    fn deleting(&self, resource: &ApiResource, object: &ObjectKey) -> DeleteNote {
        self.recorder.deleting(resource, object)
    }

    fn deleted(
        &self,
        resource: &ApiResource,
        object: &ObjectKey,
        note: DeleteNote,
        outcome: DeleteOutcome<'_>,
    ) {
        self.recorder.deleted(resource, object, note, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::freshness::record::Progress;
    use ferrokube_informer::StoreRevision;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::atomic::AtomicBool;

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
        fn held_uid(&self, _: &ObjectKey) -> Option<Option<String>> {
            self.holds
                .load(Ordering::Relaxed)
                .then(|| Some("u1".to_string()))
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
