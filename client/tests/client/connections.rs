//! Connection lifetimes on both ends: the client's pool keeps at most
//! `Config::max_idle_conns_per_host` idle connections and closes idle ones after
//! `Config::idle_conn_timeout`; dropping an embedded `RunningServer` closes the keep-alive
//! connections clients still hold to it.
//!
//! Every wait is on a condition, bounded by `LIMIT`; nothing sleeps for a fixed time.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::Config;
use ferrokube_client::api::WatchParams;
use futures_util::StreamExt;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::{Semaphore, watch};

/// The bound of every wait in this file.
const LIMIT: Duration = Duration::from_secs(10);

/// A server that counts its open connections and holds each request until `release` has a
/// permit for it, so a test can make the client open many connections at once.
struct CountingServer {
    url: String,
    /// Connections open right now, as the server sees them.
    open: watch::Receiver<usize>,
    /// Connections accepted so far.
    accepted: watch::Receiver<usize>,
    /// Requests wait here for a permit before they are answered.
    release: Arc<Semaphore>,
}

async fn counting_server() -> CountingServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let (open_tx, open) = watch::channel(0usize);
    let (accepted_tx, accepted) = watch::channel(0usize);
    let release = Arc::new(Semaphore::new(0));
    let gate = release.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            open_tx.send_modify(|n| *n += 1);
            accepted_tx.send_modify(|n| *n += 1);
            let open_tx = open_tx.clone();
            let gate = gate.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_: Request<Incoming>| {
                    let gate = gate.clone();
                    async move {
                        if let Ok(permit) = gate.acquire().await {
                            permit.forget();
                        }
                        let body =
                            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}"#;
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                            body.as_bytes(),
                        ))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
                open_tx.send_modify(|n| *n -= 1);
            });
        }
    });
    CountingServer {
        url,
        open,
        accepted,
        release,
    }
}

/// Waits, at most `LIMIT`, until `condition` holds for the watched value; fails the test with
/// `what` and the last value otherwise.
async fn wait_until(
    value: &mut watch::Receiver<usize>,
    what: &str,
    condition: impl Fn(usize) -> bool,
) {
    let reached = tokio::time::timeout(LIMIT, value.wait_for(|n| condition(*n)))
        .await
        .is_ok_and(|changed| changed.is_ok());
    assert!(reached, "{what}: still {} after {LIMIT:?}", *value.borrow());
}

fn client(url: &str, config: impl FnOnce(Config) -> Config) -> Api<ConfigMap> {
    let mut base = Config::new(url.parse().expect("url"));
    base.qps = None;
    Api::namespaced(Client::new(config(base)).expect("client"), "default")
}

#[test]
fn defaults_are_client_go_s() {
    let config = Config::new("http://127.0.0.1:1".parse().expect("url"));
    assert_eq!(config.max_idle_conns_per_host, 25);
    assert_eq!(config.idle_conn_timeout, Some(Duration::from_secs(90)));
    let tuned = config
        .with_max_idle_conns_per_host(3)
        .with_idle_conn_timeout(None);
    assert_eq!(
        (tuned.max_idle_conns_per_host, tuned.idle_conn_timeout),
        (3, None)
    );
}

/// Six requests at once open six connections; once answered, the pool keeps two and the server
/// sees the other four closed.
#[tokio::test]
async fn the_pool_keeps_at_most_the_cap_of_idle_connections() {
    let mut server = counting_server().await;
    let api = client(&server.url, |c| c.with_max_idle_conns_per_host(2));
    let requests: Vec<_> = (0..6)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move { api.get("a").await })
        })
        .collect();
    wait_until(&mut server.open, "connections opened by the burst", |n| {
        n == 6
    })
    .await;
    server.release.add_permits(6);
    for request in requests {
        request.await.expect("task").expect("get");
    }
    wait_until(&mut server.open, "idle connections kept", |n| n <= 2).await;
    assert_eq!(*server.accepted.borrow(), 6);

    // The two kept ones are reused: two more requests open no connection.
    server.release.add_permits(2);
    for _ in 0..2 {
        api.get("a").await.expect("get");
    }
    assert_eq!(*server.accepted.borrow(), 6, "kept connections were reused");
}

/// An idle connection is closed by the client once `idle_conn_timeout` has passed.
#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let mut server = counting_server().await;
    let api = client(&server.url, |c| {
        c.with_idle_conn_timeout(Some(Duration::from_millis(200)))
    });
    server.release.add_permits(1);
    api.get("a").await.expect("get");
    wait_until(
        &mut server.open,
        "idle connections after the timeout",
        |n| n == 0,
    )
    .await;
}

/// One HTTP/1.1 connection to `url`, driven by its own task: the task ends when the connection
/// is closed (by either side), which is what the tests below wait for.
async fn raw_connection(
    url: &str,
) -> (
    hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    tokio::task::JoinHandle<Result<(), hyper::Error>>,
) {
    let address = url.trim_start_matches("http://");
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    (sender, tokio::spawn(connection))
}

async fn get(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    path: &str,
) -> Bytes {
    let request = Request::get(path)
        .header("host", "localhost")
        .body(Empty::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    assert!(response.status().is_success(), "{}", response.status());
    response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
}

/// A client holds an idle keep-alive connection (its request answered, the connection open for
/// the next); dropping the server closes it.
#[tokio::test]
async fn dropping_the_server_closes_idle_keep_alive_connections() {
    let server = ApiServer::new().start().await.expect("server");
    let (mut sender, connection) = raw_connection(server.url()).await;
    get(&mut sender, "/version").await;
    get(&mut sender, "/api/v1/namespaces/default/configmaps").await;
    assert!(sender.is_ready(), "the connection is idle and reusable");
    assert!(!connection.is_finished());

    drop(server);
    let closed = tokio::time::timeout(LIMIT, connection).await;
    assert!(
        closed.is_ok(),
        "the idle connection is still open {LIMIT:?} after the server was dropped"
    );
}

/// A watch in progress when the server is dropped ends, and its connection is closed too.
#[tokio::test]
async fn dropping_the_server_ends_watches_and_closes_their_connections() {
    let server = ApiServer::new().start().await.expect("server");
    let (mut sender, connection) = raw_connection(server.url()).await;
    let request = Request::get("/api/v1/namespaces/default/configmaps?watch=1")
        .header("host", "localhost")
        .body(Empty::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("watch");
    assert!(response.status().is_success());

    // And a pooled client's watch through the same server, ended the same way.
    let api = client(server.url(), |c| c);
    let mut events = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("client watch");

    drop(server);
    let body = tokio::time::timeout(LIMIT, response.into_body().collect()).await;
    assert!(body.is_ok(), "the watch body did not end");
    let closed = tokio::time::timeout(LIMIT, connection).await;
    assert!(closed.is_ok(), "the watch's connection is still open");
    let ended = tokio::time::timeout(LIMIT, async {
        while let Some(event) = events.next().await {
            if event.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the client's watch did not end");
}
