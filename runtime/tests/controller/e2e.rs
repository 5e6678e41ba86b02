//! The controller against a real kube-apiserver (compiled with the crate's `e2e` feature only; the
//! cluster is the kubeconfig's): the stories whose outcome hangs on what the real server answers,
//! shared with the embedded server's tests (`cargo test -p ferrokube-runtime --features e2e --test
//! controller -- e2e::`, run by `scripts/e2e.sh`).

use crate::cleanup_once;

/// Issue 44, item 3: kube-apiserver answers the write that removes the last finalizer with a
/// version its watch has delivered already; the cleanup still runs once per deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_a_cleanup_runs_once_per_deletion_on_kube_apiserver() {
    let client = ferrokube_testkit::client(None);
    let namespace = ferrokube_testkit::namespace(&client, "cleanup").await;
    cleanup_once::cleanup_runs_once_per_deletion(client, &namespace).await;
}
