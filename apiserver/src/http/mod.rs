//! The HTTP server: accept connections (plain or TLS, HTTP/1.1 or HTTP/2), hand each request to
//! `handlers::handle`, which parses a resource request once (`request`) and hands it to its verb's
//! handler (`verbs`).
//!
//! [`ApiServer`] is the builder; [`ApiServer::start`] binds, creates the built-in namespaces and the
//! `kubernetes` Service, starts the garbage collector, the service account and quota controllers, the bookmark
//! ticker and (optionally) the pod simulator with its Node objects, and returns a
//! [`RunningServer`]: its URL, a kubeconfig for it, and the fault switches. Dropping the
//! `RunningServer` stops everything.
//!
//! # Connections and shutdown
//!
//! The accept loop spawns one task per connection, so a connection outlives the loop unless it is
//! told to end. Every connection task therefore watches one shutdown signal (a `watch` channel
//! whose sender the `RunningServer` holds). Dropping the `RunningServer`:
//!
//! ```text
//!  signal shutdown ──▶ each connection: hyper's graceful shutdown
//!                        idle keep-alive connection ─▶ closed at once
//!                        request in flight ─▶ finishes, then closed (bounded by SHUTDOWN_GRACE)
//!  close every watch ──▶ watch responses end cleanly, so their connections close too
//!  abort the accept loop and the background tasks ──▶ the port stops accepting
//! ```
//!
//! Without the signal an idle keep-alive connection stayed open after the server was gone, and a
//! client's pooled connection kept talking to the dropped server's store.
//!
//! # Callers it does not trust
//!
//! | what | where |
//! |---|---|
//! | `Host` and `Origin` of every request from the socket (DNS rebinding, cross-site POSTs): 403 | [`guard`] |
//! | the bearer token, on every path but the health checks (the fault switches included): 401 | `handlers` |
//! | request bodies over 3 MiB, every verb and format: 413 | [`MAX_BODY`] |
//! | slow request heads (slow loris) and floods of connections: closed | [`limits`]: [`ApiServer::header_read_timeout`], [`ApiServer::max_connections`] |
//! | JSON patches: operations, copied bytes, nesting, array shifts | [`crate::patch`] |
//! | fault settings out of range: 422 | [`crate::faults`] |
//! | the kubeconfig holds the token: written owner-only (0600) | [`RunningServer::write_kubeconfig`] |
//! | `Debug` of [`ApiServer`] and [`RunningServer`] never prints the token | below |

mod body;
mod discovery;
pub mod guard;
mod handlers;
pub mod limits;
mod partial;
mod query;
mod request;
mod route;
mod shared;
mod tls;
mod verbs;

use crate::audit::AuditLog;
use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub use body::MAX_BODY;
pub use discovery::VERSION;
pub use guard::HostPolicy;
pub use limits::{DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS};

use crate::ServerError;
use crate::api::{Api, WriteOptions};
use crate::faults::Faults;
use crate::gc::GarbageCollector;
use crate::kubelet::{Kubelet, KubeletSettings};
use crate::quota::QuotaController;
use crate::resource::{Catalog, Registry, ResourceType};
use crate::service_accounts::ServiceAccounts;
use crate::store::Store;
use ferrokube_listen::{Answering, Connections, Handle, LONGEST_TIMEOUT, Late};
use shared::Shared;

/// Builder for an in-process API server; every option has a default. Its `Debug` does not show
/// the token.
#[derive(Clone)]
pub struct ApiServer {
    address: SocketAddr,
    tls: bool,
    token: Option<String>,
    /// Names the server answers to besides loopback and localhost (see [`guard`]).
    allowed_hosts: Vec<String>,
    history: usize,
    watch_buffer: usize,
    bookmark_interval: Duration,
    watch_timeout: Duration,
    /// The types served from the start; the running server's [`Registry`] starts from these.
    catalog: Catalog,
    kubelet: Option<KubeletSettings>,
    audit: bool,
    legacy_service_account_tokens: bool,
    publish_root_ca: bool,
    /// Whether the controllers kube-controller-manager would run beside kube-apiserver run inside
    /// the server (see [`ApiServer::builtin_controllers`]).
    builtin_controllers: bool,
    /// See [`ApiServer::header_read_timeout`]; `None`: no limit. At most [`LONGEST_TIMEOUT`].
    header_read_timeout: Option<Duration>,
    /// See [`ApiServer::max_connections`]; at least 1.
    max_connections: usize,
    /// See [`ApiServer::idle_timeout`]; `None`: no limit. At most [`LONGEST_TIMEOUT`].
    idle_timeout: Option<Duration>,
    /// See [`ApiServer::sharded_list_and_watch`].
    gates: request::Gates,
}

