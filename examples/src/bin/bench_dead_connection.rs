//! The frozen-pool drill's driver: one ReplicaSet controller (ours or kube-controller-manager),
//! reached through a TCP proxy that can freeze every open connection, and the time it takes to act
//! on a change made while all of its connections are dead.
//!
//! ## Why
//!
//! A connection can die without a word (the server's host is gone, a NAT or load balancer forgot
//! it): no FIN, no RST. An outage kills every connection a controller holds at once: its watches
//! *and* the idle connections its client pooled for the next request. The controller must notice
//! on both, or the next write waits out a timeout on a dead pooled connection. Issue 42's drill
//! (2026-11-28) measured ours at 70 s and kube-controller-manager at ~41 s; this program is that
//! drill, written down so that it can be run again beside kube-controller-manager
//! (`scripts/bench-dead-connection.sh` runs it once per controller, interleaved).
//!
//! ## How data flows
//!
//! ```text
//!  controller (child process) ──TCP──▶ FreezeProxy (127.0.0.1, a free port) ──TCP──▶ API server
//!          ▲ its kubeconfig: the server's, with the address swapped for the proxy's
//!  driver ─┴──────────── direct client (never through the proxy) ───────────────────▶ API server
//! ```
//!
//! 1. In a fresh namespace the driver creates ReplicaSet `drill` with 0 replicas, writes the
//!    controller's kubeconfig (the given one with the server's `host:port` replaced by the
//!    proxy's) and starts the controller: the command after `--`, with `{kubeconfig}` replaced by
//!    that file's path.
//! 2. **Warm-up**: it scales `drill` to `--warm` replicas and waits until the pods exist and the
//!    ReplicaSet's status says so for its generation: the controller has synced and acted, and
//!    its client made requests concurrently, so it pools idle connections.
//! 3. `--settle-ms` later (less than the pool's 10 s staleness bound, so those connections are
//!    still trusted) the proxy **freezes** every connection open at that instant: no byte either
//!    way, no FIN, no RST; connections opened later work.
//! 4. At once the driver scales `drill` to `--warm + 1` (directly) and polls the pods every 50 ms:
//!    `acted_s` is the time from the freeze until the new pod exists, `status_s` until the
//!    ReplicaSet's status reports it too.
//! 5. It stops the controller, deletes what it created and prints one JSON line (with the load
//!    average read at the freeze).
//!
//! ```text
//! bench_dead_connection --kubeconfig K --label ours-http1 --server kube-apiserver-1.37.2 \
//!     [--warm 8] [--settle-ms 2000] [--limit-s 180] -- replicaset --kubeconfig {kubeconfig} ...
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ferrokube::{Api, Client, Config};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use parking_lot::Mutex;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "bench_dead_connection",
    about = "The frozen-pool drill: run a ReplicaSet controller through a proxy, freeze every open \
             connection, scale a ReplicaSet, and measure the seconds until the controller acts.",
    args_override_self = true
)]
struct Cli {
    /// The API server's kubeconfig (the driver's own requests go there directly).
    #[arg(long, value_name = "PATH")]
    kubeconfig: PathBuf,
    /// Names the controller in the JSON line (`ours-http1`, `kcm`, ...).
    #[arg(long)]
    label: String,
    /// Names the server in the JSON line (`kube-apiserver-1.37.2`, `ferrokube-apiserver`).
    #[arg(long)]
    server: String,
    /// Replicas of the warm-up.
    #[arg(long, value_name = "N", default_value_t = 8)]
    warm: i32,
    /// Quiet time between the warm-up's end and the freeze, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    settle_ms: u64,
    /// Give up waiting for the controller after this many seconds.
    #[arg(long, value_name = "S", default_value_t = 180)]
    limit_s: u64,
    /// The controller's command; `{kubeconfig}` is replaced by the proxied kubeconfig's path.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let cli = <Cli as clap::Parser>::parse();
    let mut config = Config::from_kubeconfig_files(std::slice::from_ref(&cli.kubeconfig), None)?;
    config.qps = None;
    let upstream = upstream_of(&config.cluster_url)?;
    let client = Client::new(config)?;

    let proxy = FreezeProxy::start(upstream).await?;
    let proxied = write_proxied_kubeconfig(&cli.kubeconfig, upstream, proxy.addr)?;

