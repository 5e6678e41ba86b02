//! # The reconcile context: what a reconcile knows besides its object, and the client it writes with
//!
//! A reconcile is called with the object as the cache holds it and a [`Context`]: the key being
//! reconciled, how many times in a row it has failed, and the controller's client. That client
//! is the reason the context exists. Every write made through it, through any [`Api`] built from
//! it ([`api_all`](Context::api_all), [`api_in_namespace`](Context::api_in_namespace),
//! [`api_for_object`](Context::api_for_object),
//! [`api_in_primary_namespace`](Context::api_in_primary_namespace),
//! [`api_dynamic`](Context::api_dynamic)) and by every toolkit helper given such an `Api`
//! ([`finalize`](crate::toolkit::finalizer::finalize), [`update_status`](crate::toolkit::conditions::update_status),
//! [`create_or_update`](crate::toolkit::owner::create_or_update), the [`Claimer`](crate::toolkit::claim::Claimer)),
//! is recorded in the controller's [consistency store](crate::freshness::consistency) for this key before
//! the write's `await` returns. The [event recorder](crate::toolkit::events::EventRecorder) takes the
//! context too (`record(&ctx, ..)`) and records each event for the key when its posting task has
//! written it:
//!
//! ```text
//!  worker takes key ─▶ Context { key, retries, client: controller's client + Writes(key) }
//!                           │
//!   reconcile(obj, ctx) ────┤ ctx.api_all::<Pod>().create(..) ─▶ server ─▶ committed at r
//!                           │                                              │
//!                           │              client's write observer: store.wrote(key, Pod, r)
//!                           ▼
//!  next time the key comes: every cache of Pods at ≥ r? ── no ─▶ skipped, requeued (100 ms)
//!                                                      └─ yes ─▶ reconcile
//! ```
//!
//! So the protection against reconciling from a stale cache needs nothing from the author: the
//! obvious way to write is the recorded one. Writing without recording takes a deliberate step,
//! a client of your own (`Client::new`), kept in the reconciler.
//!
//! Reads through [`cache`](Context::cache) come from the controller's informers and wait
//! (bounded) until the informer shows every write recorded for this key: a reconcile that creates
//! a child and then lists the children sees it.
//!
//! ```text
//!  ctx.api_in_primary_namespace::<ConfigMap>().create(..)  ─▶ committed at r, recorded for the key
//!  ctx.cache::<ConfigMap>(&scope)?.list(..) ─▶ waits until the ConfigMap informer's store ≥ r
//!                                              (woken by each move, ≤ 3 s), then reads it
//! ```
//!
//! For a controller run by a [`Manager`](crate::manager::Manager) with leader election, the
//! context's client is the manager's gated client: its writes are refused unless this replica
//! surely leads. For a sharded controller it is the member's client, gated by its membership;
//! new children must still be labelled for the member ([`mark_child`](Context::mark_child)).
//!
//! The context is cheap to clone (a few reference counts) and may be moved into tasks the
//! reconcile spawns; their writes are recorded for the key too.

use std::sync::{Arc, OnceLock};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::freshness::consistency::{ConsistencyStore, Writes};
use crate::freshness::record::{DEFAULT_MAX_WAIT, ReadError};
use ferrokube_client::api::{Api, DynamicObject};
use ferrokube_client::client::Client;
use ferrokube_core::{ApiResource, Object};
use ferrokube_core::{LabelSelector, ObjectKey, Scope};
use ferrokube_informer::{SharedIndexInformer, SharedInformerFactory};
use ferrokube_workqueue::WorkQueue;

/// Labels a new child for the member of a sharded controller; see [`Context::mark_child`].
pub(crate) type MarkChild = Arc<dyn Fn(&mut ObjectMeta) + Send + Sync>;

/// What every context of one controller shares: made once when the controller runs, so that a
/// reconcile's context costs one reference count and the key (the workers' hot path). Each
/// worker holds a copy of its own.
#[derive(Clone)]
pub(crate) struct Shared {
    /// The controller's client, as given (not observed).
    pub(crate) client: Client,
    pub(crate) consistency: ConsistencyStore,
    /// The controller's [`Ownership::mark_child`](super::ownership::Ownership::mark_child)
    /// (nothing, unless sharded).
    pub(crate) mark: MarkChild,
    /// Where [`Context::cache`] finds the controller's informers.
    pub(crate) factory: Option<Arc<SharedInformerFactory<Client>>>,
    /// The controller's queue, asked for a key's retries when [`Context::retries`] is called.
    pub(crate) queue: Option<WorkQueue<ObjectKey>>,
}

