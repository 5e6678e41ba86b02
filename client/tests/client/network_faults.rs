//! Network faults that give no signal, through a proxy that misbehaves on command
//! (`testkit/src/fault_proxy.rs`):
//!
//! - **dead_connection**: every open connection freezes (no byte either way, no FIN, no RST), a
//!   ConfigMap is created meanwhile, and the informer must deliver it on a new connection by
//!   resuming its watch, never relisting. Measured on HTTP/1.1 (the reflector's idle deadline)
//!   and on HTTP/2 over TLS (pings plus the idle deadline). With `--features e2e` the same drill
//!   (`client/tests/client/e2e/network_faults.rs`) runs on a real kube-apiserver beside a client-go v0.37
//!   informer behind the same proxy, frozen at the same instant, and prints both times.
//! - **lease_window**: a leader whose renewals stop while its controller's new connections are
//!   delayed past the gate's deadline: zero writes may reach the server after the gate closed
//!   (the server's audit log is the judge), and the writes caught in the window come back as
//!   `NotLeader`, unsent.
//!
//! Every wait is on a condition with a time limit; the times asserted are what the drills measure.

use ferrokube_testkit as common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fault_proxy::FaultProxy;
use common::lease_window::{
    LEASE_DURATION, Leader, RENEW_DEADLINE, Writes, wait_until, write_until_the_gate_closes,
};
use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::Config;
use ferrokube_client::ListWatch;
use ferrokube_client::api::PostParams;
use ferrokube_client::config::Kubeconfig;
use ferrokube_informer::HandlerFns;
use ferrokube_informer::ReflectorOptions;
use ferrokube_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

/// The informer must deliver the object created behind the frozen connection within this long:
/// half of client-go's ~45 s (its HTTP/2 health check: 30 s of silence, then a 15 s ping).
const DEAD_CONNECTION_GOAL: Duration = Duration::from_secs(22);

/// When the informer's handler first saw each name added after the sync.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<(String, Instant)>>>);

impl Arrivals {
    fn when(&self, name: &str) -> Option<Instant> {
        self.0
            .lock()
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, at)| *at)
    }
}

/// A client config for `server` that connects through `proxy` (TLS and token as the server's
/// kubeconfig says), without client-side rate limit.
fn config_through(server: &RunningServer, proxy: &FaultProxy) -> Config {
    let kubeconfig = Kubeconfig::parse(&server.kubeconfig()).expect("the server's kubeconfig");
    let mut config = Config::from_kubeconfig(&kubeconfig, None).expect("config");
    let scheme = if server.url().starts_with("https") {
        "https"
    } else {
        "http"
    };
    config.cluster_url = proxy.url(scheme).parse().expect("proxy url");
    config.qps = None;
    config
}

fn config_map(name: &str) -> ConfigMap {
    common::config_map(name, "1")
}

/// Starts an informer on `api` with the default reflector options and a handler recording adds.
async fn informer(api: &Api<ConfigMap>) -> (SharedIndexInformer<ConfigMap>, Arrivals) {
    let informer = SharedIndexInformer::builder(ListWatch::new(api.clone()))
        .reflector(ReflectorOptions::default())
        .build();
    let arrivals = Arrivals::default();
    let record = arrivals.clone();
    informer
        .add_event_handler(
            HandlerFns::new().on_add(move |cm: &Arc<ConfigMap>, initial| {
                if !initial {
                    let name = cm.metadata.name.clone().unwrap_or_default();
                    record.0.lock().push((name, Instant::now()));
                }
            }),
        )
        .expect("handler");
    informer.start().expect("start");
    assert!(informer.wait_for_cache_sync().await, "informer synced");
    (informer, arrivals)
}

