//! # Slow and hostile clients, for the listeners' tests
//!
//! Every listener built on this crate (the embedded API server, the live view) is tested against
//! the same clients: one that sends half a request line and then nothing (a slow loris), many that
//! each hold a connection with a partial request (a flood past the cap), and a well-behaved one
//! whose answer must still arrive. Those clients live here once, behind the `test-support`
//! feature, so that each listener's tests say only what differs: which path to ask for, which
//! timeouts and caps to set. Nothing here is for production use.
//!
//! ## How data flows
//!
//! ```text
//!  hold_partial_requests(addr, n, b"GET /ver") ─▶ n TcpStreams, each with half a request sent
//!  closes_within(&mut stream, limit) ─▶ reads to EOF or reset ─▶ true if the listener closed it
//!  status_line(addr, "/version") ─▶ a whole GET with `Connection: close` on a fresh connection
//!                                   ─▶ the answer's first line ("HTTP/1.1 200 OK")
//! ```
//!
//! Every wait is on the socket (an answer, a close), bounded by the caller's limit: no sleeps.
//! Errors are returned, never unwrapped: a test names what it expected in its own `expect`.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

/// Reads until the peer closes the connection (end of stream or a reset); the bytes read.
///
/// A reset counts as a close: a listener that cuts a connection with unread input in its buffer
/// makes the kernel answer with RST, which the reader sees as an error rather than EOF.
pub async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return all,
            Ok(read) => all.extend_from_slice(&buffer[..read]),
        }
    }
}

/// Whether the peer closes `stream` within `limit` (whatever it sends before).
pub async fn closes_within(stream: &mut TcpStream, limit: Duration) -> bool {
    tokio::time::timeout(limit, read_until_closed(stream))
        .await
        .is_ok()
}

/// A GET of `path` on a fresh connection (`Connection: close`, so the answer ends with the
/// connection); the answer's status line, empty if the listener closed without answering.
pub async fn status_line(
    addr: impl ToSocketAddrs + std::fmt::Display,
    path: &str,
) -> io::Result<String> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(request.as_bytes()).await?;
    let answer = read_until_closed(&mut stream).await;
    Ok(String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Opens `count` connections, one after the other, and sends `partial` (a request cut short) on
/// each; the connections, oldest first. Each holds a slot of the listener until it is closed.
pub async fn hold_partial_requests(
    addr: impl ToSocketAddrs + Copy,
    count: usize,
    partial: &[u8],
) -> io::Result<Vec<TcpStream>> {
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(partial).await?;
        held.push(stream);
    }
    Ok(held)
}
