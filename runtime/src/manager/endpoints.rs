//! The manager's HTTP endpoint: `/healthz` and `/readyz` for the kubelet's probes, `/metrics` for
//! Prometheus. HTTP/1.1 only (probes and scrapers speak it), plain text, one task per connection.
//!
//! | path | 200 when | body |
//! |---|---|---|
//! | `/healthz` | the process answers, and leader election is healthy (client-go's `HealthzAdaptor`: not a leader whose lease ran out more than 20 s ago) | one `[+]check ok` / `[-]check failed: reason` line per check |
//! | `/readyz` | `/healthz`'s checks pass and every controller's caches have synced | same |
//! | `/metrics` | always | Prometheus text: every family of the manager's registry |
//!
//! Any other path is a 404. Like the API server's own health endpoints, a failing check answers
//! 500 with the list of checks, so `curl` shows which one failed.
//!
//! The limits against hostile and broken clients (timeouts, a connection cap, a back-off on failed
//! `accept`s) and why they are what they are: see [`EndpointOptions`].

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ferrokube_listen::{Answering, Connections, Handle};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::leader::Leadership;

/// How long past the end of its lease a leader still counts as healthy (client-go's
/// `HealthzAdaptor` timeout as kube-controller-manager sets it: 20 s).
pub(crate) const LEADER_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// What the health checks look at.
#[derive(Clone)]
pub(crate) struct Health {
    leadership: Option<Leadership>,
    /// Controllers whose caches have synced; ready when it reaches `controllers`.
    synced: Arc<AtomicUsize>,
    controllers: usize,
}

impl Health {
    pub(crate) fn new(
        leadership: Option<Leadership>,
        synced: Arc<AtomicUsize>,
        controllers: usize,
    ) -> Health {
        Health {
            leadership,
            synced,
            controllers,
        }
    }

    /// `(name, Ok or the reason it fails)` for each check of `/healthz`, plus the caches for
    /// `/readyz`.
    fn checks(&self, ready: bool) -> Vec<(&'static str, Result<(), String>)> {
        let mut checks = vec![("ping", Ok(()))];
        if let Some(leadership) = &self.leadership {
            checks.push((
                "leaderElection",
                leadership
                    .health_check(LEADER_HEALTH_TOLERANCE)
                    .map_err(|unhealthy| unhealthy.to_string()),
            ));
        }
        if ready {
            let synced = self.synced.load(Ordering::SeqCst);
            let caches = if synced >= self.controllers {
                Ok(())
            } else {
                Err(format!(
                    "{synced} of {} controllers have synced their caches",
                    self.controllers
                ))
            };
            checks.push(("informers-synced", caches));
        }
        checks
    }
}

/// How long a client may take to send a request's header, counted from the moment the connection
/// waits for a request (its first, or the next one on a kept-alive connection): 32 s.
/// controller-runtime gives its metrics and health probe servers this `ReadHeaderTimeout`
/// (`pkg/internal/httpserver`), the value kube-apiserver uses for its own port. Go's `net/http`
/// has no such timeout unless one is set, nor has hyper without a timer.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// How long a connection may go without a single byte read or written before it is closed: 90 s,
/// controller-runtime's `IdleTimeout` (the keep-alive timeout of Go's `http.DefaultTransport`).
/// While a connection waits for a request the header-read timeout (32 s) closes it first; this
/// one also covers the other stalls, e.g. a client that stops reading its response.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How many connections the endpoint serves at once: 512, the default of Prometheus'
/// `--web.max-connections`. Go's `net/http` and controller-runtime set no limit. Far more than
/// kubelet probes and scrapers need (a few at a time), and far below the 1024 descriptors of a
/// container's usual soft limit, so the controller keeps descriptors for its own connections.
/// At the cap the oldest idle connection is closed (see [`EndpointOptions`] for why).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The first pause after a failed `accept`: 5 ms, as Go's `net/http.Server.Serve`.
pub const DEFAULT_ACCEPT_BACKOFF_INITIAL: Duration = Duration::from_millis(5);

