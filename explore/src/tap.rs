//! The in-memory transport between clients and the embedded server, and the tap on it that
//! records the trace.
//!
//! ```text
//!  Client ──Dial──▶ duplex pipe ──▶ tap: HTTP/1.1 server ──forward──▶ duplex pipe ──▶ RunningServer
//!                                   │  (one per client connection)      (one per client connection)
//!                                   ├─ answer head + body read ──▶ TraceEntry::Request
//!                                   └─ each watch line the client reads ──▶ TraceEntry::Event
//! ```
//!
//! The tap speaks HTTP to both sides with hyper, so it sees requests and answers whole: method,
//! path, status, and the body's `metadata` (an answer's body is read completely before it is
//! passed on, which the client cannot tell from a fast server). A watch's body is passed on frame
//! by frame and each complete line is recorded as the client reads it, so an event enters the
//! trace when it is delivered, not when the server wrote it.
//!
//! [`in_memory_client`] is the same transport without the tap: a client of an embedded server
//! with no socket, for any test.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::client::{Dial, DialedStream};
use ferrokube_client::{Client, Config, ContentType};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use crate::ExploreError;
use crate::fault::{COALESCE_WINDOW, Failure, Fault, Point};
use crate::shared::{Incarnation, RunShared};
use crate::stale::{Release, Window, collection_of};
use crate::trace::TraceEntry;

/// The capacity of each in-memory pipe, in bytes (a writer waits when it is full).
const PIPE_CAPACITY: usize = 256 * 1024;

/// The URL the in-memory clients are configured with: only its scheme matters (plain HTTP), no
/// name is ever resolved.
const IN_MEMORY_URL: &str = "http://in-memory.invalid";

/// A client of `server` whose connections are in-memory pipes served by
/// [`RunningServer::serve_connection`]: no socket, no TLS, no token, no client-side rate limit.
/// Its `User-Agent` is `actor`. Needs a tokio runtime (the server's side of each pipe is a task).
pub fn in_memory_client(server: Arc<RunningServer>, actor: &str) -> Result<Client, ExploreError> {
    let dial = Dial::new(move |_uri| {
        let (ours, theirs) = tokio::io::duplex(PIPE_CAPACITY);
        server.serve_connection(theirs);
        Box::pin(async move { Ok(Box::new(ours) as DialedStream) })
    });
    client_with(dial, actor)
}

/// A config for `dial` with `actor` as its `User-Agent` and no rate limit.
fn client_with(dial: Dial, actor: &str) -> Result<Client, ExploreError> {
    let url = IN_MEMORY_URL
        .parse()
        .map_err(|_| ExploreError::Setup(format!("{IN_MEMORY_URL} is not a URI")))?;
    let mut config = Config::new(url).with_dial(dial);
    config.qps = None;
    // Plain HTTP: no TLS happens, so trust no certificate authority rather than have
    // `Client::new` read the system's (tens of milliseconds per client, from the filesystem).
    config.root_certs = Some(Vec::new());
    config.user_agent = Some(actor.to_string());
    // JSON on the wire, not the protobuf a client prefers for built-in kinds: the tap reads every
    // request, answer and watch line as JSON to know the world and to place its faults. (With
    // protobuf answers it would see no watch event of a ConfigMap or a Pod, and find nothing.)
    config.content_type = ContentType::Json;
    // And uncompressed, for the same reason: the tap reads the bodies it forwards.
    config.disable_compression = true;
    Ok(Client::new(config)?)
}

/// Who is on the other end of a connection to the tap.
#[derive(Clone)]
enum Caller {
    /// A scenario's actor: no faults.
    Actor(String),
    /// An incarnation of the controller under test: its requests and events are points, and
    /// pass the fault plan.
    Controller(Arc<Incarnation>),
}

/// Why the tap ends a connection instead of answering.
#[derive(Debug, thiserror::Error)]
enum TapError {
    /// The incarnation on the other end has crashed: a dead process gets no answers.
    #[error("{0} has crashed")]
    Crashed(String),
    /// The server's side of the connection failed.
    #[error(transparent)]
    Http(#[from] hyper::Error),
}

/// The tap of one run: hands out clients whose every connection passes through it.
#[derive(Clone)]
pub(crate) struct Tap {
    shared: Arc<RunShared>,
}

impl Tap {
    pub(crate) fn new(shared: Arc<RunShared>) -> Tap {
        Tap { shared }
    }

