//! Stress: many producers and workers on real threads and on tokio tasks. Asserts the two promises
//! that matter most: no key is ever processed by two workers at once, and every key is processed after
//! its last add (no add is lost).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokube_workqueue::WorkQueue;

const KEYS: usize = 64;

struct Shared {
    queue: WorkQueue<usize>,
    /// version[k]: bumped by a producer just before each add of k.
    version: Vec<AtomicU64>,
    /// seen[k]: the version a worker read when it started processing k.
    seen: Vec<AtomicU64>,
    in_flight: Mutex<HashSet<usize>>,
    processed: AtomicU64,
}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Shared {
            queue: WorkQueue::new(),
            version: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            seen: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            in_flight: Mutex::new(HashSet::new()),
            processed: AtomicU64::new(0),
        })
    }

    fn produce(&self, seed: u64, adds: usize) {
        let mut x = seed;
        for i in 0..adds {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (x >> 33) as usize % KEYS;
            self.version[k].fetch_add(1, Ordering::SeqCst);
            match i % 3 {
                0 => self.queue.add_with_priority(k, (x % 3) as i32),
                _ => self.queue.add(k),
            }
        }
    }

    fn begin(&self, k: usize) {
        assert!(
            self.in_flight.lock().unwrap().insert(k),
            "key {k} handed to two workers at once"
        );
        self.seen[k].store(self.version[k].load(Ordering::SeqCst), Ordering::SeqCst);
    }

    fn end(&self, k: usize) {
        assert!(self.in_flight.lock().unwrap().remove(&k));
        self.processed.fetch_add(1, Ordering::Relaxed);
        self.queue.done(&k);
    }

    fn check_every_add_was_processed(&self) {
        for k in 0..KEYS {
            assert_eq!(
                self.seen[k].load(Ordering::SeqCst),
                self.version[k].load(Ordering::SeqCst),
                "key {k}: its last add was never processed"
            );
        }
        assert!(self.in_flight.lock().unwrap().is_empty());
    }
}

#[test]
fn threads_never_share_a_key_and_never_lose_an_add() {
    let shared = Shared::new();
    let workers: Vec<_> = (0..6)
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || {
                while let Some(k) = s.queue.get_blocking() {
                    s.begin(k);
                    if k % 7 == 0 {
                        std::thread::yield_now();
                    }
                    s.end(k);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..6)
        .map(|p| {
            let s = shared.clone();
            std::thread::spawn(move || s.produce(p + 1, 50_000))
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    shared.queue.shut_down();
    for w in workers {
        w.join().unwrap();
    }
    shared.check_every_add_was_processed();
    assert!(shared.processed.load(Ordering::Relaxed) >= KEYS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_never_share_a_key_and_never_lose_an_add() {
    let shared = Shared::new();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let s = shared.clone();
            tokio::spawn(async move {
                while let Some(k) = s.queue.get().await {
                    s.begin(k);
                    if k % 5 == 0 {
                        tokio::task::yield_now().await;
                    }
                    s.end(k);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let s = shared.clone();
            std::thread::spawn(move || s.produce(100 + p, 50_000))
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    // Delayed adds too: each must still be processed after it lands.
    for k in 0..KEYS {
        shared.version[k].fetch_add(1, Ordering::SeqCst);
        shared
            .queue
            .add_after(k, Duration::from_millis((k % 10) as u64));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while shared.queue.delayed_len() > 0 || !shared.queue.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "delayed keys never delivered"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    shared.queue.shut_down_with_drain().await;
    for w in workers {
        w.await.unwrap();
    }
    shared.check_every_add_was_processed();
}
