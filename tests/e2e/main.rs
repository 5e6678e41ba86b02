//! End-to-end tests against a real API server (feature `e2e`; `scripts/e2e.sh` starts
//! kube-apiserver and runs each module in turn): the client, kubeconfigs kubectl accepts, the
//! informer, network faults beside client-go, and `#[derive(CustomResource)]`. `KUBECONFIG=~/.kube/config cargo test --features
//! e2e --test e2e -- client::` runs the client's on a cluster of yours.

/// A cleanup runs once per deletion: the story shared with the embedded server's test.
#[path = "../controller/cleanup_once.rs"]
mod cleanup_once;
mod client;
mod derive;
/// The story of a derived custom resource, shared with the embedded server's test.
#[path = "../derive/story.rs"]
mod derive_story;
mod informer;
mod kubeconfigs;
mod network_faults;
mod shard_selector;

/// Issue 44, item 3: kube-apiserver answers the write that removes the last finalizer with a
/// version its watch has delivered already; the cleanup still runs once per deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_a_cleanup_runs_once_per_deletion_on_kube_apiserver() {
    let client = ferrokube_testkit::client(None);
    let namespace = ferrokube_testkit::namespace(&client, "cleanup").await;
    cleanup_once::cleanup_runs_once_per_deletion(client, &namespace).await;
}
