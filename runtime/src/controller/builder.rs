//! [`Controller`]: declare what a controller watches, then run it with a [`Reconciler`].
//!
//! The builder only records: `for` scope, owned types, watched types, streams, filters and
//! options. [`Controller::run`] wires it up, in this order:
//!
//! 1. one handler per source on the factory's informers (shared with every other user of the
//!    factory: one watch and one cache per type and scope in the process);
//! 2. the informers start (those already running are left as they are) and the controller waits
//!    for their caches: a reconcile never sees a half-listed world;
//! 3. the stream sources start, then `workers` workers; before each reconcile a worker asks the
//!    controller's [consistency store](super::consistency) whether every cache the key's own last
//!    writes went through shows them yet, and if not, skips the key for
//!    [`stale_requeue`](ControllerBuilder::stale_requeue);
//!    A sharded controller (`ControllerBuilder::shard`, feature `shard`) narrows its primary and owned informers to
//!    its member's label, starts its workers once the member holds its Lease, stands for the
//!    ring's assigner, and asks the member's gate before each reconcile;
//! 4. when `shutdown` resolves: the handlers come off the informers and the streams stop (no new
//!    keys), workers finish the reconcile in hand and take no new key, and `run` returns once they
//!    have, or after [`shutdown_timeout`](ControllerBuilder::shutdown_timeout) (reconciles still
//!    running are then dropped at their next await). A controller made by [`Controller::new`]
//!    owns its informers and stops them; one made by [`Controller::with_factory`] leaves a shared
//!    factory to its owner.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferrokube_informer::{
    HandlerOptions, HandlerRegistration, ObjectKey, Scope, SharedIndexInformer,
    SharedInformerFactory, StartError,
};
use ferrokube_workqueue::{WorkQueue, default_controller_rate_limiter};
use futures_util::{Stream, StreamExt};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::consistency::{ConsistencyStore, DEFAULT_STALE_REQUEUE};
use super::context::MarkChild;
use super::filter::{Filter, Filters};
use super::metrics::Metrics;
use super::reconciler::Reconciler;
use super::source::{self, Enqueue, MapEvent, ObjectEvent, SourceHandler, Tombstones};
use super::worker::Workers;
#[cfg(feature = "shard")]
use crate::shard::{DependentKind, Dependents, ShardGate, ShardMember};
use ferrokube_client::api::Object;
use ferrokube_client::client::Client;
#[cfg(feature = "shard")]
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type KeyStream = Pin<Box<dyn Stream<Item = ObjectKey> + Send>>;

/// A handler on an informer, whatever the informer's type.
trait Attached: Send + Sync {
    fn start(&self) -> Result<(), StartError>;
    fn wait_for_sync(&self) -> BoxFuture<bool>;
    /// Takes the handler off the informer; `stop` also stops the informer.
    fn detach(&self, stop: bool);
}

struct Attachment<O> {
    informer: SharedIndexInformer<O>,
    registration: HandlerRegistration<O>,
}

impl<O: Object> Attached for Attachment<O> {
    fn start(&self) -> Result<(), StartError> {
        self.informer.start()
    }
    fn wait_for_sync(&self) -> BoxFuture<bool> {
        let informer = self.informer.clone();
        Box::pin(async move { informer.wait_for_cache_sync().await })
    }
    fn detach(&self, stop: bool) {
        self.informer.remove_event_handler(&self.registration);
        if stop {
            self.informer.stop();
        }
    }
}

/// What a source needs to attach itself at `run`.
struct Wiring<'a> {
    factory: &'a SharedInformerFactory<Client>,
    enqueue: &'a Enqueue,
    filters: &'a Filters,
    name: &'a str,
    consistency: &'a ConsistencyStore,
    /// Set when the controller is sharded: owned types are narrowed to the member's label.
    #[cfg(feature = "shard")]
    shard: Option<&'a ShardMember>,
}

