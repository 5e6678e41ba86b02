//! The manager (`ferrokube_runtime::manager`) against the embedded API server: its HTTP endpoint, warm
//! followers and takeover, the write gate of a follower, and a leader that loses its lease. (The
//! sample's graceful exit on SIGTERM is checked with the sample, in
//! `examples/tests/replicaset/demo.rs`.)

use ferrokube_testkit as common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_apiserver::WriteFailure;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::Error;
use ferrokube_client::api::PostParams;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::Reconciler;
use ferrokube_runtime::leader::LeaderState;
use ferrokube_runtime::manager::Manager;
use ferrokube_runtime::manager::ManagerBuilder;
use ferrokube_runtime::manager::ManagerError;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

async fn server() -> (RunningServer, Client) {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    (server, client)
}

async fn create_config_map(client: &Client, name: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .expect("create a ConfigMap");
}

/// Records `(replica, key, when)` for every reconcile.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(String, String, Instant)>>>);

struct Recording {
    replica: String,
    log: Log,
}

impl Reconciler<ConfigMap> for Recording {
    type Error = String;
    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: Context) -> Result<Action, String> {
        let key = cm.metadata.name.clone().unwrap_or_default();
        self.log
            .0
            .lock()
            .push((self.replica.clone(), key, Instant::now()));
        Ok(Action::await_change())
    }
}

/// A manager with a ConfigMap controller recording into `log` as `replica`.
fn manager(
    client: &Client,
    replica: &str,
    log: &Log,
    configure: impl FnOnce(ManagerBuilder) -> ManagerBuilder,
) -> Manager {
    let mut manager = configure(Manager::builder(client.clone()))
        .build()
        .expect("manager builds");
    let controller = manager
        .controller::<ConfigMap>(Scope::namespace("default"))
        .name(&format!("configmaps-{replica}"));
    manager.add_controller(
        controller,
        Recording {
            replica: replica.to_string(),
            log: log.clone(),
        },
    );
    manager
}

fn short_lease(replica: &str) -> impl FnOnce(ManagerBuilder) -> ManagerBuilder {
    let identity = replica.to_string();
    move |builder| {
        builder.leader_election_with("default", "manager-test", |elector| {
            elector
                .identity(identity)
                .lease_duration(Duration::from_millis(1500))
                .renew_deadline(Duration::from_millis(1000))
                .retry_period(Duration::from_millis(250))
        })
    }
}

/// `GET path` over plain HTTP/1.1: (status, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

