//! [`WorkQueue`]: the queue a controller's event handlers add keys to and its workers take keys from.
//!
//! How one key flows through it (module by module):
//!
//! ```text
//!  add(k) ─▶ key_table: absent → Queued ─▶ ready_queue.push ─▶ wake one getter
//!  get()  ─▶ ready_queue.pop ─▶ key_table: Queued → Processing ─▶ worker
//!            (and prefetch the bucket of the key after it, so that the next get does not wait
//!             for memory: `KeyTable::prefetch`)
//!  done(k)─▶ key_table: Processing → absent, or ProcessingDirty → Queued ─▶ ready_queue.push
//!  add_after(k, d) ─▶ delay: waits d ─▶ add(k)
//!  add_rate_limited(k) ─▶ rate_limiter.when_at(k, clock.now()) = d ─▶ add_after(k, d)
//! ```
//!
//! Locks: each key-table shard, the ready queue and the delay heap each have their own lock, and no code
//! path holds two of them at once, so there is no lock order to get wrong and no deadlock.

use ferrokube_pipeline::pipeline_event;
use std::fmt::Debug;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::block_on::block_on;
use crate::clock::{MetricsClock, QueueClock};
use crate::delay::{DelayedKeys, Deliver};
use crate::key_table::{AddOutcome, DoneOutcome, KeyState, KeyTable};
use crate::metrics::{QueueMetrics, UNFINISHED_WORK_UPDATE_PERIOD};
use crate::rate_limiter::{RateLimiter, default_controller_rate_limiter};
use crate::ready_queue::{Entry, ReadyQueue};

/// How many times [`WorkQueue::get_blocking`] yields before it parks (a few microseconds in all).
const SPIN_YIELDS: usize = 8;

/// A delayed key due within this long is waited for by [`WorkQueue::get_blocking`] on the CPU (a
/// spin on the clock) instead of by yielding or parking: a park and the wake-up that follows cost
/// two system calls and two context switches, tens of microseconds on a busy machine, more than
/// the wait itself (rate-limited retries start at a few microseconds).
const SPIN_UNTIL_DUE: Duration = Duration::from_micros(20);

/// What a key type needs to be a workqueue key. `Arc<str>`, `String` and small structs of them are
/// typical; cloning should be cheap because the queue clones a key once when it first enters.
/// `Debug` names the key in the pipeline's `tracing` events (formatted only when someone listens).
pub trait QueueKey: Clone + Eq + Hash + Debug + Send + Sync + 'static {}
impl<K: Clone + Eq + Hash + Debug + Send + Sync + 'static> QueueKey for K {}

/// How to add a key: at which priority, after how long, whether through the rate limiter. Every
/// `add*` method of [`WorkQueue`] is a shorthand for [`WorkQueue::add_with`] and one of these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct AddOptions {
    priority: i32,
    after: Option<Duration>,
    rate_limited: bool,
}

impl AddOptions {
    /// Default: priority 0, no delay, not rate limited.
    pub fn new() -> Self {
        Self::default()
    }

    /// Higher priorities are handed out first; FIFO within a priority. Default 0. Adding a key that
    /// is already waiting with a higher priority raises it; a lower one leaves it where it is.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Add only after `delay` (counted as a retry in the metrics, as client-go's `AddAfter` is).
    /// A zero delay adds at once.
    pub fn after(mut self, delay: Duration) -> Self {
        self.after = Some(delay);
        self
    }

    /// Ask the queue's rate limiter for the delay (and count a failure of the key). With
    /// [`AddOptions::after`] too, the longer of the two delays applies.
    pub fn rate_limited(mut self) -> Self {
        self.rate_limited = true;
        self
    }
}

/// A deduplicating keyed work queue with client-go's `workqueue` semantics: `add`/`get`/`done`,
/// delayed and rate-limited adds, plus priorities.
///
/// Cloning a `WorkQueue` gives another handle to the same queue (it is an `Arc`). The queue and its
/// timer thread go away when the last handle is dropped or the queue is shut down.
pub struct WorkQueue<K: QueueKey> {
    inner: Arc<Inner<K>>,
}

