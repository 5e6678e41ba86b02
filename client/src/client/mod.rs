//! The HTTP client: one connection pool to one API server, shared by every [`Api`](crate::Api).
//!
//! Each request goes through the same steps:
//!
//! ```text
//!  Api::get/list/watch/…  ──▶ Call { request, idempotent, streaming }
//!        │
//!        ▼
//!  rate limiter (governor; QPS 5, burst 10 by default; a watch takes one token to open; first
//!  come, first served, or in the background lane: see `rate_limit`)
//!        ▼
//!  + base URL, User-Agent, Accept, Accept-Encoding: gzip (unless `Config::disable_compression`),
//!    Authorization (re-read from its source if it rotates)
//!        ▼
//!  write gate (only on a handle made by `with_write_gate`, only for writes): refused ──▶
//!  Error::NotLeader, nothing sent
//!        ▼
//!  pool (see `pool`): hyper (pooled HTTP/1.1 connections, at most 25 kept idle, each for 10 s
//!  before it is stale; one HTTP/2 connection with `Config::http2`) ── timeout 30 s for the
//!  answer's head (watches too; writes 10 s); a body may then take as long as it needs, but no
//!  piece of it may take longer than that. An attempt left unanswered for 1 s or more retires
//!  every connection pooled when it left.
//!        ▼
//!  2xx ──▶ response (its body inflated as it streams if the server gzipped it: see `gzip`)
//!                              error ──▶ RetryPolicy: 429 any verb, 5xx/transport idempotent only
//!                                        401 once more with fresh credentials
//! ```
//!
//! `Client` is cheap to clone: clones share the pool and the rate limiter.
//!
//! ## The connection pool
//!
//! Over HTTP/1.1 a connection carries one request at a time, so N requests in flight hold N
//! connections. When an answer has been read its connection goes back to the pool, idle, for
//! the next request; the pool keeps at most [`Config::max_idle_conns_per_host`] of them (25,
//! client-go's `MaxIdleConnsPerHost`) and closes the rest at once. A connection idle for
//! [`Config::idle_conn_stale_after`] (10 s) is closed rather than reused, because it may have
//! died unseen (see "Dead connections"); with HTTP/2 it is pinged instead, and kept up to
//! [`Config::idle_conn_timeout`] (90 s, Go's `IdleConnTimeout`). Watches hold their
//! connection for as long as they run and are not idle. With [`Config::http2`] every request
//! shares one connection, which is kept while any idle slot is allowed.
//!
//! ## Dead connections
//!
//! A server whose host dies, or a load balancer or NAT that forgets a connection, sends no FIN
//! and no RST: the connection looks open and simply says nothing more. Every wait on the network
//! is therefore bounded by a deadline, each derived from what the other side promised:
//!
//! | wait | bound | default |
//! |---|---|---|
//! | TCP connect, proxy tunnel and TLS handshake together | `connect_timeout + tls_handshake_timeout` | 30 s + 10 s (client-go's dialer and `TLSHandshakeTimeout`) |
//! | the answer's head, watches included | `timeout` | 30 s |
//! | a write's answer head | `write_timeout` (the leader election's renew deadline) | 10 s |
//! | an idle pooled connection's trust | `idle_conn_stale_after`: HTTP/1.1 closes it instead of reusing it, HTTP/2 pings it | 10 s |
//! | each piece of a body (a list may take minutes, but never stalls) | `timeout` since the last piece | 30 s |
//! | each piece of a watch | the server's promise: a bookmark roughly every minute, the end at `timeoutSeconds` (see `watch`) | 60 s + 30 s |
//! | a quiet HTTP/2 connection | a ping after `idle_conn_stale_after` of silence, answered within 5 s | 15 s (client-go: 30 s + 15 s) |
//! | a vanished peer, at the TCP level | keepalive probes after 30 s idle, every 30 s | Go's dialer |
//!
//! The informers add one more (`ReflectorOptions::watch_idle_timeout`, in `ferrokube-informer`): a watch that has
//! brought nothing for 15 s is given up and resumed from its last resourceVersion, a resume and
//! never a relist, so that a controller notices a dead watch in seconds on HTTP/1.1, where no
//! ping exists. client/tests/client/network_faults.rs freezes connections in a proxy and measures it.
//!
//! One outage kills the idle pooled connections too, silently. Two rules (module `pool`) keep a
//! request from waiting on one of them: a connection idle for 10 s is stale and not reused
//! unchecked, and an attempt that goes unanswered for a second or more (timed out, or given up
//! by its caller) retires every connection pooled when it left, so that the next request (a
//! retry, a requeued write) opens a fresh one instead of taking the next dead one in line.
//!
//! ## Write gates
//!
//! A process that must write only while it holds a lease (a leader-elected controller) makes its
//! writes through `client.with_write_gate(leadership.clone())` (`ferrokube::leader`; the seam is [`crate::write_gate`]). Every
//! request of that handle whose method is not GET, HEAD or OPTIONS (so create, update, patch,
//! delete; lists and watches are GETs) asks the gate for a [`WritePermit`] at the last moment: after
//! its rate-limit token (a request that waited long for one is judged by the time it is sent, not
//! by the time it was made) and after its credentials, right before hyper gets it. A refusal is
//! [`Error::NotLeader`] and nothing goes on the wire; a retry asks again. The permit is held until
//! the answer's head arrives, so the gate's owner can wait for writes in flight (the elector does,
//! before it releases its lease).
//!
//! Between the gate's "yes" and the request's bytes leaving there may still be a connection to
//! open and a TLS handshake, longer than the margin between the renew deadline and the end of the
//! lease. So a gated write is checked twice: once before hyper gets it, and once more when hyper
//! has a connection and starts to write the request (its body is polled: `RequestBody`); a
//! refusal then aborts the request before it can be complete on the wire. A permit that says
//! until when it holds ([`WritePermit::valid_until`]) also bounds the wait for a connection. A
//! write that left but was never answered (its future dropped, the connection broken) is
//! reported to the gate ([`WritePermit::on_abandon`]): it may still land, and the elector then
//! lets its lease run out instead of handing it over early.