/// The longest pause after failed `accept`s: each failure in a row doubles the pause, up to 1 s
/// (Go's `net/http.Server.Serve`). A successful `accept` starts again from the first pause.
pub const DEFAULT_ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A timeout longer than this counts as this long: far enough to mean "never", near enough that
/// adding it to the current time cannot overflow.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The limits of the manager's HTTP endpoint against slow, idle and too many clients, set with
/// [`ManagerBuilder::endpoint_options`]. Every limit has a default, documented on its setter and
/// its constant.
///
/// The endpoint listens on the pod's IP (`0.0.0.0:8081` in `deploy/`: the kubelet probes the pod
/// IP, so loopback would not do), so anything that can reach the pod can open connections to it.
/// Nothing it serves is secret, but a client must not be able to take it down, nor, by using up
/// the process's file descriptors, the controller's own connections to the API server. Four
/// limits:
///
/// | limit | default | what it stops | peer |
/// |---|---|---|---|
/// | header-read timeout | [`DEFAULT_HEADER_READ_TIMEOUT`] (32 s) | a client that opens a connection and sends nothing, or half a request, then waits (slow loris) | controller-runtime's `ReadHeaderTimeout` |
/// | idle timeout | [`DEFAULT_IDLE_TIMEOUT`] (90 s) | a connection on which no byte moves either way (e.g. a client that stops reading its response) | controller-runtime's `IdleTimeout` |
/// | connection cap | [`DEFAULT_MAX_CONNECTIONS`] (512) | thousands of connections, each holding a descriptor until a timeout | Prometheus' `--web.max-connections` |
/// | accept back-off | [`DEFAULT_ACCEPT_BACKOFF_INITIAL`] (5 ms) doubling to [`DEFAULT_ACCEPT_BACKOFF_MAX`] (1 s) | a loop that retries a failing `accept` (no descriptor left: `EMFILE`) at once, pinning a core | Go's `net/http.Server.Serve` |
///
/// # What happens at the cap
///
/// Three choices, and why the endpoint takes the third:
///
/// - *Stop accepting* (Go's `netutil.LimitListener`, which Prometheus uses): new connections wait
///   in the kernel's backlog until a held one ends, up to the 32 s header timeout. The kubelet's
///   probe is one of the new connections, its `timeoutSeconds` (default 1 s) passes, the probe
///   fails, and after `failureThreshold` failures the kubelet restarts a healthy controller. The
///   attacker wins by holding 512 idle sockets.
/// - *Accept and close at once*: the same outcome, faster: the probe is refused.
/// - *Close the oldest idle connection to admit the new one* (what this endpoint does): every
///   new connection is admitted. "Idle" means no request in flight (waiting for a request,
///   reading one, or done with its response); a connection answering a request is chosen only
///   when every connection is answering one, and then it is the one that has moved no byte for
///   the longest (a client that pipelines requests and never reads the answers), whose response
///   is cut. (hyper counts a response as sent once it has queued it whole, so a client that
///   stops reading usually shows as idle already: measured with pipes of 64 bytes.) The kubelet's probe opens a fresh connection and sends its
///   request at once, so it is the *newest* connection: to have it closed before its request
///   arrives, an attacker would have to open 512 more connections in that instant. The victims
///   are the attacker's own old sockets (and, at worst, an idle keep-alive connection of a
///   Prometheus, which reconnects at its next scrape). The number of descriptors the endpoint
///   holds stays at most the cap plus the one connection waiting to be admitted.
///
/// The header-read timeout starts as soon as a connection waits for a request, its first or the
/// next one on a kept-alive connection (hyper's behaviour). So it also bounds a kept-alive
/// connection's wait between requests: 32 s, where Go waits `IdleTimeout` (90 s) for the first
/// byte of the next request. A scraper that comes back less often reconnects, which costs a TCP
/// handshake on loopback or the pod network. hyper also caps a request's header at about
/// 400 KiB (controller-runtime: `MaxHeaderBytes`, 1 MiB) and 100 header fields.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use ferrokube_runtime::manager::EndpointOptions;
///
/// let options = EndpointOptions::new()
///     .header_read_timeout(Some(Duration::from_secs(10)))
///     .max_connections(64);
/// # let _ = options;
/// ```
///
/// [`ManagerBuilder::endpoint_options`]: crate::manager::ManagerBuilder::endpoint_options
#[derive(Debug, Clone)]
#[must_use]
pub struct EndpointOptions {
    header_read_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    max_connections: usize,
    accept_backoff_initial: Duration,
    accept_backoff_max: Duration,
}

