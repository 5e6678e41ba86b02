//! The manager's HTTP endpoint under abuse: thousands of idle connections held open against it
//! while this process runs with a descriptor limit only a little above what those connections
//! take on the client side.
//!
//! Before the endpoint had a cap, every connection held a descriptor of the controller's process
//! until the client closed it. A few thousand idle sockets used up the limit, `accept` failed
//! (`EMFILE`) and was retried at once for ever (a core pinned), `/healthz` stopped answering (the
//! kubelet restarts such a pod), and the controller's own client could open no connection to the
//! API server. With the cap (512 by default, the oldest idle connection closed to admit a new one)
//! the endpoint holds at most 512 descriptors, `/healthz` answers, and the controller writes.
//!
//! The attacker runs in this process (a blocking thread): its 3000 client sockets count against
//! the same limit, which is set to what they take plus room for the endpoint's cap. An endpoint
//! without a cap then runs the process out of descriptors exactly as it would run a container out
//! of its own.

use ferrokube_testkit as common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::PostParams;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::Reconciler;
use ferrokube_runtime::manager::DEFAULT_MAX_CONNECTIONS;
use ferrokube_runtime::manager::Manager;
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

/// How many connections the attacker opens and holds.
const ATTACK_SOCKETS: usize = 3000;
/// Room in this process's descriptor limit beyond the attacker's sockets: what the controller
/// itself needs (its client's connections, the runtime's) plus the endpoint's cap, and no more.
const ROOM: usize = DEFAULT_MAX_CONNECTIONS + 256;
/// The kubelet's default probe timeout (`timeoutSeconds: 1`): a slower `/healthz` is a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How many probes are sent while the sockets are held.
const PROBES: usize = 20;

fn nofile_limit() -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(status, 0, "getrlimit: {}", std::io::Error::last_os_error());
    limit
}

fn set_nofile_soft_limit(soft: libc::rlim_t) {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: nofile_limit().rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given, which lives for the call.
    let status = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    assert_eq!(status, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// The descriptors this process has open now (`None`: none left to look).
fn open_descriptors() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|entries| entries.count())
}

/// Opens `count` connections to `addr` and sends nothing on them; stops at the first that fails
/// (an endpoint that stopped accepting fills its backlog, and then a connect waits).
fn hold_connections(addr: SocketAddr, count: usize) -> Vec<std::net::TcpStream> {
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(stream) => held.push(stream),
            Err(error) => {
                eprintln!("attacker: connection {} failed: {error}", held.len() + 1);
                break;
            }
        }
    }
    held
}

/// `GET /healthz` on a connection of its own, as the kubelet probes: (status, body), or why not.
async fn probe(addr: SocketAddr) -> Result<(u16, String), String> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Ok((status, response))
}

/// For every ConfigMap `ping-<n>`, creates `pong-<n>`: a write that can only land if the
/// controller's client can reach the API server.
struct Pong {
    client: Client,
}

impl Reconciler<ConfigMap> for Pong {
    type Error = ferrokube_client::Error;
    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: Context,
    ) -> Result<Action, ferrokube_client::Error> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        if let Some(n) = name.strip_prefix("ping-") {
            let pong = common::config_map(&format!("pong-{n}"), "seen");
            match Api::<ConfigMap>::namespaced(self.client.clone(), "default")
                .create(&PostParams::default(), &pong)
                .await
            {
                Ok(_) => {}
                Err(error) if error.is_already_exists() => {}
                Err(error) => return Err(error),
            }
        }
        Ok(Action::await_change())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_abuse_idle_sockets_leave_healthz_and_the_controller_working() {
    let hard = nofile_limit().rlim_max;
    assert!(
        hard as usize >= ATTACK_SOCKETS + ROOM + 256,
        "the drill needs a hard descriptor limit of at least {} (ulimit -Hn is {hard})",
        ATTACK_SOCKETS + ROOM + 256
    );
    let sockets = ATTACK_SOCKETS;

    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let mut manager = Manager::builder(client.clone())
        .serve("127.0.0.1:0".parse().expect("address"))
        .build()
        .expect("manager builds");
    let addr = manager.http_addr().expect("bound");
    let controller = manager
        .controller::<ConfigMap>(Scope::namespace("default"))
        .name("pong");
    let pong = Pong {
        client: manager.client(),
    };
    manager.add_controller(controller, pong);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async {
        let _ = stopped.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !matches!(probe(addr).await, Ok((200, _))) {
        assert!(Instant::now() < deadline, "/healthz never answered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), "default");

    // From here on this process has room for the attacker's sockets, the endpoint's cap, and
    // little else.
    let before = open_descriptors().expect("descriptors before the attack");
    let limit = (before + sockets + ROOM) as libc::rlim_t;
    let original = nofile_limit().rlim_cur;
    set_nofile_soft_limit(limit);
    let attacker = tokio::task::spawn_blocking(move || hold_connections(addr, sockets))
        .await
        .expect("attacker thread");
    let held = attacker.len();
    // An endpoint without a cap stops accepting once this process is out of descriptors, and the
    // attacker stops a little later (a full backlog).
    assert!(
        held > ROOM + DEFAULT_MAX_CONNECTIONS,
        "the attacker holds only {held} connections: more than the room left is the point"
    );

    // /healthz answers every probe within the kubelet's timeout.
    let mut latencies = Vec::new();
    for n in 0..PROBES {
        let started = Instant::now();
        let answer = tokio::time::timeout(PROBE_TIMEOUT, probe(addr)).await;
        let took = started.elapsed();
        match answer {
            Ok(Ok((200, _))) => latencies.push(took),
            Ok(Ok((status, body))) => panic!("probe {n}: /healthz answered {status}: {body}"),
            Ok(Err(error)) => panic!(
                "probe {n}: /healthz failed with {held} sockets held: {error} (descriptors open: {:?})",
                open_descriptors()
            ),
            Err(_) => panic!(
                "probe {n}: /healthz did not answer within {PROBE_TIMEOUT:?} with {held} sockets held (descriptors open: {:?})",
                open_descriptors()
            ),
        }
    }
    latencies.sort();
    eprintln!(
        "/healthz with {held} idle sockets held: median {:?}, slowest {:?} over {PROBES} probes",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
    );

    // The endpoint holds at most its cap of descriptors (plus the connection being admitted).
    let during = open_descriptors().expect("a descriptor left to count them");
    assert!(
        during <= before + held + DEFAULT_MAX_CONNECTIONS + 16,
        "{during} descriptors open while {held} connections are held (before: {before}, cap: {DEFAULT_MAX_CONNECTIONS})"
    );

    // The controller still writes: a ConfigMap created now is answered by its reconcile.
    let ping = common::config_map("ping-1", "ping");
    configmaps
        .create(&PostParams::default(), &ping)
        .await
        .expect("create ping-1 while the sockets are held");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match configmaps.get("pong-1").await {
            Ok(_) => break,
            Err(error) if error.is_not_found() => {}
            Err(error) => panic!("reading pong-1 while the sockets are held: {error}"),
        }
        assert!(
            Instant::now() < deadline,
            "the controller's write (pong-1) never landed while the sockets were held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    drop(attacker);
    set_nofile_soft_limit(original);
    let _ = stop.send(());
    running
        .await
        .expect("manager task")
        .expect("the manager stops cleanly");
}
