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
//! | header-read timeout | [`DEFAULT_HEADER_READ_TIMEOUT`] (32 s) | a connection that sends nothing, half a TLS handshake or half a request head (on a keep-alive connection: from the head's first byte), then waits | kube-apiserver's `ReadHeaderTimeout` (k8s.io/apiserver `pkg/server/secure_serving.go`) |
//! | idle timeout | [`DEFAULT_IDLE_TIMEOUT`] (90 s) | a connection that keeps no request in flight (HTTP/2: its client's pings notwithstanding; HTTP/1.1: until a next request's first byte) | kube-apiserver's `IdleTimeout` of `http.Server` and `http2.Server` (`secure_serving.go`) |
//! | connection cap | [`DEFAULT_MAX_CONNECTIONS`] (1,024) | thousands of connections, each a descriptor | none in kube-apiserver (Go's `http.Server` has no cap); the eviction rule every ferrokube listener shares |
//!
//! # Where the mechanism lives
//!
//! The cap, the eviction rule, the request and byte accounting and the timeouts' futures are the
//! crate `ferrokube-listen`'s, shared with the manager's endpoint and the live view; this module
//! holds the API server's defaults, and `http/mod.rs` its accept loop and serving:
//!
//! ```text
//!  accept ──▶ Connections::admit (at the cap: the oldest idle connection closes, else the one
//!    │        quiet longest is cut)
//!    ▼
//!  serve: TLS handshake and first request head before the deadline (accept + header-read
//!  timeout: Handle::no_request_by); an HTTP/1.1 keep-alive connection between requests: the idle
//!  timeout until the next head's first byte, the header-read timeout from it
//!  (Handle::next_request_late); HTTP/2: no request in flight for the idle timeout
//!  (Handle::idle_for)
//! ```
//!
//! Go's `http.Server` times an HTTP/1.1 keep-alive connection so: it waits `IdleTimeout` for the
//! next request's first bytes, then gives the head `ReadHeaderTimeout` from there. hyper's own
//! header-read timeout starts as soon as an answer is sent, timing both as one (an idle
//! keep-alive connection closed at 32 s, not 90 s), so it is off on the listening socket.
//! Measured from outside (`scripts/keep-alive-timing.py`, 2026-11-29, raw lines in
//! `benches/keep-alive/idle-close-2026-11-29.jsonl`): kube-apiserver 1.37.2 and this server both
//! close an idle keep-alive connection 90.0 s after its answer, and one that sends half a request
//! line 40 s after its answer 32.0 s after that half line.
//!
//! The in-process connections of `RunningServer::serve_connection` are not counted.

use std::time::Duration;

/// How long a client may take from its connection's accept to the end of its first request's
/// head (TLS handshake included), and, on an HTTP/1.1 keep-alive connection, from the first byte
/// of the next request to the end of its head: 32 s, kube-apiserver's `ReadHeaderTimeout` ("just shy of
/// requestTimeoutUpperBound").
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// How long a connection may keep no request in flight before it is closed (on HTTP/2, with a
/// GOAWAY): 90 s, kube-apiserver's `IdleTimeout` ("matches http.DefaultTransport keep-alive
/// timeout"), for HTTP/1.1 (until the next request's first byte) and HTTP/2 alike. Pings do not
/// count as requests, as in Go's HTTP/2 server.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How many connections from the listening socket are served at once: 1,024. Far more than a
/// test's clients open (one per HTTP/1.1 watch plus a small pool), and the usual soft limit of
/// descriptors of a process, which the server shares with its in-process clients.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
