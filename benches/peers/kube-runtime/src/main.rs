//! The five workloads of `benches/WORKLOADS.md` on kube-runtime's scheduler
//! (`kube_runtime::scheduler`), the queue behind kube-rs's `Controller`. A peer for ferrokube's
//! workqueue benchmarks; see README.md beside this file for what the adapter emulates.
//!
//! ```text
//! cargo run --release -- --workload W3 [--scale 0.1]
//! ```

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use kube_runtime::scheduler::{scheduler, ScheduleRequest};
use tokio::sync::{mpsc, Notify};
use tokio_stream::wrappers::UnboundedReceiverStream;

type Key = Arc<str>;
const IMPL: &str = "kube-runtime-5.0-scheduler";
/// A key no workload uses, scheduled by `shut_down` to find the end of the requests.
const SHUTDOWN_SENTINEL: &str = "\u{0}shutdown";

/// SplitMix64, exactly as WORKLOADS.md gives it.
struct SplitMix64(u64);
impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn vectors_ok() -> bool {
    let draws = |seed, n: usize| {
        let mut r = SplitMix64(seed);
        (0..n).map(|_| r.next()).collect::<Vec<_>>()
    };
    let mut r = SplitMix64(1003);
    let space: Vec<u64> = (0..3).map(|_| r.next() % 10_000).collect();
    draws(1000, 3)
        == [
            4332104999045480776,
            15022492692291828655,
            14266957338849687121,
        ]
        && draws(2000, 3)
            == [
                13609660699017974483,
                883804695291935563,
                1885940644450548452,
            ]
        && space == [1864, 8462, 6476]
}

/// The adapter: client-go's verbs over the scheduler.
///
/// - `add(k)` / `add_after(k, d)`: a `ScheduleRequest` into the channel the scheduler reads (a
///   synchronous send, so producers can be plain threads). The scheduler keeps one entry per key, with
///   the earliest `run_at`.
/// - `get()`: one dispatcher task owns the scheduler stream and hands expired keys to consumers over a
///   shared channel (the scheduler is one `Stream`; this is the fan-out kube-rs's `Controller` does too).
/// - `done(k)`: emulated with the scheduler's `hold_unless`, the way kube-rs's `Controller` keeps a key
///   from being reconciled twice at once: a key being processed is held back until its `done`.
/// - `num_requeues` / `forget` / `add_rate_limited`: a per-key failure count in the adapter,
///   `delay = base · 2^failures` capped at 1 s.
/// - `shut_down()`: the scheduler cannot tell when it is empty, so shutdown schedules a sentinel key
///   5 ms after every earlier request; once it comes out, the dispatcher hands out what is left and
///   closes when nothing is processing (not timed: every workload's clock stops at the last `done`).
#[derive(Clone)]
struct SchedulerQueue {
    requests: mpsc::UnboundedSender<ScheduleRequest<Key>>,
    ready: async_channel::Receiver<Key>,
    processing: Arc<Mutex<HashSet<Key>>>,
    done_signal: Arc<Notify>,
    shutting_down: Arc<AtomicBool>,
    failures: Arc<Mutex<HashMap<Key, u32>>>,
    base: Duration,
}

impl SchedulerQueue {
    fn start(runtime: &tokio::runtime::Runtime, base: Duration) -> Self {
        let (requests, incoming) = mpsc::unbounded_channel();
        let (ready_tx, ready) = async_channel::unbounded();
        let queue = SchedulerQueue {
            requests,
            ready,
            processing: Arc::default(),
            done_signal: Arc::new(Notify::new()),
            shutting_down: Arc::new(AtomicBool::new(false)),
            failures: Arc::default(),
            base,
        };
        let q = queue.clone();
        runtime.spawn(async move {
            let mut sched = std::pin::pin!(scheduler(UnboundedReceiverStream::new(incoming)));
            // Set once the shutdown sentinel comes out: every earlier request has been emitted or is
            // held for a key still being processed.
            let mut draining = false;
            loop {
                let processing = q.processing.clone();
                let mut held = sched
                    .as_mut()
                    .hold_unless(move |k: &Key| !processing.lock().unwrap().contains(k));
                if draining && q.processing.lock().unwrap().is_empty() {
                    // Nothing is held back now: whatever is left comes out at once, or nothing is.
                    match held.next().now_or_never() {
                        Some(Some(key)) => {
                            q.processing.lock().unwrap().insert(key.clone());
                            if ready_tx.send(key).await.is_err() {
                                break;
                            }
                            continue;
                        }
                        _ => break,
                    }
                }
                tokio::select! {
                    key = held.next() => {
                        let Some(key) = key else { break };
                        if *key == *SHUTDOWN_SENTINEL {
                            draining = true;
                            continue;
                        }
                        q.processing.lock().unwrap().insert(key.clone());
                        if ready_tx.send(key).await.is_err() {
                            break;
                        }
                    }
                    _ = q.done_signal.notified() => {}
                }
            }
            ready_tx.close();
        });
        queue
    }