impl Default for ApiServer {
    fn default() -> ApiServer {
        ApiServer {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            token: None,
            allowed_hosts: Vec::new(),
            history: 10_000,
            watch_buffer: 1_000,
            bookmark_interval: Duration::from_secs(60),
            watch_timeout: Duration::from_secs(1800),
            catalog: Catalog::default(),
            kubelet: None,
            audit: false,
            legacy_service_account_tokens: false,
            publish_root_ca: false,
            builtin_controllers: true,
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            gates: request::Gates::default(),
        }
    }
}

/// What `Debug` shows of a secret: that there is one.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

fn redacted(secret: &Option<String>) -> Option<Redacted> {
    secret.as_ref().map(|_| Redacted)
}

impl fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiServer")
            .field("address", &self.address)
            .field("tls", &self.tls)
            .field("token", &redacted(&self.token))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("history", &self.history)
            .field("watch_buffer", &self.watch_buffer)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("watch_timeout", &self.watch_timeout)
            .field("catalog", &self.catalog)
            .field("kubelet", &self.kubelet)
            .field("audit", &self.audit)
            .field(
                "legacy_service_account_tokens",
                &self.legacy_service_account_tokens,
            )
            .field("publish_root_ca", &self.publish_root_ca)
            .field("builtin_controllers", &self.builtin_controllers)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("max_connections", &self.max_connections)
            .field("gates", &self.gates)
            .finish()
    }
}

impl ApiServer {
    /// The defaults: plain HTTP on `127.0.0.1`, a free port, no authentication.
    pub fn new() -> ApiServer {
        ApiServer::default()
    }

    /// Where to listen (default `127.0.0.1:0`, a free port). On any other address the server also
    /// answers requests naming that address (any address literal, bound to `0.0.0.0` or `::`),
    /// but no name other than `localhost`: add those with [`ApiServer::allow_host`].
    pub fn address(mut self, address: SocketAddr) -> ApiServer {
        self.address = address;
        self
    }

    /// Serve HTTPS with a fresh self-signed CA (default: plain HTTP).
    pub fn tls(mut self, on: bool) -> ApiServer {
        self.tls = on;
        self
    }

    /// Require `Authorization: Bearer <token>` on every request but the health checks, the fault
    /// switches included (default: no authentication).
    pub fn token(mut self, token: &str) -> ApiServer {
        self.token = Some(token.to_string());
        self
    }

    /// Answers requests whose `Host` (or `Origin`) names `name` too; by default only `localhost`,
    /// loopback addresses and the bound address are answered, the rest refused with 403 (see
    /// [`guard`]: a defence against DNS rebinding). The serving certificate names it too.
    pub fn allow_host(mut self, name: &str) -> ApiServer {
        self.allowed_hosts.push(name.to_string());
        self
    }

    /// How many changes the watch history keeps; older resourceVersions get 410 (default 10,000).
    pub fn history(mut self, changes: usize) -> ApiServer {
        self.history = changes;
        self
    }

    /// Per-watcher buffer; a watcher this far behind is closed (default 1,000 events).
    pub fn watch_buffer(mut self, events: usize) -> ApiServer {
        self.watch_buffer = events;
        self
    }

    /// How often watchers that allow bookmarks get one (default 60 s).
    pub fn bookmark_interval(mut self, every: Duration) -> ApiServer {
        self.bookmark_interval = every;
        self
    }

    /// How long a watch without `timeoutSeconds` stays open (default 30 min).
    pub fn watch_timeout(mut self, timeout: Duration) -> ApiServer {
        self.watch_timeout = timeout;
        self
    }

    /// Serves one more resource type (untyped JSON) from the start. (A running server takes more
    /// through [`RunningServer::registry`], or CustomResourceDefinitions.)
    pub fn register(mut self, resource: ResourceType) -> ApiServer {
        self.catalog.register(resource);
        self
    }

    /// Runs a stand-in kubelet that makes pods Running and Ready (default: none; pods stay Pending).
    pub fn kubelet(mut self, settings: KubeletSettings) -> ApiServer {
        self.kubelet = Some(settings);
        self
    }

