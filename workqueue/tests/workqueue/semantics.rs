//! One test per rule of the queue, in the order the crate documents them.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ferrokube_workqueue::{
    AddOptions, ExponentialFailureRateLimiter, FastSlowRateLimiter, QueueMetrics, WorkQueue,
};

/// Polls `get` once: `Ready(Some(k))`, `Ready(None)` (shut down and empty) or `Pending` (would wait).
fn poll_get<K: ferrokube_workqueue::QueueKey>(queue: &WorkQueue<K>) -> Poll<Option<K>> {
    let mut get = pin!(queue.get());
    get.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

fn queue() -> WorkQueue<&'static str> {
    WorkQueue::new()
}

/// Waits (at most 5 s) until no key counts as delayed. A key the timer thread delivered can reach
/// a getter a moment before that thread lowers its in-transit count (it counts in both places,
/// never in neither), so right after `get` the count may still be 1: wait for the condition
/// instead of asserting it at once.
async fn no_delayed_keys<K: ferrokube_workqueue::QueueKey>(queue: &WorkQueue<K>) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while queue.delayed_len() != 0 {
        assert!(
            Instant::now() < deadline,
            "still {} delayed keys",
            queue.delayed_len()
        );
        tokio::task::yield_now().await;
    }
}

#[test]
fn add_stores_a_waiting_key_once() {
    let q = queue();
    q.add("a");
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 1);
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    assert_eq!(poll_get(&q), Poll::Pending);
}

#[test]
fn keys_come_out_in_fifo_order() {
    let q = queue();
    for k in ["c", "a", "b", "a"] {
        q.add(k);
    }
    let got: Vec<_> = (0..3).map(|_| poll_get(&q)).collect();
    assert_eq!(
        got,
        [
            Poll::Ready(Some("c")),
            Poll::Ready(Some("a")),
            Poll::Ready(Some("b"))
        ]
    );
}

#[test]
fn a_key_being_processed_is_not_handed_out_again_until_done() {
    let q = queue();
    q.add("a");
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    assert!(q.is_processing(&"a"));
    // Added while processing: marked dirty, not queued, so no second worker can take it.
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 0);
    assert_eq!(poll_get(&q), Poll::Pending);
    // done puts it back, once.
    q.done(&"a");
    assert_eq!(q.len(), 1);
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    q.done(&"a");
    assert_eq!(q.len(), 0);
    assert!(!q.is_processing(&"a"));
    assert_eq!(poll_get(&q), Poll::Pending);
}

#[test]
fn done_for_an_unknown_key_is_ignored() {
    let q = queue();
    q.done(&"never-added");
    q.add("a");
    q.done(&"a"); // queued, not processing: ignored
    assert_eq!(q.len(), 1);
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
}

#[tokio::test]
async fn get_waits_for_an_add() {
    let q = queue();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!getter.is_finished());
    q.add("a");
    assert_eq!(getter.await.unwrap(), Some("a"));
}

#[test]
fn get_blocking_serves_threads() {
    let q = queue();
    let worker = std::thread::spawn({
        let q = q.clone();
        move || {
            let mut got = Vec::new();
            while let Some(k) = q.get_blocking() {
                got.push(k);
                q.done(&k);
            }
            got
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    q.add("a");
    q.add("b");
    while !q.is_empty() {
        std::thread::sleep(Duration::from_millis(1));
    }
    q.shut_down();
    assert_eq!(worker.join().unwrap(), ["a", "b"]);
}

#[tokio::test]
async fn shut_down_wakes_waiting_getters() {
    let q = queue();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    q.shut_down();
    for g in getters {
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), g)
                .await
                .unwrap()
                .unwrap(),
            None
        );
    }
}

#[test]
fn shut_down_hands_out_remaining_keys_then_none_and_drops_later_adds() {
    let q = queue();
    q.add("a");
    q.add("b");
    q.shut_down();
    assert!(q.is_shutting_down());
    q.add("c");
    q.add_after("d", Duration::from_millis(1));
    q.add_rate_limited("e");
    assert_eq!(q.dropped_adds(), 3);
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    assert_eq!(poll_get(&q), Poll::Ready(Some("b")));
    assert_eq!(poll_get(&q), Poll::Ready(None));
    assert_eq!(poll_get(&q), Poll::Ready(None));
}