impl Default for EndpointOptions {
    fn default() -> Self {
        EndpointOptions {
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            accept_backoff_initial: DEFAULT_ACCEPT_BACKOFF_INITIAL,
            accept_backoff_max: DEFAULT_ACCEPT_BACKOFF_MAX,
        }
    }
}

impl EndpointOptions {
    /// Every limit at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a client may take to send a request's header, from the moment its connection
    /// waits for a request (the first, or the next on a kept-alive connection); then the
    /// connection is closed. `None`: no limit (not advised on a pod's IP). Default
    /// [`DEFAULT_HEADER_READ_TIMEOUT`] (32 s, controller-runtime's `ReadHeaderTimeout`).
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.header_read_timeout = timeout.map(|t| t.min(LONGEST_TIMEOUT));
        self
    }

    /// How long a connection may go without a byte read or written; then it is closed. `None`:
    /// no limit. Default [`DEFAULT_IDLE_TIMEOUT`] (90 s, controller-runtime's `IdleTimeout`).
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout.map(|t| t.min(LONGEST_TIMEOUT));
        self
    }

    /// How many connections are served at once (at least 1). A new connection beyond it closes
    /// the oldest connection that has no request in flight. Default [`DEFAULT_MAX_CONNECTIONS`]
    /// (512, Prometheus' `--web.max-connections`).
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// The pauses after failed `accept`s: `initial` after the first failure, doubling with each
    /// failure in a row up to `max`. Defaults [`DEFAULT_ACCEPT_BACKOFF_INITIAL`] (5 ms) and
    /// [`DEFAULT_ACCEPT_BACKOFF_MAX`] (1 s), Go's `net/http`.
    pub fn accept_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.accept_backoff_max = max.min(LONGEST_TIMEOUT);
        self.accept_backoff_initial = initial.min(self.accept_backoff_max);
        self
    }
}

/// The pause before the next `accept` after failures: without it, a listener whose `accept`
/// fails at once (`EMFILE`: the connection stays in the backlog, so the socket stays readable)
/// is polled again at once, for ever, on a core of its own.
#[derive(Debug, Clone)]
pub(crate) struct AcceptBackoff {
    initial: Duration,
    max: Duration,
    last: Option<Duration>,
}

impl AcceptBackoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> AcceptBackoff {
        AcceptBackoff {
            initial: initial.min(max),
            max,
            last: None,
        }
    }

    /// The pause after one more failure in a row: `initial`, then twice the last, at most `max`.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = match self.last {
            None => self.initial,
            Some(last) => last.saturating_mul(2),
        }
        .min(self.max);
        self.last = Some(delay);
        delay
    }

    /// An `accept` succeeded: the next failure pauses `initial` again.
    pub(crate) fn reset(&mut self) {
        self.last = None;
    }
}

