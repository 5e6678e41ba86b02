//! SharedIndexInformer: one reflector, one store, any number of handlers.
//!
//! Follow one watch event through it:
//!
//! ```text
//!  server ─▶ Reflector ─▶ DeltaFifo ─pop─▶ process(popped) ─┬─▶ Store (a key in place; a list at once)
//!   (reflector.rs)        (delta_fifo.rs)   (this file)      ├─▶ the store's resourceVersion moves
//!                                                            └─▶ each handler's buffer ─▶ its thread
//!                                                                 (handler.rs)
//! ```
//!
//! The processor applies what it popped to the store and, for each delta, pushes a notification to
//! every handler: `Add` when the store did not have the key, `Update(old, new)` when it did,
//! `Delete` with the last state or a tombstone. `Sync` deltas (resyncs) go only to the handlers
//! whose resync period is due. A key's deltas are applied and notified one by one (a handler finds
//! exactly the object it is told about in the store); a list is applied to the store in one step
//! and only then notified, delta by delta, so a handler of a relist finds all of it in the store,
//! and no reader ever finds half of it. All of this happens under the handler lock, which is what
//! makes a late handler correct: `add_event_handler` takes the same lock, gives the new handler an
//! `Add` for every cached object, and only then joins, so it sees every object exactly once and
//! every later change after it.
//!
//! **How fresh the cache is.** [`SharedIndexInformer::last_store_sync_resource_version`] is the
//! resourceVersion the store has caught up to; it moves after the store applied a change and
//! before the handlers hear of it, so a worker woken by a handler finds it current. It is not the
//! reflector's [`last_sync_resource_version`](SharedIndexInformer::last_sync_resource_version),
//! which moves as soon as a change is received. A controller compares it with the resourceVersion
//! of its own last write (`ferrokube::controller::consistency`).
//!
//! **Where we differ from client-go:** objects are stored and handed out as `Arc<K>` and never
//! copied, so there is no "do not mutate the cache" rule to remember (the type system enforces it);
//! handlers are plain threads with unbounded buffers, so any handler may block; and a read of one
//! key never waits for a relist (only reads of many keys do, for as long as its changes take).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferrokube_core::{pipeline_enabled, pipeline_event};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::delta::Delta;
use crate::delta_fifo::{Changes, DeltaFifo, Popped};
use crate::handler::{EventHandler, HandlerOptions, HandlerRegistration, Listener, Notification};
use crate::index::Indexers;
use crate::lister::Lister;
use crate::lister_watcher::ListerWatcher;
use crate::lister_watcher::Transform;
use crate::metrics::InformerMetrics;
use crate::pipeline::delta_name;
use crate::reflector::{Reflector, ReflectorOptions, ReflectorStatus};
use crate::store::Store;
use ferrokube_core::object::{Object, ObjectKey};

/// Why an informer could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("an informer must be started from inside a tokio runtime")]
    NoRuntime,
    #[error("the informer was stopped; informers cannot be restarted")]
    Stopped,
    #[error("could not start a handler thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The resync check never runs more often than this (client-go: 1 s).
const MIN_RESYNC_CHECK: Duration = Duration::from_secs(1);

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

enum Lifecycle {
    /// Built; holds the reflector until `start`.
    NotStarted(BoxFuture),
    Running,
    Stopped,
}

struct Handlers<K> {
    listeners: Vec<Arc<Listener<K>>>,
    /// The informer has synced (its first list is fully processed).
    synced: bool,
}

struct Inner<K> {
    name: String,
    store: Arc<Store<K>>,
    fifo: Arc<DeltaFifo<K>>,
    /// Held while a key's deltas are applied and distributed, and while a handler joins.
    handlers: Mutex<Handlers<K>>,
    lifecycle: Mutex<Lifecycle>,
    stop: watch::Sender<bool>,
    synced: watch::Sender<bool>,
    reflector: Arc<ReflectorStatus>,
    metrics: Option<Arc<dyn InformerMetrics>>,
    next_handler: AtomicU64,
}

/// See the [module docs](self). Cheap to clone; clones share one informer.
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        SharedIndexInformer {
            inner: self.inner.clone(),
        }
    }
}

