//! The leader-election drills (tests/drills/mod.rs) on the real kube-apiserver, with client-go's
//! durations (lease 15 s, renew deadline 10 s, retry period 2 s) and a 20 s freeze, audited from
//! the server's own audit log (`scripts/kube-apiserver.sh` writes every write request to
//! `$FERROKUBE_AUDIT_LOG` as JSON lines). Run by `scripts/e2e.sh`.

mod common;
mod drills;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use drills::{Cluster, Timing, Write};
use serde_json::Value;

/// The audit log's write entries (stage ResponseComplete), as the drills read them.
fn read_audit_log(path: &PathBuf) -> Vec<Write> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["stage"] == "ResponseComplete")
        .filter_map(|entry| {
            let method = match entry["verb"].as_str()? {
                "create" => "POST",
                "update" => "PUT",
                "patch" => "PATCH",
                "delete" | "deletecollection" => "DELETE",
                _ => return None,
            };
            let received: k8s_openapi::jiff::Timestamp =
                entry["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            let uri = entry["requestURI"].as_str()?;
            Some(Write {
                received: SystemTime::UNIX_EPOCH
                    + Duration::from_nanos(u64::try_from(received.as_nanosecond()).ok()?),
                method: method.to_string(),
                path: uri.split('?').next().unwrap_or(uri).to_string(),
                user_agent: entry["userAgent"].as_str().unwrap_or("").to_string(),
                code: entry["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_leader_drills_kill_term_and_freeze_on_kube_apiserver() {
    let audit_log: PathBuf = std::env::var_os("FERROKUBE_AUDIT_LOG")
        .expect("FERROKUBE_AUDIT_LOG (scripts/kube-apiserver.sh env) names the server's audit log")
        .into();
    let kubeconfig: PathBuf = std::env::var_os("KUBECONFIG")
        .expect("KUBECONFIG names the real server's kubeconfig")
        .into();
    let folder = std::env::temp_dir().join(format!("ferrokube-e2e-leader-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a folder for the drill");
    let namespace = format!(
        "leader-drills-{}",
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    );
    let cluster = Cluster {
        kubeconfig,
        client: common::client(None),
        audit: Box::new(move || read_audit_log(&audit_log)),
        timing: Timing {
            lease: Duration::from_secs(15),
            renew: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        },
        slack: Duration::from_secs(3),
        freeze: Duration::from_secs(20),
        logs: folder.clone(),
    };
    let report = drills::run(&cluster, &namespace).await;
    eprintln!("leader drills on kube-apiserver: {report:?}");
    let _ = std::fs::remove_dir_all(&folder);
}
