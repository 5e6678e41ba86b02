//! Criterion benchmarks of the queue's basic operations, and of what priorities buy a controller.
//!
//! The workload benchmarks that compare us with client-go and kube-rs are in
//! `examples/bench_workloads.rs` (see `benches/WORKLOADS.md` at the repository root); these are the
//! micro-benchmarks to watch while changing the queue.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ferrokube_workqueue::WorkQueue;

type Key = Arc<str>;

fn keys(n: usize) -> Vec<Key> {
    (0..n).map(|i| Arc::from(format!("ns/name-{i}"))).collect()
}

/// add → get → done of 10,000 distinct keys on one thread.
fn add_get_done(c: &mut Criterion) {
    let keys = keys(10_000);
    c.bench_function("add_get_done_10k", |b| {
        b.iter_batched(
            WorkQueue::<Key>::new,
            |q| {
                for k in &keys {
                    q.add(k.clone());
                }
                while let Some(k) = (!q.is_empty()).then(|| q.get_blocking()).flatten() {
                    q.done(&k);
                }
                q
            },
            BatchSize::SmallInput,
        )
    });
}

/// An add of a key that is already waiting: the common case of a busy controller.
fn dedup_add(c: &mut Criterion) {
    let q = WorkQueue::<Key>::new();
    let keys = keys(1_000);
    for k in &keys {
        q.add(k.clone());
    }
    let mut i = 0;
    c.bench_function("dedup_add", |b| {
        b.iter(|| {
            q.add(black_box(keys[i % keys.len()].clone()));
            i += 1;
        })
    });
}

/// Time from an edge-triggered add until a worker takes that key, while a 2,000-key resync backlog
/// is queued and two workers spend ~10 µs per key: with the edge at priority 10, and without.
fn priority_latency(c: &mut Criterion) {
    let backlog = keys(2_000);
    let edge: Key = Arc::from("ns/edge-triggered");
    let mut group = c.benchmark_group("edge_behind_resync_backlog");
    group.sample_size(10);
    for (name, priority) in [("with_priority", 10), ("without_priority", 0)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += edge_latency(&backlog, &edge, priority);
                }
                total
            })
        });
    }
    group.finish();
}

fn edge_latency(backlog: &[Key], edge: &Key, priority: i32) -> Duration {
    let q = WorkQueue::<Key>::new();
    for k in backlog {
        q.add(k.clone());
    }
    let seen_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (q, seen_at, stop, edge) = (q.clone(), seen_at.clone(), stop.clone(), edge.clone());
            thread::spawn(move || {
                while let Some(k) = q.get_blocking() {
                    if k == edge {
                        *seen_at.lock().unwrap() = Some(Instant::now());
                        stop.store(true, Ordering::SeqCst);
                    }
                    let spin = Instant::now();
                    while spin.elapsed() < Duration::from_micros(10)
                        && !stop.load(Ordering::Relaxed)
                    {}
                    q.done(&k);
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1));
    let added_at = Instant::now();
    q.add_with_priority(edge.clone(), priority);
    while !stop.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    q.shut_down();
    for w in workers {
        let _ = w.join();
    }
    let seen = seen_at.lock().unwrap().unwrap_or(added_at);
    seen - added_at
}

criterion_group!(benches, add_get_done, dedup_add, priority_latency);
criterion_main!(benches);
