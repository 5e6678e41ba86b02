//! The ReplicaSet the drills, the churn and the demos create: `replicas` pods labelled
//! `app=<name>`, selected by that label, one container of a pause image that nothing pulls.

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::json;

/// A ReplicaSet `name` of `replicas` pods (see the [module docs](self)).
pub fn replica_set(name: &str, replicas: i32) -> Result<ReplicaSet, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/pause:1"}]}
            }
        }
    }))
}
