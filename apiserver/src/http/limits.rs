//! Limits on the connections the listening socket accepts: a header-read timeout and a cap.
//!
//! # Why
//!
//! Without them a client that opens connections and trickles header bytes (slow loris), or
//! simply opens thousands, holds a task and a file descriptor per connection for ever; the server
//! usually shares its process (and its descriptor limit) with the controllers under test.
//!
//! | limit | default | what it stops | peer |
//! |---|---|---|---|
//! | header-read timeout | [`DEFAULT_HEADER_READ_TIMEOUT`] (32 s) | a connection that sends nothing, half a TLS handshake or half a request head, then waits | kube-apiserver's `ReadHeaderTimeout` (k8s.io/apiserver `pkg/server/secure_serving.go`) |
//! | idle timeout | [`DEFAULT_IDLE_TIMEOUT`] (90 s) | a connection (an HTTP/2 one: HTTP/1.1's wait for its next head is the header-read timeout's) that keeps no request in flight, its client's pings notwithstanding | kube-apiserver's `IdleTimeout` of `http.Server` and `http2.Server` (`secure_serving.go`) |
//! | connection cap | [`DEFAULT_MAX_CONNECTIONS`] (1,024) | thousands of connections, each a descriptor | none in kube-apiserver (Go's `http.Server` has no cap); the manager endpoint's eviction rule |
//!
//! # How data flows
//!
//! ```text
//!  accept ──▶ at the cap? ─▶ Connections::make_room: close the oldest connection with no request
//!    │                        in flight, or else the one that moved no byte for the longest
//!    ▼
//!  register (its age is its place in the accept order) ──▶ serve: TLS handshake and first
//!  request head before the deadline (accept + header-read timeout); later heads of an HTTP/1.1
//!  keep-alive connection: hyper's own header-read timeout
//! ```
//!
//! The accept loop never waits for a slot: a new connection (a probe, a controller's fresh
//! connection) is always admitted, and the victims are the oldest idle sockets, an attacker's
//! own first. The in-process connections of `RunningServer::serve_connection` are not counted.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::body::Body;

/// How long a client may take from its connection's accept to the end of its first request's
/// head (TLS handshake included), and, on an HTTP/1.1 keep-alive connection, from waiting for the
/// next request to the end of its head: 32 s, kube-apiserver's `ReadHeaderTimeout` ("just shy of
/// requestTimeoutUpperBound").
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// How long a connection may keep no request in flight before it is closed (on HTTP/2, with a
/// GOAWAY): 90 s, kube-apiserver's `IdleTimeout` ("matches http.DefaultTransport keep-alive
/// timeout"). Pings do not count as requests, as in Go's HTTP/2 server.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How many connections from the listening socket are served at once: 1,024. Far more than a
/// test's clients open (one per HTTP/1.1 watch plus a small pool), and the usual soft limit of
/// descriptors of a process, which the server shares with its in-process clients.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// A timeout longer than this counts as this long: "never", without overflowing an `Instant`.
pub(super) const LONGEST_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The connections being served, oldest first.
pub(super) struct Connections {
    max: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    /// By id, which grows with each accepted connection: the first entry is the oldest.
    /// Invariant: at most `max` entries once `admit` returns.
    by_age: BTreeMap<u64, Handle>,
}

/// What the accept loop knows of one connection, and how it tells it to close.
#[derive(Clone)]
pub(super) struct Handle {
    pub(super) id: u64,
    /// Requests received and not yet answered in full (their response bodies not yet dropped).
    in_flight: Arc<AtomicUsize>,
    /// Whether a request ever reached the handlers (ends the first-request deadline).
    requested: Arc<AtomicBool>,
    pub(super) activity: Arc<Activity>,
    /// Set before `close` is notified when the connection is chosen although busy: it is dropped
    /// at once, its answer cut, rather than given time to finish.
    pub(super) cut: Arc<AtomicBool>,
    pub(super) close: Arc<Notify>,
}

impl Connections {
    pub(super) fn new(max: usize) -> Connections {
        Connections {
            max: max.max(1),
            open: Mutex::new(Open::default()),
        }
    }

    /// Registers a new connection, first making room if the cap is reached.
    pub(super) fn admit(&self) -> Handle {
        let mut open = self.open.lock();
        let mut warned = false;
        while open.by_age.len() >= self.max {
            if !warned {
                tracing::debug!(
                    max = self.max,
                    "connection limit reached: closing the oldest idle connection"
                );
                warned = true;
            }
            if !make_room(&mut open) {
                break;
            }
        }
        let id = open.next_id;
        open.next_id += 1;
        let handle = Handle {
            id,
            in_flight: Arc::default(),
            requested: Arc::default(),
            activity: Arc::new(Activity::new()),
            cut: Arc::default(),
            close: Arc::default(),
        };
        open.by_age.insert(id, handle.clone());
        handle
    }

