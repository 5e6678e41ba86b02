//! Which pods go first when a ReplicaSet has too many: upstream's ranking, cheapest loss first.
//!
//! Pods are compared on these keys in order; the first that differs decides (upstream's
//! `ActivePodsWithRanks`):
//!
//! 1. not scheduled to a node, before scheduled;
//! 2. phase Pending, before Unknown, before Running;
//! 3. not ready, before ready;
//! 4. more pods of the same family on its node ("doubled up"), before fewer;
//! 5. both ready: ready more recently, before ready longer (a missing time counts as most recent);
//! 6. more container restarts, before fewer;
//! 7. created more recently, before created earlier (a missing time first).
//!
//! The "family" of key 4 is every pod controlled by a ReplicaSet that has the same controller as this
//! one (the ReplicaSets of one Deployment), so scaling one down also spreads the Deployment's pods.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::pod::{is_ready, ready_since};

/// The `count` pods of `pods` to delete first; `related` is the family for the per-node rank.
pub fn pods_to_delete(pods: &[Arc<Pod>], related: &[Arc<Pod>], count: usize) -> Vec<Arc<Pod>> {
    if count >= pods.len() {
        return pods.to_vec();
    }
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for pod in related.iter().filter(|pod| super::pod::is_active(pod)) {
        *on_node.entry(node_of(pod)).or_default() += 1;
    }
    let mut ranked: Vec<(usize, &Arc<Pod>)> = pods
        .iter()
        .map(|pod| (on_node.get(node_of(pod)).copied().unwrap_or(0), pod))
        .collect();
    ranked.sort_by(|(rank_a, a), (rank_b, b)| compare(a, *rank_a, b, *rank_b));
    ranked
        .into_iter()
        .take(count)
        .map(|(_, pod)| Arc::clone(pod))
        .collect()
}

/// `Less` means "delete `a` before `b`".
fn compare(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize) -> Ordering {
    let (node_a, node_b) = (node_of(a), node_of(b));
    if node_a != node_b && (node_a.is_empty() || node_b.is_empty()) {
        return node_b.is_empty().cmp(&node_a.is_empty());
    }
    phase_order(a)
        .cmp(&phase_order(b))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| rank_b.cmp(&rank_a))
        .then_with(|| match (ready_since(a), ready_since(b)) {
            (Some(since_a), Some(since_b)) => later_or_missing_first(since_a, since_b),
            _ => Ordering::Equal,
        })
        .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
        .then_with(|| {
            later_or_missing_first(
                a.metadata.creation_timestamp.as_ref(),
                b.metadata.creation_timestamp.as_ref(),
            )
        })
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or("")
}

/// Pending (or no phase) 0, Unknown 1, Running 2 (upstream's `podPhaseToOrdinal`).
fn phase_order(pod: &Pod) -> u8 {
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 0,
    }
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|statuses| statuses.iter().map(|c| c.restart_count).max())
        .unwrap_or(0)
}

/// Missing before present; then later before earlier (upstream's `afterOrZero`).
fn later_or_missing_first(a: Option<&Time>, b: Option<&Time>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.0.cmp(&a.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, extra: serde_json::Value) -> Arc<Pod> {
        let mut value = json!({
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        });
        merge(&mut value, extra);
        Arc::new(serde_json::from_value(value).expect("pod"))
    }

    fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
        if let (Some(base), serde_json::Value::Object(extra)) = (base.as_object_mut(), extra) {
            for (key, value) in extra {
                match base.get_mut(&key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value)
                    }
                    _ => {
                        base.insert(key, value);
                    }
                }
            }
        }
    }

    fn running(node: &str, ready_at: Option<&str>) -> serde_json::Value {
        let ready = match ready_at {
            Some(at) => json!({"type": "Ready", "status": "True", "lastTransitionTime": at}),
            None => json!({"type": "Ready", "status": "False"}),
        };
        json!({"spec": {"nodeName": node}, "status": {"phase": "Running", "conditions": [ready]}})
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or(""))
            .collect()
    }

    #[test]
    fn ranking_follows_upstream_order() {
        let pods = vec![
            pod("old-ready", running("n1", Some("2026-01-01T00:01:00Z"))),
            pod("unassigned", json!({"status": {"phase": "Pending"}})),
            pod(
                "assigned-pending",
                json!({"spec": {"nodeName": "n2"}, "status": {"phase": "Pending"}}),
            ),
            pod(
                "unknown",
                json!({"spec": {"nodeName": "n2"}, "status": {"phase": "Unknown"}}),
            ),
            pod("running-not-ready", running("n2", None)),
            pod(
                "recently-ready",
                running("n3", Some("2026-01-01T00:05:00Z")),
            ),
        ];
        let order = pods_to_delete(&pods, &[], 5);
        assert_eq!(
            names(&order),
            [
                "unassigned",
                "assigned-pending",
                "unknown",
                "running-not-ready",
                "recently-ready"
            ]
        );
    }

    #[test]
    fn restarts_then_age_break_ties_and_doubled_up_nodes_go_first() {
        let ready = "2026-01-01T00:01:00Z";
        let restarted = json!({"status": {"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 3}]}});
        let mut crashing = running("n1", Some(ready));
        merge(&mut crashing, restarted);
        let mut newer = running("n1", Some(ready));
        merge(
            &mut newer,
            json!({"metadata": {"creationTimestamp": "2026-01-02T00:00:00Z"}}),
        );
        let pods = vec![
            pod("older", running("n1", Some(ready))),
            pod("newer", newer),
            pod("crashing", crashing),
        ];
        assert_eq!(names(&pods_to_delete(&pods, &[], 2)), ["crashing", "newer"]);

        // Two ready pods alike but for their node; the family has two more pods on n2.
        let a = pod("on-n1", running("n1", Some(ready)));
        let b = pod("on-n2", running("n2", Some(ready)));
        let family = vec![
            a.clone(),
            b.clone(),
            pod("sibling-1", running("n2", Some(ready))),
            pod("sibling-2", running("n2", Some(ready))),
        ];
        assert_eq!(names(&pods_to_delete(&[a, b], &family, 1)), ["on-n2"]);
    }
}
