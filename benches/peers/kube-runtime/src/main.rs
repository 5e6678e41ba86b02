//! The workloads of `benches/WORKLOADS.md` (W1–W5 as revised on 2026-11-28, and W2m, the old mixed
//! W2) on kube-runtime's scheduler
//! (`kube_runtime::scheduler`), the queue behind kube-rs's `Controller`. A peer for ferrokube's
//! workqueue benchmarks; see README.md beside this file for what the adapter emulates.
//!
//! ```text
//! cargo run --release -- --workload W3 [--scale 0.1]
//! ```
//!
//! Exit status: 0 ok; 1 a run failed a check WORKLOADS.md demands (W2: every key exactly once,
//! 10,000 items; W3: 1,000,000 items; W5: 600,000 gets and 100,000 successes); 2 usage error or
//! SplitMix64 vectors wrong; 3 a workload name this peer cannot run.

use std::collections::HashMap;
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
/// A key no workload uses, scheduled by `settle` to find when every earlier add has come out.
const SETTLE_SENTINEL: &str = "\u{0}settle";

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
///   A key in that channel is still *queued* ([`Handed::Ready`]): the scheduler emitting it again
///   before a consumer took it is an `add` of a queued key, which coalesces (dropped), as in
///   client-go. Without that, a key the dispatcher had pulled ahead of any consumer would come out
///   twice (W2's producers add with no consumer running).
/// - `done(k)`: emulated with the scheduler's `hold_unless`, the way kube-rs's `Controller` keeps a key
///   from being reconciled twice at once: a key being processed ([`Handed::Processing`]) is held back
///   until its `done`.
/// - `num_requeues` / `forget` / `add_rate_limited`: a per-key failure count in the adapter,
///   `delay = base · 2^failures` capped at 1 s.
/// - `shut_down()`: the scheduler cannot tell when it is empty, so shutdown schedules a sentinel key
///   5 ms after every earlier request; once it comes out, the dispatcher hands out what is left and
///   closes when no key is ready or processing (not timed: every workload's clock stops at the last
///   `done`).
#[derive(Clone)]
struct SchedulerQueue {
    requests: mpsc::UnboundedSender<ScheduleRequest<Key>>,
    ready: async_channel::Receiver<Key>,
    /// Every key the scheduler has emitted and whose `done` has not come yet; a key absent here is
    /// either waiting inside the scheduler or nowhere.
    handed: Arc<Mutex<HashMap<Key, Handed>>>,
    done_signal: Arc<Notify>,
    /// Notified when the settle sentinel comes out of the scheduler.
    settled: Arc<Notify>,
    shutting_down: Arc<AtomicBool>,
    failures: Arc<Mutex<HashMap<Key, u32>>>,
    base: Duration,
}

/// Where an emitted key is between the scheduler and its `done`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Handed {
    /// In the channel to the consumers, not taken yet: still queued, in client-go's terms.
    Ready,
    /// Taken by a consumer's `get`; the scheduler holds the key back until `done`.
    Processing,
}

/// What the dispatcher does with a key the scheduler emitted.
enum Emitted {
    /// New to the consumers: send it (now [`Handed::Ready`]).
    Send,
    /// Already ready in the channel: this emission coalesces into it.
    Coalesced,
    /// A consumer took it between the scheduler's hold check and now: schedule it again, so it
    /// is held until `done` (client-go re-queues a key added while it is processing).
    Requeue,
}

impl SchedulerQueue {
    fn emitted(&self, key: &Key) -> Emitted {
        let mut handed = self.handed.lock().unwrap();
        match handed.get(key) {
            None => {
                handed.insert(key.clone(), Handed::Ready);
                Emitted::Send
            }
            Some(Handed::Ready) => Emitted::Coalesced,
            Some(Handed::Processing) => Emitted::Requeue,
        }
    }

    /// Puts an emitted key back into the scheduler (accepted before any shutdown, so not refused).
    fn requeue(&self, key: Key) {
        let run_at = tokio::time::Instant::now();
        let _ = self.requests.send(ScheduleRequest {
            message: key,
            run_at,
        });
    }