    let namespace = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"generateName": "drill-dc-"}}))?,
        )
        .await?
        .metadata
        .name
        .unwrap_or_default();
    let drill = Drill {
        replicasets: Api::namespaced(client.clone(), &namespace),
        pods: Api::namespaced(client.clone(), &namespace),
        limit: Duration::from_secs(cli.limit_s),
    };
    drill
        .replicasets
        .create(&PostParams::default(), &replica_set(0)?)
        .await?;

    let mut child = spawn_controller(&cli.command, &proxied)?;
    let outcome = drill.run(&cli, &proxy, &mut child).await;
    if let Err(error) = child.start_kill() {
        eprintln!("bench_dead_connection: stopping the controller: {error}");
    }
    let _ = child.wait().await;
    proxy.stop();
    drill.clean_up(&client, &namespace).await;
    let _ = std::fs::remove_file(&proxied);

    let outcome = outcome?;
    let mut line = json!({
        "drill": "dead_connection_frozen_pool",
        "label": cli.label,
        "server": cli.server,
        "warm_replicas": cli.warm,
        "settle_ms": cli.settle_ms,
        "unix_ms": unix_ms(),
    });
    if let (Some(map), serde_json::Value::Object(more)) =
        (line.as_object_mut(), serde_json::to_value(&outcome)?)
    {
        map.extend(more);
    }
    println!("{line}");
    Ok(())
}

/// What one run measured.
#[derive(serde::Serialize)]
struct Outcome {
    /// Seconds from scaling to `--warm` until the controller had made the pods and said so.
    warm_s: f64,
    /// Connections through the proxy that were open at the freeze (and so froze).
    frozen_connections: usize,
    /// Connections opened through the proxy after the freeze, until the controller acted.
    fresh_connections: u64,
    /// Seconds from the freeze until the new pod existed; `None`: not within `--limit-s`.
    acted_s: Option<f64>,
    /// Seconds from the freeze until the ReplicaSet's status reported the new pod.
    status_s: Option<f64>,
    /// `/proc/loadavg`'s first three figures at the freeze.
    load: String,
}

struct Drill {
    replicasets: Api<ReplicaSet>,
    pods: Api<Pod>,
    limit: Duration,
}

/// The ReplicaSet's name; its pods carry `drill=dead-connection`.
const NAME: &str = "drill";

impl Drill {
    async fn run(
        &self,
        cli: &Cli,
        proxy: &FreezeProxy,
        child: &mut tokio::process::Child,
    ) -> Result<Outcome, BoxError> {
        let warm_started = Instant::now();
        self.scale(cli.warm).await?;
        if !self.wait_for(cli.warm, true, warm_started, child).await? {
            return Err(format!(
                "the controller did not make {} pods within {:?}",
                cli.warm, self.limit
            )
            .into());
        }
        let warm_s = warm_started.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_millis(cli.settle_ms)).await;

        let frozen_at = Instant::now();
        let frozen_connections = proxy.freeze();
        let load = std::fs::read_to_string("/proc/loadavg")
            .map(|text| {
                text.split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let want = cli.warm.saturating_add(1);
        self.scale(want).await?;
        let acted_s = self
            .wait_for(want, false, frozen_at, child)
            .await?
            .then(|| frozen_at.elapsed().as_secs_f64());
        let fresh_connections = proxy.accepted_since_freeze();
        let status_s = match acted_s {
            Some(_) => self
                .wait_for(want, true, frozen_at, child)
                .await?
                .then(|| frozen_at.elapsed().as_secs_f64()),
            None => None,
        };
        Ok(Outcome {
            warm_s,
            frozen_connections,
            fresh_connections,
            acted_s,
            status_s,
            load,
        })
    }

    async fn scale(&self, replicas: i32) -> Result<(), BoxError> {
        self.replicasets
            .patch(
                NAME,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await?;
        Ok(())
    }

    /// Polls every 50 ms until `want` pods exist (and, with `status`, the ReplicaSet's status
    /// reports them for its current generation), or until `self.limit` after `since`. A
    /// controller that exited is an error.
    async fn wait_for(
        &self,
        want: i32,
        status: bool,
        since: Instant,
        child: &mut tokio::process::Child,
    ) -> Result<bool, BoxError> {
        let selector = ListParams::default().labels("drill=dead-connection");
        while since.elapsed() < self.limit {
            if let Some(exit) = child.try_wait()? {
                return Err(format!("the controller exited: {exit}").into());
            }
            let pods = self.pods.list(&selector).await?;
            let live = pods
                .items
                .iter()
                .filter(|pod| pod.metadata.deletion_timestamp.is_none())
                .count();
            let mut done = i32::try_from(live).unwrap_or(i32::MAX) >= want;
            if done && status {
                let rs = self.replicasets.get(NAME).await?;
                done = rs.status.as_ref().is_some_and(|s| {
                    s.replicas == want && s.observed_generation == rs.metadata.generation
                });
            }
            if done {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(false)
    }

    async fn clean_up(&self, client: &Client, namespace: &str) {
        let all = ListParams::default();
        let deletes = [
            self.replicasets
                .delete_collection(&DeleteParams::default(), &all)
                .await
                .err(),
            self.pods
                .delete_collection(&DeleteParams::default(), &all)
                .await
                .err(),
            Api::<Namespace>::all(client.clone())
                .delete(namespace, &DeleteParams::default())
                .await
                .err(),
        ];
        for error in deletes.into_iter().flatten() {
            eprintln!("bench_dead_connection: clean-up of {namespace}: {error}");
        }
    }
}

fn replica_set(replicas: i32) -> Result<ReplicaSet, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"drill": "dead-connection"}},
            "template": {
                "metadata": {"labels": {"drill": "dead-connection"}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]},
            },
        },
    }))
}

