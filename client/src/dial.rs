//! A custom way to open the client's connections: the seam for in-memory transports.
//!
//! By default the client opens a TCP connection to the host and port of
//! [`Config::cluster_url`](crate::Config::cluster_url) (through the cluster's proxy, if any).
//! A [`Dial`] set on [`Config::dial`](crate::Config::dial) replaces that step: each time the
//! connection pool needs a new connection, the client calls the dial function with the server's
//! URI and speaks HTTP over whatever byte stream it returns. Everything above the connection
//! stays as it is: TLS (for an `https://` URL, on top of the stream), the pool, timeouts, retries,
//! the rate limiter, write gates.
//!
//! ```text
//!  pool needs a connection ──▶ Dial(uri) ──▶ any AsyncRead + AsyncWrite (a tokio duplex pipe, a
//!                                            Unix socket, a recording tap, ...)
//!                              └─ instead of TCP (and of the proxy tunnel, which is not used)
//! ```
//!
//! The use this seam was made for is a test that runs the client and an embedded API server in
//! one process with no socket between them (`ferrokube-explore`): the dial function makes a
//! [`tokio::io::duplex`] pipe, hands one end to the server and returns the other. With no socket
//! the operating system has no say in when bytes arrive, so a run on a single-threaded runtime
//! with a paused clock is repeatable.
//!
//! ```
//! use ferrokube_client::{Config, client::Dial};
//!
//! let dial = Dial::new(|_uri| {
//!     Box::pin(async {
//!         let (ours, _theirs) = tokio::io::duplex(64 * 1024);
//!         // ... hand `_theirs` to a server here ...
//!         Ok(Box::new(ours) as ferrokube_client::client::DialedStream)
//!     })
//! });
//! let config = Config::new("http://in-memory".parse()?).with_dial(dial);
//! # Ok::<(), http::uri::InvalidUri>(())
//! ```
//!
//! The dial function is bounded like a TCP connect: it must return within
//! `connect_timeout + tls_handshake_timeout` (see [`Config`](crate::Config)).

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A byte stream a [`Dial`] returns: anything readable and writable that can move between tasks.
pub trait DialIo: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> DialIo for T {}

/// The stream of one dialed connection.
pub type DialedStream = Box<dyn DialIo>;

/// What a dial function returns: a future of the connection's stream.
pub type DialFuture = Pin<Box<dyn Future<Output = io::Result<DialedStream>> + Send>>;

/// A function that opens a connection to the API server (see the [module docs](self)). Cheap to
/// clone: clones share the function.
#[derive(Clone)]
pub struct Dial(Arc<dyn Fn(&http::Uri) -> DialFuture + Send + Sync>);

impl Dial {
    /// A dial from `open`, called with the server's URI (scheme, host, port) for each new
    /// connection.
    pub fn new(open: impl Fn(&http::Uri) -> DialFuture + Send + Sync + 'static) -> Dial {
        Dial(Arc::new(open))
    }

    /// Opens one connection.
    pub(crate) fn open(&self, uri: &http::Uri) -> DialFuture {
        (self.0)(uri)
    }
}

impl fmt::Debug for Dial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Dial(..)")
    }
}

/// A connection the client opened: a TCP socket (direct or tunnelled) or a dialed stream.
pub(crate) enum Conn {
    Tcp(TokioIo<TcpStream>),
    Dialed(TokioIo<DialedStream>),
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        match self {
            Conn::Tcp(tcp) => tcp.connected(),
            Conn::Dialed(_) => Connected::new(),
        }
    }
}

impl hyper::rt::Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Conn::Dialed(dialed) => Pin::new(dialed).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Conn::Dialed(dialed) => Pin::new(dialed).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(tcp) => Pin::new(tcp).poll_flush(cx),
            Conn::Dialed(dialed) => Pin::new(dialed).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Tcp(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Conn::Dialed(dialed) => Pin::new(dialed).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Tcp(tcp) => tcp.is_write_vectored(),
            Conn::Dialed(dialed) => dialed.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Tcp(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Conn::Dialed(dialed) => Pin::new(dialed).poll_write_vectored(cx, bufs),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::{Client, Config};

    /// Answers one HTTP/1.1 request on `stream` with `body`, and returns the request's head.
    async fn answer_once(mut stream: tokio::io::DuplexStream, body: &str) -> String {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        String::from_utf8_lossy(&head).into_owned()
    }

    #[tokio::test]
    async fn requests_go_over_the_dialed_stream_and_nothing_else() {
        let dials = Arc::new(AtomicUsize::new(0));
        let (heads_tx, mut heads) = tokio::sync::mpsc::unbounded_channel();
        let dial = {
            let dials = dials.clone();
            Dial::new(move |uri| {
                assert_eq!(uri.host(), Some("nowhere.invalid"));
                dials.fetch_add(1, Ordering::SeqCst);
                let (ours, theirs) = tokio::io::duplex(4096);
                let heads_tx = heads_tx.clone();
                tokio::spawn(async move {
                    let head = answer_once(theirs, r#"{"major":"1","minor":"37"}"#).await;
                    let _ = heads_tx.send(head);
                });
                Box::pin(async move { Ok(Box::new(ours) as DialedStream) })
            })
        };
        // A host that resolves nowhere: only the dial can reach the "server".
        let config = Config::new("http://nowhere.invalid:6443".parse().unwrap()).with_dial(dial);
        assert!(format!("{config:?}").contains("Dial(..)"));
        let client = Client::new(config).unwrap();
        let call = crate::client::Call {
            request: http::Request::get("/version")
                .body(bytes::Bytes::new())
                .unwrap(),
            idempotent: true,
            streaming: false,
        };
        let version: serde_json::Value = client.request(call).await.unwrap();
        assert_eq!(version["minor"], "37");
        assert_eq!(dials.load(Ordering::SeqCst), 1);
        let head = heads.recv().await.unwrap();
        assert!(head.starts_with("GET /version HTTP/1.1\r\n"), "{head}");
    }

    #[tokio::test]
    async fn a_failed_dial_is_a_transport_error() {
        let dial = Dial::new(|_uri| {
            Box::pin(async {
                Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "no server in this test",
                ))
            })
        });
        let mut config = Config::new("http://nowhere.invalid".parse().unwrap()).with_dial(dial);
        config.retry.max_retries = 0;
        let client = Client::new(config).unwrap();
        let call = crate::client::Call {
            request: http::Request::get("/version")
                .body(bytes::Bytes::new())
                .unwrap(),
            idempotent: true,
            streaming: false,
        };
        let error = client.request_bytes(call).await.unwrap_err();
        assert!(matches!(error, crate::Error::Transport { .. }), "{error:?}");
    }
}