    fn start(runtime: &tokio::runtime::Runtime, base: Duration) -> Self {
        let (requests, incoming) = mpsc::unbounded_channel();
        let (ready_tx, ready) = async_channel::unbounded();
        let queue = SchedulerQueue {
            requests,
            ready,
            handed: Arc::default(),
            done_signal: Arc::new(Notify::new()),
            settled: Arc::new(Notify::new()),
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
                let handed = q.handed.clone();
                let mut held = sched.as_mut().hold_unless(move |k: &Key| {
                    handed.lock().unwrap().get(k) != Some(&Handed::Processing)
                });
                if draining && q.handed.lock().unwrap().is_empty() {
                    // Nothing is held back now: whatever is left comes out at once, or nothing is.
                    match held.next().now_or_never() {
                        Some(Some(key)) => {
                            match q.emitted(&key) {
                                Emitted::Send => {
                                    if ready_tx.send(key).await.is_err() {
                                        break;
                                    }
                                }
                                Emitted::Coalesced => {}
                                Emitted::Requeue => q.requeue(key),
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
                        if *key == *SETTLE_SENTINEL {
                            q.settled.notify_one();
                            continue;
                        }
                        match q.emitted(&key) {
                            Emitted::Send => {
                                if ready_tx.send(key).await.is_err() {
                                    break;
                                }
                            }
                            Emitted::Coalesced => {}
                            Emitted::Requeue => q.requeue(key),
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
        let key = self.ready.recv().await.ok()?;
        self.handed
            .lock()
            .unwrap()
            .insert(key.clone(), Handed::Processing);
        Some(key)
    }

    fn done(&self, key: &Key) {
        self.handed.lock().unwrap().remove(key);
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

    /// Waits until every add sent so far has come out of the scheduler (into the consumers' channel,
    /// where repeats coalesced): a sentinel scheduled 5 ms after them, as `shut_down` does.
    ///
    /// The adapter's `add` is a channel send that returns before the scheduler has taken the
    /// request in (and tokio's timer emits it at the next 1 ms tick), so when W2's producers return
    /// their adds are not all in the queue yet; a consumer that took and finished a key before a
    /// late add of it came out would see it twice. client-go's `add` is done when it returns, so W2
    /// settles here before its consumers start (after `producers_secs`, inside `secs`).
    fn settle(&self, runtime: &tokio::runtime::Runtime) {
        let run_at = tokio::time::Instant::now() + Duration::from_millis(5);
        let message = Arc::from(SETTLE_SENTINEL);
        let _ = self.requests.send(ScheduleRequest { message, run_at });
        // notify_one keeps a permit if the sentinel comes out before this waits.
        runtime.block_on(self.settled.notified());
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

/// When the consumers of W2, W2m and W3 start.
#[derive(Clone, Copy, PartialEq, Debug)]
enum ConsumersStart {
    /// With the clock, while the producers add (W2m, W3).
    WithProducers,
    /// Once every producer has returned and `producers_secs` is read (W2 since 2026-11-28: adds then
    /// race no consumer, so adds/s measures the queue rather than how far the consumers lag).
    AfterProducers,
}

/// W2, W2m and W3: producer threads, consumer tasks, shutdown and drain. Every thread and task exists
/// before the clock starts; with `AfterProducers` the consumers wait at a second barrier that main
/// passes right after reading `producers_secs`. Returns (items, secs to the last done,
/// producers_secs).
fn produce_and_consume(
    streams: Vec<Vec<Key>>,
    consumers: usize,
    start: ConsumersStart,
) -> (u64, f64, f64) {
    let rt = runtime();
    let q = SchedulerQueue::start(&rt, Duration::ZERO);
    let with_producers = start == ConsumersStart::WithProducers;
    let clock_parties = streams.len() + 1 + if with_producers { consumers } else { 0 };
    let barrier = Arc::new(Barrier::new(clock_parties));
    let after_producers = Arc::new(Barrier::new(consumers + 1));
    let consumer_gate = if with_producers {
        barrier.clone()
    } else {
        after_producers.clone()
    };
    let consumer_tasks: Vec<_> = (0..consumers)
        .map(|_| {
            let (q, gate) = (q.clone(), consumer_gate.clone());
            let ready = rt.spawn_blocking(move || gate.wait());
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
    if !with_producers {
        q.settle(&rt);
        after_producers.wait();
    }
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

/// W2's key space, `ns/name-0` … `ns/name-9999` (not scaled by `--scale`).
const W2_SPACE: usize = 10_000;

/// The four producers' streams of W2 and W2m (250,000 draws each, SplitMix64 seeded 1000 + p) and
/// how many distinct keys they hold (10,000 at full scale).
fn w2_streams(scale: Option<f64>) -> (Vec<Vec<Key>>, u64) {
    let space = keys("ns/name-", W2_SPACE);
    let per = scaled(250_000, scale);
    let mut drawn = vec![false; W2_SPACE];
    let streams = (0..4u64)
        .map(|p| {
            let mut r = SplitMix64(1000 + p);
            (0..per)
                .map(|_| {
                    let i = (r.next() % W2_SPACE as u64) as usize;
                    drawn[i] = true;
                    space[i].clone()
                })
                .collect()
        })
        .collect();
    (streams, drawn.iter().filter(|&&d| d).count() as u64)
}

fn w2_extra(adds: f64, items: u64, psecs: f64) -> Vec<(&'static str, String)> {
    vec![
        ("adds", num(adds)),
        ("adds_per_sec", num(adds / psecs)),
        ("dedup_ratio", num(adds / items as f64)),
        ("producers_secs", num(psecs)),
    ]
}

/// W2: the adds with no consumer running, then 4 consumers drain every key exactly once (checked:
/// 10,000 items, or the distinct keys drawn under `--scale`).
fn w2(scale: Option<f64>) -> Result<Report, String> {
    let (streams, distinct) = w2_streams(scale);
    if scale.is_none() && distinct != W2_SPACE as u64 {
        return Err(format!(
            "the draws cover {distinct} keys, expected {W2_SPACE}"
        ));
    }
    let adds: usize = streams.iter().map(Vec::len).sum();
    let (items, secs, psecs) = produce_and_consume(streams, 4, ConsumersStart::AfterProducers);
    if items != distinct {
        return Err(format!(
            "handed out {items} keys, expected each of {distinct} exactly once"
        ));
    }
    Ok(Report {
        workload: "W2",
        items,
        secs,
        extra: w2_extra(adds as f64, items, psecs),
    })
}

/// W2m: the old mixed W2, the same adds while 4 consumers get → done (no check on items).
fn w2m(scale: Option<f64>) -> Report {
    let (streams, _distinct) = w2_streams(scale);
    let adds: usize = streams.iter().map(Vec::len).sum();
    let (items, secs, psecs) = produce_and_consume(streams, 4, ConsumersStart::WithProducers);
    Report {
        workload: "W2m",
        items,
        secs,
        extra: w2_extra(adds as f64, items, psecs),
    }
}

fn w3(scale: Option<f64>) -> Result<Report, String> {
    let per = scaled(125_000, scale);
    let streams: Vec<Vec<Key>> = (0..8).map(|p| keys(&format!("ns/p{p}-"), per)).collect();
    let (items, secs, psecs) = produce_and_consume(streams, 8, ConsumersStart::WithProducers);
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

/// W5: 100,000 keys (since 2026-11-28) each fail five times, then succeed; checked: 600,000 gets
/// and 100,000 successes.
fn w5(scale: Option<f64>) -> Result<Report, String> {
    let n = scaled(100_000, scale);
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
    let successes = successes.load(Ordering::SeqCst);
    if successes != n {
        return Err(format!("{successes} successes, expected {n}"));
    }
    Ok(Report {
        workload: "W5",
        items: gets,
        secs: (end - start).as_secs_f64(),
        extra: vec![
            ("successes", num(successes as f64)),
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
                eprintln!("usage: --workload W1..W5|W2m [--scale F]");
                return ExitCode::from(2);
            }
        }
    }
    let result = match workload.as_deref() {
        Some("W1") => Ok(w1(scale)),
        Some("W2") => w2(scale),
        Some("W2M") => Ok(w2m(scale)),
        Some("W3") => w3(scale),
        Some("W4") => Ok(w4(scale)),
        Some("W5") => w5(scale),
        Some(w) if w.starts_with('W') => {
            eprintln!("{IMPL} cannot run {w}");
            return ExitCode::from(3);
        }
        _ => {
            eprintln!("usage: --workload W1..W5|W2m [--scale F]");
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