    /// A client whose requests are recorded under `actor`, with no faults.
    pub(crate) fn client(&self, actor: &str) -> Result<Client, ExploreError> {
        self.client_for(Caller::Actor(actor.to_string()), actor)
    }

    /// The client of one incarnation of the controller.
    pub(crate) fn controller_client(
        &self,
        incarnation: Arc<Incarnation>,
    ) -> Result<Client, ExploreError> {
        self.client_for(Caller::Controller(incarnation), "controller")
    }

    fn client_for(&self, caller: Caller, agent: &str) -> Result<Client, ExploreError> {
        let tap = self.clone();
        let dial = Dial::new(move |_uri| {
            let (ours, theirs) = tokio::io::duplex(PIPE_CAPACITY);
            tokio::spawn(tap.clone().serve(theirs, caller.clone()));
            Box::pin(async move { Ok(Box::new(ours) as DialedStream) })
        });
        client_with(dial, agent)
    }

    /// Serves one client connection: each request is forwarded to the server over a connection
    /// of its own (opened when the client's connection is) and recorded.
    async fn serve(self, client_side: tokio::io::DuplexStream, caller: Caller) {
        let (ours, theirs) = tokio::io::duplex(PIPE_CAPACITY);
        self.shared.server.serve_connection(theirs);
        let (sender, connection) =
            match hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(ours)).await
            {
                Ok(handshake) => handshake,
                Err(error) => {
                    tracing::warn!(%error, "the tap could not reach the embedded server");
                    return;
                }
            };
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "the tap's connection to the server ended");
            }
        });
        let sender = Arc::new(tokio::sync::Mutex::new(sender));
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let (tap, sender, caller) = (self.clone(), sender.clone(), caller.clone());
            async move { tap.forward(request, &sender, &caller).await }
        });
        if let Err(error) = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(client_side), service)
            .await
        {
            tracing::debug!(%error, "a client connection to the tap ended");
        }
    }

    /// Forwards `request` (through the fault plan, for the controller), records it with its
    /// answer, and returns the answer. The steps: the plan's verdict on the request
    /// ([`Tap::pass_plan`]); the request sent; a watch handed back as a stream to follow
    /// ([`Tap::follow_watch`]); otherwise the whole answer read, re-read as it was for a lagging
    /// replica ([`Tap::as_lagging_replica`]), recorded ([`Tap::record_answer`]) and, for the
    /// controller, the faults that strike after the write ([`Tap::after_write`]).
    async fn forward(
        &self,
        request: Request<Incoming>,
        sender: &tokio::sync::Mutex<SendRequest<Full<Bytes>>>,
        caller: &Caller,
    ) -> Result<Response<TapBody>, TapError> {
        if let Caller::Controller(incarnation) = caller {
            if !incarnation.alive() {
                return Err(TapError::Crashed(incarnation.actor()));
            }
        }
        let call = Call {
            actor: match caller {
                Caller::Actor(actor) => actor.clone(),
                Caller::Controller(incarnation) => incarnation.actor(),
            },
            method: request.method().clone(),
            path: request
                .uri()
                .path_and_query()
                .map_or_else(|| "/".to_string(), |path| path.as_str().to_string()),
        };
        let is_watch = query_has(&call.path, |p| p == "watch=true" || p == "watch=1");
        let (parts, body) = request.into_parts();
        let body = body.collect().await?.to_bytes();
        let after = match self.pass_plan(caller, &call, is_watch)? {
            Verdict::Answered(response) => return Ok(response),
            Verdict::Pass(after) => after,
        };

        // The revision of the controller's replica while it lags (after a lagging restart, or
        // for as long as a lagging-replica fault lasts).
        let lag = match caller {
            Caller::Controller(incarnation) => incarnation
                .lag
                .filter(|lag| tokio::time::Instant::now() < lag.until)
                .map(|lag| lag.revision)
                .or_else(|| self.shared.stale.replica_revision()),
            Caller::Actor(_) => None,
        };
        let from_cache = lag.is_some_and(|lag| may_be_served_stale(&call.path, lag));
        let again =
            (call.method == http::Method::GET && from_cache && !is_watch).then(|| RequestCopy {
                method: parts.method.clone(),
                uri: parts.uri.clone(),
                headers: parts.headers.clone(),
                body: body.clone(),
            });
        let request = Request::from_parts(parts, Full::new(body));
        let response = send(sender, request).await?;
        if is_watch && response.status() == 200 {
            return Ok(self.follow_watch(call, caller, response));
        }
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await?.to_bytes();
        let (parts, bytes) = match (lag, again) {
            (Some(lag), Some(again)) => {
                self.as_lagging_replica(sender, &call.path, lag, again, parts, bytes)
                    .await?
            }
            _ => (parts, bytes),
        };
        let status = parts.status.as_u16();
        let name = self.record_answer(&call, status, &bytes);
        if let Caller::Controller(incarnation) = caller {
            if let Some(answer) = self.after_write(incarnation, &call, status, name, after)? {
                return Ok(answer);
            }
        }
        Ok(Response::from_parts(parts, TapBody::Whole(Some(bytes))))
    }

    /// The controller's request is a point: the plan may crash it, fail it (answered here), or let
    /// it by with faults that strike once it has taken effect. A scenario's actor always passes,
    /// and so does a re-watch (see `Incarnation::watches_again`): it is not a point.
    fn pass_plan(&self, caller: &Caller, call: &Call, is_watch: bool) -> Result<Verdict, TapError> {
        let mut after = AfterWrite::default();
        let Caller::Controller(incarnation) = caller else {
            return Ok(Verdict::Pass(after));
        };
        if is_watch && incarnation.watches_again(&call.path) {
            return Ok(Verdict::Pass(after));
        }
        let Call {
            actor,
            method,
            path,
        } = call;
        let point = self.shared.pass(
            Point::Request(0),
            format!("{method} {path}"),
            incarnation.number,
        );
        for fault in self.shared.plan().at(point) {
            match *fault {
                Fault::CrashBefore(_) | Fault::RestartLagging { .. } => {
                    self.shared.crash(
                        incarnation,
                        fault,
                        &format!("before {method} {path} was sent"),
                    );
                    return Err(TapError::Crashed(incarnation.actor()));
                }
                Fault::CrashAfter(_) => after.crash = Some(*fault),
                Fault::Fail {
                    failure: Failure::Timeout,
                    ..
                } => after.timeout = Some(*fault),
                Fault::Fail { failure, .. } => {
                    self.shared.note(
                        fault,
                        format!("{method} {path} answered {}", failure.status()),
                    );
                    self.shared.recorder.push(TraceEntry::Request {
                        actor: actor.clone(),
                        method: method.to_string(),
                        path: path.clone(),
                        status: failure.status(),
                        reason: Some(failure.reason().to_string()),
                        resource_version: None,
                        name: None,
                        watch: None,
                    });
                    return Ok(Verdict::Answered(status_response(
                        failure,
                        &fault.to_string(),
                    )));
                }
                _ => {}
            }
        }
        Ok(Verdict::Pass(after))
    }

    /// A watch the server accepted: recorded under a watch number, its body followed line by line
    /// (see [`WatchBody`]).
    fn follow_watch(
        &self,
        call: Call,
        caller: &Caller,
        response: Response<Incoming>,
    ) -> Response<TapBody> {
        let (parts, body) = response.into_parts();
        let watch = self.shared.recorder.next_watch();
        let collection = collection_of(&call.path).to_string();
        self.shared.recorder.push(TraceEntry::Request {
            actor: call.actor,
            method: call.method.to_string(),
            path: call.path,
            status: parts.status.as_u16(),
            reason: None,
            resource_version: None,
            name: None,
            watch: Some(watch),
        });
        let body = TapBody::Watch(Box::new(WatchBody {
            inner: body,
            partial: Vec::new(),
            lines: VecDeque::new(),
            front_counted: false,
            mode: WatchMode::Passing,
            watch,
            collection,
            shared: self.shared.clone(),
            controller: match caller {
                Caller::Controller(incarnation) => Some(incarnation.clone()),
                Caller::Actor(_) => None,
            },
        }));
        Response::from_parts(parts, body)
    }

    /// A lagging replica answers a list as it was at `revision`: a fresh, first-page list is read
    /// again there (`again`); any other answer, or a failed re-read, stays as it was.
    async fn as_lagging_replica(
        &self,
        sender: &tokio::sync::Mutex<SendRequest<Full<Bytes>>>,
        path: &str,
        revision: u64,
        again: RequestCopy,
        parts: http::response::Parts,
        bytes: Bytes,
    ) -> Result<(http::response::Parts, Bytes), TapError> {
        if parts.status != 200
            || !is_a_fresh_list(&bytes, revision)
            || query_has(path, |p| p.starts_with("continue="))
        {
            return Ok((parts, bytes));
        }
        let Ok(request) = again.at_revision(revision) else {
            return Ok((parts, bytes));
        };
        let response = send(sender, request).await?;
        if !response.status().is_success() {
            return Ok((parts, bytes));
        }
        let (stale_parts, stale_body) = response.into_parts();
        Ok((stale_parts, stale_body.collect().await?.to_bytes()))
    }

    /// Records a whole answer in the trace (with the object's name and resourceVersion when it
    /// is one object); returns the name.
    fn record_answer(&self, call: &Call, status: u16, bytes: &Bytes) -> Option<String> {
        let answer = serde_json::from_slice::<serde_json::Value>(bytes).ok();
        let reason = answer
            .as_ref()
            .and_then(|answer| status_reason(status, answer));
        let metadata = answer.map(|value| value["metadata"].clone());
        let field = |name: &str| {
            metadata
                .as_ref()
                .and_then(|metadata| metadata[name].as_str())
                .map(str::to_string)
        };
        let name = field("name");
        self.shared.recorder.push(TraceEntry::Request {
            actor: call.actor.clone(),
            method: call.method.to_string(),
            path: call.path.clone(),
            status,
            reason,
            resource_version: field("resourceVersion"),
            name: name.clone(),
            watch: None,
        });
        name
    }

    /// After the controller's request took effect: a write is noted (and an object it created
    /// counted), then the plan's late faults strike: a timeout answers 504 instead (`Some`), a
    /// crash loses the answer (an error ends the connection).
    fn after_write(
        &self,
        incarnation: &Arc<Incarnation>,
        call: &Call,
        status: u16,
        name: Option<String>,
        after: AfterWrite,
    ) -> Result<Option<Response<TapBody>>, TapError> {
        let Call { method, path, .. } = call;
        if *method != http::Method::GET {
            let created = (*method == http::Method::POST && status == 201)
                .then(|| {
                    let (resource, namespace) = resource_of(path)?;
                    let name = name?;
                    Some((
                        resource,
                        match namespace {
                            Some(namespace) => format!("{namespace}/{name}"),
                            None => name,
                        },
                    ))
                })
                .flatten();
            self.shared
                .controller_wrote(format!("{method} {path} -> {status}"), created);
        }
        if let Some(fault) = after.timeout {
            self.shared.note(
                &fault,
                format!("{method} {path} took effect ({status}); the answer is 504 Timeout"),
            );
            return Ok(Some(status_response(Failure::Timeout, &fault.to_string())));
        }
        if let Some(fault) = after.crash {
            self.shared.crash(
                incarnation,
                &fault,
                &format!("{method} {path} took effect ({status}); its answer was lost"),
            );
            return Err(TapError::Crashed(incarnation.actor()));
        }
        Ok(None)
    }
}

