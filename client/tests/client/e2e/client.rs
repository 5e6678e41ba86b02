//! End-to-end tests of the client against a real API server.
//!
//! Run by `scripts/e2e.sh`, which starts a real kube-apiserver (`scripts/kube-apiserver.sh up`) and
//! runs `cargo test -p ferrokube-client --features e2e --test client -- e2e::client::`. To run them against your own cluster, point
//! `KUBECONFIG` at it; the tests use the current context, plus (if they exist) a context named `token`
//! (a second admin user, authenticating by bearer token) and `viewer` (a user bound to the `view`
//! ClusterRole), as the script's kubeconfig has; set `FERROKUBE_E2E_SINGLE_USER=1` if your
//! kubeconfig has only one user. Every test works in a namespace of its own.

use ferrokube_testkit as common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{client, compact_etcd, config_map, has_context, namespace, pod_template};
use ferrokube_client::Api;
use ferrokube_client::DynamicObject;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::Deleted;
use ferrokube_client::api::ListParams;
use ferrokube_client::api::Patch;
use ferrokube_client::api::PatchParams;
use ferrokube_client::api::PostParams;
use ferrokube_client::api::Preconditions;
use ferrokube_client::api::WatchParams;
use ferrokube_client::watch::WatchEvent;
use ferrokube_client::watcher::ResumingWatcher;
use ferrokube_client::watcher::WatchError;
use ferrokube_core::ApiResource;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplate};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "e2e"}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}
    }))
    .expect("pod json")
}

#[tokio::test]
async fn crud_on_pods_configmaps_and_replicasets_with_cert_and_token_users() {
    let mut users = vec![None];
    if has_context("token") {
        users.push(Some("token"));
    }
    for user in users {
        let client = client(user);
        let ns = namespace(&client, "crud").await;

        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let created = pods
            .create(&PostParams::default(), &pod("p1"))
            .await
            .expect("create pod");
        assert!(created.metadata.uid.is_some());
        let fetched = pods.get("p1").await.expect("get pod");
        assert_eq!(fetched.metadata.uid, created.metadata.uid);
        let patched = pods
            .patch(
                "p1",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"patched": "yes"}}})),
            )
            .await
            .expect("merge patch");
        assert_eq!(
            patched
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("patched")),
            Some(&"yes".to_string())
        );
        let strategic = pods
            .patch(
                "p1",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:2"}]}})),
            )
            .await
            .expect("strategic patch");
        assert_eq!(
            strategic
                .spec
                .as_ref()
                .map(|s| s.containers[0].image.clone()),
            Some(Some("registry.invalid/pause:2".to_string()))
        );
        let listed = pods
            .list(&ListParams::default().labels("app=e2e,patched in (yes)"))
            .await
            .expect("list");
        assert_eq!(listed.items.len(), 1);
        assert!(!listed.resource_version().is_empty());

        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let mut cm = config_maps
            .create(&PostParams::default(), &config_map("cm", "1"))
            .await
            .expect("create cm");
        cm.data = Some(BTreeMap::from([("k".into(), "2".into())]));
        let replaced = config_maps
            .replace("cm", &PostParams::default(), &cm)
            .await
            .expect("replace");
        assert_eq!(replaced.data.as_ref().map(|d| d["k"].as_str()), Some("2"));
        let json_patched = config_maps
            .patch(
                "cm",
                &PatchParams::default(),
                &Patch::Json(json!([{"op": "replace", "path": "/data/k", "value": "3"}])),
            )
            .await
            .expect("json patch");
        assert_eq!(
            json_patched.data.as_ref().map(|d| d["k"].as_str()),
            Some("3")
        );

        let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "rs"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "rs"}},
                     "template": {"metadata": {"labels": {"app": "rs"}},
                                  "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}}}
        }))
        .expect("rs json");
        replica_sets
            .create(&PostParams::default(), &rs)
            .await
            .expect("create rs");
        let mut status = replica_sets.get_status("rs").await.expect("get status");
        status.status = serde_json::from_value(json!({"replicas": 2, "observedGeneration": 1}))
            .expect("status json");
        let updated = replica_sets
            .replace_status("rs", &PostParams::default(), &status)
            .await
            .expect("replace status");
        assert_eq!(updated.status.as_ref().map(|s| s.replicas), Some(2));
        let patched = replica_sets
            .patch_status(
                "rs",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"readyReplicas": 1}})),
            )
            .await
            .expect("patch status");
        assert_eq!(patched.status.and_then(|s| s.ready_replicas), Some(1));

        let applied = config_maps
            .patch(
                "applied",
                &PatchParams::apply("ferrokube-e2e").force(),
                &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": "applied"}, "data": {"a": "b"}})),
            )
            .await
            .expect("server-side apply");
        assert_eq!(applied.data.as_ref().map(|d| d["a"].as_str()), Some("b"));

        let deleted = pods
            .delete("p1", &DeleteParams::default().grace_period(0))
            .await
            .expect("delete pod");
        assert!(matches!(deleted, Deleted::Pending(_) | Deleted::Gone(_)));
        assert!(pods.get_opt("p1").await.expect("get_opt").is_none());
        let precondition_miss = config_maps
            .delete(
                "cm",
                &DeleteParams::default().preconditions(Preconditions {
                    uid: Some("not-the-uid".into()),
                    resource_version: None,
                }),
            )
            .await
            .expect_err("uid precondition fails");
        assert!(precondition_miss.is_conflict(), "{precondition_miss}");
        config_maps
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .expect("delete collection");
        assert!(
            config_maps
                .list(&ListParams::default())
                .await
                .expect("list")
                .items
                .is_empty()
        );
    }
}