/// Builds a [`SharedIndexInformer`]; every option has client-go's default.
#[must_use = "an informer builder does nothing until build()"]
pub struct InformerBuilder<K, L> {
    lister_watcher: L,
    name: String,
    indexers: Indexers<K>,
    transform: Option<Transform<K>>,
    reflector: ReflectorOptions,
    metrics: Option<Arc<dyn InformerMetrics>>,
}

impl<K: Object, L: ListerWatcher<K>> InformerBuilder<K, L> {
    /// Shown in logs, metrics and handler thread names. Default `informer`.
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }
    /// Indexes of the store. Default: the namespace index only.
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers = indexers;
        self
    }
    /// Applied once to every object from the server, as it is decoded, before anything keeps it
    /// (e.g. drop `managedFields`: with the client's `ListWatch` a list then never holds the
    /// full-size objects all at once). Default none. client-go: `SetTransform`.
    pub fn transform(mut self, transform: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }
    /// Reflector settings. Default [`ReflectorOptions::default`].
    pub fn reflector(mut self, options: ReflectorOptions) -> Self {
        self.reflector = options;
        self
    }
    /// Default none.
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// What was configured that an informer already built can still take: its indexers, and
    /// whether a transform was set (which it cannot take). For the factory, when `configure`
    /// is given for an informer it made before.
    pub(crate) fn late_settings(self) -> (Indexers<K>, bool) {
        (self.indexers, self.transform.is_some())
    }

    pub fn build(self) -> SharedIndexInformer<K> {
        let mut store = Store::new(self.indexers);
        if let Some(metrics) = &self.metrics {
            let metrics = metrics.clone();
            store = store.with_version_observer(Box::new(move |version| {
                metrics.store_resource_version(version)
            }));
        }
        let store = Arc::new(store);
        let fifo = Arc::new(DeltaFifo::new(store.clone()).with_name(&self.name));
        let mut reflector =
            Reflector::new(self.lister_watcher, fifo.clone(), self.reflector).with_name(&self.name);
        if let Some(metrics) = &self.metrics {
            reflector = reflector.with_metrics(metrics.clone());
        }
        if let Some(transform) = self.transform {
            reflector = reflector.with_transform(transform);
        }
        let status = reflector.status();
        let (stop, stop_rx) = watch::channel(false);
        let run: BoxFuture = Box::pin(reflector.run(stop_rx));
        SharedIndexInformer {
            inner: Arc::new(Inner {
                name: self.name,
                store,
                fifo,
                handlers: Mutex::new(Handlers {
                    listeners: Vec::new(),
                    synced: false,
                }),
                lifecycle: Mutex::new(Lifecycle::NotStarted(run)),
                stop,
                synced: watch::channel(false).0,
                reflector: status,
                metrics: self.metrics,
                next_handler: AtomicU64::new(1),
            }),
        }
    }
}

impl<K: Object> SharedIndexInformer<K> {
    /// An informer over `lister_watcher`; configure it, then `build()`.
    pub fn builder<L: ListerWatcher<K>>(lister_watcher: L) -> InformerBuilder<K, L> {
        InformerBuilder {
            lister_watcher,
            name: "informer".to_string(),
            indexers: Indexers::default(),
            transform: None,
            reflector: ReflectorOptions::default(),
            metrics: None,
        }
    }

