//! Event handlers: what an informer calls when an object is added, updated or deleted
//! (client-go's `ResourceEventHandler`), and the buffer + thread that feeds each one.
//!
//! Handlers are called one notification at a time, in order, by default each handler on its own
//! thread with its own unbounded buffer (client-go's `processorListener`); a handler that never
//! blocks can instead be called inline by the informer's processor ([`Delivery::Inline`]). The informer only appends to
//! buffers, so a handler that blocks or is slow delays itself and nobody else: not the reflector,
//! not the store, not the other handlers. Its buffer grows instead, and that growth is visible in
//! [`HandlerRegistration::queue_depth`] and the metrics. Handlers of a controller typically only
//! compute a key and add it to a workqueue, which never blocks.
//!
//! Objects arrive as `&Arc<K>`: the very objects in the store, shared, never copied. Clone the
//! `Arc` to keep one.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ferrokube_core::pipeline_event;
use parking_lot::{Condvar, Mutex};

use crate::delta::DeletedObject;
use crate::metrics::HandlerQueueMetrics;
use ferrokube_core::object::{Object, ObjectKey};

/// Reacts to changes in an informer's store. Every method has an empty default.
pub trait EventHandler<K>: Send + Sync + 'static {
    /// A new object. `is_in_initial_list` is true for objects of the first list (and, for a handler
    /// added late, for every object already cached when it was added).
    fn on_add(&self, object: &Arc<K>, is_in_initial_list: bool) {
        let _ = (object, is_in_initial_list);
    }
    /// A changed object, or a resync (`old` and `new` are then the same object).
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }
    /// A deleted object: its last state, or a tombstone if the delete was found by a relist.
    fn on_delete(&self, object: &DeletedObject<K>) {
        let _ = object;
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&DeletedObject<K>) + Send + Sync>;

/// An [`EventHandler`] made of closures (client-go's `ResourceEventHandlerFuncs`).
#[must_use]
pub struct HandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for HandlerFns<K> {
    fn default() -> Self {
        HandlerFns {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> HandlerFns<K> {
    pub fn new() -> Self {
        HandlerFns::default()
    }
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    pub fn on_delete(mut self, f: impl Fn(&DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> EventHandler<K> for HandlerFns<K> {
    fn on_add(&self, object: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(object, is_in_initial_list)
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new)
        }
    }
    fn on_delete(&self, object: &DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(object)
        }
    }
}

/// Options of one handler registration.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct HandlerOptions {
    /// Shown in metrics and the thread name. Default `handler-<n>`.
    pub name: Option<String>,
    /// Re-deliver every cached object as an update (old == new) this often. Default none.
    pub resync: Option<Duration>,
    /// Where the handler is called. Default [`Delivery::OwnThread`].
    pub delivery: Delivery,
}

impl HandlerOptions {
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }
    /// Calls the handler on the informer's own processing task ([`Delivery::Inline`]).
    pub fn inline(mut self) -> Self {
        self.delivery = Delivery::Inline;
        self
    }
}

/// Where a handler's notifications are delivered.
///
/// ```text
///  OwnThread:  processor ──push──▶ [buffer] ──condvar──▶ handler thread ──▶ handler
///  Inline:     processor ─────────────────────────────────────────────────▶ handler
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Delivery {
    /// The handler has its own unbounded buffer and thread (client-go's `processorListener`): a
    /// slow or blocking handler delays only itself. The safe default for any handler.
    #[default]
    OwnThread,
    /// The handler is called by the informer's processor, right after the store was updated and
    /// before the next change is applied: no buffer, no thread, no wake-up between the watch event
    /// and the handler. For handlers that only compute keys and add them to a queue, which never
    /// block: the controller layer's sources. While it runs, the informer applies nothing else, so
    /// a handler that blocks stalls this informer's store and every other handler on it; and it
    /// must not add or remove handlers of the same informer (the processor holds their lock).
    Inline,
}

/// One call to make on a handler.
#[derive(Clone)]
pub(crate) enum Notification<K> {
    Add { object: Arc<K>, initial: bool },
    Update { old: Arc<K>, new: Arc<K> },
    Delete(DeletedObject<K>),
}

impl<K: Object> Notification<K> {
    /// The object the notification is about (for a delete, its last known state).
    pub(crate) fn object(&self) -> &Arc<K> {
        match self {
            Notification::Add { object, .. } => object,
            Notification::Update { new, .. } => new,
            Notification::Delete(deleted) => deleted.object(),
        }
    }

    pub(crate) fn key(&self) -> ObjectKey {
        match self {
            Notification::Delete(deleted) => deleted.key(),
            other => ObjectKey::of(&**other.object()),
        }
    }

    /// `add`, `update` or `delete`, as the pipeline's events name it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Notification::Add { .. } => "add",
            Notification::Update { .. } => "update",
            Notification::Delete(_) => "delete",
        }
    }
}

struct Buffer<K> {
    pending: VecDeque<Notification<K>>,
    stopped: bool,
}

/// One handler, its buffer, and what its thread has done. Shared by the informer (which pushes)
/// and the handler's thread (which pops).
pub(crate) struct Listener<K> {
    pub(crate) name: String,
    /// The informer's name, as the pipeline's events call it (`instance`).
    informer: Arc<str>,
    handler: Arc<dyn EventHandler<K>>,
    delivery: Delivery,
    /// Pending notifications ([`Delivery::OwnThread`] only; always empty when inline). `stopped`
    /// is honoured by both deliveries.
    buffer: Mutex<Buffer<K>>,
    wake: Condvar,
    /// The informer has synced (set under the informer's handler lock).
    upstream_synced: AtomicBool,
    /// Initial-list adds pushed but not yet handled. Synced = upstream_synced && this is 0.
    initial_pending: AtomicUsize,
    pub(crate) resync_period: Option<Duration>,
    /// When this handler is next due for a resync, on the tokio runtime's clock: the resync loop
    /// that reads it sleeps on that clock (virtual on a paused runtime, as in a deterministic run).
    /// A handler added from a thread in no runtime starts its count on real time (tokio's
    /// fallback), which is the same clock unless the runtime's clock is paused.
    pub(crate) next_resync: Mutex<Option<tokio::time::Instant>>,
    /// Whether Sync deltas of the current resync round go to this handler.
    pub(crate) resyncing: AtomicBool,
    metrics: Option<Arc<dyn HandlerQueueMetrics>>,
}