#[tokio::test]
async fn stale_update_conflicts_and_errors_map_to_their_reasons() {
    let client = client(None);
    let ns = namespace(&client, "errors").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let first = config_maps
        .create(&PostParams::default(), &config_map("cm", "1"))
        .await
        .expect("create");
    let mut newer = first.clone();
    newer.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    config_maps
        .replace("cm", &PostParams::default(), &newer)
        .await
        .expect("first replace");
    let mut stale = first;
    stale.data = Some(BTreeMap::from([("k".into(), "3".into())]));
    let conflict = config_maps
        .replace("cm", &PostParams::default(), &stale)
        .await
        .expect_err("stale resourceVersion");
    assert!(conflict.is_conflict(), "{conflict}");
    assert_eq!(conflict.api().map(|a| a.code), Some(409));

    let missing = config_maps.get("nope").await.expect_err("404");
    assert!(missing.is_not_found(), "{missing}");
    let exists = config_maps
        .create(&PostParams::default(), &config_map("cm", "x"))
        .await
        .expect_err("409 exists");
    assert!(exists.is_already_exists(), "{exists}");

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut invalid = pod("bad");
    if let Some(spec) = invalid.spec.as_mut() {
        spec.containers.clear();
    }
    let error = pods
        .create(&PostParams::default(), &invalid)
        .await
        .expect_err("422");
    assert!(error.is_invalid(), "{error}");
    let causes = error
        .api()
        .and_then(|a| a.details.as_ref())
        .and_then(|d| d.causes.clone())
        .unwrap_or_default();
    assert!(
        causes
            .iter()
            .any(|c| c.field.as_deref() == Some("spec.containers")),
        "{causes:?}"
    );
}

#[tokio::test]
async fn pagination_over_1200_objects() {
    let client = client(None);
    let ns = namespace(&client, "pages").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let creates = (0..1200).map(|i| {
        let api = config_maps.clone();
        async move {
            api.create(&PostParams::default(), &config_map(&format!("cm-{i}"), "v"))
                .await
        }
    });
    let results = futures_util::stream::iter(creates)
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    assert!(results.iter().all(Result::is_ok), "every create succeeds");

    let first = config_maps
        .list(&ListParams::default().limit(500))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 500);
    assert!(first.metadata.continue_.is_some());
    let all = config_maps
        .list_all(&ListParams::default().limit(500))
        .await
        .expect("all pages");
    assert_eq!(all.items.len(), 1200);
    let mut names: Vec<_> = all
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 1200, "no duplicates across pages");
}