mod gzip;
mod pool;
mod proxy;
mod rate_limit;
mod retry;
mod tls;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{
    ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE,
    RETRY_AFTER, USER_AGENT,
};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::de::DeserializeOwned;

pub use crate::config::RetryPolicy;
/// How a connection is opened: a crate-level module (the [`Config`] holds a [`Dial`]), named here
/// too, beside the client that dials.
pub use crate::dial;
pub use crate::dial::{Dial, DialFuture, DialIo, DialedStream};
pub use gzip::{BodyError, ResponseBody, inflate_chunks};
pub use rate_limit::Priority;

use crate::config::{Auth, Config, ConfigError};
use crate::error::{ApiError, Error};
use crate::write_gate::enforce::{self, Departure, GatedWrite, SendError};
use crate::write_gate::{WriteGate, WritePermit};
use crate::write_observer::WriteObserver;
use ferrokube_core::{ManagedFields, pipeline_enabled, pipeline_event};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use proxy::Dialer;
use rate_limit::RateLimit;

type Connector = Bounded<hyper_rustls::HttpsConnector<Dialer>>;
use pool::{Attempt, CameThrough, Pool};

/// A client for one API server. See the [module docs](self).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// The rate-limit lane of this handle's requests (clones made by [`Client::with_priority`]
    /// share everything else).
    priority: Priority,
    /// Asked before each write of this handle is sent; `None`: writes are not gated. Set by
    /// [`Client::with_write_gate`]; shared by clones of this handle, not by the other handles.
    gate: Option<Arc<dyn WriteGate>>,
    /// Told of every write of this handle the server committed (see [`write_observer`]); in the
    /// order they were added. Set by [`Client::with_write_observer`]; shared by clones of this
    /// handle, not by the other handles.
    ///
    /// [`write_observer`]: crate::write_observer
    observers: Observers,
}

/// The observers of one handle: `None` (the common case) costs nothing per write.
type Observers = Option<Arc<[Arc<dyn WriteObserver>]>>;

struct Inner {
    /// Every request but HTTP/1.1 watches; replaced by a fresh pool when a request went
    /// unanswered (see [`pool`]).
    pool: Pool,
    /// Over HTTP/1.1, the client that watches go through: no idle pool (see [`Client::new`]).
    /// `None` with HTTP/2: watches share `pool`.
    watch_http: Option<HyperClient<Connector, RequestBody>>,
    /// Scheme, authority and path prefix (without a trailing slash) of the server.
    base: String,
    auth: Auth,
    timeout: Option<Duration>,
    /// The deadline of a write's answer head, if shorter than `timeout`.
    write_timeout: Option<Duration>,
    limiter: Option<RateLimit>,
    retry: RetryPolicy,
    default_namespace: String,
    user_agent: HeaderValue,
    /// Ask for protobuf when reading built-in kinds ([`Config::content_type`]).
    protobuf: bool,
    /// Ask for gzip-compressed answers (`Accept-Encoding: gzip`) and inflate them
    /// ([`Config::disable_compression`] unset; see `gzip`).
    gzip: bool,
    /// The resources whose server refused protobuf, by what it refused: see [`ProtobufRefusals`].
    protobuf_refused: parking_lot::Mutex<ProtobufRefusals>,
}

/// What a server refused in protobuf for a resource: a body it was sent, or an answer it was
/// asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProtobufUse {
    /// A create's or update's body (refused with 415): writes go as JSON from then on.
    Bodies,
    /// A get's, list's or watch's answer (refused with 406, or 415): reads ask for JSON only
    /// from then on.
    Answers,
}

