//! [`Controller`]: declare what a controller watches, then run it with a
//! [`Reconciler`](super::Reconciler).
//!
//! The controller, until it runs, only **records**: the primary kind and scope, owned and watched
//! kinds, streams of keys, filters per kind, options. Nothing it records depends on the order of
//! the calls. [`Controller::run`] then goes through a short sequence, written out in the
//! controller's `run` module:
//!
//! 1. **attach**: one handler per source on the factory's informers (shared with every other user
//!    of the factory: one watch and one cache per type and scope in the process); a guard takes
//!    them off again however `run` ends;
//! 2. **sync**: every informer of the factory starts (those already running are left as they are,
//!    and one created only for a lister starts too) and the controller waits for their caches: a
//!    reconcile never sees a half-listed world;
//! 3. **gate**: the workers wait for what must come first (the member's Lease when sharded,
//!    [`start_workers_after`](Controller::start_workers_after));
//! 4. **spawn**: the stream sources and `workers` workers start; before each reconcile a worker
//!    asks the controller's [consistency store](crate::freshness::consistency) whether every cache the key's
//!    own last writes went through shows them yet, and if not, skips the key for
//!    [`stale_requeue`](Controller::stale_requeue);
//! 5. **drain**: when `shutdown` resolves, the handlers come off and the streams stop (no new
//!    keys), workers finish the reconcile in hand and take no new key, and `run` returns once they
//!    have, or after [`shutdown_timeout`](Controller::shutdown_timeout) (reconciles still running
//!    are then dropped at their next await). A controller made by [`Controller::new`] owns its
//!    informers and stops them; one made by [`Controller::with_factory`] leaves a shared factory
//!    to its owner.
//!
//! Three things are made on first use and then fixed: the queue
//! ([`queue_handle`](Controller::queue_handle), else `run`), and the controller's own factory
//! ([`factory`](Controller::factory), [`primary_informer`](Controller::primary_informer), else
//! `run`). A call that would change them afterwards ([`name`](Controller::name) or
//! [`metrics`](Controller::metrics) after the queue or the factory was handed out) is not
//! ignored: `run` refuses to start with [`ControllerError::Misconfigured`], naming the call.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ferrokube_core::{ObjectKey, Scope};
use ferrokube_informer::{SharedIndexInformer, SharedInformerFactory, StartError};
use ferrokube_workqueue::{WorkQueue, default_controller_rate_limiter};
use futures_util::Stream;

use super::filter::{Filter, KindFilter, SourceKind};
use super::metrics::Metrics;
use super::source::{self, Enqueue, MapEvent, ObjectEvent};
use super::wiring::{self, Attach, KeyStream, SourceName, Wiring};
use crate::freshness::consistency::{ConsistencyStore, DEFAULT_STALE_REQUEUE};
#[cfg(feature = "shard")]
use crate::shard::{DependentKind, Dependents, ShardMember};
use ferrokube_client::client::Client;
use ferrokube_core::{ApiResource, Kind};

