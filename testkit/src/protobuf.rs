//! The protobuf differential check, shared by the embedded-server and real-server tests: the same
//! objects read through protobuf and through JSON decode to equal values (gets, lists, an
//! informer's cache, a watch's events).
//!
//! kube-apiserver and the embedded server answer protobuf to `Accept:
//! application/vnd.kubernetes.protobuf, application/json`, and take the protobuf bodies the
//! client's creates and updates send.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use ferrokube_client::api::{ListParams, PostParams, WatchParams};
use ferrokube_client::client::Call;
use ferrokube_client::watch::WatchEvent;
use ferrokube_client::{Api, Client, ListWatch};
use ferrokube_core::Object;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::informer::start_synced;

fn from_json<K: DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).expect("test object")
}

/// A Pod that sets much of what a real one does: init and app containers with env, resources,
/// probes (a named and a numbered port), volumes of several sources, affinity, tolerations,
/// security contexts, labels and annotations.
pub fn rich_pod(name: &str) -> Pod {
    from_json(json!({
        "metadata": {"name": name, "labels": {"app": "web", "tier": "front"},
                     "annotations": {"note": "protobuf check"}},
        "spec": {
            "initContainers": [{"name": "init", "image": "registry.invalid/init:1",
                                "command": ["sh", "-c", "true"]}],
            "containers": [{
                "name": "app", "image": "registry.invalid/app:2",
                "args": ["--port=8080", ""],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"}, {"name": "EMPTY", "value": ""},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                              "limits": {"cpu": "1", "memory": "1Gi"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                                  "initialDelaySeconds": 0, "periodSeconds": 5},
                "readinessProbe": {"tcpSocket": {"port": 8080}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/config", "readOnly": true},
                                 {"name": "scratch", "mountPath": "/tmp"}],
                "securityContext": {"runAsNonRoot": true, "runAsUser": 1000,
                                    "allowPrivilegeEscalation": false,
                                    "capabilities": {"drop": ["ALL"]}}
            }],
            "volumes": [{"name": "config", "configMap": {"name": "cfg", "defaultMode": 420}},
                        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web",
                             "effect": "NoSchedule"},
                            {"operator": "Exists", "tolerationSeconds": 0, "effect": "NoExecute"}],
            "nodeSelector": {"disk": "ssd"},
            "terminationGracePeriodSeconds": 0,
            "enableServiceLinks": false,
            "securityContext": {"fsGroup": 2000}
        }
    }))
}

fn objects(node: &str) -> (ConfigMap, Service, Deployment, Node) {
    let config_map = from_json(json!({
        "metadata": {"name": "cfg", "labels": {"app": "web"}},
        "data": {"a": "1", "empty": "", "multi": "line\nline"},
        "binaryData": {"bin": "AAEC/w=="},
        "immutable": false
    }));
    let service = from_json(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                           {"name": "alt", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
                 "sessionAffinity": "None"}
    }));
    let deployment = from_json(json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "strategy": {"type": "RollingUpdate",
                              "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                 "revisionHistoryLimit": 3,
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app",
                                                       "image": "registry.invalid/app:2"}]}}}
    }));
    let node = from_json(json!({
        "metadata": {"name": node, "labels": {"kubernetes.io/os": "linux", "disk": "ssd"}},
        "spec": {"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                 "podCIDR": "10.9.0.0/24", "podCIDRs": ["10.9.0.0/24"]}
    }));
    (config_map, service, deployment, node)
}

/// The same `Api` twice: reading protobuf (the default) and JSON only.
fn both<K: Object + k8s_openapi::Resource>(api: Api<K>) -> (Api<K>, Api<K>) {
    let json = api.clone().with_protobuf(false);
    assert!(
        api.reads_protobuf(),
        "built-in kinds read protobuf by default"
    );
    assert!(!json.reads_protobuf());
    (api, json)
}

