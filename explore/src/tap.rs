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

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::client::{Dial, DialedStream};
use ferrokube_client::{Client, Config};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;

use crate::ExploreError;
use crate::trace::{Trace, TraceEntry};

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
    Ok(Client::new(config)?)
}

/// What the tap has recorded so far; shared by every connection of a run.
#[derive(Default)]
pub(crate) struct Recorder {
    entries: Mutex<Vec<TraceEntry>>,
    watches: Mutex<u64>,
}

impl Recorder {
    pub(crate) fn push(&self, entry: TraceEntry) {
        self.entries.lock().push(entry);
    }

    fn next_watch(&self) -> u64 {
        let mut watches = self.watches.lock();
        *watches += 1;
        *watches
    }

    pub(crate) fn trace(&self) -> Trace {
        Trace {
            entries: self.entries.lock().clone(),
        }
    }
}

/// The tap of one run: hands out clients whose every connection passes through it.
#[derive(Clone)]
pub(crate) struct Tap {
    server: Arc<RunningServer>,
    recorder: Arc<Recorder>,
}

impl Tap {
    pub(crate) fn new(server: Arc<RunningServer>, recorder: Arc<Recorder>) -> Tap {
        Tap { server, recorder }
    }

    /// A client whose requests are recorded under `actor`.
    pub(crate) fn client(&self, actor: &str) -> Result<Client, ExploreError> {
        let tap = self.clone();
        let dial = Dial::new(move |_uri| {
            let (ours, theirs) = tokio::io::duplex(PIPE_CAPACITY);
            tokio::spawn(tap.clone().serve(theirs));
            Box::pin(async move { Ok(Box::new(ours) as DialedStream) })
        });
        client_with(dial, actor)
    }

    /// Serves one client connection: each request is forwarded to the server over a connection
    /// of its own (opened when the client's connection is) and recorded.
    async fn serve(self, client_side: tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(PIPE_CAPACITY);
        self.server.serve_connection(theirs);
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
            let (tap, sender) = (self.clone(), sender.clone());
            async move { tap.forward(request, &sender).await }
        });
        if let Err(error) = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(client_side), service)
            .await
        {
            tracing::debug!(%error, "a client connection to the tap ended");
        }
    }

    /// Forwards `request`, records it with its answer, and returns the answer.
    async fn forward(
        &self,
        request: Request<Incoming>,
        sender: &tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
    ) -> Result<Response<TapBody>, hyper::Error> {
        let actor = request
            .headers()
            .get(http::header::USER_AGENT)
            .and_then(|agent| agent.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let method = request.method().to_string();
        let path = request
            .uri()
            .path_and_query()
            .map_or_else(|| "/".to_string(), |path| path.as_str().to_string());
        let is_watch = path.split_once('?').is_some_and(|(_, query)| {
            query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1")
        });
        let (parts, body) = request.into_parts();
        let body = body.collect().await?.to_bytes();
        let request = Request::from_parts(parts, Full::new(body));
        let response = {
            let mut sender = sender.lock().await;
            sender.ready().await?;
            sender.send_request(request).await?
        };
        let status = response.status().as_u16();
        let (parts, body) = response.into_parts();
        if is_watch && status == 200 {
            let watch = self.recorder.next_watch();
            self.recorder.push(TraceEntry::Request {
                actor,
                method,
                path,
                status,
                resource_version: None,
                name: None,
                watch: Some(watch),
            });
            let body = TapBody::Watch {
                inner: body,
                line: Vec::new(),
                watch,
                recorder: self.recorder.clone(),
            };
            return Ok(Response::from_parts(parts, body));
        }
        let bytes = body.collect().await?.to_bytes();
        let metadata = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .map(|value| value["metadata"].clone());
        let field = |name: &str| {
            metadata
                .as_ref()
                .and_then(|metadata| metadata[name].as_str())
                .map(str::to_string)
        };
        self.recorder.push(TraceEntry::Request {
            actor,
            method,
            path: path.clone(),
            status,
            resource_version: field("resourceVersion"),
            name: field("name"),
            watch: None,
        });
        Ok(Response::from_parts(parts, TapBody::Whole(Some(bytes))))
    }
}

/// The body of an answer the tap passes on: read whole already, or a watch's stream whose lines
/// are recorded as they go by.
enum TapBody {
    Whole(Option<Bytes>),
    Watch {
        inner: Incoming,
        /// The part of the current line read so far.
        line: Vec<u8>,
        watch: u64,
        recorder: Arc<Recorder>,
    },
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
            TapBody::Watch {
                inner,
                line,
                watch,
                recorder,
            } => {
                let polled = Pin::new(inner).poll_frame(cx);
                if let Poll::Ready(Some(Ok(frame))) = &polled {
                    if let Some(data) = frame.data_ref() {
                        for &byte in data.iter() {
                            if byte == b'\n' {
                                record_event(recorder, *watch, line);
                                line.clear();
                            } else {
                                line.push(byte);
                            }
                        }
                    }
                }
                polled
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            TapBody::Whole(bytes) => bytes.is_none(),
            TapBody::Watch { inner, .. } => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            TapBody::Whole(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
            TapBody::Watch { inner, .. } => inner.size_hint(),
        }
    }
}

/// Records one line of a watch (a JSON `{"type": …, "object": …}`); other lines are skipped.
fn record_event(recorder: &Recorder, watch: u64, line: &[u8]) {
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) else {
        return;
    };
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
    recorder.push(TraceEntry::Event {
        watch,
        kind_of_event: text(&event["type"]),
        kind: text(&object["kind"]),
        key,
        resource_version: text(&metadata["resourceVersion"]),
    });
}