impl<K: Object> Listener<K> {
    pub(crate) fn new(
        informer: &str,
        name: String,
        handler: Arc<dyn EventHandler<K>>,
        delivery: Delivery,
        resync_period: Option<Duration>,
        metrics: Option<Arc<dyn HandlerQueueMetrics>>,
    ) -> Arc<Listener<K>> {
        Arc::new(Listener {
            name,
            informer: Arc::from(informer),
            handler,
            delivery,
            buffer: Mutex::new(Buffer {
                pending: VecDeque::new(),
                stopped: false,
            }),
            wake: Condvar::new(),
            upstream_synced: AtomicBool::new(false),
            initial_pending: AtomicUsize::new(0),
            resync_period: resync_period.filter(|p| !p.is_zero()),
            next_resync: Mutex::new(resync_period.map(|p| tokio::time::Instant::now() + p)),
            resyncing: AtomicBool::new(false),
            metrics,
        })
    }

    /// Starts the thread that delivers this listener's notifications (none for an inline one).
    pub(crate) fn spawn(self: &Arc<Self>) -> std::io::Result<()> {
        if self.delivery == Delivery::Inline {
            return Ok(());
        }
        let listener = self.clone();
        std::thread::Builder::new()
            .name(format!("informer-{}", self.name))
            .spawn(move || listener.deliver_until_stopped())
            .map(|_| ())
    }

    pub(crate) fn push(&self, notification: Notification<K>) {
        if let Notification::Add { initial: true, .. } = notification {
            self.initial_pending.fetch_add(1, Ordering::SeqCst);
        }
        let mut buffer = self.buffer.lock();
        if buffer.stopped {
            return;
        }
        if self.delivery == Delivery::Inline {
            drop(buffer);
            self.handle(notification);
            return;
        }
        buffer.pending.push_back(notification);
        let depth = buffer.pending.len();
        drop(buffer);
        self.wake.notify_one();
        if let Some(metrics) = &self.metrics {
            metrics.depth(depth);
        }
    }

    pub(crate) fn mark_upstream_synced(&self) {
        self.upstream_synced.store(true, Ordering::SeqCst);
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.upstream_synced.load(Ordering::SeqCst)
            && self.initial_pending.load(Ordering::SeqCst) == 0
    }

    pub(crate) fn is_inline(&self) -> bool {
        self.delivery == Delivery::Inline
    }

    pub(crate) fn queue_depth(&self) -> usize {
        self.buffer.lock().pending.len()
    }

    /// Drops what is pending; the thread ends after the notification it is handling, if any.
    pub(crate) fn stop(&self) {
        let mut buffer = self.buffer.lock();
        buffer.stopped = true;
        buffer.pending.clear();
        drop(buffer);
        self.wake.notify_one();
    }

    fn next(&self) -> Option<(Notification<K>, usize)> {
        let mut buffer = self.buffer.lock();
        loop {
            if buffer.stopped {
                return None;
            }
            if let Some(notification) = buffer.pending.pop_front() {
                return Some((notification, buffer.pending.len()));
            }
            self.wake.wait(&mut buffer);
        }
    }

    fn deliver_until_stopped(&self) {
        while let Some((notification, depth)) = self.next() {
            if let Some(metrics) = &self.metrics {
                metrics.depth(depth);
            }
            self.handle(notification);
        }
    }

    /// Calls the handler once; a panic is logged and the next notification goes on.
    fn handle(&self, notification: Notification<K>) {
        let initial = matches!(notification, Notification::Add { initial: true, .. });
        let handler = &self.handler;
        let outcome = catch_unwind(AssertUnwindSafe(|| match &notification {
            Notification::Add { object, initial } => handler.on_add(object, *initial),
            Notification::Update { old, new } => handler.on_update(old, new),
            Notification::Delete(deleted) => handler.on_delete(deleted),
        }));
        if outcome.is_err() {
            tracing::error!(handler = %self.name, "event handler panicked; continuing with the next event");
        }
        pipeline_event!(
            stage = "handler",
            op = "handled",
            instance = %self.informer,
            key = %notification.key(),
            state = "gone",
            handler = %self.name,
            panicked = outcome.is_err(),
        );
        if initial {
            self.initial_pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A handler added to an informer: ask whether it has synced, or pass it to
/// `remove_event_handler`.
pub struct HandlerRegistration<K> {
    pub(crate) listener: Arc<Listener<K>>,
}

impl<K> Clone for HandlerRegistration<K> {
    fn clone(&self) -> Self {
        HandlerRegistration {
            listener: self.listener.clone(),
        }
    }
}

impl<K: Object> HandlerRegistration<K> {
    /// True once the informer has synced and this handler has handled every object of the initial
    /// list (for a late handler: every object cached when it was added).
    pub fn has_synced(&self) -> bool {
        self.listener.has_synced()
    }
    /// Notifications waiting for this handler.
    pub fn queue_depth(&self) -> usize {
        self.listener.queue_depth()
    }
    pub fn name(&self) -> &str {
        &self.listener.name
    }
}
