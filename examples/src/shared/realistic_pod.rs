//! The realistic Pod the benchmarks create: two containers, labels, env, resources, probes.
//! Used by the benchmark programs as `ferrokube_examples::shared::realistic_pod`.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// A Pod as a Deployment would make it: two containers, labels, env, resources, probes.
pub fn pod(name: &str, index: u64) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {
                "app": format!("app-{}", index % 50),
                "tier": if index % 3 == 0 { "frontend" } else { "backend" },
                "pod-template-hash": format!("{:010x}", index % 50 * 7919),
            },
            "annotations": {"ferrokube.bench/seeded": "true"},
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.invalid/app:1.4.2",
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "env": [
                        {"name": "LOG_LEVEL", "value": "info"},
                        {"name": "POD_INDEX", "value": index.to_string()},
                        {"name": "DATABASE_URL", "value": "postgres://db.bench.svc:5432/app"},
                    ],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"cpu": "500m", "memory": "256Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                },
                {
                    "name": "sidecar",
                    "image": "registry.invalid/proxy:2.0.1",
                    "args": ["--listen", ":9090", "--upstream", "127.0.0.1:8080"],
                    "env": [{"name": "PROXY_MODE", "value": "sidecar"}],
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "64Mi"},
                        "limits": {"cpu": "200m", "memory": "128Mi"},
                    },
                },
            ],
            "terminationGracePeriodSeconds": 30,
        },
    }))
    .expect("pod json")
}

/// Creates the Pods `pod-NNNNN` for each index in `indexes` (see [`pod`]), `concurrency` requests
/// at a time; panics with the name of a Pod that could not be created (a benchmark's setup).
#[allow(dead_code)] // not every benchmark seeds Pods
pub async fn create_all(
    pods: &ferrokube::Api<Pod>,
    indexes: impl IntoIterator<Item = u64>,
    concurrency: usize,
) {
    use futures_util::StreamExt;
    futures_util::stream::iter(indexes)
        .for_each_concurrent(concurrency, |i| async move {
            let name = format!("pod-{i:05}");
            pods.create(&ferrokube::api::PostParams::default(), &pod(&name, i))
                .await
                .unwrap_or_else(|e| panic!("create {name}: {e}"));
        })
        .await;
}
