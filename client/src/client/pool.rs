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
//! Measured with the pooled-writes drill (tests/client/network_faults.rs,
//! `dead_connection_*_pooled_writes_*`; raw lines in benches/dead-connection/): with these two
//! rules, writes after a freeze succeed as soon as the controller learns of the change on
//! HTTP/1.1 and on HTTP/2 alike, so the outage no longer argues for HTTP/2. HTTP/1.1 keeps the
//! advantages recorded on [`Config::http2`](crate::Config::http2) (a watch on a connection of its
//! own, no head-of-line blocking, a dead connection takes down one request, not all).

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
        if matches!(self.state, AttemptState::Waiting) && self.sent_at.elapsed() >= SUSPECT_AFTER
        {
            self.pool.condemn(self.number, "a request went unanswered");
        }
    }
}

/// The generation an answer came through, kept in the response's extensions so that a body that
/// stalls later can condemn it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CameThrough(pub(crate) u64);