impl<K: QueueKey> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<K: QueueKey> {
    name: String,
    /// Every key that is queued or being processed, and in which of those states.
    keys: KeyTable<K>,
    /// Keys ready to hand out. Invariant: holds exactly one live entry per `Queued` key.
    ready: Mutex<ReadyQueue<K>>,
    /// Getters with nothing to take wait here. An add that queues a key wakes one; shutdown wakes all.
    ready_signal: Notify,
    /// Getters registered on `ready_signal` (about to wait, or waiting). An add wakes one only if this
    /// is non-zero, so a busy queue pays no wake-up cost. No wake-up is lost: a getter counts itself
    /// before its last look at the ready queue, and an adder reads the count after its push; the ready
    /// queue's lock orders the two (see `get`).
    sleepers: AtomicUsize,
    /// Keys added with a delay, and the timer that adds them when it has passed.
    delayed: Arc<DelayedKeys<K>>,
    shutting_down: AtomicBool,
    /// Set by `shut_down_with_drain`; `done` then signals `drained` once nothing is processing.
    draining: AtomicBool,
    drained: Notify,
    /// Adds refused because the queue was shutting down.
    dropped_adds: AtomicU64,
    limiter: Box<dyn RateLimiter<K>>,
    metrics: Option<Arc<dyn QueueMetrics>>,
    /// The queue's clock (real, or the runtime's: see `WorkQueueBuilder::virtual_time`): the
    /// delayed keys count on a copy of it, and the rate limiter is given its `now`.
    clock: QueueClock,
    /// Metrics' timestamps, from `clock`; free when the queue has no metrics.
    stamps: MetricsClock,
    /// The `Arc` this lives in, for the timer thread (which must not keep the queue alive).
    this: Weak<Inner<K>>,
}

/// Builds a [`WorkQueue`]. Every option has a default; `WorkQueue::new()` is `builder().build()`.
#[must_use]
pub struct WorkQueueBuilder<K: QueueKey> {
    name: String,
    virtual_time: bool,
    limiter: Option<Box<dyn RateLimiter<K>>>,
    metrics: Option<Arc<dyn QueueMetrics>>,
}

impl<K: QueueKey> WorkQueueBuilder<K> {
    /// The queue's name, used in logs and thread names (the metrics get theirs from
    /// [`crate::PrometheusMetrics::for_queue`]). Default: empty.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The limiter behind `add_rate_limited`, `forget` and `num_requeues`.
    /// Default: [`default_controller_rate_limiter`] (as client-go's controllers use).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<K> + 'static) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// Read every time the queue needs from the tokio runtime's clock, instead of real time (the
    /// default): delays are counted on it and waited for in a task on the runtime, instead of on
    /// an OS thread (precise to microseconds); the rate limiter is given its `now`
    /// ([`RateLimiter::when_at`]), so the overall token bucket refills as that clock moves; and the
    /// metrics measure it. For runs on a paused clock (`tokio::time::pause`,
    /// `ferrokube-explore`), where virtual time runs ahead of real time: a delayed key then comes
    /// back when the runtime's clock reaches its due time, and a retry waits what the run's clock
    /// says, not what the machine's speed made of it. Build the queue, and use it, inside the
    /// runtime: a thread outside any runtime reads real time (tokio's fallback). Default `false`.
    pub fn virtual_time(mut self, on: bool) -> Self {
        self.virtual_time = on;
        self
    }