    /// Keeps an audit log of write requests ([`RunningServer::audit_log`]). Default off.
    pub fn audit(mut self, on: bool) -> ApiServer {
        self.audit = on;
        self
    }

    /// Gives every ServiceAccount a token Secret, as kube-controller-manager did before 1.24
    /// (Kubernetes 1.20's e2e framework waits for them). Default off, as 1.24 and later: accounts
    /// get no Secret (see [`crate::service_accounts`]).
    pub fn legacy_service_account_tokens(mut self, on: bool) -> ApiServer {
        self.legacy_service_account_tokens = on;
        self
    }

    /// Publishes a `kube-root-ca.crt` ConfigMap in every namespace, as kube-controller-manager's
    /// `root-ca-cert-publisher` does (Kubernetes' e2e framework waits for it): `ca.crt` is the
    /// server's TLS CA, empty without TLS. Default off (kube-apiserver alone does not write it).
    pub fn publish_root_ca(mut self, on: bool) -> ApiServer {
        self.publish_root_ca = on;
        self
    }

    /// Runs the controllers that kube-controller-manager would run beside kube-apiserver (default
    /// on): garbage collection, namespace deletion (a deleted namespace is emptied, then removed),
    /// a `default` ServiceAccount in every namespace, ResourceQuota usage. Off, the server is
    /// kube-apiserver alone, envtest's world: a deleted namespace stays `Terminating` until
    /// something removes its `kubernetes` finalizer (`PUT .../finalize`), dependents outlive their
    /// owners, no ServiceAccount is made, quota usage is not written (admission still counts).
    /// A test of code written for envtest, or of what kube-apiserver alone does, turns them off.
    pub fn builtin_controllers(mut self, on: bool) -> ApiServer {
        self.builtin_controllers = on;
        self
    }

    /// How long a client may take from its connection's accept to the end of its first request's
    /// head (TLS handshake included), and on an HTTP/1.1 keep-alive connection from the first byte
    /// of a next request to the end of its head; then the connection is closed (see [`limits`]).
    /// `None`: no limit. Default [`DEFAULT_HEADER_READ_TIMEOUT`] (32 s, kube-apiserver's
    /// `ReadHeaderTimeout`).
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> ApiServer {
        self.header_read_timeout = timeout.map(|t| t.min(LONGEST_TIMEOUT));
        self
    }

    /// How long a connection from the listening socket may stay open with no request in flight
    /// (no stream open, on HTTP/2) before the server closes it (GOAWAY on HTTP/2, see [`limits`]).
    /// `None`: no limit. Default [`DEFAULT_IDLE_TIMEOUT`] (90 s, kube-apiserver's `IdleTimeout`).
    /// On an HTTP/1.1 keep-alive connection it runs until the next request's first byte, from
    /// which the [header-read timeout](ApiServer::header_read_timeout) takes over, as in Go's
    /// `http.Server`.
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> ApiServer {
        self.idle_timeout = timeout.map(|t| t.min(LONGEST_TIMEOUT));
        self
    }

    /// How many connections from the listening socket are served at once (at least 1). A new
    /// connection beyond it is still admitted: the oldest connection with no request in flight is
    /// closed (or, if every one is answering, the one that moved no byte for the longest, see
    /// [`limits`]). Default [`DEFAULT_MAX_CONNECTIONS`] (1,024).
    pub fn max_connections(mut self, max: usize) -> ApiServer {
        self.max_connections = max.max(1);
        self
    }

    /// kube-apiserver's `ShardedListAndWatch` feature gate (alpha in 1.36 and 1.37, off there by
    /// default): lists, watches and deletecollections honour `shardSelector`, sending only the
    /// objects whose uid (or namespace) hashes into its ranges, and a sharded list says so in
    /// `metadata.shardInfo` (see [`crate::shard`]). Default **on** here, like this server's other
    /// newer behaviours: a client that sends no selector sees no difference, and a test of a
    /// sharded client needs it. Off, the parameter is ignored as by a server without the gate
    /// (every object, no `shardInfo`, a bad selector not refused): the way to test a client's
    /// fallback for servers that do not shard.
    pub fn sharded_list_and_watch(mut self, on: bool) -> ApiServer {
        self.gates.sharded_list_and_watch = on;
        self
    }

