//! The embedded server target: a few HTTP requests against a fresh server holding a few objects.
//!
//! # Input format
//!
//! Readable, so that corpus files and regression inputs can be written and read by people:
//!
//! ```text
//! PATCH /api/v1/namespaces/default/configmaps/cm?dryRun=All     ← method, space, target
//! content-type: application/json-patch+json                     ← headers, one a line
//!                                                               ← a blank line
//! [{"op":"add","path":"/data/b","value":"2"}]                   ← the body (bytes)
//! %%                                                            ← between requests
//! GET /api/v1/namespaces/default/configmaps/cm
//! ```
//!
//! [`parse_requests`] reads any bytes this way (at most [`MAX_REQUESTS`] requests) and
//! [`render_requests`] writes requests back, so proptest can generate requests as values.
//!
//! # What happens to each input
//!
//! ```text
//!  fresh ApiServer ─▶ seed: ConfigMap cm, Pod p, Deployment d, ReplicaSet rs, Secret s,
//!                           Event e, Lease l in `default`; CRD widgets.example.com, Widget w
//!  each request ──▶ over an in-memory pipe (RunningServer::serve_connection), HTTP/1.1
//!               ──▶ answer within LIMIT, or the harness panics ("hang")
//!               ──▶ checks: errors are Status objects whose code is the HTTP status, 4xx (a
//!                   few 5xx kube-apiserver gives too: ALLOWED_5XX); JSON bodies are JSON
//!  server dropped (a watch left open ends with it)
//! ```
//!
//! Requests to `/ferrokube/…` (the fault switches: they can pause the server or make writes fail
//! on purpose) are skipped, as are requests the HTTP client itself refuses to send (a method or
//! header that is not a valid token, say): those never reach the server.

use std::cell::RefCell;
use std::time::Duration;

use bytes::Bytes;
use ferrokube::api::DynamicObject;
use ferrokube::apiserver::{ApiServer, RunningServer};
use ferrokube::core::ManagedFields;
use ferrokube::k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use ferrokube::protobuf::{FrameDecoder, is_protobuf};
use ferrokube::watch::{LineDecoder, decode_event};
use futures_util::FutureExt;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HOST};
use http::{HeaderName, HeaderValue, Method};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// Requests read from one input, at most.
pub const MAX_REQUESTS: usize = 12;

/// Headers sent per request, at most. hyper's server refuses a request with more than 100 with a
/// bodiless 431 of its own (kube-apiserver's Go server has such limits too), before our handlers
/// see it: the first finding of the coverage-guided run was that 431, a finding about the harness.
const MAX_HEADERS: usize = 32;

/// How long one answer (head and whole body) may take before the harness calls it a hang. Far
/// above what any request takes in memory; small enough for a fuzzer's timeout to see it first.
const LIMIT: Duration = Duration::from_secs(5);

/// 5xx answers kube-apiserver gives for these requests too, so they are not findings: creating an
/// object with a resourceVersion (500 there as well), and a list or watch from a resourceVersion
/// ahead of the server (504, see the crate's known differences).
const ALLOWED_5XX: [(u16, &str); 2] = [
    (
        500,
        "resourceVersion should not be set on objects to be created",
    ),
    (504, "Too large resource version"),
];

/// Separates the requests of one input.
const SEPARATOR: &[u8] = b"\n%%\n";

/// One request of an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// As written: a method hyper refuses to send makes the request skipped.
    pub method: String,
    /// Path and query, as sent (characters a URI may not hold are percent-encoded when sent).
    pub target: String,
    /// Name and value, in order (the first 32 are sent, framing headers skipped).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Reads the requests of an input (see the [module docs](self)). Total: any bytes give some list.
