//! Which connections a request may travel on: the pool, its generations, and the evidence that
//! retires a generation before any of its connections carries another request.
//!
//! ## Why
//!
//! A connection can die without a word (the server's host is gone, a NAT or load balancer forgot
//! it): no FIN, no RST, it simply carries nothing more. An idle pooled connection does not notice;
//! the first request sent on it waits out its whole deadline. Worse, an outage kills every open
//! connection at once, and the pool hands them out one after another (most recently used first):
//! with four idle HTTP/1.1 connections, one dead write after another, each waiting out its
//! timeout. Measured on 2026-11-28: a ReplicaSet controller acted 70 s after such a freeze,
//! kube-controller-manager (one HTTP/2 connection and its ping health check) after ~41 s.
//!
//! ## How: two rules
//!
//! 1. **A quiet connection is stale.** A connection that carried nothing for
//!    [`Config::idle_conn_stale_after`](crate::Config::idle_conn_stale_after) (10 s) is not trusted
//!    with a request until checked. HTTP/1.1 has no probe, so an idle pooled HTTP/1.1 connection
//!    that old is closed instead of reused: hyper-util's pool drops an entry idle longer than its
//!    idle timeout at checkout, synchronously, so the bound holds for the very next request.
//!    An HTTP/2 connection is pinged after that much silence and closed if the ping is not
//!    answered within 5 s. The bound is shorter than the informers' watch idle deadline (15 s):
//!    a change that a controller learns of through a watch resumed after an outage is therefore
//!    never acted upon through a connection from before the outage.
//! 2. **A request left unanswered condemns its generation.** The pool is one hyper client; when
//!    an attempt waits [`SUSPECT_AFTER`] or longer for the answer's head and gets none (our own
//!    deadline passed, or the caller gave up, as the leader elector does at half its renew
//!    deadline), every connection that was in the pool when the attempt was sent is presumed dead
//!    as well: the same outage would have killed it. The whole generation is replaced by a fresh
//!    pool at once; the next request opens a new connection. The old pool is dropped when its
//!    last request in flight ends, and its idle connections with it.
//!
//! Writes also get a deadline of their own
//! ([`Config::write_timeout`](crate::Config::write_timeout), 10 s, the leader election's default
//! renew deadline): a write stuck on a dead connection is given up, and its generation
//! condemned, within the time a leader allows itself to renew.
//!
//! ```text
//!   send_once ──▶ pool.current() ──▶ Generation { number: 7, http } ──▶ Attempt (sent_at)
//!                                                                           │
//!        answer's head ◀── answered() ──────────────────────────────────────┤
//!        dropped unanswered after ≥ SUSPECT_AFTER ──▶ pool.condemn(7) ──▶ Generation 8 (empty)
//!        a body stalls past its deadline (Error::Idle) ──▶ pool.condemn(7)
//! ```
//!
//! Replacing a whole generation is coarser than dropping exactly the connections idle since the
//! attempt left (hyper-util does not let us reach into its idle list): a connection opened or
//! proven alive after the attempt was sent goes too. The price is one new connection (and TLS
//! handshake) per request in flight afterwards, paid only after a request went unanswered; the
//! gain is a rule that is one comparison of two numbers.
//!
//! ## HTTP/1.1 stays the default
//!
//! Measured with the pooled-writes drill (client/tests/client/network_faults.rs,
//! `dead_connection_*_pooled_writes_*`, on the embedded server; raw lines in
//! benches/dead-connection/pooled-writes-ferrokube-apiserver-2026-11-29.jsonl), seconds from the
//! freeze until the create and the update after it succeeded:
//!
//! | writes | HTTP/1.1 before | HTTP/1.1 now | HTTP/2 (TLS) before | HTTP/2 (TLS) now |
//! |---|---|---|---|---|
//! | when the resumed watch delivers the change | failed at 45.0 (30 s timeout) | 15.0, 15.0, 15.0 | 15.1 | 15.1, 15.1, 15.1 |
//! | at once, retried while failing | failed at 30.0 | 10.0, 10.0, 10.0 | 15.0 (ping) | 10.0, 10.0, 10.0 |
//!
//! The whole ReplicaSet sample through the same kind of freeze, beside kube-controller-manager
//! 1.37.2 (scripts/bench-dead-connection.sh, 2026-11-29, two interleaved rounds on each server;
//! benches/dead-connection/frozen-pool-*), seconds from the freeze until the pod was created:
//! HTTP/1.1 13.0–13.2, HTTP/2 13.2–14.5 (one failed POST, retried), kube-controller-manager
//! 44.0–44.9 (70 s for ours before these rules).
//!
//! With the two rules HTTP/1.1 recovers as fast as HTTP/2 with pings, so the outage no longer
//! argues for HTTP/2; HTTP/1.1 keeps the advantages recorded on
//! [`Config::http2`](crate::Config::http2) (a watch on a connection of its own, no head-of-line
//! blocking, a dead connection takes down one request, not all).

