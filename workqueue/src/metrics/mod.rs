//! Queue metrics: what a queue reports, and where it reports it.
//!
//! A queue calls the [`QueueMetrics`] trait at each event, with client-go's meanings:
//!
//! | event | client-go metric |
//! |---|---|
//! | [`QueueMetrics::added`]: a key became dirty (entered the queue, or was marked for re-queue while processing); not called for a deduplicated add | `adds_total` +1, `depth` +1 |
//! | [`QueueMetrics::taken`]: a worker got a key after it waited `waited` | `depth` −1, `queue_duration_seconds` |
//! | [`QueueMetrics::done`]: a worker finished a key after `worked` | `work_duration_seconds` |
//! | [`QueueMetrics::retried`]: `add_after` or `add_rate_limited` was called | `retries_total` +1 |
//! | [`QueueMetrics::unfinished`]: every 500 ms, the work in progress | `unfinished_work_seconds`, `longest_running_processor_seconds` |
//!
//! A queue built without metrics holds `None`: it never reads the clock for them, keeps no timestamps
//! and runs no periodic thread, so the hot path pays one well-predicted branch.
//! [`PrometheusMetrics`] is the implementation for Prometheus; implement the trait to send them
//! anywhere else.

mod prometheus;

use std::time::Duration;

pub use prometheus::PrometheusMetrics;

/// How often a queue with metrics reports its unfinished work (client-go: 500 ms).
pub const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// The sink for one queue's metrics. Implementations are shared between threads and must be cheap:
/// they are called on every add, get and done.
pub trait QueueMetrics: Send + Sync + 'static {
    /// A key became dirty: it entered the queue, or was added while being processed.
    fn added(&self);
    /// A worker took a key that had waited `waited` since it became dirty.
    fn taken(&self, waited: Duration);
    /// A worker called `done` after working on the key for `worked`.
    fn done(&self, worked: Duration);
    /// A key was added with a delay (`add_after` or `add_rate_limited`).
    fn retried(&self);
    /// Work in progress: the total time spent so far on keys not yet done, and the longest of them.
    fn unfinished(&self, total: Duration, longest: Duration);
}