#[tokio::test]
async fn watch_sees_changes_in_order_and_bookmarks() {
    let client = client(None);
    let ns = namespace(&client, "watch").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let start = config_maps
        .list(&ListParams::default())
        .await
        .expect("list");
    let mut stream = config_maps
        .watch(&WatchParams::default().timeout(8), start.resource_version())
        .await
        .expect("watch");
    let mut cm = config_maps
        .create(&PostParams::default(), &config_map("w", "1"))
        .await
        .expect("create");
    cm.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    config_maps
        .replace("w", &PostParams::default(), &cm)
        .await
        .expect("replace");
    config_maps
        .delete("w", &DeleteParams::default())
        .await
        .expect("delete");
    let mut seen = Vec::new();
    let mut bookmarks = 0;
    while let Some(event) = stream.next().await {
        match event.expect("event decodes") {
            WatchEvent::Added(c) => seen.push(("ADDED", c.data.map(|d| d["k"].clone()))),
            WatchEvent::Modified(c) => seen.push(("MODIFIED", c.data.map(|d| d["k"].clone()))),
            WatchEvent::Deleted(c) => seen.push(("DELETED", c.data.map(|d| d["k"].clone()))),
            WatchEvent::Bookmark(b) => {
                assert!(!b.resource_version.is_empty());
                bookmarks += 1;
            }
            WatchEvent::Error(e) => panic!("error event: {e}"),
        }
    }
    assert_eq!(
        seen,
        vec![
            ("ADDED", Some("1".to_string())),
            ("MODIFIED", Some("2".to_string())),
            ("DELETED", Some("2".to_string())),
        ]
    );
    assert!(
        bookmarks >= 1,
        "the server sends a bookmark before the watch times out"
    );
}

#[tokio::test]
async fn resuming_watcher_continues_after_the_server_closes_the_watch() {
    let client = client(None);
    let ns = namespace(&client, "resume").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let start = config_maps
        .list(&ListParams::default())
        .await
        .expect("list");
    let mut watcher = ResumingWatcher::new(
        config_maps.clone(),
        WatchParams::default().timeout(1),
        start.resource_version(),
    );
    let writer = {
        let api = config_maps.clone();
        tokio::spawn(async move {
            for i in 0..12 {
                api.create(&PostParams::default(), &config_map(&format!("r{i}"), "v"))
                    .await
                    .expect("create");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    let mut names = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while names.len() < 12 && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(10), watcher.next()).await {
            Ok(Ok(WatchEvent::Added(c))) => names.extend(c.metadata.name),
            Ok(Ok(_)) => {}
            Ok(Err(WatchError::Retrying(e))) => panic!("unexpected failure: {e}"),
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => panic!("no event for 10 s; saw {names:?}"),
        }
    }
    writer.await.expect("writer");
    let expected: Vec<String> = (0..12).map(|i| format!("r{i}")).collect();
    assert_eq!(
        names, expected,
        "every create seen once, in order, across reconnects"
    );
}

#[tokio::test]
async fn a_compacted_resource_version_is_410_and_asks_for_a_relist() {
    // PodTemplates are served straight from etcd (no watch cache) by scripts/kube-apiserver.sh.
    let client = client(None);
    let ns = namespace(&client, "gone").await;
    let templates: Api<PodTemplate> = Api::namespaced(client.clone(), &ns);
    let old = templates
        .create(&PostParams::default(), &pod_template("t0"))
        .await
        .expect("create")
        .metadata
        .resource_version
        .expect("rv");
    let mut newest = old.clone();
    for i in 1..5 {
        newest = templates
            .create(&PostParams::default(), &pod_template(&format!("t{i}")))
            .await
            .expect("create")
            .metadata
            .resource_version
            .expect("rv");
    }
    compact_etcd(&newest);
    let mut watcher = ResumingWatcher::new(templates.clone(), WatchParams::default(), &old);
    let outcome = tokio::time::timeout(Duration::from_secs(30), watcher.next())
        .await
        .expect("answer in time");
    match outcome {
        Err(WatchError::Gone(version)) => assert_eq!(version, old),
        Ok(event) => panic!("expected 410, got an event: {event:?}"),
        Err(other) => panic!("expected 410, got {other}"),
    }
    let fresh = templates
        .list(&ListParams::default())
        .await
        .expect("relist");
    assert_eq!(fresh.items.len(), 5);
    watcher.resume_from(fresh.resource_version());
    templates
        .create(&PostParams::default(), &pod_template("after"))
        .await
        .expect("create");
    let event = tokio::time::timeout(Duration::from_secs(30), watcher.next())
        .await
        .expect("event in time")
        .expect("watch works again");
    assert!(matches!(event, WatchEvent::Added(t) if t.metadata.name.as_deref() == Some("after")));
}

#[tokio::test]
async fn a_read_only_user_gets_a_typed_forbidden() {
    if !has_context("viewer") {
        return; // FERROKUBE_E2E_SINGLE_USER=1: no read-only user to test with
    }
    let admin = client(None);
    let ns = namespace(&admin, "rbac").await;
    let viewer = client(Some("viewer"));
    let config_maps: Api<ConfigMap> = Api::namespaced(viewer, &ns);
    config_maps
        .list(&ListParams::default())
        .await
        .expect("viewer may list");
    let error = config_maps
        .create(&PostParams::default(), &config_map("nope", "v"))
        .await
        .expect_err("viewer may not create");
    assert!(error.is_forbidden(), "{error}");
}

#[tokio::test]
async fn a_custom_resource_through_the_dynamic_api() {
    let client = client(None);
    let ns = namespace(&client, "crd").await;
    let crds = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
        namespaced: false,
    };
    let crd_api = Api::dynamic(client.clone(), crds.clone(), None);
    let crd = DynamicObject::new("widgets.e2e.ferrokube.dev", &crds).with(
        "spec",
        json!({
            "group": "e2e.ferrokube.dev",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]
        }),
    );
    match crd_api.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(e) if e.is_already_exists() => {}
        Err(e) => panic!("create CRD: {e}"),
    }
    let widgets = ApiResource {
        group: "e2e.ferrokube.dev".into(),
        version: "v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
        namespaced: true,
    };
    let api = Api::dynamic(client.clone(), widgets.clone(), Some(&ns));
    let widget = DynamicObject::new("w1", &widgets).with("spec", json!({"size": 3}));
    // The CRD takes a moment to be served.
    let deadline = Instant::now() + Duration::from_secs(30);
    let created = loop {
        match api.create(&PostParams::default(), &widget).await {
            Ok(created) => break created,
            Err(e) if e.is_not_found() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("create widget: {e}"),
        }
    };
    assert_eq!(created.data["spec"]["size"], 3);
    let patched = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}})),
        )
        .await
        .expect("patch widget");
    assert_eq!(patched.data["spec"]["size"], 5);
    let listed = api
        .list(&ListParams::default())
        .await
        .expect("list widgets");
    assert_eq!(listed.items.len(), 1);
    api.delete("w1", &DeleteParams::default())
        .await
        .expect("delete widget");
    assert!(api.get_opt("w1").await.expect("get_opt").is_none());
}

