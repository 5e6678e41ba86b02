//! Delayed keys: `add_after(key, d)` parks a key here until `d` has passed, then adds it.
//!
//! ```text
//!   add_after ──▶ waiting: key → (due, seq, priority)      one entry per key: the earliest due time wins
//!                 heap:    (due, seq, key), earliest first  an entry whose seq is not the key's is stale
//!                      │
//!                      ├── timer thread: sleeps until the earliest due time, then adds every due key
//!                      └── idle getters: a `get` that finds nothing ready adds due keys itself
//! ```
//!
//! Unlike client-go, adders do not send into a channel that the timer must drain before it can release
//! due keys: `add_after` takes the lock, pushes, and wakes the timer only if the new key is due before
//! the timer meant to wake. So a burst of adds never holds back delivery of keys already due.
//!
//! The timer is one OS thread per queue, started by the first delayed add (a queue that never delays
//! never has one). It sleeps on a condition variable with a deadline, which on Linux is precise to tens
//! of microseconds; tokio's timer wheel has millisecond granularity, which would add up to a millisecond
//! of lateness to every delayed key. The thread holds only a weak reference to the queue, and exits when
//! the queue shuts down or is dropped, after which nothing it held is left.
//!
//! Due times, deadlines and the periodic tick are all counted on the queue's clock
//! (`crate::clock::QueueClock`), in nanoseconds since the queue was built.
//!
//! **Virtual time** (`WorkQueueBuilder::virtual_time`): for a run on a paused tokio clock
//! (`ferrokube-explore`), the queue's clock is the runtime's and the timer is a task on the
//! runtime instead of an OS thread, so a delayed key (and a metrics tick) comes back when the
//! runtime's virtual time reaches it, in step with every other timer of the run.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::clock::QueueClock;
use crate::probe_table::{Probe, ProbeTable};

/// Nanoseconds since the queue's epoch, on its clock ([`DelayedKeys::clock`]).
type Nanos = u64;

/// `next_due` when nothing is waiting.
const NOTHING_DUE: Nanos = Nanos::MAX;

/// What the timer thread calls to hand keys back to the queue.
pub(crate) trait Deliver<K>: Send + Sync + 'static {
    /// Adds every key in `due` (draining it) at its priority.
    fn deliver(&self, due: &mut Vec<(K, i32)>);
    /// Called about every `tick` (see [`DelayedKeys::new`]), for periodic metrics.
    fn tick(&self);
}

#[derive(Debug, Clone, Copy)]
struct Waiting {
    due: Nanos,
    seq: u64,
    priority: i32,
}

/// A heap entry, ordered by `(due, seq)` alone: keys need not be ordered, and `seq` is unique.
struct HeapEntry<K> {
    due: Nanos,
    seq: u64,
    /// The key's hash in `waiting`, so that popping does not hash the key again.
    hash: u64,
    key: K,
}

impl<K> PartialEq for HeapEntry<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl<K> Eq for HeapEntry<K> {}
impl<K> PartialOrd for HeapEntry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for HeapEntry<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// The timer thread's life, as a state machine.
enum Timer {
    /// No thread yet: no key has been delayed and no periodic tick was asked for.
    NotStarted,
    /// The thread runs. `wakes_at` is when it will next look at the heap: `0` while it is awake and
    /// working (it will look again before sleeping), `NOTHING_DUE` while it sleeps with no deadline.
    Running {
        wakes_at: Nanos,
        thread: Option<JoinHandle<()>>,
    },
    /// The queue shut down: the thread exits (or never starts) and nothing is delayed any more.
    Stopped,
}

struct State<K> {
    heap: BinaryHeap<Reverse<HeapEntry<K>>>,
    /// Invariant: every key here has exactly one heap entry with its `seq` (its live entry).
    waiting: ProbeTable<K, Waiting>,
    next_seq: u64,
    timer: Timer,
}