use std::time::Duration;

use hyper_util::client::legacy::Builder;
use parking_lot::Mutex;

use super::{Connector, HyperClient, RequestBody};

/// An attempt that waited this long for the answer's head and got none is evidence that its
/// connection is dead, and with it every connection that was idle when it was sent. A healthy API
/// server answers a head in milliseconds; a second is already far outside that, and a false alarm
/// costs only new connections.
pub(crate) const SUSPECT_AFTER: Duration = Duration::from_secs(1);

/// The pool of one client: the current generation and how to make the next.
pub(crate) struct Pool {
    /// How each generation's hyper client is built (idle cap, idle timeout, HTTP/2 pings).
    builder: Builder,
    connector: Connector,
    /// Invariant: `number` only grows; a generation once replaced is never current again.
    current: Mutex<Generation>,
}

/// One hyper client and the connections it pooled. Cheap to clone (hyper's client is `Arc`s).
#[derive(Clone)]
pub(crate) struct Generation {
    /// Which generation: compared by [`Pool::condemn`] so that evidence against an old
    /// generation never retires a newer one.
    pub(crate) number: u64,
    pub(crate) http: HyperClient<Connector, RequestBody>,
}

impl Pool {
    pub(crate) fn new(builder: Builder, connector: Connector) -> Pool {
        let http = builder.build(connector.clone());
        Pool {
            builder,
            connector,
            current: Mutex::new(Generation { number: 0, http }),
        }
    }

    /// The generation a request is sent through now.
    pub(crate) fn current(&self) -> Generation {
        self.current.lock().clone()
    }

    /// Retires generation `number` if it is still current: the next request gets a new pool,
    /// and no connection of the old one is handed out again. Returns whether it was replaced.
    pub(crate) fn condemn(&self, number: u64, why: &'static str) -> bool {
        let mut current = self.current.lock();
        if current.number != number {
            return false;
        }
        tracing::debug!(
            generation = number,
            why,
            "connections presumed dead; new requests open fresh ones"
        );
        *current = Generation {
            number: number.saturating_add(1),
            http: self.builder.build(self.connector.clone()),
        };
        true
    }
}

/// One attempt of a request on generation `number`, from the moment it is handed to hyper until
/// its answer's head arrives. Dropped unanswered after [`SUSPECT_AFTER`] or more, it condemns
/// its generation (rule 2 of the [module docs](self)).
pub(crate) struct Attempt<'p> {
    pool: &'p Pool,
    number: u64,
    sent_at: tokio::time::Instant,
    state: AttemptState,
}

/// Moves only `Waiting → Answered`.
enum AttemptState {
    /// No head yet.
    Waiting,
    /// The head arrived (any status): the connection is alive.
    Answered,
}

impl<'p> Attempt<'p> {
    pub(crate) fn start(pool: &'p Pool, number: u64) -> Attempt<'p> {
        Attempt {
            pool,
            number,
            sent_at: tokio::time::Instant::now(),
            state: AttemptState::Waiting,
        }
    }

    pub(crate) fn answered(&mut self) {
        self.state = AttemptState::Answered;
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if matches!(self.state, AttemptState::Waiting) && self.sent_at.elapsed() >= SUSPECT_AFTER {
            self.pool.condemn(self.number, "a request went unanswered");
        }
    }
}

/// The generation an answer came through, kept in the response's extensions so that a body that
/// stalls later can condemn it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CameThrough(pub(crate) u64);

#[cfg(test)]
mod tests {
    //! The rules on a scripted in-memory server (a `Dial` of duplex pipes) and a paused clock:
    //! deterministic, no socket.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use bytes::Bytes;
    use parking_lot::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use crate::client::{Call, Dial, DialedStream};
    use crate::{Client, Config, Error};

    /// The server's side of every connection dialed so far: a switch that silences it.
    #[derive(Clone, Default)]
    struct Server {
        connections: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
    }

    impl Server {
        fn dial(&self) -> Dial {
            let server = self.clone();
            Dial::new(move |_uri| {
                let (ours, theirs) = tokio::io::duplex(64 * 1024);
                let silent = Arc::new(AtomicBool::new(false));
                let number = {
                    let mut connections = server.connections.lock();
                    connections.push(silent.clone());
                    connections.len()
                };
                tokio::spawn(serve(theirs, number, silent));
                Box::pin(async move { Ok(Box::new(ours) as DialedStream) })
            })
        }

        fn dials(&self) -> usize {
            self.connections.lock().len()
        }

