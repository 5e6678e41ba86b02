//! # A read-your-own-writes client: cache reads that show this client's own writes
//!
//! A controller writes to the server and reads from its informer's cache. The two are not in
//! step: the cache learns of a write only when the write's watch event arrives, a few
//! milliseconds later on a healthy cluster, seconds later on a busy one. So a controller that
//! reads right after its own write often sees the object as it was *before* the write:
//!
//! ```text
//!  t0  PUT cm/web data=v2          → server: cm/web@105 (v2)
//!  t1  lister.get("web")           → cache:  cm/web@100 (v1)   ✗ our own write is missing
//!  t2  the watch delivers @105     → cache:  cm/web@105 (v2)
//! ```
//!
//! and then decides again from the old state: a second create (409 AlreadyExists), an update
//! with the old resourceVersion (409 Conflict), a status that goes backwards. [`ReadYourWrites`]
//! closes that gap for one client: it writes through an [`Api`], remembers what the server
//! committed, and makes each cache read wait (bounded by [`max_wait`](ReadYourWrites::max_wait))
//! until the informer's store shows those writes.
//!
//! ```no_run
//! use std::time::Duration;
//! use ferrokube_client::api::{Patch, PatchParams};
//! use ferrokube_runtime::controller::ReadYourWrites;
//! use ferrokube_core::Scope;
//! use ferrokube_informer::SharedInformerFactory;
//! use ferrokube_client::{Api, Client};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! # async fn demo(client: Client) -> Result<(), Box<dyn std::error::Error>> {
//! let scope = Scope::namespace("default");
//! let factory = SharedInformerFactory::new(client.clone());
//! let informer = factory.informer::<ConfigMap>(&scope);
//! factory.start()?;
//! factory.wait_for_cache_sync().await;
//!
//! let configmaps = ReadYourWrites::new(Api::namespaced(client, "default"), informer, &scope)
//!     .max_wait(Duration::from_secs(1));
//! let patch = Patch::Merge(serde_json::json!({"data": {"k": "v2"}}));
//! configmaps.api().patch("web", &PatchParams::default(), &patch).await?;
//! let web = configmaps.get(Some("default"), "web").await?; // has k=v2, or Err after 1 s
//! let all = configmaps.list(Some("default"), &"app=web".parse()?).await?;
//! # Ok(()) }
//! ```
//!
//! ```text
//!            create / replace / patch / *_status / delete
//!  caller ─────────────────────────────────────────────▶ Api ─▶ server ─ commits at r
//!    │                                                    │ on success: record r
//!    │                                                    ▼ (highest r; "gone" for a delete)
//!    │  get / list                             ┌──── records of completed writes ────┐
//!    └──────────────▶ snapshot the records ────┘                                     │
//!                     (the read starts here)     wait until the store's version ≥ r  │
//!                            │                   and every "gone" object is absent   │
//!                            ▼                   (woken at each move, ≤ max_wait)    │
//!            server ─watch─▶ informer ─▶ Store ──┴─▶ read ─▶ Vec<Arc<K>> / Option<Arc<K>>
//! ```
//!
//! ## The guarantee
//!
//! A read *starts* when [`get`](ReadYourWrites::get), [`list`](ReadYourWrites::list) or
//! [`wait_for_writes`](ReadYourWrites::wait_for_writes) is called (not when its future is first
//! polled). Let *W* be the writes made through this client (this handle or any clone of it) that
//! **completed successfully before the read started** (their method returned `Ok`), and that the
//! informer will show (see *scope* below). Then the read either
//!
//! - returns a result from the cache that includes every write in *W*: each written object at
//!   the version that write gave it or a newer state (which may be someone else's later change,
//!   or its deletion), each object deleted by a write in *W* absent (or, while finalizers or a
//!   grace period hold it, at least as marked for deletion by that delete). The cache is then at
//!   a resourceVersion of the server at least as new as every write in *W*, so the result is the
//!   informer's view of one state the server had, except that objects this client deleted
//!   before the cache ever showed them are left out (see [How it works](self#how-it-works)); or
//! - fails with [`ReadError::Timeout`] after [`max_wait`](ReadYourWrites::max_wait), saying what it
//!   waited for and where the store was. It never returns a result that misses a write of *W*.
//!   An informer that is stopped, not started, or whose watch is broken makes every read that
//!   needs a write fail this way: the error is the signal.
//!
//! What it does **not** promise:
//!
//! - **Writes still in flight when the read started** (called, not yet answered) are not waited
//!   for, even if they complete while the read waits. This is the only sound choice: until the
//!   server answers, the client knows neither whether the write will commit nor at which
//!   resourceVersion, so there is nothing to wait for yet; a read and a write that overlap are
//!   concurrent, and either order is a correct answer; and waiting for later writes would let a
//!   stream of writes postpone a read forever. Whoever needs a write's effect awaits the write,
//!   then reads.
//! - **Writes by anyone else** (other clients, other processes, the plain `Api` underneath):
//!   they show up when the cache gets there, as they always do.
//! - **Linearizability against the server.** The result is at least as new as this client's
//!   completed writes, not as new as the server: another client's newer write may be missing.
//!   Read the server ([`api`](ReadYourWrites::api)) when that matters.
//! - **Failed writes.** Only writes the server answered with success are recorded; a write that
//!   timed out on the client after the server committed it is not.
//! - **Objects outside the informer's scope**, which the cache will never show. A write counts
//!   only if the object as the server answered it is in the [`Scope`] given to
//!   [`new`](ReadYourWrites::new) (its namespace and label selector), or the store holds its key
//!   when the write completes (the informer will hear of it: an update, or a delete when it left
//!   the selection). Field selectors are not evaluated here: with one, only the second rule
//!   applies, so a create of an object the store does not hold yet is not waited for. One case
//!   slips through both rules: an object created by someone else whose creation the cache has not
//!   shown yet, which our write then moves out of the scope.
//! - **Deletes the server answers with a `Status` without a uid**, of an object the store does not
//!   hold: nothing is recorded (kube-apiserver and the embedded server always send the uid).
//! - **Servers whose resourceVersions are not integers.** They are opaque strings; comparing them
//!   means something only for etcd's revisions (every kube-apiserver so far, and ferrokube's
//!   embedded server). The first resourceVersion that does not parse as an integer (a write's
//!   answer, or the store's) turns the protection off for this client, with one warning in the
//!   log: from then on reads do not wait, they read the cache as it is.
//!
//! A read waits for *all* of the client's earlier writes, not only those of the object it reads:
//! so a `get` may wait for a write to another object. That keeps the records to one number and
//! the result to one state of the server; on a healthy watch the wait is a few milliseconds.
//!
//! ## How it works
//!
//! - Each successful write records the resourceVersion the server answered (the highest one
//!   wins). A delete answered with the object (finalizers, a grace period, or a kind such as
//!   Pods whose deletes answer the deleted object, at the delete's own resourceVersion on
//!   kube-apiserver and the embedded server) is a write like any other. A delete answered with
//!   a `Status` has no resourceVersion: if the store still holds the object (same uid) when the
//!   answer arrives, the client records that it must go; if the store held it when the delete
//!   was sent and has dropped it since, the delete is applied and nothing is needed; if the
//!   store never held it (its creation has not reached the cache yet, or never will), its uid is
//!   remembered and filtered out of every `get` and `list` result, as uids are never reused.
//! - An update or patch that removes the last finalizer of an object marked for deletion ends it;
//!   kube-apiserver answers it with the object as the write made it, at the resourceVersion the
//!   write *replaced* (the deletion is a later one). Its uid is recorded as one that must go, as
//!   for a delete answered with a `Status` (issue 44).
//! - A read takes a snapshot of the records, subscribes to the store's resourceVersion
//!   ([`SharedIndexInformer::watch_store_resource_version`]), and checks: store version ≥ the
//!   recorded one (as integers; a store that has not listed yet is behind) and every recorded
//!   deleted object absent. If not, it sleeps until the version moves (the store moves it after
//!   each change it applies, so a delete applied wakes it too), checks again, and gives up at the
//!   deadline. No polling.
//!
//! ## Bounds
//!
//! All writes together cost one integer (the highest version), except deletes answered with a
//! `Status`: one record per object deleted while the store still held it, which goes as soon as
//! a read (or a sweep, run whenever the number of records doubles, from 1,024) finds the object
//! absent, so there are at most about twice as many records as such deletes the cache has not
//! shown yet, or 1,024; and the uids of deleted objects the store never held, the last 1,024.
//!
//! ## Choosing `max_wait`
//!
//! Default [`DEFAULT_MAX_WAIT`], 3 s. client-go has no such setting (it has no client that
//! waits: client-go 1.36's consistency store never waits, it skips the reconcile and requeues). 3 s is what kube-apiserver's watch cache itself waits for a
//! resourceVersion it has not reached yet before giving up: a watch further behind than that is
//! not merely slow but broken (reconnecting, relisting, backing off), and a worker blocked longer
//! holds its key while nothing improves; the error lets the caller requeue instead. It is far
//! below the client's 30 s request timeout.
//!
//! ## Compared with upstream
//!
//! - **client-go 1.36** (KEP-5647, stale controller handling) records writes **per controller
//!   key** and, before a reconcile, asks whether the caches have caught up; if not, the reconcile
//!   is skipped and requeued. That is ferrokube's [`consistency`](super::consistency) store. This
//!   client is **per client** instead and guards each read, wherever it happens (a reconcile, a
//!   webhook, a script), by waiting, bounded, for the cache.
//! - **controller-runtime** v0.25 (September 2026) ships one, opt-in
//!   (`client.CacheOptions.EnableReadYourWritesConsistency`); its default client still reads the
//!   cache with no freshness promise. `benches/peers/READ_YOUR_WRITES.md` compares the two.
//! - **kube-rs** has neither.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use ferrokube_core::{LabelSelector, ObjectKey, Scope, ScopeMatcher};
use ferrokube_informer::{Lister, SharedIndexInformer, StoreRevision};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