/// One request through the tap: who sent it, and what it asks.
struct Call {
    actor: String,
    method: http::Method,
    /// Path and query.
    path: String,
}

/// The fault plan's word on a controller's request before it is sent.
enum Verdict {
    /// Failed by the plan: this is the answer, nothing reaches the server.
    Answered(Response<TapBody>),
    /// Sent, with the faults that strike once it has taken effect.
    Pass(AfterWrite),
}

/// Faults that strike after a request took effect.
#[derive(Default)]
struct AfterWrite {
    /// The answer is lost: the controller crashes.
    crash: Option<Fault>,
    /// The answer becomes a 504.
    timeout: Option<Fault>,
}

/// Sends one request on the tap's connection to the server.
async fn send(
    sender: &tokio::sync::Mutex<SendRequest<Full<Bytes>>>,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, hyper::Error> {
    let mut sender = sender.lock().await;
    sender.ready().await?;
    sender.send_request(request).await
}

/// A request kept to be sent again (a lagging replica's list).
struct RequestCopy {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

impl RequestCopy {
    /// The same list, read at `revision` exactly.
    fn at_revision(self, revision: u64) -> Result<Request<Full<Bytes>>, http::Error> {
        let path = self.uri.path();
        let mut query: Vec<String> = self
            .uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|p| {
                !p.is_empty()
                    && !p.starts_with("resourceVersion=")
                    && !p.starts_with("resourceVersionMatch=")
            })
            .map(str::to_string)
            .collect();
        query.push(format!("resourceVersion={revision}"));
        query.push("resourceVersionMatch=Exact".into());
        let mut request = Request::builder()
            .method(self.method)
            .uri(format!("{path}?{}", query.join("&")))
            .body(Full::new(self.body))?;
        *request.headers_mut() = self.headers;
        Ok(request)
    }
}

/// Whether a list with this path and query may be answered from a watch cache that is at
/// `revision`: one that asks for "any version" (`resourceVersion=0`) or for "not older than" a
/// version the cache has reached. A list with no `resourceVersion` is a consistent read, which
/// kube-apiserver never answers from a cache behind etcd (it reads etcd, or, with consistent
/// reads from the cache, waits for the cache to catch up), so a lagging replica serves it
/// fresh; so is an exact or paginated list (its revision is named).
fn may_be_served_stale(path: &str, revision: u64) -> bool {
    let query = path.split_once('?').map_or("", |(_, query)| query);
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
    };
    match (param("resourceVersion"), param("resourceVersionMatch")) {
        (Some("0"), _) => true,
        (Some(version), None | Some("NotOlderThan")) => version
            .parse::<u64>()
            .is_ok_and(|version| version <= revision),
        _ => false,
    }
}

