//! The client's HTTP behaviour (retries, rate limits, timeouts, headers, watch streams) against a
//! small scripted HTTP server in the test process, and the HTTP version it negotiates over TLS
//! (against the embedded API server, which offers both). Behaviour against a real API server is in
//! `client/tests/client/e2e/client.rs`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::Config;
use ferrokube_client::Error;
use ferrokube_client::api::ListParams;
use ferrokube_client::api::PostParams;
use ferrokube_client::api::WatchParams;
use ferrokube_client::watch::WatchEvent;
use ferrokube_client::watcher::ResumingWatcher;
use ferrokube_client::watcher::WatchError;
use ferrokube_core::backoff::Backoff;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use k8s_openapi::api::core::v1::ConfigMap;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// What the scripted server saw: method and path-and-query of every request, and their headers.
#[derive(Default)]
struct Seen {
    requests: Vec<(String, String)>,
    headers: Vec<http::HeaderMap>,
}

/// Starts a server answering each request with `answer(n, request)` (n counts from 0).
async fn serve<F>(answer: F) -> (String, Arc<Mutex<Seen>>)
where
    F: Fn(usize, &Request<Incoming>) -> Response<Body> + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let answer = Arc::new(answer);
    let state = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            let state = state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let n = {
                        let mut seen = state.lock().expect("lock");
                        seen.requests.push((
                            request.method().to_string(),
                            request
                                .uri()
                                .path_and_query()
                                .map(|p| p.to_string())
                                .unwrap_or_default(),
                        ));
                        seen.headers.push(request.headers().clone());
                        seen.requests.len() - 1
                    };
                    let response = answer(n, &request);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                .await;
            });
        }
    });
    (url, seen)
}

fn body(text: &str) -> Body {
    http_body_util::Full::new(Bytes::from(text.to_string()))
        .map_err(|never| match never {})
        .boxed()
}

fn respond(code: u16, text: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(body(text))
        .expect("response")
}

/// A body sent as these chunks, in order.
fn chunked(chunks: Vec<&'static [u8]>) -> Response<Body> {
    let frames = futures_util::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, Infallible>(Frame::data(Bytes::from_static(c)))),
    );
    Response::builder()
        .status(200)
        .body(BodyExt::boxed(StreamBody::new(frames)))
        .expect("response")
}

const CM: &str = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}"#;
const LIST: &str =
    r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[]}"#;

fn config(url: &str) -> Config {
    let mut config = Config::new(url.parse().expect("url"));
    config.auth = ferrokube_client::config::Auth::Token("secret".into());
    config.qps = None;
    config.retry.initial_backoff = Duration::from_millis(5);
    config
}

fn api(config: Config) -> Api<ConfigMap> {
    Api::namespaced(Client::new(config).expect("client"), "ns")
}

#[tokio::test]
async fn sends_standard_headers_and_credentials() {
    let (url, seen) = serve(|_, _| respond(200, CM)).await;
    let cm = api(config(&url)).get("a").await.expect("get");
    assert_eq!(cm.metadata.resource_version.as_deref(), Some("5"));
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen.requests[0],
        ("GET".into(), "/api/v1/namespaces/ns/configmaps/a".into())
    );
    let headers = &seen.headers[0];
    assert_eq!(headers["authorization"], "Bearer secret");
    // A built-in kind is read in protobuf where the server has it (client-go's default).
    assert_eq!(
        headers["accept"],
        "application/vnd.kubernetes.protobuf, application/json"
    );
    assert!(
        headers["user-agent"]
            .to_str()
            .expect("ascii")
            .starts_with("ferrokube/")
    );
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_even_for_a_create() {
    let (url, seen) = serve(|n, _| {
        if n == 0 {
            Response::builder()
                .status(429)
                .header("retry-after", "1")
                .body(body(
                    r#"{"kind":"Status","status":"Failure","reason":"TooManyRequests","code":429}"#,
                ))
                .expect("response")
        } else {
            respond(201, CM)
        }
    })
    .await;
    let started = Instant::now();
    api(config(&url))
        .create(&PostParams::default(), &ConfigMap::default())
        .await
        .expect("created on the second attempt");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "waited for Retry-After"
    );
    assert_eq!(seen.lock().expect("lock").requests.len(), 2);
}