/// What a reconcile gets besides the object: see the [module docs](self).
#[derive(Clone)]
pub struct Context {
    key: ObjectKey,
    shared: Arc<Shared>,
    /// The retries, when given ([`for_key`](Self::for_key)); `None`: asked of the queue.
    retries: Option<usize>,
    /// The shared client with this key's [`Writes`] as a write observer, made on first use (a
    /// reconcile that does not write costs no allocation). Invariant: every `Client` and `Api`
    /// this context hands out is this one, or built on it.
    client: OnceLock<Client>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("key", &self.key)
            .field("retries", &self.retries())
            .field("client", &self.shared.client)
            .finish()
    }
}

impl Context {
    /// The context of one reconcile of `key` in a running controller.
    pub(crate) fn new(key: ObjectKey, shared: Arc<Shared>) -> Context {
        Context {
            key,
            shared,
            retries: None,
            client: OnceLock::new(),
        }
    }

    /// A context for `writes`' key outside a running controller, whose writes are recorded in
    /// `writes` (made by [`ConsistencyStore::writes`](super::ConsistencyStore::writes)): to call a
    /// reconciler from a test, or from a runner of your own.
    pub fn for_key(client: &Client, writes: Writes, retries: usize) -> Context {
        let shared = Shared {
            client: client.clone(),
            consistency: writes.store().clone(),
            mark: Arc::new(|_: &mut ObjectMeta| {}),
            factory: None,
            queue: None,
        };
        Context {
            key: writes.key().clone(),
            shared: Arc::new(shared),
            retries: Some(retries),
            client: OnceLock::new(),
        }
    }

    /// This context, with [`cache`](Self::cache) reading from `factory`'s informers (a context
    /// made by [`for_key`](Self::for_key) has none; a running controller's has its own).
    pub fn with_factory(self, factory: Arc<SharedInformerFactory<Client>>) -> Context {
        let shared = Shared {
            client: self.shared.client.clone(),
            consistency: self.shared.consistency.clone(),
            mark: self.shared.mark.clone(),
            factory: Some(factory),
            queue: self.shared.queue.clone(),
        };
        Context {
            shared: Arc::new(shared),
            ..self
        }
    }

    /// Cached reads of the `O`s in `scope`, from the controller's informer of them, that first
    /// wait (at most 3 s) until it shows every write recorded for this key. Fails with
    /// [`ReadError::NotRunning`] when the controller does not run that informer (make it a
    /// source, or take it from a factory you give with
    /// [`Controller::with_factory`](super::Controller::with_factory) before `run`).
    pub fn cache<O: Object + k8s_openapi::Resource>(
        &self,
        scope: &Scope,
    ) -> Result<CachedReads<O>, ReadError> {
        let not_running = |informer: String| ReadError::NotRunning { informer };
        let factory = self
            .shared
            .factory
            .as_ref()
            .ok_or_else(|| not_running(format!("{} (this context has no factory)", O::KIND)))?;
        let informer = factory.informer::<O>(scope);
        if !informer.has_synced() {
            return Err(not_running(informer.name().to_string()));
        }
        Ok(CachedReads {
            informer,
            key: self.key.clone(),
            writes: self.writes(),
            max_wait: DEFAULT_MAX_WAIT,
        })
    }

    /// The key being reconciled: `namespace/name`, or `name` for a cluster-scoped kind.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// How many times in a row the reconcile of this key has failed before this call (0 on the
    /// first try, and after a success).
    pub fn retries(&self) -> usize {
        match (self.retries, &self.shared.queue) {
            (Some(retries), _) => retries,
            (None, Some(queue)) => queue.num_requeues(&self.key),
            (None, None) => 0,
        }
    }

    /// The controller's client, whose writes are recorded for this key (through any `Api` built
    /// on it). Reads through it go to the server.
    pub fn client(&self) -> &Client {
        self.client
            .get_or_init(|| self.writes().client(&self.shared.client))
    }