    /// A connection's task ended.
    pub(super) fn forget(&self, id: u64) {
        self.open.lock().by_age.remove(&id);
    }

    /// How many connections are registered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.open.lock().by_age.len()
    }
}

/// Closes the oldest connection with no request in flight, or, if every one has one, the one that
/// moved no byte for the longest (a client that stopped reading its answers). False if none.
fn make_room(open: &mut Open) -> bool {
    let idle = open
        .by_age
        .iter()
        .find(|(_, handle)| handle.in_flight.load(Ordering::SeqCst) == 0)
        .map(|(id, _)| *id);
    let (victim, cut) = match idle {
        Some(id) => (Some(id), false),
        None => (
            open.by_age
                .iter()
                .min_by_key(|(_, handle)| handle.activity.last())
                .map(|(id, _)| *id),
            true,
        ),
    };
    match victim.and_then(|id| open.by_age.remove(&id)) {
        Some(handle) => {
            handle.cut.store(cut, Ordering::SeqCst);
            handle.close.notify_one();
            true
        }
        None => false,
    }
}

impl Handle {
    /// Counts a request in flight until the returned guard (kept in its response body) drops.
    pub(super) fn start_request(&self) -> InFlight {
        self.requested.store(true, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight {
            count: self.in_flight.clone(),
            activity: self.activity.clone(),
        }
    }

    pub(super) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0
    }

    /// Resolves once the connection has had no request in flight for `timeout`: since it was
    /// accepted, or since its last request was answered in full. Sleeps until the earliest moment
    /// that could be so, then looks again (a request may have come and gone meanwhile).
    pub(super) async fn idle_for(&self, timeout: Duration) {
        loop {
            let idle_since = self.activity.idle_since();
            let due = idle_since.and_then(|since| since.checked_add(timeout));
            match due {
                Some(due) if !self.busy() && Instant::now() >= due => return,
                Some(due) if !self.busy() => tokio::time::sleep_until(due).await,
                // Busy now: idle no sooner than `timeout` after it stops.
                _ => tokio::time::sleep(timeout).await,
            }
        }
    }

    /// Resolves at `deadline` if no request has reached the handlers by then; never otherwise.
    pub(super) async fn no_request_by(&self, deadline: Option<Instant>) {
        if let Some(deadline) = deadline {
            tokio::time::sleep_until(deadline).await;
            if !self.requested.load(Ordering::SeqCst) {
                return;
            }
        }
        std::future::pending().await
    }
}

/// A request in flight, while alive.
pub(super) struct InFlight {
    count: Arc<AtomicUsize>,
    /// Told when the last request in flight ends (the idle timeout counts from there).
    activity: Arc<Activity>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.activity.request_ended();
        }
    }
}

/// A response body that keeps its request counted in flight until hyper has sent it (a watch:
/// until it ends) and dropped it.
pub(super) struct Answering {
    pub(super) body: Body,
    pub(super) _in_flight: Option<InFlight>,
}

impl http_body::Body for Answering {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// When a connection last moved a byte, and when its last request ended.
pub(super) struct Activity {
    since: Instant,
    /// Milliseconds from `since` to the last byte read or written.
    last: AtomicU64,
    /// Milliseconds from `since` to the end of the last request answered in full (0: none yet,
    /// idle since the accept).
    idle_from: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            since: Instant::now(),
            last: AtomicU64::new(0),
            idle_from: AtomicU64::new(0),
        }
    }

    fn request_ended(&self) {
        let millis = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_from.store(millis, Ordering::SeqCst);
    }

    /// When the connection last had no request in flight from (meaningful while none is).
    fn idle_since(&self) -> Option<Instant> {
        self.since
            .checked_add(Duration::from_millis(self.idle_from.load(Ordering::SeqCst)))
    }

    fn touch(&self) {
        let millis = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(millis, Ordering::Relaxed);
    }

    fn last(&self) -> Option<Instant> {
        self.since
            .checked_add(Duration::from_millis(self.last.load(Ordering::Relaxed)))
    }
}

/// A stream that notes in its [`Activity`] every read or write that moved bytes.
pub(super) struct Watched<S> {
    pub(super) inner: S,
    pub(super) activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            this.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            this.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let connections = Connections::new(2);
        let first = connections.admit();
        let second = connections.admit();
        let _busy = first.start_request();
        let third = connections.admit();
        assert_eq!(connections.len(), 2);
        assert!(!first.cut.load(Ordering::SeqCst));
        // The second was idle: closed, though the first is older.
        let notified = second.close.notified();
        tokio::pin!(notified);
        assert!(
            futures_now(notified.as_mut()),
            "the idle connection is told to close"
        );
        drop(third);
    }

    /// Polls once: whether the future is ready now.
    fn futures_now<F: std::future::Future + Unpin>(future: F) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut future = future;
        Pin::new(&mut future).poll(&mut cx).is_ready()
    }
}
