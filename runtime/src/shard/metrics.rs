//! The ring's metrics, in a Prometheus [`Registry`]:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `shard_objects` | gauge | ring, member | primary objects in this member's cache (its share) |
//! | `shard_members` | gauge | ring | live members, as the assigner sees them (0 where it is not the assigner) |
//! | `shard_assignments_total` | counter | ring, member | objects the assigner gave to `member` that had no member |
//! | `shard_moves_total` | counter | ring, member | objects the assigner moved to `member` from a dead or departed one |
//! | `shard_drains_total` | counter | ring, member | objects the assigner asked a live `member` to hand over |
//! | `shard_handovers_total` | counter | ring, member | objects `member` handed over (it stopped working on them first) |
//! | `shard_assignment_seconds` | histogram | ring | from the assigner first seeing an object without a member to its label being written |
//!
//! Register once per registry with [`ShardMetrics::register`] and give the value to the
//! [`ShardMember`](super::ShardMember) builder.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

/// See the [module docs](self). Cheap to clone.
#[derive(Clone, Debug)]
pub struct ShardMetrics {
    objects: Family<Labels, Gauge>,
    members: Family<Labels, Gauge>,
    assignments: Family<Labels, Counter>,
    moves: Family<Labels, Counter>,
    drains: Family<Labels, Counter>,
    handovers: Family<Labels, Counter>,
    assignment_seconds: Family<Labels, Histogram>,
}

impl Default for ShardMetrics {
    fn default() -> ShardMetrics {
        ShardMetrics {
            objects: Family::default(),
            members: Family::default(),
            assignments: Family::default(),
            moves: Family::default(),
            drains: Family::default(),
            handovers: Family::default(),
            // 1 ms to about 16 s.
            assignment_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 15))
            }),
        }
    }
}

fn ring_member(ring: &str, member: &str) -> Labels {
    vec![
        ("ring".to_string(), ring.to_string()),
        ("member".to_string(), member.to_string()),
    ]
}

impl ShardMetrics {
    /// Creates the families and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> ShardMetrics {
        let metrics = ShardMetrics::default();
        metrics.register_in(registry);
        metrics
    }

    /// Registers these families in `registry` (once per registry).
    pub fn register_in(&self, registry: &mut Registry) {
        let metrics = self;
        registry.register(
            "shard_objects",
            "Primary objects in this member's cache.",
            metrics.objects.clone(),
        );
        registry.register(
            "shard_members",
            "Live members of the ring as the assigner sees them.",
            metrics.members.clone(),
        );
        registry.register(
            "shard_assignments",
            "Objects without a member given to one.",
            metrics.assignments.clone(),
        );
        registry.register(
            "shard_moves",
            "Objects moved from a dead or departed member.",
            metrics.moves.clone(),
        );
        registry.register(
            "shard_drains",
            "Objects a live member was asked to hand over.",
            metrics.drains.clone(),
        );
        registry.register(
            "shard_handovers",
            "Objects this member handed over.",
            metrics.handovers.clone(),
        );
        registry.register(
            "shard_assignment_seconds",
            "From an object first seen without a member to its label written.",
            metrics.assignment_seconds.clone(),
        );
    }

    pub(crate) fn set_objects(&self, ring: &str, member: &str, count: usize) {
        self.objects
            .get_or_create(&ring_member(ring, member))
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    pub(crate) fn set_members(&self, ring: &str, count: usize) {
        self.members
            .get_or_create(&vec![("ring".to_string(), ring.to_string())])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    pub(crate) fn assigned(&self, ring: &str, member: &str, seconds: Option<f64>) {
        self.assignments
            .get_or_create(&ring_member(ring, member))
            .inc();
        if let Some(seconds) = seconds {
            self.assignment_seconds
                .get_or_create(&vec![("ring".to_string(), ring.to_string())])
                .observe(seconds);
        }
    }

    pub(crate) fn moved(&self, ring: &str, member: &str) {
        self.moves.get_or_create(&ring_member(ring, member)).inc();
    }

    pub(crate) fn drain_asked(&self, ring: &str, member: &str) {
        self.drains.get_or_create(&ring_member(ring, member)).inc();
    }

    pub(crate) fn handed_over(&self, ring: &str, member: &str) {
        self.handovers
            .get_or_create(&ring_member(ring, member))
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_metrics_are_exposed_by_ring_and_member() {
        let mut registry = Registry::default();
        let metrics = ShardMetrics::register(&mut registry);
        metrics.set_objects("rs", "a", 7);
        metrics.set_members("rs", 3);
        metrics.assigned("rs", "a", Some(0.004));
        metrics.moved("rs", "b");
        metrics.drain_asked("rs", "a");
        metrics.handed_over("rs", "a");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for line in [
            "shard_objects{ring=\"rs\",member=\"a\"} 7",
            "shard_members{ring=\"rs\"} 3",
            "shard_assignments_total{ring=\"rs\",member=\"a\"} 1",
            "shard_moves_total{ring=\"rs\",member=\"b\"} 1",
            "shard_drains_total{ring=\"rs\",member=\"a\"} 1",
            "shard_handovers_total{ring=\"rs\",member=\"a\"} 1",
            "shard_assignment_seconds_count{ring=\"rs\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
