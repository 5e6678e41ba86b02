//! The leader-election drills (`cluster.rs`) on the embedded API server: three processes of
//! the ReplicaSet sample against one server in this test, with short leases (1.5 s lease, 1 s renew
//! deadline, 0.25 s retry period) so that the whole run takes seconds. The same drills run on the
//! real kube-apiserver with client-go's durations in `leader_e2e.rs`.

use crate::cluster as drills;

use drills::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_drills_kill_term_and_freeze_on_the_embedded_server() {
    let (_server, cluster) = Cluster::embedded("leader-drills").await;
    let report = drills::run(&cluster, "drills").await;
    eprintln!("leader drills on the embedded server: {report:?}");
    cluster.clean_up();
}
