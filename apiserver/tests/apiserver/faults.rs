//! The embedded server's fault switches over HTTP (`/ferrokube/faults`) and its pod simulator.

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrokube_apiserver::{ApiServer, KubeletSettings, RunningServer};
use ferrokube_client::api::{DeleteParams, Patch, PatchParams, PostParams, WatchParams};
use ferrokube_client::client::Call;
use ferrokube_client::watch::WatchEvent;
use ferrokube_client::{Api, Client};
use futures_util::StreamExt;
use http::Request;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde_json::{Value, json};

fn client(server: &RunningServer) -> Client {
    ferrokube_testkit::embedded_client(server, false)
}

async fn admin(client: &Client, method: &str, query: &str, body: Value) -> Value {
    let request = Request::builder()
        .method(method)
        .uri(format!("/ferrokube/faults{query}"))
        .body(Bytes::from(body.to_string()))
        .expect("request");
    let call = Call {
        request,
        idempotent: false,
        streaming: false,
    };
    client.request(call).await.expect("fault endpoint answers")
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).expect("cm")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_switched_over_http() {
    let server = ApiServer::new().start().await.expect("server");
    let client = client(&server);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .expect("create");

    let settings = admin(
        &client,
        "PUT",
        "",
        json!({"seed": 3, "failWrites": 1.0, "writeFailure": {"tooManyRequests": {"retryAfterSeconds": 2}}}),
    )
    .await;
    assert_eq!(settings["failWrites"], 1.0);
    let error = api
        .create(&PostParams::default(), &config_map("b"))
        .await
        .expect_err("every write fails");
    assert!(error.is_too_many_requests(), "{error}");
    assert_eq!(
        error.api().and_then(|e| e.retry_after),
        Some(Duration::from_secs(2))
    );
    assert!(api.get("a").await.is_ok(), "reads are not affected");

    admin(&client, "PUT", "", json!({"conflictUpdates": 1.0})).await;
    let patch = json!({"data": {"k": "w"}});
    let error = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect_err("every update conflicts");
    assert!(error.is_conflict(), "{error}");

    admin(&client, "PUT", "", json!({})).await;
    let mut watch = api
        .watch(&WatchParams::default(), "")
        .await
        .expect("watch opens");
    assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Added(_)))));
    admin(&client, "POST", "?closeWatches=1&compact=1", json!({})).await;
    let ended = tokio::time::timeout(Duration::from_secs(2), watch.next()).await;
    assert!(matches!(ended, Ok(None)), "the watch ended");
    let mut stale = api
        .watch(&WatchParams::default(), "1")
        .await
        .expect("watch opens");
    let first = stale.next().await;
    assert!(
        matches!(&first, Some(Ok(WatchEvent::Error(e))) if e.code == 410),
        "{first:?}"
    );

    admin(&client, "PUT", "", json!({"paused": true})).await;
    let held = tokio::spawn({
        let api = api.clone();
        async move { api.get("a").await.is_ok() }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!held.is_finished(), "a paused server holds requests");
    server.faults().resume();
    assert!(held.await.expect("joined"));
}

async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_kubelet_runs_terminates_and_kills_pods() {
    let server = ApiServer::new()
        .kubelet(KubeletSettings {
            ready_after: Duration::from_millis(100),
            terminate_after: Duration::from_millis(100),
            ..KubeletSettings::default()
        })
        .start()
        .await
        .expect("server");
    let api: Api<Pod> = Api::namespaced(client(&server), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/app:1"}]}}))
    .expect("pod");
    let created = api
        .create(&PostParams::default(), &pod)
        .await
        .expect("create");
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    assert_eq!(phase(&created).as_deref(), Some("Pending"));
    wait_for("Running and Ready", async || {
        let pod = api.get("p").await.expect("get");
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        phase(&pod).as_deref() == Some("Running") && ready
    })
    .await;
    let bound = api.get("p").await.expect("get");
    assert!(
        bound.spec.and_then(|s| s.node_name).is_some(),
        "bound to a node"
    );

    api.delete("p", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = api.get("p").await.expect("still there while terminating");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    wait_for("the pod to go", async || api.get("p").await.is_err()).await;

    drop(server);
    let server = ApiServer::new()
        .kubelet(KubeletSettings {
            ready_after: Duration::from_millis(50),
            terminate_after: Duration::from_millis(50),
            kill_rate: 20.0,
            ..KubeletSettings::default()
        })
        .start()
        .await
        .expect("server");
    let api: Api<Pod> = Api::namespaced(client(&server), "default");
    for i in 0..5 {
        let mut pod = pod.clone();
        pod.metadata.name = Some(format!("k{i}"));
        api.create(&PostParams::default(), &pod)
            .await
            .expect("create");
    }
    wait_for("the killer to delete pods", async || {
        let left = api
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .len();
        left < 5
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_get_periodic_bookmarks_and_end_at_their_timeout() {
    let server = ApiServer::new()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .expect("server");
    let api: Api<ConfigMap> = Api::namespaced(client(&server), "default");
    let created = api
        .create(&PostParams::default(), &config_map("a"))
        .await
        .expect("create");
    let from = created.metadata.resource_version.expect("rv");
    let params = WatchParams {
        allow_bookmarks: true,
        timeout_seconds: Some(1),
        ..WatchParams::default()
    };
    let started = Instant::now();
    let mut watch = api.watch(&params, &from).await.expect("watch opens");
    let mut bookmarks = 0;
    while let Some(event) = watch.next().await {
        if let Ok(WatchEvent::Bookmark(b)) = event {
            assert_eq!(b.resource_version, from, "nothing changed since");
            bookmarks += 1;
        }
    }
    let lasted = started.elapsed();
    assert!(bookmarks >= 3, "{bookmarks} bookmarks in a second");
    assert!(
        lasted >= Duration::from_millis(900) && lasted < Duration::from_secs(5),
        "the watch ended at its timeoutSeconds ({lasted:?})"
    );
}