    /// Starts the reflector, the delta processor and the resync timer on the current tokio
    /// runtime. Starting a running informer does nothing.
    pub fn start(&self) -> Result<(), StartError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        let mut lifecycle = self.inner.lifecycle.lock();
        let reflector = match std::mem::replace(&mut *lifecycle, Lifecycle::Running) {
            Lifecycle::NotStarted(reflector) => reflector,
            Lifecycle::Running => return Ok(()),
            Lifecycle::Stopped => {
                *lifecycle = Lifecycle::Stopped;
                return Err(StartError::Stopped);
            }
        };
        runtime.spawn(reflector);
        let inner = self.inner.clone();
        runtime.spawn(async move { inner.process_until_closed().await });
        let inner = self.inner.clone();
        runtime.spawn(async move { inner.mark_synced_when_fifo_is().await });
        let inner = self.inner.clone();
        runtime.spawn(async move { inner.resync_until_stopped().await });
        Ok(())
    }

    /// Stops the reflector, the processor and every handler thread. Pending notifications are
    /// dropped. An informer cannot be started again.
    pub fn stop(&self) {
        *self.inner.lifecycle.lock() = Lifecycle::Stopped;
        self.inner.stop.send_replace(true);
        self.inner.fifo.close();
        for listener in self.inner.handlers.lock().listeners.drain(..) {
            listener.stop();
        }
    }

    /// Adds a handler with default options. See [`add_event_handler_with`](Self::add_event_handler_with).
    pub fn add_event_handler(
        &self,
        handler: impl EventHandler<K>,
    ) -> Result<HandlerRegistration<K>, StartError> {
        self.add_event_handler_with(handler, HandlerOptions::default())
    }

    /// Adds a handler, at any time. A handler added after objects were cached first gets an `Add`
    /// (with `is_in_initial_list` true) for each of them, then every change after.
    pub fn add_event_handler_with(
        &self,
        handler: impl EventHandler<K>,
        options: HandlerOptions,
    ) -> Result<HandlerRegistration<K>, StartError> {
        if matches!(*self.inner.lifecycle.lock(), Lifecycle::Stopped) {
            return Err(StartError::Stopped);
        }
        let id = self.inner.next_handler.fetch_add(1, Ordering::Relaxed);
        let name = options.name.unwrap_or_else(|| format!("handler-{id}"));
        let metrics = self.inner.metrics.as_ref().map(|m| m.handler_queue(&name));
        let listener = Listener::new(
            &self.inner.name,
            name,
            Arc::new(handler),
            options.delivery,
            options.resync,
            metrics,
        );
        let mut handlers = self.inner.handlers.lock();
        for object in self.inner.store.list() {
            listener.push(Notification::Add {
                object,
                initial: true,
            });
        }
        if handlers.synced {
            listener.mark_upstream_synced();
        }
        listener.spawn()?;
        handlers.listeners.push(listener.clone());
        Ok(HandlerRegistration { listener })
    }

    /// Removes a handler; it gets nothing more (what was waiting in its buffer is dropped).
    pub fn remove_event_handler(&self, registration: &HandlerRegistration<K>) {
        let mut handlers = self.inner.handlers.lock();
        handlers
            .listeners
            .retain(|l| !Arc::ptr_eq(l, &registration.listener));
        registration.listener.stop();
    }

    /// True once the first list has been applied to the store (handlers may still be working
    /// through it; see [`HandlerRegistration::has_synced`]).
    pub fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    /// Waits until [`has_synced`](Self::has_synced); false if the informer stopped first.
    pub async fn wait_for_cache_sync(&self) -> bool {
        let mut synced = self.inner.synced.subscribe();
        let mut stop = self.inner.stop.subscribe();
        tokio::select! {
            // Stopped first: a stopped informer's cache no longer follows the server, so "not
            // synced" is the answer even if it had synced too.
            biased;
            _ = stop.wait_for(|s| *s) => false,
            result = synced.wait_for(|s| *s) => result.is_ok(),
        }
    }

    /// The informer's store, with its indexes.
    pub fn store(&self) -> &Arc<Store<K>> {
        &self.inner.store
    }

    /// Adds the index `name` to the informer's store, before or after it started: the objects
    /// already cached are indexed at once (see [`Store::add_index`]). client-go's `AddIndexers`.
    pub fn add_index(
        &self,
        name: &str,
        function: crate::IndexFn<K>,
    ) -> Result<(), crate::IndexConflict> {
        self.inner.store.add_index(name, function)
    }

    /// A [`Lister`] over the store.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.store.clone())
    }

    /// The newest resourceVersion the reflector has received (client-go's
    /// `LastSyncResourceVersion`). Changes up to it may still wait in the fifo: for what the cache
    /// shows, see [`last_store_sync_resource_version`](Self::last_store_sync_resource_version).
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.reflector.last_sync_resource_version()
    }

    /// The resourceVersion the store has caught up to: every change the server made up to it
    /// (from lists, watch events and bookmarks) has been applied, so a read of the cache now shows
    /// at least that version of the world (client-go's `LastStoreSyncResourceVersion`). `""`
    /// until the first list is applied. ResourceVersions are opaque strings: compare them only
    /// where the server's are integers (etcd's revisions).
    pub fn last_store_sync_resource_version(&self) -> String {
        self.inner.store.resource_version()
    }

    /// [`last_store_sync_resource_version`](Self::last_store_sync_resource_version) read as a
    /// revision ([`StoreRevision`](crate::StoreRevision)): whether the cache has seen a write is
    /// `informer.store_revision().reached(written)`.
    pub fn store_revision(&self) -> crate::StoreRevision {
        crate::StoreRevision::of(&self.inner.store.resource_version())
    }

    /// Whether the store holds the object under `key` (with `uid`, if given: a newer object under
    /// the same name does not count).
    pub fn holds(&self, key: &ObjectKey, uid: Option<&str>) -> bool {
        self.inner
            .store
            .get_by_key(key)
            .is_some_and(|held| uid.is_none_or(|uid| held.meta().uid.as_deref() == Some(uid)))
    }

    /// A receiver woken each time [`last_store_sync_resource_version`](Self::last_store_sync_resource_version)
    /// moves ([`Store::watch_resource_version`]): to wait until the cache has caught up to a version
    /// without polling.
    pub fn watch_store_resource_version(&self) -> watch::Receiver<String> {
        self.inner.store.watch_resource_version()
    }

    /// The reflector's progress: lists, watches, and whether streaming lists were refused.
    pub fn reflector_status(&self) -> &Arc<ReflectorStatus> {
        &self.inner.reflector
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl<K: Object> Inner<K> {
    async fn process_until_closed(&self) {
        while self.fifo.pop(|popped| self.process(popped)).await.is_some() {}
    }

    /// Waits for the fifo to report the first list fully processed, then tells every handler and
    /// every `wait_for_cache_sync`. Runs beside the processor, because an empty first list queues
    /// nothing for the processor to pop.
    async fn mark_synced_when_fifo_is(&self) {
        let mut stop = self.stop.subscribe();
        tokio::select! {
            // Stop first: a stopped informer is not announced synced.
            biased;
            _ = stop.wait_for(|s| *s) => return,
            _ = self.fifo.wait_for_sync() => {}
        }
        let mut handlers = self.handlers.lock();
        handlers.synced = true;
        for listener in &handlers.listeners {
            listener.mark_upstream_synced();
        }
        drop(handlers);
        self.synced.send_replace(true);
        tracing::debug!(informer = %self.name, objects = self.store.len(), "synced");
    }

    /// Applies what was popped to the store, moves the store's resourceVersion, and tells the
    /// handlers (see the [module docs](self) for the order).
    fn process(&self, popped: Popped<K>) {
        let handlers = self.handlers.lock();
        match popped.changes {
            Changes::Key { key, deltas } => self.apply_key(
                &handlers,
                &key,
                deltas,
                popped.initial,
                &popped.resource_version,
            ),
            Changes::List(keys) => {
                self.apply_list(&handlers, keys, popped.initial, &popped.resource_version)
            }
        }
        if let Some(metrics) = &self.metrics {
            metrics.cached(self.store.len());
        }
    }

    /// One key's deltas, one at a time: each is in the store when its handlers hear of it. The
    /// version moves before the last one is told (by then the store has all of them).
    fn apply_key(
        &self,
        handlers: &Handlers<K>,
        key: &ObjectKey,
        deltas: Vec<Delta<K>>,
        initial: bool,
        version: &str,
    ) {
        let last = deltas.len().saturating_sub(1);
        for (at, delta) in deltas.into_iter().enumerate() {
            let delta_kind = delta_name(&delta);
            let (notification, resync) = match delta {
                Delta::Deleted(deleted) => {
                    self.store.remove(key);
                    (Notification::Delete(deleted), false)
                }
                Delta::Sync(object) => {
                    let old = self.store.insert(object.clone());
                    changed(old, object, initial, true)
                }
                Delta::Added(object) | Delta::Updated(object) | Delta::Replaced(object) => {
                    let old = self.store.insert(object.clone());
                    changed(old, object, initial, false)
                }
            };
            pipeline_event!(
                stage = "store",
                op = "applied",
                instance = %self.name,
                key = %key,
                state = if delta_kind == "Deleted" { "gone" } else { "stored" },
                delta = delta_kind,
                rv = notification.object().resource_version(),
                size = self.store.len() as u64,
            );
            if at == last && !version.is_empty() {
                self.store.set_resource_version(version);
            }
            handlers.notify(&self.name, notification, resync);
        }
    }

    /// A whole list: computed against the store as it is, applied in one step, then told.
    fn apply_list(
        &self,
        handlers: &Handlers<K>,
        keys: Vec<(ObjectKey, Vec<Delta<K>>)>,
        initial: bool,
        version: &str,
    ) {
        let mut notifications = Vec::with_capacity(keys.len());
        let mut changes = std::collections::HashMap::with_capacity(keys.len());
        for (key, deltas) in keys {
            let mut current = self.store.get_by_key(&key);
            for delta in deltas {
                match delta {
                    Delta::Deleted(deleted) => {
                        current = None;
                        notifications.push((Notification::Delete(deleted), false));
                    }
                    Delta::Sync(object) => {
                        let old = current.replace(object.clone());
                        notifications.push(changed(old, object, initial, true));
                    }
                    Delta::Added(object) | Delta::Updated(object) | Delta::Replaced(object) => {
                        let old = current.replace(object.clone());
                        notifications.push(changed(old, object, initial, false));
                    }
                }
            }
            changes.insert(key, current);
        }
        if pipeline_enabled!() {
            for (key, current) in &changes {
                pipeline_event!(
                    stage = "store",
                    op = "applied",
                    instance = %self.name,
                    key = %key,
                    state = if current.is_some() { "stored" } else { "gone" },
                    delta = if current.is_some() { "Replaced" } else { "Deleted" },
                    rv = current.as_ref().map_or("", |object| object.resource_version()),
                    list = true,
                );
            }
        }
        self.store.apply(changes);
        pipeline_event!(stage = "store", op = "replaced", instance = %self.name, state = "replaced", rv = version, size = self.store.len() as u64);
        if !version.is_empty() {
            self.store.set_resource_version(version);
        }
        for (notification, resync) in notifications {
            handlers.notify(&self.name, notification, resync);
        }
    }

    /// Every `MIN_RESYNC_CHECK`, marks the handlers whose resync period is due and, if any, queues
    /// a `Sync` for every cached object.
    async fn resync_until_stopped(&self) {
        let mut stop = self.stop.subscribe();
        loop {
            tokio::select! {
                // Stop first: no resync round starts once the informer stops.
                biased;
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(self.resync_check_period()) => {}
            }
            if !*self.synced.borrow() {
                continue;
            }
            // The clock the sleep above counts on, and `next_resync` with it.
            let now = tokio::time::Instant::now();
            let mut any_due = false;
            for listener in &self.handlers.lock().listeners {
                let due = match (listener.resync_period, &mut *listener.next_resync.lock()) {
                    (Some(period), Some(next)) if now >= *next => {
                        *next = now + period;
                        true
                    }
                    _ => false,
                };
                listener.resyncing.store(due, Ordering::SeqCst);
                any_due |= due;
            }
            if any_due {
                self.fifo.resync();
            }
        }
    }

    fn resync_check_period(&self) -> Duration {
        self.handlers
            .lock()
            .listeners
            .iter()
            .filter_map(|l| l.resync_period)
            .min()
            .unwrap_or(Duration::from_secs(60))
            .max(MIN_RESYNC_CHECK)
    }
}

/// The notification for a store write that replaced `old` (if any) with `new`, and whether it
/// goes only to the handlers resyncing now (`sync`: a `Sync` delta, which is an update of an object
/// the handlers have; an add is for everyone).
fn changed<K>(
    old: Option<Arc<K>>,
    new: Arc<K>,
    initial: bool,
    sync: bool,
) -> (Notification<K>, bool) {
    match old {
        Some(old) => (Notification::Update { old, new }, sync),
        None => (
            Notification::Add {
                object: new,
                initial,
            },
            false,
        ),
    }
}

impl<K: Object> Handlers<K> {
    /// Pushes a notification to every handler, or for a resync only to those resyncing now.
    fn notify(&self, informer: &str, notification: Notification<K>, resync: bool) {
        let mut to = self
            .listeners
            .iter()
            .filter(|listener| !resync || listener.resyncing.load(Ordering::SeqCst))
            .peekable();
        while let Some(listener) = to.next() {
            pipeline_event!(
                stage = "handler",
                op = "notify",
                instance = informer,
                key = %notification.key(),
                // An inline handler runs at once, in this thread; the others wait in their buffer.
                state = if listener.is_inline() { "handling" } else { "buffered" },
                handler = %listener.name,
                kind = notification.kind(),
                buffered = listener.queue_depth() as u64 + u64::from(!listener.is_inline()),
            );
            if to.peek().is_some() {
                listener.push(notification.clone());
            } else {
                listener.push(notification);
                return;
            }
        }
    }
}