#[tokio::test]
async fn a_5xx_is_retried_for_a_get_and_never_for_a_create() {
    let (url, seen) = serve(|n, request| {
        if request.method() == http::Method::GET && n < 2 {
            respond(503, "")
        } else if request.method() == http::Method::POST {
            respond(500, r#"{"kind":"Status","status":"Failure","reason":"InternalError","code":500,"message":"etcd down"}"#)
        } else {
            respond(200, LIST)
        }
    })
    .await;
    let api = api(config(&url));
    let list = api
        .list(&ListParams::default())
        .await
        .expect("third GET works");
    assert_eq!(list.resource_version(), "9");
    let error = api
        .create(&PostParams::default(), &ConfigMap::default())
        .await
        .expect_err("create is not retried");
    assert!(error.is_server_error(), "{error}");
    assert_eq!(error.api().map(|a| a.message.as_str()), Some("etcd down"));
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.requests.iter().filter(|(m, _)| m == "GET").count(), 3);
    assert_eq!(seen.requests.iter().filter(|(m, _)| m == "POST").count(), 1);
}

#[tokio::test]
async fn the_rate_limiter_spaces_requests() {
    let (url, _) = serve(|_, _| respond(200, CM)).await;
    let mut config = config(&url);
    config.qps = Some(20.0);
    config.burst = 2;
    let api = api(config);
    let started = Instant::now();
    for _ in 0..8 {
        api.get("a").await.expect("get");
    }
    // 2 at once, then one every 50 ms: at least 6 × 50 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(280),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let (url, _) = serve(|_, _| {
        let slow = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"{}")))
        });
        Response::builder()
            .status(200)
            .body(BodyExt::boxed(StreamBody::new(slow)))
            .expect("response")
    })
    .await;
    let mut config = config(&url);
    config.timeout = Some(Duration::from_millis(200));
    config.retry.max_retries = 0;
    let started = Instant::now();
    let error = api(config).get("a").await.expect_err("times out");
    // The head came at once; the body then said nothing for longer than the timeout.
    assert!(matches!(error, Error::Idle { .. }), "{error}");
    assert!(error.is_timeout());
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_watch_decodes_across_chunks_and_ends_on_a_malformed_line() {
    let (url, seen) = serve(|_, _| {
        chunked(vec![
            br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"6"}}}"#,
            b"\n{\"type\":\"MODI",
            br#"FIED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#,
            b"\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"8\"}}}\n{oops\n",
            br#"{"type":"DELETED","object":{"metadata":{"name":"a"}}}"#,
        ])
    })
    .await;
    let api = api(config(&url));
    let mut stream = api
        .watch(&WatchParams::default().labels("app=x"), "5")
        .await
        .expect("watch opens");
    let mut kinds = Vec::new();
    while let Some(item) = stream.next().await {
        kinds.push(match item {
            Ok(WatchEvent::Added(_)) => "added",
            Ok(WatchEvent::Modified(_)) => "modified",
            Ok(WatchEvent::Bookmark(_)) => "bookmark",
            Ok(_) => "other",
            Err(Error::Decode { .. }) => "decode error",
            Err(_) => "error",
        });
    }
    assert_eq!(kinds, ["added", "modified", "bookmark", "decode error"]);
    let (_, query) = &seen.lock().expect("lock").requests[0];
    assert_eq!(
        query,
        "/api/v1/namespaces/ns/configmaps?watch=true&labelSelector=app%3Dx&allowWatchBookmarks=true&resourceVersion=5"
    );
}