use ferrokube_client::api::Api;
use ferrokube_client::write_observer::{DeleteNote, DeleteOutcome, WriteObserver};
use ferrokube_core::{ApiResource, Object};

/// How long a read waits for the cache by default: see [Choosing `max_wait`](self#choosing-max_wait).
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(3);

/// Records of deleted objects at which the first sweep runs; later sweeps run each time the count
/// doubles.
const FIRST_SWEEP: usize = 1024;

/// How many uids of deleted objects the store never held are remembered (and filtered).
const DELETED_UIDS: usize = 1024;

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The informer's store did not show this client's earlier writes within `waited`. The watch
    /// is slow or broken; requeue and try again, or read the server.
    #[error(
        "the cache of informer {informer:?} did not show this client's writes within {waited:?}: \
         the read needs {needs}; the store is at resourceVersion {store_version:?}"
    )]
    Timeout {
        /// The informer's name.
        informer: String,
        /// The read's `max_wait`.
        waited: Duration,
        /// What was still missing: `resourceVersion >= <r>`, and/or `<key> (uid <u>) gone`.
        needs: String,
        /// The store's resourceVersion at the deadline (`""`: it has not listed yet).
        store_version: String,
    },
    /// A reconcile context's cached read of an informer the controller does not run (it was not
    /// taken from the controller's factory before `run`, so nothing started it): it would read an
    /// empty cache. Take it from `Controller::factory()` before `run`, or read the server.
    #[error(
        "informer {informer:?} is not synced: the controller does not run it (take it from \
         Controller::factory() before run)"
    )]
    NotRunning {
        /// The informer's name.
        informer: String,
    },
}

