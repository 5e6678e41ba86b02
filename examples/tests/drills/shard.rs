//! The sharding drills (`cluster/shard.rs`) on the embedded API server: four processes of the
//! ReplicaSet sample sharing twelve ReplicaSets, with short leases (1.5 s lease, 1 s renew
//! deadline, 0.25 s retry period). The same drills run on the real kube-apiserver with client-go's
//! durations in `shard_e2e.rs`.

use crate::cluster as drills;

use drills::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_drills_join_kill_freeze_restart_on_the_embedded_server() {
    let (_server, cluster) = Cluster::embedded("shard-drills").await;
    let report = drills::shard::run(
        &cluster,
        &drills::shard::namespace_for_drills("shard-drills"),
    )
    .await;
    eprintln!("shard drills on the embedded server: {report:#?}");
    cluster.clean_up();
}
