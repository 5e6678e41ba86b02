//! client-go's leader-election metric, in a Prometheus [`Registry`]:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `leader_election_master_status` | gauge | name | 1 while this process leads the lease `name`, else 0 |
//!
//! Register once per registry with [`LeaderMetrics::register`] and hand the same value to every
//! elector of the process ([`LeaderElectorBuilder::metrics`](super::LeaderElectorBuilder::metrics));
//! each labels its series with its Lease's name. A series is 0 from the moment its elector is built,
//! as in client-go.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

/// client-go's leader-election metric, `leader_election_master_status{name}`: a gauge, 1 while this
/// process leads the lease `name`, else 0 (0 from the moment its elector is built). Register once
/// per registry and hand the same value to every elector of the process. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct LeaderMetrics {
    status: Family<Labels, Gauge>,
}

impl LeaderMetrics {
    /// Creates the family and registers it in `registry`.
    pub fn register(registry: &mut Registry) -> LeaderMetrics {
        let metrics = LeaderMetrics::default();
        registry.register(
            "leader_election_master_status",
            "Whether this process leads the lease called name: 1 if it does, 0 if it stands by.",
            metrics.status.clone(),
        );
        metrics
    }

    /// Sets the series of lease `name`.
    pub(crate) fn set(&self, name: &str, leading: bool) {
        self.status
            .get_or_create(&vec![("name".to_string(), name.to_string())])
            .set(i64::from(leading));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_status_gauge_is_exposed_under_client_go_name() {
        let mut registry = Registry::default();
        let metrics = LeaderMetrics::register(&mut registry);
        metrics.set("lock", true);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains("leader_election_master_status{name=\"lock\"} 1"),
            "{text}"
        );
        metrics.set("lock", false);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(text.contains("leader_election_master_status{name=\"lock\"} 0"));
    }
}