/// The resources (`apiVersion/plural`) whose server refused protobuf, per [`ProtobufUse`]: their
/// requests of that kind skip protobuf from then on, without trying it again first. Each set only
/// grows, by one entry per refusing resource (a server, or an aggregated API behind it, that does
/// not speak protobuf for it): bounded by the resources the client uses.
#[derive(Debug, Default)]
struct ProtobufRefusals {
    bodies: std::collections::HashSet<String>,
    answers: std::collections::HashSet<String>,
}

impl ProtobufRefusals {
    fn of(&mut self, what: ProtobufUse) -> &mut std::collections::HashSet<String> {
        match what {
            ProtobufUse::Bodies => &mut self.bodies,
            ProtobufUse::Answers => &mut self.answers,
        }
    }
}

/// With [`Config::http2`], how long a ping may go unanswered before the connection is closed
/// (client-go's `PingTimeout` is 15 s; ours 5 s, see above).
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest error body read: a `Status` is a few hundred bytes; anything longer (a proxy's
/// HTML page, a hostile server) is cut here and the error keeps its HTTP status.
pub(crate) const MAX_ERROR_BODY: usize = 1 << 20;

/// One request to send, and what the retry rules need to know about it.
pub struct Call {
    /// Path and query (e.g. `/api/v1/namespaces/default/pods?limit=500`), with method, headers, body.
    pub request: Request<Bytes>,
    /// Safe to send twice (GET, LIST, DELETE with preconditions).
    pub idempotent: bool,
    /// A watch: no request timeout, and the body is read as a stream by the caller.
    pub streaming: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field(
                "base",
                &crate::config::redact_url_password(&self.inner.base),
            )
            .field("priority", &self.priority)
            .field("gated", &self.gate.is_some())
            .field("observers", &self.write_observers().len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Builds a client (and its TLS configuration) from `config`. Needs a tokio runtime to send.
    pub fn new(config: Config) -> Result<Client, Error> {
        // Long: hyper's builders, one setting a line or two, in the order a request meets them
        // (dial, TCP, TLS, pool, HTTP/2, rate limit, retries): a list of settings, not logic.
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(config.connect_timeout));
        http.set_nodelay(true);
        // Go's dialer: idle and interval both the keepalive period (9 probes, the kernel's default).
        http.set_keepalive(config.tcp_keepalive);
        http.set_keepalive_interval(config.tcp_keepalive);
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls::client_config(&config)?)
            .https_or_http();
        let builder = match &config.tls_server_name {
            Some(name) => {
                let name = rustls_pki_types::ServerName::try_from(name.clone()).map_err(|e| {
                    ConfigError::BadValue {
                        what: "tls-server-name".into(),
                        reason: e.to_string(),
                    }
                })?;
                builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
            }
            None => builder,
        };
        // A dial of the caller's replaces TCP and the proxy (see `dial`).
        let dialer = match &config.dial {
            Some(dial) => Dialer::Custom(dial.clone()),
            None => Dialer::new(http, config.proxy_url.as_ref())?,
        };
        let connector = if config.http2 {
            builder.enable_all_versions().wrap_connector(dialer)
        } else {
            builder.enable_http1().wrap_connector(dialer)
        };
        let connector = Bounded {
            inner: connector,
            limit: config
                .connect_timeout
                .saturating_add(config.tls_handshake_timeout),
        };
        let mut http = HyperClient::builder(TokioExecutor::new());
        // Whether connections may speak HTTP/2: only when offered in a TLS handshake (ALPN);
        // over plain http:// hyper speaks HTTP/1.1.
        let may_be_http2 = config.http2 && config.cluster_url.scheme_str() == Some("https");
        // The pool: at most `max_idle_conns_per_host` idle connections, each closed after
        // `idle_conn_timeout`. An HTTP/1.1 connection is stale sooner, after
        // `idle_conn_stale_after`, and is then closed rather than reused (see `pool`): hyper's
        // checkout skips and drops an entry idle longer than the pool's idle timeout. (An HTTP/2
        // connection's idle time restarts at every checkout, and it is checked by pings instead.)
        // hyper evicts expired ones in the background only with a pool timer; without one they
        // would linger until the next checkout happened to find them.
        let idle_timeout = if may_be_http2 {
            config.idle_conn_timeout
        } else {
            Some(
                config
                    .idle_conn_timeout
                    .map_or(config.idle_conn_stale_after, |timeout| {
                        timeout.min(config.idle_conn_stale_after)
                    }),
            )
        };
        http.pool_max_idle_per_host(config.max_idle_conns_per_host)
            .pool_idle_timeout(idle_timeout)
            .pool_timer(TokioTimer::new());
        if config.http2 {
            // A shared HTTP/2 connection that died silently would stall every request and watch
            // on it; ping it when it has been quiet, as client-go's health check does (client-go
            // after 30 s of silence; ours after `idle_conn_stale_after`, 10 s, so that a dead
            // shared connection is found within 15 s instead of 45 s; a ping is 17 bytes each way).
            http.timer(TokioTimer::new())
                .http2_keep_alive_interval(config.idle_conn_stale_after)
                .http2_keep_alive_timeout(HTTP2_PING_TIMEOUT)
                .http2_keep_alive_while_idle(true);
        }
        // Over HTTP/1.1, watches never take a pooled connection and never leave theirs in the
        // pool: a pooled connection may have died silently while it sat idle (the same outage
        // that made a watch go quiet), and a watch sent on it would wait out the whole request
        // timeout before resuming. The price is one TCP (and TLS) handshake per watch opened.
        // With HTTP/2 the one shared connection is watched by pings instead.
        let watch_http = if config.http2 {
            None
        } else {
            let mut watch_http = HyperClient::builder(TokioExecutor::new());
            watch_http.pool_max_idle_per_host(0);
            Some(watch_http.build(connector.clone()))
        };
        let pool = Pool::new(http, connector);
        let limiter = config.qps.and_then(|qps| RateLimit::new(qps, config.burst));
        let base = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        let user_agent = match &config.user_agent {
            Some(agent) => HeaderValue::from_str(agent).map_err(|_| {
                Error::InvalidRequest(format!("user agent {agent:?} is not a valid header value"))
            })?,
            None => HeaderValue::from_static(concat!("ferrokube/", env!("CARGO_PKG_VERSION"))),
        };
        Ok(Client {
            inner: Arc::new(Inner {
                pool,
                watch_http,
                base,
                auth: config.auth,
                timeout: config.timeout,
                write_timeout: config.write_timeout,
                limiter,
                retry: config.retry,
                default_namespace: config.default_namespace,
                user_agent,
                protobuf: config.content_type == crate::config::ContentType::Protobuf,
                gzip: !config.disable_compression,
                protobuf_refused: Default::default(),
            }),
            priority: Priority::default(),
            gate: None,
            observers: None,
        })
    }

    /// A handle on the same client (pool, credentials, rate limiter) whose requests wait in the
    /// `priority` lane of the rate limiter. [`Priority::Background`] is for best-effort requests
    /// (e.g. Events) that should use only tokens no other request is waiting for.
    pub fn with_priority(&self, priority: Priority) -> Client {
        Client {
            inner: self.inner.clone(),
            priority,
            gate: self.gate.clone(),
            observers: self.observers.clone(),
        }
    }

    /// A handle on the same client (pool, credentials, rate limiter, priority) whose writes (every
    /// method but GET, HEAD and OPTIONS) are sent only if `gate` admits them, asked right before
    /// each attempt is handed to the connection: after the rate limiter, so a request that waited
    /// long for a token is judged when it leaves. A refused write returns [`Error::NotLeader`]
    /// without sending anything. Replaces any gate this handle had; reads are never gated.
    ///
    /// The leader election's `Leadership` is such a gate
    /// (`client.with_write_gate(leadership.clone())`); any type can be one:
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use ferrokube_client::Client;
    /// use ferrokube_client::write_gate::{NotLeader, NotLeaderReason, WriteGate, WritePermit};
    ///
    /// /// Writes go while the flag is up.
    /// struct Switch(Arc<AtomicBool>);
    ///
    /// impl WriteGate for Switch {
    ///     fn admit(&self) -> Result<WritePermit, NotLeader> {
    ///         if self.0.load(Ordering::Acquire) {
    ///             return Ok(WritePermit::untracked());
    ///         }
    ///         Err(NotLeader {
    ///             lease: "default/switch".into(),
    ///             identity: "me".into(),
    ///             reason: NotLeaderReason::Stopped,
    ///         })
    ///     }
    /// }
    ///
    /// # fn demo(client: Client) {
    /// let up = Arc::new(AtomicBool::new(true));
    /// let gated = client.with_write_gate(Switch(up.clone()));
    /// # }
    /// ```
    pub fn with_write_gate(&self, gate: impl WriteGate) -> Client {
        Client {
            inner: self.inner.clone(),
            priority: self.priority,
            gate: Some(Arc::new(gate)),
            observers: self.observers.clone(),
        }
    }

    /// The same handle without a write gate (the leader elector's own requests must not wait for
    /// the leadership they maintain).
    pub fn without_write_gate(&self) -> Client {
        Client {
            inner: self.inner.clone(),
            priority: self.priority,
            gate: None,
            observers: self.observers.clone(),
        }
    }

    /// The same handle, whose committed writes are also reported to `observer` (after the
    /// observers it had already): through every [`Api`](crate::Api) built on it or on a clone of
    /// it, whatever the kind. See [`write_observer`](crate::write_observer). The runtime's
    /// reconcile context hands each reconcile a client observed by the controller's consistency
    /// store this way.
    pub fn with_write_observer(&self, observer: Arc<dyn WriteObserver>) -> Client {
        let observers = match &self.observers {
            Some(before) => before.iter().cloned().chain([observer]).collect(),
            None => Arc::from([observer]),
        };
        Client {
            inner: self.inner.clone(),
            priority: self.priority,
            gate: self.gate.clone(),
            observers: Some(observers),
        }
    }

    /// Whether this handle's writes are reported to a [`WriteObserver`].
    pub fn is_write_observed(&self) -> bool {
        self.observers.is_some()
    }

    /// The observers of this handle's writes, oldest first.
    pub(crate) fn write_observers(&self) -> &[Arc<dyn WriteObserver>] {
        self.observers.as_deref().unwrap_or_default()
    }

    /// Whether this handle's writes go through a [`WriteGate`].
    pub fn is_write_gated(&self) -> bool {
        self.gate.is_some()
    }

    /// [`Config::infer`], then [`Client::new`].
    pub fn try_default() -> Result<Client, Error> {
        Client::new(Config::infer()?)
    }

    /// Whether reads of built-in kinds ask for protobuf ([`Config::content_type`]).
    pub fn prefers_protobuf(&self) -> bool {
        self.inner.protobuf
    }

    /// Whether the server refused protobuf `what` for `resource` (`apiVersion/plural`) before.
    pub(crate) fn protobuf_refused(&self, what: ProtobufUse, resource: &str) -> bool {
        self.inner
            .protobuf_refused
            .lock()
            .of(what)
            .contains(resource)
    }

    /// Remembers that the server refused protobuf `what` for `resource`.
    pub(crate) fn refuse_protobuf(&self, what: ProtobufUse, resource: &str) {
        let mut refused = self.inner.protobuf_refused.lock();
        let set = refused.of(what);
        if !set.contains(resource) {
            set.insert(resource.to_string());
        }
    }

    /// The namespace of the config's context (or `default`).
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    /// Sends `call`, retrying as [`RetryPolicy`] allows; returns a 2xx response with its body unread
    /// (inflated as it is read when the server compressed it: the response then has no
    /// `Content-Encoding` or `Content-Length` header any more, as Go's transport does).
    pub async fn send(&self, call: Call) -> Result<Response<ResponseBody>, Error> {
        let mut attempt = 0;
        let mut refreshed_credentials = false;
        loop {
            match self.send_once(&call).await {
                Ok(response) => return Ok(response),
                Err(error) => {
                    if error.is_unauthorized()
                        && !refreshed_credentials
                        && matches!(self.inner.auth, Auth::Exec(_) | Auth::TokenFile(_))
                    {
                        refreshed_credentials = true;
                        self.inner.auth.invalidate();
                        continue;
                    }
                    let Some(wait) = self.inner.retry.delay(&error, call.idempotent, attempt)
                    else {
                        return Err(error);
                    };
                    tracing::debug!(%error, ?wait, attempt, "retrying request");
                    attempt += 1;
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Sends `call` and decodes the 2xx body as `T`.
    pub async fn request<T: DeserializeOwned>(&self, call: Call) -> Result<T, Error> {
        let url = call.request.uri().to_string();
        let body = self.request_bytes(call).await?;
        serde_json::from_slice(&body).map_err(|source| Error::Decode {
            what: format!("the response of {url}"),
            source,
        })
    }

    /// Sends `call` and returns the whole 2xx body and its `Content-Type`.
    pub async fn request_typed_bytes(&self, call: Call) -> Result<(Option<String>, Bytes), Error> {
        let mut body = BytesMut::new();
        let kind = self
            .request_chunks_typed(call, |_, chunk| {
                body.extend_from_slice(chunk);
                Ok(())
            })
            .await?;
        Ok((kind, body.freeze()))
    }

    /// Sends `call` and returns the whole 2xx body. Reading the body has its own request timeout.
    pub async fn request_bytes(&self, call: Call) -> Result<Bytes, Error> {
        let mut body = BytesMut::new();
        self.request_chunks(call, |chunk| {
            body.extend_from_slice(chunk);
            Ok(())
        })
        .await?;
        Ok(body.freeze())
    }

    /// Sends `call` and hands the 2xx body to `each` piece by piece as it arrives, so the caller
    /// can decode while the rest is still on the wire (a list: see `api::list`). The body may take
    /// as long as it needs (a large unpaginated list can take minutes), but each piece must come
    /// within the request timeout of the one before, or the read fails with [`Error::Idle`].
    pub async fn request_chunks(
        &self,
        call: Call,
        mut each: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.request_chunks_typed(call, |_, chunk| each(chunk))
            .await
            .map(drop)
    }

    /// [`request_chunks`](Self::request_chunks), handing `each` the answer's `Content-Type`
    /// (`None` without one) with every piece, and returning it: what decides how the body is
    /// decoded when the request offered more than one encoding.
    pub async fn request_chunks_typed(
        &self,
        call: Call,
        mut each: impl FnMut(Option<&str>, &[u8]) -> Result<(), Error>,
    ) -> Result<Option<String>, Error> {
        let url = call.request.uri().to_string();
        let response = self.send(call).await?;
        let kind = content_type(response.headers()).map(str::to_string);
        let each = |chunk: &[u8]| each(kind.as_deref(), chunk);
        let came_through = response.extensions().get::<CameThrough>().copied();
        let read = read_chunks(response.into_body(), &url, self.inner.timeout, each).await;
        if let (Err(Error::Idle { .. }), Some(CameThrough(generation))) = (&read, came_through) {
            // The connection went silent mid-answer: the others of its generation are suspect too.
            self.inner
                .pool
                .condemn(generation, "an answer's body stalled");
        }
        read.map(|()| kind)
    }

    async fn send_once(&self, call: &Call) -> Result<Response<ResponseBody>, Error> {
        // Timings for the pipeline's events, on the runtime's clock like every wait here (virtual
        // in a deterministic run on a paused runtime).
        let asked = tokio::time::Instant::now();
        if let Some(limiter) = &self.inner.limiter {
            limiter.acquire(self.priority).await;
        }
        let waited = asked.elapsed();
        let request = self.prepare(&call.request).await?;
        let url = request.uri().to_string();
        let method = request.method().clone();
        // The last moment before the request leaves: after the rate limiter and the credentials.
        // Held until the answer's head arrives.
        let mut write = GatedWrite::new(self.admit(request.method(), &url)?, self.gate.clone());
        let request = request.map(|body| RequestBody::new(body, write.departure.clone()));
        let sent_at = tokio::time::Instant::now();
        let generation = self.inner.pool.current();
        // Dropped unanswered (timed out here, or given up by the caller), it condemns the
        // generation; an HTTP/1.1 watch goes through a connection of its own, but its silence
        // says the same about the pooled connections.
        let mut attempt = Attempt::start(&self.inner.pool, generation.number);
        let http = match (&self.inner.watch_http, call.streaming) {
            (Some(watch_http), true) => watch_http,
            _ => &generation.http,
        };
        let sent = http.request(request);
        // Watches too: the head of a watch comes at once; only its body is long. A write's
        // answer may have a shorter deadline (`Config::write_timeout`).
        let limit = match (self.inner.timeout, self.inner.write_timeout) {
            (Some(all), Some(writes)) if is_write(&method) => Some(all.min(writes)),
            (None, Some(writes)) if is_write(&method) => Some(writes),
            (all, _) => all,
        };
        let response = match limit {
            Some(limit) => tokio::time::timeout(limit, write.send(sent))
                .await
                .unwrap_or_else(|_| {
                    Err(SendError::Timeout {
                        url: url.clone(),
                        after: limit,
                    })
                }),
            None => write.send(sent).await,
        }
        .map_err(|error| write.error(error, &method, &url));
        let mut response = response;
        if let Ok(response) = &mut response {
            write.answered();
            attempt.answered();
            response
                .extensions_mut()
                .insert(CameThrough(generation.number));
        }
        drop(attempt);
        if pipeline_enabled!() {
            let path = url_path(&url);
            let status = response
                .as_ref()
                .map_or(0, |r| u64::from(r.status().as_u16()));
            let (wait_ms, duration_ms) = (
                waited.as_millis() as u64,
                sent_at.elapsed().as_millis() as u64,
            );
            match ObjectInPath::parse(path) {
                Some(object) => {
                    pipeline_event!(stage = "client", op = "request", key = %object, state = "done", verb = %method, path, status, wait_ms, duration_ms)
                }
                None => {
                    pipeline_event!(stage = "client", op = "request", state = "done", verb = %method, path, status, wait_ms, duration_ms)
                }
            }
        }
        let response = inflated(response?);
        if response.status().is_success() {
            return Ok(response);
        }
        Err(error_from_response(response, &url).await)
    }

    /// Asks the write gate, if this handle has one and `method` writes (see
    /// [`crate::write_gate`]).
    fn admit(&self, method: &http::Method, url: &str) -> Result<Option<WritePermit>, Error> {
        match &self.gate {
            Some(gate) if is_write(method) => enforce::admit(gate.as_ref(), method, url).map(Some),
            _ => Ok(None),
        }
    }

    /// The full request: base URL, standard headers and credentials added to the caller's.
    async fn prepare(&self, template: &Request<Bytes>) -> Result<Request<Bytes>, Error> {
        let path = template.uri().path_and_query().map_or("/", |p| p.as_str());
        let uri = format!("{}{}", self.inner.base, path);
        let mut builder = Request::builder()
            .method(template.method().clone())
            .uri(uri);
        if let Some(headers) = builder.headers_mut() {
            headers.extend(
                template
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            headers.insert(USER_AGENT, self.inner.user_agent.clone());
            headers
                .entry(ACCEPT)
                .or_insert(HeaderValue::from_static("application/json"));
            if self.inner.gzip {
                headers
                    .entry(ACCEPT_ENCODING)
                    .or_insert(HeaderValue::from_static("gzip"));
            }
            if !template.body().is_empty() {
                headers
                    .entry(CONTENT_TYPE)
                    .or_insert(HeaderValue::from_static("application/json"));
            }
            if let Some(auth) = self.inner.auth.header().await? {
                headers.insert(AUTHORIZATION, auth);
            }
        }
        builder
            .body(template.body().clone())
            .map_err(|e| Error::InvalidRequest(e.to_string()))
    }
}

/// Whether `method` writes: everything but GET, HEAD and OPTIONS (lists and watches are GETs).
fn is_write(method: &http::Method) -> bool {
    !matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

/// The object a request's path names, if it names one: `/api/v1/namespaces/NS/pods/NAME[/sub]`
/// and `/apis/G/V/namespaces/NS/R/NAME[/sub]` name `NS/NAME`, `/api/v1/R/NAME` and
/// `/apis/G/V/R/NAME` a cluster-scoped `NAME` (a namespace, a node, ...); a collection names none.
struct ObjectInPath<'a> {
    namespace: Option<&'a str>,
    name: &'a str,
}

impl<'a> ObjectInPath<'a> {
    fn parse(path: &'a str) -> Option<ObjectInPath<'a>> {
        let path = path.split('?').next().unwrap_or_default();
        let mut parts = path.trim_start_matches('/').split('/');
        // Past the group and version: "api/v1" or "apis/GROUP/VERSION".
        match parts.next()? {
            "api" => {
                parts.next()?;
            }
            "apis" => {
                parts.next()?;
                parts.next()?;
            }
            _ => return None,
        }
        let mut rest = parts.filter(|part| !part.is_empty());
        let (first, second) = (rest.next()?, rest.next()?);
        match (first, rest.next(), rest.next()) {
            ("namespaces", Some(_resource), Some(name)) => Some(ObjectInPath {
                namespace: Some(second),
                name,
            }),
            ("namespaces", Some(_), None) => None,
            _ => Some(ObjectInPath {
                namespace: None,
                name: second,
            }),
        }
    }
}

impl std::fmt::Display for ObjectInPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(self.name),
        }
    }
}

/// The path and query of a full URL (what the pipeline's client events show).
fn url_path(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    url[after_scheme..]
        .find('/')
        .map_or("/", |at| &url[after_scheme + at..])
}

/// Reads `body` piece by piece into `each`; with `idle`, each piece must come within `idle` of
/// the one before ([`Error::Idle`] otherwise), however long the whole takes.
async fn read_chunks(
    mut body: ResponseBody,
    url: &str,
    idle: Option<Duration>,
    mut each: impl FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    loop {
        let frame = match idle {
            Some(idle) => tokio::time::timeout(idle, body.frame())
                .await
                .map_err(|_| Error::Idle {
                    url: url.to_string(),
                    after: idle,
                })?,
            None => body.frame().await,
        };
        let Some(frame) = frame else {
            return Ok(());
        };
        let frame = frame.map_err(|source| body_error(source, url))?;
        if let Some(data) = frame.data_ref() {
            each(data)?;
        }
    }
}

/// The client's error for a body that could not be read.
pub(crate) fn body_error(error: BodyError, url: &str) -> Error {
    match error {
        BodyError::Transport(source) => Error::Transport {
            url: url.to_string(),
            source: Box::new(source),
        },
        BodyError::Gzip(source) => Error::Decompress {
            url: url.to_string(),
            source,
        },
    }
}

/// `response` with a body that inflates itself if the server compressed it. The headers then
/// describe the inflated body: no `Content-Encoding`, no `Content-Length` (Go's transport does
/// the same). Any other encoding is left as it is (the client asks for none).
fn inflated(response: Response<Incoming>) -> Response<ResponseBody> {
    let (mut parts, body) = response.into_parts();
    let gzip = parts
        .headers
        .get(CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"));
    if gzip {
        parts.headers.remove(CONTENT_ENCODING);
        parts.headers.remove(CONTENT_LENGTH);
    }
    Response::from_parts(parts, ResponseBody::new(body, gzip))
}

/// A response's `Content-Type`, if it has a readable one.
pub(crate) fn content_type(headers: &http::HeaderMap) -> Option<&str> {
    headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok())
}

async fn error_from_response(response: Response<ResponseBody>, url: &str) -> Error {
    let code = response.status().as_u16();
    // A server answers an error in the encoding it would have answered the request in: a
    // protobuf `Status` to a client that asked for protobuf.
    let protobuf = content_type(response.headers()).is_some_and(crate::protobuf::is_protobuf);
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    // At most MAX_ERROR_BODY bytes: past that the message is replaced, the status kept.
    let mut body = BytesMut::new();
    let mut too_long = false;
    let read = read_chunks(response.into_body(), url, Some(ERROR_BODY_IDLE), |chunk| {
        if body.len() + chunk.len() > MAX_ERROR_BODY {
            too_long = true;
            return Err(Error::TooLarge {
                what: "an error body",
                url: url.to_string(),
                limit: MAX_ERROR_BODY,
            });
        }
        body.extend_from_slice(chunk);
        Ok(())
    })
    .await;
    let body = match read {
        Ok(()) => body.freeze(),
        Err(_) if too_long => {
            let note = format!(
                "the server's error body was longer than {MAX_ERROR_BODY} bytes and was not read"
            );
            let status = serde_json::json!({"kind": "Status", "status": "Failure", "code": code, "message": note});
            Bytes::from(status.to_string())
        }
        Err(error) => return error,
    };
    if code == StatusCode::UNAUTHORIZED.as_u16() {
        tracing::debug!(url, "401 Unauthorized");
    }
    let body = match protobuf {
        true => {
            let status = crate::protobuf::from_slice::<Status>(&body, ManagedFields::Keep);
            match status
                .ok()
                .and_then(|status| serde_json::to_vec(&status).ok())
            {
                Some(json) => Bytes::from(json),
                // Not a Status after all: the error keeps its HTTP status, without a message.
                None => Bytes::new(),
            }
        }
        false => body,
    };
    Error::Api(Box::new(ApiError::from_response(code, &body, retry_after)))
}

/// How long an error body may pause between two pieces (a `Status` comes in one).
const ERROR_BODY_IDLE: Duration = Duration::from_secs(10);

/// A connector whose every connection attempt (TCP connect, proxy tunnel, TLS handshake) must be
/// done within `limit`: hyper's own connect timeout covers the TCP connect alone, so a server that
/// accepts and then never finishes the handshake would hold the request forever.
#[derive(Clone)]
struct Bounded<C> {
    inner: C,
    limit: Duration,
}

/// A connection attempt that took longer than [`Bounded::limit`].
#[derive(Debug, thiserror::Error)]
#[error("no connection within {0:?} (TCP connect, proxy tunnel and TLS handshake)")]
struct ConnectDeadline(Duration);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower_service::Service<http::Uri> for Bounded<C>
where
    C: tower_service::Service<http::Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let limit = self.limit;
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                Err(_) => Err(Box::new(ConnectDeadline(limit)) as BoxError),
            }
        })
    }
}