/// A deleted object the store must stop holding: its key and, if known, its uid (then a newer
/// object under the same key does not count).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Gone {
    key: ObjectKey,
    uid: Option<String>,
}

/// What this client's completed writes ask of the cache.
struct Records {
    /// The highest resourceVersion the server answered to a completed write the informer will
    /// show; `None` before the first one. Only ever grows (until the protection goes off).
    version: Option<u64>,
    /// Objects deleted (answered with a `Status`) while the store still held them, by key.
    /// Invariant: no key maps to an empty list; an entry goes once a check finds it absent.
    gone: HashMap<ObjectKey, Vec<Option<String>>>,
    /// Number of entries in `gone` (all keys), and the count at which the next sweep runs.
    gone_count: usize,
    sweep_at: usize,
    /// Uids of objects deleted (answered with a `Status`) that the store did not hold then:
    /// filtered out of reads. Oldest first, at most `DELETED_UIDS`; `deleted_set` holds the same.
    deleted_order: VecDeque<String>,
    deleted_set: HashSet<String>,
}

/// What one read waits for: the records as they were when it started.
#[derive(Debug, Default)]
struct Needs {
    version: Option<u64>,
    gone: Vec<Gone>,
}

/// The outcome of checking a read's needs against the store.
enum Check {
    Met,
    /// Still missing this (for the error message).
    Behind(String),
    /// The store's resourceVersion is not an integer: the protection must go.
    Unusable(String),
}

struct Shared<K> {
    api: Api<K>,
    informer: SharedIndexInformer<K>,
    /// The informer's scope as a test of metadata; `None` if its label selector did not parse
    /// (then only the "store holds it" rule counts a write).
    matcher: Option<ScopeMatcher>,
    records: Mutex<Records>,
    /// A resourceVersion was not an integer: the protection is off for good.
    off: AtomicBool,
}

/// A client whose cache reads include its own completed writes: see the [module docs](self).
///
/// Cheap to clone; clones share the records (a write through one is waited for by reads through
/// all). [`max_wait`](Self::max_wait) belongs to the handle, so clones may wait differently.
pub struct ReadYourWrites<K> {
    shared: Arc<Shared<K>>,
    max_wait: Duration,
}

impl<K> Clone for ReadYourWrites<K> {
    fn clone(&self) -> Self {
        ReadYourWrites {
            shared: self.shared.clone(),
            max_wait: self.max_wait,
        }
    }
}

