//! Running a [`Controller`]: the short sequence its `run` goes through, one function per step.
//!
//! ```text
//!  check ─▶ attach ─▶ sync ─▶ gate ─▶ spawn ─▶ (shutdown) ─▶ drain
//!  refuse   handlers   start the    member's   streams,       handlers off, streams stop,
//!  what     on the     factory's    Lease,     workers        workers finish the key in hand
//!  cannot   informers  informers,   start_                    (≤ shutdown_timeout); own
//!  work     (guarded)  wait caches  workers_after             informers stop
//! ```
//!
//! The handlers are held by an [`Attachments`] guard from the moment they are on: whichever way
//! `run` ends (a step fails, `shutdown` comes early, the future is dropped), the guard takes them
//! off the informers, and stops the informers of a controller that owns its factory. A shared
//! factory's informers belong to its owner and keep running.
//!
//! The [builder](super::builder) only records; everything live is made here, from what it
//! recorded.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_informer::SharedInformerFactory;
use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::builder::{Controller, ControllerError, FactorySource};
use super::context::{MarkChild, Shared as ContextShared};
use super::filter::SourceKind;
use super::reconciler::Reconciler;
use super::source::{self, Enqueue, Tombstones};
use super::wiring::{Attached, KeyStream, SourceName, Wiring, attach};
use super::worker::Workers;
#[cfg(feature = "shard")]
use crate::shard::{DependentKind, ShardGate};
use ferrokube_client::client::Client;
use ferrokube_core::Kind;
#[cfg(feature = "shard")]
use ferrokube_core::Object;

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
    add_index_fields(&mut controller)?;
    let mut shutdown = std::pin::pin!(shutdown);
    let queue = controller.queue_handle();
    let enqueue = Enqueue::new(queue.clone());
    let tombstones = Arc::new(Tombstones::<K>::default());
    let attachments = attach_all(&mut controller, &enqueue, tombstones.clone())?;
    let factory = controller.factory().clone();
    #[cfg(feature = "shard")]
    let shard_gate = shard_gate(&mut controller);
    #[cfg(not(feature = "shard"))]
    let shard_gate = NoShard;
    if !sync(&controller.name, &factory, &mut shutdown).await? {
        return Ok(());
    }
    if !gate(&mut controller, &shard_gate, &mut shutdown).await {
        return Ok(());
    }
    let workers = workers(&controller, &factory, tombstones, reconciler, &shard_gate);
    let stopping = Stopping::new();
    let running = spawn(&mut controller, &workers, &enqueue, &stopping, &shard_gate);
    tracing::info!(controller = %controller.name, workers = controller.workers, "controller started");

    shutdown.await;
    tracing::info!(controller = %controller.name, "shutting down: no new keys; waiting for reconciles in flight");
    drop(attachments);
    stopping.set();
    queue.shut_down();
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

/// Without the `shard` feature, the place of the shard gate in [`run`]'s steps: nothing to wait
/// for, nothing to report.
#[cfg(not(feature = "shard"))]
struct NoShard;

/// The shard gate of [`run`]'s steps: `Some` for a sharded controller.
#[cfg(feature = "shard")]
type ShardGateOf = Option<Arc<ShardGate>>;
#[cfg(not(feature = "shard"))]
type ShardGateOf = NoShard;