/// The body of every request: the caller's bytes, and for a gated write the second look at the
/// gate, taken when hyper first asks for the body, that is when it has a connection and is
/// writing the request. A refusal then fails the body, so hyper abandons the request before its
/// body is on the wire (over HTTP/1.1 it closes the connection, over HTTP/2 it resets the stream):
/// the server never sees a complete request. A gated write without bytes (a bare DELETE) is sent
/// as an empty chunked body over HTTP/1.1, so that it too has a body to poll (see `size_hint`).
struct RequestBody {
    /// The bytes not yet handed to hyper.
    data: Option<Bytes>,
    /// Present on a gated write until the gate has been asked again.
    departure: Option<Arc<Departure>>,
}

impl RequestBody {
    fn new(data: Bytes, departure: Option<Arc<Departure>>) -> RequestBody {
        RequestBody {
            data: (!data.is_empty()).then_some(data),
            departure,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(departure) = self.departure.take() {
            if let Err(refusal) = departure.leave() {
                return Poll::Ready(Some(Err(Box::new(refusal))));
            }
        }
        Poll::Ready(self.data.take().map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        // A gated write's body is always polled at least once, even when empty: that poll is
        // the moment of the second look.
        self.departure.is_none() && self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.data, &self.departure) {
            (Some(data), _) => SizeHint::with_exact(data.len() as u64),
            // An empty gated write must not say "exactly 0 bytes": hyper's HTTP/1.1 client then
            // writes `content-length: 0`, counts the request complete with its head and never
            // polls the body, so the second look at the gate would never happen (the write would
            // not count as left, an abandoned one would not be reported, and a permit running
            // out would report a request already on the wire as unsent). An inexact hint makes
            // hyper send it chunked (writes are never GET or HEAD, the methods hyper sends
            // without a body), polling the body once: the departure check, then the end.
            (None, Some(_)) => SizeHint::default(),
            (None, None) => SizeHint::with_exact(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ObjectInPath;

    fn key(path: &str) -> Option<String> {
        ObjectInPath::parse(path).map(|object| object.to_string())
    }

    #[test]
    fn the_object_a_path_names() {
        assert_eq!(
            key("/api/v1/namespaces/demo/pods/web-1"),
            Some("demo/web-1".into())
        );
        assert_eq!(
            key("/apis/apps/v1/namespaces/demo/replicasets/web/status?x=1"),
            Some("demo/web".into())
        );
        assert_eq!(key("/api/v1/namespaces/demo"), Some("demo".into()));
        assert_eq!(key("/api/v1/nodes/n1"), Some("n1".into()));
        assert_eq!(key("/api/v1/namespaces/demo/pods?watch=true"), None);
        assert_eq!(key("/api/v1/pods"), None);
        assert_eq!(key("/apis/apps/v1/replicasets"), None);
        assert_eq!(key("/version"), None);
    }
}
