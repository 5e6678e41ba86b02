//! Hostile connections on the embedded server's listening socket: a slow loris is closed by the
//! header-read timeout, and a flood of connections past the cap cannot keep a well-behaved
//! request out (`apiserver/src/http/limits.rs`). Every wait is on a condition (the socket
//! closing, an answer arriving) bounded by a time limit, never a sleep.

use std::time::{Duration, Instant};

use ferrokube_apiserver::ApiServer;
use ferrokube_listen::slow_client::{
    closes_within, hold_partial_requests, read_response, status_line,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn addr(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

/// A GET of `/version` on a fresh connection; its status line.
async fn get_version(addr: &str) -> String {
    status_line(addr, "/version").await.expect("asks")
}

/// Half a request line, then nothing: closed once the header-read timeout has passed, not before
/// (today's server held it for ever).
#[tokio::test]
async fn connection_abuse_half_a_request_line_is_closed_after_the_header_read_timeout() {
    let timeout = Duration::from_millis(300);
    let server = ApiServer::new()
        .header_read_timeout(Some(timeout))
        .start()
        .await
        .expect("server starts");
    let addr = addr(server.url());
    for partial in ["GET /api/v1/namesp", "PRI * HTTP/2", ""] {
        let mut stream = TcpStream::connect(&addr).await.expect("connect");
        let started = Instant::now();
        stream.write_all(partial.as_bytes()).await.expect("send");
        let closed = closes_within(&mut stream, Duration::from_secs(10)).await;
        let after = started.elapsed();
        assert!(
            closed,
            "a connection that sent {partial:?} is still open 10 s later"
        );
        assert!(
            after >= timeout,
            "closed after {after:?}, before the header-read timeout ({timeout:?})"
        );
    }
    // A whole request is answered as before.
    assert!(get_version(&addr).await.contains("200"));
}

/// A server with these timeouts, and a connection to it kept alive after one GET of `/version`
/// (answered 200); the request, to send again.
async fn kept_alive(
    header_read: Duration,
    idle: Duration,
) -> (ferrokube_apiserver::RunningServer, TcpStream, String) {
    let server = ApiServer::new()
        .header_read_timeout(Some(header_read))
        .idle_timeout(Some(idle))
        .start()
        .await
        .expect("server starts");
    let addr = addr(server.url());
    let mut stream = TcpStream::connect(&addr).await.expect("connect");
    let request = format!("GET /version HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let answer = read_response(&mut stream).await.expect("the first answer");
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the first request is answered: {answer}"
    );
    (server, stream, request)
}

/// Between requests on a kept-alive HTTP/1.1 connection, a next head that begins and then
/// trickles is closed by the header-read timeout, counted from its first byte (Go's
/// `ReadHeaderTimeout`), well before the idle timeout.
#[tokio::test]
async fn connection_abuse_a_kept_alive_connection_trickling_its_next_head_is_closed() {
    let timeout = Duration::from_millis(300);
    let (_server, mut stream, _) = kept_alive(timeout, Duration::from_secs(600)).await;
    stream.write_all(b"GET /vers").await.expect("send");
    let started = Instant::now();
    assert!(
        closes_within(&mut stream, Duration::from_secs(10)).await,
        "a trickling next head is still held 10 s later"
    );
    assert!(started.elapsed() >= timeout, "closed before the timeout");
}

/// An HTTP/1.1 keep-alive connection waiting for its next request is held for the idle timeout
/// (kube-apiserver: `IdleTimeout`, 90 s), not the header-read timeout (32 s), which counts only
/// once a next head has begun: open well past the header-read timeout, closed after the idle one.
#[tokio::test]
async fn connection_abuse_fidelity_an_idle_keep_alive_connection_lasts_the_idle_timeout() {
    let (header_read, idle) = (Duration::from_millis(200), Duration::from_millis(1500));
    let (_server, mut stream, request) = kept_alive(header_read, idle).await;
    assert!(
        !closes_within(&mut stream, header_read * 4).await,
        "closed at the header-read timeout, not the idle one"
    );
    // Still usable: a second request on the same connection is answered. The idle time counts
    // from the server's end of the answer, a moment before the client has it: measured from the
    // request's sending, a close before the idle timeout cannot pass unseen.
    let sent = Instant::now();
    stream.write_all(request.as_bytes()).await.expect("send");
    let again = read_response(&mut stream).await.expect("a second answer");
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    assert!(
        closes_within(&mut stream, Duration::from_secs(10)).await,
        "the idle connection is closed"
    );
    assert!(
        sent.elapsed() >= idle,
        "closed {:?} after the request, before the idle timeout ({idle:?})",
        sent.elapsed()
    );
}

/// The defaults are kube-apiserver's (k8s.io/apiserver 1.37.2 `pkg/server/secure_serving.go`:
/// `IdleTimeout: 90 * time.Second`, `ReadHeaderTimeout: 32 * time.Second`).
#[test]
fn connection_abuse_fidelity_default_timeouts_are_kube_apiservers() {
    assert_eq!(
        ferrokube_apiserver::http::DEFAULT_IDLE_TIMEOUT,
        Duration::from_secs(90)
    );
    assert_eq!(
        ferrokube_apiserver::http::DEFAULT_HEADER_READ_TIMEOUT,
        Duration::from_secs(32)
    );
}

/// Past the cap, connections that hold a slot without a request are closed, oldest first, and a
/// well-behaved request still gets its answer.
#[tokio::test]
async fn connection_abuse_connections_past_the_cap_close_the_oldest_and_a_request_is_answered() {
    let cap = 8;
    let server = ApiServer::new()
        // The cap, not the timeout, must close them.
        .header_read_timeout(None)
        .max_connections(cap)
        .start()
        .await
        .expect("server starts");
    let addr = addr(server.url());
    let mut flood = hold_partial_requests(addr.as_str(), cap * 4, b"GET /ver")
        .await
        .expect("the flood connects");
    // The newest connection gets its answer.
    let status = tokio::time::timeout(Duration::from_secs(10), get_version(&addr))
        .await
        .expect("an answer over the cap within 10 s");
    assert!(status.contains("200"), "answered over the cap: {status}");
    // All but the newest `cap - 1` of the flood were closed to make room.
    let mut closed = 0;
    for stream in flood.iter_mut().take(cap * 3) {
        if closes_within(stream, Duration::from_secs(10)).await {
            closed += 1;
        }
    }
    assert_eq!(
        closed,
        cap * 3,
        "the oldest connections over the cap are closed"
    );
}

/// At the cap with every connection answering (a watch each, a request in flight for ever), a
/// new connection is still served: the busy connection that moved no byte for the longest is cut.
#[tokio::test]
async fn connection_abuse_at_the_cap_with_every_connection_busy_one_is_cut() {
    let cap = 4;
    let server = ApiServer::new()
        .max_connections(cap)
        .start()
        .await
        .expect("server starts");
    let addr = addr(server.url());
    let mut watches = Vec::new();
    for _ in 0..cap {
        let mut stream = TcpStream::connect(&addr).await.expect("connect");
        let request = format!(
            "GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: {addr}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("send");
        // The watch's response head: its request is in flight from now on.
        let mut head = Vec::new();
        let mut buffer = [0u8; 1024];
        while !String::from_utf8_lossy(&head).contains("\r\n\r\n") {
            let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
                .await
                .expect("the watch answers within 10 s")
                .expect("read");
            assert!(read > 0, "the watch connection closed early");
            head.extend_from_slice(&buffer[..read]);
        }
        assert!(String::from_utf8_lossy(&head).starts_with("HTTP/1.1 200"));
        watches.push(stream);
    }
    let status = tokio::time::timeout(Duration::from_secs(10), get_version(&addr))
        .await
        .expect("an answer at the cap within 10 s");
    assert!(status.contains("200"), "answered at the cap: {status}");
    // One watch (the first: no byte moved since its head, like the others, and it is the oldest
    // to have stopped moving) was cut to make room.
    let cut = closes_within(&mut watches[0], Duration::from_secs(10)).await;
    assert!(cut, "a busy connection was cut to admit the new one");
}