/// Where connections come from: a TCP listener, or a test's fake.
pub(crate) trait Acceptor: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;
    fn accept(&mut self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Acceptor for TcpListener {
    type Stream = TcpStream;
    async fn accept(&mut self) -> std::io::Result<TcpStream> {
        TcpListener::accept(self).await.map(|(stream, _)| stream)
    }
}

/// A bound listener, not yet serving.
pub(crate) struct Endpoints<A = TcpListener> {
    acceptor: A,
    health: Health,
    registry: Arc<Registry>,
    options: EndpointOptions,
}

impl Endpoints {
    /// Takes over a listener bound (non-blocking) by the manager's builder.
    pub(crate) fn from_std(
        listener: std::net::TcpListener,
        health: Health,
        registry: Arc<Registry>,
        options: EndpointOptions,
    ) -> std::io::Result<Endpoints> {
        Ok(Endpoints {
            acceptor: TcpListener::from_std(listener)?,
            health,
            registry,
            options,
        })
    }
}

impl<A: Acceptor> Endpoints<A> {
    /// Answers requests until `stop` turns true. Connections still open then finish on their
    /// own (each within the timeouts).
    pub(crate) async fn serve(self, mut stop: watch::Receiver<bool>) {
        let Endpoints {
            mut acceptor,
            health,
            registry,
            options,
        } = self;
        let connections = Arc::new(Connections::new("health endpoint", options.max_connections));
        let mut backoff =
            AcceptBackoff::new(options.accept_backoff_initial, options.accept_backoff_max);
        // Whether the last connection found the endpoint full: warn once per episode, not once
        // per connection (an attacker would otherwise write the log).
        let mut full = false;
        loop {
            let accepted = tokio::select! {
                // Stop first: a flood of connections cannot keep the endpoint serving.
                biased;
                _ = stop.wait_for(|stop| *stop) => return,
                accepted = acceptor.accept() => accepted,
            };
            let stream = match accepted {
                Ok(stream) => {
                    backoff.reset();
                    stream
                }
                Err(error) => {
                    let pause = backoff.next_delay();
                    tracing::warn!(%error, ?pause, "health endpoint: accept failed; retrying after a pause");
                    tokio::select! {
                        // Stop first: no more accepting once asked to stop.
                        biased;
                        _ = stop.wait_for(|stop| *stop) => return,
                        () = tokio::time::sleep(pause) => continue,
                    }
                }
            };
            // At the cap, admitting closes the oldest idle connection, or, if every connection has
            // a request in flight, cuts the one stalled longest: a new connection (a probe) is
            // never kept waiting behind clients that do not read their responses.
            if connections.len() >= connections.max() {
                if !full {
                    tracing::warn!(
                        max = options.max_connections,
                        "health endpoint: connection limit reached; closing the oldest idle connections to admit new ones"
                    );
                    full = true;
                }
            } else {
                full = false;
            }
            // Registered here, not in its task: a connection's age is its place in the accept order.
            let handle = connections.admit();
            tokio::spawn(serve_connection(
                stream,
                handle,
                connections.clone(),
                health.clone(),
                registry.clone(),
                options.clone(),
            ));
        }
    }
}

/// Why a connection's task ended.
enum Ended {
    Served(Result<(), hyper::Error>),
    Idle,
    Closed,
}

/// Serves one connection until the client closes it, a timeout closes it, or the cap needs its
/// place; then gives its place back.
async fn serve_connection<S>(
    stream: S,
    handle: Handle,
    connections: Arc<Connections>,
    health: Health,
    registry: Arc<Registry>,
    options: EndpointOptions,
) where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let answering = handle.clone();
    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
        // Counted from here until hyper drops the response's body, i.e. has written it.
        let in_flight = answering.start_request();
        let reply = answer(request.uri().path(), &health, &registry)
            .map(|body| Answering::new(body, Some(in_flight)));
        async move { Ok::<_, Infallible>(reply) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    let io = TokioIo::new(handle.watch(stream));
    let mut connection = pin!(builder.serve_connection(io, service));
    let mut idle = pin!(handle.quiet_for(options.idle_timeout));
    let ended = tokio::select! {
        // A connection that ended is reported as such; of the two ways to close one, the asked-for
        // close first, as it lets a request that just arrived finish. Each is ready once.
        biased;
        served = connection.as_mut() => Ended::Served(served),
        () = handle.close_requested() => Ended::Closed,
        () = idle.as_mut() => Ended::Idle,
    };
    match ended {
        Ended::Served(Ok(())) => {}
        Ended::Served(Err(error)) => {
            tracing::debug!(%error, "health endpoint: connection ended");
        }
        Ended::Idle => tracing::debug!("health endpoint: closed a connection idle for too long"),
        Ended::Closed => {
            // Chosen while idle, but a request may have arrived since: let its response finish
            // (no further request is read), within the idle timeout.
            let cut = handle.was_cut();
            if handle.busy() && !cut {
                connection.as_mut().graceful_shutdown();
                tokio::select! {
                    // Both end the wait; the response that finished first, then the bound.
                    biased;
                    _ = connection.as_mut() => {}
                    () = idle.as_mut() => {}
                }
            }
            tracing::debug!(
                cut,
                "health endpoint: closed an idle or stalled connection to admit a new one"
            );
        }
    }
    connections.forget(handle.id());
}

fn answer(path: &str, health: &Health, registry: &Registry) -> Response<Full<Bytes>> {
    match path {
        "/healthz" | "/livez" => checks_response(health.checks(false)),
        "/readyz" => checks_response(health.checks(true)),
        "/metrics" => {
            let mut text = String::new();
            let status = match prometheus_client::encoding::text::encode(&mut text, registry) {
                Ok(()) => StatusCode::OK,
                Err(error) => {
                    tracing::warn!(%error, "metrics: encoding failed");
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            };
            text_response(
                status,
                text,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
        }
        _ => text_response(
            StatusCode::NOT_FOUND,
            "not found\n".into(),
            "text/plain; charset=utf-8",
        ),
    }
}

fn checks_response(checks: Vec<(&'static str, Result<(), String>)>) -> Response<Full<Bytes>> {
    let mut body = String::new();
    let mut healthy = true;
    for (name, result) in &checks {
        match result {
            Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                healthy = false;
                body.push_str(&format!("[-]{name} failed: {reason}\n"));
            }
        }
    }
    let status = if healthy {
        body.push_str("ok\n");
        StatusCode::OK
    } else {
        body.push_str("check failed\n");
        StatusCode::INTERNAL_SERVER_ERROR
    };
    text_response(status, body, "text/plain; charset=utf-8")
}

fn text_response(
    status: StatusCode,
    body: String,
    content_type: &'static str,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use parking_lot::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    use super::*;

    fn health() -> Health {
        Health::new(None, Arc::new(AtomicUsize::new(0)), 0)
    }

    /// Serves on a fresh loopback port; the endpoint stops when the returned sender is dropped.
    async fn serve(options: EndpointOptions) -> (std::net::SocketAddr, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let endpoints = Endpoints {
            acceptor: listener,
            health: health(),
            registry: Arc::new(Registry::default()),
            options,
        };
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(endpoints.serve(stopped));
        (addr, stop)
    }

    /// Reads until the server closes the connection (EOF or reset): what it sent, and when.
    async fn read_until_closed(stream: &mut TcpStream) -> (String, Instant) {
        let mut received = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
        (
            String::from_utf8_lossy(&received).into_owned(),
            Instant::now(),
        )
    }

    #[test]
    fn accept_backoff_doubles_from_5ms_to_1s_and_starts_over_after_a_success() {
        let mut backoff =
            AcceptBackoff::new(DEFAULT_ACCEPT_BACKOFF_INITIAL, DEFAULT_ACCEPT_BACKOFF_MAX);
        let pauses: Vec<u64> = (0..11)
            .map(|_| backoff.next_delay().as_millis() as u64)
            .collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(5));
    }

    /// An acceptor whose first `failures` accepts fail at once (as `accept` does with no file
    /// descriptor left), then never returns; it reports when each call was made.
    struct Failing {
        failures: usize,
        calls: Arc<Mutex<Vec<Instant>>>,
        count: watch::Sender<usize>,
    }

    impl Acceptor for Failing {
        type Stream = TcpStream;
        fn accept(&mut self) -> impl Future<Output = std::io::Result<TcpStream>> + Send {
            let calls = {
                let mut calls = self.calls.lock();
                calls.push(Instant::now());
                calls.len()
            };
            self.count.send_replace(calls);
            let fail = calls <= self.failures;
            async move {
                if fail {
                    Err(std::io::Error::other("Too many open files (os error 24)"))
                } else {
                    std::future::pending().await
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failed_accepts_are_retried_after_growing_pauses_not_at_once() {
        let failures = 11;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (count, mut counted) = watch::channel(0);
        let endpoints = Endpoints {
            acceptor: Failing {
                failures,
                calls: calls.clone(),
                count,
            },
            health: health(),
            registry: Arc::new(Registry::default()),
            options: EndpointOptions::new(),
        };
        let (_stop, stopped) = watch::channel(false);
        tokio::spawn(endpoints.serve(stopped));
        counted
            .wait_for(|calls| *calls > failures)
            .await
            .expect("the endpoint keeps accepting");
        let calls = calls.lock().clone();
        let pauses: Vec<u64> = calls
            .windows(2)
            .map(|pair| (pair[1] - pair[0]).as_millis() as u64)
            .collect();
        assert_eq!(
            pauses,
            [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000],
            "the pause before each retry of a failed accept"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_loris_is_closed_after_the_header_read_timeout() {
        let (addr, _stop) = serve(EndpointOptions::new()).await;
        let mut client = TcpStream::connect(addr).await.expect("connect");
        let started = Instant::now();
        // Half a request header, then nothing.
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n")
            .await
            .expect("send");
        let (_, closed) =
            tokio::time::timeout(Duration::from_secs(600), read_until_closed(&mut client))
                .await
                .expect("the server closes a connection that never finishes its header");
        let waited = closed - started;
        assert!(
            waited >= DEFAULT_HEADER_READ_TIMEOUT && waited < DEFAULT_IDLE_TIMEOUT,
            "closed after {waited:?}, expected the header-read timeout ({DEFAULT_HEADER_READ_TIMEOUT:?})"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_alive_connection_is_closed_after_the_header_read_timeout_between_requests() {
        let (addr, _stop) = serve(EndpointOptions::new()).await;
        let mut client = TcpStream::connect(addr).await.expect("connect");
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .expect("send");
        let mut response = Vec::new();
        let mut buf = [0u8; 1024];
        while !response.ends_with(b"ok\n") {
            let n = client.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before the response");
            response.extend_from_slice(&buf[..n]);
        }
        let answered = Instant::now();
        assert!(response.starts_with(b"HTTP/1.1 200"));
        let (more, closed) =
            tokio::time::timeout(Duration::from_secs(600), read_until_closed(&mut client))
                .await
                .expect("the server closes a kept-alive connection that sends no next request");
        assert_eq!(more, "");
        let waited = closed - answered;
        assert!(
            waited >= DEFAULT_HEADER_READ_TIMEOUT && waited < DEFAULT_IDLE_TIMEOUT,
            "closed after {waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_header_timeout_a_silent_connection_is_closed_after_the_idle_timeout() {
        let (addr, _stop) = serve(EndpointOptions::new().header_read_timeout(None)).await;
        let mut client = TcpStream::connect(addr).await.expect("connect");
        let started = Instant::now();
        let (_, closed) =
            tokio::time::timeout(Duration::from_secs(600), read_until_closed(&mut client))
                .await
                .expect("the server closes a connection on which nothing moves");
        let waited = closed - started;
        assert!(
            waited >= DEFAULT_IDLE_TIMEOUT
                && waited < DEFAULT_IDLE_TIMEOUT + Duration::from_secs(1),
            "closed after {waited:?}, expected the idle timeout ({DEFAULT_IDLE_TIMEOUT:?})"
        );
    }

    #[tokio::test]
    async fn at_the_cap_the_oldest_idle_connection_makes_room_and_healthz_answers() {
        let (addr, _stop) = serve(EndpointOptions::new().max_connections(3)).await;
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(TcpStream::connect(addr).await.expect("connect"));
        }
        // The oldest has been answered once and is kept alive: idle again once its response is
        // written, so it may be closed.
        held[0]
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .expect("send");
        let mut response = Vec::new();
        let mut buf = [0u8; 1024];
        while !response.ends_with(b"ok\n") {
            let n = held[0].read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before the response");
            response.extend_from_slice(&buf[..n]);
        }
        // A fourth connection, over the cap: answered.
        let mut probe = TcpStream::connect(addr).await.expect("connect");
        probe
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .await
            .expect("send");
        let (response, _) =
            tokio::time::timeout(Duration::from_secs(10), read_until_closed(&mut probe))
                .await
                .expect("/healthz answers over the cap");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        // It took the place of the oldest, which the server closed.
        let (sent, _) =
            tokio::time::timeout(Duration::from_secs(10), read_until_closed(&mut held[0]))
                .await
                .expect("the oldest idle connection is closed to make room");
        assert_eq!(sent, "");
        for younger in &held[1..] {
            let mut buf = [0u8; 1];
            assert!(
                matches!(younger.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
                "only the oldest connection is closed"
            );
        }
    }

    /// An acceptor handing out the server's ends of in-memory pipes sent to it.
    struct Pipes(tokio::sync::mpsc::UnboundedReceiver<tokio::io::DuplexStream>);

    impl Acceptor for Pipes {
        type Stream = tokio::io::DuplexStream;
        async fn accept(&mut self) -> std::io::Result<tokio::io::DuplexStream> {
            match self.0.recv().await {
                Some(stream) => Ok(stream),
                None => std::future::pending().await,
            }
        }
    }

    #[tokio::test]
    async fn at_the_cap_connections_stalled_on_their_responses_make_room_for_the_probe() {
        // Each connection pipelines requests and never reads the answers: the server's writes
        // fill a 64-byte pipe and block, each connection with a request in flight. Before, such
        // a connection was never closed for room, and the probe waited for the idle timeout
        // (90 s); the 10 s bound below can only fail that way.
        let (connect, pipes) = tokio::sync::mpsc::unbounded_channel();
        let endpoints = Endpoints {
            acceptor: Pipes(pipes),
            health: health(),
            registry: Arc::new(Registry::default()),
            options: EndpointOptions::new().max_connections(3),
        };
        let (_stop, stopped) = watch::channel(false);
        tokio::spawn(endpoints.serve(stopped));
        let mut stalled = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..3 {
            let (client, server) = tokio::io::duplex(64);
            connect.send(server).expect("serving");
            let (mut reading, mut writing) = tokio::io::split(client);
            // Sent from a task of its own: the server stops reading once its writes block.
            stalled.push(tokio::spawn(async move {
                let pipelined = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n".repeat(50);
                let _ = writing.write_all(&pipelined).await;
                writing
            }));
            // The server is answering: its first bytes are in the pipe (and it is blocked).
            let mut first = [0u8; 8];
            reading.read_exact(&mut first).await.expect("answering");
            assert_eq!(&first, b"HTTP/1.1");
            readers.push(reading);
        }
        let (mut probe, server) = tokio::io::duplex(1 << 16);
        connect.send(server).expect("serving");
        probe
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .await
            .expect("send");
        let mut response = String::new();
        tokio::time::timeout(Duration::from_secs(10), probe.read_to_string(&mut response))
            .await
            .expect("the probe is answered although every connection has a request in flight")
            .expect("read");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
}