    /// Binds and starts serving; must be called inside a tokio runtime.
    pub async fn start(self) -> Result<RunningServer, ServerError> {
        let listener = TcpListener::bind(self.address)
            .await
            .map_err(ServerError::Bind)?;
        let local = listener.local_addr().map_err(ServerError::Bind)?;
        let certificates = if self.tls {
            let mut names = self.allowed_hosts.clone();
            let bound = local.ip();
            if !bound.is_loopback() && !bound.is_unspecified() {
                names.push(bound.to_string());
            }
            Some(tls::generate(&names)?)
        } else {
            None
        };
        let scheme = if self.tls { "https" } else { "http" };
        let url = format!("{scheme}://{local}");
        let store = Arc::new(Store::new(self.history, self.watch_buffer));
        let faults = Arc::new(Faults::default());
        let api = Api {
            store: store.clone(),
            registry: Registry::new(self.catalog.clone()),
            graceful_pods: self.kubelet.is_some(),
            services: Default::default(),
        };
        let shared = Arc::new(Shared {
            api,
            faults: faults.clone(),
            address: local.to_string(),
            token: self.token.clone(),
            hosts: HostPolicy::new(local, &self.allowed_hosts),
            default_watch_timeout: self.watch_timeout,
            audit: Arc::new(AuditLog::new(self.audit)),
            discovery: Default::default(),
            gates: self.gates,
        });
        create_builtin_objects(&shared.api)?;
        let mut tasks = Vec::new();
        if self.builtin_controllers {
            tasks.push(tokio::spawn(
                GarbageCollector::new(shared.clone_api()).run(store.subscribe()),
            ));
        }
        let ticker_store = store.clone();
        let interval = self.bookmark_interval;
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                ticker_store.send_bookmarks();
            }
        }));
        let accounts = ServiceAccounts::new(shared.clone_api())
            .legacy_tokens(self.legacy_service_account_tokens)
            .root_ca(self.publish_root_ca.then(|| {
                certificates
                    .as_ref()
                    .map(|c| c.ca_pem.clone())
                    .unwrap_or_default()
            }));
        if self.builtin_controllers {
            tasks.push(tokio::spawn(accounts.run(store.subscribe())));
            tasks.push(tokio::spawn(
                QuotaController::new(store.clone()).run(store.subscribe()),
            ));
        }
        if let Some(settings) = self.kubelet.clone() {
            let kubelet = Kubelet::new(shared.clone_api(), settings);
            kubelet
                .register_nodes()
                .map_err(|e| ServerError::Setup(format!("registering the nodes: {e}")))?;
            tasks.push(tokio::spawn(kubelet.run(store.subscribe())));
        }
        let acceptor = certificates
            .as_ref()
            .map(|c| TlsAcceptor::from(Arc::new(c.server.clone())));
        let (shutdown, stopping) = watch::channel(false);
        tasks.push(tokio::spawn(accept_loop(
            listener,
            acceptor,
            shared.clone(),
            stopping,
            SocketLimits {
                connections: Arc::new(Connections::new("API server", self.max_connections)),
                header_read_timeout: self.header_read_timeout,
                idle_timeout: self.idle_timeout,
            },
        )));
        tracing::info!(%url, "ferrokube-apiserver serving");
        Ok(RunningServer {
            url,
            ca_pem: certificates.map(|c| c.ca_pem),
            token: self.token,
            shared,
            tasks,
            shutdown,
        })
    }
}

impl Shared {
    /// A second handle on the same store and registry, for in-process controllers.
    fn clone_api(&self) -> Arc<Api> {
        Arc::new(Api {
            store: self.api.store.clone(),
            registry: self.api.registry.clone(),
            graceful_pods: self.api.graceful_pods,
            services: self.api.services.clone(),
        })
    }
}

/// What kube-apiserver creates for itself on start: the system namespaces, and the `kubernetes`
/// Service in `default` that names the API server inside the cluster (clients read its
/// `clusterIP` to learn the cluster's IP family).
fn create_builtin_objects(api: &Api) -> Result<(), ServerError> {
    const KUBE_APISERVER: WriteOptions<'static> = WriteOptions {
        dry_run: false,
        manager: "kube-apiserver",
    };
    let find = |plural: &str| {
        api.registry
            .find("", "v1", plural)
            .ok_or_else(|| ServerError::Setup(format!("{plural} are not registered")))
    };
    let namespaces = find("namespaces")?;
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        api.create(&namespaces, None, object, &KUBE_APISERVER)
            .map_err(|e| ServerError::Setup(e.to_string()))?;
    }
    let services = find("services")?;
    let kubernetes = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                 "sessionAffinity": "None",
                 "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
    });
    api.create(&services, Some("default"), kubernetes, &KUBE_APISERVER)
        .map_err(|e| ServerError::Setup(e.to_string()))?;
    Ok(())
}

