//! Running a [`Controller`]: the short sequence its `run` goes through, one function per step.
//!
//! ```text
//!  check ─▶ make ─▶ attach ─▶ sync ─▶ gate ─▶ spawn ─▶ (shutdown) ─▶ drain
//!  refuse   factory, handlers   start the    ownership   streams,      handlers off, streams
//!  what     queue,   on the     factory's    ready,      workers,      stop, workers finish the
//!  cannot   scopes,  informers  informers,   start_      tasks beside  key in hand (≤ shutdown_
//!  work     indexes  (guarded)  wait caches  workers_    them          timeout); own informers
//!                                            after                     stop
//! ```
//!
//! The handlers are held by an [`Attachments`] guard from the moment they are on: whichever way
//! `run` ends (a step fails, `shutdown` comes early, the future is dropped), the guard takes them
//! off the informers, and stops the informers of a controller that owns its factory. A shared
//! factory's informers belong to its owner and keep running.
//!
//! The [builder](super::builder) only records; everything live is made here (`make`), from what it
//! recorded. Which primaries this replica reconciles is the controller's
//! [`Ownership`](super::ownership::Ownership)'s to say; the steps ask it at fixed points (see
//! [`ownership`](super::ownership)).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_core::{ObjectKey, Scope};
use ferrokube_informer::SharedInformerFactory;
use ferrokube_workqueue::WorkQueue;
use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::builder::{Controller, ControllerError, controller_queue};
use super::context::Shared as ContextShared;
use super::filter::SourceKind;
use super::ownership::Start;
use super::reconciler::Reconciler;
use super::source::{self, Enqueue, Tombstones};
use super::wiring::{Attached, KeyStream, SourceName, Wiring, attach};
use super::worker::Workers;
use ferrokube_client::client::Client;
use ferrokube_core::Kind;

/// Every handler a running controller put on an informer. Dropped however `run` ends: takes
/// them off, and stops the informers of a factory the controller owns.
struct Attachments {
    handlers: Vec<Box<dyn Attached>>,
    /// The controller's own factory, stopped with it; `None` for a shared one.
    own_factory: Option<Arc<SharedInformerFactory<Client>>>,
}

impl Drop for Attachments {
    fn drop(&mut self) {
        for handler in &self.handlers {
            handler.detach();
        }
        if let Some(factory) = &self.own_factory {
            factory.shutdown();
        }
    }
}