/// Whether `bytes` is a list (it has `items`) read after `revision`.
fn is_a_fresh_list(bytes: &[u8], revision: u64) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return false;
    };
    value.get("items").is_some()
        && value["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse::<u64>().ok())
            .is_some_and(|rv| rv > revision)
}

/// The `reason` of an error answer's `Status` body (`Conflict`, `AlreadyExists`), for the trace.
fn status_reason(status: u16, answer: &serde_json::Value) -> Option<String> {
    if status < 400 || answer["kind"] != "Status" {
        return None;
    }
    answer["reason"].as_str().map(str::to_string)
}

/// Whether a query parameter of `path` satisfies `test`.
fn query_has(path: &str, test: impl Fn(&str) -> bool) -> bool {
    path.split_once('?')
        .is_some_and(|(_, query)| query.split('&').any(test))
}

/// The resource (`configmaps`, `replicasets.apps`) and namespace a collection path names:
/// `/api/v1[/namespaces/NS]/PLURAL` or `/apis/GROUP/VERSION[/namespaces/NS]/PLURAL`.
pub(crate) fn resource_of(path: &str) -> Option<(String, Option<String>)> {
    let path = path.split('?').next()?;
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match *segments.first()? {
        "api" => ("", segments.get(2..)?),
        "apis" => (*segments.get(1)?, segments.get(3..)?),
        _ => return None,
    };
    let (namespace, plural) = match rest {
        ["namespaces", namespace, plural, ..] => (Some(namespace.to_string()), *plural),
        [plural, ..] => (None, *plural),
        [] => return None,
    };
    let resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    Some((resource, namespace))
}