/// How long a connection that is busy when the server is dropped may go on before it is closed
/// anyway (a request held by the pause fault, say). Idle connections close at once.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The limits on the listening socket's connections (see [`limits`]).
struct SocketLimits {
    connections: Arc<Connections>,
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
}

/// How one connection is limited: its place under the cap, and when its first request's head
/// must have arrived.
struct Limited {
    handle: Handle,
    connections: Arc<Connections>,
    first_request_by: Option<tokio::time::Instant>,
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
}

/// Gives the connection's place under the cap back when its task ends, however it ends.
impl Drop for Limited {
    fn drop(&mut self) {
        self.connections.forget(self.handle.id());
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    stopping: watch::Receiver<bool>,
    limits: SocketLimits,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let tls = tls.clone();
        let mut stopping = stopping.clone();
        // Registered here, not in its task: a connection's age is its place in the accept order.
        let handle = limits.connections.admit();
        let limited = Limited {
            first_request_by: limits
                .header_read_timeout
                .and_then(|t| tokio::time::Instant::now().checked_add(t)),
            header_read_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            connections: limits.connections.clone(),
            handle,
        };
        let stream = limited.handle.watch(stream);
        tokio::spawn(async move {
            match tls {
                Some(acceptor) => {
                    let accepted = tokio::select! {
                        // Stopping first: no handshake is finished for a server going away.
                        biased;
                        () = stopped(&mut stopping) => return,
                        () = limited.handle.close_requested() => return,
                        () = limited.handle.no_request_by(limited.first_request_by) => {
                            tracing::debug!(%peer, "TLS handshake not done within the header-read timeout: closed");
                            return;
                        }
                        accepted = acceptor.accept(stream) => accepted,
                    };
                    match accepted {
                        Ok(stream) => {
                            serve(stream, peer.to_string(), shared, stopping, Some(limited)).await
                        }
                        Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    }
                }
                None => serve(stream, peer.to_string(), shared, stopping, Some(limited)).await,
            }
        });
    }
}

