//! A TCP proxy for network drills: it forwards bytes between a client and a server on loopback,
//! and on command makes the network misbehave the way production networks do without a word:
//!
//! - [`FaultProxy::freeze`]: every connection open at that moment stops carrying bytes, in both
//!   directions, and is never closed: no FIN, no RST, what a client sees when the server's host
//!   dies or a NAT or load balancer forgets the connection. Bytes sent into a frozen connection
//!   are taken and held (a black hole; [`FaultProxy::held_bytes`] counts them), never delivered.
//!   Connections opened afterwards work, unless [`FaultProxy::black_hole`] froze those too.
//! - [`FaultProxy::delay_new_connections`]: a connection opened from then on carries nothing for
//!   the given time before it starts forwarding, so its TLS handshake (and so the request) waits:
//!   a slow connect, as behind an overloaded load balancer.
//!
//! The client's own TCP keepalive probes are answered by the proxy's kernel, as a NAT's or a
//! half-dead host's would not be: so a frozen connection is found only by the application (an
//! idle deadline, an HTTP/2 ping), which is what the drills measure.
//!
//! ```text
//!  client ──TCP──▶ FaultProxy (127.0.0.1:port) ──TCP──▶ server
//!                   per connection: two copy loops, each waits while its connection is frozen
//! ```

#![allow(dead_code)] // each test target uses its own subset

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// See the [module docs](self).
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

struct Shared {
    upstream: SocketAddr,
    /// One switch per connection ever accepted: `true` freezes it.
    connections: Mutex<Vec<watch::Sender<bool>>>,
    /// How long a new connection waits before it forwards anything.
    delay: Mutex<Duration>,
    /// Bytes taken from frozen connections and never delivered.
    held: std::sync::atomic::AtomicUsize,
    /// New connections start frozen.
    black_hole: std::sync::atomic::AtomicBool,
}

impl FaultProxy {
    /// A proxy on a free loopback port forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy binds a loopback port");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            upstream,
            connections: Mutex::new(Vec::new()),
            delay: Mutex::new(Duration::ZERO),
            held: std::sync::atomic::AtomicUsize::new(0),
            black_hole: std::sync::atomic::AtomicBool::new(false),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        FaultProxy {
            addr,
            shared,
            accept,
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `scheme://127.0.0.1:port`, for a client config.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.addr)
    }

    /// Freezes every connection open now; returns how many. (A connection stays frozen until the
    /// proxy is dropped.)
    pub fn freeze(&self) -> usize {
        let connections = self.shared.connections.lock();
        for switch in connections.iter() {
            let _ = switch.send(true);
        }
        connections.len()
    }

    /// Freezes every connection, those open now and those opened later: the server is gone
    /// without a word.
    pub fn black_hole(&self) {
        self.shared
            .black_hole
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.freeze();
    }

    /// Bytes sent into frozen connections (either way) and held, never delivered.
    pub fn held_bytes(&self) -> usize {
        self.shared.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.lock().len()
    }

    /// New connections wait `delay` before forwarding anything (`Duration::ZERO`: none).
    pub fn delay_new_connections(&self, delay: Duration) {
        *self.shared.delay.lock() = delay;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Unfrozen-by-drop is not wanted: dropping the switches ends the copy loops, closing both
        // sides.
        self.shared.connections.lock().clear();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let black_hole = shared.black_hole.load(std::sync::atomic::Ordering::SeqCst);
        let (switch, frozen) = watch::channel(black_hole);
        shared.connections.lock().push(switch);
        let delay = *shared.delay.lock();
        let upstream = shared.upstream;
        let shared = shared.clone();
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let up = copy(client_read, server_write, frozen.clone(), shared.clone());
            let down = copy(server_read, client_write, frozen, shared);
            // Either direction ending (EOF, error, the switch dropped) ends the connection.
            tokio::select! {
                () = up => {}
                () = down => {}
            }
        });
    }
}

/// Copies `from` to `to` until EOF, an error, or the switch is dropped. While the switch says
/// frozen, what arrives is read and held (counted in `Shared::held`, up to 16 MiB per direction)
/// and nothing is written: the bytes leave the sender and vanish, and nothing is closed.
async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: watch::Receiver<bool>,
    shared: Arc<Shared>,
) {
    const HOLD_AT_MOST: usize = 16 << 20;
    let mut buf = vec![0u8; 64 << 10];
    let mut held = 0usize;
    loop {
        if *frozen.borrow() && held >= HOLD_AT_MOST {
            // Full: stop reading too, and wait for the end (the proxy dropped).
            let mut frozen = frozen.clone();
            while frozen.changed().await.is_ok() {}
            return;
        }
        // (The other direction may end first; `select!` in the caller then drops both.)
        let n = match from.read(&mut buf).await {
            Ok(n) if n > 0 => n,
            // An end that arrives while frozen is held back too: the other side sees nothing.
            _ => {
                if *frozen.borrow() {
                    let mut frozen = frozen.clone();
                    while frozen.changed().await.is_ok() {}
                }
                return;
            }
        };
        if *frozen.borrow() {
            held += n;
            shared
                .held
                .fetch_add(n, std::sync::atomic::Ordering::SeqCst);
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
