//! What one object uses of one quota resource name, and which quotas it is charged to: the
//! evaluators of kube-apiserver's quota admission and kube-controller-manager's quota controller,
//! for the resource names the built-in kinds are counted by.
//!
//! | resource name | counted from |
//! |---|---|
//! | `pods`, `count/pods` | pods not yet finished (phase neither Succeeded nor Failed) |
//! | `cpu`, `memory`, `ephemeral-storage`, `requests.<r>` | such pods' container requests (a limit stands in for a missing request) |
//! | `limits.<r>` | such pods' container limits |
//! | `services`, `services.nodeports`, `services.loadbalancers` | services; node ports; load balancers |
//! | `configmaps`, `secrets`, `replicationcontrollers`, `resourcequotas`, `persistentvolumeclaims` | one each |
//! | `count/<resource>[.<group>]` | one per object of that resource |
//!
//! A pod's request of a resource is the sum over its containers, or the largest request of one
//! init container if that is more (init containers run one at a time, before the others).

use std::collections::BTreeMap;

use serde_json::Value;

use super::quantity::Quantity;
use crate::meta;

/// The quota scopes this server evaluates (they select pods only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Pods with `spec.activeDeadlineSeconds`.
    Terminating,
    /// Pods without it.
    NotTerminating,
    /// Pods of QoS class BestEffort (no requests or limits).
    BestEffort,
    /// Pods of another QoS class.
    NotBestEffort,
}

impl Scope {
    fn parse(name: &str) -> Option<Scope> {
        match name {
            "Terminating" => Some(Scope::Terminating),
            "NotTerminating" => Some(Scope::NotTerminating),
            "BestEffort" => Some(Scope::BestEffort),
            "NotBestEffort" => Some(Scope::NotBestEffort),
            _ => None,
        }
    }

    fn selects(self, pod: &Value) -> bool {
        let terminating = pod
            .pointer("/spec/activeDeadlineSeconds")
            .is_some_and(|v| !v.is_null());
        let best_effort = is_best_effort(pod);
        match self {
            Scope::Terminating => terminating,
            Scope::NotTerminating => !terminating,
            Scope::BestEffort => best_effort,
            Scope::NotBestEffort => !best_effort,
        }
    }
}

/// One ResourceQuota as the evaluators read it.
#[derive(Debug, Clone)]
pub struct Quota {
    /// `metadata.name`.
    pub name: String,
    /// `spec.hard`, parsed (a value that does not parse is left out).
    pub hard: BTreeMap<String, Quantity>,
    /// `spec.scopes`; an unknown scope selects nothing.
    scopes: Vec<Option<Scope>>,
}

impl Quota {
    /// The quota in a stored ResourceQuota.
    pub fn from_object(object: &Value) -> Quota {
        let hard = object
            .pointer("/spec/hard")
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .filter_map(|(k, v)| Some((k.clone(), Quantity::from_json(v)?)))
                    .collect()
            })
            .unwrap_or_default();
        let scopes = object
            .pointer("/spec/scopes")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|s| s.as_str().and_then(Scope::parse))
                    .collect()
            })
            .unwrap_or_default();
        Quota {
            name: meta::name(object).unwrap_or_default().to_string(),
            hard,
            scopes,
        }
    }

    /// True if an object of `table` is charged to this quota at all: always without scopes; with
    /// scopes, only a pod that every scope selects.
    pub fn selects(&self, table: &str, object: &Value) -> bool {
        if self.scopes.is_empty() {
            return true;
        }
        table == "pods"
            && self
                .scopes
                .iter()
                .all(|scope| scope.is_some_and(|s| s.selects(object)))
    }
}

/// The store table whose objects a resource name counts, if any.
pub fn table_of(resource: &str) -> Option<String> {
    if let Some(counted) = resource.strip_prefix("count/") {
        return Some(counted.to_string());
    }
    let table = match resource {
        "pods" | "cpu" | "memory" | "ephemeral-storage" => "pods",
        r if r.starts_with("requests.") || r.starts_with("limits.") => {
            if r == "requests.storage" {
                "persistentvolumeclaims"
            } else {
                "pods"
            }
        }
        "services" | "services.nodeports" | "services.loadbalancers" => "services",
        "configmaps"
        | "secrets"
        | "replicationcontrollers"
        | "resourcequotas"
        | "persistentvolumeclaims" => resource,
        _ => return None,
    };
    Some(table.to_string())
}

/// What `object` (of `table`) uses of `resource`; `None` when it does not count for it.
pub fn usage(table: &str, object: &Value, resource: &str) -> Option<Quantity> {
    if table_of(resource).as_deref() != Some(table) {
        return None;
    }
    if table != "pods" {
        return match resource {
            "services.nodeports" => Some(Quantity::count(node_ports(object))),
            "services.loadbalancers" => {
                let balanced =
                    object.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer");
                Some(Quantity::count(i64::from(balanced)))
            }
            "requests.storage" => object
                .pointer("/spec/resources/requests/storage")
                .and_then(Quantity::from_json),
            _ => Some(Quantity::count(1)),
        };
    }
    if is_finished(object) {
        return Some(Quantity::ZERO);
    }
    match resource {
        "pods" | "count/pods" => Some(Quantity::count(1)),
        "cpu" | "memory" | "ephemeral-storage" => Some(pod_total(object, "requests", resource)),
        _ => match (
            resource.strip_prefix("requests."),
            resource.strip_prefix("limits."),
        ) {
            (Some(name), _) => Some(pod_total(object, "requests", name)),
            (_, Some(name)) => Some(pod_total(object, "limits", name)),
            _ => None,
        },
    }
}

