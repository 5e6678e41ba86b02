//! The sharded runtime on kube-apiserver (the story of story.rs): in the
//! server-side mode when the server was started with `ShardedListAndWatch`
//! (`APISERVER_FLAGS=--feature-gates=ShardedListAndWatch=true scripts/kube-apiserver.sh up`), in
//! the label mode when not (scripts/e2e.sh's default). Which one the server has is found out by
//! the test, as the members find it out.

use std::sync::Arc;

use ferrokube_client::Api;
use k8s_openapi::api::core::v1::ConfigMap;

use super::story::{self, Driver};

/// What the server has, as the members find out; with scripts/e2e.sh's gated pass, asserted on.
async fn server_side() -> bool {
    let probe: Api<ConfigMap> = Api::all(ferrokube_testkit::client(None));
    let server_side = probe.supports_shard_selector().await.expect("probe");
    eprintln!("kube-apiserver filters by shardSelector: {server_side}");
    // scripts/e2e.sh's pass with the gate on says so: the members must then find the server-side
    // mode, not fall back.
    if std::env::var_os("FERROKUBE_E2E_SHARD_SELECTOR").is_some() {
        assert!(
            server_side,
            "the server was started with ShardedListAndWatch, but the members did not detect it"
        );
    }
    server_side
}

fn clients() -> story::MakeClient {
    Arc::new(|| ferrokube_testkit::client(None))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_members_shard_on_kube_apiserver_in_the_mode_it_supports() {
    let server_side = server_side().await;
    story::shard_selector_story(clients(), server_side, Driver::Ranges).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_manager_shards_on_kube_apiserver_in_the_mode_it_supports() {
    let server_side = server_side().await;
    story::shard_selector_story(clients(), server_side, Driver::Manager).await;
}

/// The cold start on kube-apiserver (with `ShardedListAndWatch`; the label mode adopts no ring,
/// so there is nothing to count without it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_members_starting_together_adopt_one_full_ring_each_on_kube_apiserver() {
    if server_side().await {
        story::shard_selector_cold_start_story(clients()).await;
    }
}