pub(crate) struct DelayedKeys<K> {
    state: Mutex<State<K>>,
    timer_wake: Condvar,
    /// Wakes the timer task in virtual time (the thread waits on `timer_wake`).
    task_wake: tokio::sync::Notify,
    /// Earliest due time in the heap (`NOTHING_DUE` if empty), readable without the lock so that a
    /// getter can tell in one load that there is nothing to promote.
    next_due: AtomicU64,
    /// The queue's clock: real time, or the tokio runtime's (then the timer is a task).
    clock: QueueClock,
    hasher: foldhash::fast::RandomState,
    /// If set, the timer thread also wakes this often to call [`Deliver::tick`].
    tick: Option<Duration>,
    /// Name for the timer thread.
    thread_name: String,
    /// Keys taken out of `waiting` as due and not yet handed to [`Deliver::deliver`]'s end: raised
    /// under the state lock in the same step that removes them, lowered by [`delivered`] once they
    /// are in the ready queue (or refused). [`len`] counts them, so a key is never in neither
    /// place for an observer (`delayed_len() == 0 && is_empty()` while it was on its way).
    ///
    /// [`delivered`]: DelayedKeys::delivered
    /// [`len`]: DelayedKeys::len
    in_transit: AtomicUsize,
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> DelayedKeys<K> {
    pub(crate) fn new(thread_name: String, tick: Option<Duration>, clock: QueueClock) -> Self {
        DelayedKeys {
            state: Mutex::new(State {
                heap: BinaryHeap::new(),
                waiting: ProbeTable::new(),
                next_seq: 0,
                timer: Timer::NotStarted,
            }),
            timer_wake: Condvar::new(),
            task_wake: tokio::sync::Notify::new(),
            in_transit: AtomicUsize::new(0),
            next_due: AtomicU64::new(NOTHING_DUE),
            clock,
            hasher: foldhash::fast::RandomState::default(),
            tick,
            thread_name,
        }
    }

    fn now(&self) -> Nanos {
        Nanos::try_from(self.clock.since_epoch().as_nanos()).unwrap_or(NOTHING_DUE - 1)
    }

    /// When the timer must next look: the earlier of the next due time and the next tick
    /// (`None`: only when woken).
    fn deadline(next_due: Nanos, next_tick: Option<Nanos>) -> Option<Nanos> {
        (next_due != NOTHING_DUE)
            .then_some(next_due)
            .into_iter()
            .chain(next_tick)
            .min()
    }

    /// The next tick after `now`, if ticking was asked for.
    fn next_tick(&self, now: Nanos) -> Option<Nanos> {
        self.tick
            .map(|tick| now.saturating_add(Nanos::try_from(tick.as_nanos()).unwrap_or(NOTHING_DUE)))
    }

    /// Parks `key` until `delay` has passed. If it is already waiting, it keeps the earlier due time and
    /// the higher priority. Returns false (and does nothing) once the timer has stopped.
    pub(crate) fn insert<D: Deliver<K>>(
        self: &Arc<Self>,
        key: K,
        delay: Duration,
        priority: i32,
        target: &Weak<D>,
    ) -> bool {
        let due = self
            .now()
            .saturating_add(Nanos::try_from(delay.as_nanos()).unwrap_or(NOTHING_DUE));
        let hash = self.hasher.hash_one(&key);
        let mut state = self.state.lock();
        let state = &mut *state;
        if matches!(state.timer, Timer::Stopped) {
            return false;
        }
        state.waiting.reserve_one();
        let seq = state.next_seq + 1;
        match state.waiting.find(hash, |k| *k == key) {
            Probe::Found(at) => {
                let Some(w) = state.waiting.value_mut(at) else {
                    return true;
                };
                w.priority = w.priority.max(priority);
                if w.due <= due {
                    return true;
                }
                w.due = due;
                w.seq = seq;
            }
            Probe::Vacant(at) => {
                let waiting = Waiting { due, seq, priority };
                state.waiting.insert(at, hash, key.clone(), waiting);
            }
        }
        state.next_seq = seq;
        state.heap.push(Reverse(HeapEntry {
            due,
            seq,
            hash,
            key,
        }));
        if due < self.next_due.load(Ordering::Relaxed) {
            self.next_due.store(due, Ordering::Release);
        }
        self.wake_timer_for(state, due, target);
        true
    }

    /// Makes sure the timer thread will look at the heap no later than `due`.
    fn wake_timer_for<D: Deliver<K>>(
        self: &Arc<Self>,
        state: &mut State<K>,
        due: Nanos,
        target: &Weak<D>,
    ) {
        match &mut state.timer {
            Timer::Running { wakes_at, .. } => {
                if due < *wakes_at {
                    *wakes_at = 0;
                    self.timer_wake.notify_one();
                    self.task_wake.notify_one();
                }
            }
            Timer::NotStarted => self.start_timer(state, target),
            Timer::Stopped => {}
        }
    }

    fn start_timer<D: Deliver<K>>(self: &Arc<Self>, state: &mut State<K>, target: &Weak<D>) {
        let me = Arc::clone(self);
        let target = target.clone();
        if self.clock.is_runtime() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(me.run_timer_task(target));
                    state.timer = Timer::Running {
                        wakes_at: 0,
                        thread: None,
                    };
                }
                // Idle getters still promote due keys.
                Err(error) => tracing::error!(
                    %error,
                    "workqueue: virtual time, but no tokio runtime to run the delay timer on"
                ),
            }
            return;
        }
        let spawned = std::thread::Builder::new()
            .name(self.thread_name.clone())
            .spawn(move || me.run_timer(&target));
        match spawned {
            Ok(thread) => {
                state.timer = Timer::Running {
                    wakes_at: 0,
                    thread: Some(thread),
                }
            }
            // Without a timer thread, idle getters still promote due keys; say why it is slower.
            Err(error) => {
                tracing::error!(%error, "workqueue: could not start the delay timer thread")
            }
        }
    }

    /// Starts the timer thread now if a periodic tick was asked for (metrics), so ticks come even if
    /// no key is ever delayed.
    pub(crate) fn start_ticking<D: Deliver<K>>(self: &Arc<Self>, target: &Weak<D>) {
        if self.tick.is_none() {
            return;
        }
        let mut state = self.state.lock();
        if matches!(state.timer, Timer::NotStarted) {
            self.start_timer(&mut state, target);
        }
    }

    /// Moves every key due at `now` into `out`, skipping stale heap entries, and updates `next_due`.
    fn take_due_locked(&self, state: &mut State<K>, now: Nanos, out: &mut Vec<(K, i32)>) {
        while let Some(Reverse(top)) = state.heap.peek() {
            if top.due > now {
                break;
            }
            let Some(Reverse(entry)) = state.heap.pop() else {
                break;
            };
            let Probe::Found(at) = state.waiting.find(entry.hash, |k| *k == entry.key) else {
                continue;
            };
            if let Some(&Waiting { seq, priority, .. }) = state.waiting.value(at) {
                if seq == entry.seq {
                    state.waiting.remove(at);
                    self.in_transit.fetch_add(1, Ordering::SeqCst);
                    out.push((entry.key, priority));
                }
            }
        }
        let next = state.heap.peek().map_or(NOTHING_DUE, |Reverse(e)| e.due);
        self.next_due.store(next, Ordering::Release);
    }

    /// For idle getters: moves every due key into `out`. One atomic load when nothing is due.
    pub(crate) fn take_due(&self, out: &mut Vec<(K, i32)>) {
        let next = self.next_due.load(Ordering::Acquire);
        if next == NOTHING_DUE || next > self.now() {
            return;
        }
        let mut state = self.state.lock();
        let now = self.now();
        self.take_due_locked(&mut state, now, out);
    }

    /// How long until the earliest waiting key is due (zero if it is due already); `None` when no
    /// key waits. One atomic load and a clock read; no lock.
    pub(crate) fn next_due_in(&self) -> Option<Duration> {
        let next = self.next_due.load(Ordering::Acquire);
        (next != NOTHING_DUE).then(|| Duration::from_nanos(next.saturating_sub(self.now())))
    }

    /// Number of keys waiting for their delay to pass, or due and on their way to the ready queue.
    pub(crate) fn len(&self) -> usize {
        let state = self.state.lock();
        state.waiting.len() + self.in_transit.load(Ordering::SeqCst)
    }

    /// `count` keys taken by [`take_due`](Self::take_due) have been delivered (or refused).
    pub(crate) fn delivered(&self, count: usize) {
        self.in_transit.fetch_sub(count, Ordering::SeqCst);
    }

    /// Stops the timer for good and drops every waiting key. Joins the thread unless called from it.
    pub(crate) fn stop(&self) {
        let thread = {
            let mut state = self.state.lock();
            state.heap.clear();
            state.waiting = ProbeTable::new();
            self.next_due.store(NOTHING_DUE, Ordering::Release);
            match std::mem::replace(&mut state.timer, Timer::Stopped) {
                Timer::Running { thread, .. } => thread,
                Timer::NotStarted | Timer::Stopped => None,
            }
        };
        self.timer_wake.notify_all();
        self.task_wake.notify_one();
        if let Some(thread) = thread {
            if thread.thread().id() != std::thread::current().id() && thread.join().is_err() {
                tracing::error!("workqueue: the delay timer thread panicked");
            }
        }
    }

    /// Whether the timer thread is running (for tests of shutdown).
    #[cfg(test)]
    pub(crate) fn timer_running(&self) -> bool {
        match &self.state.lock().timer {
            Timer::Running { thread, .. } => thread.as_ref().is_some_and(|t| !t.is_finished()),
            Timer::NotStarted | Timer::Stopped => false,
        }
    }

    /// The timer thread's body: sleep until something is due (or a tick), deliver, repeat.
    /// Runs only on real time ([`start_timer`](Self::start_timer)), so the queue's clock and the
    /// condition variable's deadline are the same clock.
    fn run_timer<D: Deliver<K>>(&self, target: &Weak<D>) {
        let mut due = Vec::new();
        let mut next_tick = self.next_tick(self.now());
        loop {
            let tick_now = {
                let mut state = self.state.lock();
                loop {
                    if matches!(state.timer, Timer::Stopped) {
                        return;
                    }
                    let now = self.now();
                    self.take_due_locked(&mut state, now, &mut due);
                    let tick_now = next_tick.is_some_and(|t| now >= t);
                    if !due.is_empty() || tick_now {
                        set_wakes_at(&mut state, 0);
                        break tick_now;
                    }
                    let next = self.next_due.load(Ordering::Acquire);
                    set_wakes_at(&mut state, next);
                    match Self::deadline(next, next_tick) {
                        Some(deadline) => {
                            let deadline = self.clock.at(Duration::from_nanos(deadline));
                            self.timer_wake.wait_until(&mut state, deadline);
                        }
                        None => self.timer_wake.wait(&mut state),
                    }
                    set_wakes_at(&mut state, 0);
                }
            };
            let Some(target) = target.upgrade() else {
                self.delivered(due.len());
                return;
            };
            let taken = due.len();
            target.deliver(&mut due);
            self.delivered(taken);
            if tick_now {
                target.tick();
                next_tick = self.next_tick(self.now());
            }
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> DelayedKeys<K> {
    /// The timer in virtual time: [`run_timer`](Self::run_timer) as a task on the runtime,
    /// sleeping on tokio's clock (the queue's clock, see [`QueueClock`]) instead of a condition
    /// variable.
    async fn run_timer_task<D: Deliver<K>>(self: Arc<Self>, target: Weak<D>) {
        let mut due = Vec::new();
        let mut next_tick = self.next_tick(self.now());
        loop {
            // `None`: work to do now; `Some(deadline)`: sleep until then (`None` inside: until woken).
            let (tick_now, sleep) = {
                let mut state = self.state.lock();
                if matches!(state.timer, Timer::Stopped) {
                    return;
                }
                let now = self.now();
                self.take_due_locked(&mut state, now, &mut due);
                let tick_now = next_tick.is_some_and(|t| now >= t);
                if !due.is_empty() || tick_now {
                    set_wakes_at(&mut state, 0);
                    (tick_now, None)
                } else {
                    let next = self.next_due.load(Ordering::Acquire);
                    set_wakes_at(&mut state, next);
                    (false, Some(Self::deadline(next, next_tick)))
                }
            };
            if let Some(deadline) = sleep {
                let woken = self.task_wake.notified();
                match deadline {
                    Some(deadline) => {
                        let deadline = self.clock.at(Duration::from_nanos(deadline));
                        tokio::select! {
                            // Either way the loop looks at the heap again; a wake-up first, so
                            // that a key added due earlier is not held to the old deadline's poll.
                            biased;
                            () = woken => {}
                            () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {}
                        }
                    }
                    None => woken.await,
                }
                set_wakes_at(&mut self.state.lock(), 0);
                continue;
            }
            let Some(target) = target.upgrade() else {
                self.delivered(due.len());
                return;
            };
            let taken = due.len();
            target.deliver(&mut due);
            self.delivered(taken);
            if tick_now {
                target.tick();
                next_tick = self.next_tick(self.now());
            }
        }
    }
}

fn set_wakes_at<K>(state: &mut State<K>, at: Nanos) {
    if let Timer::Running { wakes_at, .. } = &mut state.timer {
        *wakes_at = at;
    }
}