#[tokio::test]
async fn the_resuming_watcher_reopens_from_the_last_version_and_reports_410() {
    let (url, seen) = serve(|n, _| match n {
        0 => chunked(vec![
            b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}\n",
        ]),
        1 => chunked(vec![
            b"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"15\"}}}\n",
        ]),
        // (A 5xx would be retried inside the client; a broken stream reaches the watcher.)
        2 => chunked(vec![b"{not json\n"]),
        3 => chunked(vec![
            b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410,\"message\":\"too old resource version\"}}\n",
        ]),
        _ => respond(410, r#"{"kind":"Status","status":"Failure","reason":"Expired","code":410}"#),
    })
    .await;
    let mut watcher = ResumingWatcher::new(api(config(&url)), WatchParams::default(), "10")
        .with_backoff(Backoff::new(
            Duration::from_millis(1),
            Duration::from_millis(5),
            Duration::from_secs(60),
        ));
    assert!(matches!(watcher.next().await, Ok(WatchEvent::Added(_))));
    assert!(matches!(watcher.next().await, Ok(WatchEvent::Bookmark(_))));
    assert_eq!(watcher.resource_version(), "15");
    assert!(matches!(watcher.next().await, Err(WatchError::Retrying(_))));
    assert!(matches!(watcher.next().await, Err(WatchError::Gone(v)) if v == "15"));
    assert!(
        matches!(watcher.next().await, Err(WatchError::Gone(_))),
        "stays gone"
    );
    watcher.resume_from("20");
    assert!(matches!(watcher.next().await, Err(WatchError::Gone(v)) if v == "20"));
    let seen = seen.lock().expect("lock");
    let versions: Vec<&str> = seen
        .requests
        .iter()
        .map(|(_, q)| q.rsplit("resourceVersion=").next().unwrap_or_default())
        .collect();
    assert_eq!(versions, ["10", "11", "15", "15", "20"]);
}

#[tokio::test]
async fn over_tls_the_client_speaks_http1_unless_http2_is_asked_for() {
    let server = ferrokube_apiserver::ApiServer::new()
        .tls(true)
        .token("version-token")
        .start()
        .await
        .expect("server starts");
    let path = std::env::temp_dir().join(format!(
        "ferrokube-http-version-{}.kubeconfig",
        std::process::id()
    ));
    server.write_kubeconfig(&path).expect("kubeconfig written");
    let config = Config::from_kubeconfig_files(std::slice::from_ref(&path), None);
    let _ = std::fs::remove_file(&path);
    let config = config.expect("config from the server's kubeconfig");
    assert!(!config.http2, "HTTP/1.1 is the default");

    for (http2, expected) in [
        (false, http::Version::HTTP_11),
        (true, http::Version::HTTP_2),
    ] {
        let client = Client::new(Config {
            http2,
            ..config.clone()
        })
        .expect("client");
        for streaming in [false, true] {
            let uri = if streaming {
                "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
            } else {
                "/api/v1/namespaces/default/configmaps"
            };
            let call = ferrokube_client::client::Call {
                request: Request::get(uri).body(Bytes::new()).expect("request"),
                idempotent: true,
                streaming,
            };
            let response = client.send(call).await.expect("answered");
            assert_eq!(
                response.version(),
                expected,
                "http2 = {http2}, watch = {streaming}"
            );
        }
    }
}