    /// The recorder of this key's writes: for a write made some other way
    /// ([`Writes::wrote`]).
    pub fn writes(&self) -> Writes {
        self.shared.consistency.writes(self.key.clone())
    }

    // The `Api`s of a reconcile: one per question "where?", each named for its answer. All of
    // them are built on `client()`, so every write through them is recorded for the key.

    /// `O` in every namespace (to list or watch across them), or `O` itself if it is
    /// cluster-scoped (a Namespace, a ClusterRole); writes recorded.
    pub fn api_all<O: Object + k8s_openapi::Resource>(&self) -> Api<O> {
        Api::all(self.client().clone())
    }

    /// `O` in `namespace` (for a cluster-scoped kind, `namespace` is ignored); writes recorded.
    pub fn api_in_namespace<O: Object + k8s_openapi::Resource>(&self, namespace: &str) -> Api<O> {
        Api::all(self.client().clone()).in_namespace(namespace)
    }

    /// `O` where `object` lives (its namespace; a cluster-scoped kind has none): the `Api` the
    /// toolkit's helpers want for an object they update; writes recorded.
    pub fn api_for_object<O: Object + k8s_openapi::Resource>(&self, object: &O) -> Api<O> {
        match object
            .meta()
            .namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
        {
            Some(namespace) => self.api_in_namespace(namespace),
            None => self.api_all(),
        }
    }

    /// A namespaced `O` in the namespace of the primary being reconciled (the key's): where a
    /// controller usually creates the children of a namespaced primary. For a cluster-scoped
    /// primary (no namespace), every namespace. Writes recorded.
    pub fn api_in_primary_namespace<O>(&self) -> Api<O>
    where
        O: k8s_openapi::Resource<Scope = NamespaceResourceScope>,
    {
        match self.key.namespace() {
            Some(namespace) => Api::namespaced(self.client().clone(), namespace),
            None => Api::all(self.client().clone()),
        }
    }

    /// Objects of a kind known only at run time (`resource`), in `namespace` (`None`: every
    /// namespace, or the cluster for a cluster-scoped kind); writes recorded.
    pub fn api_dynamic(
        &self,
        resource: ApiResource,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        Api::dynamic(self.client().clone(), resource, namespace)
    }

    /// Labels a child this reconcile is about to create as belonging to this member of a sharded
    /// controller, so that it lands in this member's caches and moves with its owner; does
    /// nothing for a controller that is not sharded. Call it on every new child (with
    /// [`set_controller_reference`](crate::toolkit::owner::set_controller_reference)).
    pub fn mark_child(&self, meta: &mut ObjectMeta) {
        (self.shared.mark)(meta);
    }
}

/// Cached reads of one informer that include the writes of one reconcile's key: see
/// [`Context::cache`].
#[must_use = "cached reads do nothing until get() or list()"]
pub struct CachedReads<O> {
    informer: SharedIndexInformer<O>,
    key: ObjectKey,
    writes: Writes,
    max_wait: std::time::Duration,
}

impl<O: Object> CachedReads<O> {
    /// How long a read waits for the cache before it fails with [`ReadError::Stale`] (default
    /// [`DEFAULT_MAX_WAIT`], 3 s, as the read-your-own-writes client).
    pub fn max_wait(mut self, max_wait: std::time::Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The object `namespace`/`name` (`None` for a cluster-scoped kind), once the cache shows
    /// this key's writes.
    pub async fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<O>>, ReadError> {
        self.wait().await?;
        let object = self.informer.lister().get(namespace, name);
        let store = self.writes.store();
        Ok(object.filter(|object| !store.is_hidden(object.meta())))
    }

    /// The objects of `namespace` (`None`: all) that `selector` matches, once the cache shows
    /// this key's writes.
    pub async fn list(
        &self,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Result<Vec<Arc<O>>, ReadError> {
        self.wait().await?;
        let lister = self.informer.lister();
        let mut objects = match namespace {
            Some(namespace) => lister.namespace(namespace).list(selector),
            None => lister.list(selector),
        };
        self.writes.store().drop_hidden(&mut objects);
        Ok(objects)
    }

    async fn wait(&self) -> Result<(), ReadError> {
        let waited = self
            .writes
            .store()
            .wait_fresh_in(
                &self.key,
                self.informer.name(),
                self.informer.watch_store_resource_version(),
                self.max_wait,
            )
            .await;
        Ok(waited?)
    }
}