pub fn parse_requests(data: &[u8]) -> Vec<Request> {
    let mut requests = Vec::new();
    let mut rest = data;
    while requests.len() < MAX_REQUESTS && !rest.is_empty() {
        let (piece, tail) = match find(rest, SEPARATOR) {
            Some(at) => (&rest[..at], &rest[at + SEPARATOR.len()..]),
            None => (rest, &[][..]),
        };
        rest = tail;
        let (head, body) = match find(piece, b"\n\n") {
            Some(at) => (&piece[..at], &piece[at + 2..]),
            None => (piece, &[][..]),
        };
        let head = String::from_utf8_lossy(head);
        let mut lines = head.lines();
        let first = lines.next().unwrap_or("").trim();
        let (method, target) = first.split_once(' ').unwrap_or((first, "/"));
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
            .collect();
        requests.push(Request {
            method: method.to_string(),
            target: target.trim().to_string(),
            headers,
            body: body.to_vec(),
        });
    }
    requests
}

/// Writes requests in the input format; [`parse_requests`] reads them back.
pub fn render_requests(requests: &[Request]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(SEPARATOR);
        }
        out.extend_from_slice(format!("{} {}", request.method, request.target).as_bytes());
        for (name, value) in &request.headers {
            out.extend_from_slice(format!("\n{name}: {value}").as_bytes());
        }
        out.extend_from_slice(b"\n\n");
        out.extend_from_slice(&request.body);
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Sends the requests of `data` to a fresh embedded server; panics on a hang, a dropped
/// connection (a panic in a handler drops it), or an answer that breaks the checks of the
/// [module docs](self).
pub fn server_requests(data: &[u8]) {
    let requests = parse_requests(data);
    if requests.is_empty() {
        return;
    }
    watch_panics();
    crate::on_thread_runtime(|runtime| {
        TASK_PANIC.with(|panic| panic.borrow_mut().take());
        WATCHING.with(|on| on.set(true));
        runtime.block_on(exchange(&requests));
        // Let tasks that are still due run (a watch's stream, the garbage collector) before
        // looking for their panics.
        runtime.block_on(async {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        });
        WATCHING.with(|on| on.set(false));
        if let Some(message) = TASK_PANIC.with(|panic| panic.borrow_mut().take()) {
            panic!("a task of the server panicked: {message}");
        }
    });
}

thread_local! {
    /// Set while this thread runs the harness's runtime: its panic hook then records panics.
    static WATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The first panic of a task on this thread's runtime while [`WATCHING`]. tokio catches a
    /// task's panic (the task just ends), so without this a panic in a watch's stream task, say,
    /// would go unseen.
    static TASK_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that records panics on threads running the harness,
/// then hands every panic to the hook that was there before (which prints it).
fn watch_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if WATCHING.with(std::cell::Cell::get) {
                TASK_PANIC.with(|panic| {
                    panic.borrow_mut().get_or_insert_with(|| format!("{info}"));
                });
            }
            previous(info);
        }));
    });
}