    /// Where to report metrics. Default: none, and then the queue does no work for metrics at all.
    pub fn metrics(mut self, metrics: Arc<dyn QueueMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    pub fn build(self) -> WorkQueue<K> {
        let tick = self
            .metrics
            .is_some()
            .then_some(UNFINISHED_WORK_UPDATE_PERIOD);
        let thread_name = if self.name.is_empty() {
            "workqueue-timer".to_string()
        } else {
            format!("workqueue-timer-{}", self.name)
        };
        let clock = QueueClock::new(self.virtual_time);
        let inner = Arc::new_cyclic(|this| Inner {
            clock,
            stamps: MetricsClock::new(clock, self.metrics.is_some()),
            name: self.name,
            keys: KeyTable::new(self.metrics.is_some()),
            ready: Mutex::new(ReadyQueue::new()),
            ready_signal: Notify::new(),
            sleepers: AtomicUsize::new(0),
            delayed: Arc::new(DelayedKeys::new(thread_name, tick, clock)),
            shutting_down: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            drained: Notify::new(),
            dropped_adds: AtomicU64::new(0),
            limiter: self
                .limiter
                .unwrap_or_else(|| Box::new(default_controller_rate_limiter())),
            metrics: self.metrics,
            this: this.clone(),
        });
        inner.delayed.start_ticking(&inner.this);
        WorkQueue { inner }
    }
}

impl<K: QueueKey> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: QueueKey> WorkQueue<K> {
    /// A queue with every default (see [`WorkQueueBuilder`]).
    pub fn new() -> Self {
        Self::builder().build()
    }

    pub fn builder() -> WorkQueueBuilder<K> {
        WorkQueueBuilder {
            name: String::new(),
            virtual_time: false,
            limiter: None,
            metrics: None,
        }
    }

    /// The name given at build time.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Marks `key` as needing processing.
    ///
    /// - If the key is already waiting, nothing changes: a waiting key is stored once (dedup).
    /// - If a worker is processing it, it is marked dirty and goes back into the queue when that
    ///   worker calls [`done`](Self::done), so one key is never handed to two workers at once.
    /// - Otherwise it joins the back of the queue (FIFO).
    /// - After [`shut_down`](Self::shut_down) the add is dropped and counted in
    ///   [`dropped_adds`](Self::dropped_adds).
    pub fn add(&self, key: K) {
        let inner = &*self.inner;
        if !inner.refuse_if_shutting_down() {
            inner.enqueue(key, 0);
        }
    }

    /// [`add`](Self::add) at `priority` (default 0; higher first, FIFO within one priority). Adding a
    /// waiting key at a higher priority moves it up; this is how edge-triggered events overtake a
    /// backlog of resync keys.
    pub fn add_with_priority(&self, key: K, priority: i32) {
        self.add_with(key, AddOptions::new().priority(priority));
    }

    /// Adds `key` once `delay` has passed. While it waits, adding it again with a delay keeps the
    /// earlier of the two ready times. A zero delay is a plain [`add`](Self::add).
    pub fn add_after(&self, key: K, delay: Duration) {
        self.add_with(key, AddOptions::new().after(delay));
    }

    /// Adds `key` after the delay the rate limiter gives for it, counting one more failure of it.
    pub fn add_rate_limited(&self, key: K) {
        self.add_with(key, AddOptions::new().rate_limited());
    }