/// Workers of a controller unless set (controller-runtime's `MaxConcurrentReconciles` default, 1:
/// a reconciler need not be written for concurrency to be correct; raise it when reconciles wait
/// on I/O, and the queue still never hands one key to two workers).
pub const DEFAULT_WORKERS: usize = 1;
/// How often every cached primary object is reconciled with nothing changed (controller-runtime's
/// `SyncPeriod` default, 10 hours).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(10 * 3600);
/// How long `run` waits for reconciles in flight at shutdown (controller-runtime's
/// `GracefulShutdownTimeout` default, 30 s).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a controller could not run.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("could not start the controller's informers: {0}")]
    Start(#[from] StartError),
    #[error("an informer of controller {0} stopped before its cache synced")]
    CacheSync(String),
    /// What was recorded cannot work as written; nothing was started.
    #[error("controller {controller} refuses to start: {}", problems.join("; "))]
    Misconfigured {
        controller: String,
        problems: Vec<String>,
    },
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Makes the [`DependentKind`] of one owned type from the factory, for a sharded controller.
#[cfg(feature = "shard")]
pub(super) type DependentMaker =
    Box<dyn FnOnce(&SharedInformerFactory<Client>, &ShardMember) -> Arc<dyn DependentKind> + Send>;

/// The name of a source made by the builder call `call` for the kind `dynamic` names, whose
/// mapper is `mapper` (`watches::<Secret>`; a closure's type name says where it is written).
fn source_name<O: Kind>(call: &str, dynamic: &O::DynamicType, mapper: &'static str) -> SourceName {
    SourceName {
        call: format!("{call}::<{}>", O::api_resource(dynamic).kind),
        mapper,
    }
}

/// Where a controller's informers come from.
pub(super) enum FactorySource {
    /// Its own, made on first use from `client` (with the metrics recorded by then); the
    /// controller stops its informers.
    Own {
        client: Client,
        made: OnceLock<Arc<SharedInformerFactory<Client>>>,
    },
    /// Given to [`Controller::with_factory`]: its owner stops them.
    Shared(Arc<SharedInformerFactory<Client>>),
}

/// An index recorded by [`Controller::index_field`]: `add` puts it on its informer at `run`, or
/// says why it cannot (a problem `run` refuses with).
pub(super) struct IndexField {
    pub(super) add: AddIndex,
}

/// Adds one index to the factory's informer over the controller's scope; `Err`: why not.
pub(super) type AddIndex =
    Box<dyn FnOnce(&SharedInformerFactory<Client>, &Scope) -> Result<(), String> + Send>;

/// One source of informer events: its kind (for its filters) and how it attaches at `run`.
pub(super) struct InformerSource {
    pub(super) kind: SourceKind,
    pub(super) attach: Attach,
}

/// A controller for the primary type `K`, not yet running: it records what it watches and its
/// options (see the [module docs](self)), and [`run`](Self::run) runs it. Every option has a
/// default, documented on its setter.
pub struct Controller<K: Kind> {
    /// What names the primary kind at run time (`()` for a typed kind).
    pub(super) dynamic: K::DynamicType,
    /// The primary kind: where it is served, and what its children's ownerReferences name.
    pub(super) resource: ApiResource,
    pub(super) name: String,
    pub(super) factory: FactorySource,
    pub(super) scope: Scope,
    pub(super) sources: Vec<InformerSource>,
    pub(super) streams: Vec<KeyStream>,
    pub(super) filters: Vec<KindFilter>,
    pub(super) workers: usize,
    pub(super) resync: Option<Duration>,
    pub(super) shutdown_timeout: Duration,
    pub(super) metrics: Option<Metrics>,
    /// The queue, made on first use from `name` and `metrics` as they were then.
    pub(super) queue: OnceLock<WorkQueue<ObjectKey>>,
    /// The controller's own writes per key, checked before each reconcile. Its name and switch
    /// are set from `name` and `stale_protection` when `run` starts.
    pub(super) consistency: ConsistencyStore,
    pub(super) stale_protection: bool,
    /// What reconciles write with (through their [`Context`](super::Context)); `None`: the
    /// factory's client.
    pub(super) client: Option<Client>,
    pub(super) stale_requeue: Duration,
    /// Awaited after the caches synced and before the workers start (the manager's "until this
    /// replica leads"); none: start at once.
    pub(super) workers_after: Option<BoxFuture<()>>,
    /// Calls that came too late to take effect (see the [module docs](self)); `run` refuses.
    pub(super) late_calls: Vec<String>,
    /// Indexes to add at `run` ([`index_field`](Self::index_field)).
    pub(super) index_fields: Vec<IndexField>,
    /// Per [`watches_by_index`](Self::watches_by_index) source, its call and the primary's
    /// index it looks keys up in: `run` refuses if the primary's informer lacks one.
    pub(super) index_lookups: Vec<(String, String)>,
    /// Set by [`shard`](Self::shard): this replica's membership and the primary scope before it
    /// was narrowed (the assigner's).
    #[cfg(feature = "shard")]
    pub(super) shard: Option<(ShardMember, Scope)>,
    /// One per owned type, used only when sharded.
    #[cfg(feature = "shard")]
    pub(super) dependents: Vec<DependentMaker>,
    pub(super) _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K: Kind<DynamicType = ()>> Controller<K> {
    /// A controller for the `K`s in `scope`, with informers of its own (made from `client`,
    /// stopped when it stops). Reconciles write with `client` too.
    pub fn new(client: Client, scope: Scope) -> Controller<K> {
        Controller::new_dynamic(client, (), scope)
    }

    /// A controller for the `K`s in `scope` whose informers come from `factory`, shared with
    /// everything else in the process that uses it (one watch and one cache per type and scope).
    /// The factory's owner stops its informers. An informer created before keeps the settings
    /// (transform, indexers) it was created with: create it first with `informer_with` to choose.
    /// Reconciles write with the factory's client unless [`client`](Self::client) says otherwise.
    pub fn with_factory(
        factory: Arc<SharedInformerFactory<Client>>,
        scope: Scope,
    ) -> Controller<K> {
        Controller::with_factory_dynamic(factory, (), scope)
    }
}

/// Everything else, for any primary kind, typed or known only at run time: a controller of
/// [`DynamicObject`](ferrokube_client::DynamicObject)s is made with the custom resource's
/// [`ApiResource`] ([`new_dynamic`](Controller::new_dynamic)). Its sources may be of typed kinds
/// ([`owns`](Controller::owns), [`watches`](Controller::watches)) or of kinds given at run time
/// too (the `*_dynamic` sources).
impl<K: Kind> Controller<K> {
    /// [`new`](Controller::new) for the `K`s of the kind `dynamic` names (for a `DynamicObject`
    /// controller, the custom resource's [`ApiResource`]).
    pub fn new_dynamic(client: Client, dynamic: K::DynamicType, scope: Scope) -> Controller<K> {
        Controller::recording(
            FactorySource::Own {
                client,
                made: OnceLock::new(),
            },
            dynamic,
            scope,
        )
    }

    /// [`with_factory`](Controller::with_factory) for the `K`s of the kind `dynamic` names.
    pub fn with_factory_dynamic(
        factory: Arc<SharedInformerFactory<Client>>,
        dynamic: K::DynamicType,
        scope: Scope,
    ) -> Controller<K> {
        Controller::recording(FactorySource::Shared(factory), dynamic, scope)
    }

    fn recording(factory: FactorySource, dynamic: K::DynamicType, scope: Scope) -> Controller<K> {
        let resource = K::api_resource(&dynamic);
        let name = resource.kind.to_lowercase();
        Controller {
            dynamic,
            resource,
            consistency: ConsistencyStore::new(&name),
            stale_protection: true,
            stale_requeue: DEFAULT_STALE_REQUEUE,
            name,
            factory,
            scope,
            sources: Vec::new(),
            streams: Vec::new(),
            filters: Vec::new(),
            workers: DEFAULT_WORKERS,
            resync: Some(DEFAULT_RESYNC),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            metrics: None,
            queue: OnceLock::new(),
            client: None,
            workers_after: None,
            late_calls: Vec::new(),
            index_fields: Vec::new(),
            index_lookups: Vec::new(),
            #[cfg(feature = "shard")]
            shard: None,
            #[cfg(feature = "shard")]
            dependents: Vec::new(),
            _kind: std::marker::PhantomData,
        }
    }

    /// The controller's name: the `controller` label of its metrics, its queue's name, its
    /// handlers' names and its log spans. Default: `K`'s kind in lower case. Call it before
    /// [`queue_handle`](Self::queue_handle) (else `run` refuses).
    pub fn name(mut self, name: &str) -> Self {
        if self.queue.get().is_some() {
            self.late_calls.push(format!(
                "name({name:?}) was called after queue_handle(), whose queue is named {:?}; \
                 call name() first",
                self.name
            ));
        }
        self.name = name.to_string();
        self
    }

    /// Reports reconcile and queue metrics to `metrics` (default: none). A controller with
    /// informers of its own ([`new`](Self::new)) reports theirs too (`informer_*`,
    /// `store_resource_version`); with a shared factory, give the factory the metrics
    /// (`with_metrics(metrics.informers())`). Call it before [`queue_handle`](Self::queue_handle),
    /// [`factory`](Self::factory) and [`primary_informer`](Self::primary_informer) (else `run`
    /// refuses).
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        if self.queue.get().is_some() {
            self.late_calls.push(
                "metrics() was called after queue_handle(): the queue was made without them; \
                 call metrics() first"
                    .into(),
            );
        }
        if let FactorySource::Own { made, .. } = &self.factory {
            if made.get().is_some() {
                self.late_calls.push(
                    "metrics() was called after factory() or primary_informer(): the informers \
                     were made without them; call metrics() first"
                        .into(),
                );
            }
        }
        self.metrics = Some(metrics.clone());
        self
    }

    /// The controller's name (see [`name`](Self::name)).
    pub fn controller_name(&self) -> &str {
        &self.name
    }

    /// The controller's queue, made now if it was not yet (named and measured as recorded so
    /// far): to add keys from outside a source, or to watch its depth. Keys added before `run`
    /// wait for the workers.
    pub fn queue_handle(&self) -> WorkQueue<ObjectKey> {
        self.queue
            .get_or_init(|| {
                // A run on virtual time (`ferrokube_core::time::set_thread_clock`, as
                // ferrokube-explore sets it) waits for requeues on the runtime's clock too.
                let mut queue = WorkQueue::builder()
                    .name(&self.name)
                    .rate_limiter(default_controller_rate_limiter())
                    .virtual_time(ferrokube_core::time::thread_clock_is_set());
                if let Some(metrics) = &self.metrics {
                    queue = queue.metrics(metrics.queue(&self.name));
                }
                queue.build()
            })
            .clone()
    }

    /// The controller's [consistency store](crate::freshness::consistency): every write a reconcile makes
    /// through its [`Context`](super::Context) is recorded there for the key, and the workers
    /// check it before each reconcile. It knows the controller's informers once `run` has
    /// attached them. Given out for its counters ([`skips`](ConsistencyStore::skips)) and for
    /// writes made outside a reconcile ([`ConsistencyStore::writes`]).
    pub fn consistency(&self) -> ConsistencyStore {
        self.consistency.clone()
    }

    /// The client reconciles write with, through their [`Context`](super::Context) (which
    /// records each write for the key). Default: the client of the controller's informer factory
    /// (the one given to [`new`](Self::new)); a [`Manager`](crate::manager::Manager) sets its
    /// gated client, and `shard` (feature `shard`) the member's.
    pub fn client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Whether reconciles wait for the caches to show the controller's own writes (see
    /// [`consistency`](crate::freshness::consistency)). Default on; off, the store records nothing and every
    /// check passes. A sharded controller keeps it on whatever this says.
    pub fn stale_protection(mut self, on: bool) -> Self {
        self.stale_protection = on;
        self
    }

    /// How long a key whose caches were stale waits before it is tried again (an event still
    /// brings it sooner). Default [`DEFAULT_STALE_REQUEUE`] (100 ms).
    pub fn stale_requeue(mut self, delay: Duration) -> Self {
        self.stale_requeue = delay;
        self
    }

    /// The factory the controller's informers come from (its own is made now if it was not yet,
    /// with the metrics recorded so far). Every informer taken from it starts when the controller
    /// runs, and `run` waits for its cache, so a lister of one is never read unsynced.
    pub fn factory(&self) -> &Arc<SharedInformerFactory<Client>> {
        match &self.factory {
            FactorySource::Shared(factory) => factory,
            FactorySource::Own { client, made } => made.get_or_init(|| {
                let factory = SharedInformerFactory::new(client.clone());
                Arc::new(match &self.metrics {
                    Some(metrics) => factory.with_metrics(metrics.informers()),
                    None => factory,
                })
            }),
        }
    }

    /// The informer of the primary type (created now if the factory has none yet): its lister is
    /// how a reconciler reads other `K`s. Call it after `shard` (feature `shard`).
    pub fn primary_informer(&self) -> SharedIndexInformer<K> {
        self.factory()
            .informer_for::<K>(&self.dynamic, &self.scope, |builder| builder)
    }

    /// Reconciles the `C`s in `scope` whose controller ownerReference points at a `K` (same kind
    /// and API group), by the owner's key: a change to a child reconciles its owner. An update that
    /// moves a child between owners reconciles both. Filtered by
    /// [`filter_for::<C>`](Self::filter_for), else by the default for a kind that is not the
    /// primary (see [`filter`](super::filter#which-filters-a-source-gets)).
    ///
    /// When the controller is sharded (`shard`, feature `shard`), the owned `C`s are narrowed to
    /// this member's label too, and move with their owner.
    pub fn owns<C: Kind<DynamicType = ()>>(self, scope: Scope) -> Self {
        self.owns_dynamic::<C>((), scope)
    }

    /// [`owns`](Self::owns) with a handler of your own (as [`watches_with`](Self::watches_with)):
    /// for a controller that keeps books on its children (expectations) or adopts orphans. The
    /// `C`s are its dependents: narrowed to this member's label and moved with their owner when
    /// sharded.
    pub fn owns_with<C: Kind<DynamicType = ()>>(
        self,
        scope: Scope,
        handle: impl Fn(&Enqueue, &ObjectEvent<'_, C>) + Send + Sync + 'static,
    ) -> Self {
        let name = source_name::<C>("owns_with", &(), std::any::type_name_of_val(&handle));
        self.owned::<C>((), scope, Box::new(handle), name)
    }

    /// Reconciles the keys `map` returns for each changed `O` in `scope` (zero or more; both the
    /// old and the new state of an update are mapped). Filtered as [`owns`](Self::owns) is.
    ///
    /// Each key must be able to name a `K`: with a namespace if `K` is namespaced, without one if
    /// it is cluster-scoped. Any other key is refused before the queue, counted in
    /// `controller_mapper_keys_refused_total{mapper="watches::<O>"}` and logged (the first one)
    /// at warn level: see [`source`](super::source#keys-that-name-no-primary).
    pub fn watches<O: Kind<DynamicType = ()>>(
        self,
        scope: Scope,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        self.watches_dynamic::<O>((), scope, map)
    }

    /// Indexes the `O`s of the controller's scope by `values` under the index `name`
    /// (controller-runtime's `IndexField`): the store of the factory's informer of `O` over the
    /// controller's scope (for `O` = `K`, the primary informer) keeps, per value, the keys of the
    /// objects that gave it. The index is added when the controller runs, also to an informer
    /// that exists or runs already (it is then filled from what it holds). Read it with
    /// `store().by_index(name, value)` or map through it with
    /// [`watches_by_index`](Self::watches_by_index). `run` refuses, naming this call, if the
    /// informer has an index of that name already.
    ///
    /// ```text
    /// controller
    ///     // Mirrors by the ConfigMap they copy ("namespace/name")...
    ///     .index_field::<Mirror>("spec.source", |m| vec![m.source_key()])
    ///     // ...so a change to a ConfigMap reconciles the Mirrors that copy it.
    ///     .watches_by_index::<ConfigMap>(Scope::all(), "spec.source", |cm| {
    ///         vec![ObjectKey::of(cm).to_string()]
    ///     })
    /// ```
    pub fn index_field<O: Kind<DynamicType = ()>>(
        mut self,
        name: &str,
        values: impl Fn(&O) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        let name = name.to_string();
        self.index_fields.push(IndexField {
            add: Box::new(move |factory, scope| {
                let kind = O::api_resource(&()).kind;
                factory
                    .informer_for::<O>(&(), scope, |builder| builder)
                    .add_index(&name, Arc::new(values))
                    .map_err(|conflict| {
                        format!(
                            "index_field::<{kind}>({name:?}, ..): {conflict} (given twice, or \
                             also through the factory's informer_with)"
                        )
                    })
            }),
        });
        self
    }

    /// Reconciles the primaries an `O` points at through the primary's index `index`
    /// (controller-runtime's `Watches` + `EnqueueRequestsFromMapFunc` over a field index): for
    /// each changed `O` in `scope` (both states of an update), `values` gives index values, and
    /// every `K` whose index `index` has one of them is reconciled. `index` is one given to
    /// [`index_field::<K>`](Self::index_field) (`run` refuses, naming this call, if the primary's
    /// informer has no such index). Both sides must speak the same values: if names repeat
    /// across namespaces, put the namespace in both. Filtered as [`owns`](Self::owns) is.
    pub fn watches_by_index<O: Kind<DynamicType = ()>>(
        mut self,
        scope: Scope,
        index: &str,
        values: impl Fn(&O) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        let name = source_name::<O>("watches_by_index", &(), std::any::type_name_of_val(&values));
        self.index_lookups
            .push((format!("{}({index:?}, ..)", name.call), index.to_string()));
        let index = index.to_string();
        self.sources.push(InformerSource {
            kind: SourceKind::of::<O>(&()),
            attach: Box::new(move |wiring: &Wiring<'_>| {
                let primaries = wiring.primary_index.clone();
                let controller = wiring.name.to_string();
                let map = source::mapped(move |object: &O| {
                    let mut keys = Vec::new();
                    for value in values(object) {
                        match primaries.keys(&index, &value) {
                            Ok(found) => keys.extend(found),
                            // `run` checked that the index is there, and indexes never go.
                            Err(error) => {
                                tracing::error!(%controller, %error, "watches_by_index lookup")
                            }
                        }
                    }
                    keys
                });
                wiring::attach::<O>(wiring, &(), &scope, map, None, name)
            }),
        });
        self
    }

    /// Reconciles every primary when an `O` in `scope` changes (kube-rs's `reconcile_all_on`):
    /// for a kind that any primary may depend on but none names, such as the Namespaces a
    /// label selector in the primary's spec picks. Each event of an `O` that passes `O`'s
    /// filters (by default, any change of its resourceVersion: see [`owns`](Self::owns)) queues
    /// the key of every `K` in the primary informer's cache at that moment; the queue folds
    /// repeats, so a burst of `O` events costs each primary one reconcile. Use it for kinds that
    /// change rarely; map with [`watches`](Self::watches) when an `O` names its primaries.
    ///
    /// ```text
    /// controller
    ///     // A Mirror's spec selects target namespaces by label: any Namespace change may add
    ///     // or remove a target of any Mirror.
    ///     .reconcile_all_on::<Namespace>(Scope::all())
    /// ```
    pub fn reconcile_all_on<O: Kind<DynamicType = ()>>(mut self, scope: Scope) -> Self {
        let name = source_name::<O>("reconcile_all_on", &(), "every primary");
        self.sources.push(InformerSource {
            kind: SourceKind::of::<O>(&()),
            attach: Box::new(move |wiring: &Wiring<'_>| {
                let primaries = wiring.primary_index.clone();
                let map = source::mapped(move |_: &O| primaries.all_keys());
                wiring::attach::<O>(wiring, &(), &scope, map, None, name)
            }),
        });
        self
    }

    /// The most general informer source: `handle` gets every event of the `O`s in `scope` that
    /// passed `O`'s filters, and adds keys itself (at the event's priority) through the
    /// [`Enqueue`]. For sources that must also keep books, like expectations.
    ///
    /// Every source's handler (this one, `watches`' map and `owns`) is called by the informer's
    /// processor itself ([`Delivery::Inline`](ferrokube_informer::Delivery::Inline)): it must be
    /// quick and never block, since the informer applies no other change while it runs.
    pub fn watches_with<O: Kind<DynamicType = ()>>(
        self,
        scope: Scope,
        handle: impl Fn(&Enqueue, &ObjectEvent<'_, O>) + Send + Sync + 'static,
    ) -> Self {
        let name = source_name::<O>("watches_with", &(), std::any::type_name_of_val(&handle));
        self.watched::<O>((), scope, Box::new(handle), name)
    }

    /// Adds a filter every event of kind `O` must pass, whichever sources hear `O`s (all of its
    /// filters must). Replaces `O`'s default filter; see
    /// [`filter`](super::filter#which-filters-a-source-gets). `run` refuses a filter for a kind
    /// the controller has no source of, and one that cannot work for `O`.
    pub fn filter_for<O: Kind<DynamicType = ()>>(self, filter: Filter) -> Self {
        self.filter_for_dynamic::<O>(&(), filter)
    }

    /// [`owns`](Controller::owns) for children of the kind `dynamic` names (`DynamicObject`s of
    /// a custom resource: its [`ApiResource`]).
    pub fn owns_dynamic<C: Kind>(self, dynamic: C::DynamicType, scope: Scope) -> Self {
        let owner = self.resource.clone();
        let map = source::mapped(move |child: &C| {
            source::controller_key(&owner, child).into_iter().collect()
        });
        let name = source_name::<C>("owns", &dynamic, "the controller ownerReference");
        self.owned::<C>(dynamic, scope, map, name)
    }

    fn owned<C: Kind>(
        mut self,
        dynamic: C::DynamicType,
        scope: Scope,
        map: Box<MapEvent<C>>,
        name: SourceName,
    ) -> Self {
        #[cfg(feature = "shard")]
        self.record_dependent::<C>(dynamic.clone(), scope.clone());
        self.sources.push(InformerSource {
            kind: SourceKind::of::<C>(&dynamic),
            attach: Box::new(move |wiring: &Wiring<'_>| {
                wiring::attach::<C>(
                    wiring,
                    &dynamic,
                    &wiring.owned_scope(&scope),
                    map,
                    None,
                    name,
                )
            }),
        });
        self
    }

    /// Remembers how to find the `C`s in `scope` that a `K` controls, for the shard gate (used
    /// only if the controller is sharded, whatever the order of `owns` and `shard`).
    #[cfg(feature = "shard")]
    fn record_dependent<C: Kind>(&mut self, dynamic: C::DynamicType, scope: Scope) {
        let owner = self.resource.clone();
        self.dependents.push(Box::new(move |factory, member| {
            let informer =
                factory.informer_for::<C>(&dynamic, &member.scope(scope), |builder| builder);
            Dependents::kind(
                informer,
                dynamic,
                Box::new(move |child: &C| {
                    crate::toolkit::owner::controller_of(child.meta())
                        .filter(|reference| {
                            reference.kind == owner.kind
                                && crate::toolkit::owner::group_of(&reference.api_version)
                                    == owner.group
                        })
                        .map(|reference| reference.uid.clone())
                }),
            )
        }));
    }

    /// Shards this controller across replicas (see `crate::shard`): the primary and owned
    /// informers select only `member`'s objects; the workers start once `member` holds its Lease,
    /// hand objects over when the assigner asks, and wait for a moved object's children; and
    /// this replica stands for the ring's assigner. Call it before
    /// [`primary_informer`](Self::primary_informer). Reconciles write with
    /// [`ShardMember::client`] (through their [`Context`](super::Context)) and must
    /// [`mark_child`](super::Context::mark_child) the children they create. Sharding
    /// relies on the consistency store, so stale protection stays on. Default: not sharded.
    /// Needs the `shard` feature.
    #[cfg(feature = "shard")]
    pub fn shard(mut self, member: &ShardMember) -> Self {
        let base = self.scope.clone();
        self.scope = member.scope(base.clone());
        self.client = Some(member.client());
        self.shard = Some((member.clone(), base));
        self
    }

    /// [`watches`](Controller::watches) for objects of the kind `dynamic` names.
    pub fn watches_dynamic<O: Kind>(
        self,
        dynamic: O::DynamicType,
        scope: Scope,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let name = source_name::<O>("watches", &dynamic, std::any::type_name_of_val(&map));
        self.watched::<O>(dynamic, scope, source::mapped(map), name)
    }

    fn watched<O: Kind>(
        mut self,
        dynamic: O::DynamicType,
        scope: Scope,
        map: Box<MapEvent<O>>,
        name: SourceName,
    ) -> Self {
        self.sources.push(InformerSource {
            kind: SourceKind::of::<O>(&dynamic),
            attach: Box::new(move |wiring: &Wiring<'_>| {
                wiring::attach::<O>(wiring, &dynamic, &scope, map, None, name)
            }),
        });
        self
    }

    /// An external source: every key the stream yields is queued (priority 0), from when the
    /// controller runs until it stops or the stream ends. A channel's receiver, a timer, a poll of
    /// a system outside Kubernetes. Filters do not apply (there is no object).
    pub fn source(mut self, keys: impl Stream<Item = ObjectKey> + Send + 'static) -> Self {
        self.streams.push(Box::pin(keys));
        self
    }

    /// Adds a filter the primary kind's events must pass (all of its filters must). Default:
    /// none; see [`filter`](super::filter#which-filters-a-source-gets).
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filters.push(KindFilter {
            kind: SourceKind::of::<K>(&self.dynamic),
            filter,
        });
        self
    }

    /// [`filter_for`](Controller::filter_for) for objects of the kind `dynamic` names.
    pub fn filter_for_dynamic<O: Kind>(mut self, dynamic: &O::DynamicType, filter: Filter) -> Self {
        self.filters.push(KindFilter {
            kind: SourceKind::of::<O>(dynamic),
            filter,
        });
        self
    }

    /// How many keys are reconciled at once. Default [`DEFAULT_WORKERS`] (1). At least 1.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Reconcile every cached primary object this often with nothing changed (at low priority),
    /// or never with `None`. Default [`DEFAULT_RESYNC`] (10 h).
    pub fn resync(mut self, period: Option<Duration>) -> Self {
        self.resync = period;
        self
    }

    /// Holds the workers back until `gate` resolves: `run` starts the informers and handlers, waits
    /// for the caches, then awaits `gate` (polled for the first time only then) before the first
    /// reconcile. Keys still queue up meanwhile (each once). This is how a
    /// [`Manager`](crate::manager::Manager) keeps a follower's caches warm: it runs every controller
    /// at once with `gate` = "this replica leads". Default: no gate.
    pub fn start_workers_after(mut self, gate: impl Future<Output = ()> + Send + 'static) -> Self {
        self.workers_after = Some(Box::pin(gate));
        self
    }

    /// How long `run` waits for reconciles in flight at shutdown. Default
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`] (30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// What `run` would refuse, if anything: calls that came too late, and filters that cannot
    /// work.
    pub(super) fn problems(&self) -> Vec<String> {
        let mut problems = self.late_calls.clone();
        let primary = SourceKind::of::<K>(&self.dynamic);
        for recorded in &self.filters {
            let kind = &recorded.kind;
            let heard = *kind == primary || self.sources.iter().any(|s| s.kind == *kind);
            if !heard {
                problems.push(format!(
                    "a filter for {} was given, but the controller has no source of {}s",
                    kind.kind, kind.kind
                ));
            }
            if let Some(why) = recorded.filter.refusal(&kind.group, &kind.kind) {
                problems.push(why);
            }
        }
        problems
    }
}