impl Wiring<'_> {
    /// The scope of an owned type: `scope`, narrowed to this member's objects when sharded.
    fn owned_scope(&self, scope: &Scope) -> Scope {
        #[cfg(feature = "shard")]
        if let Some(member) = self.shard {
            return member.scope(scope.clone());
        }
        scope.clone()
    }
}

/// Makes the [`DependentKind`] of one owned type from the factory, for a sharded controller.
#[cfg(feature = "shard")]
type DependentMaker =
    Box<dyn FnOnce(&SharedInformerFactory<Client>, &ShardMember) -> Arc<dyn DependentKind> + Send>;

type Attach = Box<dyn FnOnce(&Wiring<'_>) -> Result<Box<dyn Attached>, StartError> + Send>;

/// Attaches `map` to the factory's informer of `O` over `scope`.
fn attach<O: Object + k8s_openapi::Resource>(
    wiring: &Wiring<'_>,
    scope: &Scope,
    map: Box<MapEvent<O>>,
    resync: Option<Duration>,
) -> Result<Box<dyn Attached>, StartError> {
    let informer = wiring.factory.informer::<O>(scope);
    wiring.consistency.track(&informer, scope);
    let handler = SourceHandler {
        filters: wiring.filters.clone(),
        enqueue: wiring.enqueue.clone(),
        map,
    };
    // Inline: a source only maps an event to keys and adds them to the queue, which never blocks,
    // so the informer's processor calls it directly (no handler thread, no wake-up between the
    // watch event and the queue). A `watches_with` handler runs there too: see its docs.
    let mut options = HandlerOptions::default().name(wiring.name).inline();
    if let Some(resync) = resync {
        options = options.resync(resync);
    }
    let registration = informer.add_event_handler_with(handler, options)?;
    Ok(Box::new(Attachment {
        informer,
        registration,
    }))
}

/// Labels a new child for the member, when the controller is sharded.
fn mark_child<K>(builder: &ControllerBuilder<K>) -> Option<MarkChild> {
    #[cfg(feature = "shard")]
    if let Some((member, _)) = &builder.shard {
        let member = member.clone();
        return Some(Arc::new(move |meta: &mut ObjectMeta| member.mark(meta)));
    }
    let _ = builder;
    None
}

/// A controller for the primary type `K`, not yet running: see the [module docs](self) and
/// [`ControllerBuilder`] for what can be set.
pub type Controller<K> = ControllerBuilder<K>;

/// Whose informer factory a controller uses.
enum FactoryOwner {
    /// Made by [`ControllerBuilder::new`] from `client`: the controller stops its informers.
    Own { client: Client },
    /// Given to [`ControllerBuilder::with_factory`]: its owner stops them.
    Shared,
}

impl FactoryOwner {
    fn stops_informers(&self) -> bool {
        matches!(self, FactoryOwner::Own { .. })
    }
}

/// See the [module docs](self). Every option has a default, documented on its setter.
pub struct ControllerBuilder<K> {
    name: String,
    factory: Arc<SharedInformerFactory<Client>>,
    /// Whose factory it is: the controller's own is stopped with it.
    factory_owner: FactoryOwner,
    /// The factory, or an informer of it, has been handed out ([`factory`](Self::factory),
    /// [`primary_informer`](Self::primary_informer)): from then on it is never replaced.
    factory_handed_out: AtomicBool,
    scope: Scope,
    sources: Vec<Attach>,
    streams: Vec<KeyStream>,
    filters: Vec<Filter>,
    workers: usize,
    resync: Option<Duration>,
    shutdown_timeout: Duration,
    queue: WorkQueue<ObjectKey>,
    metrics: Option<Metrics>,
    /// The controller's own writes per key, checked before each reconcile.
    consistency: ConsistencyStore,
    /// What reconciles write with (through their [`Context`]); `None`: the factory's client.
    client: Option<Client>,
    stale_requeue: Duration,
    /// Awaited after the caches synced and before the workers start (the manager's "until this
    /// replica leads"); none: start at once.
    workers_after: Option<BoxFuture<()>>,
    /// Set by [`shard`](Self::shard): this replica's membership and the primary scope before it
    /// was narrowed (the assigner's).
    #[cfg(feature = "shard")]
    shard: Option<(ShardMember, Scope)>,
    /// One per owned type, used only when sharded.
    #[cfg(feature = "shard")]
    dependents: Vec<DependentMaker>,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K: Object + k8s_openapi::Resource> ControllerBuilder<K> {
    /// A controller for the `K`s in `scope`, with informers of its own (made from `client`,
    /// stopped when it stops).
    pub fn new(client: Client, scope: Scope) -> ControllerBuilder<K> {
        let factory = Arc::new(SharedInformerFactory::new(client.clone()));
        let mut builder = ControllerBuilder::with_factory(factory, scope);
        builder.factory_owner = FactoryOwner::Own { client };
        builder
    }

    /// A controller for the `K`s in `scope` whose informers come from `factory`, shared with
    /// everything else in the process that uses it (one watch and one cache per type and scope).
    /// The factory's owner stops its informers. An informer created before keeps the settings
    /// (transform, indexers) it was created with: create it first with `informer_with` to choose.
    pub fn with_factory(
        factory: Arc<SharedInformerFactory<Client>>,
        scope: Scope,
    ) -> ControllerBuilder<K> {
        let name = K::KIND.to_lowercase();
        ControllerBuilder {
            queue: Self::queue(&name, None),
            consistency: ConsistencyStore::new(&name),
            client: None,
            stale_requeue: DEFAULT_STALE_REQUEUE,
            name,
            factory,
            factory_owner: FactoryOwner::Shared,
            factory_handed_out: AtomicBool::new(false),
            scope,
            sources: Vec::new(),
            streams: Vec::new(),
            filters: Vec::new(),
            workers: DEFAULT_WORKERS,
            resync: Some(DEFAULT_RESYNC),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            metrics: None,
            workers_after: None,
            #[cfg(feature = "shard")]
            shard: None,
            #[cfg(feature = "shard")]
            dependents: Vec::new(),
            _kind: std::marker::PhantomData,
        }
    }

    fn queue(name: &str, metrics: Option<&Metrics>) -> WorkQueue<ObjectKey> {
        let mut queue = WorkQueue::builder()
            .name(name)
            .rate_limiter(default_controller_rate_limiter());
        if let Some(metrics) = metrics {
            queue = queue.metrics(metrics.queue(name));
        }
        queue.build()
    }

    /// The controller's name: the `controller` label of its metrics, its queue's name, its
    /// handlers' names and its log spans. Default: `K`'s kind in lower case.
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self.consistency.set_controller(name);
        self.queue = Self::queue(name, self.metrics.as_ref());
        self
    }

    /// Reports reconcile and queue metrics to `metrics` (default: none). A controller with
    /// informers of its own ([`new`](Self::new)) reports theirs too (`informer_*`,
    /// `store_resource_version`), unless its factory was handed out before this call; with a
    /// shared factory, give the factory the metrics (`with_metrics(metrics.informers())`).
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.queue = Self::queue(&self.name, Some(metrics));
        self.metrics = Some(metrics.clone());
        if let FactoryOwner::Own { client } = &self.factory_owner {
            if self.factory_handed_out.load(Ordering::Relaxed) {
                tracing::debug!(
                    controller = %self.name,
                    "informers of a factory already handed out report no metrics"
                );
            } else {
                let factory =
                    SharedInformerFactory::new(client.clone()).with_metrics(metrics.informers());
                self.factory = Arc::new(factory);
            }
        }
        self
    }

    /// The controller's name (see [`name`](Self::name)).
    pub fn controller_name(&self) -> &str {
        &self.name
    }

    /// The controller's queue: to add keys from outside a source, or to watch its depth. Keys
    /// added before `run` wait for the workers. (Changing `name` or `metrics` replaces it: take
    /// it after those.)
    pub fn queue_handle(&self) -> WorkQueue<ObjectKey> {
        self.queue.clone()
    }

    /// The controller's [consistency store](super::consistency): every write a reconcile makes
    /// through its [`Context`](super::Context) is recorded there for the key, and the workers
    /// check it before each reconcile. It knows the controller's informers once `run` has
    /// attached them. Given out for its counters ([`skips`](ConsistencyStore::skips)) and for
    /// writes made outside a reconcile ([`ConsistencyStore::writes`]).
    pub fn consistency(&self) -> ConsistencyStore {
        self.consistency.clone()
    }

    /// The client reconciles write with, through their [`Context`](super::Context) (which records each write for
    /// the key). Default: the client of the controller's informer factory (the one given to
    /// [`new`](Self::new)); a [`Manager`](crate::manager::Manager) sets its gated client, and
    /// [`shard`](Self::shard) the member's.
    pub fn client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Whether reconciles wait for the caches to show the controller's own writes (see
    /// [`consistency`](super::consistency)). Default on; off, the store records nothing and every
    /// check passes.
    pub fn stale_protection(self, on: bool) -> Self {
        self.consistency.set_enabled(on);
        self
    }

    /// How long a key whose caches were stale waits before it is tried again (an event still
    /// brings it sooner). Default [`DEFAULT_STALE_REQUEUE`] (100 ms).
    pub fn stale_requeue(mut self, delay: Duration) -> Self {
        self.stale_requeue = delay;
        self
    }

    /// The factory the controller's informers come from.
    pub fn factory(&self) -> &Arc<SharedInformerFactory<Client>> {
        self.factory_handed_out.store(true, Ordering::Relaxed);
        &self.factory
    }

    /// The informer of the primary type (created now if the factory has none yet): its lister is
    /// how a reconciler reads other `K`s.
    pub fn primary_informer(&self) -> SharedIndexInformer<K> {
        self.factory_handed_out.store(true, Ordering::Relaxed);
        self.factory.informer::<K>(&self.scope)
    }

    /// Reconciles the `C`s in `scope` whose controller ownerReference points at a `K` (same kind
    /// and API group), by the owner's key: a change to a child reconciles its owner. An update that
    /// moves a child between owners reconciles both.
    ///
    /// When the controller is sharded (`shard`, feature `shard`), the owned `C`s are narrowed to this member's
    /// label too, and move with their owner.
    pub fn owns<C: Object + k8s_openapi::Resource>(self, scope: Scope) -> Self
    where
        K::Scope: 'static,
    {
        let map =
            source::mapped(|child: &C| source::controller_key::<K, C>(child).into_iter().collect());
        self.owned::<C>(scope, map)
    }

    /// [`owns`](Self::owns) with a handler of your own (as [`watches_with`](Self::watches_with)):
    /// for a controller that keeps books on its children (expectations) or adopts orphans. The
    /// `C`s are its dependents: narrowed to this member's label and moved with their owner when
    /// sharded.
    pub fn owns_with<C: Object + k8s_openapi::Resource>(
        self,
        scope: Scope,
        handle: impl Fn(&Enqueue, &ObjectEvent<'_, C>) + Send + Sync + 'static,
    ) -> Self
    where
        K::Scope: 'static,
    {
        self.owned::<C>(scope, Box::new(handle))
    }

    fn owned<C: Object + k8s_openapi::Resource>(
        mut self,
        scope: Scope,
        map: Box<MapEvent<C>>,
    ) -> Self
    where
        K::Scope: 'static,
    {
        #[cfg(feature = "shard")]
        self.record_dependent::<C>(scope.clone());
        self.sources.push(Box::new(move |wiring| {
            attach::<C>(wiring, &wiring.owned_scope(&scope), map, None)
        }));
        self
    }

    /// Remembers how to find the `C`s in `scope` that a `K` controls, for the shard gate (used
    /// only if the controller is sharded, whatever the order of `owns` and `shard`).
    #[cfg(feature = "shard")]
    fn record_dependent<C: Object + k8s_openapi::Resource>(&mut self, scope: Scope) {
        self.dependents.push(Box::new(move |factory, member| {
            let informer = factory.informer::<C>(&member.scope(scope));
            Dependents::kind(informer, |child: &C| {
                super::owner::controller_of(child.meta())
                    .filter(|owner| {
                        owner.kind == K::KIND
                            && super::owner::group_of(&owner.api_version) == K::GROUP
                    })
                    .map(|owner| owner.uid.clone())
            })
        }));
    }

    /// Shards this controller across replicas (see `crate::shard`): the primary and owned
    /// informers select only `member`'s objects; the workers start once `member` holds its Lease,
    /// hand objects over when the assigner asks, and wait for a moved object's children; and
    /// this replica stands for the ring's assigner. Call it before
    /// [`primary_informer`](Self::primary_informer). Reconciles write with
    /// [`ShardMember::client`] (through their [`Context`](super::Context)) and must
    /// [`mark_child`](super::Context::mark_child) the children they create. Sharding
    /// relies on the consistency store, so it turns [stale protection](Self::stale_protection) on.
    /// Default: not sharded. Needs the `shard` feature.
    #[cfg(feature = "shard")]
    pub fn shard(mut self, member: &ShardMember) -> Self {
        let base = self.scope.clone();
        self.scope = member.scope(base.clone());
        self.client = Some(member.client());
        self.shard = Some((member.clone(), base));
        self.consistency.set_enabled(true);
        self
    }

    /// Reconciles the keys `map` returns for each changed `O` in `scope` (zero or more; both the
    /// old and the new state of an update are mapped).
    pub fn watches<O: Object + k8s_openapi::Resource>(
        mut self,
        scope: Scope,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        self.sources.push(Box::new(move |wiring| {
            attach::<O>(wiring, &scope, source::mapped(map), None)
        }));
        self
    }

    /// The most general informer source: `handle` gets every event of the `O`s in `scope` that
    /// passed the filters, and adds keys itself (at the event's priority) through the [`Enqueue`].
    /// For sources that must also keep books, like expectations.
    ///
    /// Every source's handler (this one, `watches`' map and `owns`) is called by the informer's
    /// processor itself ([`Delivery::Inline`](ferrokube_informer::Delivery::Inline)): it must be
    /// quick and never block, since the informer applies no other change while it runs.
    pub fn watches_with<O: Object + k8s_openapi::Resource>(
        mut self,
        scope: Scope,
        handle: impl Fn(&Enqueue, &ObjectEvent<'_, O>) + Send + Sync + 'static,
    ) -> Self {
        self.sources.push(Box::new(move |wiring| {
            attach::<O>(wiring, &scope, Box::new(handle), None)
        }));
        self
    }

    /// An external source: every key the stream yields is queued (priority 0), from when the
    /// controller runs until it stops or the stream ends. A channel's receiver, a timer, a poll of
    /// a system outside Kubernetes. Filters do not apply (there is no object).
    pub fn source(mut self, keys: impl Stream<Item = ObjectKey> + Send + 'static) -> Self {
        self.streams.push(Box::pin(keys));
        self
    }

    /// Adds a filter every informer event must pass (all filters must). Default: none.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filters.push(filter);
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

    /// Runs the controller until `shutdown` resolves; see the [module docs](self) for the order of
    /// things. Returns an error only if it could not start.
    pub async fn run<R: Reconciler<K>>(
        #[cfg_attr(not(feature = "shard"), allow(unused_mut))] mut self,
        reconciler: R,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ControllerError> {
        let mark = mark_child(&self);
        let enqueue = Enqueue::new(self.queue.clone());
        let filters = Filters::new(self.filters);
        let tombstones = Arc::new(Tombstones::<K>::default());
        #[cfg(feature = "shard")]
        if self.shard.is_some() && !self.consistency.is_active() {
            tracing::warn!(controller = %self.name, "sharding needs stale protection: turning it on");
            self.consistency.set_enabled(true);
        }
        let wiring = Wiring {
            factory: &self.factory,
            enqueue: &enqueue,
            filters: &filters,
            name: &self.name,
            consistency: &self.consistency,
            #[cfg(feature = "shard")]
            shard: self.shard.as_ref().map(|(member, _)| member),
        };
        let mut attached = Vec::with_capacity(1 + self.sources.len());
        let primary = source::primary(tombstones.clone());
        let (scope, resync) = (self.scope.clone(), self.resync);
        let attach_all = std::iter::once(Box::new(move |wiring: &Wiring<'_>| {
            attach::<K>(wiring, &scope, primary, resync)
        }) as Attach)
        .chain(self.sources);
        for source in attach_all {
            match source(&wiring).and_then(|source| {
                source.start()?;
                Ok(source)
            }) {
                Ok(source) => attached.push(source),
                Err(error) => {
                    detach_all(&attached, self.factory_owner.stops_informers());
                    return Err(error.into());
                }
            }
        }
        let stopping = Stopping::new();
        let mut shutdown = std::pin::pin!(shutdown);
        // Sharded: the gate the workers ask before each reconcile.
        #[cfg(feature = "shard")]
        let shard_gate = self.shard.as_ref().map(|(member, _)| {
            let dependents: Vec<Arc<dyn DependentKind>> = std::mem::take(&mut self.dependents)
                .into_iter()
                .map(|make| make(&self.factory, member))
                .collect();
            Arc::new(ShardGate::new(
                member.clone(),
                ferrokube_client::ApiResource::of::<K>(),
                dependents,
            ))
        });
        let synced = futures_util::future::join_all(attached.iter().map(|a| a.wait_for_sync()));
        let all_synced = tokio::select! {
            synced = synced => synced.into_iter().all(|ok| ok),
            () = &mut shutdown => {
                tracing::info!(controller = %self.name, "shut down before the caches synced");
                detach_all(&attached, self.factory_owner.stops_informers());
                return Ok(());
            }
        };
        if !all_synced {
            detach_all(&attached, self.factory_owner.stops_informers());
            return Err(ControllerError::CacheSync(self.name));
        }
        #[cfg(feature = "shard")]
        if let Some(gate) = &shard_gate {
            tracing::debug!(controller = %self.name, "caches synced; workers wait for ring membership");
            let joined = gate.member().membership().acquired();
            tokio::select! {
                joined = joined => if joined.is_err() {
                    tracing::warn!(controller = %self.name, "membership ended before it began");
                    detach_all(&attached, self.factory_owner.stops_informers());
                    return Ok(());
                },
                () = &mut shutdown => {
                    tracing::info!(controller = %self.name, "shut down before joining the ring");
                    detach_all(&attached, self.factory_owner.stops_informers());
                    return Ok(());
                }
            }
        }
        if let Some(gate) = self.workers_after {
            tracing::debug!(controller = %self.name, "caches synced; workers wait for their gate");
            tokio::select! {
                () = gate => {}
                () = &mut shutdown => {
                    tracing::info!(controller = %self.name, "shut down before the workers started");
                    detach_all(&attached, self.factory_owner.stops_informers());
                    return Ok(());
                }
            }
        }
        // Sharded: this replica stands for the ring's assigner until shutdown.
        #[cfg(feature = "shard")]
        let assigner =
            self.shard
                .as_ref()
                .zip(shard_gate.as_ref())
                .map(|((member, base), gate)| {
                    let mut stop = stopping.subscribe();
                    tokio::spawn(crate::shard::assigner::run_candidacy::<K>(
                        member.clone(),
                        base.clone(),
                        gate.dependents().to_vec(),
                        async move {
                            let _ = stop.wait_for(|stopping| *stopping).await;
                        },
                    ))
                });
        let workers = Arc::new(Workers {
            name: self.name.clone(),
            queue: self.queue.clone(),
            cache: self.factory.informer::<K>(&self.scope).lister(),
            tombstones,
            reconciler,
            metrics: self.metrics.as_ref().map(|m| m.for_controller(&self.name)),
            consistency: self.consistency.clone(),
            client: self
                .client
                .clone()
                .unwrap_or_else(|| self.factory.source().clone()),
            mark_child: mark,
            stale_requeue: self.stale_requeue,
            #[cfg(feature = "shard")]
            shard: shard_gate,
        });
        let mut tasks = JoinSet::new();
        for keys in self.streams {
            tasks.spawn(forward(keys, enqueue.clone(), stopping.subscribe()));
        }
        if let Some(metrics) = &workers.metrics {
            metrics.max_concurrent.set(self.workers as i64);
        }
        for worker in 0..self.workers {
            tasks.spawn(workers.clone().work(worker, stopping.subscribe()));
        }
        #[cfg(feature = "shard")]
        if let Some(gate) = &workers.shard {
            if let Some(metrics) = gate.member().metrics().cloned() {
                let member = gate.member().clone();
                let store = self.factory.informer::<K>(&self.scope).store().clone();
                let mut stop = stopping.subscribe();
                // `shard_objects`: this member's share, read from its primary cache each second.
                tasks.spawn(async move {
                    let mut every = tokio::time::interval(Duration::from_secs(1));
                    loop {
                        tokio::select! {
                            _ = stop.wait_for(|stopping| *stopping) => return,
                            _ = every.tick() => metrics.set_objects(member.marks().ring(), member.identity(), store.len()),
                        }
                    }
                });
            }
        }
        tracing::info!(controller = %self.name, workers = self.workers, "controller started");

        shutdown.await;
        tracing::info!(controller = %self.name, "shutting down: no new keys; waiting for reconciles in flight");
        detach_all(&attached, self.factory_owner.stops_informers());
        stopping.set();
        self.queue.shut_down();
        let drained = tokio::time::timeout(self.shutdown_timeout, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                controller = %self.name,
                timeout = ?self.shutdown_timeout,
                still_running = tasks.len(),
                "reconciles still running at the shutdown deadline were cancelled"
            );
            tasks.shutdown().await;
        }
        if let Some(metrics) = &workers.metrics {
            metrics.max_concurrent.set(0);
        }
        #[cfg(feature = "shard")]
        if let Some(assigner) = assigner {
            // Its candidacy saw `stopping` and releases the assigner Lease if it held it.
            match assigner.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(controller = %self.name, %error, "assigner candidacy failed")
                }
                Err(error) => {
                    tracing::warn!(controller = %self.name, %error, "assigner candidacy panicked")
                }
            }
        }
        tracing::info!(controller = %self.name, "controller stopped");
        Ok(())
    }
}

/// Takes every handler off its informer (and stops the informers the controller owns).
fn detach_all(attached: &[Box<dyn Attached>], stop: bool) {
    for source in attached {
        source.detach(stop);
    }
}

/// The stop signal every task of a running controller watches.
struct Stopping(watch::Sender<bool>);

impl Stopping {
    fn new() -> Stopping {
        Stopping(watch::Sender::new(false))
    }
    fn set(&self) {
        self.0.send_replace(true);
    }
    fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }
}

/// Forwards a stream's keys to the queue until it ends or the controller stops.
async fn forward(keys: KeyStream, enqueue: Enqueue, mut stop: watch::Receiver<bool>) {
    let mut keys = keys;
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopping| *stopping) => return,
            key = keys.next() => match key {
                Some(key) => enqueue.add(key),
                None => return,
            },
        }
    }
}