    /// Adds `key` as `options` say. The other `add*` methods are shorthands for this one.
    pub fn add_with(&self, key: K, options: AddOptions) {
        let inner = &*self.inner;
        if inner.refuse_if_shutting_down() {
            return;
        }
        let mut delay = options.after.unwrap_or_default();
        if options.rate_limited {
            // On the queue's clock, so that a bucket refills as the queue's time passes.
            let backoff = inner.limiter.when_at(&key, inner.clock.now());
            pipeline_event!(
                stage = "limiter",
                op = "failure",
                instance = %inner.name,
                key = ?key,
                state = "failing",
                failures = inner.limiter.num_requeues(&key) as u64,
                backoff_ms = backoff.as_millis() as u64,
            );
            delay = delay.max(backoff);
        }
        if options.after.is_some() || options.rate_limited {
            inner.with_metrics(|m| m.retried());
        }
        if delay.is_zero() {
            inner.enqueue(key, options.priority);
            return;
        }
        pipeline_event!(
            stage = "delay",
            op = "add_after",
            instance = %inner.name,
            key = ?key,
            state = "delayed",
            delay_ms = delay.as_millis() as u64,
            depth_delayed = inner.delayed.len() as u64 + 1,
        );
        if !inner
            .delayed
            .insert(key, delay, options.priority, &inner.this)
        {
            inner.dropped_adds.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits for a key to process and hands it out; `None` once the queue is shut down and empty.
    ///
    /// The caller owns the key until it calls [`done`](Self::done) with it; meanwhile adds of the
    /// same key mark it dirty instead of handing it to another worker. After shutdown, keys still
    /// in the queue are handed out first; then every `get` returns `None`.
    pub async fn get(&self) -> Option<K> {
        let inner = &*self.inner;
        loop {
            if let Some(key) = inner.take() {
                return Some(key);
            }
            if inner.promote_due() {
                continue;
            }
            // Register (and count ourselves a sleeper) before the last look, so an add or shutdown
            // after it cannot be missed.
            let _sleeping = Sleeping::new(&inner.sleepers);
            let mut woken = pin!(inner.ready_signal.notified());
            woken.as_mut().enable();
            if let Some(key) = inner.take() {
                return Some(key);
            }
            if inner.shutting_down.load(Ordering::SeqCst) {
                return None;
            }
            woken.await;
        }
    }

    /// [`get`](Self::get) for threads that are not async: blocks the calling thread. Do not call it on
    /// an async runtime's worker thread.
    ///
    /// Before it parks, the thread yields its core a few times (eight): with more busy
    /// threads than cores, that lets a producer run and refill the queue, which is much cheaper than a
    /// park now and a wake-up (two system calls and two context switches) a moment later. When a
    /// delayed key is due within a few microseconds (20 µs) it spins on the clock
    /// instead, and delivers that key itself.
    pub fn get_blocking(&self) -> Option<K> {
        let inner = &*self.inner;
        for _ in 0..SPIN_YIELDS {
            if let Some(key) = inner.take() {
                return Some(key);
            }
            if inner.shutting_down.load(Ordering::SeqCst) {
                break;
            }
            if inner.promote_due() {
                continue;
            }
            match inner.delayed.next_due_in() {
                Some(wait) if wait <= SPIN_UNTIL_DUE => inner.spin_for(wait),
                _ => std::thread::yield_now(),
            }
        }
        block_on(self.get())
    }

    /// Ends processing of `key`: a worker calls this for every key [`get`](Self::get) gave it, success
    /// or not. If the key was added while it was processed, it goes back into the queue now.
    pub fn done(&self, key: &K) {
        let inner = &*self.inner;
        let hash = inner.keys.hash(key);
        let started_at = match inner.keys.done(key, hash) {
            DoneOutcome::Finished { started_at } => {
                pipeline_event!(stage = "queue", op = "done", instance = %inner.name, key = ?key, state = "gone", depth = inner.ready.lock().len() as u64);
                started_at
            }
            DoneOutcome::Requeue {
                started_at,
                ticket,
                priority,
            } => {
                let entry = Entry {
                    key: key.clone(),
                    hash,
                    ticket,
                };
                inner.ready.lock().push(entry, priority, false);
                pipeline_event!(stage = "queue", op = "done", instance = %inner.name, key = ?key, state = "queued", depth = inner.ready.lock().len() as u64);
                inner.wake_one();
                started_at
            }
            DoneOutcome::NotProcessing => {
                tracing::debug!(queue = %inner.name, "workqueue: done for a key that was not being processed");
                return;
            }
        };
        inner.with_metrics(|m| {
            let worked = inner.stamps.between(started_at, inner.stamps.now());
            m.done(worked.unwrap_or_default());
        });
        if inner.draining.load(Ordering::SeqCst) && inner.keys.processing_count() == 0 {
            inner.drained.notify_waiters();
        }
    }

    /// Clears the rate limiter's memory of `key` (call it when the key was processed successfully).
    /// The key itself is unaffected.
    pub fn forget(&self, key: &K) {
        self.inner.limiter.forget(key);
        pipeline_event!(stage = "limiter", op = "forget", instance = %self.inner.name, key = ?key, state = "gone");
    }

    /// How many failures the rate limiter remembers for `key`.
    pub fn num_requeues(&self, key: &K) -> usize {
        self.inner.limiter.num_requeues(key)
    }

    /// Number of keys waiting to be handed out (not counting keys being processed or still delayed).
    pub fn len(&self) -> usize {
        self.inner.ready.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of keys added with a delay that has not passed yet.
    pub fn delayed_len(&self) -> usize {
        self.inner.delayed.len()
    }

    /// Stops the queue: later adds are dropped (and counted), delayed keys are dropped and the timer
    /// thread ends, waiting getters wake. Keys already in the queue are still handed out; then every
    /// `get` returns `None`. Keys being processed may still be marked dirty and re-queued by `done`.
    pub fn shut_down(&self) {
        let inner = &*self.inner;
        inner.shutting_down.store(true, Ordering::SeqCst);
        inner.delayed.stop();
        inner.ready_signal.notify_waiters();
    }

    /// [`shut_down`](Self::shut_down), then waits until every key being processed is
    /// [`done`](Self::done). Workers must keep calling `get` and `done` for this to finish.
    pub async fn shut_down_with_drain(&self) {
        let inner = &*self.inner;
        inner.draining.store(true, Ordering::SeqCst);
        self.shut_down();
        loop {
            let mut drained = pin!(inner.drained.notified());
            drained.as_mut().enable();
            if inner.keys.processing_count() == 0 {
                return;
            }
            drained.await;
        }
    }

    /// [`shut_down_with_drain`](Self::shut_down_with_drain) for threads that are not async.
    pub fn shut_down_with_drain_blocking(&self) {
        block_on(self.shut_down_with_drain());
    }

    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::SeqCst)
    }

    /// Number of adds dropped because they came after shutdown.
    pub fn dropped_adds(&self) -> u64 {
        self.inner.dropped_adds.load(Ordering::Relaxed)
    }

    /// Whether `key` is currently being processed (for tests and diagnostics).
    pub fn is_processing(&self, key: &K) -> bool {
        matches!(
            self.inner.keys.state(key),
            Some(KeyState::Processing | KeyState::ProcessingDirty { .. })
        )
    }

    #[cfg(test)]
    pub(crate) fn timer_running(&self) -> bool {
        self.inner.delayed.timer_running()
    }
}

impl<K: QueueKey> Inner<K> {
    fn with_metrics(&self, f: impl FnOnce(&dyn QueueMetrics)) {
        if let Some(metrics) = &self.metrics {
            f(metrics.as_ref());
        }
    }

