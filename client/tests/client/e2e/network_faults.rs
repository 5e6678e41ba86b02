//! Network faults on a real kube-apiserver: the dead-connection drill, ours beside client-go
//! v0.37, and the lease-window drill, judged by the server's audit log. Run by
//! `scripts/e2e.sh`, which builds the client-go side with
//! `benches/peers/client-go-v0.37/build.sh deadconn` and names it in
//! `FERROKUBE_CLIENT_GO_DEADCONN`).
//!
//! Three informers on the ConfigMaps of one namespace all reach the server through one
//! [`FaultProxy`]: ours over HTTP/1.1 (the default), ours over HTTP/2, and client-go's (its
//! defaults: HTTP/2, health-check pings after 30 s of silence, 15 s to answer). Once each has
//! delivered a first change, every connection through the proxy freezes at the same instant (no
//! byte, no FIN, no RST), a ConfigMap is created directly, and the drill measures how long each
//! informer takes to deliver it, and whether it relisted to get there.
//!
//! Asserted: ours deliver it in at most half of client-go's time, without a relist. Printed: one
//! JSON line with every figure (`benches/dead-connection/` keeps the recorded runs).
//!
//! The lease-window drill is `network_faults.rs`'s on this server: renewals stop (the elector's
//! proxy becomes a black hole) while the controller's new connections take longer than the
//! margin between renew deadline and lease duration; kube-apiserver's audit log must show no
//! write of the controller received after the gate closed.

use ferrokube_testkit as common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fault_proxy::FaultProxy;
use common::lease_window::{
    LEASE_DURATION, Leader, RENEW_DEADLINE, Writes, wait_until, write_until_the_gate_closes,
};
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::ListWatch;
use ferrokube_client::api::PostParams;
use ferrokube_client::config::kubeconfig_paths;
use ferrokube_informer::HandlerFns;
use ferrokube_informer::ReflectorOptions;
use ferrokube_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use serde_json::{Value, json};

/// The longest any informer may take to deliver the change made behind the frozen connection.
const LIMIT: Duration = Duration::from_secs(150);

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// When each name was added (Unix ms), after the sync.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<(String, u128)>>>);

impl Arrivals {
    fn when(&self, name: &str) -> Option<u128> {
        self.0
            .lock()
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, at)| *at)
    }
    fn record(&self, name: String) {
        self.0.lock().push((name, now_ms()));
    }
}

async fn ours(api: Api<ConfigMap>) -> (SharedIndexInformer<ConfigMap>, Arrivals) {
    let informer = SharedIndexInformer::builder(ListWatch::new(api))
        .reflector(ReflectorOptions::default())
        .build();
    let arrivals = Arrivals::default();
    let record = arrivals.clone();
    informer
        .add_event_handler(
            HandlerFns::new().on_add(move |cm: &Arc<ConfigMap>, initial| {
                if !initial {
                    record.record(cm.metadata.name.clone().unwrap_or_default());
                }
            }),
        )
        .expect("handler");
    informer.start().expect("start");
    assert!(informer.wait_for_cache_sync().await, "synced");
    (informer, arrivals)
}

/// The client-go informer as a child process; its JSON lines are collected by a thread.
struct ClientGo {
    child: Child,
    arrivals: Arrivals,
    lists: Arc<Mutex<u64>>,
    watches: Arc<Mutex<u64>>,
    synced: Arc<Mutex<bool>>,
}

impl ClientGo {
    fn start(kubeconfig: &std::path::Path, namespace: &str) -> ClientGo {
        let binary = std::env::var("FERROKUBE_CLIENT_GO_DEADCONN").expect(
            "FERROKUBE_CLIENT_GO_DEADCONN names the client-go drill binary: run \
             `benches/peers/client-go-v0.37/build.sh deadconn` (scripts/e2e.sh does)",
        );
        let mut child = Command::new(binary)
            .args(["--kubeconfig"])
            .arg(kubeconfig)
            .args(["--namespace", namespace])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("client-go drill starts");
        let stdout = child.stdout.take().expect("stdout");
        let arrivals = Arrivals::default();
        let lists = Arc::new(Mutex::new(0));
        let watches = Arc::new(Mutex::new(0));
        let synced = Arc::new(Mutex::new(false));
        {
            let (arrivals, lists, watches, synced) = (
                arrivals.clone(),
                lists.clone(),
                watches.clone(),
                synced.clone(),
            );
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { return };
                    let Ok(event) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    let at = event["unix_ms"].as_u64().unwrap_or_default() as u128;
                    match event["event"].as_str() {
                        Some("list") => *lists.lock() += 1,
                        Some("watch") => *watches.lock() += 1,
                        Some("synced") => *synced.lock() = true,
                        Some("added") => arrivals
                            .0
                            .lock()
                            .push((event["name"].as_str().unwrap_or_default().to_string(), at)),
                        _ => {}
                    }
                }
            });
        }
        ClientGo {
            child,
            arrivals,
            lists,
            watches,
            synced,
        }
    }
}