impl<K: Object> std::fmt::Debug for ReadYourWrites<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let records = self.shared.records.lock();
        f.debug_struct("ReadYourWrites")
            .field("informer", &self.shared.informer.name())
            .field("active", &self.is_active())
            .field("max_wait", &self.max_wait)
            .field("version", &records.version)
            .field("gone", &records.gone_count)
            .finish()
    }
}

impl<K: Object> ReadYourWrites<K> {
    /// A client that writes through `api` and reads from `informer`, whose objects are those of
    /// `scope` (pass the scope the informer was made with: it decides which writes the cache
    /// will show, and so which ones reads wait for). Waits at most [`DEFAULT_MAX_WAIT`].
    pub fn new(api: Api<K>, informer: SharedIndexInformer<K>, scope: &Scope) -> ReadYourWrites<K> {
        let matcher = scope
            .matcher()
            .inspect_err(|error| {
                tracing::warn!(
                    informer = informer.name(), %error,
                    "the scope's label selector does not parse here; only writes of objects the \
                     cache already holds will be waited for"
                );
            })
            .ok();
        let (group, kind) = (api.resource().group.clone(), api.resource().kind.clone());
        ReadYourWrites {
            shared: Arc::new_cyclic(|shared| Shared {
                api: api.with_write_observer(Arc::new(RecordWrites {
                    shared: shared.clone(),
                    group,
                    kind,
                })),
                informer,
                matcher,
                records: Mutex::new(Records {
                    version: None,
                    gone: HashMap::new(),
                    gone_count: 0,
                    sweep_at: FIRST_SWEEP,
                    deleted_order: VecDeque::new(),
                    deleted_set: HashSet::new(),
                }),
                off: AtomicBool::new(false),
            }),
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// How long a read waits for the cache before it fails with [`ReadError::Timeout`]. Default
    /// [`DEFAULT_MAX_WAIT`] (3 s). `Duration::ZERO`: reads never wait, they fail at once if the
    /// cache is behind.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The `Api` to write through: every write the server commits through it (or through another
    /// `Api` built on its client, of this informer's kind) is recorded, and reads wait for it.
    /// Its reads go to the server.
    pub fn api(&self) -> &Api<K> {
        &self.shared.api
    }

    /// The informer reads come from.
    pub fn informer(&self) -> &SharedIndexInformer<K> {
        &self.shared.informer
    }

    /// The informer's lister, raw: reads through it do not wait for anything.
    pub fn lister(&self) -> Lister<K> {
        self.shared.informer.lister()
    }

    /// Whether reads wait for writes: false once a resourceVersion was not an integer.
    pub fn is_active(&self) -> bool {
        !self.shared.off.load(Ordering::Relaxed)
    }

    // ---- reads -------------------------------------------------------------------------------

    /// The object `namespace`/`name` (`namespace` `None` if cluster-scoped) from the cache, once
    /// the cache shows every write this client completed before this call. The read starts at the
    /// call, not at the first poll.
    pub fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> impl Future<Output = Result<Option<Arc<K>>, ReadError>> + Send + 'static {
        let key = ObjectKey::new(namespace, name);
        let needs = self.needs(Some(&key));
        let this = self.clone();
        async move {
            this.wait(needs).await?;
            let object = this.shared.informer.store().get_by_key(&key);
            Ok(object.filter(|object| !this.deleted_uid(object)))
        }
    }

    /// The cached objects of `namespace` (`None`: every namespace, or a cluster-scoped kind) that
    /// `selector` matches, once the cache shows every write this client completed before this
    /// call. The read starts at the call, not at the first poll.
    pub fn list(
        &self,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> impl Future<Output = Result<Vec<Arc<K>>, ReadError>> + Send + 'static {
        let needs = self.needs(None);
        let this = self.clone();
        let namespace = namespace.map(str::to_string);
        let selector = selector.clone();
        async move {
            this.wait(needs).await?;
            let lister = this.lister();
            let mut objects = match &namespace {
                Some(namespace) => lister.namespace(namespace).list(&selector),
                None => lister.list(&selector),
            };
            this.drop_deleted_uids(&mut objects);
            Ok(objects)
        }
    }

    /// Waits until the cache shows every write this client completed before this call; then any
    /// read of the informer (its lister, its indexes) sees at least that, as the store never goes
    /// back. Unlike [`get`](Self::get) and [`list`](Self::list), such reads do not filter out
    /// objects deleted while the store had not shown them yet (see the
    /// [module docs](self#how-it-works)).
    pub fn wait_for_writes(&self) -> impl Future<Output = Result<(), ReadError>> + Send + 'static {
        let needs = self.needs(None);
        let this = self.clone();
        async move { this.wait(needs).await }
    }