/// A Status answer for `failure`, as kube-apiserver writes one.
fn status_response(failure: Failure, fault: &str) -> Response<TapBody> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("injected by the explorer ({fault})"),
        "reason": failure.reason(),
        "code": failure.status(),
    });
    let mut response = Response::new(TapBody::Whole(Some(Bytes::from(body.to_string()))));
    *response.status_mut() = http::StatusCode::from_u16(failure.status())
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if failure == Failure::TooManyRequests {
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// The body of an answer the tap passes on: read whole already, or a watch's stream.
enum TapBody {
    Whole(Option<Bytes>),
    Watch(Box<WatchBody>),
}

/// A watch's stream as the tap passes it on: line by line, each line an event the plan may
/// hide, hold back or crash the controller at. Lines are never reordered.
struct WatchBody {
    inner: Incoming,
    /// The part of the current line read so far.
    partial: Vec<u8>,
    /// Complete lines (without their newline) not yet passed on, oldest first.
    lines: VecDeque<Bytes>,
    /// Whether `lines.front()` has been counted as a point (and its faults applied).
    front_counted: bool,
    mode: WatchMode,
    watch: u64,
    /// The collection watched (the path without its query), for a partition's faults.
    collection: String,
    shared: Arc<RunShared>,
    /// The incarnation reading this watch, when it is the controller's.
    controller: Option<Arc<Incarnation>>,
}

/// What a watch's stream is doing.
enum WatchMode {
    /// Passing lines on as they come.
    Passing,
    /// Holding the front line until the timer ends (a delay, a lagging replica).
    Holding(Pin<Box<tokio::time::Sleep>>),
    /// Holding the front line until a lasting fault ends (see [`crate::stale`]).
    Stale(Release),
    /// Hiding every line (a coalesce) until `key`'s object changes again or the window ends;
    /// then the watch ends with 410.
    Hiding {
        key: String,
        window: Pin<Box<tokio::time::Sleep>>,
        fault: String,
    },
    /// Passing these last bytes on, then ending.
    Ending(Option<Bytes>),
}

/// The parts of one watch line the tap needs.
struct EventLine {
    kind_of_event: String,
    kind: String,
    key: String,
    resource_version: String,
}

impl EventLine {
    fn parse(line: &[u8]) -> Option<EventLine> {
        let event = serde_json::from_slice::<serde_json::Value>(line).ok()?;
        let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_string();
        let object = &event["object"];
        let metadata = &object["metadata"];
        let name = text(&metadata["name"]);
        let key = match (object["kind"].as_str(), metadata["namespace"].as_str()) {
            // An ERROR event carries a Status, named by its code (410: the history is gone).
            (Some("Status"), _) => format!("code={}", object["code"]),
            (_, Some(namespace)) if !namespace.is_empty() => format!("{namespace}/{name}"),
            _ => name,
        };
        Some(EventLine {
            kind_of_event: text(&event["type"]),
            kind: text(&object["kind"]),
            key,
            resource_version: text(&metadata["resourceVersion"]),
        })
    }

    /// An `ADDED`, `MODIFIED` or `DELETED` event: a point.
    fn is_object_event(&self) -> bool {
        matches!(
            self.kind_of_event.as_str(),
            "ADDED" | "MODIFIED" | "DELETED"
        )
    }

    fn revision(&self) -> u64 {
        self.resource_version.parse().unwrap_or(0)
    }

    fn describe(&self) -> String {
        format!(
            "{} {} {} rv={}",
            self.kind_of_event, self.kind, self.key, self.resource_version
        )
    }
}

/// The line a coalescing watch ends with: 410 Gone, so the informer relists.
fn gone_line(fault: &str) -> Bytes {
    let line = serde_json::json!({
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("too old resource version (the explorer coalesced this watch: {fault})"),
            "reason": "Expired",
            "code": 410,
        }
    });
    Bytes::from(format!("{line}\n"))
}