/// A client certificate is accepted as kubectl accepts it: X.509 v1 or v3, RSA or EC (fixtures in
/// client/tests/fixtures/x509/), and the connection to the embedded TLS server works with it; a key that
/// is not the certificate's is refused with a clear error, before any connection.
#[tokio::test]
async fn client_certificates_v1_and_v3_rsa_and_ec_are_accepted_as_kubectl_does() {
    let server = ferrokube_apiserver::ApiServer::new()
        .tls(true)
        .token("cert-token")
        .start()
        .await
        .expect("server starts");
    let path = std::env::temp_dir().join(format!(
        "ferrokube-client-cert-{}.kubeconfig",
        std::process::id()
    ));
    server.write_kubeconfig(&path).expect("kubeconfig written");
    let config = Config::from_kubeconfig_files(std::slice::from_ref(&path), None);
    let _ = std::fs::remove_file(&path);
    let config = config.expect("config from the server's kubeconfig");
    let fixture = |name: &str| {
        std::fs::read(format!(
            "{}/tests/fixtures/x509/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("fixture")
    };
    for kind in ["rsa", "ec"] {
        for version in ["v1", "v3"] {
            let client = Client::new(Config {
                identity: Some(ferrokube_client::config::Identity {
                    cert_pem: fixture(&format!("{kind}-{version}.crt")),
                    key_pem: fixture(&format!("{kind}.key")),
                }),
                ..config.clone()
            })
            .unwrap_or_else(|e| panic!("{kind} {version} client certificate refused: {e}"));
            let call = ferrokube_client::client::Call {
                request: Request::get("/api/v1/namespaces/default/configmaps")
                    .body(Bytes::new())
                    .expect("request"),
                idempotent: true,
                streaming: false,
            };
            let response = client
                .send(call)
                .await
                .unwrap_or_else(|e| panic!("{kind} {version}: {e}"));
            assert!(response.status().is_success(), "{kind} {version}");
        }
    }
    let mismatched = Client::new(Config {
        identity: Some(ferrokube_client::config::Identity {
            cert_pem: fixture("ec-v1.crt"),
            key_pem: fixture("rsa.key"),
        }),
        ..config.clone()
    });
    let Err(error) = mismatched else {
        panic!("a key that is not the certificate's is refused");
    };
    assert!(
        error.to_string().contains("not the certificate's"),
        "unclear error: {error}"
    );
}

// ---------------------------------------------------------------------------------------------
// Deadlines on every wait, and caps on what a server may send (issue: production faults).

/// A body whose pieces come `every` apart, `count` of them, concatenating to `text`.
fn paced(text: &'static str, count: usize, every: Duration) -> Response<Body> {
    let size = text.len().div_ceil(count);
    let pieces: Vec<Bytes> = text
        .as_bytes()
        .chunks(size)
        .map(Bytes::from_static)
        .collect();
    let frames = futures_util::stream::unfold(pieces.into_iter(), move |mut rest| async move {
        let piece = rest.next()?;
        tokio::time::sleep(every).await;
        Some((Ok::<_, Infallible>(Frame::data(piece)), rest))
    });
    Response::builder()
        .status(200)
        .body(BodyExt::boxed(StreamBody::new(frames)))
        .expect("response")
}

/// A body that sends `first` and then nothing, forever, without closing.
fn stalls_after(first: &'static str) -> Response<Body> {
    let frames = futures_util::stream::once(async move {
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(first.as_bytes())))
    })
    .chain(futures_util::stream::pending());
    Response::builder()
        .status(200)
        .body(BodyExt::boxed(StreamBody::new(frames)))
        .expect("response")
}

/// A TCP server that accepts connections and reads what comes, and never says a word: no TLS
/// handshake, no HTTP answer, no FIN.
async fn silent_server() -> std::net::SocketAddr {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let _ = socket.read(&mut buf).await;
            held.push(socket);
        }
    });
    addr
}

#[tokio::test]
async fn dead_connection_list_body_may_outlast_the_timeout_while_it_keeps_coming() {
    let list: &'static str = Box::leak(
        format!(
            r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{CM},{CM},{CM},{CM}]}}"#
        )
        .into_boxed_str(),
    );
    let (url, _) = serve(move |_, _| paced(list, 8, Duration::from_millis(150))).await;
    let mut config = config(&url);
    config.timeout = Some(Duration::from_millis(500));
    let started = Instant::now();
    let listed = api(config)
        .list(&ListParams::default())
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 4);
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "the whole body took longer than the request timeout, and that is allowed"
    );
}

#[tokio::test]
async fn dead_connection_list_body_that_stalls_ends_with_an_idle_error() {
    let (url, _) = serve(|_, _| stalls_after(r#"{"kind":"ConfigMapList","items":["#)).await;
    let mut config = config(&url);
    config.timeout = Some(Duration::from_millis(300));
    config.retry.max_retries = 0;
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        api(config).list(&ListParams::default()),
    )
    .await
    .expect("the list gives up by itself");
    match outcome {
        Err(Error::Idle { after, .. }) => assert_eq!(after, Duration::from_millis(300)),
        other => panic!("expected Error::Idle, got {other:?}"),
    }
}

#[tokio::test]
async fn dead_connection_watch_head_has_a_deadline() {
    let addr = silent_server().await;
    let mut config = config(&format!("http://{addr}"));
    config.timeout = Some(Duration::from_millis(300));
    config.retry.max_retries = 0;
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        api(config).watch(&WatchParams::default(), "1"),
    )
    .await
    .expect("the watch gives up by itself");
    assert!(
        matches!(outcome, Err(Error::Timeout { .. })),
        "expected a timeout, got {:?}",
        outcome.err()
    );
}