/// The compute resources a quota with these hard limits requires every container of a pod to
/// state (`cpu` and `memory`, as requests or limits), missing from `pod`; sorted.
pub fn unspecified(pod: &Value, hard: &BTreeMap<String, Quantity>) -> Vec<String> {
    let mut missing = Vec::new();
    for (key, kind, name) in [
        ("cpu", "requests", "cpu"),
        ("requests.cpu", "requests", "cpu"),
        ("memory", "requests", "memory"),
        ("requests.memory", "requests", "memory"),
        ("limits.cpu", "limits", "cpu"),
        ("limits.memory", "limits", "memory"),
    ] {
        if !hard.contains_key(key) {
            continue;
        }
        let every = containers(pod, "containers")
            .iter()
            .all(|c| container_amount(c, kind, name).is_some());
        if !every && !missing.contains(&key.to_string()) {
            missing.push(key.to_string());
        }
    }
    missing.sort();
    missing
}

fn is_finished(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn is_best_effort(pod: &Value) -> bool {
    ["containers", "initContainers"].iter().all(|list| {
        containers(pod, list).iter().all(|c| {
            ["requests", "limits"].iter().all(|kind| {
                c.pointer(&format!("/resources/{kind}"))
                    .and_then(Value::as_object)
                    .is_none_or(|m| m.is_empty())
            })
        })
    })
}

fn containers<'a>(pod: &'a Value, list: &str) -> Vec<&'a Value> {
    pod.pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .map(|l| l.iter().collect())
        .unwrap_or_default()
}

/// One container's request (`kind` = `requests`, falling back to its limit) or limit of `name`.
fn container_amount(container: &Value, kind: &str, name: &str) -> Option<Quantity> {
    let read = |kind: &str| {
        container
            .pointer(&format!("/resources/{kind}"))
            .and_then(|m| m.get(name))
            .and_then(Quantity::from_json)
    };
    match kind {
        "requests" => read("requests").or_else(|| read("limits")),
        _ => read(kind),
    }
}

/// The pod's total of `name` in `kind` (see the [module docs](self)).
fn pod_total(pod: &Value, kind: &str, name: &str) -> Quantity {
    let mut sum = Quantity::ZERO;
    for c in containers(pod, "containers") {
        sum += container_amount(c, kind, name).unwrap_or_default();
    }
    containers(pod, "initContainers")
        .into_iter()
        .filter_map(|c| container_amount(c, kind, name))
        .fold(sum, std::cmp::max)
}

fn node_ports(service: &Value) -> i64 {
    let kind = service.pointer("/spec/type").and_then(Value::as_str);
    if !matches!(kind, Some("NodePort" | "LoadBalancer")) {
        return 0;
    }
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|p| p.len() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(requests: Value, limits: Value) -> Value {
        json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": requests, "limits": limits}},
            {"name": "b", "resources": {"requests": {"cpu": "100m"}}}]}})
    }

    #[test]
    fn pods_are_charged_their_requests_and_limits() {
        let p = pod(json!({"memory": "1Gi"}), json!({"cpu": "1"}));
        let q = |s: &str| Quantity::parse(s).ok();
        assert_eq!(usage("pods", &p, "pods"), q("1"));
        assert_eq!(usage("pods", &p, "requests.cpu"), q("1100m"));
        assert_eq!(usage("pods", &p, "memory"), q("1Gi"));
        assert_eq!(usage("pods", &p, "limits.cpu"), q("1"));
        assert_eq!(usage("pods", &p, "configmaps"), None);
        let mut done = p.clone();
        done["status"] = json!({"phase": "Succeeded"});
        assert_eq!(usage("pods", &done, "pods"), q("0"));
        assert_eq!(
            usage("replicasets.apps", &json!({}), "count/replicasets.apps"),
            q("1")
        );
    }

    #[test]
    fn scopes_select_pods_by_deadline_and_qos() {
        let quota = |scope: &str| {
            Quota::from_object(&json!({"metadata": {"name": "q"},
                "spec": {"hard": {"pods": "5"}, "scopes": [scope]}}))
        };
        let best_effort = json!({"spec": {"containers": [{"name": "a"}]}});
        let burstable = pod(json!({"cpu": "1"}), json!({}));
        assert!(quota("BestEffort").selects("pods", &best_effort));
        assert!(!quota("BestEffort").selects("pods", &burstable));
        assert!(quota("NotBestEffort").selects("pods", &burstable));
        assert!(!quota("BestEffort").selects("configmaps", &json!({})));
        let mut deadline = best_effort.clone();
        deadline["spec"]["activeDeadlineSeconds"] = 3600.into();
        assert!(quota("Terminating").selects("pods", &deadline));
        assert!(quota("NotTerminating").selects("pods", &best_effort));
    }

    #[test]
    fn a_cpu_quota_requires_every_container_to_state_cpu() {
        let hard: BTreeMap<String, Quantity> = [("cpu".to_string(), Quantity::count(1))]
            .into_iter()
            .collect();
        let p = pod(json!({"cpu": "1"}), json!({}));
        assert!(unspecified(&p, &hard).is_empty());
        let none = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(unspecified(&none, &hard), ["cpu"]);
    }
}