impl WatchBody {
    /// Splits a frame's bytes into lines.
    fn take(&mut self, data: &[u8]) {
        for &byte in data {
            if byte == b'\n' {
                let line = std::mem::take(&mut self.partial);
                if !line.is_empty() {
                    self.lines.push_back(Bytes::from(line));
                }
            } else {
                self.partial.push(byte);
            }
        }
    }

    /// Reads more of the server's stream into `lines`: `Ready(true)` when there is more,
    /// `Ready(false)` at its end.
    fn fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, hyper::Error>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let data = data.clone();
                    self.take(&data);
                }
                Poll::Ready(Ok(true))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Err(error)),
            Poll::Ready(None) => Poll::Ready(Ok(false)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_line(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        loop {
            if let Some(incarnation) = &self.controller {
                if !incarnation.alive() {
                    return Poll::Ready(None);
                }
            }
            match &mut self.mode {
                WatchMode::Ending(last) => {
                    return Poll::Ready(last.take().map(|bytes| Ok(Frame::data(bytes))));
                }
                WatchMode::Holding(timer) => {
                    if timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.mode = WatchMode::Passing;
                }
                WatchMode::Stale(release) => {
                    if release.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.mode = WatchMode::Passing;
                }
                WatchMode::Hiding { key, window, fault } => {
                    let (key, fault) = (key.clone(), fault.clone());
                    let mut changed = false;
                    while let Some(line) = self.lines.pop_front() {
                        if EventLine::parse(&line)
                            .is_some_and(|event| event.is_object_event() && event.key == key)
                        {
                            changed = true;
                            break;
                        }
                    }
                    if changed || window.as_mut().poll(cx).is_ready() {
                        self.lines.clear();
                        self.mode = WatchMode::Ending(Some(gone_line(&fault)));
                        continue;
                    }
                    match self.fill(cx) {
                        Poll::Ready(Ok(true)) => {}
                        Poll::Ready(Ok(false)) | Poll::Ready(Err(_)) => {
                            self.mode = WatchMode::Ending(Some(gone_line(&fault)));
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }
                WatchMode::Passing => {
                    let Some(line) = self.lines.front().cloned() else {
                        match self.fill(cx) {
                            Poll::Ready(Ok(true)) => continue,
                            Poll::Ready(Ok(false)) => return Poll::Ready(None),
                            Poll::Ready(Err(error)) => return Poll::Ready(Some(Err(error))),
                            Poll::Pending => return Poll::Pending,
                        }
                    };
                    let event = EventLine::parse(&line);
                    if let (Some(incarnation), Some(event)) = (&self.controller, &event) {
                        if let Some(held) = self.held_back(incarnation, event) {
                            self.mode = held;
                            continue;
                        }
                        if event.is_object_event() && !self.front_counted {
                            self.front_counted = true;
                            let incarnation = incarnation.clone();
                            if let Some(next) = self.apply_event_faults(&incarnation, event) {
                                self.mode = next;
                                continue;
                            }
                            if !incarnation.alive() {
                                return Poll::Ready(None);
                            }
                        }
                    }
                    self.lines.pop_front();
                    self.front_counted = false;
                    if let Some(event) = event {
                        self.shared.recorder.push(TraceEntry::Event {
                            watch: self.watch,
                            kind_of_event: event.kind_of_event,
                            kind: event.kind,
                            key: event.key,
                            resource_version: event.resource_version,
                        });
                    }
                    let mut bytes = Vec::with_capacity(line.len() + 1);
                    bytes.extend_from_slice(&line);
                    bytes.push(b'\n');
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(bytes)))));
                }
            }
        }
    }

    /// Whether the controller's replica may not show `event` yet, and how long it is held: a
    /// lagging replica (after a lagging restart) has not seen its revision before `lag.until`;
    /// a lasting fault (a partition, a lagging-replica fault: [`crate::stale`]) holds it until
    /// the fault ends.
    fn held_back(&self, incarnation: &Incarnation, event: &EventLine) -> Option<WatchMode> {
        let revisioned = event.is_object_event() || event.kind_of_event == "BOOKMARK";
        if !revisioned {
            return None;
        }
        if let Some(lag) = incarnation.lag {
            if event.revision() > lag.revision && tokio::time::Instant::now() < lag.until {
                let until = Box::pin(tokio::time::sleep_until(lag.until));
                return Some(WatchMode::Holding(until));
            }
        }
        self.shared
            .stale
            .holds(&self.collection, event.revision())
            .map(WatchMode::Stale)
    }

    /// Counts the front line as a point and applies the plan's faults there: the mode to go
    /// to, if it changes (the incarnation may also have crashed).
    fn apply_event_faults(
        &mut self,
        incarnation: &Arc<Incarnation>,
        event: &EventLine,
    ) -> Option<WatchMode> {
        let what = event.describe();
        let point = self
            .shared
            .pass(Point::Event(0), format!("event {what}"), incarnation.number);
        for fault in self.shared.plan().at(point) {
            match *fault {
                Fault::CrashBefore(_) | Fault::CrashAfter(_) | Fault::RestartLagging { .. } => {
                    self.shared
                        .crash(incarnation, fault, &format!("before it read {what}"));
                    return None;
                }
                Fault::Coalesce(_) => {
                    self.shared.note(fault, format!("hid {what}"));
                    self.lines.pop_front();
                    self.front_counted = false;
                    return Some(WatchMode::Hiding {
                        key: event.key.clone(),
                        window: Box::pin(tokio::time::sleep(COALESCE_WINDOW)),
                        fault: fault.to_string(),
                    });
                }
                Fault::Partition { steps, .. } => {
                    return self.partition(fault, event, &what, Window::Steps(steps));
                }
                Fault::PartitionFor { lasts, .. } => {
                    return self.partition(fault, event, &what, Window::For(lasts));
                }
                Fault::Delay { by, .. } => {
                    self.shared.note(
                        fault,
                        format!("held {what} and the rest of its watch back {by:?}"),
                    );
                    return Some(WatchMode::Holding(Box::pin(tokio::time::sleep(by))));
                }
                _ => {}
            }
        }
        None
    }

    /// Starts `fault`, a partition of this watch's collection from `event` on for `window`: the
    /// mode that holds its lines.
    fn partition(
        &self,
        fault: &Fault,
        event: &EventLine,
        what: &str,
        window: Window,
    ) -> Option<WatchMode> {
        let stale = &self.shared.stale;
        stale.partition(&self.collection, event.revision(), window);
        self.shared.note(
            fault,
            format!("{} partitioned from {what} on", self.collection),
        );
        stale
            .holds(&self.collection, event.revision())
            .map(WatchMode::Stale)
    }
}