impl Drop for ClientGo {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.flush();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The kubeconfig at `$KUBECONFIG` (the first file), with its server replaced by `server`, written
/// next to it (so its relative paths still resolve).
fn kubeconfig_through(server: &str) -> std::path::PathBuf {
    let original = kubeconfig_paths()
        .into_iter()
        .next()
        .expect("KUBECONFIG names a kubeconfig");
    let text = std::fs::read_to_string(&original).expect("kubeconfig readable");
    let rewritten: String = text
        .lines()
        .map(|line| match line.find("server:") {
            Some(at) => format!("{}server: {server}", &line[..at]),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let path = original.with_file_name(format!("kubeconfig-deadconn-{}", std::process::id()));
    std::fs::write(&path, rewritten).expect("kubeconfig written");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_connection_kube_apiserver_ours_beside_client_go() {
    let direct = common::client(None);
    let namespace = common::namespace(&direct, "deadconn").await;
    let direct_api: Api<ConfigMap> = Api::namespaced(direct.clone(), &namespace);

    let upstream_config = common::config(None);
    let authority = upstream_config
        .cluster_url
        .authority()
        .expect("server authority")
        .as_str()
        .to_string();
    let upstream: std::net::SocketAddr = authority.parse().expect("a loopback server address");
    let proxy = FaultProxy::start(upstream).await;
    let proxied = |http2: bool| {
        let mut config = common::config(None);
        config.cluster_url = proxy.url("https").parse().expect("proxy url");
        config.http2 = http2;
        Client::new(config).expect("client")
    };
    let (ours_h1, arrivals_h1) = ours(Api::namespaced(proxied(false), &namespace)).await;
    let (ours_h2, arrivals_h2) = ours(Api::namespaced(proxied(true), &namespace)).await;
    let kubeconfig = kubeconfig_through(&proxy.url("https"));
    let client_go = ClientGo::start(&kubeconfig, &namespace);
    assert!(
        wait_until(Duration::from_secs(60), || *client_go.synced.lock()).await,
        "client-go synced"
    );

    direct_api
        .create(&PostParams::default(), &common::config_map("before", "1"))
        .await
        .expect("create before");
    assert!(
        wait_until(Duration::from_secs(20), || {
            arrivals_h1.when("before").is_some()
                && arrivals_h2.when("before").is_some()
                && client_go.arrivals.when("before").is_some()
        })
        .await,
        "every informer sees a change through the proxy"
    );

    let frozen = proxy.freeze();
    let froze_at = now_ms();
    direct_api
        .create(
            &PostParams::default(),
            &common::config_map("meanwhile", "1"),
        )
        .await
        .expect("create meanwhile");
    let all = wait_until(LIMIT, || {
        arrivals_h1.when("meanwhile").is_some()
            && arrivals_h2.when("meanwhile").is_some()
            && client_go.arrivals.when("meanwhile").is_some()
    })
    .await;
    let took = |arrivals: &Arrivals| {
        arrivals
            .when("meanwhile")
            .map(|at| at.saturating_sub(froze_at) as f64 / 1000.0)
    };
    let (h1, h2, go) = (
        took(&arrivals_h1),
        took(&arrivals_h2),
        took(&client_go.arrivals),
    );
    let record = json!({
        "drill": "dead_connection",
        "server": std::env::var("FERROKUBE_DRILL_SERVER").unwrap_or_else(|_| "kube-apiserver".into()),
        "frozen_connections": frozen,
        "ferrokube_http1_s": h1,
        "ferrokube_http1_lists": ours_h1.reflector_status().lists(),
        "ferrokube_http1_watches": ours_h1.reflector_status().watches(),
        "ferrokube_http2_s": h2,
        "ferrokube_http2_lists": ours_h2.reflector_status().lists(),
        "ferrokube_http2_watches": ours_h2.reflector_status().watches(),
        "client_go": "v0.37.2",
        "client_go_s": go,
        "client_go_lists": *client_go.lists.lock(),
        "client_go_watches": *client_go.watches.lock(),
        "unix_ms": froze_at,
    });
    println!("{record}");
    if let Ok(path) = std::env::var("FERROKUBE_DRILL_RECORD") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("record file");
        writeln!(file, "{record}").expect("record written");
    }
    let _ = std::fs::remove_file(&kubeconfig);
    assert!(
        all,
        "not every informer delivered within {LIMIT:?}: {record}"
    );
    let (h1, h2, go) = (
        h1.unwrap_or(f64::MAX),
        h2.unwrap_or(f64::MAX),
        go.unwrap_or(f64::MAX),
    );
    assert_eq!(
        ours_h1.reflector_status().lists(),
        1,
        "HTTP/1.1: resumed, not relisted"
    );
    assert_eq!(
        ours_h2.reflector_status().lists(),
        1,
        "HTTP/2: resumed, not relisted"
    );
    assert!(
        h1 * 2.0 <= go && h2 * 2.0 <= go,
        "ours must take at most half of client-go's time: {record}"
    );
    ours_h1.stop();
    ours_h2.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_window_kube_apiserver_no_write_lands_after_the_gate_closes() {
    let audit_log = std::path::PathBuf::from(std::env::var("FERROKUBE_AUDIT_LOG").expect(
        "FERROKUBE_AUDIT_LOG names kube-apiserver's audit log (scripts/kube-apiserver.sh env)",
    ));
    let direct = common::client(None);
    let namespace = common::namespace(&direct, "window").await;
    let upstream_config = common::config(None);
    let authority = upstream_config
        .cluster_url
        .authority()
        .expect("server authority")
        .as_str()
        .to_string();
    let upstream: std::net::SocketAddr = authority.parse().expect("a loopback server address");
    let elector_proxy = FaultProxy::start(upstream).await;
    let writer_proxy = FaultProxy::start(upstream).await;
    let through = |proxy: &FaultProxy| {
        let mut config = common::config(None);
        config.cluster_url = proxy.url("https").parse().expect("proxy url");
        config
    };
    let elector_client = Client::new(through(&elector_proxy)).expect("client");
    let agent = format!("lease-window-writer-{}", std::process::id());
    let writer_client = {
        let mut config = through(&writer_proxy);
        config.max_idle_conns_per_host = 0;
        config.user_agent = Some(agent.clone());
        config.retry = ferrokube_client::client::RetryPolicy {
            max_retries: 0,
            ..Default::default()
        };
        Client::new(config).expect("client")
    };
    let leader = Leader::elect(elector_client, &namespace, "window").await;
    let leadership = leader.leadership.clone();
    let api: Api<ConfigMap> = Api::namespaced(
        writer_client.with_write_gate(leadership.clone()),
        &namespace,
    );
    api.create(&PostParams::default(), &common::config_map("w-first", "1"))
        .await
        .expect("a write while leading lands");

    elector_proxy.black_hole();
    writer_proxy
        .delay_new_connections(LEASE_DURATION - RENEW_DEADLINE + Duration::from_millis(500));
    let Writes {
        landed,
        caught,
        closed_at,
    } = write_until_the_gate_closes(&api, &leadership).await;
    let _ = leader.stop().await;
    // The audit log is written as requests finish; give the last ones a moment to appear.
    let mut late = Vec::new();
    let mut ours = 0;
    let settled = wait_until(Duration::from_secs(10), || {
        let entries =
            ferrokube_apiserver::audit::read_kube_apiserver_log(&audit_log).unwrap_or_default();
        let mine: Vec<_> = entries
            .into_iter()
            .filter(|e| e.user_agent == agent)
            .collect();
        ours = mine.len();
        late = mine
            .into_iter()
            .filter(|e| e.received > closed_at)
            .collect();
        ours >= landed
    })
    .await;
    let record = json!({
        "drill": "lease_window",
        "server": "kube-apiserver",
        "writes_landed": landed,
        "writes_stopped_in_window": caught,
        "writes_received_after_gate_closed": late.len(),
    });
    println!("{record}");
    assert!(
        settled,
        "the audit log shows every write that succeeded: {record}"
    );
    assert!(
        caught > 0,
        "the drill caught writes in the window: {record}"
    );
    assert!(
        late.is_empty(),
        "writes reached the server after the gate closed: {late:?}"
    );
}
