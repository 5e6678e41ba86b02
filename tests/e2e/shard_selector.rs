//! The sharded runtime on kube-apiserver (the story of tests/shard_selector/story.rs): in the
//! server-side mode when the server was started with `ShardedListAndWatch`
//! (`APISERVER_FLAGS=--feature-gates=ShardedListAndWatch=true scripts/kube-apiserver.sh up`), in
//! the label mode when not (scripts/e2e.sh's default). Which one the server has is found out by
//! the test, as the members find it out.

use ferrokube::Api;
use k8s_openapi::api::core::v1::ConfigMap;

#[path = "../shard_selector/story.rs"]
mod story;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_members_shard_on_kube_apiserver_in_the_mode_it_supports() {
    let client = ferrokube_testkit::client(None);
    let probe: Api<ConfigMap> = Api::all(client.clone());
    let server_side = probe.supports_shard_selector().await.expect("probe");
    eprintln!("kube-apiserver filters by shardSelector: {server_side}");
    story::shard_selector_story(client, server_side).await;
}