    fn add(&self, key: Key) {
        self.add_after(key, Duration::ZERO);
    }

    fn add_after(&self, key: Key, delay: Duration) {
        if self.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let run_at = tokio::time::Instant::now() + delay;
        let _ = self.requests.send(ScheduleRequest {
            message: key,
            run_at,
        });
    }

    async fn get(&self) -> Option<Key> {
        self.ready.recv().await.ok()
    }

    fn done(&self, key: &Key) {
        self.processing.lock().unwrap().remove(key);
        self.done_signal.notify_one();
    }

    fn num_requeues(&self, key: &Key) -> u32 {
        self.failures.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    fn forget(&self, key: &Key) {
        self.failures.lock().unwrap().remove(key);
    }

    fn add_rate_limited(&self, key: Key) {
        let n = {
            let mut f = self.failures.lock().unwrap();
            let n = f.entry(key.clone()).or_insert(0);
            let before = *n;
            *n += 1;
            before
        };
        let delay = self
            .base
            .checked_mul(1u32.checked_shl(n).unwrap_or(u32::MAX))
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        self.add_after(key, delay);
    }

    /// Refuses later adds and schedules the sentinel 5 ms after every earlier request, so it is
    /// emitted after all of them (tokio's timer wheel has 1 ms slots).
    fn shut_down(&self) {
        if self.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        let run_at = tokio::time::Instant::now() + Duration::from_millis(5);
        let message = Arc::from(SHUTDOWN_SENTINEL);
        let _ = self.requests.send(ScheduleRequest { message, run_at });
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn keys(prefix: &str, n: usize) -> Vec<Key> {
    (0..n).map(|i| Arc::from(format!("{prefix}{i}"))).collect()
}

fn scaled(n: usize, scale: Option<f64>) -> usize {
    scale.map_or(n, |s| ((n as f64 * s).round() as usize).max(1))
}

struct Report {
    workload: &'static str,
    items: u64,
    secs: f64,
    extra: Vec<(&'static str, String)>,
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// W1: one thread (a current-thread runtime runs the dispatcher and the loop).
fn w1(scale: Option<f64>) -> Report {
    let n = scaled(1_000_000, scale);
    let keys = keys("ns/name-", n);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let q = SchedulerQueue::start(&rt, Duration::ZERO);
    let secs = rt.block_on(async {
        let start = Instant::now();
        for k in &keys {
            q.add(k.clone());
        }
        for _ in 0..n {
            let Some(k) = q.get().await else { break };
            q.done(&k);
        }
        start.elapsed().as_secs_f64()
    });
    q.shut_down();
    Report {
        workload: "W1",
        items: n as u64,
        secs,
        extra: vec![],
    }
}

/// W2 and W3: producer threads, consumer tasks, shutdown and drain.
fn produce_and_consume(streams: Vec<Vec<Key>>, consumers: usize) -> (u64, f64, f64) {
    let rt = runtime();
    let q = SchedulerQueue::start(&rt, Duration::ZERO);
    let barrier = Arc::new(Barrier::new(streams.len() + consumers + 1));
    let consumer_tasks: Vec<_> = (0..consumers)
        .map(|_| {
            let (q, barrier) = (q.clone(), barrier.clone());
            let ready = rt.spawn_blocking(move || barrier.wait());
            rt.spawn(async move {
                let _ = ready.await;
                let (mut items, mut last) = (0u64, None);
                while let Some(k) = q.get().await {
                    q.done(&k);
                    last = Some(Instant::now());
                    items += 1;
                }
                (items, last)
            })
        })
        .collect();
    let producers: Vec<_> = streams
        .into_iter()
        .map(|stream| {
            let (q, barrier) = (q.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for k in &stream {
                    q.add(k.clone());
                }
                stream
            })
        })
        .collect();
    let start = Instant::now();
    barrier.wait();
    let streams: Vec<_> = producers
        .into_iter()
        .map(|p| p.join().expect("producer"))
        .collect();
    let producers_secs = start.elapsed().as_secs_f64();
    q.shut_down();
    let (mut items, mut end) = (0, start);
    for t in consumer_tasks {
        let (n, last) = rt.block_on(t).expect("consumer");
        items += n;
        end = end.max(last.unwrap_or(start));
    }
    drop(streams);
    (items, (end - start).as_secs_f64(), producers_secs)
}

fn w2(scale: Option<f64>) -> Report {
    let space = keys("ns/name-", 10_000);
    let per = scaled(250_000, scale);
    let streams: Vec<Vec<Key>> = (0..4u64)
        .map(|p| {
            let mut r = SplitMix64(1000 + p);
            (0..per)
                .map(|_| space[(r.next() % 10_000) as usize].clone())
                .collect()
        })
        .collect();
    let adds = (4 * per) as f64;
    let (items, secs, psecs) = produce_and_consume(streams, 4);
    Report {
        workload: "W2",
        items,
        secs,
        extra: vec![
            ("adds", num(adds)),
            ("adds_per_sec", num(adds / psecs)),
            ("dedup_ratio", num(adds / items as f64)),
            ("producers_secs", num(psecs)),
        ],
    }
}

fn w3(scale: Option<f64>) -> Result<Report, String> {
    let per = scaled(125_000, scale);
    let streams: Vec<Vec<Key>> = (0..8).map(|p| keys(&format!("ns/p{p}-"), per)).collect();
    let (items, secs, psecs) = produce_and_consume(streams, 8);
    if items != (8 * per) as u64 {
        return Err(format!("processed {items}, expected {}", 8 * per));
    }
    Ok(Report {
        workload: "W3",
        items,
        secs,
        extra: vec![("producers_secs", num(psecs))],
    })
}

fn w4(scale: Option<f64>) -> Report {
    let n = scaled(100_000, scale);
    let keys = keys("ns/name-", n);
    let mut r = SplitMix64(2000);
    let delays: Vec<u64> = (0..n).map(|_| r.next() % 1_000_000_001).collect();
    let due: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let rt = runtime();
    let q = SchedulerQueue::start(&rt, Duration::ZERO);
    let barrier = Arc::new(Barrier::new(2));
    let start = Arc::new(Mutex::new(None::<Instant>));
    let consumer = {
        let (q, barrier, due, start) = (q.clone(), barrier.clone(), due.clone(), start.clone());
        let ready = rt.spawn_blocking(move || barrier.wait());
        rt.spawn(async move {
            let _ = ready.await;
            let t0 = start.lock().unwrap().expect("clock started");
            let mut lateness = Vec::with_capacity(n);
            let mut last = t0;
            for _ in 0..n {
                let Some(k) = q.get().await else { break };
                last = Instant::now();
                let i: usize = k
                    .rsplit('-')
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("suffix");
                lateness
                    .push((last - t0).as_nanos() as i64 - due[i].load(Ordering::Acquire) as i64);
                q.done(&k);
            }
            (lateness, (last - t0).as_secs_f64())
        })
    };
    let t0 = Instant::now();
    *start.lock().unwrap() = Some(t0);
    barrier.wait();
    for (i, k) in keys.iter().enumerate() {
        due[i].store(
            t0.elapsed().as_nanos() as u64 + delays[i],
            Ordering::Release,
        );
        q.add_after(k.clone(), Duration::from_nanos(delays[i]));
    }
    let (mut lateness, secs) = rt.block_on(consumer).expect("consumer");
    q.shut_down();
    lateness.sort_unstable();
    let ms = |ns: i64| num(ns as f64 / 1e6);
    let rank = |p: f64| lateness[((p * lateness.len() as f64).ceil() as usize).saturating_sub(1)];
    let mean = lateness.iter().map(|&x| x as f64).sum::<f64>() / lateness.len() as f64;
    Report {
        workload: "W4",
        items: lateness.len() as u64,
        secs,
        extra: vec![
            ("p50_ms", ms(rank(0.5))),
            ("p99_ms", ms(rank(0.99))),
            ("max_ms", ms(*lateness.last().unwrap_or(&0))),
            ("min_ms", ms(*lateness.first().unwrap_or(&0))),
            ("mean_ms", num(mean / 1e6)),
        ],
    }
}

fn w5(scale: Option<f64>) -> Result<Report, String> {
    let n = scaled(10_000, scale);
    let keys = keys("ns/name-", n);
    let base = Duration::from_micros(1);
    let rt = runtime();
    let q = SchedulerQueue::start(&rt, base);
    let barrier = Arc::new(Barrier::new(5));
    let successes = Arc::new(AtomicUsize::new(0));
    let end = Arc::new(Mutex::new(None::<Instant>));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (q, barrier, successes, end) =
                (q.clone(), barrier.clone(), successes.clone(), end.clone());
            let ready = rt.spawn_blocking(move || barrier.wait());
            rt.spawn(async move {
                let _ = ready.await;
                let mut gets = 0u64;
                while let Some(k) = q.get().await {
                    gets += 1;
                    if q.num_requeues(&k) < 5 {
                        q.add_rate_limited(k.clone());
                        q.done(&k);
                    } else {
                        q.forget(&k);
                        q.done(&k);
                        if successes.fetch_add(1, Ordering::SeqCst) + 1 == n {
                            *end.lock().unwrap() = Some(Instant::now());
                            q.shut_down();
                        }
                    }
                }
                gets
            })
        })
        .collect();
    let start = Instant::now();
    barrier.wait();
    for k in &keys {
        q.add(k.clone());
    }
    let gets: u64 = consumers
        .into_iter()
        .map(|c| rt.block_on(c).expect("consumer"))
        .sum();
    let end = end
        .lock()
        .unwrap()
        .ok_or("never reached the last success")?;
    if gets != 6 * n as u64 {
        return Err(format!("{gets} gets, expected {}", 6 * n));
    }
    Ok(Report {
        workload: "W5",
        items: gets,
        secs: (end - start).as_secs_f64(),
        extra: vec![
            ("successes", num(successes.load(Ordering::SeqCst) as f64)),
            ("base", "\"1us\"".into()),
            ("base_ns", num(base.as_nanos() as f64)),
        ],
    })
}

fn main() -> ExitCode {
    if !vectors_ok() {
        eprintln!("SplitMix64 test vectors failed");
        return ExitCode::from(2);
    }
    let (mut workload, mut scale) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.trim_start_matches('-'), args.next()) {
            ("workload", Some(w)) => workload = Some(w.to_uppercase()),
            ("scale", Some(s)) => match s.parse::<f64>() {
                Ok(s) if s > 0.0 && s.is_finite() => scale = Some(s),
                _ => {
                    eprintln!("--scale must be a positive number");
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!("usage: --workload W1..W5 [--scale F]");
                return ExitCode::from(2);
            }
        }
    }
    let result = match workload.as_deref() {
        Some("W1") => Ok(w1(scale)),
        Some("W2") => Ok(w2(scale)),
        Some("W3") => w3(scale),
        Some("W4") => Ok(w4(scale)),
        Some("W5") => w5(scale),
        Some(w) if w.starts_with('W') => {
            eprintln!("{IMPL} cannot run {w}");
            return ExitCode::from(3);
        }
        _ => {
            eprintln!("usage: --workload W1..W5 [--scale F]");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(mut r) => {
            if let Some(s) = scale {
                r.extra.push(("scale", num(s)));
            }
            let extra: Vec<String> = r
                .extra
                .iter()
                .map(|(k, v)| format!("\"{k}\":{v}"))
                .collect();
            println!(
                "{{\"impl\":\"{IMPL}\",\"workload\":\"{}\",\"items\":{},\"secs\":{},\"per_sec\":{},\"extra\":{{{}}}}}",
                r.workload,
                r.items,
                num(r.secs),
                num(r.items as f64 / r.secs),
                extra.join(",")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("failed: {e}");
            ExitCode::FAILURE
        }
    }
}