#[tokio::test]
async fn shut_down_with_drain_waits_for_keys_being_processed() {
    let q = queue();
    q.add("a");
    let key = q.get().await.unwrap();
    let drained = Arc::new(AtomicUsize::new(0));
    let drain = tokio::spawn({
        let (q, drained) = (q.clone(), drained.clone());
        async move {
            q.shut_down_with_drain().await;
            drained.store(1, Ordering::SeqCst);
        }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        drained.load(Ordering::SeqCst),
        0,
        "returned while a key was processing"
    );
    assert!(q.is_shutting_down());
    q.done(&key);
    tokio::time::timeout(Duration::from_secs(5), drain)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(drained.load(Ordering::SeqCst), 1);
}

#[test]
fn shut_down_with_drain_returns_at_once_when_idle() {
    let q = queue();
    q.shut_down_with_drain_blocking();
    assert!(q.is_shutting_down());
}

#[tokio::test]
async fn add_after_holds_the_key_until_its_delay_passes() {
    let q = queue();
    let start = Instant::now();
    q.add_after("a", Duration::from_millis(100));
    assert_eq!(q.len(), 0);
    assert_eq!(q.delayed_len(), 1);
    assert_eq!(poll_get(&q), Poll::Pending);
    let key = tokio::time::timeout(Duration::from_secs(5), q.get())
        .await
        .unwrap();
    assert_eq!(key, Some("a"));
    assert!(
        start.elapsed() >= Duration::from_millis(100),
        "{:?}",
        start.elapsed()
    );
    no_delayed_keys(&q).await;
}

#[tokio::test]
async fn a_waiting_key_keeps_its_earliest_ready_time() {
    let q = queue();
    let start = Instant::now();
    q.add_after("a", Duration::from_secs(60));
    q.add_after("a", Duration::from_millis(50)); // earlier: wins
    q.add_after("a", Duration::from_secs(30)); // later: ignored
    assert_eq!(q.delayed_len(), 1);
    let key = tokio::time::timeout(Duration::from_secs(5), q.get())
        .await
        .unwrap();
    assert_eq!(key, Some("a"));
    assert!(start.elapsed() < Duration::from_secs(5));
    // It was delivered once.
    q.done(&"a");
    assert_eq!(poll_get(&q), Poll::Pending);
    no_delayed_keys(&q).await;
}

#[tokio::test]
async fn a_waiting_key_keeps_its_highest_priority_when_its_time_moves_earlier() {
    let q = queue();
    q.add_with(
        "a",
        AddOptions::new().priority(5).after(Duration::from_secs(60)),
    );
    q.add_with("a", AddOptions::new().after(Duration::from_millis(20))); // earlier, priority 0
    let deadline = Instant::now() + Duration::from_secs(5);
    while q.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    q.add_with_priority("b", 1);
    // "a" kept priority 5 when its ready time moved earlier, so it goes before "b" (priority 1).
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    assert_eq!(poll_get(&q), Poll::Ready(Some("b")));
}

#[test]
fn zero_delay_is_a_plain_add() {
    let q = queue();
    q.add_after("a", Duration::ZERO);
    assert_eq!(q.len(), 1);
    assert_eq!(q.delayed_len(), 0);
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
}

#[tokio::test]
async fn delayed_keys_come_out_in_due_order() {
    let q = queue();
    q.add_after("c", Duration::from_millis(90));
    q.add_after("a", Duration::from_millis(30));
    q.add_after("b", Duration::from_millis(60));
    let mut got = Vec::new();
    for _ in 0..3 {
        let k = tokio::time::timeout(Duration::from_secs(5), q.get())
            .await
            .unwrap()
            .unwrap();
        q.done(&k);
        got.push(k);
    }
    assert_eq!(got, ["a", "b", "c"]);
}

#[test]
fn add_rate_limited_waits_as_the_limiter_says_and_forget_resets() {
    let q: WorkQueue<&str> = WorkQueue::builder()
        .rate_limiter(FastSlowRateLimiter::new(
            Duration::ZERO,
            Duration::from_secs(3600),
            2,
        ))
        .build();
    // Two fast (zero-delay) retries, then a slow one.
    q.add_rate_limited("a");
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    q.done(&"a");
    q.add_rate_limited("a");
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    q.done(&"a");
    assert_eq!(q.num_requeues(&"a"), 2);
    q.add_rate_limited("a");
    assert_eq!(q.delayed_len(), 1);
    assert_eq!(poll_get(&q), Poll::Pending);
    q.forget(&"a");
    assert_eq!(q.num_requeues(&"a"), 0);
}

#[tokio::test]
async fn exponential_retries_back_off() {
    let q: WorkQueue<&str> = WorkQueue::builder()
        .rate_limiter(ExponentialFailureRateLimiter::new(
            Duration::from_millis(20),
            Duration::from_secs(1),
        ))
        .build();
    let mut gaps = Vec::new();
    q.add("a");
    let mut last = Instant::now();
    for _ in 0..4 {
        let k = tokio::time::timeout(Duration::from_secs(5), q.get())
            .await
            .unwrap()
            .unwrap();
        gaps.push(last.elapsed());
        last = Instant::now();
        q.add_rate_limited(k);
        q.done(&k);
    }
    // 0, then at least 20, 40, 80 ms.
    for (gap, min_ms) in gaps.iter().skip(1).zip([20, 40, 80]) {
        assert!(*gap >= Duration::from_millis(min_ms), "{gaps:?}");
    }
    assert_eq!(q.num_requeues(&"a"), 4);
}

#[test]
fn higher_priority_first_fifo_within_a_priority() {
    let q = queue();
    q.add_with_priority("low1", -1);
    q.add("mid1");
    q.add_with_priority("high1", 10);
    q.add("mid2");
    q.add_with_priority("high2", 10);
    q.add_with_priority("low2", -1);
    let got: Vec<_> = (0..6)
        .map(|_| match poll_get(&q) {
            Poll::Ready(Some(k)) => k,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, ["high1", "high2", "mid1", "mid2", "low1", "low2"]);
}

#[test]
fn re_adding_a_waiting_key_with_higher_priority_raises_it_and_lower_does_not_lower_it() {
    let q = queue();
    for k in ["resync-1", "resync-2", "resync-3", "edge"] {
        q.add(k);
    }
    q.add_with_priority("edge", 100); // an edge-triggered event overtakes the resync backlog
    q.add_with_priority("resync-1", -5); // lower: stays at 0
    assert_eq!(q.len(), 4, "a raise must not count the key twice");
    let got: Vec<_> = (0..4)
        .map(|_| match poll_get(&q) {
            Poll::Ready(Some(k)) => k,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, ["edge", "resync-1", "resync-2", "resync-3"]);
    // The stale entry left by the raise is skipped, not handed out again.
    assert_eq!(q.len(), 0);
    assert_eq!(poll_get(&q), Poll::Pending);
}

#[test]
fn a_dirty_key_returns_at_the_highest_priority_it_was_added_with() {
    let q = queue();
    q.add("a");
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    q.add("b");
    q.add_with_priority("a", 5);
    q.add("a");
    q.done(&"a");
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    assert_eq!(poll_get(&q), Poll::Ready(Some("b")));
}

#[test]
fn add_with_combines_priority_and_delay() {
    let q = queue();
    q.add_with("a", AddOptions::new().priority(3).after(Duration::ZERO));
    q.add("b");
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
}

#[test]
fn get_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let q = queue();
    assert_send(&q.get());
    assert_send(&q.shut_down_with_drain());
}

/// A `QueueMetrics` that counts calls.
#[derive(Default)]
struct Counting {
    added: AtomicUsize,
    taken: AtomicUsize,
    done: AtomicUsize,
    retried: AtomicUsize,
    unfinished: AtomicUsize,
    longest_ms: AtomicUsize,
}

impl QueueMetrics for Counting {
    fn added(&self) {
        self.added.fetch_add(1, Ordering::SeqCst);
    }
    fn taken(&self, _waited: Duration) {
        self.taken.fetch_add(1, Ordering::SeqCst);
    }
    fn done(&self, _worked: Duration) {
        self.done.fetch_add(1, Ordering::SeqCst);
    }
    fn retried(&self) {
        self.retried.fetch_add(1, Ordering::SeqCst);
    }
    fn unfinished(&self, _total: Duration, longest: Duration) {
        self.unfinished.fetch_add(1, Ordering::SeqCst);
        self.longest_ms
            .store(longest.as_millis() as usize, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn metrics_follow_client_go_meanings() {
    let metrics = Arc::new(Counting::default());
    let q: WorkQueue<&str> = WorkQueue::builder().metrics(metrics.clone()).build();
    q.add("a");
    q.add("a"); // dedup: not counted
    q.add("b");
    assert_eq!(metrics.added.load(Ordering::SeqCst), 2);
    let a = q.get().await.unwrap();
    q.add("a"); // dirty while processing: counted, as client-go does
    assert_eq!(metrics.added.load(Ordering::SeqCst), 3);
    q.done(&a);
    assert_eq!(metrics.taken.load(Ordering::SeqCst), 1);
    assert_eq!(metrics.done.load(Ordering::SeqCst), 1);
    q.add_after("c", Duration::from_millis(1));
    q.add_rate_limited("d");
    assert_eq!(metrics.retried.load(Ordering::SeqCst), 2);
    // Unfinished work is published periodically while a key is held.
    let held = q.get().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(metrics.unfinished.load(Ordering::SeqCst) >= 1);
    assert!(metrics.longest_ms.load(Ordering::SeqCst) >= 400);
    q.done(&held);
}

#[test]
fn prometheus_metrics_use_client_go_names_and_the_queue_label() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ferrokube_workqueue::PrometheusMetrics::register(&mut registry);
    let q: WorkQueue<&str> = WorkQueue::builder()
        .name("pods")
        .metrics(metrics.for_queue("pods"))
        .build();
    q.add("a");
    q.add("b");
    assert_eq!(poll_get(&q), Poll::Ready(Some("a")));
    q.done(&"a");
    q.add_after("c", Duration::from_secs(60));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"workqueue_depth{name="pods"} 1"#,
        r#"workqueue_adds_total{name="pods"} 2"#,
        r#"workqueue_retries_total{name="pods"} 1"#,
        r#"workqueue_queue_duration_seconds_count{name="pods"} 1"#,
        r#"workqueue_work_duration_seconds_count{name="pods"} 1"#,
        r#"workqueue_unfinished_work_seconds{name="pods"}"#,
        r#"workqueue_longest_running_processor_seconds{name="pods"}"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
