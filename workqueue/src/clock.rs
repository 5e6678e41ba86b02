//! The queue's clock, and the timestamps the metrics take from it.
//!
//! Every time a queue reads comes from one [`QueueClock`], chosen when the queue is built:
//!
//! ```text
//!                      ┌──▶ delay: due times of delayed keys, the timer's deadlines and ticks
//!  QueueClock ─────────┼──▶ rate limiter: the `now` it is given (`RateLimiter::when_at`)
//!  (real or runtime)   └──▶ metrics: MetricsClock stamps (how long a key waited, ran)
//! ```
//!
//! **Real** (the default) is `std::time::Instant`. **Runtime** (`WorkQueueBuilder::virtual_time`)
//! is `tokio::time::Instant`: the tokio runtime's clock, which is real time too unless the runtime's
//! clock is paused (tokio's `test-util`, `ferrokube-explore`); then it is virtual time, which moves
//! only when the runtime is idle, straight to its next timer. A queue must not mix the two: a due
//! time counted on virtual time and waited for on real time would come back when the machine got
//! round to it, not when the run's clock said.
//!
//! **Reading the runtime's clock off the runtime.** Checked for tokio 1.54.1 (Cargo.lock):
//! `tokio::time::Instant::now()` is `std::time::Instant::now()` without `test-util`; with it, it
//! reads the clock of the runtime the calling thread is in, and on a thread in no runtime it falls
//! back to `std::time::Instant::now()`: it does not panic (it would only while the thread's
//! thread-locals are being destroyed). So a virtual-time queue touched from a plain thread (a
//! blocking getter, an informer handler's own thread) keeps working, but reads real time there;
//! a deterministic run does everything on the runtime's thread.
//!
//! A [`Stamp`] is nanoseconds since the queue was built, in a `u64` (eight bytes per key instead of an
//! `Option<Instant>`'s sixteen). A queue without metrics never reads the clock for them:
//! [`MetricsClock::now`] returns [`Stamp::NONE`], which is what "the hot path pays nothing for
//! metrics" means here. A queue with metrics on real time pays what it always did (one
//! `Instant::now`); on virtual time each reading takes the runtime clock's lock, which only a test
//! run pays.

use std::time::{Duration, Instant};

/// Where a queue reads the time: see the [module docs](self).
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueClock {
    /// When the queue was built, on its clock. A paused runtime's `tokio::time::Instant` is still a
    /// `std::time::Instant` inside (the runtime's start plus the virtual time since), so both
    /// clocks are kept as one type; only `source` says which one to read.
    epoch: Instant,
    source: Source,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `std::time::Instant::now()`.
    Real,
    /// `tokio::time::Instant::now()`: the runtime's clock (see the module docs).
    Runtime,
}

impl QueueClock {
    /// Real time, or (`virtual_time`) the tokio runtime's clock.
    pub(crate) fn new(virtual_time: bool) -> QueueClock {
        let source = if virtual_time {
            Source::Runtime
        } else {
            Source::Real
        };
        QueueClock {
            epoch: source.now(),
            source,
        }
    }

    /// Whether this is the runtime's clock (then the delay timer is a task on the runtime).
    pub(crate) fn is_runtime(&self) -> bool {
        self.source == Source::Runtime
    }

    /// The time now, on this clock. Compare it only with other readings of the same clock.
    pub(crate) fn now(&self) -> Instant {
        self.source.now()
    }

    /// Time since the queue was built.
    pub(crate) fn since_epoch(&self) -> Duration {
        self.now().saturating_duration_since(self.epoch)
    }

    /// The instant `since` after the queue was built (saturating far in the future).
    pub(crate) fn at(&self, since: Duration) -> Instant {
        self.epoch
            .checked_add(since)
            .unwrap_or_else(|| far_future(self.epoch))
    }
}

impl Source {
    fn now(self) -> Instant {
        match self {
            Source::Real => Instant::now(),
            Source::Runtime => tokio::time::Instant::now().into_std(),
        }
    }
}

/// About thirty years after `from`: "never" for a deadline, still representable on every platform.
fn far_future(from: Instant) -> Instant {
    from.checked_add(Duration::from_secs(86_400 * 365 * 30))
        .unwrap_or(from)
}

/// Nanoseconds since the queue's epoch, plus one; zero means "not recorded".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stamp(u64);

impl Stamp {
    pub(crate) const NONE: Stamp = Stamp(0);
}

/// Reads the queue's clock for metrics, or does nothing when the queue has none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MetricsClock {
    clock: QueueClock,
    enabled: bool,
}

impl MetricsClock {
    pub(crate) fn new(clock: QueueClock, enabled: bool) -> Self {
        MetricsClock { clock, enabled }
    }

    pub(crate) fn now(&self) -> Stamp {
        if !self.enabled {
            return Stamp::NONE;
        }
        let nanos = u64::try_from(self.clock.since_epoch().as_nanos()).unwrap_or(u64::MAX - 1);
        Stamp(nanos + 1)
    }

    /// Time from `then` to `now`; `None` if either was not recorded.
    pub(crate) fn between(&self, then: Stamp, now: Stamp) -> Option<Duration> {
        if then == Stamp::NONE || now == Stamp::NONE {
            return None;
        }
        Some(Duration::from_nanos(now.0.saturating_sub(then.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_clock_is_virtual_on_a_paused_runtime_and_real_off_it() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let clock = runtime.block_on(async {
            let clock = QueueClock::new(true);
            tokio::time::sleep(Duration::from_secs(3600)).await;
            let since = clock.since_epoch();
            assert!(since >= Duration::from_secs(3600), "{since:?}");
            assert!(since < Duration::from_secs(3601), "{since:?}");
            clock
        });
        // Off the runtime the same clock reads real time (tokio falls back, it does not panic):
        // the hour it saw on the runtime was virtual, so real time is behind it now.
        assert!(clock.since_epoch() < Duration::from_secs(3600));
        let real = QueueClock::new(false);
        assert!(!real.is_runtime());
        assert!(real.at(Duration::MAX) > real.now());
    }
}
