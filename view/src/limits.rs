//! Limits on the view's connections: a header-read timeout and a cap.
//!
//! Why: the view listens on loopback (or wider, with [`LiveView::allow_host`]) with one task per
//! connection; without limits a client that trickles header bytes (slow loris) or opens thousands
//! of connections holds a task and a descriptor each, for ever, in the process it observes.
//!
//! | limit | default | peer |
//! |---|---|---|
//! | header-read timeout, from the moment a connection waits for a request (its first or the next) | [`DEFAULT_HEADER_READ_TIMEOUT`] (32 s) | kube-apiserver's and controller-runtime's `ReadHeaderTimeout` |
//! | connection cap | [`DEFAULT_MAX_CONNECTIONS`] (128) | the manager endpoint's rule (`ferrokube_runtime::manager::EndpointOptions`) |
//!
//! Data flow: the accept loop [`Connections::admit`]s every new connection; at the cap it first
//! closes the oldest connection with no request in flight (or, if all are answering, the
//! oldest), so a browser's new request is never kept out by held sockets. hyper's HTTP/1.1
//! `header_read_timeout` (with a tokio timer) closes slow heads.
//!
//! [`LiveView::allow_host`]: crate::LiveView::allow_host

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// How long a client may take to send a request's head, from the moment its connection waits
/// for a request: 32 s, kube-apiserver's `ReadHeaderTimeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// How many connections the view serves at once: 128. A browser opens about six per host, a
/// few tabs and `curl`s stay far below; a process's usual 1,024 descriptors stay far above.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;

/// A timeout longer than this counts as this long ("never", without overflowing an `Instant`).
pub(crate) const LONGEST_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// The connections being served, oldest first.
pub(crate) struct Connections {
    max: usize,
    /// By id, which grows with each accepted connection: the first entry is the oldest.
    /// Invariant: at most `max` entries once `admit` returns.
    open: Mutex<(u64, BTreeMap<u64, Handle>)>,
}

/// One connection as the accept loop knows it.
#[derive(Clone, Default)]
pub(crate) struct Handle {
    pub(crate) id: u64,
    /// Requests being answered (0 or 1: HTTP/1.1 without pipelining of answers).
    in_flight: Arc<AtomicUsize>,
    /// Set before `close` is notified when the connection was chosen while answering.
    pub(crate) cut: Arc<AtomicBool>,
    pub(crate) close: Arc<Notify>,
}

impl Connections {
    pub(crate) fn new(max: usize) -> Connections {
        Connections {
            max: max.max(1),
            open: Mutex::new((0, BTreeMap::new())),
        }
    }

    /// Registers a new connection, first closing others if the cap is reached.
    pub(crate) fn admit(&self) -> Handle {
        let mut open = self.open.lock();
        let (next_id, by_age) = &mut *open;
        while by_age.len() >= self.max {
            let idle = by_age
                .iter()
                .find(|(_, handle)| handle.in_flight.load(Ordering::SeqCst) == 0)
                .map(|(id, _)| *id);
            let (victim, cut) = match idle {
                Some(id) => (Some(id), false),
                None => (by_age.keys().next().copied(), true),
            };
            let Some(handle) = victim.and_then(|id| by_age.remove(&id)) else {
                break;
            };
            tracing::debug!(
                max = self.max,
                cut,
                "live view: connection limit reached; closing the oldest"
            );
            handle.cut.store(cut, Ordering::SeqCst);
            handle.close.notify_one();
        }
        let handle = Handle {
            id: *next_id,
            ..Handle::default()
        };
        *next_id += 1;
        by_age.insert(handle.id, handle.clone());
        handle
    }

    /// A connection's task ended.
    pub(crate) fn forget(&self, id: u64) {
        self.open.lock().1.remove(&id);
    }
}

impl Handle {
    /// Counts a request in flight until the guard drops.
    pub(crate) fn start_request(&self) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.in_flight.clone())
    }

    pub(crate) fn busy(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) > 0
    }
}

/// A request in flight, while alive.
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