#[tokio::test]
async fn dead_connection_tls_handshake_has_a_deadline() {
    let addr = silent_server().await;
    let mut config = config(&format!("https://{addr}"));
    // No request timeout at all: only the connection's own deadline can end this.
    config.timeout = None;
    config.connect_timeout = Duration::from_millis(200);
    config.tls_handshake_timeout = Duration::from_millis(200);
    config.retry.max_retries = 0;
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(10), api(config).get("a"))
        .await
        .expect("the request gives up by itself");
    let error = outcome.expect_err("no TLS server there");
    assert!(
        error.to_string().contains("no connection within"),
        "the connection deadline: {error}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn abuse_watch_event_longer_than_the_cap_is_a_typed_error() {
    // One event line of 33 MiB, no newline: the client stops at its 32 MiB cap.
    let huge: &'static str = Box::leak("x".repeat(33 << 20).into_boxed_str());
    let (url, _) = serve(move |_, _| paced(huge, 33, Duration::ZERO)).await;
    let mut watch = api(config(&url))
        .watch(&WatchParams::default(), "1")
        .await
        .expect("watch opens");
    match watch.next().await {
        Some(Err(Error::TooLarge { limit, .. })) => {
            assert_eq!(limit, ferrokube_client::watch::MAX_EVENT_BYTES)
        }
        other => panic!("expected Error::TooLarge, got {other:?}"),
    }
    assert!(watch.next().await.is_none(), "the stream ends after it");
}

#[tokio::test]
async fn abuse_error_body_longer_than_the_cap_keeps_its_status() {
    let huge: &'static str = Box::leak("<html>".repeat(400_000).into_boxed_str());
    let (url, _) = serve(move |_, _| {
        Response::builder()
            .status(503)
            .body(body(huge))
            .expect("response")
    })
    .await;
    let mut config = config(&url);
    config.retry.max_retries = 0;
    let error = api(config).get("a").await.expect_err("a 503");
    let Error::Api(status) = error else {
        panic!("expected the server's status, got {error:?}");
    };
    assert_eq!(status.code, 503);
    assert!(
        status.message.contains("longer than"),
        "the message says the body was cut: {}",
        status.message
    );
}

/// Reads of built-in kinds offer protobuf (and take the JSON this server answers), creates send
/// protobuf bodies, `DynamicObject` stays JSON, and `Config::content_type = Json` offers JSON only.
#[tokio::test]
async fn protobuf_offered_for_built_in_reads_only_and_json_when_configured() {
    let (url, seen) = serve(|_, request| {
        match (
            request.method().as_str(),
            request.uri().path().ends_with("/configmaps"),
        ) {
            ("GET", true) => respond(200, LIST),
            _ => respond(200, CM),
        }
    })
    .await;
    let cms = api(config(&url));
    cms.get("a").await.expect("get, JSON answered");
    cms.list(&Default::default())
        .await
        .expect("list, JSON answered");
    cms.create(&Default::default(), &ConfigMap::default())
        .await
        .expect("create");
    let dynamic: Api<ferrokube_client::DynamicObject> = Api::dynamic(
        cms.client().clone(),
        ferrokube_core::ApiResource::of::<ConfigMap>(),
        Some("ns"),
    );
    dynamic.get("a").await.expect("dynamic get");
    let mut json_only = config(&url);
    json_only.content_type = ferrokube_client::config::ContentType::Json;
    let cms_json = api(json_only);
    assert!(!cms_json.reads_protobuf());
    cms_json.get("a").await.expect("get");
    let accepts: Vec<String> = seen
        .lock()
        .expect("lock")
        .headers
        .iter()
        .map(|h| h["accept"].to_str().expect("ascii").to_string())
        .collect();
    let protobuf = "application/vnd.kubernetes.protobuf, application/json";
    assert_eq!(
        accepts,
        [
            protobuf,
            protobuf,
            protobuf,
            "application/json",
            "application/json"
        ]
    );
    let create = &seen.lock().expect("lock").headers[2];
    assert_eq!(
        create["content-type"], "application/vnd.kubernetes.protobuf",
        "a built-in kind's create body is protobuf"
    );
}

