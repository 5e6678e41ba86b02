//! Timestamps for the metrics, read only when metrics are configured.
//!
//! A [`Stamp`] is nanoseconds since the queue was built, in a `u64` (eight bytes per key instead of an
//! `Option<Instant>`'s sixteen). A queue without metrics never reads the clock: [`MetricsClock::now`]
//! returns [`Stamp::NONE`], which is what "the hot path pays nothing for metrics" means here.

use std::time::{Duration, Instant};

/// Nanoseconds since the queue's epoch, plus one; zero means "not recorded".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stamp(u64);

impl Stamp {
    pub(crate) const NONE: Stamp = Stamp(0);
}

/// Reads the clock for metrics, or does nothing when the queue has none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MetricsClock {
    epoch: Instant,
    enabled: bool,
}

impl MetricsClock {
    pub(crate) fn new(enabled: bool) -> Self {
        MetricsClock {
            epoch: Instant::now(),
            enabled,
        }
    }

    pub(crate) fn now(&self) -> Stamp {
        if !self.enabled {
            return Stamp::NONE;
        }
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
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