/// Gets `name` through both and checks they decode equal; returns the object.
async fn same_get<K>(protobuf: &Api<K>, json: &Api<K>, name: &str) -> K
where
    K: Object + PartialEq + std::fmt::Debug + Clone,
{
    let a = protobuf.get(name).await.expect("get over protobuf");
    let b = json.get(name).await.expect("get over JSON");
    assert_eq!(a, b, "{name}: protobuf and JSON gets differ");
    a
}

/// Lists through both and checks the items named `names` decode equal.
async fn same_list<K>(protobuf: &Api<K>, json: &Api<K>, names: &[&str])
where
    K: Object + PartialEq + std::fmt::Debug + Clone,
{
    let by_name = |list: Vec<K>| -> BTreeMap<String, K> {
        list.into_iter()
            .map(|o| (o.meta().name.clone().unwrap_or_default(), o))
            .filter(|(name, _)| names.contains(&name.as_str()))
            .collect()
    };
    let a = by_name(
        protobuf
            .list(&ListParams::default())
            .await
            .expect("list")
            .items,
    );
    let b = by_name(json.list(&ListParams::default()).await.expect("list").items);
    assert_eq!(a.len(), names.len(), "every object listed");
    assert_eq!(a, b, "protobuf and JSON lists differ");
}

/// Whether the server answers a protobuf read of `path` with protobuf.
async fn answers_protobuf(client: &Client, path: &str) -> bool {
    let request = http::Request::builder()
        .uri(path)
        .header(
            http::header::ACCEPT,
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .body(Bytes::new())
        .expect("request");
    let call = Call {
        request,
        idempotent: true,
        streaming: false,
    };
    let (content_type, body) = client.request_typed_bytes(call).await.expect("raw get");
    let protobuf = content_type
        .as_deref()
        .is_some_and(ferrokube_client::protobuf::is_protobuf);
    assert_eq!(protobuf, body.starts_with(b"k8s\0"), "{content_type:?}");
    protobuf
}

fn label<K: Serialize>(event: &WatchEvent<K>) -> (String, Option<serde_json::Value>) {
    let value = |o: &K| serde_json::to_value(o).ok();
    match event {
        WatchEvent::Added(o) => ("ADDED".into(), value(o)),
        WatchEvent::Modified(o) => ("MODIFIED".into(), value(o)),
        WatchEvent::Deleted(o) => ("DELETED".into(), value(o)),
        WatchEvent::Bookmark(_) => ("BOOKMARK".into(), None),
        WatchEvent::Error(e) => (format!("ERROR {}", e.code), None),
    }
}

/// The check; `server_speaks_protobuf`: whether the server is expected to answer protobuf
/// (kube-apiserver) or JSON (the embedded server).
pub async fn check_protobuf_reads_equal_json(
    client: &Client,
    namespace: &str,
    server_speaks_protobuf: bool,
) {
    let node_name = format!("{namespace}-node");
    let (config_map, service, deployment, node) = objects(&node_name);
    let post = PostParams::default();
    let (pods, pods_json) = both(Api::<Pod>::namespaced(client.clone(), namespace));
    let (cms, cms_json) = both(Api::<ConfigMap>::namespaced(client.clone(), namespace));
    let (services, services_json) = both(Api::<Service>::namespaced(client.clone(), namespace));
    let (deployments, deployments_json) =
        both(Api::<Deployment>::namespaced(client.clone(), namespace));
    let (nodes, nodes_json) = both(Api::<Node>::all(client.clone()));

    cms.create(&post, &config_map).await.expect("create cm");
    for name in ["rich-1", "rich-2"] {
        pods.create(&post, &rich_pod(name))
            .await
            .expect("create pod");
    }
    services.create(&post, &service).await.expect("create svc");
    deployments
        .create(&post, &deployment)
        .await
        .expect("create deploy");
    nodes.create(&post, &node).await.expect("create node");
    // The creates above went as protobuf bodies, and the server took them (a 415 would have
    // switched the resource to JSON).
    assert!(pods.writes_protobuf() && cms.writes_protobuf() && services.writes_protobuf());
    assert!(deployments.writes_protobuf() && nodes.writes_protobuf());
    assert!(!pods_json.writes_protobuf());

    let path = format!("/api/v1/namespaces/{namespace}/pods/rich-1");
    assert_eq!(
        answers_protobuf(client, &path).await,
        server_speaks_protobuf,
        "the server's answer to a protobuf read"
    );

    // An error answers in the encoding asked for: a protobuf `Status` from kube-apiserver.
    let missing = pods.get("no-such-pod").await.expect_err("404");
    assert!(missing.is_not_found(), "{missing}");
    assert!(
        missing.to_string().contains("no-such-pod"),
        "the Status' message: {missing}"
    );

    let pod = same_get(&pods, &pods_json, "rich-1").await;
    assert_eq!(pod.spec.as_ref().map(|s| s.containers.len()), Some(1));
    assert!(
        pod.metadata.managed_fields.is_some(),
        "a get keeps managedFields"
    );
    same_get(&cms, &cms_json, "cfg").await;
    let svc = same_get(&services, &services_json, "web").await;
    assert!(
        svc.spec.and_then(|s| s.cluster_ip).is_some(),
        "defaulted by the server"
    );
    same_get(&deployments, &deployments_json, "web").await;
    same_get(&nodes, &nodes_json, &node_name).await;

    same_list(&pods, &pods_json, &["rich-1", "rich-2"]).await;
    same_list(&cms, &cms_json, &["cfg"]).await;
    same_list(&services, &services_json, &["web"]).await;
    same_list(&deployments, &deployments_json, &["web"]).await;
    same_list(&nodes, &nodes_json, &[node_name.as_str()]).await;

    // Informers synced over each: the same cache (managedFields dropped in both by default).
    let options = crate::informer::quick_reflector();
    let (over_protobuf, _) = start_synced(ListWatch::new(pods.clone()), options.clone()).await;
    let (over_json, _) = start_synced(ListWatch::new(pods_json.clone()), options).await;
    let cache = |informer: &ferrokube_informer::SharedIndexInformer<Pod>| {
        let mut pods: Vec<Pod> = informer
            .store()
            .list()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    };
    assert_eq!(cache(&over_protobuf).len(), 2);
    assert_eq!(
        cache(&over_protobuf),
        cache(&over_json),
        "informer caches differ"
    );
    over_protobuf.stop();
    over_json.stop();

    // A watch over each from the same resourceVersion delivers the same events.
    let from = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let params = WatchParams::default();
    let mut watch_protobuf = cms.watch(&params, &from).await.expect("watch protobuf");
    let mut watch_json = cms_json.watch(&params, &from).await.expect("watch json");
    cms.create(&post, &crate::config_map("watched", "1"))
        .await
        .expect("create");
    cms.replace("watched", &post, &{
        let mut cm = cms.get("watched").await.expect("get");
        cm.data
            .get_or_insert_default()
            .insert("k".into(), "2".into());
        cm
    })
    .await
    .expect("replace");
    cms.delete("watched", &Default::default())
        .await
        .expect("delete");
    let mut seen = Vec::new();
    for stream in [&mut watch_protobuf, &mut watch_json] {
        let mut events = Vec::new();
        while events.len() < 3 {
            let next = tokio::time::timeout(Duration::from_secs(60), stream.next())
                .await
                .expect("an event within 60 s")
                .expect("the watch goes on")
                .expect("an event");
            let event = label(&next);
            if event.0 != "BOOKMARK" {
                events.push(event);
            }
        }
        seen.push(events);
    }
    let kinds: Vec<&str> = seen[0].iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(seen[0], seen[1], "protobuf and JSON watch events differ");

    nodes
        .delete(&node_name, &Default::default())
        .await
        .expect("delete node");
}
