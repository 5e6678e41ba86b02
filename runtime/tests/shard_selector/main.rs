//! The sharded runtime on the embedded server, in both of its modes: with `shardSelector` (the
//! embedded server's default, as kube-apiserver 1.37 with `ShardedListAndWatch`) the members shard
//! by hash ranges the server filters; with it turned off they fall back to the assigner's labels.
//! The story itself is in story.rs, shared with kube-apiserver's e2e test (e2e.rs, with the
//! `e2e` feature).

#[cfg(feature = "e2e")]
mod e2e;
mod story;

use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_testkit as common;
use k8s_openapi::api::core::v1::ConfigMap;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_members_shard_by_server_side_ranges_on_the_embedded_server() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let probe: Api<ConfigMap> = Api::all(client.clone());
    assert!(
        probe.supports_shard_selector().await.expect("probe"),
        "the embedded server filters by shardSelector by default"
    );
    story::shard_selector_story(client, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_fallback_to_labels_when_the_server_lacks_it() {
    let server = ApiServer::new()
        .sharded_list_and_watch(false)
        .start()
        .await
        .expect("server starts");
    let client = common::embedded_client(&server, true);
    let probe: Api<ConfigMap> = Api::all(client.clone());
    assert!(!probe.supports_shard_selector().await.expect("probe"));
    story::shard_selector_story(client, false).await;
}