#[tokio::test]
async fn kubectl_and_ferrokube_see_the_same_objects() {
    let client = client(None);
    let ns = namespace(&client, "kubectl").await;
    let status = std::process::Command::new("kubectl")
        .args([
            "-n",
            &ns,
            "create",
            "configmap",
            "from-kubectl",
            "--from-literal=k=v",
        ])
        .status()
        .expect("kubectl runs");
    assert!(status.success());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = config_maps.get("from-kubectl").await.expect("ours sees it");
    assert_eq!(cm.data.map(|d| d["k"].clone()), Some("v".to_string()));
    config_maps
        .create(&PostParams::default(), &config_map("from-ferrokube", "w"))
        .await
        .expect("create");
    let output = std::process::Command::new("kubectl")
        .args([
            "-n",
            &ns,
            "get",
            "configmap",
            "from-ferrokube",
            "-o",
            "json",
        ])
        .output()
        .expect("kubectl runs");
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(json["data"]["k"], "w");
}

/// X.509 v1 client certificates (what `openssl x509 -req` makes without `-extfile`), RSA and EC,
/// authenticate against the real kube-apiserver, as they do for kubectl: contexts `cert-v1-rsa`
/// and `cert-v1-ec` of `scripts/kube-apiserver.sh`.
#[tokio::test]
async fn x509_v1_client_certificates_authenticate_like_kubectl() {
    for context in ["cert-v1-rsa", "cert-v1-ec"] {
        if !has_context(context) {
            continue;
        }
        let client = client(Some(context));
        let ns = namespace(&client, "v1-cert").await;
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        config_maps
            .create(
                &PostParams::default(),
                &config_map("made-with-a-v1-cert", "yes"),
            )
            .await
            .unwrap_or_else(|e| panic!("{context}: {e}"));
        assert_eq!(
            config_maps
                .list(&ListParams::default())
                .await
                .unwrap_or_else(|e| panic!("{context}: {e}"))
                .items
                .len(),
            1,
            "{context}"
        );
    }
}