impl Body for TapBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            TapBody::Whole(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            TapBody::Watch(watch) => watch.poll_line(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            TapBody::Whole(bytes) => bytes.is_none(),
            TapBody::Watch(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            TapBody::Whole(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
            TapBody::Watch(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::resource_of;

    #[test]
    fn only_lists_that_allow_a_cache_are_served_stale() {
        use super::may_be_served_stale;
        assert!(may_be_served_stale(
            "/api/v1/pods?limit=500&resourceVersion=0",
            20
        ));
        assert!(may_be_served_stale("/api/v1/pods?resourceVersion=15", 20));
        assert!(may_be_served_stale(
            "/api/v1/pods?resourceVersion=15&resourceVersionMatch=NotOlderThan",
            20
        ));
        assert!(!may_be_served_stale("/api/v1/pods?resourceVersion=25", 20));
        assert!(!may_be_served_stale("/api/v1/pods?limit=500", 20));
        assert!(!may_be_served_stale(
            "/api/v1/pods?resourceVersion=15&resourceVersionMatch=Exact",
            20
        ));
    }

    #[test]
    fn a_collection_path_names_its_resource() {
        assert_eq!(
            resource_of("/api/v1/namespaces/default/configmaps?limit=5"),
            Some(("configmaps".into(), Some("default".into())))
        );
        assert_eq!(
            resource_of("/apis/apps/v1/namespaces/x/replicasets"),
            Some(("replicasets.apps".into(), Some("x".into())))
        );
        assert_eq!(resource_of("/api/v1/nodes"), Some(("nodes".into(), None)));
        assert_eq!(
            resource_of("/apis/example.com/v1/widgets"),
            Some(("widgets.example.com".into(), None))
        );
        assert_eq!(resource_of("/version"), None);
    }
}
