//! Informer metrics: what an informer reports, and a Prometheus implementation.
//!
//! The same facility as the workqueue's (`ferrokube_workqueue::metrics`): a trait the informer calls
//! at each event, and [`PrometheusInformerMetrics`] registering its families in the same
//! `prometheus_client` [`Registry`], so one `/metrics` endpoint shows queues and informers.
//!
//! | event | metric (label `name`, plus `type` / `handler`) |
//! |---|---|
//! | [`InformerMetrics::listed`] | `informer_lists_total`, and `informer_relists_total` for every list after the first |
//! | [`InformerMetrics::watch_opened`] | `informer_watch_restarts_total` for every watch after the first |
//! | [`InformerMetrics::event`] | `informer_watch_events_total{type}` |
//! | [`InformerMetrics::resource_version`] | `informer_last_resource_version` (what the reflector received) |
//! | [`InformerMetrics::store_resource_version`] | `store_resource_version` (what the store has applied: see [`Store::resource_version`](crate::Store::resource_version)) |
//! | [`InformerMetrics::cached`] | `informer_objects` |
//! | [`HandlerQueueMetrics::depth`] | `informer_handler_queue_depth{handler}` and `informer_handler_queue_peak_depth{handler}` |
//!
//! An informer built without metrics holds `None` and makes no calls.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The kind of a watch event, for [`InformerMetrics::event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
    Bookmark,
}

impl EventKind {
    fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
            EventKind::Bookmark => "BOOKMARK",
        }
    }
}

/// The sink for one informer's metrics. Called from the reflector, the processor and handler
/// threads, so implementations are shared and must be cheap.
pub trait InformerMetrics: Send + Sync + 'static {
    /// A list finished with `objects` objects; `relist` for every list after the first.
    fn listed(&self, objects: usize, relist: bool);
    /// A watch was opened; `restart` for every watch after the first.
    fn watch_opened(&self, restart: bool);
    /// The watch delivered an event.
    fn event(&self, kind: EventKind);
    /// The newest resourceVersion the reflector has seen.
    fn resource_version(&self, version: &str);
    /// The resourceVersion the store has caught up to (every change up to it applied). Default:
    /// ignored, so sinks written before it existed still compile.
    fn store_resource_version(&self, version: &str) {
        let _ = version;
    }
    /// Objects now in the store.
    fn cached(&self, objects: usize);
    /// The metrics of the buffer of handler `handler` (called once, when the handler is added).
    fn handler_queue(&self, handler: &str) -> Arc<dyn HandlerQueueMetrics>;
}

/// The sink for one handler's buffer, called on every push and pop.
pub trait HandlerQueueMetrics: Send + Sync + 'static {
    /// Notifications now waiting for the handler.
    fn depth(&self, depth: usize);
}

type Labels = Vec<(String, String)>;

/// The informer metric families, registered once; hand each informer its own
/// [`PrometheusInformerMetrics::for_informer`].
#[derive(Clone)]
pub struct PrometheusInformerMetrics {
    lists: Family<Labels, Counter>,
    relists: Family<Labels, Counter>,
    watch_restarts: Family<Labels, Counter>,
    events: Family<Labels, Counter>,
    resource_version: Family<Labels, Gauge>,
    store_resource_version: Family<Labels, Gauge>,
    objects: Family<Labels, Gauge>,
    handler_depth: Family<Labels, Gauge>,
    handler_peak: Family<Labels, Gauge>,
}