/// `GET` of a path that answers text (e.g. `/metrics`) or JSON (`/version`), as bytes.
async fn get_raw(client: &ferrokube_client::Client, path: &str) -> bytes::Bytes {
    client
        .request_bytes(ferrokube_client::client::Call {
            request: http::Request::get(path)
                .body(bytes::Bytes::new())
                .expect("request"),
            idempotent: true,
            streaming: false,
        })
        .await
        .unwrap_or_else(|error| panic!("GET {path}: {error}"))
}

/// The server's minor version, from `/version`.
async fn server_minor(client: &ferrokube_client::Client) -> u32 {
    let version: serde_json::Value =
        serde_json::from_slice(&get_raw(client, "/version").await).expect("/version is JSON");
    version["minor"]
        .as_str()
        .and_then(|m| m.trim_end_matches('+').parse().ok())
        .expect("a minor version")
}

/// kube-apiserver's count of consistent reads of `resource` it served from its watch cache
/// (`apiserver_watch_cache_consistent_read_total{fallback="false",success="true"}`, 1.31+); `None`
/// when it has no such metric.
async fn consistent_reads_from_cache(
    client: &ferrokube_client::Client,
    resource: &str,
) -> Option<u64> {
    let metrics = get_raw(client, "/metrics").await;
    let text = String::from_utf8_lossy(&metrics);
    let mut seen = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_watch_cache_consistent_read_total{") else {
            continue;
        };
        let (labels, value) = rest.split_once("} ").unwrap_or_default();
        if labels.contains(&format!("resource=\"{resource}\""))
            && labels.contains("fallback=\"false\"")
            && labels.contains("success=\"true\"")
        {
            *seen.get_or_insert(0) += value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        } else {
            seen.get_or_insert(0);
        }
    }
    seen
}

/// A list without a resourceVersion (our informer's first list, `FirstList::Consistent`) and one
/// `NotOlderThan` a write both see that write at once, on every release. What differs is where the
/// server reads them from: etcd on 1.20, its watch cache on 1.34+ (consistent reads from the cache,
/// GA in 1.34), which its metrics count.
#[tokio::test]
async fn consistent_lists_see_each_write_and_current_servers_serve_them_from_the_watch_cache() {
    let client = client(None);
    let ns = namespace(&client, "consistent").await;
    let minor = server_minor(&client).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let before = consistent_reads_from_cache(&client, "configmaps").await;
    const WRITES: usize = 20;
    for i in 0..WRITES {
        let created = api
            .create(
                &PostParams::default(),
                &config_map(&format!("cm-{i:02}"), "1"),
            )
            .await
            .expect("create");
        let name = created.metadata.name.clone().unwrap_or_default();
        let latest = api
            .list(&ListParams::default())
            .await
            .expect("consistent list");
        assert!(
            latest
                .items
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(&name)),
            "a consistent list right after creating {name} does not show it"
        );
        assert_eq!(latest.items.len(), i + 1);
        let not_older = ListParams {
            resource_version: created.metadata.resource_version.clone(),
            version_match: Some(ferrokube_client::api::VersionMatch::NotOlderThan),
            ..ListParams::default()
        };
        let at_least = api.list(&not_older).await.expect("NotOlderThan list");
        assert!(
            at_least
                .items
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(&name))
        );
    }
    let after = consistent_reads_from_cache(&client, "configmaps").await;
    println!(
        "1.{minor}: consistent reads of configmaps from the watch cache {before:?} -> {after:?}"
    );
    if minor >= 34 {
        let (before, after) = (before.unwrap_or(0), after.expect("1.34+ counts them"));
        assert!(
            after >= before + WRITES as u64,
            "1.{minor} served {} of {WRITES} consistent lists from its watch cache",
            after - before
        );
    } else if minor <= 30 {
        assert_eq!(
            after, None,
            "1.{minor} has no consistent reads from the cache"
        );
    }
}