/// Gate: after the caches synced, the workers wait for ring membership (sharded) and for the
/// recorded `workers_after` gate. `false`: `shutdown` came first, and no worker may start.
async fn gate<K: Kind>(
    controller: &mut Controller<K>,
    shard_gate: &ShardGateOf,
    shutdown: &mut Pin<&mut (impl Future<Output = ()> + Send)>,
) -> bool {
    #[cfg(not(feature = "shard"))]
    let _ = shard_gate; // without sharding: nothing to wait for or report
    #[cfg(feature = "shard")]
    if let Some(gate) = shard_gate {
        tracing::debug!(controller = %controller.name, "caches synced; workers wait for ring membership");
        let joined = gate.member().membership().acquired();
        tokio::select! {
            // Shutdown first: no worker starts once asked to stop.
            biased;
            () = &mut *shutdown => {
                tracing::info!(controller = %controller.name, "shut down before joining the ring");
                return false;
            }
            joined = joined => if joined.is_err() {
                tracing::warn!(controller = %controller.name, "membership ended before it began");
                return false;
            },
        }
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
/// consistency store and what each reconcile's `Context` is made of.
fn workers<K: Kind, R: Reconciler<K>>(
    controller: &Controller<K>,
    factory: &Arc<SharedInformerFactory<Client>>,
    tombstones: Arc<Tombstones<K>>,
    reconciler: R,
    shard_gate: &ShardGateOf,
) -> Arc<Workers<K, R>> {
    #[cfg(not(feature = "shard"))]
    let _ = shard_gate; // without sharding: nothing to wait for or report
    let queue = controller.queue_handle();
    Arc::new(Workers {
        name: controller.name.clone(),
        queue: queue.clone(),
        cache: factory
            .informer_for::<K>(&controller.dynamic, &controller.scope, |builder| builder)
            .lister(),
        tombstones,
        reconciler,
        metrics: controller
            .metrics
            .as_ref()
            .map(|m| m.for_controller(&controller.name)),
        consistency: controller.consistency.clone(),
        context: Arc::new(ContextShared {
            client: controller
                .client
                .clone()
                .unwrap_or_else(|| factory.source().clone()),
            consistency: controller.consistency.clone(),
            mark: mark_child(controller),
            factory: Some(factory.clone()),
            queue: Some(queue),
        }),
        stale_requeue: controller.stale_requeue,
        #[cfg(feature = "shard")]
        shard: shard_gate.clone(),
    })
}

/// What [`spawn`] started, for [`stop`] to wait on.
struct Running {
    /// The streams' forwarders, the workers, and (sharded) the share reporter.
    tasks: JoinSet<()>,
    /// Sharded: this replica's candidacy for the ring's assigner, until shutdown.
    #[cfg(feature = "shard")]
    assigner: Option<tokio::task::JoinHandle<Result<(), crate::shard::ShardError>>>,
}

/// Spawn: the recorded streams' forwarders and the workers; sharded, the share reporter and the
/// candidacy for the ring's assigner. Each stops when `stopping` is set.
fn spawn<K: Kind, R: Reconciler<K>>(
    controller: &mut Controller<K>,
    workers: &Arc<Workers<K, R>>,
    enqueue: &Enqueue,
    stopping: &Stopping,
    shard_gate: &ShardGateOf,
) -> Running {
    #[cfg(not(feature = "shard"))]
    let _ = shard_gate; // without sharding: nothing to wait for or report
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
    #[cfg(feature = "shard")]
    if let Some(gate) = shard_gate {
        let store = controller
            .factory()
            .informer_for::<K>(&controller.dynamic, &controller.scope, |builder| builder)
            .store()
            .clone();
        report_share(gate, store, stopping.subscribe(), &mut tasks);
    }
    #[cfg(feature = "shard")]
    let assigner =
        controller
            .shard
            .as_ref()
            .zip(shard_gate.as_ref())
            .map(|((member, base), gate)| {
                let mut stop = stopping.subscribe();
                tokio::spawn(crate::shard::assigner::run_candidacy::<K>(
                    member.clone(),
                    controller.dynamic.clone(),
                    base.clone(),
                    gate.dependents().to_vec(),
                    async move {
                        let _ = stop.wait_for(|stopping| *stopping).await;
                    },
                ))
            });
    Running {
        tasks,
        #[cfg(feature = "shard")]
        assigner,
    }
}

/// Drain, once the handlers are off and `stopping` is set: the workers finish the key in hand
/// (bounded by the shutdown timeout); sharded, the assigner candidacy releases its Lease.
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
    #[cfg(feature = "shard")]
    if let Some(assigner) = running.assigner {
        // Its candidacy saw `stopping` and releases the assigner Lease if it held it.
        match assigner.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(controller = %name, %error, "assigner candidacy failed")
            }
            Err(error) => {
                tracing::warn!(controller = %name, %error, "assigner candidacy panicked")
            }
        }
    }
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
    #[cfg(feature = "shard")]
    if controller.shard.is_some() && !controller.stale_protection {
        tracing::warn!(controller = %controller.name, "sharding needs stale protection: keeping it on");
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
fn add_index_fields<K: Kind>(controller: &mut Controller<K>) -> Result<(), ControllerError> {
    let factory = controller.factory().clone();
    let mut problems = Vec::new();
    for field in std::mem::take(&mut controller.index_fields) {
        if let Err(problem) = (field.add)(&factory, &controller.scope) {
            problems.push(problem);
        }
    }
    let primary =
        factory.informer_for::<K>(&controller.dynamic, &controller.scope, |builder| builder);
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
    enqueue: &Enqueue,
    tombstones: Arc<Tombstones<K>>,
) -> Result<Attachments, ControllerError> {
    let mut attachments = Attachments {
        handlers: Vec::with_capacity(1 + controller.sources.len()),
        own_factory: match &controller.factory {
            FactorySource::Own { .. } => Some(controller.factory().clone()),
            FactorySource::Shared(_) => None,
        },
    };
    let sources = std::mem::take(&mut controller.sources);
    let factory = controller.factory().clone();
    let primary_kind = SourceKind::of::<K>(&controller.dynamic);
    let wiring = Wiring {
        factory: &factory,
        enqueue,
        filters: &controller.filters,
        primary: &primary_kind,
        name: &controller.name,
        consistency: &controller.consistency,
        primary_namespaced: controller.resource.namespaced,
        primary_index: factory
            .informer_for::<K>(&controller.dynamic, &controller.scope, |builder| builder)
            .store()
            .clone(),
        metrics: controller.metrics.as_ref(),
        #[cfg(feature = "shard")]
        shard: controller.shard.as_ref().map(|(member, _)| member),
    };
    let primary = source::primary(tombstones);
    attachments.handlers.push(attach::<K>(
        &wiring,
        &controller.dynamic,
        &controller.scope,
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

/// Sharded: the gate the workers ask before each reconcile.
#[cfg(feature = "shard")]
fn shard_gate<K: Kind>(controller: &mut Controller<K>) -> Option<Arc<ShardGate>> {
    let factory = controller.factory().clone();
    let makers = std::mem::take(&mut controller.dependents);
    controller.shard.as_ref().map(|(member, _)| {
        let dependents: Vec<Arc<dyn DependentKind>> = makers
            .into_iter()
            .map(|make| make(&factory, member))
            .collect();
        Arc::new(ShardGate::new(
            member.clone(),
            controller.resource.clone(),
            dependents,
        ))
    })
}

/// Sharded: `shard_objects`, this member's share, read from its primary cache each second.
#[cfg(feature = "shard")]
fn report_share<K: Object>(
    gate: &ShardGate,
    store: Arc<ferrokube_informer::Store<K>>,
    mut stop: watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) {
    let Some(metrics) = gate.member().metrics().cloned() else {
        return;
    };
    let member = gate.member().clone();
    tasks.spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                // Stop first: no report after the controller stopped.
                biased;
                _ = stop.wait_for(|stopping| *stopping) => return,
                _ = every.tick() => metrics.set_objects(member.marks().ring(), member.identity(), store.len()),
            }
        }
    });
}

/// Labels a new child for the member, when the controller is sharded.
fn mark_child<K: Kind>(controller: &Controller<K>) -> Option<MarkChild> {
    #[cfg(feature = "shard")]
    if let Some((member, _)) = &controller.shard {
        let member = member.clone();
        return Some(Arc::new(
            move |meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                member.mark(meta)
            },
        ));
    }
    let _ = controller;
    None
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