impl PrometheusInformerMetrics {
    /// Creates the families and registers them in `registry` as `informer_*`, and
    /// `store_resource_version`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = PrometheusInformerMetrics {
            lists: Family::default(),
            relists: Family::default(),
            watch_restarts: Family::default(),
            events: Family::default(),
            resource_version: Family::default(),
            store_resource_version: Family::default(),
            objects: Family::default(),
            handler_depth: Family::default(),
            handler_peak: Family::default(),
        };
        // prometheus-client appends `_total` to counters.
        registry.register("informer_lists", "Complete lists.", metrics.lists.clone());
        registry.register(
            "informer_relists",
            "Lists after the first (after a 410 or an error).",
            metrics.relists.clone(),
        );
        registry.register(
            "informer_watch_restarts",
            "Watches opened after the first one.",
            metrics.watch_restarts.clone(),
        );
        registry.register(
            "informer_watch_events",
            "Watch events received, by type.",
            metrics.events.clone(),
        );
        registry.register(
            "informer_last_resource_version",
            "The newest resourceVersion seen (when numeric, as etcd's are).",
            metrics.resource_version.clone(),
        );
        registry.register(
            "store_resource_version",
            "The resourceVersion the informer's store has caught up to: every change up to it \
             applied (when numeric, as etcd's are).",
            metrics.store_resource_version.clone(),
        );
        registry.register(
            "informer_objects",
            "Objects in the informer's store.",
            metrics.objects.clone(),
        );
        registry.register(
            "informer_handler_queue_depth",
            "Notifications waiting for a handler.",
            metrics.handler_depth.clone(),
        );
        registry.register(
            "informer_handler_queue_peak_depth",
            "The most notifications that ever waited for a handler.",
            metrics.handler_peak.clone(),
        );
        metrics
    }

    /// The metrics of the informer called `name` (the value of the `name` label).
    pub fn for_informer(&self, name: &str) -> Arc<dyn InformerMetrics> {
        let labels = vec![("name".to_string(), name.to_string())];
        Arc::new(NamedInformerMetrics {
            name: name.to_string(),
            lists: self.lists.get_or_create(&labels).clone(),
            relists: self.relists.get_or_create(&labels).clone(),
            watch_restarts: self.watch_restarts.get_or_create(&labels).clone(),
            resource_version: self.resource_version.get_or_create(&labels).clone(),
            store_resource_version: self.store_resource_version.get_or_create(&labels).clone(),
            objects: self.objects.get_or_create(&labels).clone(),
            events: [
                EventKind::Added,
                EventKind::Modified,
                EventKind::Deleted,
                EventKind::Bookmark,
            ]
            .map(|kind| {
                let labels = vec![
                    ("name".to_string(), name.to_string()),
                    ("type".to_string(), kind.as_str().to_string()),
                ];
                self.events.get_or_create(&labels).clone()
            }),
            families: self.clone(),
        })
    }
}

/// One informer's metrics with its label bound.
struct NamedInformerMetrics {
    name: String,
    lists: Counter,
    relists: Counter,
    watch_restarts: Counter,
    /// Indexed by `EventKind as usize`.
    events: [Counter; 4],
    resource_version: Gauge,
    store_resource_version: Gauge,
    objects: Gauge,
    families: PrometheusInformerMetrics,
}

impl InformerMetrics for NamedInformerMetrics {
    fn listed(&self, _objects: usize, relist: bool) {
        self.lists.inc();
        if relist {
            self.relists.inc();
        }
    }

    fn watch_opened(&self, restart: bool) {
        if restart {
            self.watch_restarts.inc();
        }
    }

    fn event(&self, kind: EventKind) {
        self.events[kind as usize].inc();
    }

    fn resource_version(&self, version: &str) {
        if let Ok(version) = version.parse::<i64>() {
            self.resource_version.set(version);
        }
    }

    fn store_resource_version(&self, version: &str) {
        if let Ok(version) = version.parse::<i64>() {
            self.store_resource_version.set(version);
        }
    }

    fn cached(&self, objects: usize) {
        self.objects.set(i64::try_from(objects).unwrap_or(i64::MAX));
    }

    fn handler_queue(&self, handler: &str) -> Arc<dyn HandlerQueueMetrics> {
        let labels = vec![
            ("name".to_string(), self.name.clone()),
            ("handler".to_string(), handler.to_string()),
        ];
        Arc::new(NamedHandlerQueueMetrics {
            depth: self.families.handler_depth.get_or_create(&labels).clone(),
            peak: self.families.handler_peak.get_or_create(&labels).clone(),
        })
    }
}

struct NamedHandlerQueueMetrics {
    depth: Gauge,
    peak: Gauge,
}

impl HandlerQueueMetrics for NamedHandlerQueueMetrics {
    fn depth(&self, depth: usize) {
        let depth = i64::try_from(depth).unwrap_or(i64::MAX);
        self.depth.set(depth);
        if self.peak.get() < depth {
            self.peak.set(depth);
        }
    }
}