async fn eventually(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_serves_healthz_readyz_and_metrics() {
    let (_server, client) = server().await;
    create_config_map(&client, "one").await;
    let log = Log::default();
    let manager = manager(&client, "solo", &log, |builder| {
        builder.serve("127.0.0.1:0".parse().unwrap())
    });
    let addr = manager.http_addr().expect("bound");
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async {
        let _ = stopped.await;
    }));

    eventually("/readyz answers 200", async || {
        get(addr, "/readyz").await.0 == 200
    })
    .await;
    let (status, body) = get(addr, "/readyz").await;
    assert_eq!(status, 200);
    assert!(body.contains("[+]informers-synced ok"), "{body}");
    let (status, body) = get(addr, "/healthz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("[+]ping ok"), "{body}");
    eventually("the ConfigMap reconciled", async || {
        !log.0.lock().is_empty()
    })
    .await;
    let (status, metrics) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    for family in [
        "controller_runtime_reconcile_total",
        "workqueue_adds_total",
        "controller_runtime_max_concurrent_reconciles",
    ] {
        assert!(
            metrics.contains(family),
            "/metrics lacks {family}:\n{metrics}"
        );
    }
    assert_eq!(get(addr, "/nothing-here").await.0, 404);

    let _ = stop.send(());
    running
        .await
        .expect("manager task")
        .expect("a manager stopped by its shutdown future returns Ok");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err() || get(addr, "/healthz").await.0 == 0,
        "the endpoint stops with the manager"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_leader_warm_follower_is_gated_then_takes_over_within_a_second() {
    let (_server, client) = server().await;
    for name in ["a", "b", "c"] {
        create_config_map(&client, name).await;
    }
    let log = Log::default();

    let first = manager(&client, "first", &log, short_lease("first"));
    let first_leads = first.leadership().expect("leader election on").clone();
    let (stop_first, first_stopped) = oneshot::channel::<()>();
    let first_run = tokio::spawn(first.run_until(async {
        let _ = first_stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(10), first_leads.acquired())
        .await
        .expect("the first manager is elected")
        .expect("elected");
    eventually("the leader reconciled all three", async || {
        log.0.lock().iter().filter(|(r, _, _)| r == "first").count() == 3
    })
    .await;

    let second = manager(&client, "second", &log, |builder| {
        short_lease("second")(builder).serve("127.0.0.1:0".parse().unwrap())
    });
    let second_leads = second.leadership().expect("leader election on").clone();
    let second_client = second.client();
    let second_addr = second.http_addr().expect("bound");
    let (stop_second, second_stopped) = oneshot::channel::<()>();
    let second_run = tokio::spawn(second.run_until(async {
        let _ = second_stopped.await;
    }));
    // Warm: the follower's caches sync (ready) while it does not lead.
    eventually("the follower is ready", async || {
        get(second_addr, "/readyz").await.0 == 200
    })
    .await;
    assert!(!second_leads.is_leader());
    assert!(
        log.0.lock().iter().all(|(r, _, _)| r == "first"),
        "a follower never reconciles"
    );
    // Its writes are refused before they are sent.
    let refused = Api::<ConfigMap>::namespaced(second_client, "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "from-follower"}})).unwrap(),
        )
        .await;
    assert!(
        matches!(refused, Err(Error::NotLeader { .. })),
        "a follower's write: {refused:?}"
    );
    let exists = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("from-follower")
        .await;
    assert!(
        exists.is_err(),
        "the refused write never reached the server"
    );

    // Graceful stop of the leader: release, and the warm follower reconciles within 1 s.
    let acquired_at = tokio::spawn({
        let second_leads = second_leads.clone();
        async move {
            second_leads
                .acquired()
                .await
                .expect("the second is elected");
            Instant::now()
        }
    });
    let _ = stop_first.send(());
    first_run
        .await
        .expect("first manager task")
        .expect("a graceful stop returns Ok");
    let acquired_at = tokio::time::timeout(Duration::from_secs(5), acquired_at)
        .await
        .expect("takeover after a release is quick")
        .expect("task");
    eventually("the new leader reconciled", async || {
        log.0.lock().iter().any(|(r, _, _)| r == "second")
    })
    .await;
    let first_reconcile = log
        .0
        .lock()
        .iter()
        .filter(|(r, _, _)| r == "second")
        .map(|(_, _, at)| *at)
        .min()
        .expect("a reconcile");
    let delay = first_reconcile.saturating_duration_since(acquired_at);
    eprintln!("first reconcile {delay:?} after acquiring the lease");
    assert!(
        delay <= Duration::from_secs(1),
        "first reconcile {delay:?} after acquiring"
    );

    let _ = stop_second.send(());
    second_run.await.expect("task").expect("stops with Ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_leader_that_cannot_renew_stops_and_reports_leadership_lost() {
    let (server, client) = server().await;
    create_config_map(&client, "a").await;
    let log = Log::default();
    let manager = manager(&client, "solo", &log, short_lease("solo"));
    let leadership = manager.leadership().expect("on").clone();
    let gated = manager.client();
    let running = tokio::spawn(manager.run_until(std::future::pending()));
    tokio::time::timeout(Duration::from_secs(10), leadership.acquired())
        .await
        .expect("elected")
        .expect("elected");
    eventually("reconciled", async || !log.0.lock().is_empty()).await;

    // Every write now fails: renewals too. The gate closes at the renew deadline, and the
    // manager stops its controllers and reports the loss.
    server
        .faults()
        .fail_writes(1.0, WriteFailure::InternalError);
    let outcome = tokio::time::timeout(Duration::from_secs(15), running)
        .await
        .expect("the manager ends by itself")
        .expect("task");
    assert!(
        matches!(outcome, Err(ManagerError::LeadershipLost)),
        "{outcome:?}"
    );
    assert!(!leadership.is_leader());
    server
        .faults()
        .fail_writes(0.0, WriteFailure::InternalError);
    let refused = Api::<ConfigMap>::namespaced(gated, "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap(),
        )
        .await;
    assert!(
        matches!(refused, Err(Error::NotLeader { .. })),
        "after losing the lease: {refused:?}"
    );
}

/// Issue 44, item 5: a follower asked to stop never takes the lease, however long its runnables
/// take to stop. (It took the lease released meanwhile, after its controllers had stopped, and
/// released it again: a leader that could lead nothing, and a second hand-over for the others.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_leader_author_trap_a_stopping_follower_never_takes_the_lease() {
    let (_server, client) = server().await;
    let log = Log::default();
    let first = manager(&client, "first", &log, short_lease("first"));
    let first_leads = first.leadership().expect("leader election on").clone();
    let (stop_first, first_stopped) = oneshot::channel::<()>();
    let first_run = tokio::spawn(first.run_until(async {
        let _ = first_stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(10), first_leads.acquired())
        .await
        .expect("the first manager is elected")
        .expect("elected");

    let mut second = manager(&client, "second", &log, short_lease("second"));
    let second_leads = second.leadership().expect("leader election on").clone();
    // A runnable that takes its time to stop: it returns only when the test lets it.
    let (let_go, held) = oneshot::channel::<()>();
    second.add("slow-to-stop", move |context| async move {
        context.stopped().await;
        let _ = held.await;
        Ok(())
    });
    let mut second_state = second_leads.watch();
    let (stop_second, second_stopped) = oneshot::channel::<()>();
    let second_run = tokio::spawn(second.run_until(async {
        let _ = second_stopped.await;
    }));
    tokio::time::timeout(
        Duration::from_secs(10),
        second_state.wait_for(|state| {
            matches!(state, LeaderState::Following { leader: Some(leader) } if leader == "first")
        }),
    )
    .await
    .expect("the second follows the first")
    .expect("elector alive");

    // The follower is asked to stop (SIGTERM); its slow runnable keeps the manager stopping.
    let _ = stop_second.send(());
    // The leader goes and hands the lease back.
    let _ = stop_first.send(());
    first_run
        .await
        .expect("first manager task")
        .expect("a graceful stop returns Ok");
    // The stopping follower's elector ends without campaigning further.
    let ended = tokio::time::timeout(
        Duration::from_secs(10),
        second_state.wait_for(|state| !matches!(state, LeaderState::Following { .. })),
    )
    .await
    .expect("the stopping follower's elector ends within 10 s")
    .expect("watch alive")
    .clone();
    assert_eq!(ended, LeaderState::Stopped, "it never led");
    let _ = let_go.send(());
    second_run.await.expect("task").expect("stops with Ok");
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client, "default")
        .get("manager-test")
        .await
        .expect("the lease");
    let holder = lease.spec.and_then(|spec| spec.holder_identity);
    assert!(
        holder.as_deref().is_none_or(|h| h != "second"),
        "the lease names {holder:?}"
    );
}
