//! # Listening sockets: a cap on connections, and the timeouts that close them
//!
//! ferrokube listens in three places: the embedded API server (`ferrokube-apiserver`), the
//! manager's health and metrics endpoint (`ferrokube-runtime`) and the live view
//! (`ferrokube-view`). Each serves one task per connection, and each meets the same clients: a
//! slow loris that trickles header bytes, a client that opens thousands of connections, one that
//! pipelines requests and never reads the answers. Without limits each holds a task and a file
//! descriptor for ever, in a process it shares with the controllers. This crate is the one home of
//! what the three listeners do about it; each keeps only its own defaults and its own serving.
//!
//! ## How data flows
//!
//! ```text
//!  accept ──▶ Connections::admit ── at the cap? ─▶ evict: the oldest connection with no request
//!                 │                                  in flight (closed gracefully), or else the
//!                 │                                  one that moved no byte for the longest (cut)
//!                 ▼
//!             Handle (its id is its place in the accept order)
//!                 │  handle.watch(stream) ─▶ Watched: every byte read or written ─▶ Activity
//!                 │  handle.start_request() ─▶ InFlight, kept in the response body (Answering)
//!                 │                            until the body is dropped ─▶ Activity
//!                 ▼
//!             the serving task selects on: the connection ending, handle.close_requested(),
//!             handle.idle_for / handle.quiet_for (timeouts), handle.no_request_by (first request)
//!                 │
//!                 ▼
//!             Connections::forget(id) when the task ends
//! ```
//!
//! The accept loop never waits for a slot: a new connection (a probe, a controller's fresh
//! connection, a browser's new tab) is always admitted, and the victims are the oldest idle
//! sockets, an attacker's own first. A connection evicted while a request is in flight is told so
//! ([`Handle::was_cut`]): its task drops it at once rather than letting its answer finish.
//!
//! ## Two kinds of idle
//!
//! - [`Handle::idle_for`]: no request in flight for a while. kube-apiserver's `IdleTimeout`
//!   works this way (HTTP/2 pings and a watch's quiet stretches do not matter; an open watch is a
//!   request in flight).
//! - [`Handle::quiet_for`]: no byte moved for a while, whatever is in flight. The manager's
//!   endpoint uses it: its answers are small, so a connection that moves nothing is stuck.
//!
//! The listeners' tests meet the same hostile clients too: the module `slow_client` (feature
//! `test-support`, for tests only) is their one home.
//!
//! No `unwrap` here: every count is an atomic, every table a `parking_lot` mutex held for a few
//! map operations, and every time a `tokio::time::Instant` (tests can pause the clock).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Frame, SizeHint};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// A timeout longer than this counts as this long: "never", without overflowing an `Instant`.
/// Listeners clamp the timeouts their users give to it.
pub const LONGEST_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The connections a listener is serving, oldest first, under a cap.
pub struct Connections {
    /// Names the listener in log lines ("health endpoint", "live view", ...).
    listener: &'static str,
    /// At least 1.
    max: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    /// By id, which grows with each admitted connection: the first entry is the oldest.
    /// Invariant: at most `max` entries once `admit` returns.
    by_age: BTreeMap<u64, Handle>,
}

/// What the accept loop knows of one connection, and how it tells it to close. Cheap to clone:
/// every field is shared with the connection's task.
#[derive(Clone)]
pub struct Handle {
    id: u64,
    /// Requests received and not yet answered in full (their response bodies not yet dropped).
    in_flight: Arc<AtomicUsize>,
    /// Whether a request ever started (ends the first-request deadline).
    requested: Arc<AtomicBool>,
    activity: Arc<Activity>,
    /// Set before `close` is notified when the connection is evicted although busy: it is dropped
    /// at once, its answer cut, rather than given time to finish.
    cut: Arc<AtomicBool>,
    close: Arc<Notify>,
}

impl Connections {
    /// A table for at most `max` connections (at least 1), `listener` naming it in log lines.
    pub fn new(listener: &'static str, max: usize) -> Connections {
        Connections {
            listener,
            max: max.max(1),
            open: Mutex::new(Open::default()),
        }
    }

