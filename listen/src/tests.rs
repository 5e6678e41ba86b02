//! The cap's choice of victim, the two idle timeouts and the byte and request accounting, with
//! tokio's clock paused so that every wait is exact.

use std::future::Future;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Polls once: whether the future is ready now.
fn ready_now<F: Future>(future: F) -> bool {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    future.as_mut().poll(&mut cx).is_ready()
}

#[test]
fn at_the_cap_the_oldest_idle_connection_makes_room_not_a_busy_older_one() {
    let connections = Connections::new("test", 2);
    let first = connections.admit();
    let second = connections.admit();
    let _busy = first.start_request();
    let third = connections.admit();
    assert_eq!(connections.len(), 2);
    assert!(
        ready_now(second.close_requested()),
        "the idle connection is told to close"
    );
    assert!(
        !second.was_cut(),
        "an idle connection closes gracefully, it is not cut"
    );
    assert!(
        !ready_now(first.close_requested()),
        "the busy one stays open"
    );
    connections.forget(third.id());
    assert_eq!(connections.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn when_every_connection_is_busy_the_one_quiet_longest_is_cut() {
    let connections = Connections::new("test", 2);
    let first = connections.admit();
    tokio::time::advance(Duration::from_secs(1)).await;
    let second = connections.admit();
    let _a = first.start_request();
    let _b = second.start_request();
    // The first moves a byte after the second did: the second has been quiet longest.
    let (mut near, far) = tokio::io::duplex(64);
    let mut second_stream = second.watch(far);
    tokio::time::advance(Duration::from_secs(1)).await;
    second_stream.write_all(b"x").await.unwrap();
    let (_other, far) = tokio::io::duplex(64);
    let mut first_stream = first.watch(far);
    tokio::time::advance(Duration::from_secs(1)).await;
    first_stream.write_all(b"y").await.unwrap();
    let mut byte = [0u8; 1];
    near.read_exact(&mut byte).await.unwrap();

    let _third = connections.admit();
    assert!(ready_now(second.close_requested()));
    assert!(second.was_cut(), "a busy connection chosen is cut");
    assert!(!ready_now(first.close_requested()));
}

#[tokio::test(start_paused = true)]
async fn idle_for_counts_from_the_end_of_the_last_request_not_from_the_accept() {
    let connections = Connections::new("test", 8);
    let handle = connections.admit();
    tokio::time::advance(Duration::from_secs(5)).await;
    let request = handle.start_request();
    tokio::time::advance(Duration::from_secs(20)).await;
    assert!(
        !ready_now(handle.idle_for(Duration::from_secs(10))),
        "busy: not idle however long"
    );
    drop(request);
    let started = Instant::now();
    handle.idle_for(Duration::from_secs(10)).await;
    assert_eq!(started.elapsed(), Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn quiet_for_counts_from_the_last_byte_and_never_ends_without_a_timeout() {
    let connections = Connections::new("test", 8);
    let handle = connections.admit();
    let (mut near, far) = tokio::io::duplex(64);
    let mut stream = handle.watch(far);
    tokio::time::advance(Duration::from_secs(3)).await;
    near.write_all(b"abc").await.unwrap();
    let mut read = [0u8; 3];
    stream.read_exact(&mut read).await.unwrap();
    let started = Instant::now();
    handle.quiet_for(Some(Duration::from_secs(4))).await;
    assert_eq!(started.elapsed(), Duration::from_secs(4));
    assert!(!ready_now(handle.quiet_for(None)));
}

/// Go's keep-alive timing: the idle timeout runs from the end of the last request until a next
/// head's first byte; from that byte, the header-read timeout. A request in flight stops both.
#[tokio::test(start_paused = true)]
async fn next_request_late_is_idle_until_a_head_begins_then_slow_head() {
    let (idle, head) = (Duration::from_secs(90), Duration::from_secs(32));
    let connections = Connections::new("test", 8);
    let handle = connections.admit();
    let (mut near, far) = tokio::io::duplex(64);
    let mut stream = handle.watch(far);
    let mut read = [0u8; 4];

    // A first request, answered: the idle timeout counts from its end, the whole of it.
    let request = handle.start_request();
    tokio::time::advance(Duration::from_secs(200)).await;
    assert!(
        !ready_now(handle.next_request_late(Some(idle), Some(head))),
        "busy"
    );
    drop(request);
    let ended = Instant::now();
    assert_eq!(
        handle.next_request_late(Some(idle), Some(head)).await,
        Late::Idle
    );
    assert_eq!(
        ended.elapsed(),
        idle,
        "idle for the idle timeout, not the header-read one"
    );

    // A head begins at 80 s of idleness: from its first byte, the header-read timeout.
    let request = handle.start_request();
    drop(request);
    tokio::time::advance(Duration::from_secs(80)).await;
    near.write_all(b"GET ").await.unwrap();
    stream.read_exact(&mut read).await.unwrap();
    let first_byte = Instant::now();
    assert_eq!(
        handle.next_request_late(Some(idle), Some(head)).await,
        Late::SlowHead
    );
    assert_eq!(
        first_byte.elapsed(),
        head,
        "32 s from the first byte, past the idle timeout"
    );

    // The head ends (the request starts) in time: neither fires until the next wait.
    let request = handle.start_request();
    let waited = tokio::time::timeout(
        Duration::from_secs(300),
        handle.next_request_late(Some(idle), Some(head)),
    )
    .await;
    assert!(waited.is_err(), "a request in flight is never late");
    drop(request);
    let waited = tokio::time::timeout(
        Duration::from_secs(300),
        handle.next_request_late(None, None),
    )
    .await;
    assert!(waited.is_err(), "never without timeouts");
}

#[tokio::test(start_paused = true)]
async fn no_request_by_fires_only_when_no_request_started_before_the_deadline() {
    let connections = Connections::new("test", 8);
    let silent = connections.admit();
    let talking = connections.admit();
    let deadline = Instant::now() + Duration::from_secs(2);
    let _request = talking.start_request();
    silent.no_request_by(Some(deadline)).await;
    assert_eq!(Instant::now(), deadline);
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        talking.no_request_by(Some(deadline)),
    )
    .await;
    assert!(
        waited.is_err(),
        "a connection that asked is never closed by it"
    );
}

#[tokio::test]
async fn an_answering_body_keeps_its_request_in_flight_until_dropped() {
    let connections = Connections::new("test", 8);
    let handle = connections.admit();
    let body = Answering::new(
        Full::new(Bytes::from_static(b"ok")),
        Some(handle.start_request()),
    );
    assert!(handle.busy());
    let collected = body.collect().await.unwrap().to_bytes();
    assert_eq!(collected, Bytes::from_static(b"ok"));
    assert!(!handle.busy(), "collected and dropped: no longer in flight");
}

/// The shared slow clients against a listener of the test's own: one connection is answered and
/// closed, one is held open. `status_line` reads the answer's first line, `closes_within` tells the
/// closed connection from the held one, `hold_partial_requests` delivers each partial request.
#[tokio::test]
async fn slow_client_helpers_tell_a_closed_connection_from_a_held_one() {
    use super::slow_client::{closes_within, hold_partial_requests, status_line};
    use tokio::net::TcpListener;

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        // First: a whole request, answered, then closed.
        let (mut answered, _) = listener.accept().await.expect("accept");
        let mut head = Vec::new();
        let mut buffer = [0u8; 256];
        while !head.ends_with(b"\r\n\r\n") {
            let read = answered.read(&mut buffer).await.expect("read");
            assert!(read > 0, "the request ended before its head did");
            head.extend_from_slice(&buffer[..read]);
        }
        answered
            .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            .await
            .expect("answer");
        drop(answered);
        // Then two partial requests: the first closed once read, the second held.
        let mut partials = Vec::new();
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut got = [0u8; 4];
            stream
                .read_exact(&mut got)
                .await
                .expect("the partial request");
            partials.push((stream, got));
        }
        let (closed, first) = partials.remove(0);
        drop(closed);
        (first, partials)
    });

    let status = status_line(addr, "/healthz").await.expect("asks");
    assert_eq!(status, "HTTP/1.1 204 No Content");
    let mut held = hold_partial_requests(addr, 2, b"GET ")
        .await
        .expect("holds");
    let (first, still_held) = server.await.expect("the listener's task");
    assert_eq!(&first, b"GET ");
    assert!(closes_within(&mut held[0], Duration::from_secs(10)).await);
    assert!(!closes_within(&mut held[1], Duration::from_millis(50)).await);
    drop(still_held);
    assert!(closes_within(&mut held[1], Duration::from_secs(10)).await);
}