    /// The records now: what a read starting now waits for (deleted objects only of `key`, if
    /// given).
    fn needs(&self, key: Option<&ObjectKey>) -> Needs {
        if !self.is_active() {
            return Needs::default();
        }
        let records = self.shared.records.lock();
        let to_gone = |key: &ObjectKey, uids: &Vec<Option<String>>| {
            uids.iter()
                .map(|uid| Gone {
                    key: key.clone(),
                    uid: uid.clone(),
                })
                .collect::<Vec<_>>()
        };
        let gone = match key {
            Some(key) => records
                .gone
                .get(key)
                .map(|uids| to_gone(key, uids))
                .unwrap_or_default(),
            None => records
                .gone
                .iter()
                .flat_map(|(key, uids)| to_gone(key, uids))
                .collect(),
        };
        Needs {
            version: records.version,
            gone,
        }
    }

    /// Waits until the store meets `needs`, woken by each move of its resourceVersion, at most
    /// `max_wait`.
    async fn wait(&self, needs: Needs) -> Result<(), ReadError> {
        if needs.version.is_none() && needs.gone.is_empty() {
            return Ok(());
        }
        // Subscribe before the first check: a move between the check and the wait still wakes us.
        let mut versions = self.shared.informer.watch_store_resource_version();
        let deadline =
            crate::deadline::saturating_deadline(tokio::time::Instant::now(), self.max_wait);
        loop {
            let missing = match self.check(&needs) {
                Check::Met => {
                    self.forget_gone(&needs.gone);
                    return Ok(());
                }
                Check::Unusable(version) => {
                    self.turn_off(&format!(
                        "the informer's store is at resourceVersion {version:?}"
                    ));
                    return Ok(());
                }
                Check::Behind(missing) => missing,
            };
            match tokio::time::timeout_at(deadline, versions.changed()).await {
                Ok(Ok(())) => continue,
                // The sender lives in the store, which our informer keeps: it cannot be gone. If it
                // were, nothing could move any more: fail as at the deadline.
                Ok(Err(_)) | Err(_) => {
                    let error = ReadError::Timeout {
                        informer: self.shared.informer.name().to_string(),
                        waited: self.max_wait,
                        needs: missing,
                        store_version: self.shared.informer.last_store_sync_resource_version(),
                    };
                    tracing::debug!(%error, "read gave up waiting for the cache");
                    return Err(error);
                }
            }
        }
    }

    /// Whether the store shows what `needs` asks, now.
    fn check(&self, needs: &Needs) -> Check {
        let mut missing = Vec::new();
        if let Some(version) = needs.version {
            match self.shared.informer.store_revision() {
                revision if revision.reached(version) => {}
                StoreRevision::Opaque(current) => return Check::Unusable(current),
                _ => missing.push(format!("resourceVersion >= {version}")),
            }
        }
        for gone in &needs.gone {
            if self.holds(&gone.key, gone.uid.as_deref()) {
                missing.push(match &gone.uid {
                    Some(uid) => format!("{} (uid {uid}) gone", gone.key),
                    None => format!("{} gone", gone.key),
                });
            }
        }
        if missing.is_empty() {
            Check::Met
        } else {
            Check::Behind(missing.join(", "))
        }
    }

    /// The store holds `key` (with this uid, if given).
    fn holds(&self, key: &ObjectKey, uid: Option<&str>) -> bool {
        self.shared.informer.holds(key, uid)
    }

    /// `None` if the store does not hold `key`; else the held object's uid.
    fn held_uid(&self, key: &ObjectKey) -> Option<Option<String>> {
        self.shared
            .informer
            .store()
            .get_by_key(key)
            .map(|held| held.meta().uid.clone())
    }

    /// Drops the records of deleted objects a check found absent (they cannot come back: a uid
    /// is never reused, and the store never goes back).
    fn forget_gone(&self, seen_absent: &[Gone]) {
        if seen_absent.is_empty() {
            return;
        }
        let mut records = self.shared.records.lock();
        for gone in seen_absent {
            let mut removed = 0;
            if let Some(uids) = records.gone.get_mut(&gone.key) {
                let before = uids.len();
                uids.retain(|uid| *uid != gone.uid);
                removed = before - uids.len();
                if uids.is_empty() {
                    records.gone.remove(&gone.key);
                }
            }
            records.gone_count -= removed;
        }
    }

    fn deleted_uid(&self, object: &K) -> bool {
        let records = self.shared.records.lock();
        !records.deleted_set.is_empty()
            && object
                .meta()
                .uid
                .as_deref()
                .is_some_and(|uid| records.deleted_set.contains(uid))
    }

    fn drop_deleted_uids(&self, objects: &mut Vec<Arc<K>>) {
        let records = self.shared.records.lock();
        if records.deleted_set.is_empty() {
            return;
        }
        objects.retain(|object| {
            object
                .meta()
                .uid
                .as_deref()
                .is_none_or(|uid| !records.deleted_set.contains(uid))
        });
    }

