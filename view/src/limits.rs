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
//! Data flow: the accept loop admits every new connection into a `ferrokube_listen::Connections`
//! (the cap every ferrokube listener shares); at the cap it first closes the oldest connection
//! with no request in flight (or, if all are answering, the one that moved no byte for the
//! longest), so a browser's new request is never kept out by held sockets. hyper's HTTP/1.1
//! `header_read_timeout` (with a tokio timer) closes slow heads. This module keeps the view's
//! defaults.
//!
//! [`LiveView::allow_host`]: crate::LiveView::allow_host

use std::time::Duration;

/// How long a client may take to send a request's head, from the moment its connection waits
/// for a request: 32 s, kube-apiserver's `ReadHeaderTimeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// How many connections the view serves at once: 128. A browser opens about six per host, a
/// few tabs and `curl`s stay far below; a process's usual 1,024 descriptors stay far above.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;