    /// Busy-waits `wait` on the queue's clock (short waits only: see [`SPIN_UNTIL_DUE`]); returns
    /// early when the queue shuts down. It does not look at the ready queue (its lock is what the
    /// other getters and the adders need); a key added meanwhile is taken right after.
    fn spin_for(&self, wait: Duration) {
        let until = self.clock.now() + wait;
        while self.clock.now() < until && !self.shutting_down.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    }

    /// Wakes one waiting getter, if there is one. Call after pushing to the ready queue.
    fn wake_one(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.ready_signal.notify_one();
        }
    }

    /// True (and the add counted as dropped) if the queue is shutting down.
    fn refuse_if_shutting_down(&self) -> bool {
        let refused = self.shutting_down.load(Ordering::SeqCst);
        if refused {
            self.dropped_adds.fetch_add(1, Ordering::Relaxed);
        }
        refused
    }

    /// The add rule itself (see [`WorkQueue::add`]).
    fn enqueue(&self, key: K, priority: i32) {
        let hash = self.keys.hash(&key);
        match self.keys.add(&key, hash, priority, self.stamps.now()) {
            AddOutcome::Enqueue { ticket, raised } => {
                pipeline_event!(stage = "queue", op = "add", instance = %self.name, key = ?key, state = "queued", priority = priority as i64, depth = self.ready.lock().len() as u64 + u64::from(!raised));
                let entry = Entry { key, hash, ticket };
                self.ready.lock().push(entry, priority, raised);
                if !raised {
                    self.with_metrics(|m| m.added());
                    self.wake_one();
                }
            }
            AddOutcome::MarkedDirty { newly_dirty } => {
                pipeline_event!(stage = "queue", op = "add", instance = %self.name, key = ?key, state = "processing_dirty", priority = priority as i64);
                if newly_dirty {
                    self.with_metrics(|m| m.added());
                }
            }
            AddOutcome::AlreadyQueued => {
                pipeline_event!(stage = "queue", op = "add", instance = %self.name, key = ?key, state = "queued", deduplicated = true, priority = priority as i64);
            }
        }
    }

