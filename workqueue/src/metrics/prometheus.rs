//! [`QueueMetrics`] for Prometheus, with client-go's metric names, meanings, buckets and the `name`
//! label that tells queues apart.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::QueueMetrics;

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Latency buckets as client-go's: 10 ns to 10 s, ten per decade step.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 10))
}

/// The workqueue metric families, registered once in a [`Registry`]; hand each queue its own
/// [`PrometheusMetrics::for_queue`].
///
/// ```
/// use ferrokube_workqueue::{PrometheusMetrics, WorkQueue};
/// let mut registry = prometheus_client::registry::Registry::default();
/// let metrics = PrometheusMetrics::register(&mut registry);
/// let queue: WorkQueue<String> = WorkQueue::builder()
///     .name("replicasets")
///     .metrics(metrics.for_queue("replicasets"))
///     .build();
/// queue.add("default/web".to_string());
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_adds_total{name="replicasets"} 1"#));
/// ```
#[derive(Clone)]
pub struct PrometheusMetrics {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    queue_duration: HistogramFamily,
    work_duration: HistogramFamily,
    unfinished: Family<Labels, Gauge<f64, AtomicU64>>,
    longest: Family<Labels, Gauge<f64, AtomicU64>>,
    retries: Family<Labels, Counter>,
}

impl PrometheusMetrics {
    /// Creates the families and registers them in `registry` as `workqueue_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = PrometheusMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(latency_histogram),
            work_duration: Family::new_with_constructor(latency_histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
        };
        registry.register(
            "workqueue_depth",
            "Keys waiting in the queue, including keys marked for re-queue while processing.",
            metrics.depth.clone(),
        );
        // prometheus-client appends `_total` to counters.
        registry.register(
            "workqueue_adds",
            "Adds that made a key dirty (deduplicated adds are not counted).",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "Seconds a key waited in the queue before a worker took it.",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "Seconds from a worker taking a key to its done.",
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "Seconds spent so far, summed over keys still being processed. A steady climb means \
             stuck workers; its slope is how many.",
            metrics.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "Seconds the oldest key still being processed has been running.",
            metrics.longest.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Keys added with a delay (add_after or add_rate_limited).",
            metrics.retries.clone(),
        );
        metrics
    }

    /// The metrics of the queue called `name` (the value of the `name` label).
    pub fn for_queue(&self, name: &str) -> Arc<dyn QueueMetrics> {
        let labels = vec![("name".to_string(), name.to_string())];
        Arc::new(NamedQueueMetrics {
            depth: self.depth.get_or_create(&labels).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone(),
            work_duration: self.work_duration.get_or_create(&labels).clone(),
            unfinished: self.unfinished.get_or_create(&labels).clone(),
            longest: self.longest.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
        })
    }
}

/// One queue's metrics, with the label already bound: the hot path touches no label map.
struct NamedQueueMetrics {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished: Gauge<f64, AtomicU64>,
    longest: Gauge<f64, AtomicU64>,
    retries: Counter,
}

impl QueueMetrics for NamedQueueMetrics {
    fn added(&self) {
        self.adds.inc();
        self.depth.inc();
    }

    fn taken(&self, waited: Duration) {
        self.depth.dec();
        self.queue_duration.observe(waited.as_secs_f64());
    }

    fn done(&self, worked: Duration) {
        self.work_duration.observe(worked.as_secs_f64());
    }

    fn retried(&self) {
        self.retries.inc();
    }

    fn unfinished(&self, total: Duration, longest: Duration) {
        self.unfinished.set(total.as_secs_f64());
        self.longest.set(longest.as_secs_f64());
    }
}