/// Serves one connection until the client closes it, the server shuts down (see the
/// [module docs](self)), or a limit closes it ([`limits`]). `peer` names the client in logs;
/// `limited`: it was accepted from the listening socket, so its requests' `Host` and `Origin` are
/// checked ([`guard`]) and the socket's limits apply.
async fn serve<I>(
    io: I,
    peer: String,
    shared: Arc<Shared>,
    mut stopping: watch::Receiver<bool>,
    limited: Option<Limited>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let from_socket = limited.is_some();
    let handle = limited.as_ref().map(|l| l.handle.clone());
    // Set by the first HTTP/2 request: the connection's wait between requests is then timed by
    // the idle timeout alone (its pings move bytes between requests).
    let http2 = Arc::new(AtomicBool::new(false));
    let seen_http2 = http2.clone();
    let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
        if request.version() == http::Version::HTTP_2 {
            seen_http2.store(true, Ordering::Relaxed);
        }
        let shared = shared.clone();
        let in_flight = handle.as_ref().map(Handle::start_request);
        async move {
            let response = handlers::handle(shared, request, from_socket).await;
            Ok::<_, Infallible>(response.map(|body| Answering::new(body, in_flight)))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if limited.is_some() {
        // Not hyper's header-read timeout: it starts as soon as an answer is sent, so it would
        // time the keep-alive wait and the next head as one (closing idle connections at 32 s).
        // Both are timed below, as Go's `http.Server` times them (`next_request_late`).
        builder.http1().header_read_timeout(None);
    }
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let (close, first_request_by) = match &limited {
        Some(l) => (Some(l.handle.clone()), l.first_request_by),
        None => (None, None),
    };
    // Each limit, or never for a connection without limits (an in-process one).
    let evicted = or_never(close.as_ref().map(Handle::close_requested));
    let slow_head = or_never(close.as_ref().map(|h| h.no_request_by(first_request_by)));
    let idle = or_never(
        close
            .as_ref()
            .zip(limited.as_ref())
            .map(|(handle, limits)| between_requests(handle, limits, &http2)),
    );
    let served = tokio::select! {
        // A connection that ended is reported as such; only a live one is shut down gracefully.
        // The connection is ready once (when it ends), so it cannot starve the stop.
        biased;
        served = connection.as_mut() => served,
        () = slow_head => {
            tracing::debug!(%peer, "no request head within the header-read timeout: closed");
            return;
        }
        late = idle => {
            if late == Late::SlowHead {
                tracing::debug!(%peer, "the next request's head not read within the header-read timeout: closed");
                return;
            }
            // Nothing in flight: a GOAWAY (HTTP/2) or a close, and the connection ends.
            tracing::debug!(%peer, "idle for the idle timeout: closed");
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(SHUTDOWN_GRACE, connection.as_mut()).await {
                Ok(served) => served,
                Err(_) => return,
            }
        }
        () = evicted => {
            // Chosen while idle, a request may have arrived since: it may finish (no further
            // request is read), within the shutdown grace. One chosen while busy is cut.
            let busy = close.as_ref().is_some_and(|h| h.busy() && !h.was_cut());
            if busy {
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection.as_mut()).await;
            }
            tracing::debug!(%peer, "closed to admit a new connection over the cap");
            return;
        }
        () = stopped(&mut stopping) => {
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(SHUTDOWN_GRACE, connection.as_mut()).await {
                Ok(served) => served,
                Err(_) => {
                    tracing::debug!(%peer, "connection still busy at shutdown: closed");
                    return;
                }
            }
        }
    };
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// `future`'s output, or never without one.
async fn or_never<F: std::future::Future>(future: Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// Resolves once a connection has waited too long between requests: on HTTP/1.1, the idle
/// timeout for a next request's first byte, then the header-read timeout for its head (as Go's
/// `http.Server` times it, see [`limits`]); on HTTP/2 (`http2`, set by its first request), the
/// idle timeout with no request in flight, whatever frames move.
async fn between_requests(handle: &Handle, limits: &Limited, http2: &AtomicBool) -> Late {
    loop {
        if http2.load(Ordering::Relaxed) {
            return match limits.idle_timeout {
                Some(timeout) => {
                    handle.idle_for(timeout).await;
                    Late::Idle
                }
                None => std::future::pending().await,
            };
        }
        match handle
            .next_request_late(limits.idle_timeout, limits.header_read_timeout)
            .await
        {
            // HTTP/2 bytes between requests (a ping) are no head: timed as HTTP/2 above.
            Late::SlowHead if http2.load(Ordering::Relaxed) => continue,
            late => return late,
        }
    }
}

/// Resolves once the server is shutting down (or its `RunningServer` is gone).
async fn stopped(stopping: &mut watch::Receiver<bool>) {
    // An error means the sender was dropped: stopping too.
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// A started server; dropping it stops the server and its background tasks. Its `Debug` does not
/// show the token.
pub struct RunningServer {
    url: String,
    ca_pem: Option<String>,
    token: Option<String>,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    /// Set to `true` on drop; every connection task watches it (see the [module docs](self)).
    shutdown: watch::Sender<bool>,
}

impl fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningServer")
            .field("url", &self.url)
            .field("tls", &self.ca_pem.is_some())
            .field("token", &redacted(&self.token))
            .field("hosts", &self.shared.hosts)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// The audit log of write requests (empty unless [`ApiServer::audit`] turned it on).
    pub fn audit_log(&self) -> Arc<AuditLog> {
        self.shared.audit.clone()
    }

    /// `http://127.0.0.1:<port>` or `https://...`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA that signed the serving certificate (PEM), when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The bearer token clients must send, if one was set.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// A kubeconfig (YAML) for this server, with context `ferrokube` and namespace `default`. It
    /// carries the token, if any: write it with [`RunningServer::write_kubeconfig`] (owner-only),
    /// not `std::fs::write` (readable by everyone under the usual umask, 022).
    pub fn kubeconfig(&self) -> String {
        tls::kubeconfig(&self.url, self.ca_pem.as_deref(), self.token.as_deref())
    }

    /// Writes [`RunningServer::kubeconfig`] to `path`, readable and writable by its owner only
    /// (mode 0600 on Unix: it may hold the token). The file is created under a temporary name with
    /// that mode and renamed over `path`, so it is never readable by others, not even for a moment,
    /// and a file already at `path` (say a world-readable one) is replaced, not written into (a
    /// symbolic link at `path` is replaced too, not followed).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        tls::write_private_file(path, self.kubeconfig().as_bytes())
    }

    /// The fault switches.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The object store (revision, counts, `close_watches`, `compact`).
    pub fn store(&self) -> &Store {
        &self.shared.api.store
    }

    /// The REST verbs, in-process.
    pub fn api(&self) -> &Api {
        &self.shared.api
    }

    /// The served types, live: [`Registry::register`] serves another at once.
    pub fn registry(&self) -> &Registry {
        &self.shared.api.registry
    }

    /// How many discovery documents the server has rendered: each is rendered once per set of
    /// served types and then answered from memory, so this grows with changes to the types (a CRD
    /// established), not with requests.
    pub fn discovery_renders(&self) -> u64 {
        self.shared.discovery.renders()
    }

    /// Serves one more connection that did not come through the listening socket, as if it had
    /// (same handlers, same store, closed with the server; only the `Host` and `Origin` checks of
    /// [`guard`] are skipped, as no browser can open such a connection): for example one end of an
    /// in-memory pipe (`tokio::io::duplex`), so a test or a fuzzer can send requests without a
    /// TCP connection per request. HTTP/1.1 or HTTP/2 (prior knowledge), no TLS. Must be called
    /// inside a tokio runtime.
    ///
    /// ```no_run
    /// # async fn demo(server: ferrokube_apiserver::RunningServer) {
    /// let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    /// server.serve_connection(server_end);
    /// // speak HTTP on `client_end`, e.g. with hyper::client::conn::http1::handshake
    /// # drop(client_end);
    /// # }
    /// ```
    pub fn serve_connection<I>(&self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        tokio::spawn(serve(
            io,
            "in-process".to_string(),
            self.shared.clone(),
            self.shutdown.subscribe(),
            None,
        ));
    }

    /// Ends every open watch now.
    pub fn close_watches(&self) -> usize {
        self.shared.api.store.close_watches()
    }

    /// Drops all watch history: a watch from any earlier resourceVersion gets 410.
    pub fn compact(&self) -> u64 {
        self.shared.api.store.compact()
    }

    /// A handle on this server's fault switches that can be cloned and moved into other tasks and
    /// threads (a button on a page, a test's chaos thread); it does not keep the server running.
    pub fn controls(&self) -> ServerControls {
        ServerControls {
            shared: Arc::downgrade(&self.shared),
        }
    }
}

/// See [`RunningServer::controls`]. Every method does nothing (and says so) once the server is gone.
#[derive(Clone)]
pub struct ServerControls {
    shared: std::sync::Weak<Shared>,
}

impl ServerControls {
    /// Ends every open watch now; how many there were (`None`: the server is gone).
    pub fn close_watches(&self) -> Option<usize> {
        Some(self.shared.upgrade()?.api.store.close_watches())
    }

    /// Moves the revision on, drops all watch history (a watch from an earlier resourceVersion
    /// gets 410) and ends every open watch, so that every informer must relist, even one that had
    /// seen the latest change; the revision compacted at.
    pub fn compact_and_close_watches(&self) -> Option<u64> {
        let shared = self.shared.upgrade()?;
        shared.api.store.advance_revision();
        let revision = shared.api.store.compact();
        shared.api.store.close_watches();
        Some(revision)
    }

    /// Deletes up to `count` running pods, as failing nodes would; how many went.
    pub fn kill_pods(&self, count: usize) -> Option<usize> {
        let shared = self.shared.upgrade()?;
        let running = crate::kubelet::running_pods(&shared.api);
        Some(
            running
                .iter()
                .take(count)
                .filter(|pod| crate::kubelet::kill(&shared.api, pod))
                .count(),
        )
    }

    /// Runs `f` on the fault switches.
    pub fn with_faults<T>(&self, f: impl FnOnce(&Faults) -> T) -> Option<T> {
        Some(f(&self.shared.upgrade()?.faults))
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        // Connections first: idle ones close, busy ones finish (watches end just below).
        self.shutdown.send_replace(true);
        for task in &self.tasks {
            task.abort();
        }
        self.shared.api.store.close_watches();
        tracing::debug!(url = %self.url, "ferrokube-apiserver stopped");
    }
}