/// A server that refuses a protobuf body (415) gets the same write once more in JSON, and every
/// later write of that resource goes as JSON straight away; other resources still try protobuf.
#[tokio::test]
async fn protobuf_body_refused_with_415_is_sent_again_in_json_and_remembered() {
    let (url, seen) = serve(|_, request| {
        let content_type = request
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if content_type.contains("protobuf") {
            return respond(
                415,
                r#"{"kind":"Status","code":415,"reason":"UnsupportedMediaType"}"#,
            );
        }
        if request.uri().path().contains("secrets") {
            return respond(
                201,
                r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns"}}"#,
            );
        }
        respond(201, CM)
    })
    .await;
    let cms = api(config(&url));
    let cm = ConfigMap {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("a".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let created = cms.create(&Default::default(), &cm).await.expect("create");
    assert_eq!(created.metadata.resource_version.as_deref(), Some("5"));
    cms.replace("a", &Default::default(), &cm)
        .await
        .expect("replace");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(cms.client().clone(), "ns");
    secrets
        .create(&Default::default(), &Default::default())
        .await
        .expect("secret create");
    let seen = seen.lock().expect("lock");
    let types: Vec<&str> = seen
        .headers
        .iter()
        .map(|h| h["content-type"].to_str().expect("ascii"))
        .collect();
    let (protobuf, json) = ("application/vnd.kubernetes.protobuf", "application/json");
    assert_eq!(
        types,
        [protobuf, json, json, protobuf, json],
        "configmaps: refused once, then JSON only; secrets: tried on their own"
    );
}

/// A server that will not answer protobuf (406) for a resource is asked again in JSON, and the
/// client remembers it: later gets, lists, watches (of any `Api` of the resource) and the answers
/// of writes ask for JSON only at once; another resource still asks for protobuf.
#[tokio::test]
async fn protobuf_refused_with_406_is_asked_again_in_json_and_remembered_per_resource() {
    let (url, seen) = serve(|_, request| {
        let accept = request
            .headers()
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let path = request.uri().path();
        if path.contains("/secrets") {
            return respond(
                200,
                r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns"}}"#,
            );
        }
        if accept.contains("protobuf") {
            return respond(
                406,
                r#"{"kind":"Status","code":406,"reason":"NotAcceptable"}"#,
            );
        }
        match request.uri().query() {
            Some(q) if q.contains("watch") => {
                respond(200, &format!(r#"{{"type":"ADDED","object":{CM}}}"#))
            }
            Some(_) => respond(200, LIST),
            None if request.method() == "POST" => respond(201, CM),
            None if path.ends_with("configmaps") => respond(200, LIST),
            None => respond(200, CM),
        }
    })
    .await;
    let cms = api(config(&url));
    assert!(cms.reads_protobuf());
    cms.get("a").await.expect("get");
    assert!(!cms.reads_protobuf(), "the refusal is remembered");
    assert_eq!(
        cms.list(&Default::default())
            .await
            .expect("list")
            .resource_version(),
        "9"
    );
    let mut watch = cms.watch(&Default::default(), "5").await.expect("watch");
    let event = watch.next().await.expect("an event").expect("decoded");
    assert!(matches!(
        event,
        ferrokube_client::watch::WatchEvent::Added(_)
    ));
    let elsewhere: Api<ConfigMap> = Api::namespaced(cms.client().clone(), "other");
    assert!(!elsewhere.reads_protobuf(), "remembered for the resource");
    elsewhere.get("a").await.expect("get elsewhere");
    cms.create(&Default::default(), &ConfigMap::default())
        .await
        .expect("create");
    assert!(cms.writes_protobuf(), "the body is still protobuf");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(cms.client().clone(), "ns");
    secrets.get("s").await.expect("secret get");
    assert!(secrets.reads_protobuf(), "another resource still asks");
    let seen = seen.lock().expect("lock");
    let asked: Vec<(String, &str)> = seen
        .requests
        .iter()
        .zip(&seen.headers)
        .map(|((method, path), headers)| {
            let accept = headers["accept"].to_str().expect("ascii");
            let accept = if accept.contains("protobuf") {
                "protobuf"
            } else {
                accept
            };
            let path = path.split('?').next().unwrap_or_default();
            (format!("{method} {path}"), accept)
        })
        .collect();
    let json = "application/json";
    let expected: Vec<(String, &str)> = [
        ("GET /api/v1/namespaces/ns/configmaps/a", "protobuf"),
        ("GET /api/v1/namespaces/ns/configmaps/a", json),
        ("GET /api/v1/namespaces/ns/configmaps", json),
        ("GET /api/v1/namespaces/ns/configmaps", json),
        ("GET /api/v1/namespaces/other/configmaps/a", json),
        ("POST /api/v1/namespaces/ns/configmaps", json),
        ("GET /api/v1/namespaces/ns/secrets/s", "protobuf"),
    ]
    .into_iter()
    .map(|(request, accept)| (request.to_string(), accept))
    .collect();
    assert_eq!(
        asked, expected,
        "one refused read, then JSON only for configmaps; secrets still protobuf"
    );
}

/// A front for the embedded server that refuses protobuf answers for configmaps as
/// kube-apiserver refuses them for a resource it has no protobuf form for (406, the same
/// `Status`), and passes every other request through, answers streamed as they come. (The
/// embedded server itself answers JSON to the client's `protobuf, json` Accept where it has no
/// protobuf, as kube-apiserver does, so a refusal needs this front.) The Accept of every request
/// it saw, by method and path.
async fn refusing_front(upstream: String) -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    type Forwarded = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = seen.clone();
    let forward: hyper_util::client::legacy::Client<_, http_body_util::Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (forward, state, upstream) = (forward.clone(), state.clone(), upstream.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let (forward, state, upstream) =
                        (forward.clone(), state.clone(), upstream.clone());
                    async move {
                        let accept = request
                            .headers()
                            .get("accept")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        let path = request.uri().path().to_string();
                        state
                            .lock()
                            .expect("lock")
                            .push((format!("{} {path}", request.method()), accept.clone()));
                        if path.contains("/configmaps") && accept.contains("protobuf") {
                            let status = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"only the following media types are accepted: application/json, application/yaml","reason":"NotAcceptable","code":406}"#;
                            let refused: Forwarded = http_body_util::Full::new(Bytes::from(status))
                                .map_err(|never| match never {})
                                .boxed();
                            return Ok::<_, hyper_util::client::legacy::Error>(
                                Response::builder()
                                    .status(406)
                                    .header("content-type", "application/json")
                                    .body(refused)
                                    .expect("response"),
                            );
                        }
                        let (mut parts, body) = request.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let target = format!(
                            "{upstream}{}",
                            parts
                                .uri
                                .path_and_query()
                                .map(|p| p.as_str())
                                .unwrap_or("/")
                        );
                        parts.uri = target.parse().expect("upstream uri");
                        parts.headers.remove(http::header::HOST);
                        let answer = forward
                            .request(Request::from_parts(parts, http_body_util::Full::new(body)))
                            .await?;
                        Ok(answer.map(|body| body.boxed()))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                .await;
            });
        }
    });
    (url, seen)
}

