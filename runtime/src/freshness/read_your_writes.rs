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
//! - fails with [`ReadError::Stale`] after [`max_wait`](ReadYourWrites::max_wait), saying what it
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
//! ## Bounds, and choosing `max_wait`
//!
//! The client is a view over the [write record](super::record) with one account (the client)
//! and one informer: all writes together cost one wait (the highest version), plus one per object
//! deleted while the store still held it, until a read finds it absent; the sweep and the hidden
//! uids are the record's. The wait's default is the record's one timeout, [`DEFAULT_MAX_WAIT`]
//! (3 s; why that figure: see its docs). A read that gives up returns [`ReadError::Stale`],
//! the same [`Stale`] the controller's workers skip on, with what was missing.
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

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_core::{LabelSelector, ObjectKey, Scope};
use ferrokube_informer::{Lister, SharedIndexInformer};

use super::record::{Stale, Wait, WriteRecord, wait_until};
use ferrokube_client::api::Api;
use ferrokube_core::Object;

pub use super::record::{DEFAULT_MAX_WAIT, ReadError};

/// The client's one account in its record: every write through it counts for every read.
type Client = ();

struct Shared<K> {
    api: Api<K>,
    informer: SharedIndexInformer<K>,
    /// What this client's completed writes ask of the informer's cache (one account, one
    /// informer). The `Api` above reports to it; it holds the informer, never the `Api`.
    record: WriteRecord<Client>,
}

/// A client whose cache reads include its own completed writes: see the [module docs](self).
/// A view over the [write record](super::record) with one account (the client) and one
/// informer.
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
        f.debug_struct("ReadYourWrites")
            .field("informer", &self.shared.informer.name())
            .field("active", &self.is_active())
            .field("max_wait", &self.max_wait)
            .field("waits", &self.shared.record.waits())
            .finish()
    }
}

impl<K: Object> ReadYourWrites<K> {
    /// A client that writes through `api` and reads from `informer`, whose objects are those of
    /// `scope` (pass the scope the informer was made with: it decides which writes the cache
    /// will show, and so which ones reads wait for). Waits at most [`DEFAULT_MAX_WAIT`].
    pub fn new(api: Api<K>, informer: SharedIndexInformer<K>, scope: &Scope) -> ReadYourWrites<K> {
        let record = WriteRecord::new(&format!(
            "read-your-own-writes client of {}",
            informer.name()
        ));
        record.track(
            api.resource(),
            informer.name(),
            scope,
            Box::new(informer.clone()),
        );
        let api = api.with_write_observer(Arc::new(record.recorder(())));
        ReadYourWrites {
            shared: Arc::new(Shared {
                api,
                informer,
                record,
            }),
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// How long a read waits for the cache before it fails with [`ReadError::Stale`]. Default
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
        self.shared.record.is_active()
    }

    /// The object `namespace`/`name` (`namespace` `None` if cluster-scoped) from the cache, once
    /// the cache shows every write this client completed before this call. The read starts at the
    /// call, not at the first poll.
    pub fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> impl Future<Output = Result<Option<Arc<K>>, ReadError>> + Send + 'static {
        let key = ObjectKey::new(namespace, name);
        let needs = self.shared.record.needs(&(), None, Some(&key));
        let this = self.clone();
        async move {
            this.wait(needs)
                .await
                .map_err(|stale| stale.for_key(&key))?;
            let object = this.shared.informer.store().get_by_key(&key);
            Ok(object.filter(|object| !this.shared.record.is_hidden(object.meta())))
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
        let needs = self.shared.record.needs(&(), None, None);
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
            this.shared.record.drop_hidden(&mut objects);
            Ok(objects)
        }
    }