    // ---- recording -----------------------------------------------------------------------------

    /// Whether the informer will show a write that left an object with this metadata: it is in
    /// the scope (namespace, labels; a field selector cannot be evaluated here), or the store holds
    /// its key (the informer will hear of it, as an update or as a delete from its selection).
    fn will_show(&self, meta: &ObjectMeta, key: &ObjectKey) -> bool {
        let in_scope = self
            .shared
            .matcher
            .as_ref()
            .is_some_and(|m| m.matches(meta));
        in_scope || self.held_uid(key).is_some()
    }

    /// Records a completed write that left an object with metadata `written` (as the server
    /// answered it).
    fn record_written(&self, written: &ObjectMeta) {
        if !self.is_active() {
            return;
        }
        let key = ObjectKey::new(
            written.namespace.as_deref(),
            written.name.as_deref().unwrap_or_default(),
        );
        let text = written.resource_version.as_deref().unwrap_or_default();
        if text.is_empty() {
            // Nothing to compare (a server that answers without one); nothing to wait for.
            tracing::debug!(%key, "a write answered no resourceVersion");
            return;
        }
        let Ok(version) = text.parse::<u64>() else {
            self.turn_off(&format!("a write answered resourceVersion {text:?}"));
            return;
        };
        if !self.will_show(written, &key) {
            tracing::trace!(%key, "write outside the informer's scope: reads will not wait for it");
            return;
        }
        let mut records = self.shared.records.lock();
        records.version = Some(records.version.map_or(version, |held| held.max(version)));
    }

    /// Records a completed delete of `key` that the server answered with a `Status` naming `uid`
    /// (the object is gone); `held_before`: what the store held under `key` when the delete was
    /// sent.
    fn record_deleted(
        &self,
        key: &ObjectKey,
        held_before: Option<Option<String>>,
        uid: Option<&str>,
    ) {
        if !self.is_active() {
            return;
        }
        let uid = uid.filter(|uid| !uid.is_empty()).map(str::to_string);
        let held_now = self.held_uid(key);
        match uid {
            // The store still has it: it must go before a read may proceed.
            Some(uid) if held_now.as_ref() == Some(&Some(uid.clone())) => {
                self.record_gone(key, Some(uid))
            }
            // The store had it and has applied the delete already: nothing to wait for.
            Some(uid) if held_before == Some(Some(uid.clone())) => {}
            // The store never had it (its creation is still on the way): hide it from reads.
            Some(uid) => self.remember_deleted_uid(uid),
            // No uid: the object the store holds under the key, if any, must go.
            None => {
                if let Some(held) = held_now {
                    self.record_gone(key, held);
                }
            }
        }
    }

    fn record_gone(&self, key: &ObjectKey, uid: Option<String>) {
        let mut records = self.shared.records.lock();
        let uids = records.gone.entry(key.clone()).or_default();
        if uids.contains(&uid) {
            return;
        }
        uids.push(uid);
        records.gone_count += 1;
        if records.gone_count > records.sweep_at {
            self.sweep(&mut records);
            records.sweep_at = (records.gone_count * 2).max(FIRST_SWEEP);
        }
    }

    /// Drops every record of a deleted object the store no longer holds.
    fn sweep(&self, records: &mut Records) {
        let mut count = 0;
        records.gone.retain(|key, uids| {
            uids.retain(|uid| self.holds(key, uid.as_deref()));
            count += uids.len();
            !uids.is_empty()
        });
        records.gone_count = count;
    }

    fn remember_deleted_uid(&self, uid: String) {
        let mut records = self.shared.records.lock();
        if !records.deleted_set.insert(uid.clone()) {
            return;
        }
        records.deleted_order.push_back(uid);
        while records.deleted_order.len() > DELETED_UIDS {
            if let Some(oldest) = records.deleted_order.pop_front() {
                records.deleted_set.remove(&oldest);
            }
        }
    }

    fn turn_off(&self, why: &str) {
        if !self.shared.off.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                informer = self.shared.informer.name(),
                "{why}, which is not an integer: resourceVersions cannot be compared on this \
                 server, so this read-your-own-writes client no longer waits for its writes"
            );
        }
        let mut records = self.shared.records.lock();
        records.version = None;
        records.gone.clear();
        records.gone_count = 0;
        records.deleted_order.clear();
        records.deleted_set.clear();
    }
}

