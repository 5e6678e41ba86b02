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
//!  read_response(&mut stream) ─▶ one whole response on a connection kept alive
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

/// Reads one whole HTTP/1.1 response from a connection kept alive (its head, then its body by
/// `Content-Length` or to the last chunk); the response as text. An error if the connection ends
/// first.
pub async fn read_response(stream: &mut TcpStream) -> io::Result<String> {
    let mut all = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        if let Some(length) = response_length(&all) {
            if all.len() >= length {
                return Ok(String::from_utf8_lossy(&all).into_owned());
            }
        }
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection ended before its response did",
            ));
        }
        all.extend_from_slice(&buffer[..read]);
    }
}

/// The length of the whole response `bytes` begin with, once its head is in: head plus
/// `Content-Length`, or, for a chunked body, up to the end of the last chunk once it is in.
fn response_length(bytes: &[u8]) -> Option<usize> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_ascii_lowercase();
    let header = |name: &str| {
        head.lines()
            .find_map(|line| line.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    if let Some(length) = header("content-length:").and_then(|v| v.parse::<usize>().ok()) {
        return Some(head_end + length);
    }
    if header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        let body = &bytes[head_end..];
        return body
            .windows(5)
            .position(|w| w == b"0\r\n\r\n")
            .map(|at| head_end + at + 5);
    }
    Some(head_end)
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
