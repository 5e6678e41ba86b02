//! The leader-election drills (tests/drills/mod.rs) on the embedded API server: three processes of
//! the ReplicaSet sample against one server in this test, with short leases (1.5 s lease, 1 s renew
//! deadline, 0.25 s retry period) so that the whole run takes seconds. The same drills run on the
//! real kube-apiserver with client-go's durations in `tests/e2e_leader.rs`.

mod drills;

use std::time::Duration;

use ferrokube::apiserver::{ApiServer, KubeletSettings};
use ferrokube::{Client, Config};

use drills::{Cluster, Timing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_drills_kill_term_and_freeze_on_the_embedded_server() {
    let server = ApiServer::new()
        .kubelet(KubeletSettings::default())
        .audit(true)
        .start()
        .await
        .expect("embedded server starts");
    let folder =
        std::env::temp_dir().join(format!("ferrokube-leader-drills-{}", std::process::id()));
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
    let report = drills::run(&cluster, "drills").await;
    eprintln!("leader drills on the embedded server: {report:?}");
    let _ = std::fs::remove_dir_all(&folder);
}
