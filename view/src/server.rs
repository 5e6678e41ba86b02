//! [`LiveView`], the builder, and [`ViewServer`], the handle of a running view: one tokio task
//! accepting connections, one task per connection, HTTP/1.1 (browsers and `curl` speak it).
//!
//! # Who may ask
//!
//! The view has buttons that act on the running system (`POST /api/actions/{id}`) and no
//! authentication: it relies on listening on loopback. That keeps other machines out, not web
//! pages in the machine's own browser, which can reach loopback two ways:
//!
//! - **DNS rebinding**: a page at `evil.example` re-points its name at `127.0.0.1` and then reads
//!   the view (and presses its buttons) as its own origin. Its requests say `Host: evil.example`.
//! - **Cross-site requests**: any page may POST a form to `http://127.0.0.1:PORT/api/actions/…`
//!   without asking first. Its request says `Origin: https://evil.example`.
//!
//! So every request is checked by the [`HostGuard`](crate::host_guard::HostGuard) first, and refused with 403 unless its `Host`
//! (if any) and its `Origin` (if any, whatever the method) name `localhost`, a loopback address,
//! the address the view is bound to (any address literal when bound to `0.0.0.0` or `::`: an
//! address cannot be rebound), or a name given to [`LiveView::allow_host`]. Browsers on the
//! view's own page, `curl` and test clients send `Host: 127.0.0.1:PORT` and pass.
//!
//! Slow and too many connections are bounded too: see [`crate::limits`]
//! ([`LiveView::header_read_timeout`], [`LiveView::max_connections`]).

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;

use super::actions::{ActionTable, RegisteredAction};
use super::host_guard::HostGuard;
use super::journal::Journal;
use super::layer::PipelineLayer;
use super::limits::{DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS};
use super::routes::{ViewState, answer};
use ferrokube_listen::{Answering, Connections, LONGEST_TIMEOUT};

/// How long to wait after a failed `accept` before the next one.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// How long a connection closed to make room may still finish a request that arrived as it was
/// chosen.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Why the view could not start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("live view: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("live view: cannot read the bound address: {0}")]
    LocalAddr(#[source] std::io::Error),
}

/// The live view: a journal of the pipeline's events, the actions its page offers, and where to
/// serve it. Build it, add its [`layer`](LiveView::layer) to the process's subscriber, then
/// [`serve`](LiveView::serve) it.
///
/// ```no_run
/// # async fn demo() -> Result<(), ferrokube_view::ViewError> {
/// use tracing_subscriber::prelude::*;
///
/// let view = ferrokube_view::LiveView::new()
///     .addr(([127, 0, 0, 1], 8080).into())
///     .action("hello", "Say hello", || "hello".to_string());
/// tracing_subscriber::registry().with(view.layer()).init();
/// let server = view.serve().await?;
/// println!("live view on http://{}", server.addr());
/// # Ok(()) }
/// ```
pub struct LiveView {
    /// Default `127.0.0.1:0`: loopback only (the view has buttons and no authentication), on a
    /// port the OS picks.
    addr: SocketAddr,
    journal: Journal,
    actions: ActionTable,
    /// Names requests may use besides loopback and localhost (see [`HostGuard`]).
    allowed_hosts: Vec<String>,
    /// See [`LiveView::header_read_timeout`]; at most `LONGEST_TIMEOUT`.
    header_read_timeout: Option<Duration>,
    /// See [`LiveView::max_connections`]; at least 1.
    max_connections: usize,
}

impl Default for LiveView {
    fn default() -> Self {
        LiveView::new()
    }
}