    /// Takes the next ready key, if any, moving it to `Processing`.
    fn take(&self) -> Option<K> {
        let mut last_was_stale = false;
        loop {
            let (entry, after) = {
                let mut ready = self.ready.lock();
                if last_was_stale {
                    ready.stale_popped();
                }
                let entry = ready.pop();
                (entry, ready.peek().map(|next| next.hash))
            };
            let entry = entry?;
            // Start loading the next key's bucket now: by the time a getter claims it (after this
            // key's `done`, typically), it is in the cache.
            if let Some(after) = after {
                self.keys.prefetch(after);
            }
            let now = self.stamps.now();
            match self.keys.claim(&entry.key, entry.hash, entry.ticket, now) {
                Some(queued_at) => {
                    pipeline_event!(stage = "queue", op = "get", instance = %self.name, key = ?entry.key, state = "processing", depth = self.ready.lock().len() as u64);
                    self.with_metrics(|m| {
                        m.taken(self.stamps.between(queued_at, now).unwrap_or_default())
                    });
                    return Some(entry.key);
                }
                None => last_was_stale = true,
            }
        }
    }

    /// Adds delayed keys whose time has come; true if there were any. Lets an idle getter deliver
    /// them without waiting for the timer thread to wake up.
    fn promote_due(&self) -> bool {
        let mut due = Vec::new();
        self.delayed.take_due(&mut due);
        let promoted = !due.is_empty();
        let taken = due.len();
        self.deliver(&mut due);
        self.delayed.delivered(taken);
        promoted
    }
}

impl<K: QueueKey> Deliver<K> for Inner<K> {
    fn deliver(&self, due: &mut Vec<(K, i32)>) {
        for (key, priority) in due.drain(..) {
            pipeline_event!(stage = "delay", op = "due", instance = %self.name, key = ?key, state = "gone");
            if !self.refuse_if_shutting_down() {
                self.enqueue(key, priority);
            }
        }
    }

    fn tick(&self) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let now = self.stamps.now();
        let (mut total, mut longest) = (Duration::ZERO, Duration::ZERO);
        self.keys.for_each_processing(|started_at| {
            let running = self.stamps.between(started_at, now).unwrap_or_default();
            total += running;
            longest = longest.max(running);
        });
        metrics.unfinished(total, longest);
    }
}

/// Counts a getter in `Inner::sleepers` for as long as it lives (also if the `get` future is dropped).
struct Sleeping<'a>(&'a AtomicUsize);

impl<'a> Sleeping<'a> {
    fn new(sleepers: &'a AtomicUsize) -> Self {
        sleepers.fetch_add(1, Ordering::SeqCst);
        Sleeping(sleepers)
    }
}