/// Whether a write answered with `written` was the one that ended its object: marked for
/// deletion, no finalizer left and no grace period running (a Pod on a node waits for its kubelet
/// with a positive one). A Namespace waits for its `spec.finalizers` too, which metadata does
/// not show: its writes are never taken for its end.
fn completes_deletion(resource: &ApiResource, written: &ObjectMeta) -> bool {
    let namespace = resource.group.is_empty() && resource.kind == "Namespace";
    written.deletion_timestamp.is_some()
        && written.finalizers.as_ref().is_none_or(Vec::is_empty)
        && written.deletion_grace_period_seconds.unwrap_or(0) == 0
        && !namespace
}

/// The observer a [`ReadYourWrites`] puts on its `Api`: what the writes leave for reads to wait
/// for (see [How it works](self#how-it-works)). It holds the client's records weakly: the `Api`
/// that holds this observer lives in those records' `Shared`, and a strong reference back would
/// keep both alive for ever.
struct RecordWrites<K> {
    shared: Weak<Shared<K>>,
    /// The API group and kind of the informer's objects: writes of other kinds through the same
    /// client are not shown by this informer, so not waited for.
    group: String,
    kind: String,
}

impl<K: Object> RecordWrites<K> {
    /// The client, if it is still alive and `resource` is its kind.
    fn client_for(&self, resource: &ApiResource) -> Option<ReadYourWrites<K>> {
        if resource.group != self.group || resource.kind != self.kind {
            return None;
        }
        self.shared.upgrade().map(|shared| ReadYourWrites {
            shared,
            max_wait: Duration::ZERO,
        })
    }
}

impl<K: Object> WriteObserver for RecordWrites<K> {
    fn committed(&self, resource: &ApiResource, written: &ObjectMeta) {
        let Some(client) = self.client_for(resource) else {
            return;
        };
        client.record_written(written);
        // The write that removes the last finalizer of an object being deleted ends it, but
        // kube-apiserver answers it at the version the write replaced, with the object as the
        // write made it: the deletion is a later version, which the recorded one does not wait
        // for (issue 44: a reconciler read its object back and cleaned up twice). Recorded as a
        // delete as well: the store must drop that uid before a read proceeds.
        if completes_deletion(resource, written) {
            let key = ObjectKey::new(
                written.namespace.as_deref(),
                written.name.as_deref().unwrap_or_default(),
            );
            client.record_deleted(&key, None, written.uid.as_deref());
        }
    }

    /// Keeps the uid the store held under the key when the delete was sent.
    fn deleting(&self, resource: &ApiResource, object: &ObjectKey) -> DeleteNote {
        match self.client_for(resource) {
            Some(client) => DeleteNote::holding(client.held_uid(object)),
            None => DeleteNote::empty(),
        }
    }

