//! The sharding drills (tests/drills/shard.rs) on the embedded API server: four processes of the
//! ReplicaSet sample sharing twelve ReplicaSets, with short leases (1.5 s lease, 1 s renew
//! deadline, 0.25 s retry period). The same drills run on the real kube-apiserver with client-go's
//! durations in `tests/e2e_shard.rs`.

mod drills;

use std::time::Duration;

use ferrokube::apiserver::{ApiServer, KubeletSettings};
use ferrokube::{Client, Config};

use drills::{Cluster, Timing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_drills_join_kill_freeze_restart_on_the_embedded_server() {
    let server = ApiServer::new()
        .kubelet(KubeletSettings::default())
        .audit(true)
        .start()
        .await
        .expect("embedded server starts");
    let folder =
        std::env::temp_dir().join(format!("ferrokube-shard-drills-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("a folder for the drill");
    let kubeconfig = folder.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("write the kubeconfig");
    let client = Client::new(Config {
        qps: None,
        ..Config::new(server.url().parse().expect("the server's URL"))
    })
    .expect("client");
    let audit_log = server.audit_log();
    let cluster = Cluster {
        kubeconfig,
        client,
        audit: Box::new(move || audit_log.entries()),
        timing: Timing {
            lease: Duration::from_millis(1500),
            renew: Duration::from_millis(1000),
            retry: Duration::from_millis(250),
        },
        slack: Duration::from_secs(2),
        freeze: Duration::from_secs(5),
        logs: folder.clone(),
    };
    let report = drills::shard::run(&cluster, "shard-drills").await;
    eprintln!("shard drills on the embedded server: {report:#?}");
    let _ = std::fs::remove_dir_all(&folder);
}
