//! Hostile connections on the live view (`view/src/limits.rs`): a slow loris is closed by the
//! header-read timeout, and connections past the cap close the oldest held ones while a
//! well-behaved request still gets its answer. Waits are on the socket closing or an answer
//! arriving, each bounded; no sleeps.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferrokube_view::LiveView;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the view closes the connection; the bytes read.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return all,
            Ok(read) => all.extend_from_slice(&buffer[..read]),
        }
    }
}

async fn status_of_api_actions(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET /api/actions HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let answer = read_until_closed(&mut stream).await;
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
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
    let closed = tokio::time::timeout(Duration::from_secs(10), read_until_closed(&mut stream))
        .await
        .is_ok();
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
    let mut flood = Vec::new();
    for _ in 0..cap * 3 {
        let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
        stream.write_all(b"GET /api/ac").await.expect("send");
        flood.push(stream);
    }
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        status_of_api_actions(server.addr()),
    )
    .await
    .expect("an answer over the cap within 10 s");
    assert!(status.contains("200"), "answered over the cap: {status}");
    for (at, stream) in flood.iter_mut().take(cap * 2).enumerate() {
        assert!(
            tokio::time::timeout(Duration::from_secs(10), read_until_closed(stream))
                .await
                .is_ok(),
            "flood connection {at} (of the oldest) is closed to make room"
        );
    }
}
