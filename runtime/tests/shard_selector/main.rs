//! The sharded runtime on the embedded server, in both of its modes: with `shardSelector` (the
//! embedded server's default, as kube-apiserver 1.37 with `ShardedListAndWatch`) the members shard
//! by hash ranges the server filters; with it turned off they fall back to the assigner's labels.
//! The story itself is in story.rs, shared with kube-apiserver's e2e test (e2e.rs, with the
//! `e2e` feature); each mode runs it twice, its members driving `ranges::run` by hand and as
//! sharded `Manager`s (`add_sharded_controller`).

#[cfg(feature = "e2e")]
mod e2e;
mod story;

use std::sync::Arc;

use ferrokube_apiserver::{ApiServer, RunningServer};
use ferrokube_client::{Api, Client};
use ferrokube_testkit as common;
use k8s_openapi::api::core::v1::ConfigMap;
use story::Driver;

fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A fresh client of `server` per call.
fn clients(server: &RunningServer) -> story::MakeClient {
    let config = common::embedded_config(server);
    Arc::new(move || Client::new(config.clone()).expect("client"))
}

/// The embedded server with its `shardSelector` on or off, and whether a member detects it.
async fn server(sharded_list_and_watch: bool) -> RunningServer {
    let server = ApiServer::new()
        .sharded_list_and_watch(sharded_list_and_watch)
        .start()
        .await
        .expect("server starts");
    let probe: Api<ConfigMap> = Api::all(common::embedded_client(&server, true));
    assert_eq!(
        probe.supports_shard_selector().await.expect("probe"),
        sharded_list_and_watch,
        "the members' probe finds what the server has"
    );
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_members_shard_by_server_side_ranges_on_the_embedded_server() {
    init_logs();
    let server = server(true).await;
    story::shard_selector_story(clients(&server), true, Driver::Ranges).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_fallback_to_labels_when_the_server_lacks_it() {
    init_logs();
    let server = server(false).await;
    story::shard_selector_story(clients(&server), false, Driver::Ranges).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_manager_shards_by_server_side_ranges_when_the_server_has_them() {
    init_logs();
    let server = server(true).await;
    story::shard_selector_story(clients(&server), true, Driver::Manager).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_manager_falls_back_to_labels_when_the_server_lacks_them() {
    init_logs();
    let server = server(false).await;
    story::shard_selector_story(clients(&server), false, Driver::Manager).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_members_starting_together_adopt_one_full_ring_each() {
    init_logs();
    let server = server(true).await;
    story::shard_selector_cold_start_story(clients(&server)).await;
}
