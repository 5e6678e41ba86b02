//! The sharded runtime on kube-apiserver (the story of story.rs): in the
//! server-side mode when the server was started with `ShardedListAndWatch`
//! (`APISERVER_FLAGS=--feature-gates=ShardedListAndWatch=true scripts/kube-apiserver.sh up`), in
//! the label mode when not (scripts/e2e.sh's default). Which one the server has is found out by
//! the test, as the members find it out.

use ferrokube_client::Api;
use k8s_openapi::api::core::v1::ConfigMap;

use super::story;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_members_shard_on_kube_apiserver_in_the_mode_it_supports() {
    let client = ferrokube_testkit::client(None);
    let probe: Api<ConfigMap> = Api::all(client.clone());
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
    story::shard_selector_story(client, server_side).await;
}