        /// Every connection open now says nothing more, ever (no FIN, no RST).
        fn freeze(&self) {
            for silent in self.connections.lock().iter() {
                silent.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Answers each request (head only, no body expected beyond `content-length`) with
    /// `{"conn": number}`, keeping the connection open; once `silent`, reads and never answers.
    async fn serve(mut stream: DuplexStream, number: usize, silent: Arc<AtomicBool>) {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let Ok(read) = stream.read(&mut chunk).await else {
                return;
            };
            if read == 0 {
                return;
            }
            buffer.extend_from_slice(&chunk[..read]);
            while let Some(end) = find(&buffer, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
                let body_len = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if buffer.len() < end + 4 + body_len {
                    break;
                }
                buffer.drain(..end + 4 + body_len);
                if silent.load(Ordering::SeqCst) {
                    continue;
                }
                let body = format!(r#"{{"conn":{number}}}"#);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack
            .windows(needle.len())
            .position(|window| window == needle)
    }

    fn client(server: &Server) -> Client {
        let mut config =
            Config::new("http://in-memory.invalid".parse().unwrap()).with_dial(server.dial());
        config.qps = None;
        Client::new(config).unwrap()
    }

    fn get() -> Call {
        Call {
            request: http::Request::get("/version").body(Bytes::new()).unwrap(),
            idempotent: true,
            streaming: false,
        }
    }

    fn post() -> Call {
        Call {
            request: http::Request::post("/api/v1/namespaces/default/configmaps")
                .body(Bytes::from_static(b"{}"))
                .unwrap(),
            idempotent: false,
            streaming: false,
        }
    }

    /// Which connection answered.
    async fn conn(client: &Client, call: Call) -> Result<u64, Error> {
        let answer: serde_json::Value = client.request(call).await?;
        Ok(answer["conn"].as_u64().unwrap_or_default())
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_request_condemns_the_idle_connections_beside_it() {
        let server = Server::default();
        let client = client(&server);
        let (a, b) = tokio::join!(conn(&client, get()), conn(&client, get()));
        assert_eq!((a.unwrap().min(b.unwrap())), 1);
        assert_eq!(
            server.dials(),
            2,
            "two requests at once: two pooled connections"
        );

        server.freeze();
        let started = tokio::time::Instant::now();
        // The first attempt takes a frozen connection and times out (30 s); the retry must not
        // take the other frozen one.
        let answered_by = conn(&client, get()).await.unwrap();
        assert_eq!(answered_by, 3, "the retry went out on a fresh connection");
        assert_eq!(server.dials(), 3);
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(31),
            "one timeout and a backoff, not two timeouts: {took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_http1_connection_past_the_stale_bound_is_closed_not_reused() {
        let server = Server::default();
        let client = client(&server);
        assert_eq!(conn(&client, get()).await.unwrap(), 1);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(conn(&client, get()).await.unwrap(), 1, "9 s idle: reused");
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(
            conn(&client, get()).await.unwrap(),
            2,
            "11 s idle: stale, a new connection"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_on_a_dead_connection_times_out_at_the_write_deadline() {
        let server = Server::default();
        let client = client(&server);
        assert_eq!(conn(&client, get()).await.unwrap(), 1);
        server.freeze();
        let started = tokio::time::Instant::now();
        let error = conn(&client, post()).await.unwrap_err();
        assert!(
            matches!(error, Error::Timeout { after, .. } if after == Duration::from_secs(10)),
            "{error:?}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        // A create is not retried blindly; the caller's next attempt gets a fresh connection.
        assert_eq!(conn(&client, post()).await.unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_given_up_by_its_caller_condemns_too_but_a_quick_one_does_not() {
        let server = Server::default();
        let client = client(&server);
        let warm = tokio::join!(
            conn(&client, get()),
            conn(&client, get()),
            conn(&client, get())
        );
        assert!(warm.0.is_ok() && warm.1.is_ok() && warm.2.is_ok());
        assert_eq!(server.dials(), 3);
        server.freeze();
        // Given up after 10 ms: no evidence (its own connection is closed, being mid-request;
        // the two others stay pooled).
        let quick = tokio::time::timeout(Duration::from_millis(10), conn(&client, get())).await;
        assert!(quick.is_err());
        assert_eq!(server.dials(), 3, "no new connection after a quick give-up");
        // Given up after 5 s (as the leader elector does at half its renew deadline): the
        // connection pooled beside it is retired too, and the next request dials at once.
        let slow = tokio::time::timeout(Duration::from_secs(5), conn(&client, get())).await;
        assert!(slow.is_err());
        let started = tokio::time::Instant::now();
        assert_eq!(conn(&client, get()).await.unwrap(), 4);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
