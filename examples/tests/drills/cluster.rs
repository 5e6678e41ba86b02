//! The leader-election drills of the ReplicaSet sample, shared by `leader.rs` (the embedded API
//! server, in `cargo test`) and `leader_e2e.rs` (the real kube-apiserver, in `scripts/e2e.sh`).
//!
//! Three replicas of the sample (the binary `replicaset` of this package, `CARGO_BIN_EXE_replicaset`) run with
//! `--leader-elect`, each with its own identity and so its own User-Agent
//! (`ferrokube-replicaset/<identity>`). The server's audit log tells their writes apart.
//!
//! | drill | what is done to the leader | what must happen |
//! |---|---|---|
//! | kill | SIGKILL, and a ReplicaSet scaled up at once | another replica holds the lease within lease duration + retry period (+ slack) and converges the ReplicaSet |
//! | term | SIGTERM, and a ReplicaSet scaled up | the leader exits 0, its lease is released, another leads within retry period + 1 s and converges |
//! | stop | SIGSTOP for a while, a ReplicaSet scaled up then down, then SIGCONT | another leads and converges; the frozen replica makes no write at all after it was frozen (it wakes, sees its lease ran out, steps down and exits 1) |
//!
//! After all three: the pods created and deleted, counted from the audit log over every replica,
//! are exactly what the scaling asked for (no over-creation, no over-deletion).

#![allow(dead_code)] // each test target uses its own subset

pub mod shard;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use ferrokube::api::{Patch, PatchParams, PostParams};
use ferrokube::{Api, Client};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::json;
use tokio::process::{Child, Command};

/// One write request as an audit log records it (the embedded server's, or kube-apiserver's read
/// by [`read_kube_apiserver_log`](ferrokube::apiserver::audit::read_kube_apiserver_log)).
pub use ferrokube::apiserver::AuditEntry as Write;

use ferrokube_examples::shared::replica_set::replica_set;

/// Where the drills run.
pub struct Cluster {
    pub kubeconfig: PathBuf,
    pub client: Client,
    /// Every write request the server has logged so far.
    pub audit: Box<dyn Fn() -> Vec<Write> + Send + Sync>,
    pub timing: Timing,
    /// Extra time allowed over each bound, for process start-up and a busy machine.
    pub slack: Duration,
    /// How long the stop drill keeps the leader frozen.
    pub freeze: Duration,
    /// Folder for the replicas' logs.
    pub logs: PathBuf,
}