/// The server's address, from the kubeconfig's URL (loopback servers only: the drill's).
fn upstream_of(url: &http::Uri) -> Result<SocketAddr, BoxError> {
    let host = url.host().ok_or("the kubeconfig's server has no host")?;
    let port = url
        .port_u16()
        .unwrap_or(if url.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    let ip: std::net::IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| format!("the drill needs the server as an IP address, not {host}"))?;
    Ok(SocketAddr::new(ip, port))
}

/// The kubeconfig with every `host:port` of the server replaced by the proxy's; the certificate
/// still matches, since the proxy listens on the same loopback address.
fn write_proxied_kubeconfig(
    path: &PathBuf,
    upstream: SocketAddr,
    proxy: SocketAddr,
) -> Result<PathBuf, BoxError> {
    let text = std::fs::read_to_string(path)?;
    let from = upstream.to_string();
    if !text.contains(&from) {
        return Err(format!("{} does not name {from}", path.display()).into());
    }
    // Beside the original: its certificate paths may be relative to its directory.
    let out = path.with_file_name(format!(
        "bench-dead-connection-{}.kubeconfig",
        std::process::id()
    ));
    std::fs::write(&out, text.replace(&from, &proxy.to_string()))?;
    Ok(out)
}

fn spawn_controller(
    command: &[String],
    kubeconfig: &std::path::Path,
) -> Result<tokio::process::Child, BoxError> {
    let (program, args) = command.split_first().ok_or("no controller command")?;
    let path = kubeconfig.to_string_lossy();
    let child = tokio::process::Command::new(program)
        .args(args.iter().map(|arg| arg.replace("{kubeconfig}", &path)))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    Ok(child)
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// A TCP proxy whose [`freeze`](FreezeProxy::freeze) turns every connection open at that moment
/// into a black hole: bytes sent into it either way are read and dropped, nothing is closed (no
/// FIN, no RST). Connections accepted later forward normally. The client's TCP keepalive probes
/// are still answered by this process's kernel, as a NAT's would not be: only the application
/// (an idle deadline, an HTTP/2 ping, a request timeout) can notice.
struct FreezeProxy {
    addr: SocketAddr,
    shared: Arc<ProxyShared>,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

struct ProxyShared {
    upstream: SocketAddr,
    /// Every connection accepted so far.
    connections: Mutex<Vec<Arc<Link>>>,
    /// Accepted after the last freeze.
    accepted_since_freeze: AtomicU64,
}

/// One proxied connection: its switch and how many of its two directions still run.
struct Link {
    /// Once set, never cleared: a frozen connection stays dead.
    frozen: AtomicBool,
    /// 2 while both copy loops run; a connection is open while this is above 0.
    directions: AtomicUsize,
    /// Bytes read from either end after the freeze and dropped.
    dropped: AtomicUsize,
}

impl FreezeProxy {
    async fn start(upstream: SocketAddr) -> Result<FreezeProxy, BoxError> {
        let listener = TcpListener::bind(SocketAddr::new(upstream.ip(), 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(ProxyShared {
            upstream,
            connections: Mutex::new(Vec::new()),
            accepted_since_freeze: AtomicU64::new(0),
        });
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        let accept = accept_loop(listener, shared.clone(), tasks.clone());
        tasks.lock().spawn(accept);
        Ok(FreezeProxy {
            addr,
            shared,
            tasks,
        })
    }

    /// Freezes every open connection; returns how many.
    fn freeze(&self) -> usize {
        let connections = self.shared.connections.lock();
        self.shared.accepted_since_freeze.store(0, Ordering::SeqCst);
        let mut open = 0;
        for link in connections.iter() {
            if link.directions.load(Ordering::SeqCst) > 0 {
                link.frozen.store(true, Ordering::SeqCst);
                open += 1;
            }
        }
        open
    }

    fn accepted_since_freeze(&self) -> u64 {
        self.shared.accepted_since_freeze.load(Ordering::SeqCst)
    }

    /// Bytes dropped by frozen connections so far.
    #[cfg(test)]
    fn dropped_bytes(&self) -> usize {
        self.shared
            .connections
            .lock()
            .iter()
            .map(|link| link.dropped.load(Ordering::SeqCst))
            .sum()
    }

    /// Drops every connection (the controller is gone by then).
    fn stop(&self) {
        self.tasks.lock().abort_all();
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<ProxyShared>,
    tasks: Arc<Mutex<JoinSet<()>>>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(error) => {
                eprintln!("bench_dead_connection: proxy accept: {error}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let server = match TcpStream::connect(shared.upstream).await {
            Ok(server) => server,
            Err(error) => {
                eprintln!("bench_dead_connection: proxy connect: {error}");
                continue;
            }
        };
        let link = Arc::new(Link {
            frozen: AtomicBool::new(false),
            directions: AtomicUsize::new(2),
            dropped: AtomicUsize::new(0),
        });
        shared.connections.lock().push(link.clone());
        shared.accepted_since_freeze.fetch_add(1, Ordering::SeqCst);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        let mut tasks = tasks.lock();
        tasks.spawn(copy(client_read, server_write, link.clone()));
        tasks.spawn(copy(server_read, client_write, link));
    }
}

/// Forwards one direction until end of stream; once the link is frozen, reads and drops, and at
/// end of stream holds its write half open forever (a frozen connection sends no FIN).
async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    link: Arc<Link>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // A read error ends the direction as end of stream does.
        let n: usize = from.read(&mut buf).await.unwrap_or_default();
        if link.frozen.load(Ordering::SeqCst) {
            if n == 0 {
                std::future::pending::<()>().await;
            }
            link.dropped.fetch_add(n, Ordering::SeqCst);
            continue;
        }
        if n == 0 {
            let _ = to.shutdown().await;
            break;
        }
        let Some(bytes) = buf.get(..n) else { break };
        if to.write_all(bytes).await.is_err() {
            break;
        }
    }
    link.directions.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that echoes every byte back, on every connection.
    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 || socket.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(socket: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        socket.write_all(bytes).await.expect("write");
        let mut got = vec![0u8; bytes.len()];
        socket.read_exact(&mut got).await.expect("read");
        got
    }

    #[tokio::test]
    async fn a_frozen_connection_carries_nothing_and_a_new_one_works() {
        let proxy = FreezeProxy::start(echo_server().await)
            .await
            .expect("proxy");
        let mut old = TcpStream::connect(proxy.addr).await.expect("connect");
        assert_eq!(round_trip(&mut old, b"before").await, b"before");

        assert_eq!(proxy.freeze(), 1, "one connection was open");
        old.write_all(b"into the hole").await.expect("write");
        // Wait until the proxy has taken the bytes: then they were dropped, not forwarded.
        let taken = async {
            while proxy.dropped_bytes() < b"into the hole".len() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), taken)
            .await
            .expect("the frozen connection's bytes are taken and dropped");

        let mut fresh = TcpStream::connect(proxy.addr).await.expect("connect");
        assert_eq!(round_trip(&mut fresh, b"after").await, b"after");
        assert_eq!(proxy.accepted_since_freeze(), 1);
        // Nothing came back on the frozen connection, and it was not closed: a read is pending.
        let mut buf = [0u8; 1];
        assert!(
            futures_util::FutureExt::now_or_never(old.read(&mut buf)).is_none(),
            "a frozen connection delivers no byte and no end of stream"
        );
        proxy.stop();
    }
}