/// On the embedded server (behind a front that refuses protobuf answers for configmaps, see
/// [`refusing_front`]): the first read is refused and asked again in JSON, and from then on the
/// client reads configmaps in JSON at once (get, list, watch, another namespace's `Api`), decoding
/// the server's real answers; pods, which the server answers in protobuf, still ask for it.
#[tokio::test]
async fn protobuf_refused_reads_are_remembered_against_the_embedded_server() {
    let server = ferrokube_apiserver::ApiServer::new()
        .start()
        .await
        .expect("server starts");
    let (url, seen) = refusing_front(server.url().to_string()).await;
    let client = Client::new(config(&url)).expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = ConfigMap {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("a".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    // Made straight on the server, not through the front.
    let direct: Api<ConfigMap> = Api::namespaced(
        Client::new(config(server.url())).expect("client"),
        "default",
    );
    direct
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let got = cms.get("a").await.expect("get, refused then JSON");
    assert_eq!(got.metadata.name.as_deref(), Some("a"));
    assert!(!cms.reads_protobuf() && cms.writes_protobuf());
    let listed = cms.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    let mut watch = cms
        .watch(&WatchParams::default(), listed.resource_version())
        .await
        .expect("watch");
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    other
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some("b".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("a second create, its answer in JSON");
    let event = watch.next().await.expect("an event").expect("decoded");
    assert!(matches!(event, WatchEvent::Added(_)), "{event:?}");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    assert!(pods.list(&ListParams::default()).await.is_ok());
    let seen = seen.lock().expect("lock").clone();
    let asked: Vec<(&str, &str)> = seen
        .iter()
        .map(|(request, accept)| {
            let accept = if accept.contains("protobuf") {
                "protobuf"
            } else {
                "json"
            };
            (request.as_str(), accept)
        })
        .collect();
    let collection = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        asked,
        [
            (format!("GET {collection}/a").as_str(), "protobuf"),
            (format!("GET {collection}/a").as_str(), "json"),
            (format!("GET {collection}").as_str(), "json"),
            (format!("GET {collection}").as_str(), "json"),
            (format!("POST {collection}").as_str(), "json"),
            ("GET /api/v1/namespaces/default/pods", "protobuf"),
        ]
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).expect("to a Vec");
    encoder.finish().expect("to a Vec")
}

/// A `Content-Encoding: gzip` answer whose compressed bytes come in pieces of `piece`.
fn gzipped(compressed: Vec<u8>, piece: usize) -> Response<Body> {
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = compressed
        .chunks(piece)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
            frames,
        ))))
        .expect("response")
}

