//! The sharding drills (tests/drills/shard.rs) on the real kube-apiserver, with client-go's
//! durations (lease 15 s, renew deadline 10 s, retry period 2 s) and a 20 s freeze, audited from
//! the server's own audit log (`scripts/kube-apiserver.sh` writes every write request to
//! `$FERROKUBE_AUDIT_LOG` as JSON lines). Run by `scripts/e2e.sh`.

mod common;
mod drills;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use drills::{Cluster, Timing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_shard_drills_join_kill_freeze_restart_on_kube_apiserver() {
    let audit_log: PathBuf = std::env::var_os("FERROKUBE_AUDIT_LOG")
        .expect("FERROKUBE_AUDIT_LOG (scripts/kube-apiserver.sh env) names the server's audit log")
        .into();
    let kubeconfig: PathBuf = std::env::var_os("KUBECONFIG")
        .expect("KUBECONFIG names the real server's kubeconfig")
        .into();
    let folder = std::env::temp_dir().join(format!("ferrokube-e2e-shard-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a folder for the drill");
    let namespace = format!(
        "shard-drills-{}",
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    );
    let cluster = Cluster {
        kubeconfig,
        client: common::client(None),
        audit: Box::new(move || {
            ferrokube::apiserver::audit::read_kube_apiserver_log(&audit_log).unwrap_or_default()
        }),
        timing: Timing {
            lease: Duration::from_secs(15),
            renew: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        },
        slack: Duration::from_secs(3),
        freeze: Duration::from_secs(20),
        logs: folder.clone(),
    };
    let report = drills::shard::run(&cluster, &namespace).await;
    eprintln!("shard drills on kube-apiserver: {report:#?}");
    let _ = std::fs::remove_dir_all(&folder);
}
