//! The leader-election drills (`cluster.rs`) on the real kube-apiserver, with client-go's
//! durations (lease 15 s, renew deadline 10 s, retry period 2 s) and a 20 s freeze, audited from
//! the server's own audit log (`scripts/kube-apiserver.sh` writes every write request to
//! `$FERROKUBE_AUDIT_LOG` as JSON lines). Run by `scripts/e2e.sh`.

use crate::cluster as drills;

use drills::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_leader_drills_kill_term_and_freeze_on_kube_apiserver() {
    let cluster = Cluster::kube_apiserver("e2e-leader");
    let report = drills::run(&cluster, &drills::unique_namespace("leader-drills")).await;
    eprintln!("leader drills on kube-apiserver: {report:?}");
    cluster.clean_up();
}