fn big_list(items: usize) -> String {
    let items: Vec<String> = (0..items)
        .map(|i| {
            format!(
                r#"{{"metadata":{{"name":"cm-{i:05}","namespace":"ns","resourceVersion":"{i}"}},"data":{{"k":"v"}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#,
        items.join(",")
    )
}

#[tokio::test]
async fn gzip_list_and_watch_bodies_are_asked_for_and_inflated_as_they_stream() {
    let (url, seen) = serve(|n, _| match n {
        0 => gzipped(gzip(big_list(3_000).as_bytes()), 997),
        // A streaming list's shape: one gzip member per flush, back to back.
        _ => {
            let mut body = gzip(
                br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"6"}}}
{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}
"#,
            );
            body.extend(gzip(
                br#"{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"8"}}}
"#,
            ));
            gzipped(body, 7)
        }
    })
    .await;
    let api = api(config(&url));
    let list = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 3_000);
    assert_eq!(list.items[2_999].metadata.name.as_deref(), Some("cm-02999"));
    let mut stream = api
        .watch(&WatchParams::default(), "5")
        .await
        .expect("watch opens");
    let mut versions = Vec::new();
    while let Some(item) = stream.next().await {
        let event = item.expect("a valid event");
        versions.push(match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                o.metadata.resource_version.unwrap_or_default()
            }
            _ => "other".to_string(),
        });
    }
    assert_eq!(versions, ["6", "7", "8"]);
    let seen = seen.lock().expect("lock");
    for headers in &seen.headers {
        assert_eq!(headers["accept-encoding"], "gzip", "as client-go asks");
    }
}

#[tokio::test]
async fn gzip_corrupt_or_truncated_body_is_a_decompress_error() {
    let (url, _) = serve(|n, _| {
        let whole = gzip(big_list(500).as_bytes());
        let mut bad = whole.clone();
        match n {
            0 => bad.truncate(whole.len() - 5),
            // The trailer's CRC-32: the JSON inflates whole, the check at the end fails.
            1 => {
                let at = bad.len() - 8;
                bad[at] ^= 0xff;
            }
            // Bits flipped mid-stream: whichever notices first, the inflater or the JSON decoder.
            _ => {
                let at = bad.len() / 2;
                bad[at] ^= 0x55;
                bad[at + 1] ^= 0xaa;
            }
        }
        gzipped(bad, 100)
    })
    .await;
    let api = api(config(&url));
    for case in ["truncated", "wrong CRC"] {
        match api.list(&ListParams::default()).await {
            Err(Error::Decompress { .. }) => {}
            other => panic!("{case}: expected a decompress error, got {other:?}"),
        }
    }
    match api.list(&ListParams::default()).await {
        Err(Error::Decompress { .. } | Error::Decode { .. }) => {}
        other => panic!("flipped bits: expected a typed error, got {other:?}"),
    }
}

#[tokio::test]
async fn gzip_not_asked_for_with_disable_compression() {
    let (url, seen) = serve(|_, _| respond(200, LIST)).await;
    let mut config = config(&url);
    config.disable_compression = true;
    api(config)
        .list(&ListParams::default())
        .await
        .expect("list");
    assert!(!seen.lock().expect("lock").headers[0].contains_key("accept-encoding"));
}
