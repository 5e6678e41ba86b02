//! [`Controller`]: declare what a controller watches, then run it with a
//! [`Reconciler`](super::Reconciler).
//!
//! The controller, until it runs, only **records**: the primary kind and scope, owned and watched
//! kinds, streams of keys, filters per kind, options, and the shared parts the author made and
//! hands in (an informer factory, a queue). No method makes or hands out a live object, so
//! nothing it records depends on the order of the calls. [`Controller::run`] then makes
//! everything live and goes through a short sequence, written out in the controller's `run`
//! module:
//!
//! 1. **make**: the factory (the one given to [`with_factory`](Controller::with_factory), else its
//!    own, made from the client), the queue (the one given to
//!    [`with_queue`](Controller::with_queue), else its own), the scopes as the controller's
//!    [`Ownership`] narrows them (all of them, unless sharded), the
//!    indexes of [`index_field`](Controller::index_field);
//! 2. **attach**: one handler per source on the factory's informers (shared with every other user
//!    of the factory: one watch and one cache per type and scope in the process); a guard takes
//!    them off again however `run` ends;
//! 3. **sync**: every informer of the factory starts (those already running are left as they are,
//!    and one the author created only for a lister starts too) and the controller waits for
//!    their caches: a reconcile never sees a half-listed world;
//! 4. **gate**: the workers wait for what must come first (the ownership's
//!    [`ready`](super::ownership::Ownership::ready), the member's Lease when sharded;
//!    [`start_workers_after`](Controller::start_workers_after));
//! 5. **spawn**: the stream sources and `workers` workers start; before each reconcile a worker
//!    asks the controller's [consistency store](crate::freshness::consistency) whether every cache the key's
//!    own last writes went through shows them yet, and if not, skips the key for
//!    [`stale_requeue`](Controller::stale_requeue), then asks the ownership whether the object is
//!    this replica's to reconcile;
//! 6. **drain**: when `shutdown` resolves, the handlers come off and the streams stop (no new
//!    keys), workers finish the reconcile in hand and take no new key, and `run` returns once they
//!    have, or after [`shutdown_timeout`](Controller::shutdown_timeout) (reconciles still running
//!    are then dropped at their next await). A controller with its own factory stops its
//!    informers; a factory given with [`with_factory`](Controller::with_factory) is left to its
//!    owner.
//!
//! A reconciler reads the caches through its [`Context`](super::Context)
//! ([`cache`](super::Context::cache)), or through listers of a factory the author made and gave
//! to [`with_factory`](Controller::with_factory).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_core::{ObjectKey, Scope};
use ferrokube_informer::{SharedInformerFactory, StartError};
use ferrokube_workqueue::{WorkQueue, default_controller_rate_limiter};
use futures_util::Stream;

use super::filter::{Filter, KindFilter, SourceKind};
use super::metrics::Metrics;
use super::ownership::{AllMine, OwnedKind, Ownership, owned_kind};
use super::source::{self, Enqueue, MapEvent, ObjectEvent};
use super::wiring::{self, Attach, KeyStream, SourceName, Wiring};
use crate::freshness::consistency::{ConsistencyStore, DEFAULT_STALE_REQUEUE};
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

/// The name of a source made by the builder call `call` for the kind `dynamic` names, whose
/// mapper is `mapper` (`watches::<Secret>`; a closure's type name says where it is written).
fn source_name<O: Kind>(call: &str, dynamic: &O::DynamicType, mapper: &'static str) -> SourceName {
    SourceName {
        call: format!("{call}::<{}>", O::api_resource(dynamic).kind),
        mapper,
    }
}

/// Which objects of the kind `O` a call is about: the kind at run time (`O::DynamicType`: `()`
/// for a typed kind, the [`ApiResource`] of a `DynamicObject`) and the [`Scope`]. A typed kind
/// needs only its scope (`Scope` converts: `owns::<Pod>(Scope::all())`); a kind known only at
/// run time is named with [`Objects::dynamic`].
#[must_use = "an Objects value says which objects a controller call is about; give it to one"]
pub struct Objects<O: Kind> {
    dynamic: O::DynamicType,
    scope: Scope,
}

impl<O: Kind> Objects<O> {
    /// The `O`s in `scope` of the kind `dynamic` names (for a `DynamicObject`, a custom
    /// resource's [`ApiResource`]).
    pub fn dynamic(dynamic: O::DynamicType, scope: Scope) -> Objects<O> {
        Objects { dynamic, scope }
    }
}

impl<O: Kind<DynamicType = ()>> From<Scope> for Objects<O> {
    fn from(scope: Scope) -> Objects<O> {
        Objects { dynamic: (), scope }
    }
}