impl<K: Kind> Controller<K> {
    /// Runs the controller until `shutdown` resolves; see the [builder's docs](super::builder)
    /// for the order of things. Returns an error only if it could not start.
    pub async fn run<R: Reconciler<K>>(
        self,
        reconciler: R,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ControllerError> {
        run(self, reconciler, shutdown).await
    }
}

/// What `make` made live from what the controller recorded.
struct Live {
    factory: Arc<SharedInformerFactory<Client>>,
    /// Whether `factory` is the controller's own (stopped when it stops).
    own_factory: bool,
    queue: WorkQueue<ObjectKey>,
    /// The primary scope, narrowed by the ownership.
    scope: Scope,
}

/// Runs `controller` with `reconciler` until `shutdown`: the sequence in the [module docs](self),
/// one call per step.
async fn run<K, R>(
    mut controller: Controller<K>,
    reconciler: R,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ControllerError>
where
    K: Kind,
    R: Reconciler<K>,
{
    check(&mut controller)?;
    let live = make(&mut controller)?;
    let mut shutdown = std::pin::pin!(shutdown);
    let enqueue = Enqueue::new(live.queue.clone());
    let tombstones = Arc::new(Tombstones::<K>::default());
    let attachments = attach_all(&mut controller, &live, &enqueue, tombstones.clone())?;
    start_ownership(&mut controller, &live);
    if !sync(&controller.name, &live.factory, &mut shutdown).await? {
        return Ok(());
    }
    if !gate(&mut controller, &mut shutdown).await {
        return Ok(());
    }
    let workers = workers(&controller, &live, tombstones, reconciler);
    let stopping = Stopping::new();
    let running = spawn(&mut controller, &workers, &enqueue, &stopping);
    tracing::info!(controller = %controller.name, workers = controller.workers, "controller started");

    shutdown.await;
    tracing::info!(controller = %controller.name, "shutting down: no new keys; waiting for reconciles in flight");
    drop(attachments);
    stopping.set();
    live.queue.shut_down();
    stop(
        &controller.name,
        controller.shutdown_timeout,
        &workers,
        running,
    )
    .await;
    tracing::info!(controller = %controller.name, "controller stopped");
    Ok(())
}

/// Make: the factory (given, or the controller's own with its metrics), the queue (given, or
/// the controller's own), the primary scope as the ownership narrows it, and the recorded
/// indexes on their informers.
fn make<K: Kind>(controller: &mut Controller<K>) -> Result<Live, ControllerError> {
    let (factory, own_factory) = match controller.factory.clone() {
        Some(shared) => (shared, false),
        None => {
            let own = SharedInformerFactory::new(controller.client.clone());
            let own = match &controller.metrics {
                Some(metrics) => own.with_metrics(metrics.informers()),
                None => own,
            };
            (Arc::new(own), true)
        }
    };
    let queue = controller
        .queue
        .clone()
        .unwrap_or_else(|| controller_queue(&controller.name, controller.metrics.as_ref()));
    let live = Live {
        factory,
        own_factory,
        queue,
        scope: controller.ownership.scope(controller.scope.clone()),
    };
    add_index_fields(controller, &live)?;
    Ok(live)
}

/// Gate: after the caches synced, the workers wait for the ownership (ring membership, when
/// sharded) and for the recorded `workers_after` gate. `false`: `shutdown` came first (or the
/// ownership will never be ready), and no worker may start.
async fn gate<K: Kind>(
    controller: &mut Controller<K>,
    shutdown: &mut Pin<&mut (impl Future<Output = ()> + Send)>,
) -> bool {
    tokio::select! {
        // Shutdown first: no worker starts once asked to stop.
        biased;
        () = &mut *shutdown => {
            tracing::info!(controller = %controller.name, "shut down before this replica's ownership was ready");
            return false;
        }
        ready = controller.ownership.ready() => if !ready {
            tracing::warn!(controller = %controller.name, "ownership ended before it began");
            return false;
        },
    }
    if let Some(gate) = controller.workers_after.take() {
        tracing::debug!(controller = %controller.name, "caches synced; workers wait for their gate");
        tokio::select! {
            // Shutdown first: no worker starts once asked to stop.
            biased;
            () = &mut *shutdown => {
                tracing::info!(controller = %controller.name, "shut down before the workers started");
                return false;
            }
            () = gate => {}
        }
    }
    true
}

/// What every worker shares: the queue, the primary cache, the reconciler, the metrics, the
/// consistency store, the ownership, and what each reconcile's `Context` is made of.
fn workers<K: Kind, R: Reconciler<K>>(
    controller: &Controller<K>,
    live: &Live,
    tombstones: Arc<Tombstones<K>>,
    reconciler: R,
) -> Arc<Workers<K, R>> {
    let ownership = controller.ownership.clone();
    Arc::new(Workers {
        name: controller.name.clone(),
        queue: live.queue.clone(),
        cache: live
            .factory
            .informer_for::<K>(&controller.dynamic, &live.scope, |builder| builder)
            .lister(),
        tombstones,
        reconciler,
        metrics: controller
            .metrics
            .as_ref()
            .map(|m| m.for_controller(&controller.name)),
        consistency: controller.consistency.clone(),
        context: Arc::new(ContextShared {
            client: ownership
                .client()
                .unwrap_or_else(|| controller.client.clone()),
            consistency: controller.consistency.clone(),
            mark: {
                let ownership = ownership.clone();
                Arc::new(move |meta| ownership.mark_child(meta))
            },
            factory: Some(live.factory.clone()),
            queue: Some(live.queue.clone()),
        }),
        stale_requeue: controller.stale_requeue,
        ownership,
    })
}

/// What [`spawn`] started, for [`stop`] to wait on.
struct Running {
    /// The streams' forwarders and the workers.
    tasks: JoinSet<()>,
    /// The ownership's tasks beside the workers (sharded: the share reporter, the candidacy for
    /// the ring's assigner), awaited after the workers.
    beside: JoinSet<()>,
}

/// Spawn: the recorded streams' forwarders, the workers, and the ownership's tasks beside them.
/// Each stops when `stopping` is set.
fn spawn<K: Kind, R: Reconciler<K>>(
    controller: &mut Controller<K>,
    workers: &Arc<Workers<K, R>>,
    enqueue: &Enqueue,
    stopping: &Stopping,
) -> Running {
    let mut tasks = JoinSet::new();
    for keys in std::mem::take(&mut controller.streams) {
        tasks.spawn(forward(keys, enqueue.clone(), stopping.subscribe()));
    }
    if let Some(metrics) = &workers.metrics {
        metrics.max_concurrent.set(controller.workers as i64);
    }
    for worker in 0..controller.workers {
        tasks.spawn(workers.clone().work(worker, stopping.subscribe()));
    }
    let mut beside = JoinSet::new();
    for task in controller.ownership.beside_workers(stopping.subscribe()) {
        beside.spawn(task);
    }
    Running { tasks, beside }
}

/// Drain, once the handlers are off and `stopping` is set: the workers finish the key in hand
/// (bounded by the shutdown timeout); then the ownership's tasks end (sharded: the assigner
/// candidacy releases its Lease), bounded by the same timeout.
async fn stop<K: Kind, R: Reconciler<K>>(
    name: &str,
    timeout: Duration,
    workers: &Workers<K, R>,
    mut running: Running,
) {
    drain(name, timeout, &mut running.tasks).await;
    if let Some(metrics) = &workers.metrics {
        metrics.max_concurrent.set(0);
    }
    drain(name, timeout, &mut running.beside).await;
}

/// Refuses what cannot work as recorded; applies the recorded settings to the consistency store.
fn check<K: Kind>(controller: &mut Controller<K>) -> Result<(), ControllerError> {
    let problems = controller.problems();
    if !problems.is_empty() {
        return Err(ControllerError::Misconfigured {
            controller: controller.name.clone(),
            problems,
        });
    }
    controller.consistency.set_controller(&controller.name);
    if controller.ownership.keeps_stale_protection() && !controller.stale_protection {
        tracing::warn!(controller = %controller.name, "this controller's ownership (sharding) needs stale protection: keeping it on");
        controller.stale_protection = true;
    }
    controller
        .consistency
        .set_enabled(controller.stale_protection);
    Ok(())
}

/// Adds the indexes of [`index_field`](Controller::index_field) to their informers (filled from
/// what they hold if they run already), then checks that every index a
/// [`watches_by_index`](Controller::watches_by_index) source looks up is on the primary's
/// informer. Refuses, naming the call, an index whose name its informer has already, and a
/// lookup of an index the primary lacks.
fn add_index_fields<K: Kind>(
    controller: &mut Controller<K>,
    live: &Live,
) -> Result<(), ControllerError> {
    let mut problems = Vec::new();
    for field in std::mem::take(&mut controller.index_fields) {
        if let Err(problem) = (field.add)(&live.factory, &live.scope) {
            problems.push(problem);
        }
    }
    let primary = live
        .factory
        .informer_for::<K>(&controller.dynamic, &live.scope, |builder| builder);
    for (call, index) in &controller.index_lookups {
        if !primary.store().has_index(index) {
            problems.push(format!(
                "{call} looks primaries up by the index {index:?}, which the informer of {}s has \
                 not: add it with index_field::<{}>({index:?}, ..)",
                controller.resource.kind, controller.resource.kind
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ControllerError::Misconfigured {
            controller: controller.name.clone(),
            problems,
        })
    }
}

/// Puts one handler per source on its informer: the primary's first, then the others. On an
/// error, those already on come off again (the guard is dropped).
fn attach_all<K: Kind>(
    controller: &mut Controller<K>,
    live: &Live,
    enqueue: &Enqueue,
    tombstones: Arc<Tombstones<K>>,
) -> Result<Attachments, ControllerError> {
    let mut attachments = Attachments {
        handlers: Vec::with_capacity(1 + controller.sources.len()),
        own_factory: live.own_factory.then(|| live.factory.clone()),
    };
    let sources = std::mem::take(&mut controller.sources);
    let primary_kind = SourceKind::of::<K>(&controller.dynamic);
    let ownership = controller.ownership.clone();
    let narrow = move |scope: Scope| ownership.scope(scope);
    let wiring = Wiring {
        factory: &live.factory,
        enqueue,
        filters: &controller.filters,
        primary: &primary_kind,
        name: &controller.name,
        consistency: &controller.consistency,
        primary_namespaced: controller.resource.namespaced,
        primary_index: live
            .factory
            .informer_for::<K>(&controller.dynamic, &live.scope, |builder| builder)
            .store()
            .clone(),
        metrics: controller.metrics.as_ref(),
        narrow: &narrow,
    };
    let primary = source::primary(tombstones);
    attachments.handlers.push(attach::<K>(
        &wiring,
        &controller.dynamic,
        &live.scope,
        primary,
        controller.resync,
        SourceName {
            call: "primary".to_string(),
            mapper: "its own key",
        },
    )?);
    for source in sources {
        attachments.handlers.push((source.attach)(&wiring)?);
    }
    Ok(attachments)
}

/// Tells the ownership what it is made of: the factory, the primary's store, the caches of the
/// owned kinds (over the scopes it narrowed).
fn start_ownership<K: Kind>(controller: &mut Controller<K>, live: &Live) {
    let ownership = controller.ownership.clone();
    let narrow = |scope: Scope| ownership.scope(scope);
    let owned = std::mem::take(&mut controller.owned_kinds)
        .into_iter()
        .map(|make| make(&live.factory, &narrow))
        .collect();
    controller.ownership.start(Start {
        factory: &live.factory,
        resource: &controller.resource,
        dynamic: &controller.dynamic,
        recorded_scope: &controller.scope,
        primary: live
            .factory
            .informer_for::<K>(&controller.dynamic, &live.scope, |builder| builder)
            .store()
            .clone(),
        owned,
    });
}

/// Starts every informer of the factory (those of the sources, and any taken for a lister) and
/// waits for their caches. `Ok(false)`: `shutdown` came first.
async fn sync(
    name: &str,
    factory: &SharedInformerFactory<Client>,
    shutdown: &mut Pin<&mut impl Future<Output = ()>>,
) -> Result<bool, ControllerError> {
    factory.start()?;
    tokio::select! {
        // Shutdown first: a controller asked to stop starts no worker, synced or not.
        biased;
        () = shutdown.as_mut() => {
            tracing::info!(controller = %name, "shut down before the caches synced");
            Ok(false)
        }
        synced = factory.wait_for_cache_sync() => {
            if synced {
                Ok(true)
            } else {
                Err(ControllerError::CacheSync(name.to_string()))
            }
        }
    }
}

/// Waits for the workers and streams to end, at most the shutdown timeout; then cancels what
/// still runs.
async fn drain(name: &str, timeout: Duration, tasks: &mut JoinSet<()>) {
    let drained = tokio::time::timeout(timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            controller = %name,
            ?timeout,
            still_running = tasks.len(),
            "reconciles still running at the shutdown deadline were cancelled"
        );
        tasks.shutdown().await;
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
            // Stop first: a stream that always has a key cannot keep a stopped controller adding.
            biased;
            _ = stop.wait_for(|stopping| *stopping) => return,
            key = keys.next() => match key {
                Some(key) => enqueue.add(key),
                None => return,
            },
        }
    }
}