impl Cluster {
    /// The embedded server (stand-in kubelet, audit log on) and the drills' settings for it: short
    /// leases (1.5 s lease, 1 s renew deadline, 0.25 s retry period) and a 5 s freeze, so that a
    /// whole run takes seconds. `name` names the folder of the replicas' logs.
    pub async fn embedded(name: &str) -> (ferrokube::apiserver::RunningServer, Cluster) {
        let server = ferrokube::apiserver::ApiServer::new()
            .kubelet(ferrokube::apiserver::KubeletSettings::default())
            .audit(true)
            .start()
            .await
            .expect("embedded server starts");
        let logs = logs_folder(name);
        let kubeconfig = logs.join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("write the kubeconfig");
        let client = Client::new(ferrokube::Config {
            qps: None,
            ..ferrokube::Config::new(server.url().parse().expect("the server's URL"))
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
            logs,
        };
        (server, cluster)
    }

    /// The real kube-apiserver of `scripts/e2e.sh` (`$KUBECONFIG`, and its audit log at
    /// `$FERROKUBE_AUDIT_LOG`) with client-go's durations (15 s, 10 s, 2 s) and a 20 s freeze.
    pub fn kube_apiserver(name: &str) -> Cluster {
        let audit_log: PathBuf = std::env::var_os("FERROKUBE_AUDIT_LOG")
            .expect(
                "FERROKUBE_AUDIT_LOG (scripts/kube-apiserver.sh env) names the server's audit log",
            )
            .into();
        let kubeconfig: PathBuf = std::env::var_os("KUBECONFIG")
            .expect("KUBECONFIG names the real server's kubeconfig")
            .into();
        let mut config =
            ferrokube::Config::from_kubeconfig_files(std::slice::from_ref(&kubeconfig), None)
                .expect("the kubeconfig loads");
        // The drills poll the server often; the client's default 5 QPS would only slow them.
        config.qps = Some(200.0);
        config.burst = 400;
        Cluster {
            kubeconfig,
            client: Client::new(config).expect("client"),
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
            logs: logs_folder(name),
        }
    }

    /// Removes the replicas' logs (kept when a drill fails, for a look).
    pub fn clean_up(&self) {
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}

/// A fresh folder for one run's logs, under the temporary directory.
fn logs_folder(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("ferrokube-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("a folder for the drill");
    folder
}

/// `prefix-<seconds since the epoch>`: a namespace of its own on a server that outlives the run.
pub fn unique_namespace(prefix: &str) -> String {
    let seconds = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{prefix}-{seconds}")
}

/// The pods the sample's replicas created and deleted in `namespace` (successful requests only),
/// from the server's audit log.
pub fn pod_writes(writes: &[Write], namespace: &str) -> (usize, usize) {
    let pods_path = format!("/api/v1/namespaces/{namespace}/pods");
    let ours = |w: &&Write| w.user_agent.starts_with("ferrokube-replicaset/");
    let created = writes
        .iter()
        .filter(ours)
        .filter(|w| w.method == "POST" && w.path == pods_path && w.code == 201)
        .count();
    let deleted = writes
        .iter()
        .filter(ours)
        .filter(|w| w.method == "DELETE" && w.path.starts_with(&pods_path) && w.code == 200)
        .count();
    (created, deleted)
}

/// The leader-election durations every replica gets.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub lease: Duration,
    pub renew: Duration,
    pub retry: Duration,
}

/// The sample's binary, as cargo builds it for this package's tests (`CARGO_BIN_EXE_replicaset`):
/// cargo guarantees it is there, whatever test-name filter `cargo test` was given.
pub fn sample_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_replicaset"))
}

/// One replica of the sample.
pub struct Replica {
    pub identity: String,
    child: Child,
    log: PathBuf,
}

impl Replica {
    /// A replica with `--leader-elect`.
    pub fn start(cluster: &Cluster, namespace: &str, identity: &str) -> Replica {
        Replica::start_with(cluster, namespace, identity, &["--leader-elect"])
    }