async fn exchange(requests: &[Request]) {
    let server = match ApiServer::new().start().await {
        Ok(server) => server,
        Err(error) => panic!("fuzz harness: the server did not start: {error}"),
    };
    seed(&server);
    let mut connection: Option<SendRequest<Full<Bytes>>> = None;
    for request in requests {
        if request.target.starts_with("/ferrokube") {
            continue;
        }
        let Some(sent) = build(request) else {
            continue;
        };
        let mut sender = match connection.take() {
            Some(sender) if !sender.is_closed() => sender,
            _ => connect(&server).await,
        };
        if sender.ready().await.is_err() {
            sender = connect(&server).await;
        }
        let what = format!("{} {}", request.method, request.target);
        let response = match tokio::time::timeout(LIMIT, sender.send_request(sent)).await {
            Err(_) => panic!("hang: no answer to {what} within {LIMIT:?}"),
            Ok(Err(error)) => panic!("the server dropped {what} without an answer: {error}"),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        let streaming = response
            .headers()
            .get(CACHE_CONTROL)
            .is_some_and(|v| v == "no-cache, private");
        // The answer's encoding: JSON, or protobuf where the request's Accept preferred it (as
        // kube-apiserver answers built-in kinds and every error Status).
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let protobuf = is_protobuf(&content_type);
        if streaming && status == 200 {
            // A watch: its body goes on until the server ends it. Read what is ready, then leave
            // it (and its connection).
            read_watch(&what, response.into_body(), protobuf).await;
            continue;
        }
        connection = Some(sender);
        let json = content_type.starts_with("application/json");
        let body = match tokio::time::timeout(LIMIT, response.into_body().collect()).await {
            Err(_) => panic!("hang: the body of the answer to {what} did not end"),
            Ok(Err(error)) => panic!("the answer to {what} broke off: {error}"),
            Ok(Ok(body)) => body.to_bytes(),
        };
        check(&what, &request.method, status, (json, protobuf), &body);
    }
    drop(server);
}

/// Reads the frames of a watch body that are ready within a few turns of the runtime; every line
/// must be an event the client decodes.
async fn read_watch(what: &str, mut body: hyper::body::Incoming, protobuf: bool) {
    let mut lines = LineDecoder::new();
    let mut frames = FrameDecoder::new(ferrokube::watch::MAX_EVENT_BYTES);
    for _ in 0..16 {
        tokio::task::yield_now().await;
        let frame = match body.frame().now_or_never() {
            None => continue,
            Some(None) => break,
            Some(Some(Err(error))) => panic!("the watch of {what} broke off: {error}"),
            Some(Some(Ok(frame))) => frame,
        };
        if protobuf {
            if let Some(data) = frame.data_ref() {
                frames.push(data);
            }
            loop {
                match frames.next_frame() {
                    Ok(Some(frame)) => {
                        if let Err(error) = ferrokube::protobuf::decode_event::<DynamicObject>(
                            &frame,
                            ManagedFields::Keep,
                        ) {
                            panic!(
                                "{what}: the server wrote a watch frame the client cannot decode: {error}"
                            );
                        }
                    }
                    Ok(None) => break,
                    Err(error) => panic!("{what}: a watch frame the client cannot split: {error}"),
                }
            }
            continue;
        }
        if let Some(data) = frame.data_ref() {
            lines.push(data);
        }
        while let Some(line) = lines.next_line() {
            if let Err(error) = decode_event::<DynamicObject>(&line) {
                panic!("{what}: the server wrote a watch line the client cannot decode: {error}");
            }
        }
    }
}

fn check(what: &str, method: &str, status: u16, (json, protobuf): (bool, bool), body: &[u8]) {
    if method == "HEAD" {
        return;
    }
    let parsed = match protobuf {
        // A protobuf error Status, seen as its JSON form for the checks below.
        true if status >= 400 => {
            match ferrokube::protobuf::from_slice::<Status>(body, ManagedFields::Keep) {
                Ok(decoded) => serde_json::to_value(decoded).map(|mut value| {
                    value["kind"] = json!("Status");
                    value
                }),
                Err(error) => panic!(
                    "{what}: {status} with a protobuf body the client cannot decode: {error}"
                ),
            }
        }
        true => {
            if !body.is_empty()
                && let Err(error) = ferrokube::protobuf::Envelope::read(body)
            {
                panic!("{what}: {status} with a protobuf body that is no envelope: {error}");
            }
            return;
        }
        false => serde_json::from_slice::<Value>(body),
    };
    if status >= 400 {
        let Ok(error) = parsed else {
            panic!("{what}: {status} without a JSON Status: {body:?}");
        };
        assert_eq!(error["kind"], "Status", "{what}: {status} {error}");
        assert_eq!(
            error["code"].as_u64(),
            Some(u64::from(status)),
            "{what}: {error}"
        );
        if status >= 500 {
            let message = error["message"].as_str().unwrap_or("");
            assert!(
                ALLOWED_5XX
                    .iter()
                    .any(|(code, text)| *code == status && message.contains(text)),
                "{what}: bad input must be a 4xx, not {status}: {message}"
            );
        }
    } else if json && !body.is_empty() {
        assert!(
            parsed.is_ok(),
            "{what}: {status} with a body that is not JSON"
        );
    }
}

/// The request as hyper sends it, or `None` if it cannot be sent at all.
fn build(request: &Request) -> Option<http::Request<Full<Bytes>>> {
    let method = Method::from_bytes(request.method.as_bytes()).ok()?;
    let mut builder = http::Request::builder()
        .method(method)
        .uri(uri(&request.target)?)
        .header(HOST, "fuzz.local");
    for (name, value) in request.headers.iter().take(MAX_HEADERS) {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        // Framing is hyper's business (a second Content-Length would be refused by the client).
        let framing = [
            "host",
            "content-length",
            "transfer-encoding",
            "connection",
            "te",
        ];
        if framing.contains(&name.as_str()) || name.as_str().starts_with("upgrade") {
            continue;
        }
        if name == "expect" {
            continue;
        }
        let Ok(value) = HeaderValue::from_str(value) else {
            continue;
        };
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::from(request.body.clone())))
        .ok()
}

