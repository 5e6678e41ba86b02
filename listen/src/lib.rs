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
//!             handle.idle_for / handle.quiet_for / handle.next_request_late (timeouts),
//!             handle.no_request_by (first request)
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
//! - [`Handle::next_request_late`]: an HTTP/1.1 keep-alive connection between requests, timed as
//!   Go's `http.Server` times it: the idle timeout until the next request's first byte, then the
//!   header-read timeout until its head ends.
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

    /// Wraps the accepted stream so that every byte it moves is noted (for [`Handle::quiet_for`],
    /// [`Handle::next_request_late`] and for choosing whom to cut at the cap).
    pub fn watch<S>(&self, stream: S) -> Watched<S> {
        Watched {
            inner: stream,
            activity: self.activity.clone(),
            in_flight: self.in_flight.clone(),
        }
    }

    /// Counts a request in flight until the returned guard (keep it in the response body, see
    /// [`Answering`]) drops.
    pub fn start_request(&self) -> InFlight {
        self.requested.store(true, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.activity.request_started();
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

    /// An HTTP/1.1 keep-alive connection's wait for its next request, as Go's `http.Server` (and
    /// so kube-apiserver) times it: resolves with [`Late::Idle`] once no byte of a next request
    /// has come for `idle` since the connection was admitted or its last request was answered in
    /// full (`IdleTimeout`), or with [`Late::SlowHead`] once a request head has been arriving for
    /// `head` (from its first byte) without the request starting (`ReadHeaderTimeout`). Never
    /// while a request is in flight, nor for a timeout that is `None`.
    ///
    /// A head's first byte is the first byte read while no request is in flight. The bytes of a
    /// request pipelined behind another (read while that one was in flight) are not seen as a
    /// head arriving: such a connection is timed by `idle` alone. Not for HTTP/2, whose pings
    /// and settings frames move bytes between requests: time those with [`Handle::idle_for`].
    pub async fn next_request_late(&self, idle: Option<Duration>, head: Option<Duration>) -> Late {
        loop {
            // Armed before the state is read, so a change between the two is not missed.
            let changed = self.activity.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let due = match (self.busy(), self.activity.head_from()) {
                (true, _) => None,
                (false, Some(first_byte)) => head
                    .and_then(|head| first_byte.checked_add(head))
                    .map(|due| (due, Late::SlowHead)),
                (false, None) => idle
                    .and_then(|idle| self.activity.idle_since()?.checked_add(idle))
                    .map(|due| (due, Late::Idle)),
            };
            match due {
                Some((due, late)) if Instant::now() >= due => return late,
                // Whichever comes first: the deadline, or a change that moves it.
                Some((due, _)) => {
                    let _ = tokio::time::timeout_at(due, changed).await;
                }
                None => changed.await,
            }
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

/// Why [`Handle::next_request_late`] resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Late {
    /// No byte of a next request came within the idle timeout.
    Idle,
    /// A request head began to arrive and did not end within the header-read timeout.
    SlowHead,
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

/// When a connection last moved a byte, when its last request ended, and when the head of its
/// next request began to arrive.
struct Activity {
    since: Instant,
    /// Milliseconds from `since` to the last byte read or written (0: none yet).
    last: AtomicU64,
    /// Milliseconds from `since` to the end of the last request answered in full (0: none yet,
    /// idle since the accept).
    idle_from: AtomicU64,
    /// Milliseconds from `since` to the first byte read while no request was in flight, or
    /// [`NO_HEAD`]. Invariant: set only while no request is in flight, cleared when one starts.
    head_from: AtomicU64,
    /// Woken when a request starts or ends, and when a next request's head begins to arrive.
    changed: Notify,
}

/// `Activity::head_from` when no head is arriving.
const NO_HEAD: u64 = u64::MAX;

impl Activity {
    fn new() -> Activity {
        Activity {
            since: Instant::now(),
            last: AtomicU64::new(0),
            idle_from: AtomicU64::new(0),
            head_from: AtomicU64::new(NO_HEAD),
            changed: Notify::new(),
        }
    }

    fn millis_since_start(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .min(NO_HEAD - 1)
    }

    fn request_started(&self) {
        self.head_from.store(NO_HEAD, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    fn request_ended(&self) {
        // Rounded up: an idle timeout counted from here never ends before it has fully passed.
        let ended = self.since.elapsed();
        let millis = u64::try_from(ended.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(u64::from(ended.subsec_nanos() % 1_000_000 != 0))
            .min(NO_HEAD - 1);
        self.idle_from.store(millis, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Bytes were read; `idle`: while no request was in flight, so they begin a next request's
    /// head (the first such read after a request starts or ends counts).
    fn bytes_read(&self, idle: bool) {
        self.touch();
        if idle
            && self
                .head_from
                .compare_exchange(
                    NO_HEAD,
                    self.millis_since_start(),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
        {
            self.changed.notify_waiters();
        }
    }

    /// When the head of the next request began to arrive, if it has.
    fn head_from(&self) -> Option<Instant> {
        match self.head_from.load(Ordering::SeqCst) {
            NO_HEAD => None,
            millis => self.since.checked_add(Duration::from_millis(millis)),
        }
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
    /// The connection's requests in flight: a read while there are none begins a head.
    in_flight: Arc<AtomicUsize>,
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
            let idle = this.in_flight.load(Ordering::SeqCst) == 0;
            this.activity.bytes_read(idle);
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
