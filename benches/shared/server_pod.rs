//! A Pod as the API server sends it to a controller, for the decoding benchmarks. Included with
//! `#[path = "shared/server_pod.rs"] mod server_pod;`.

use serde_json::json;

/// A Pod as a controller sees it: two containers with env and resources, labels, an owner, status.
pub fn pod(i: usize) -> serde_json::Value {
    let container = |name: &str| {
        json!({
            "name": name, "image": format!("registry.example.com/team/{name}:1.{i}"),
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "production"}, {"name": "POD_NAME",
                     "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"
        })
    };
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": format!("web-7d9f8b6c5d-{i:05}"), "namespace": "shop",
            "uid": format!("6f1c2a4e-0000-4000-8000-{i:012}"), "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-11-22T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5d", "tier": "frontend"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d",
                                  "uid": "11111111-2222-4333-8444-555555555555", "controller": true,
                                  "blockOwnerDeletion": true}]
        },
        "spec": {"containers": [container("app"), container("sidecar")], "nodeName": format!("node-{}", i % 50),
                 "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "serviceAccountName": "default", "schedulerName": "default-scheduler"},
        "status": {"phase": "Running", "podIP": format!("10.1.{}.{}", i / 250, i % 250), "hostIP": "10.0.0.7",
                   "startTime": "2026-11-22T10:00:01Z",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T10:00:05Z"}],
                   "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "x", "imageID": "y",
                                          "state": {"running": {"startedAt": "2026-11-22T10:00:03Z"}}}]}
    })
}