/// The queue a controller makes for itself when none is given ([`Controller::with_queue`]):
/// named `name`, controller-runtime's rate limiter, `metrics`' workqueue families if any, on the
/// runtime's clock when a virtual one is set (as ferrokube-explore sets it). Make one with this
/// to keep a handle on a controller's queue (its depth, keys added from outside a source).
pub fn controller_queue(name: &str, metrics: Option<&Metrics>) -> WorkQueue<ObjectKey> {
    let mut queue = WorkQueue::builder()
        .name(name)
        .rate_limiter(default_controller_rate_limiter())
        .virtual_time(ferrokube_core::time::thread_clock_is_set());
    if let Some(metrics) = metrics {
        queue = queue.metrics(metrics.queue(name));
    }
    queue.build()
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
#[must_use = "a Controller only records; call run(reconciler, shutdown) and await it"]
pub struct Controller<K: Kind> {
    /// What names the primary kind at run time (`()` for a typed kind).
    pub(super) dynamic: K::DynamicType,
    /// The primary kind: where it is served, and what its children's ownerReferences name.
    pub(super) resource: ApiResource,
    pub(super) name: String,
    /// What reconciles write with (through their [`Context`](super::Context)), and what the
    /// controller's own factory lists and watches with.
    pub(super) client: Client,
    /// A factory the author made and gave ([`with_factory`](Self::with_factory)); `None`: the
    /// controller makes its own at `run` and stops it when it stops.
    pub(super) factory: Option<Arc<SharedInformerFactory<Client>>>,
    /// A queue the author made and gave ([`with_queue`](Self::with_queue)); `None`: the
    /// controller makes its own at `run` ([`controller_queue`]).
    pub(super) queue: Option<WorkQueue<ObjectKey>>,
    /// The primary scope as recorded; the [`ownership`](Self::ownership) narrows it at `run`.
    pub(super) scope: Scope,
    pub(super) sources: Vec<InformerSource>,
    /// The owned kinds (`owns`, `owns_with`), for the ownership.
    pub(super) owned_kinds: Vec<OwnedKind>,
    pub(super) streams: Vec<KeyStream>,
    pub(super) filters: Vec<KindFilter>,
    pub(super) workers: usize,
    pub(super) resync: Option<Duration>,
    pub(super) shutdown_timeout: Duration,
    pub(super) metrics: Option<Metrics>,
    /// The controller's own writes per key, checked before each reconcile. Its name and switch
    /// are set from `name` and `stale_protection` when `run` starts.
    pub(super) consistency: ConsistencyStore,
    pub(super) stale_protection: bool,
    pub(super) stale_requeue: Duration,
    /// Awaited after the caches synced and before the workers start (the manager's "until this
    /// replica leads"); none: start at once.
    pub(super) workers_after: Option<BoxFuture<()>>,
    /// Indexes to add at `run` ([`index_field`](Self::index_field)).
    pub(super) index_fields: Vec<IndexField>,
    /// Per [`watches_by_index`](Self::watches_by_index) source, its call and the primary's
    /// index it looks keys up in: `run` refuses if the primary's informer lacks one.
    pub(super) index_lookups: Vec<(String, String)>,
    /// Which primaries this replica reconciles: [`AllMine`] unless sharded.
    pub(super) ownership: Arc<dyn Ownership<K>>,
}

/// For any primary kind, typed or known only at run time: a controller of
/// [`DynamicObject`](ferrokube_client::DynamicObject)s is made with the custom resource's
/// [`ApiResource`] (`Controller::new(client, Objects::dynamic(resource, scope))`). Its sources
/// may be of typed kinds or of kinds given at run time too ([`Objects::dynamic`]).
impl<K: Kind> Controller<K> {
    /// A controller for the `objects` (a [`Scope`] for a typed kind; [`Objects::dynamic`]
    /// otherwise). Reconciles write with `client`; unless [`with_factory`](Self::with_factory)
    /// gives a factory, the controller's informers are its own, made from `client` when it runs
    /// and stopped when it stops.
    pub fn new(client: Client, objects: impl Into<Objects<K>>) -> Controller<K> {
        let Objects { dynamic, scope } = objects.into();
        let resource = K::api_resource(&dynamic);
        let name = resource.kind.to_lowercase();
        Controller {
            dynamic,
            resource,
            consistency: ConsistencyStore::new(&name),
            stale_protection: true,
            stale_requeue: DEFAULT_STALE_REQUEUE,
            name,
            client,
            factory: None,
            queue: None,
            scope,
            sources: Vec::new(),
            owned_kinds: Vec::new(),
            streams: Vec::new(),
            filters: Vec::new(),
            workers: DEFAULT_WORKERS,
            resync: Some(DEFAULT_RESYNC),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            metrics: None,
            workers_after: None,
            index_fields: Vec::new(),
            index_lookups: Vec::new(),
            ownership: Arc::new(AllMine),
        }
    }

    /// Takes the controller's informers from `factory`, shared with everything else in the
    /// process that uses it (one watch and one cache per type and scope), and left running when
    /// the controller stops: the factory's owner stops it. Make the informers you read through
    /// listers from the same factory: `run` starts every informer of the factory and waits for
    /// its cache before the first reconcile, so a lister is never read unsynced. An informer
    /// created before keeps the settings (transform, indexers) it was created with: create it
    /// first with `informer_with` to choose. Give the factory the metrics yourself
    /// (`with_metrics(metrics.informers())`). Default: informers of the controller's own.
    pub fn with_factory(mut self, factory: Arc<SharedInformerFactory<Client>>) -> Self {
        self.factory = Some(factory);
        self
    }

    /// Queues keys on `queue`, a queue the author made (best with [`controller_queue`], as the
    /// controller would): to keep a handle on it (its depth; keys added from outside a source).
    /// Its name and metrics are the ones it was made with. Default: a queue of the controller's
    /// own, made at `run`.
    pub fn with_queue(mut self, queue: WorkQueue<ObjectKey>) -> Self {
        self.queue = Some(queue);
        self
    }

    /// The controller's name: the `controller` label of its metrics, its queue's name, its
    /// handlers' names and its log spans. Default: `K`'s kind in lower case.
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Reports reconcile and queue metrics to `metrics` (default: none). A controller with
    /// informers of its own reports theirs too (`informer_*`, `store_resource_version`); with a
    /// shared factory, give the factory the metrics (`with_metrics(metrics.informers())`).
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// The controller's name (see [`name`](Self::name)).
    pub fn controller_name(&self) -> &str {
        &self.name
    }

    /// The controller's [consistency store](crate::freshness::consistency): every write a reconcile makes
    /// through its [`Context`](super::Context) is recorded there for the key, and the workers
    /// check it before each reconcile. It knows the controller's informers once `run` has
    /// attached them. Given out for its counters ([`skips`](ConsistencyStore::skips)) and for
    /// writes made outside a reconcile ([`ConsistencyStore::writes`]).
    pub fn consistency(&self) -> ConsistencyStore {
        self.consistency.clone()
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

    /// Reconciles the `C`s of `children` (a [`Scope`] for a typed kind, [`Objects::dynamic`]
    /// otherwise) whose controller ownerReference points at a `K` (same kind and API group), by
    /// the owner's key: a change to a child reconciles its owner. An update that moves a child
    /// between owners reconciles both. Filtered by [`filter_for::<C>`](Self::filter_for), else by
    /// the default for a kind that is not the primary (see
    /// [`filter`](super::filter#which-filters-a-source-gets)).
    ///
    /// The `C`s are the primaries' dependents: the controller's
    /// [`Ownership`] narrows their scope as it narrows the
    /// primary's, and is told of them (when sharded, they move with their owner).
    pub fn owns<C: Kind>(self, children: impl Into<Objects<C>>) -> Self {
        let Objects { dynamic, scope } = children.into();
        let owner = self.resource.clone();
        let map = source::mapped(move |child: &C| {
            source::controller_key(&owner, child).into_iter().collect()
        });
        let name = source_name::<C>("owns", &dynamic, "the controller ownerReference");
        self.owned::<C>(dynamic, scope, map, name)
    }

    /// [`owns`](Self::owns) with a handler of your own (as [`watches_with`](Self::watches_with))
    /// instead of the owner's key: for a controller that keeps books on its children
    /// (expectations) or adopts orphans. The `C`s are its dependents, as with `owns`.
    pub fn owns_with<C: Kind>(
        self,
        children: impl Into<Objects<C>>,
        handle: impl Fn(&Enqueue, &ObjectEvent<'_, C>) + Send + Sync + 'static,
    ) -> Self {
        let Objects { dynamic, scope } = children.into();
        let name = source_name::<C>("owns_with", &dynamic, std::any::type_name_of_val(&handle));
        self.owned::<C>(dynamic, scope, Box::new(handle), name)
    }

    /// Reconciles the keys `map` returns for each changed `O` of `objects` (a [`Scope`] for a
    /// typed kind, [`Objects::dynamic`] otherwise; zero or more keys; both the old and the new
    /// state of an update are mapped). Filtered as [`owns`](Self::owns) is.
    ///
    /// Each key must be able to name a `K`: with a namespace if `K` is namespaced, without one if
    /// it is cluster-scoped. Any other key is refused before the queue, counted in
    /// `controller_mapper_keys_refused_total{mapper="watches::<O>"}` and logged (the first one)
    /// at warn level: see [`source`](super::source#keys-that-name-no-primary).
    pub fn watches<O: Kind>(
        self,
        objects: impl Into<Objects<O>>,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let Objects { dynamic, scope } = objects.into();
        let name = source_name::<O>("watches", &dynamic, std::any::type_name_of_val(&map));
        self.watched::<O>(dynamic, scope, source::mapped(map), name)
    }

    /// The most general informer source: `handle` gets every event of the `O`s of `objects`
    /// that passed `O`'s filters, and adds keys itself (at the event's priority) through the
    /// [`Enqueue`]. For sources that must also keep books, like expectations.
    ///
    /// Every source's handler (this one, `watches`' map and `owns`) is called by the informer's
    /// processor itself ([`Delivery::Inline`](ferrokube_informer::Delivery::Inline)): it must be
    /// quick and never block, since the informer applies no other change while it runs.
    pub fn watches_with<O: Kind>(
        self,
        objects: impl Into<Objects<O>>,
        handle: impl Fn(&Enqueue, &ObjectEvent<'_, O>) + Send + Sync + 'static,
    ) -> Self {
        let Objects { dynamic, scope } = objects.into();
        let name = source_name::<O>(
            "watches_with",
            &dynamic,
            std::any::type_name_of_val(&handle),
        );
        self.watched::<O>(dynamic, scope, Box::new(handle), name)
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

    /// Adds a filter every event of kind `O` must pass, whichever sources hear `O`s (all of its
    /// filters must). Replaces `O`'s default filter; see
    /// [`filter`](super::filter#which-filters-a-source-gets). `run` refuses a filter for a kind
    /// the controller has no source of, and one that cannot work for `O`. For a kind known only
    /// at run time, [`filter_for_dynamic`](Self::filter_for_dynamic).
    pub fn filter_for<O: Kind<DynamicType = ()>>(self, filter: Filter) -> Self {
        self.filter_for_dynamic::<O>(&(), filter)
    }

    fn owned<C: Kind>(
        mut self,
        dynamic: C::DynamicType,
        scope: Scope,
        map: Box<MapEvent<C>>,
        name: SourceName,
    ) -> Self {
        self.owned_kinds.push(owned_kind::<C>(
            self.resource.clone(),
            dynamic.clone(),
            scope.clone(),
        ));
        self.sources.push(InformerSource {
            kind: SourceKind::of::<C>(&dynamic),
            attach: Box::new(move |wiring: &Wiring<'_>| {
                wiring::attach::<C>(wiring, &dynamic, &(wiring.narrow)(scope), map, None, name)
            }),
        });
        self
    }

    /// Which primaries this replica reconciles, and what it does with the others: the workers
    /// ask `ownership` before each reconcile (see [`ownership`](super::ownership) for every
    /// point where the run asks it). Default [`AllMine`]: every
    /// object the caches show. [`shard`](Self::shard) sets the sharded one.
    pub fn ownership(mut self, ownership: impl Ownership<K>) -> Self {
        self.ownership = Arc::new(ownership);
        self
    }

    /// Shards this controller across replicas (see `crate::shard`): the primary and owned
    /// informers select only `member`'s objects; the workers start once `member` holds its Lease,
    /// hand objects over when the assigner asks, and wait for a moved object's children; and
    /// this replica stands for the ring's assigner. Reconciles write with
    /// [`ShardMember::client`](crate::shard::ShardMember::client) (through their
    /// [`Context`](super::Context)) and must
    /// [`mark_child`](super::Context::mark_child) the children they create. Sharding relies on
    /// the consistency store, so stale protection stays on. Default: not sharded. Needs the
    /// `shard` feature; the controller sees it only as its
    /// [`Ownership`].
    #[cfg(feature = "shard")]
    pub fn shard(self, member: &crate::shard::ShardMember) -> Self {
        self.ownership(super::sharded::Sharded::<K>::new(member))
    }

    /// Shards this controller for one epoch of `crate::shard::ranges` (what
    /// [`Manager::add_sharded_controller`](crate::manager::Manager::add_sharded_controller) does
    /// for you): in the server-side mode every informer is narrowed to the epoch's hash ranges
    /// and reconciles write with the member's gated client; in the label mode, as
    /// [`shard`](Self::shard) with the epoch's member. Needs the `shard` feature.
    #[cfg(feature = "shard")]
    pub fn shard_epoch(self, epoch: &crate::shard::Epoch) -> Self {
        match epoch.narrowing() {
            crate::shard::Narrowing::Ranges(selector) => self.ownership(
                super::sharded::Ranged::new(selector.clone(), epoch.client()),
            ),
            crate::shard::Narrowing::Labels => self.shard(epoch.member()),
        }
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
        let mut problems = Vec::new();
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