    fn deleted(
        &self,
        resource: &ApiResource,
        object: &ObjectKey,
        note: DeleteNote,
        outcome: DeleteOutcome<'_>,
    ) {
        let Some(client) = self.client_for(resource) else {
            return;
        };
        match outcome {
            DeleteOutcome::Pending(still_there) => client.record_written(still_there),
            DeleteOutcome::Gone { uid } => {
                let held_before = note.take::<Option<Option<String>>>().flatten();
                client.record_deleted(object, held_before, uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ferrokube_informer::fake::FakeListerWatcher;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use ferrokube_client::{Client, Config};

    fn cm(name: &str, version: &str, uid: &str, app: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.namespace = Some("default".into());
        object.metadata.name = Some(name.into());
        object.metadata.resource_version = Some(version.into());
        object.metadata.uid = Some(uid.into());
        object.metadata.labels = Some(BTreeMap::from([("app".into(), app.into())]));
        object
    }

    /// A client over an informer that is never started: the tests move its store by hand. The
    /// `Api` points nowhere; nothing here sends a request.
    fn client(scope: &Scope) -> ReadYourWrites<ConfigMap> {
        let url = "http://127.0.0.1:9".parse().expect("url");
        let client = Client::new(Config::new(url)).expect("client");
        let informer = SharedIndexInformer::builder(FakeListerWatcher::<ConfigMap>::new())
            .name("configmaps")
            .build();
        ReadYourWrites::new(Api::namespaced(client, "default"), informer, scope)
            .max_wait(Duration::from_secs(30))
    }

    #[tokio::test]
    async fn read_your_own_writes_a_read_waits_only_for_writes_completed_before_it() {
        let rw = client(&Scope::all());
        let store = rw.informer().store().clone();
        store.set_resource_version("10");
        rw.record_written(&cm("a", "12", "u1", "web").metadata);
        let first = rw.get(Some("default"), "a"); // starts now: needs 12
        rw.record_written(&cm("a", "20", "u1", "web").metadata); // completes after the read started
        let reader = tokio::spawn(first);
        store.insert(Arc::new(cm("a", "12", "u1", "web")));
        store.set_resource_version("12");
        let seen = reader
            .await
            .expect("task")
            .expect("no timeout: 20 is not waited for");
        assert_eq!(seen.expect("cached").resource_version(), "12");
        // A read that starts now needs 20.
        let late = rw
            .clone()
            .max_wait(Duration::ZERO)
            .get(Some("default"), "a");
        assert!(matches!(late.await, Err(ReadError::Timeout { .. })));
    }

    #[tokio::test]
    async fn read_your_own_writes_a_max_wait_of_duration_max_waits_without_panicking() {
        // `Instant::now() + Duration::MAX` overflows: the deadline saturates instead, and the read
        // still ends as soon as the store catches up.
        let rw = client(&Scope::all()).max_wait(Duration::MAX);
        let store = rw.informer().store().clone();
        store.set_resource_version("10");
        rw.record_written(&cm("a", "12", "u1", "web").metadata);
        let reader = tokio::spawn(rw.get(Some("default"), "a"));
        store.insert(Arc::new(cm("a", "12", "u1", "web")));
        store.set_resource_version("12");
        let seen = reader.await.expect("no panic").expect("caught up");
        assert_eq!(seen.expect("cached").resource_version(), "12");
    }

    #[tokio::test]
    async fn read_your_own_writes_non_integer_versions_turn_the_protection_off() {
        let rw = client(&Scope::all()).max_wait(Duration::ZERO);
        rw.record_written(&cm("a", "12", "u1", "web").metadata);
        assert!(rw.is_active());
        assert!(
            rw.get(Some("default"), "a").await.is_err(),
            "store at \"\" is behind"
        );

        // The store's version is not an integer: the read does not wait, and never will again.
        rw.informer().store().set_resource_version("xyz");
        assert_eq!(rw.get(Some("default"), "a").await, Ok(None));
        assert!(!rw.is_active());
        rw.record_written(&cm("a", "99", "u1", "web").metadata);
        assert!(
            rw.needs(None).version.is_none(),
            "nothing recorded once off"
        );

        // A write answering a non-integer version does the same.
        let rw = client(&Scope::all()).max_wait(Duration::ZERO);
        rw.record_written(&cm("a", "opaque-1", "u1", "web").metadata);
        assert!(!rw.is_active());
        assert_eq!(
            rw.list(None, &LabelSelector::everything()).await,
            Ok(vec![])
        );
    }

    #[tokio::test]
    async fn read_your_own_writes_writes_outside_the_scope_are_not_waited_for() {
        let rw = client(&Scope::namespace("default").labels("app=web")).max_wait(Duration::ZERO);
        rw.informer().store().set_resource_version("5");
        rw.record_written(&cm("db", "9", "u1", "db").metadata);
        let mut elsewhere = cm("x", "9", "u2", "web");
        elsewhere.metadata.namespace = Some("other".into());
        rw.record_written(&elsewhere.metadata);
        assert!(rw.needs(None).version.is_none());
        assert_eq!(rw.get(Some("default"), "db").await, Ok(None));

        // The cache holds it: the write that moves it out of the selection will reach the cache
        // (as a delete), so it counts.
        rw.informer()
            .store()
            .insert(Arc::new(cm("db", "4", "u1", "web")));
        rw.record_written(&cm("db", "9", "u1", "db").metadata);
        assert_eq!(rw.needs(None).version, Some(9));
    }

    #[tokio::test]
    async fn read_your_own_writes_deletes_answered_with_a_status() {
        let rw = client(&Scope::all()).max_wait(Duration::ZERO);
        let store = rw.informer().store().clone();
        store.set_resource_version("5");
        store.insert(Arc::new(cm("a", "4", "u1", "web")));
        let key = ObjectKey::from("default/a");

        // Held when the delete returned: the read waits until the store drops it.
        rw.record_deleted(&key, Some(Some("u1".into())), Some("u1"));
        assert!(rw.get(Some("default"), "a").await.is_err());
        // A newer object under the same name does not count as the deleted one.
        store.insert(Arc::new(cm("a", "6", "u2", "web")));
        let seen = rw.get(Some("default"), "a").await.expect("met");
        assert_eq!(seen.expect("the new one").meta().uid.as_deref(), Some("u2"));
        assert_eq!(
            rw.shared.records.lock().gone_count,
            0,
            "forgotten once seen absent"
        );

        // Never held (its creation has not reached the cache): hidden from reads when it arrives.
        rw.record_deleted(&ObjectKey::from("default/b"), None, Some("u3"));
        store.insert(Arc::new(cm("b", "7", "u3", "web")));
        assert_eq!(rw.get(Some("default"), "b").await, Ok(None));
        let names: Vec<_> = rw
            .list(Some("default"), &LabelSelector::everything())
            .await
            .expect("list")
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        assert_eq!(names, ["a"]);
    }
}