impl Drop for Sleeping<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<K: QueueKey> Drop for Inner<K> {
    fn drop(&mut self) {
        self.delayed.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_until(mut done: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn next_due_in_is_the_wait_for_the_earliest_delayed_key() {
        let q: WorkQueue<u32> = WorkQueue::new();
        assert_eq!(q.inner.delayed.next_due_in(), None);
        q.add_after(1, Duration::from_secs(60));
        q.add_after(2, Duration::from_secs(30));
        let wait = q.inner.delayed.next_due_in().unwrap_or_default();
        assert!(
            wait <= Duration::from_secs(30) && wait > Duration::from_secs(29),
            "{wait:?}"
        );
        q.shut_down();
        assert_eq!(q.inner.delayed.next_due_in(), None);
    }

    #[test]
    fn get_blocking_hands_out_a_key_due_within_the_spin_window() {
        let q: WorkQueue<u32> = WorkQueue::new();
        q.add_after(7, SPIN_UNTIL_DUE / 2);
        assert_eq!(q.get_blocking(), Some(7));
        q.done(&7);
        assert!(q.is_empty() && q.delayed_len() == 0);
    }

    #[test]
    fn in_virtual_time_a_delayed_key_comes_back_on_the_runtimes_clock() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let real = std::time::Instant::now();
        let (key, waited) = runtime.block_on(async {
            let q: WorkQueue<u32> = WorkQueue::builder().virtual_time(true).build();
            let start = tokio::time::Instant::now();
            q.add_after(2, Duration::from_secs(3600));
            q.add_after(1, Duration::from_secs(60));
            let first = q.get().await;
            (first, start.elapsed())
        });
        assert_eq!(key, Some(1), "the earlier due time first");
        assert!(
            waited >= Duration::from_secs(60),
            "{waited:?} of virtual time"
        );
        assert!(
            waited < Duration::from_secs(3600),
            "{waited:?} of virtual time"
        );
        assert!(
            real.elapsed() < Duration::from_secs(5),
            "a virtual minute took {:?}",
            real.elapsed()
        );
    }

    #[test]
    fn in_virtual_time_the_rate_limiters_bucket_refills_on_the_runtimes_clock() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        // How many of `keys` come back within 10 ms of virtual time after a rate-limited add.
        async fn quick_retries(q: &WorkQueue<u32>, keys: std::ops::Range<u32>) -> usize {
            let count = keys.len();
            let start = tokio::time::Instant::now();
            for key in keys {
                q.add_rate_limited(key);
            }
            let mut quick = 0;
            for _ in 0..count {
                q.get().await.unwrap();
                quick += usize::from(start.elapsed() <= Duration::from_millis(10));
            }
            quick
        }
        let (first, after_an_hour) = runtime.block_on(async {
            let q: WorkQueue<u32> = WorkQueue::builder().virtual_time(true).build();
            // The default limiter: 5 ms per key at first, and a bucket of 100 at 10 a second.
            let first = quick_retries(&q, 0..150).await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
            (first, quick_retries(&q, 1000..1150).await)
        });
        assert_eq!(first, 100, "the bucket's burst");
        assert_eq!(
            after_an_hour, 100,
            "a virtual hour refilled the bucket (on real time, it would still be owed 5 s)"
        );
    }

    #[test]
    fn no_timer_thread_until_a_key_is_delayed() {
        let q: WorkQueue<u32> = WorkQueue::new();
        q.add(1);
        assert!(!q.timer_running());
        q.add_after(2, Duration::from_secs(60));
        assert!(q.timer_running());
    }

    #[test]
    fn shut_down_stops_the_timer_and_drops_delayed_keys() {
        let q: WorkQueue<u32> = WorkQueue::new();
        for k in 0..100 {
            q.add_after(k, Duration::from_secs(60));
        }
        assert!(q.timer_running());
        q.shut_down();
        assert!(
            !q.timer_running(),
            "timer thread still running after shut_down"
        );
        assert_eq!(q.delayed_len(), 0);
    }

    #[test]
    fn dropping_the_last_handle_ends_the_timer_thread() {
        let q: WorkQueue<u32> = WorkQueue::new();
        q.add_after(1, Duration::from_secs(60));
        let delayed = Arc::clone(&q.inner.delayed);
        drop(q);
        // The thread holds only a weak reference to the queue, so it exits and frees its state.
        assert!(wait_until(|| Arc::strong_count(&delayed) == 1));
        assert!(!delayed.timer_running());
    }

    #[test]
    fn a_queue_with_metrics_ticks_and_stops_on_drop() {
        struct Nothing;
        impl QueueMetrics for Nothing {
            fn added(&self) {}
            fn taken(&self, _: Duration) {}
            fn done(&self, _: Duration) {}
            fn retried(&self) {}
            fn unfinished(&self, _: Duration, _: Duration) {}
        }
        let q: WorkQueue<u32> = WorkQueue::builder().metrics(Arc::new(Nothing)).build();
        assert!(q.timer_running());
        let delayed = Arc::clone(&q.inner.delayed);
        drop(q);
        assert!(wait_until(|| Arc::strong_count(&delayed) == 1));
    }
}
