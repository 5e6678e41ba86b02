//! Hostile connections on the live view (`view/src/limits.rs`): a slow loris is closed by the
//! header-read timeout, and connections past the cap close the oldest held ones while a
//! well-behaved request still gets its answer. Waits are on the socket closing or an answer
//! arriving, each bounded; no sleeps.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferrokube_listen::slow_client::{closes_within, hold_partial_requests, status_line};
use ferrokube_view::LiveView;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn status_of_api_actions(addr: SocketAddr) -> String {
    status_line(addr, "/api/actions").await.expect("asks")
}

#[tokio::test]
async fn view_connection_abuse_half_a_request_line_is_closed_after_the_header_read_timeout() {
    let timeout = Duration::from_millis(300);
    let server = LiveView::new()
        .header_read_timeout(Some(timeout))
        .serve()
        .await
        .expect("the view serves");
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    let started = Instant::now();
    stream.write_all(b"GET /api/acti").await.expect("send");
    let closed = closes_within(&mut stream, Duration::from_secs(10)).await;
    assert!(closed, "a half request line is still held 10 s later");
    assert!(started.elapsed() >= timeout, "closed before the timeout");
    assert!(status_of_api_actions(server.addr()).await.contains("200"));
}

#[tokio::test]
async fn view_connection_abuse_connections_past_the_cap_close_the_oldest_and_a_request_is_answered()
{
    let cap = 4;
    let server = LiveView::new()
        .header_read_timeout(None)
        .max_connections(cap)
        .serve()
        .await
        .expect("the view serves");
    let mut flood = hold_partial_requests(server.addr(), cap * 3, b"GET /api/ac")
        .await
        .expect("the flood connects");
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        status_of_api_actions(server.addr()),
    )
    .await
    .expect("an answer over the cap within 10 s");
    assert!(status.contains("200"), "answered over the cap: {status}");
    for (at, stream) in flood.iter_mut().take(cap * 2).enumerate() {
        assert!(
            closes_within(stream, Duration::from_secs(10)).await,
            "flood connection {at} (of the oldest) is closed to make room"
        );
    }
}
