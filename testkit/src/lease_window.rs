//! The lease-window drill's moving parts, shared by `client/tests/client/network_faults.rs` (embedded
//! server) and `client/tests/client/e2e/network_faults.rs` (kube-apiserver): a leader with short durations, and
//! writers that keep writing through the leader's gate until it closes, noting when it closed.

#![allow(dead_code)] // each test target uses its own subset

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ferrokube_client::api::PostParams;
use ferrokube_client::{Api, Client};
use ferrokube_runtime::leader::{LeaderElectionError, LeaderElector, Leadership, RunOutcome};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

pub const LEASE_DURATION: Duration = Duration::from_millis(3000);
pub const RENEW_DEADLINE: Duration = Duration::from_millis(2000);
pub const RETRY_PERIOD: Duration = Duration::from_millis(300);

/// Polls `condition` every 20 ms until it holds or `limit` passes; true if it held.
pub async fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    condition()
}

/// A running elector with the short durations above, leading.
pub struct Leader {
    pub leadership: Leadership,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<RunOutcome, LeaderElectionError>>,
}

impl Leader {
    /// Elects `client`'s candidate for Lease `namespace/name` and waits until it leads.
    pub async fn elect(client: Client, namespace: &str, name: &str) -> Leader {
        let elector = LeaderElector::builder(client, namespace, name)
            .identity("leader")
            .lease_duration(LEASE_DURATION)
            .renew_deadline(RENEW_DEADLINE)
            .retry_period(RETRY_PERIOD)
            .build()
            .expect("elector");
        let leadership = elector.leadership();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            elector
                .run(async move {
                    let _ = stopped.await;
                })
                .await
        });
        assert!(
            wait_until(Duration::from_secs(20), || leadership.is_leader()).await,
            "the candidate leads"
        );
        Leader {
            leadership,
            stop,
            task,
        }
    }

    /// Shuts the elector down; how its run ended.
    pub async fn stop(self) -> RunOutcome {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the elector stops")
            .expect("elector task")
            .expect("elector ran")
    }
}

/// What the writers saw.
pub struct Writes {
    /// Writes that succeeded.
    pub landed: usize,
    /// Writes refused as `NotLeader` after waiting for a connection: admitted while the gate was
    /// open, then stopped unsent in the window.
    pub caught: usize,
    /// When the gate was seen closed (it closes at the last renewal's send time + renew deadline).
    pub closed_at: SystemTime,
}

/// Creates ConfigMaps through `api` (gated by `leadership`), four at a time, until the gate closes.
pub async fn write_until_the_gate_closes(api: &Api<ConfigMap>, leadership: &Leadership) -> Writes {
    let closed_at = Arc::new(Mutex::new(None::<SystemTime>));
    let watcher = {
        let (leadership, closed_at) = (leadership.clone(), closed_at.clone());
        tokio::spawn(async move {
            while leadership.is_leader() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            *closed_at.lock() = Some(SystemTime::now());
        })
    };
    let (mut landed, mut caught, mut step) = (0, 0, 0);
    while leadership.is_leader() {
        let mut batch = Vec::new();
        for _ in 0..4 {
            step += 1;
            let api = api.clone();
            batch.push(tokio::spawn(async move {
                let started = Instant::now();
                let cm = super::config_map(&format!("w-{step}"), "1");
                let result = api.create(&PostParams::default(), &cm).await;
                (result, started.elapsed())
            }));
        }
        for write in batch {
            match write.await.expect("writer task") {
                (Ok(_), _) => landed += 1,
                (Err(error), took)
                    if error.is_not_leader() && took > Duration::from_millis(100) =>
                {
                    caught += 1
                }
                (Err(error), _) if error.is_not_leader() => {}
                (Err(error), _) => panic!("unexpected error: {error}"),
            }
        }
    }
    assert!(
        wait_until(Duration::from_secs(5), || closed_at.lock().is_some()).await,
        "the gate closed"
    );
    watcher.abort();
    let closed_at = closed_at.lock().expect("closed");
    Writes {
        landed,
        caught,
        closed_at,
    }
}
