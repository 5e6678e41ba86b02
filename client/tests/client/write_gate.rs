//! The second look at a write gate, as a gated write leaves, whatever its body.
//!
//! A gated write asks its gate twice: before hyper gets it, and again when hyper, holding a
//! connection, first polls the request body (`RequestBody` in `client/src/client/mod.rs`). hyper's
//! HTTP/1.1 client never polls a body that says it is exactly 0 bytes long, so a bare DELETE
//! skipped the second look: the gate closing in between did not stop it, and the write never
//! counted as "left", so a DELETE abandoned mid-flight was not reported to the gate (the elector
//! could release its lease while the DELETE might still land).
//!
//! The server here is a raw TCP listener that records the bytes it receives and answers (or not)
//! as each test needs, so the test sees exactly what reached the wire. Every wait is on a
//! condition with a time limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ferrokube_client::Client;
use ferrokube_client::Config;
use ferrokube_client::client::Call;
use ferrokube_client::client::RetryPolicy;
use ferrokube_client::write_gate::NotLeader;
use ferrokube_client::write_gate::NotLeaderReason;
use ferrokube_client::write_gate::WriteGate;
use ferrokube_client::write_gate::WritePermit;
use ferrokube_testkit::lease_window::wait_until;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A gate that admits its first `open_for` asks and refuses every later one; each permit it
/// gives notes in `abandoned` when the client reports its write abandoned.
struct CountingGate {
    asked: AtomicUsize,
    open_for: usize,
    abandoned: Arc<AtomicBool>,
}

impl CountingGate {
    fn new(open_for: usize) -> Arc<CountingGate> {
        Arc::new(CountingGate {
            asked: AtomicUsize::new(0),
            open_for,
            abandoned: Arc::default(),
        })
    }
}

/// A shared gate, so the test keeps a handle on its counters.
struct Shared(Arc<CountingGate>);

impl WriteGate for Shared {
    fn admit(&self) -> Result<WritePermit, NotLeader> {
        let asked = self.0.asked.fetch_add(1, Ordering::SeqCst) + 1;
        if asked > self.0.open_for {
            return Err(NotLeader {
                lease: "default/drill".into(),
                identity: "me".into(),
                reason: NotLeaderReason::Stopped,
            });
        }
        let abandoned = self.0.abandoned.clone();
        Ok(WritePermit::untracked().on_abandon(move || abandoned.store(true, Ordering::SeqCst)))
    }
}

/// What the raw server saw on its (single) connection.
#[derive(Default)]
struct Seen {
    bytes: Mutex<Vec<u8>>,
    /// A whole request arrived: its head, and with `transfer-encoding: chunked` its last chunk.
    complete: AtomicBool,
    /// The client closed the connection.
    closed: AtomicBool,
}

impl Seen {
    fn request_is_complete(bytes: &[u8]) -> bool {
        let text = String::from_utf8_lossy(bytes).to_ascii_lowercase();
        let Some(end) = text.find("\r\n\r\n") else {
            return false;
        };
        let (head, body) = text.split_at(end + 4);
        !head.contains("transfer-encoding: chunked") || body.ends_with("0\r\n\r\n")
    }
}

/// Serves one connection: records what arrives; answers 200 to a complete request if `answer`.
async fn raw_server(answer: bool) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let seen = Arc::new(Seen::default());
    let record = seen.clone();
    tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    let complete = {
                        let mut bytes = record.bytes.lock();
                        bytes.extend_from_slice(&buffer[..read]);
                        Seen::request_is_complete(&bytes)
                    };
                    if complete && !record.complete.swap(true, Ordering::SeqCst) && answer {
                        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(reply.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                }
            }
        }
        record.closed.store(true, Ordering::SeqCst);
    });
    (url, seen)
}

fn client(url: &str, gate: &Arc<CountingGate>) -> Client {
    let mut config = Config::new(url.parse().expect("url"));
    config.retry = RetryPolicy {
        max_retries: 0,
        ..Default::default()
    };
    Client::new(config)
        .expect("client")
        .with_write_gate(Shared(gate.clone()))
}

fn bare_delete() -> Call {
    Call {
        request: http::Request::delete("/api/v1/namespaces/default/configmaps/gone")
            .body(Bytes::new())
            .expect("request"),
        idempotent: false,
        streaming: false,
    }
}

/// The gate closes between its first "yes" and the moment the DELETE leaves: the second look
/// refuses it, and the server never gets a complete request.
#[tokio::test]
async fn write_gate_abuse_a_bare_delete_is_checked_again_as_it_leaves() {
    let (url, seen) = raw_server(true).await;
    let gate = CountingGate::new(1);
    let sent = client(&url, &gate).send(bare_delete()).await;
    assert!(
        matches!(&sent, Err(error) if error.is_not_leader()),
        "the gate closed before the DELETE left: it must come back NotLeader, unsent; got {:?}",
        sent.map(|response| response.status())
    );
    assert_eq!(
        gate.asked.load(Ordering::SeqCst),
        2,
        "asked before hyper got it, and again as it left"
    );
    // The client gave the connection up; whatever reached the server by then is all there is.
    assert!(
        wait_until(Duration::from_secs(10), || seen
            .closed
            .load(Ordering::SeqCst))
        .await,
        "the client closes the connection of the refused request"
    );
    assert!(
        !seen.complete.load(Ordering::SeqCst),
        "the server must never see a complete DELETE: {:?}",
        String::from_utf8_lossy(&seen.bytes.lock())
    );
}

/// The DELETE left (the server has it whole) and its answer never comes; the caller gives it up.
/// It may still land, so its permit must hear that it was abandoned.
#[tokio::test]
async fn write_gate_abuse_an_abandoned_bare_delete_is_reported() {
    let (url, seen) = raw_server(false).await;
    let gate = CountingGate::new(usize::MAX);
    let client = client(&url, &gate);
    let delete = tokio::spawn(async move { client.send(bare_delete()).await.map(drop) });
    assert!(
        wait_until(Duration::from_secs(10), || seen
            .complete
            .load(Ordering::SeqCst))
        .await,
        "the DELETE reaches the server whole"
    );
    delete.abort();
    let _ = delete.await;
    assert!(
        gate.abandoned.load(Ordering::SeqCst),
        "a DELETE that left and was given up unanswered must be reported abandoned"
    );
}

/// An ungated bare DELETE still goes out as before: `content-length: 0`, no chunked body.
#[tokio::test]
async fn write_gate_an_ungated_bare_delete_keeps_its_empty_length() {
    let (url, seen) = raw_server(true).await;
    let sent = Client::new(Config::new(url.parse().expect("url")))
        .expect("client")
        .send(bare_delete())
        .await;
    assert!(sent.is_ok(), "answered: {:?}", sent.err());
    let head = String::from_utf8_lossy(&seen.bytes.lock()).to_ascii_lowercase();
    assert!(
        !head.contains("transfer-encoding"),
        "an ungated DELETE has no chunked body: {head}"
    );
}