    /// A replica with `mode` (`--leader-elect`, or `--shard-ring NAME`), the cluster's lease
    /// durations, its own log, and every sync appended to `<logs>/reconciles.jsonl`.
    pub fn start_with(
        cluster: &Cluster,
        namespace: &str,
        identity: &str,
        mode: &[&str],
    ) -> Replica {
        let log = cluster.logs.join(format!("{identity}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("replica log");
        let seconds = |d: Duration| format!("{}", d.as_secs_f64());
        let child = Command::new(sample_binary())
            .args(["--kubeconfig", &cluster.kubeconfig.to_string_lossy()])
            .args(mode)
            .args(["--identity", identity])
            .args([
                "--reconcile-log",
                &cluster.logs.join("reconciles.jsonl").to_string_lossy(),
            ])
            .args(["--lease-namespace", namespace])
            .args(["--lease-duration", &seconds(cluster.timing.lease)])
            .args(["--renew-deadline", &seconds(cluster.timing.renew)])
            .args(["--retry-period", &seconds(cluster.timing.retry)])
            .args(["--qps", "50", "--burst", "100"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("start a replica");
        Replica {
            identity: identity.to_string(),
            child,
            log,
        }
    }

    pub fn user_agent(&self) -> String {
        format!("ferrokube-replicaset/{}", self.identity)
    }

    fn pid(&self) -> String {
        self.child.id().expect("a running replica").to_string()
    }

    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args(["-s", signal, &self.pid()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {signal} {}", self.identity);
    }

    pub fn kill(&mut self) {
        self.child.start_kill().expect("SIGKILL a replica");
    }

    /// Waits for the process to exit; its exit code (None: killed by a signal).
    pub async fn exit_code(&mut self, within: Duration) -> Option<i32> {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => status.code(),
            Ok(Err(error)) => panic!("waiting for {}: {error}", self.identity),
            Err(_) => panic!(
                "{} did not exit within {within:?}; its log:\n{}",
                self.identity,
                self.log_text()
            ),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The lease's holder, if any (an empty holder, as a release leaves it, is none).
pub async fn holder(client: &Client, namespace: &str) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), namespace)
        .get("ferrokube-replicaset")
        .await
        .ok()?;
    lease
        .spec
        .and_then(|spec| spec.holder_identity)
        .filter(|holder| !holder.is_empty())
}

/// Polls every 20 ms until `check` returns `Some`, or panics after `within` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn scale(client: &Client, namespace: &str, name: &str, replicas: i32) {
    Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scale a ReplicaSet");
}

/// Each ReplicaSet has exactly its `replicas` live pods and a current status saying so. (Not
/// readiness: the real API server of the e2e run has no kubelet.)
pub async fn converged(client: &Client, namespace: &str, want: &[(&str, i32)]) -> bool {
    let Ok(replicasets) = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .list(&Default::default())
        .await
    else {
        return false;
    };
    let Ok(pods) = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&Default::default())
        .await
    else {
        return false;
    };
    want.iter().all(|(name, replicas)| {
        let Some(rs) = replicasets
            .items
            .iter()
            .find(|rs| rs.metadata.name.as_deref() == Some(name))
        else {
            return false;
        };
        let live = pods
            .items
            .iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| {
                ferrokube::controller::owner::controller_of(&pod.metadata)
                    .is_some_and(|owner| Some(&owner.uid) == rs.metadata.uid.as_ref())
            })
            .count() as i32;
        let status = rs.status.as_ref();
        live == *replicas
            && rs.spec.replicas == Some(*replicas)
            && status.is_some_and(|s| s.replicas == *replicas)
            && status.and_then(|s| s.observed_generation) == rs.metadata.generation
    })
}

/// Waits for a leader among `replicas`; its index.
async fn leader_among(
    cluster: &Cluster,
    namespace: &str,
    replicas: &[Replica],
    within: Duration,
) -> usize {
    eventually("a leader among the replicas", within, || async {
        let holder = holder(&cluster.client, namespace).await?;
        replicas.iter().position(|r| r.identity == holder)
    })
    .await
}

/// The figures the drills measured.
#[derive(Debug, Default)]
pub struct Report {
    pub kill_takeover: Duration,
    pub term_handover: Duration,
    pub stop_takeover: Duration,
}

/// Runs the three drills in `namespace` (created here). Panics on any broken promise.
pub async fn run(cluster: &Cluster, namespace: &str) -> Report {
    let client = &cluster.client;
    let Timing { lease, retry, .. } = cluster.timing;
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("namespace"),
        )
        .await
        .expect("create the drills' namespace");
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    for name in ["a", "b", "c"] {
        replicasets
            .create(
                &PostParams::default(),
                &replica_set(name, 2).expect("a ReplicaSet"),
            )
            .await
            .expect("create a ReplicaSet");
    }
    let mut want = vec![("a", 2), ("b", 2), ("c", 2)];
    let mut replicas: Vec<Replica> = ["r1", "r2", "r3"]
        .iter()
        .map(|id| Replica::start(cluster, namespace, id))
        .collect();
    let startup = lease + retry * 3 + cluster.slack * 4;
    leader_among(cluster, namespace, &replicas, startup).await;
    let converge = lease * 2 + cluster.slack * 4;
    eventually("first convergence", converge, || async {
        converged(client, namespace, &want).await.then_some(())
    })
    .await;
    let mut report = Report::default();

    // Drill 1: SIGKILL the leader; another must take over within lease + retry.
    let leader = leader_among(cluster, namespace, &replicas, startup).await;
    let mut killed = replicas.remove(leader);
    let killed_at = Instant::now();
    killed.kill();
    scale(client, namespace, "a", 4).await;
    want[0].1 = 4;
    let bound = lease + retry + cluster.slack;
    leader_among(cluster, namespace, &replicas, bound).await;
    report.kill_takeover = killed_at.elapsed();
    assert!(
        report.kill_takeover <= bound,
        "takeover after SIGKILL took {:?} (bound {bound:?})",
        report.kill_takeover
    );
    eventually("convergence after the kill", converge, || async {
        converged(client, namespace, &want).await.then_some(())
    })
    .await;
    let _ = killed.exit_code(Duration::from_secs(10)).await;
    replicas.push(Replica::start(cluster, namespace, "r4"));