    /// Registers a newly accepted connection, first evicting others if the cap is reached.
    /// Call it in the accept loop, not in the connection's task: a connection's age is its place
    /// in the accept order.
    pub fn admit(&self) -> Handle {
        let mut open = self.open.lock();
        let mut warned = false;
        while open.by_age.len() >= self.max {
            if !warned {
                tracing::debug!(
                    listener = self.listener,
                    max = self.max,
                    "connection limit reached: closing the oldest idle connection"
                );
                warned = true;
            }
            if !evict_one(&mut open) {
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

    /// A connection's task ended: its place is free.
    pub fn forget(&self, id: u64) {
        self.open.lock().by_age.remove(&id);
    }

    /// How many connections are registered.
    pub fn len(&self) -> usize {
        self.open.lock().by_age.len()
    }

    /// Whether no connection is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// Closes the oldest connection with no request in flight, or, if every one has one, cuts the one
/// that moved no byte for the longest (a client that stopped reading its answers: a probe's
/// connection has just moved its request, so it is never that one while others stall). False if
/// there is no connection at all.
fn evict_one(open: &mut Open) -> bool {
    let idle = open
        .by_age
        .iter()
        .find(|(_, handle)| !handle.busy())
        .map(|(id, _)| *id);
    let (victim, cut) = match idle {
        Some(id) => (Some(id), false),
        None => (
            open.by_age
                .iter()
                .min_by_key(|(_, handle)| handle.activity.last_byte())
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
    /// The connection's place in the accept order (for [`Connections::forget`]).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Wraps the accepted stream so that every byte it moves is noted (for [`Handle::quiet_for`]
    /// and for choosing whom to cut at the cap).
    pub fn watch<S>(&self, stream: S) -> Watched<S> {
        Watched {
            inner: stream,
            activity: self.activity.clone(),
        }
    }

    /// Counts a request in flight until the returned guard (keep it in the response body, see
    /// [`Answering`]) drops.
    pub fn start_request(&self) -> InFlight {
        self.requested.store(true, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight {
            count: self.in_flight.clone(),
            activity: self.activity.clone(),
        }
    }

    /// Whether a request is in flight.
    pub fn busy(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0
    }

    /// Whether the connection was evicted while busy: drop it at once, do not let its answer
    /// finish. Meaningful once [`Handle::close_requested`] has resolved.
    pub fn was_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    /// Resolves once the cap has chosen this connection to make room (at once if it already has).
    pub async fn close_requested(&self) {
        self.close.notified().await;
    }

    /// Resolves once the connection has had no request in flight for `timeout`: since it was
    /// admitted, or since its last request was answered in full. Sleeps until the earliest moment
    /// that could be so, then looks again (a request may have come and gone meanwhile).
    pub async fn idle_for(&self, timeout: Duration) {
        loop {
            let due = self
                .activity
                .idle_since()
                .and_then(|since| since.checked_add(timeout));
            match due {
                Some(due) if !self.busy() && Instant::now() >= due => return,
                Some(due) if !self.busy() => tokio::time::sleep_until(due).await,
                // Busy now: idle no sooner than `timeout` after it stops.
                _ => tokio::time::sleep(timeout).await,
            }
        }
    }

    /// Resolves once the connection has moved no byte for `timeout` (since it was admitted, or
    /// since its last byte); never without a timeout.
    pub async fn quiet_for(&self, timeout: Option<Duration>) {
        let Some(timeout) = timeout else {
            return std::future::pending().await;
        };
        loop {
            let Some(due) = self
                .activity
                .last_byte()
                .and_then(|last| last.checked_add(timeout))
            else {
                return std::future::pending().await;
            };
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }

    /// Resolves at `deadline` if no request has started by then; never otherwise (nor without a
    /// deadline).
    pub async fn no_request_by(&self, deadline: Option<Instant>) {
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
pub struct InFlight {
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

/// A response body that keeps its request counted in flight until the HTTP server has sent it (a
/// watch: until it ends) and dropped it.
pub struct Answering<B> {
    body: B,
    _in_flight: Option<InFlight>,
}

impl<B> Answering<B> {
    /// `body`, counted in flight while `in_flight` is `Some` (`None`: a connection the cap does not
    /// track, such as an in-process one).
    pub fn new(body: B, in_flight: Option<InFlight>) -> Answering<B> {
        Answering {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Answering<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
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
struct Activity {
    since: Instant,
    /// Milliseconds from `since` to the last byte read or written (0: none yet).
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

    fn millis_since_start(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn request_ended(&self) {
        self.idle_from
            .store(self.millis_since_start(), Ordering::SeqCst);
    }

    fn touch(&self) {
        self.last
            .store(self.millis_since_start(), Ordering::Relaxed);
    }

    /// When the connection last had no request in flight from (meaningful while none is).
    fn idle_since(&self) -> Option<Instant> {
        self.since
            .checked_add(Duration::from_millis(self.idle_from.load(Ordering::SeqCst)))
    }

    fn last_byte(&self) -> Option<Instant> {
        self.since
            .checked_add(Duration::from_millis(self.last.load(Ordering::Relaxed)))
    }
}

/// A stream that notes every read or write that moved bytes ([`Handle::watch`]).
pub struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    /// The stream inside.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
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

#[cfg(any(test, feature = "test-support"))]
pub mod slow_client;

#[cfg(test)]
mod tests;
