//! What a controller reports, under controller-runtime's metric names, beside the workqueue's and
//! the informers' metrics.
//!
//! One [`Metrics::register`] call puts every family a controller process needs in a Prometheus
//! [`Registry`]: the reconcile metrics below, the workqueue's (`workqueue_*`, client-go's names) and
//! the informers' (for a factory: `SharedInformerFactory::with_metrics(metrics.informers())`). Hand
//! the same `Metrics` to every controller of the process; each labels its series with its name.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `controller_runtime_reconcile_total` | counter | controller, result | reconciles by result: `success`, `error`, `requeue` (rate-limited), `requeue_after` |
//! | `controller_runtime_reconcile_errors_total` | counter | controller | reconciles that returned an error (or panicked) |
//! | `controller_runtime_reconcile_panics_total` | counter | controller | reconciles that panicked |
//! | `controller_runtime_reconcile_time_seconds` | histogram | controller | time per reconcile (controller-runtime's buckets, 5 ms to 60 s) |
//! | `controller_runtime_max_concurrent_reconciles` | gauge | controller | the number of workers |
//! | `controller_runtime_active_workers` | gauge | controller | workers reconciling right now |
//! | `controller_mapper_keys_refused_total` | counter | controller, mapper | keys a source returned that cannot name a primary object (no namespace for a namespaced primary, or one for a cluster-scoped primary), refused before the queue ([`source`](super::source#keys-that-name-no-primary)) |
//! | `stale_sync_skips_total` | counter | controller | reconciles skipped because a cache had not caught up with the controller's own write for the key ([`consistency`](crate::freshness::consistency)) |

use std::sync::Arc;
use std::time::Duration;

use ferrokube_informer::{InformerMetrics, PrometheusInformerMetrics};
use ferrokube_workqueue::{PrometheusMetrics, QueueMetrics};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// controller-runtime's `reconcile_time_seconds` buckets.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

/// How one reconcile ended, the `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    Error,
    Requeue,
    RequeueAfter,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Error => "error",
            Outcome::Requeue => "requeue",
            Outcome::RequeueAfter => "requeue_after",
        }
    }
}

/// The metric families of a controller process. Cheap to clone; see the [module docs](self).
#[derive(Clone)]
pub struct Metrics {
    reconciles: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    panics: Family<Labels, Counter>,
    time: HistogramFamily,
    max_concurrent: Family<Labels, Gauge>,
    active: Family<Labels, Gauge>,
    stale_skips: Family<Labels, Counter>,
    mapper_refusals: Family<Labels, Counter>,
    queues: PrometheusMetrics,
    informers: PrometheusInformerMetrics,
}

impl Metrics {
    /// Creates the controller, workqueue and informer families and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            reconciles: Family::default(),
            errors: Family::default(),
            panics: Family::default(),
            time: Family::new_with_constructor(reconcile_histogram),
            max_concurrent: Family::default(),
            active: Family::default(),
            stale_skips: Family::default(),
            mapper_refusals: Family::default(),
            queues: PrometheusMetrics::register(registry),
            informers: PrometheusInformerMetrics::register(registry),
        };
        // prometheus-client appends `_total` to counters.
        registry.register(
            "controller_runtime_reconcile",
            "Reconciles per controller and result.",
            metrics.reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Reconciles that returned an error or panicked, per controller.",
            metrics.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Reconciles that panicked, per controller.",
            metrics.panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Seconds per reconcile, per controller.",
            metrics.time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Workers of each controller.",
            metrics.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Workers reconciling right now, per controller.",
            metrics.active.clone(),
        );
        registry.register(
            "stale_sync_skips",
            "Reconciles skipped because an informer had not yet caught up with the controller's \
             own last write for the key, per controller.",
            metrics.stale_skips.clone(),
        );
        registry.register(
            "controller_mapper_keys_refused",
            "Keys a source returned that cannot name a primary object (a missing or extra \
             namespace), refused before the queue, per controller and source.",
            metrics.mapper_refusals.clone(),
        );
        metrics
    }

    /// The counter of keys refused from the source `mapper` of controller `controller`.
    pub(crate) fn mapper_refused(&self, controller: &str, mapper: &str) -> Counter {
        let labels = vec![
            ("controller".to_string(), controller.to_string()),
            ("mapper".to_string(), mapper.to_string()),
        ];
        self.mapper_refusals.get_or_create(&labels).clone()
    }

    /// The informer metrics, for `SharedInformerFactory::with_metrics`.
    pub fn informers(&self) -> impl Fn(&str) -> Arc<dyn InformerMetrics> + Send + Sync + 'static {
        let informers = self.informers.clone();
        move |name| informers.for_informer(name)
    }

    /// The workqueue metrics of the queue called `name`.
    pub(crate) fn queue(&self, name: &str) -> Arc<dyn QueueMetrics> {
        self.queues.for_queue(name)
    }

    /// The series of one controller, with its label bound.
    pub(crate) fn for_controller(&self, name: &str) -> ControllerMetrics {
        let labels = vec![("controller".to_string(), name.to_string())];
        let result = |outcome: Outcome| {
            let mut labels = labels.clone();
            labels.push(("result".to_string(), outcome.label().to_string()));
            self.reconciles.get_or_create(&labels).clone()
        };
        ControllerMetrics {
            success: result(Outcome::Success),
            error: result(Outcome::Error),
            requeue: result(Outcome::Requeue),
            requeue_after: result(Outcome::RequeueAfter),
            errors: self.errors.get_or_create(&labels).clone(),
            panics: self.panics.get_or_create(&labels).clone(),
            time: self.time.get_or_create(&labels).clone(),
            max_concurrent: self.max_concurrent.get_or_create(&labels).clone(),
            active: self.active.get_or_create(&labels).clone(),
            stale_skips: self.stale_skips.get_or_create(&labels).clone(),
        }
    }
}

/// One controller's series, labels bound once so the hot path touches no label map.
#[derive(Clone)]
pub(crate) struct ControllerMetrics {
    success: Counter,
    error: Counter,
    requeue: Counter,
    requeue_after: Counter,
    errors: Counter,
    panics: Counter,
    time: Histogram,
    pub(crate) max_concurrent: Gauge,
    pub(crate) active: Gauge,
    stale_skips: Counter,
}

impl ControllerMetrics {
    /// A reconcile was skipped: a cache was older than the controller's own write.
    pub(crate) fn stale_skip(&self) {
        self.stale_skips.inc();
    }

    pub(crate) fn reconciled(&self, outcome: Outcome, took: Duration, panicked: bool) {
        match outcome {
            Outcome::Success => self.success.inc(),
            Outcome::Error => {
                self.errors.inc();
                self.error.inc()
            }
            Outcome::Requeue => self.requeue.inc(),
            Outcome::RequeueAfter => self.requeue_after.inc(),
        };
        if panicked {
            self.panics.inc();
        }
        self.time.observe(took.as_secs_f64());
    }
}