    /// Waits until the cache shows every write this client completed before this call; then any
    /// read of the informer (its lister, its indexes) sees at least that, as the store never goes
    /// back. Unlike [`get`](Self::get) and [`list`](Self::list), such reads do not filter out
    /// objects deleted while the store had not shown them yet (see the
    /// [module docs](self#how-it-works)).
    pub fn wait_for_writes(&self) -> impl Future<Output = Result<(), ReadError>> + Send + 'static {
        let needs = self.shared.record.needs(&(), None, None);
        let this = self.clone();
        async move { Ok(this.wait(needs).await?) }
    }

    /// Waits until the store meets `needs` (the record as the read found it when it started),
    /// woken by each move of its resourceVersion, at most `max_wait`.
    async fn wait(&self, needs: Vec<Wait>) -> Result<(), Stale> {
        if needs.is_empty() {
            return Ok(());
        }
        // Subscribe before the first check: a move between the check and the wait still wakes us.
        let versions = self.shared.informer.watch_store_resource_version();
        let record = &self.shared.record;
        wait_until(|| record.check(&(), &needs), versions, self.max_wait).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ferrokube_client::write_observer::DeleteOutcome;
    use ferrokube_core::ApiResource;
    use ferrokube_informer::fake::FakeListerWatcher;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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

    impl ReadYourWrites<ConfigMap> {
        /// What the observer does when a write through the client's `Api` completes.
        fn record_written(&self, written: &ObjectMeta) {
            let resource = ApiResource::of::<ConfigMap>();
            self.shared.record.wrote(&(), &resource, written);
        }

        /// What the observer does around a delete the server answered with a `Status`; the store
        /// is as it was when the delete was sent.
        fn record_deleted_now(&self, key: &ObjectKey, uid: &str) {
            let resource = ApiResource::of::<ConfigMap>();
            let note = self.shared.record.deleting(&resource, key);
            let gone = DeleteOutcome::Gone { uid: Some(uid) };
            self.shared.record.deleted(&(), &resource, key, note, gone);
        }

        fn wanted_version(&self) -> Option<u64> {
            let needs = self.shared.record.needs(&(), None, None);
            match self.shared.record.check(&(), &needs) {
                Ok(()) => None,
                Err(stale) => stale.wanted_version,
            }
        }
    }

    fn stale<T: std::fmt::Debug>(read: Result<T, ReadError>) -> Stale {
        match read {
            Err(ReadError::Stale(stale)) => stale,
            other => panic!("expected a stale cache, got {other:?}"),
        }
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
        let late = stale(late.await);
        assert_eq!(late.wanted_version, Some(20));
        assert_eq!(late.seen_version, "12");
        assert_eq!(late.key, Some(ObjectKey::from("default/a")));
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
        assert_eq!(rw.wanted_version(), None, "nothing recorded once off");

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
        assert_eq!(rw.wanted_version(), None);
        assert_eq!(rw.get(Some("default"), "db").await, Ok(None));

        // The cache holds it: the write that moves it out of the selection will reach the cache
        // (as a delete), so it counts.
        rw.informer()
            .store()
            .insert(Arc::new(cm("db", "4", "u1", "web")));
        rw.record_written(&cm("db", "9", "u1", "db").metadata);
        assert_eq!(rw.wanted_version(), Some(9));
    }

    #[tokio::test]
    async fn read_your_own_writes_deletes_answered_with_a_status() {
        let rw = client(&Scope::all()).max_wait(Duration::ZERO);
        let store = rw.informer().store().clone();
        store.set_resource_version("5");
        store.insert(Arc::new(cm("a", "4", "u1", "web")));
        let key = ObjectKey::from("default/a");

        // Held when the delete returned: the read waits until the store drops it.
        rw.record_deleted_now(&key, "u1");
        let waiting = stale(rw.get(Some("default"), "a").await);
        assert_eq!(waiting.needs(), "default/a (uid u1) gone");
        // A read of another object does not wait for it.
        assert_eq!(rw.get(Some("default"), "z").await, Ok(None));
        // A newer object under the same name does not count as the deleted one.
        store.insert(Arc::new(cm("a", "6", "u2", "web")));
        let seen = rw.get(Some("default"), "a").await.expect("met");
        assert_eq!(seen.expect("the new one").meta().uid.as_deref(), Some("u2"));
        assert_eq!(rw.shared.record.waits(), 0, "forgotten once seen absent");

        // Never held (its creation has not reached the cache): hidden from reads when it arrives.
        rw.record_deleted_now(&ObjectKey::from("default/b"), "u3");
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