    // Drill 2: SIGTERM the leader: it releases the lease and exits 0; another leads at once.
    let leader = leader_among(cluster, namespace, &replicas, startup).await;
    let mut stopped = replicas.remove(leader);
    let termed_at = Instant::now();
    stopped.signal("TERM");
    let bound = retry + Duration::from_secs(1) + cluster.slack;
    leader_among(cluster, namespace, &replicas, bound).await;
    report.term_handover = termed_at.elapsed();
    assert!(
        report.term_handover <= bound,
        "handover after SIGTERM took {:?} (bound {bound:?})",
        report.term_handover
    );
    let code = stopped.exit_code(Duration::from_secs(30)).await;
    assert_eq!(
        code,
        Some(0),
        "a SIGTERMed replica exits 0; its log:\n{}",
        stopped.log_text()
    );
    scale(client, namespace, "b", 3).await;
    want[1].1 = 3;
    eventually("convergence after the graceful stop", converge, || async {
        converged(client, namespace, &want).await.then_some(())
    })
    .await;
    replicas.push(Replica::start(cluster, namespace, "r5"));

    // Drill 3: SIGSTOP the leader past its lease; others take over; SIGCONT: it must not write.
    let leader = leader_among(cluster, namespace, &replicas, startup).await;
    let mut frozen = replicas.remove(leader);
    frozen.signal("STOP");
    let frozen_at = SystemTime::now();
    let stopped_at = Instant::now();
    scale(client, namespace, "c", 5).await;
    want[2].1 = 5;
    let bound = lease + retry + cluster.slack;
    leader_among(cluster, namespace, &replicas, bound).await;
    report.stop_takeover = stopped_at.elapsed();
    eventually(
        "convergence while the old leader is frozen",
        converge,
        || async { converged(client, namespace, &want).await.then_some(()) },
    )
    .await;
    // Keep it frozen for the drill's whole duration (the freeze is the drill, not a wait).
    tokio::time::sleep(cluster.freeze.saturating_sub(stopped_at.elapsed())).await;
    scale(client, namespace, "c", 3).await;
    want[2].1 = 3;
    frozen.signal("CONT");
    let code = frozen.exit_code(lease * 2 + cluster.slack * 4).await;
    assert_eq!(
        code,
        Some(1),
        "a replica that lost its lease exits 1; its log:\n{}",
        frozen.log_text()
    );
    eventually("convergence after the freeze", converge, || async {
        converged(client, namespace, &want).await.then_some(())
    })
    .await;

    // The audit: nothing from the frozen replica once frozen (a request already on the wire at
    // SIGSTOP may arrive a moment later: 200 ms).
    let writes = (cluster.audit)();
    let late: Vec<&Write> = writes
        .iter()
        .filter(|w| w.user_agent == frozen.user_agent())
        .filter(|w| w.received > frozen_at + Duration::from_millis(200))
        .collect();
    assert!(
        late.is_empty(),
        "the frozen replica wrote after it was frozen: {late:#?}\nits log:\n{}",
        frozen.log_text()
    );
    // No over-creation, no over-deletion: exactly what the scaling asked for.
    let (created, deleted) = pod_writes(&writes, namespace);
    assert_eq!(
        created,
        6 + 2 + 1 + 3,
        "pods created: 6 at first, then +2, +1, +3"
    );
    assert_eq!(deleted, 2, "pods deleted: c from 5 to 3");

    for replica in &replicas {
        replica.signal("TERM");
    }
    for replica in &mut replicas {
        let code = replica.exit_code(Duration::from_secs(30)).await;
        assert_eq!(
            code,
            Some(0),
            "{} exits 0 on SIGTERM; its log:\n{}",
            replica.identity,
            replica.log_text()
        );
    }
    report
}