impl LiveView {
    /// A view on `127.0.0.1:0` with no actions, keeping the latest
    /// [`DEFAULT_RING_CAPACITY`](super::DEFAULT_RING_CAPACITY) records and at most
    /// [`DEFAULT_SNAPSHOT_CAPACITY`](super::DEFAULT_SNAPSHOT_CAPACITY) slots.
    pub fn new() -> LiveView {
        LiveView {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            journal: Journal::default(),
            actions: ActionTable::default(),
            allowed_hosts: Vec::new(),
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// How long a client may take to send a request's head, from the moment its connection
    /// waits for a request (its first or the next); then the connection is closed. `None`: no
    /// limit. Default [`DEFAULT_HEADER_READ_TIMEOUT`] (32 s).
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> LiveView {
        self.header_read_timeout = timeout.map(|t| t.min(LONGEST_TIMEOUT));
        self
    }

    /// How many connections are served at once (at least 1); a new one beyond it closes the
    /// oldest with no request in flight (or the oldest, if all are answering). Default
    /// [`DEFAULT_MAX_CONNECTIONS`] (128).
    pub fn max_connections(mut self, max: usize) -> LiveView {
        self.max_connections = max.max(1);
        self
    }

    /// Where to listen (default `127.0.0.1:0`; port 0 lets the OS pick, see
    /// [`ViewServer::addr`]). Requests are answered when they name a loopback address,
    /// `localhost` or this address; add host names with [`LiveView::allow_host`].
    pub fn addr(mut self, addr: SocketAddr) -> LiveView {
        self.addr = addr;
        self
    }

    /// Answers requests whose `Host` or `Origin` names `name` too (a machine's name, when the
    /// view listens on more than loopback); every other name is refused with 403 (see the
    /// [module docs](crate): a defence against DNS rebinding).
    pub fn allow_host(mut self, name: impl Into<String>) -> LiveView {
        self.allowed_hosts.push(name.into());
        self
    }

    /// How many of the latest records to keep for `/api/events` and `/api/follow` (default
    /// [`DEFAULT_RING_CAPACITY`](super::DEFAULT_RING_CAPACITY), at least 1). A page that falls
    /// further behind reloads the snapshot.
    pub fn ring_capacity(self, capacity: usize) -> LiveView {
        self.journal.set_ring_capacity(capacity);
        self
    }

    /// How many slots the snapshot keeps at most (default
    /// [`DEFAULT_SNAPSHOT_CAPACITY`](super::DEFAULT_SNAPSHOT_CAPACITY), at least 1).
    pub fn snapshot_capacity(self, capacity: usize) -> LiveView {
        self.journal.set_snapshot_capacity(capacity);
        self
    }

    /// A button labelled `label`; pressing it runs `run` (on a blocking thread) and shows what it
    /// returned. Registering an `id` again replaces the earlier action.
    pub fn action(
        mut self,
        id: impl Into<String>,
        label: impl Into<String>,
        run: impl Fn() -> String + Send + Sync + 'static,
    ) -> LiveView {
        self.actions.register(RegisteredAction {
            id: id.into(),
            label: label.into(),
            run: Arc::new(run),
        });
        self
    }

    /// The journal the layer writes to and the server reads from.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The layer that feeds this view; add it to the process's subscriber.
    pub fn layer<S>(&self) -> PipelineLayer<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        self.journal.layer()
    }

    /// Binds the address and serves on a tokio task (call it inside a tokio runtime) until the
    /// returned handle is stopped or dropped.
    pub async fn serve(self) -> Result<ViewServer, ViewError> {
        let listener = TcpListener::bind(self.addr)
            .await
            .map_err(|source| ViewError::Bind {
                addr: self.addr,
                source,
            })?;
        let addr = listener.local_addr().map_err(ViewError::LocalAddr)?;
        let (stop, stopped) = watch::channel(false);
        let state = ViewState {
            journal: self.journal,
            actions: self.actions,
            guard: HostGuard::new(addr, &self.allowed_hosts),
        };
        let limits = Limits {
            connections: Arc::new(Connections::new("live view", self.max_connections)),
            header_read_timeout: self.header_read_timeout,
        };
        let task = tokio::spawn(accept_until_stopped(listener, state, stopped, limits));
        tracing::info!(%addr, "live view listening");
        Ok(ViewServer {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }
}

/// A running view. Dropping it stops the server (as [`stop`](ViewServer::stop) does, without
/// waiting); [`detach`](ViewServer::detach) it to serve for as long as the runtime runs.
#[must_use = "dropping the handle stops the live view; call detach() to keep it serving"]
pub struct ViewServer {
    addr: SocketAddr,
    /// `None` once detached: then nothing ever stops the server.
    stop: Option<watch::Sender<bool>>,
    task: Option<JoinHandle<()>>,
}

impl ViewServer {
    /// The address it listens on (with the port the OS picked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every open connection, and waits for the accept task to end.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send_replace(true);
        }
        if let Some(task) = self.task.take() {
            if let Err(error) = task.await {
                tracing::warn!(%error, "live view: the server task failed");
            }
        }
    }

    /// Lets the server run until the runtime shuts down, and returns its address.
    pub fn detach(mut self) -> SocketAddr {
        // Dropping the sender unsent: the server's wait for `true` never ends.
        self.stop.take();
        self.task.take();
        self.addr
    }
}

impl Drop for ViewServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send_replace(true);
        }
    }
}

/// Returns once `stopped` turns true; never, if its sender was dropped without that (detached).
async fn until_stopped(mut stopped: watch::Receiver<bool>) {
    if stopped.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The limits on the view's connections (see [`crate::limits`]).
struct Limits {
    connections: Arc<Connections>,
    header_read_timeout: Option<Duration>,
}

async fn accept_until_stopped(
    listener: TcpListener,
    state: ViewState,
    stopped: watch::Receiver<bool>,
    limits: Limits,
) {
    let state = Arc::new(state);
    let stop = until_stopped(stopped.clone());
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, typically: let some close before trying again.
                    tracing::warn!(%error, "live view: accept failed");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        let state = state.clone();
        let stopped = stopped.clone();
        // Registered here, not in its task: a connection's age is its place in the accept order.
        let handle = limits.connections.admit();
        let connections = limits.connections.clone();
        let header_read_timeout = limits.header_read_timeout;
        tokio::spawn(async move {
            let answering = handle.clone();
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                let state = state.clone();
                // Counted in flight until hyper has written the reply and dropped its body.
                let in_flight = answering.start_request();
                async move {
                    let reply = answer(request, &state).await;
                    Ok::<_, Infallible>(reply.map(|body| Answering::new(body, Some(in_flight))))
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(TokioIo::new(handle.watch(stream)), service);
            tokio::pin!(connection);
            tokio::select! {
                served = connection.as_mut() => if let Err(error) = served {
                    tracing::debug!(%error, "live view: connection ended");
                },
                () = handle.close_requested() => {
                    // Chosen while idle, a request may have arrived since: let it finish.
                    if handle.busy() && !handle.was_cut() {
                        connection.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(CLOSE_GRACE, connection.as_mut()).await;
                    }
                }
                _ = until_stopped(stopped) => {}
            }
            connections.forget(handle.id());
        });
    }
}