/// `target` as a request URI: a leading `/` added, characters a URI may not hold
/// percent-encoded (a `%` is kept as it is, so encoded input stays encoded).
fn uri(target: &str) -> Option<http::Uri> {
    let mut encoded = String::with_capacity(target.len() + 1);
    if !target.starts_with('/') {
        encoded.push('/');
    }
    for byte in target.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded.parse().ok()
}

/// An HTTP/1.1 connection to `server` over an in-memory pipe (no socket).
pub(crate) async fn connect(server: &RunningServer) -> SendRequest<Full<Bytes>> {
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    server.serve_connection(server_end);
    match hyper::client::conn::http1::handshake(TokioIo::new(client_end)).await {
        Ok((sender, connection)) => {
            tokio::spawn(connection);
            sender
        }
        Err(error) => panic!("fuzz harness: no HTTP/1.1 connection over a pipe: {error}"),
    }
}

/// The objects every input starts with, so patches, updates and deletes have targets.
fn seed(server: &RunningServer) {
    let labels = json!({"app": "web"});
    let template = json!({"metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}});
    let objects = [
        (
            "",
            "v1",
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": labels}, "data": {"a": "1"}}),
        ),
        (
            "",
            "v1",
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": labels}, "spec": template["spec"]}),
        ),
        (
            "apps",
            "v1",
            "deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"replicas": 1,
                "selector": {"matchLabels": labels}, "template": template}}),
        ),
        (
            "apps",
            "v1",
            "replicasets",
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "rs"}, "spec": {"replicas": 1,
                "selector": {"matchLabels": labels}, "template": template}}),
        ),
        (
            "",
            "v1",
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}}),
        ),
        (
            "",
            "v1",
            "events",
            json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e"}, "reason": "Seeded", "message": "m", "type": "Normal",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}}),
        ),
        (
            "coordination.k8s.io",
            "v1",
            "leases",
            json!({"apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}),
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            widget_crd(),
        ),
        (
            "example.com",
            "v1",
            "widgets",
            json!({"apiVersion": "example.com/v1",
            "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 1, "color": "red", "free": {"any": ["thing"]}}}),
        ),
    ];
    for (group, version, plural, object) in objects {
        let Some(resource) = server.registry().find(group, version, plural) else {
            panic!("fuzz harness: {plural}.{group} is not served");
        };
        let namespace = resource.namespaced.then_some("default");
        if let Err(error) = server
            .api()
            .create(&resource, namespace, object, &Default::default())
        {
            panic!("fuzz harness: seeding {plural}: {error:?}");
        }
    }
}

fn widget_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 0, "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "name": {"type": "string", "maxLength": 3},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}})
}