/// The drill on the embedded server: returns the time from the freeze to the delivery.
async fn dead_connection_drill(tls: bool, http2: bool) -> Duration {
    let server = ApiServer::new()
        .tls(tls)
        .token("drill-token")
        .start()
        .await
        .expect("server starts");
    let direct = {
        let kubeconfig = Kubeconfig::parse(&server.kubeconfig()).expect("kubeconfig");
        let mut config = Config::from_kubeconfig(&kubeconfig, None).expect("config");
        config.qps = None;
        Client::new(config).expect("direct client")
    };
    let proxy = FaultProxy::start(server_addr(&server)).await;
    let mut config = config_through(&server, &proxy);
    config.http2 = http2;
    let client = Client::new(config).expect("proxied client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let direct_api: Api<ConfigMap> = Api::namespaced(direct, "default");

    let (informer, arrivals) = informer(&api).await;
    direct_api
        .create(&PostParams::default(), &config_map("before"))
        .await
        .expect("create before");
    assert!(
        wait_until(Duration::from_secs(10), || arrivals
            .when("before")
            .is_some())
        .await,
        "the informer sees a change through the proxy"
    );

    let frozen = proxy.freeze();
    assert!(frozen >= 1, "the watch's connection is frozen");
    let froze_at = Instant::now();
    direct_api
        .create(&PostParams::default(), &config_map("meanwhile"))
        .await
        .expect("create meanwhile");
    let delivered = wait_until(DEAD_CONNECTION_GOAL + Duration::from_secs(8), || {
        arrivals.when("meanwhile").is_some()
    })
    .await;
    assert!(
        delivered,
        "the object created behind the frozen connection never arrived"
    );
    let took = arrivals
        .when("meanwhile")
        .map(|at| at.saturating_duration_since(froze_at))
        .unwrap_or_default();
    let status = informer.reflector_status();
    eprintln!(
        "dead_connection (tls {tls}, http2 {http2}): delivered {took:?} after the freeze; lists {}, watches {}, idle resumes {}",
        status.lists(),
        status.watches(),
        status.idle_resumes()
    );
    assert_eq!(status.lists(), 1, "resumed, not relisted");
    assert!(
        took <= DEAD_CONNECTION_GOAL,
        "took {took:?}, more than the goal {DEAD_CONNECTION_GOAL:?}"
    );
    informer.stop();
    took
}

fn server_addr(server: &RunningServer) -> std::net::SocketAddr {
    let url: http::Uri = server.url().parse().expect("server url");
    let authority = url.authority().expect("authority").as_str().to_string();
    authority.parse().expect("server address")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_http1_informer_resumes_without_relist() {
    dead_connection_drill(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_http2_informer_resumes_without_relist() {
    dead_connection_drill(true, true).await;
}

/// A plain `Api::watch` (no informer) whose connection freezes ends with `Error::Idle` at the
/// deadline it was given, instead of waiting forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_plain_watch_ends_with_idle_error() {
    use ferrokube_client::api::WatchParams;
    use futures_util::StreamExt;
    let server = ApiServer::new().start().await.expect("server starts");
    let proxy = FaultProxy::start(server_addr(&server)).await;
    let client = Client::new(config_through(&server, &proxy)).expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let params = WatchParams {
        idle_timeout: Some(Duration::from_millis(500)),
        ..WatchParams::default()
    };
    let mut watch = api.watch(&params, "0").await.expect("watch opens");
    proxy.freeze();
    let started = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the watch ends by itself");
    match end {
        Some(Err(ferrokube_client::Error::Idle { after, .. })) => {
            assert_eq!(after, Duration::from_millis(500))
        }
        other => panic!("expected Error::Idle, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

// ---------------------------------------------------------------------------------------------
// Pooled connections and writes.

/// A controller must act within this long of a freeze of every open connection: under half of
/// kube-controller-manager's ~41 s (measured 2026-11-28: its HTTP/2 health check), and well
/// under our 70 s of that day (writes sent one after another on frozen pooled connections).
const POOLED_WRITES_GOAL: Duration = Duration::from_secs(20);

/// How a pooled-writes drill went: all times from the freeze.
#[derive(Debug)]
struct PooledWrites {
    /// Connections through the proxy when it froze them (watch and pooled ones).
    frozen: usize,
    /// The informer delivered the change made behind the freeze (`None`: the writes did not
    /// wait for it).
    learned: Option<Duration>,
    /// The create succeeded.
    created: Duration,
    /// The update after it succeeded: the controller has acted.
    acted: Duration,
    /// Failed write attempts before the create went through.
    failed_attempts: u32,
    /// Connections the client opened after the freeze.
    fresh: usize,
}

/// The drill: a client with idle pooled connections (four requests at once just before) and an
/// informer's watch, all through one proxy; every open connection freezes; a ConfigMap is then
/// created directly (the world changes). With `learn_first`, the "controller" acts when its
/// informer delivers that change (as the ReplicaSet controller does: a create, then an update);
/// without, it writes at once after the freeze, retrying a failed write as a requeue would.
/// Each write attempt is bounded by the client's own deadlines only.
async fn pooled_writes_drill(tls: bool, http2: bool, learn_first: bool) -> PooledWrites {
    let server = ApiServer::new()
        .tls(tls)
        .token("drill-token")
        .start()
        .await
        .expect("server starts");
    let direct: Api<ConfigMap> = {
        let kubeconfig = Kubeconfig::parse(&server.kubeconfig()).expect("kubeconfig");
        let mut config = Config::from_kubeconfig(&kubeconfig, None).expect("config");
        config.qps = None;
        Api::namespaced(Client::new(config).expect("direct client"), "default")
    };
    let proxy = FaultProxy::start(server_addr(&server)).await;
    let mut config = config_through(&server, &proxy);
    config.http2 = http2;
    let client = Client::new(config).expect("proxied client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let (informer, arrivals) = informer(&api).await;
    direct
        .create(&PostParams::default(), &config_map("before"))
        .await
        .expect("create before");
    assert!(
        wait_until(Duration::from_secs(10), || arrivals
            .when("before")
            .is_some())
        .await,
        "the informer sees a change through the proxy"
    );
    // Busy just before the outage: four requests at once leave (over HTTP/1.1) up to four idle
    // connections in the pool, the most recently used first in line.
    let busy = futures_util::future::join_all((0..4).map(|_| api.get("before"))).await;
    assert!(busy.iter().all(Result::is_ok), "warm-up reads: {busy:?}");

    let frozen = proxy.freeze();
    let froze_at = Instant::now();
    // Over HTTP/2 the watch and the requests share one connection.
    let open_before = if http2 { 1 } else { 2 };
    assert!(
        frozen >= open_before,
        "a watch and a pooled connection are frozen: {frozen}"
    );
    direct
        .create(&PostParams::default(), &config_map("meanwhile"))
        .await
        .expect("create meanwhile");
    let learned = if learn_first {
        assert!(
            wait_until(POOLED_WRITES_GOAL, || arrivals.when("meanwhile").is_some()).await,
            "the informer never delivered the change made behind the freeze"
        );
        arrivals
            .when("meanwhile")
            .map(|at| at.saturating_duration_since(froze_at))
    } else {
        None
    };

    // The controller acts: a create, retried as a requeue would while it fails, then an update.
    let mut failed_attempts = 0;
    let created = loop {
        match api
            .create(&PostParams::default(), &config_map("acted"))
            .await
        {
            Ok(created) => break created,
            Err(error) => {
                failed_attempts += 1;
                eprintln!(
                    "pooled writes: create failed after {:?}: {error}",
                    froze_at.elapsed()
                );
                assert!(
                    froze_at.elapsed() < POOLED_WRITES_GOAL,
                    "no create within {POOLED_WRITES_GOAL:?} of the freeze ({failed_attempts} failed attempts, last: {error})"
                );
            }
        }
    };
    let created_after = froze_at.elapsed();
    let mut update = created;
    update.data = Some([("k".to_string(), "2".to_string())].into());
    let updated = api.replace("acted", &PostParams::default(), &update).await;
    let acted = froze_at.elapsed();
    informer.stop();
    let report = PooledWrites {
        frozen,
        learned,
        created: created_after,
        acted,
        failed_attempts,
        fresh: proxy.connections() - frozen,
    };
    eprintln!(
        "{}",
        serde_json::json!({
            "drill": "dead_connection_pooled_writes",
            "server": "ferrokube-apiserver",
            "tls": tls,
            "http2": http2,
            "learn_first": learn_first,
            "frozen_connections": report.frozen,
            "learned_s": report.learned.map(|d| d.as_secs_f64()),
            "created_s": report.created.as_secs_f64(),
            "acted_s": report.acted.as_secs_f64(),
            "failed_attempts": report.failed_attempts,
            "fresh_connections": report.fresh,
        })
    );
    updated.expect("the update after the create succeeds");
    assert!(
        report.fresh >= 1,
        "the writes went out on a fresh connection"
    );
    assert!(
        report.acted <= POOLED_WRITES_GOAL,
        "acted {:?} after the freeze, more than the goal {POOLED_WRITES_GOAL:?}",
        report.acted
    );
    report
}

/// The ReplicaSet drill of 2026-11-28 in small: the controller learns of the change through its
/// resumed watch (15 s), and its writes must not take the frozen pooled connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_http1_pooled_writes_after_the_watch_resumes() {
    let report = pooled_writes_drill(false, false, true).await;
    assert_eq!(report.failed_attempts, 0, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_http2_pooled_writes_after_the_watch_resumes() {
    let report = pooled_writes_drill(true, true, true).await;
    assert_eq!(report.failed_attempts, 0, "{report:?}");
}

/// Writes at once after the freeze: the first goes out on a frozen connection (nothing can tell
/// yet) and fails at the write deadline; the next must go out on a fresh connection, not on the
/// next frozen one in the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_http1_pooled_writes_at_once() {
    let report = pooled_writes_drill(false, false, false).await;
    assert!(report.failed_attempts <= 1, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_http2_pooled_writes_at_once() {
    let report = pooled_writes_drill(true, true, false).await;
    assert!(report.failed_attempts <= 1, "{report:?}");
}

// ---------------------------------------------------------------------------------------------
// The lease window.

/// A leader elects itself through a proxy of its own; its controller writes through a second
/// proxy, gated by the leadership, opening a new connection for every write (no idle pool).
/// Then the elector's proxy freezes (renewals stop) and the controller's proxy delays every new
/// connection by more than the margin between the renew deadline and the lease's end. Writes keep
/// being attempted until well past the deadline. The embedded server's audit log must show no
/// write of the controller received after the gate closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_window_no_write_lands_after_the_gate_closes() {
    let server = ApiServer::new()
        .tls(true)
        .token("drill-token")
        .audit(true)
        .start()
        .await
        .expect("server starts");
    let elector_proxy = FaultProxy::start(server_addr(&server)).await;
    let writer_proxy = FaultProxy::start(server_addr(&server)).await;
    let elector_client = Client::new(config_through(&server, &elector_proxy)).expect("client");
    let writer_client = {
        let mut config = config_through(&server, &writer_proxy);
        config.max_idle_conns_per_host = 0;
        config.user_agent = Some("lease-window-writer".into());
        config.retry = ferrokube_client::client::RetryPolicy {
            max_retries: 0,
            ..Default::default()
        };
        Client::new(config).expect("client")
    };

    let leader = Leader::elect(elector_client, "default", "window").await;
    let leadership = leader.leadership.clone();
    let gated = writer_client.with_write_gate(leadership.clone());
    let api: Api<ConfigMap> = Api::namespaced(gated, "default");
    api.create(&PostParams::default(), &config_map("w-first"))
        .await
        .expect("a write while leading lands");

    // Renewals stop; new controller connections take longer than the margin.
    elector_proxy.black_hole();
    writer_proxy
        .delay_new_connections(LEASE_DURATION - RENEW_DEADLINE + Duration::from_millis(500));
    let Writes {
        landed: landed_ok,
        caught,
        closed_at,
    } = write_until_the_gate_closes(&api, &leadership).await;
    let _ = leader.stop().await;

    let late: Vec<_> = server
        .audit_log()
        .entries()
        .into_iter()
        .filter(|entry| entry.user_agent == "lease-window-writer" && entry.received > closed_at)
        .collect();
    eprintln!(
        "lease_window: {landed_ok} writes landed, {caught} admitted and then stopped unsent in the window, {} received after the gate closed",
        late.len()
    );
    assert!(
        caught > 0,
        "the drill caught writes in the window (admitted, then stuck connecting past the deadline)"
    );
    assert!(
        late.is_empty(),
        "writes reached the server after the gate closed: {late:?}"
    );
}

/// A write whose request left but whose answer never came (its future dropped mid-flight) keeps
/// the elector from handing the lease back on shutdown: the lease is left to run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_window_an_abandoned_write_keeps_the_lease_from_being_released() {
    let server = ApiServer::new()
        .tls(true)
        .token("drill-token")
        .start()
        .await
        .expect("server starts");
    let direct = {
        let kubeconfig = Kubeconfig::parse(&server.kubeconfig()).expect("kubeconfig");
        Client::new(Config::from_kubeconfig(&kubeconfig, None).expect("config")).expect("client")
    };
    let writer_proxy = FaultProxy::start(server_addr(&server)).await;
    let writer_client = {
        let mut config = config_through(&server, &writer_proxy);
        config.retry = ferrokube_client::client::RetryPolicy {
            max_retries: 0,
            ..Default::default()
        };
        Client::new(config).expect("client")
    };
    let leader = Leader::elect(direct, "default", "abandon").await;
    let leadership = leader.leadership.clone();
    let api: Api<ConfigMap> =
        Api::namespaced(writer_client.with_write_gate(leadership.clone()), "default");
    // Warm the connection, then freeze it with the next write on it: that write leaves (its
    // bytes reach the proxy) but its answer never comes; the reconcile is aborted.
    api.create(&PostParams::default(), &config_map("warm"))
        .await
        .expect("warm-up write");
    writer_proxy.freeze();
    // The write must leave: its bytes reach the frozen proxy. Under load a renewal of this short
    // lease can come late, and the gate then refuses the write unsent (as it must); the write is
    // tried again once the elector leads again. Anything else stopping it fails the test.
    let mut attempts = 0;
    let write = loop {
        attempts += 1;
        assert!(attempts <= 20, "the write never left in 20 attempts");
        assert!(
            wait_until(Duration::from_secs(20), || leadership.is_leader()).await,
            "the candidate leads"
        );
        let write = tokio::spawn({
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map("lost"))
                    .await
            }
        });
        wait_until(Duration::from_secs(10), || {
            writer_proxy.held_bytes() > 0 || write.is_finished()
        })
        .await;
        if writer_proxy.held_bytes() > 0 {
            break write;
        }
        assert!(
            write.is_finished(),
            "the write's request reached the frozen proxy"
        );
        let refused = write.await;
        assert!(
            matches!(&refused, Ok(Err(e)) if e.is_not_leader()),
            "only the lease gate may stop the write before it leaves: {refused:?}"
        );
    };
    write.abort();
    let _ = write.await;

    let outcome = leader.stop().await;
    assert_eq!(
        outcome,
        ferrokube_runtime::leader::RunOutcome::ShutdownWhileLeading { released: false },
        "an abandoned write in flight must keep the lease from being released early"
    );
}

/// The client's connections carry TCP keepalive (Go's dialer: 30 s): the kernel shows a keepalive
/// timer on an idle pooled connection (`/proc/net/tcp`, column `tr` = 2), and none when
/// `Config::tcp_keepalive` is `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_client_sockets_have_tcp_keepalive() {
    let server = ApiServer::new().start().await.expect("server starts");
    let port = server_addr(&server).port();
    // The timer column of every established connection to the server's port, by local port.
    let timers = || -> Vec<(u16, String)> {
        let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
        table
            .lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let local = fields.get(1)?;
                let remote = fields.get(2)?;
                let state = fields.get(3)?;
                let timer = fields.get(5)?;
                let remote_port = u16::from_str_radix(remote.rsplit(':').next()?, 16).ok()?;
                let local_port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
                // 01: ESTABLISHED.
                (remote_port == port && *state == "01").then(|| {
                    (
                        local_port,
                        timer.split(':').next().unwrap_or("").to_string(),
                    )
                })
            })
            .collect()
    };
    for keepalive in [true, false] {
        let mut config = Config::new(server.url().parse().expect("url"));
        config.qps = None;
        if !keepalive {
            config.tcp_keepalive = None;
        }
        let client = Client::new(config).expect("client");
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let before: Vec<u16> = timers().into_iter().map(|(port, _)| port).collect();
        api.list(&Default::default()).await.expect("list");
        // The list's connection is now idle in the pool.
        let mine: Vec<(u16, String)> = timers()
            .into_iter()
            .filter(|(port, _)| !before.contains(port))
            .collect();
        assert!(!mine.is_empty(), "the pooled connection is established");
        for (local, timer) in &mine {
            if keepalive {
                assert_eq!(
                    timer, "02",
                    "connection from port {local}: a keepalive timer"
                );
            } else {
                assert_eq!(timer, "00", "connection from port {local}: no timer");
            }
        }
        drop(api);
        drop(client);
    }
}
