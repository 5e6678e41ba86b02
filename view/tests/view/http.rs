//! The live view over HTTP: a `LiveView` fed by synthetic pipeline events, served on a loopback
//! port, and every route asked once by a plain hyper client.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use ferrokube_view::ActionInfo;
use ferrokube_view::ActionOutcome;
use ferrokube_view::EventsPage;
use ferrokube_view::KeyStory;
use ferrokube_view::LiveView;
use ferrokube_view::Snapshot;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tracing_subscriber::prelude::*;

/// What one request got back.
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

impl Answer {
    fn json<T: serde::de::DeserializeOwned>(&self) -> T {
        match serde_json::from_str(&self.body) {
            Ok(value) => value,
            Err(error) => panic!("not the expected JSON ({error}): {}", self.body),
        }
    }
}

/// Sends one request on a fresh connection.
async fn ask(addr: SocketAddr, method: &str, path: &str) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("connect to the view");
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .expect("a valid request");
    let response = sender.send_request(request).await.expect("an answer");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the whole body")
        .to_bytes();
    Answer {
        status,
        content_type,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Three events of one key's story: queued, a request made by its reconcile, done.
fn emit_a_story() {
    tracing::trace!(target: "ferrokube_pipeline", stage = "queue", op = "add", instance = "rs", key = ?"ns/a", state = "queued", depth = 1u64);
    let reconcile = tracing::info_span!("reconcile", controller = "rs", key = %"ns/a");
    reconcile.in_scope(|| {
        tracing::trace!(target: "ferrokube_pipeline", stage = "client", op = "request", verb = "POST", path = "/api/v1/namespaces/ns/pods", status = 201u64, wait_ms = 40u64, duration_ms = 3u64, state = "done");
    });
    tracing::trace!(target: "ferrokube_pipeline", stage = "queue", op = "done", instance = "rs", key = ?"ns/a", state = "gone", depth = 0u64);
}

#[tokio::test]
async fn the_view_serves_its_page_data_actions_docs_and_tour() {
    let pressed = Arc::new(AtomicUsize::new(0));
    let counter = pressed.clone();
    let view = LiveView::new()
        .ring_capacity(100)
        .action("poke", "Poke it", move || {
            let times = counter.fetch_add(1, Ordering::SeqCst) + 1;
            format!("poked {times} time(s)")
        });
    let subscriber = tracing_subscriber::registry().with(view.layer());
    tracing::subscriber::with_default(subscriber, emit_a_story);
    let server = view.serve().await.expect("the view starts");
    let addr = server.addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);

    let page = ask(addr, "GET", "/").await;
    assert_eq!(page.status, 200);
    assert!(page.content_type.starts_with("text/html"));
    for needle in [
        "id=\"pipeline\"",
        "data-stage=\"reconcile\"",
        "id=\"queue-delayed\"",
        "id=\"step\"",
    ] {
        assert!(page.body.contains(needle), "the page lacks {needle}");
    }

    let snapshot: Snapshot = ask(addr, "GET", "/api/snapshot").await.json();
    assert_eq!(snapshot.seq, 3);
    // The queue's slot for ns/a is gone; the keyless client request stays.
    assert_eq!(snapshot.records.len(), 1);
    assert_eq!(snapshot.records[0].stage, "client");
    assert_eq!(snapshot.records[0].cause.as_deref(), Some("ns/a"));
    assert_eq!(snapshot.counts["queue"], 2);
    assert_eq!(snapshot.totals_ms["client"]["wait_ms"], 40);

    let events: EventsPage = ask(addr, "GET", "/api/events?after=0").await.json();
    assert!(!events.gap);
    assert_eq!(events.last_seq, 3);
    let seqs: Vec<u64> = events.records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    assert_eq!(events.records[0].key.as_deref(), Some("ns/a"));
    let later: EventsPage = ask(addr, "GET", "/api/events?after=2&limit=5").await.json();
    assert_eq!(later.records.len(), 1);
    assert_eq!(ask(addr, "GET", "/api/events?after=x").await.status, 400);

    let story: KeyStory = ask(addr, "GET", "/api/follow?key=ns%2Fa").await.json();
    assert_eq!(story.key, "ns/a");
    assert_eq!(
        story.records.len(),
        3,
        "the request its reconcile made is in the story"
    );
    assert_eq!(ask(addr, "GET", "/api/follow").await.status, 400);

    let actions: Vec<ActionInfo> = ask(addr, "GET", "/api/actions").await.json();
    assert_eq!(
        actions,
        vec![ActionInfo {
            id: "poke".into(),
            label: "Poke it".into()
        }]
    );
    let outcome: ActionOutcome = ask(addr, "POST", "/api/actions/poke").await.json();
    assert_eq!(outcome.result, "poked 1 time(s)");
    assert_eq!(pressed.load(Ordering::SeqCst), 1);
    assert_eq!(ask(addr, "POST", "/api/actions/nope").await.status, 404);
    assert_eq!(ask(addr, "GET", "/api/actions/poke").await.status, 405);
    assert_eq!(pressed.load(Ordering::SeqCst), 1);

    let doc = ask(addr, "GET", "/doc/workqueue/src/queue.rs").await;
    assert_eq!(doc.status, 200);
    assert!(doc.body.starts_with("[`WorkQueue`]"), "{}", doc.body);
    assert!(!doc.body.contains("//!"));
    assert_eq!(ask(addr, "GET", "/doc/Cargo.toml").await.status, 404);

    let tour = ask(addr, "GET", "/tour").await;
    assert_eq!(tour.status, 200);
    assert!(tour.body.starts_with("# Follow one event"));

    assert_eq!(ask(addr, "GET", "/nowhere").await.status, 404);

    server.stop().await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "a stopped view no longer listens"
    );
}
