//! The workqueue workloads of `benches/WORKLOADS.md` (W1–W5, and W2m, the old mixed W2 kept as a
//! secondary figure), run on ferrokube's `WorkQueue` (or on the single-threaded floors), printing
//! one JSON line per run on stdout.
//!
//! ```text
//! cargo run --release -p ferrokube-workqueue --example bench_workloads -- --workload W1 --runs 5
//! cargo run --release -p ferrokube-workqueue --example bench_workloads -- --workload all
//! cargo run --release -p ferrokube-workqueue --example bench_workloads -- --impl floor-foldhash --workload W1
//! ```
//!
//! Options: `--workload W1..W5|W2m|all`, `--runs N` (default 1), `--scale F` (smoke tests only),
//! `--impl ferrokube|floor-siphash|floor-foldhash` (the floors run W1 only; other workloads exit 3).
//! `--help` says so too; bad usage exits with 2; a run that fails a check WORKLOADS.md demands (W2's
//! 10,000 items, W3's 1,000,000, W5's 600,000 gets and 100,000 successes) prints no JSON line and
//! exits with 1. Everything but the JSON lines goes to stderr. Follow WORKLOADS.md (its 2026-11-28
//! revision) when changing anything here.

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ferrokube_workqueue::{ExponentialFailureRateLimiter, WorkQueue};

type Key = Arc<str>;

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

/// The test vectors of WORKLOADS.md; the harness refuses to run if any fails.
fn check_vectors() -> Result<(), String> {
    let draws = |seed, n| {
        let mut rng = SplitMix64(seed);
        (0..n).map(|_| rng.next()).collect::<Vec<_>>()
    };
    let want1: [u64; 3] = [
        4332104999045480776,
        15022492692291828655,
        14266957338849687121,
    ];
    let want2: [u64; 3] = [
        13609660699017974483,
        883804695291935563,
        1885940644450548452,
    ];
    let mut rng = SplitMix64(1003);
    let space: Vec<u64> = (0..3).map(|_| rng.next() % 10_000).collect();
    if draws(1000, 3) != want1 || draws(2000, 3) != want2 || space != [1864, 8462, 6476] {
        return Err("SplitMix64 test vectors failed".into());
    }
    Ok(())
}

/// `--impl`: the queue, or a single-threaded floor.
#[derive(Clone, Copy, PartialEq, Debug, clap::ValueEnum)]
enum Impl {
    Ferrokube,
    #[value(name = "floor-siphash")]
    FloorSipHash,
    #[value(name = "floor-foldhash")]
    FloorFoldHash,
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Ferrokube => "ferrokube",
            Impl::FloorSipHash => "floor-siphash",
            Impl::FloorFoldHash => "floor-foldhash",
        }
    }
}

/// The command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "bench_workloads",
    about = "The workqueue workloads of benches/WORKLOADS.md (W1-W5, W2m), one JSON line per run on stdout.",
    args_override_self = true
)]
struct Cli {
    /// Which workload (any case).
    #[arg(long, value_enum, ignore_case = true)]
    workload: Workload,
    /// Runs of each workload.
    #[arg(long, value_name = "N", default_value_t = 1)]
    runs: usize,
    /// Scale the workloads down (smoke tests only; results are not comparable).
    #[arg(long, value_name = "F", value_parser = scale)]
    scale: Option<f64>,
    /// The floors run W1 only (other workloads exit 3).
    #[arg(long = "impl", value_name = "IMPL", value_enum, default_value_t = Impl::Ferrokube)]
    implementation: Impl,
}

/// `--workload`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Workload {
    W1,
    W2,
    /// The old mixed W2: consumers run while the producers add.
    W2m,
    W3,
    W4,
    W5,
    All,
}

struct Args {
    workloads: Vec<&'static str>,
    runs: usize,
    scale: Option<f64>,
    implementation: Impl,
}

impl Args {
    fn from_cli(cli: Cli) -> Args {
        let workloads = match cli.workload {
            Workload::W1 => vec!["W1"],
            Workload::W2 => vec!["W2"],
            Workload::W2m => vec!["W2m"],
            Workload::W3 => vec!["W3"],
            Workload::W4 => vec!["W4"],
            Workload::W5 => vec!["W5"],
            Workload::All => vec!["W1", "W2", "W2m", "W3", "W4", "W5"],
        };
        Args {
            workloads,
            runs: cli.runs,
            scale: cli.scale,
            implementation: cli.implementation,
        }
    }
}

fn scale(text: &str) -> Result<f64, String> {
    let scale: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if !(scale > 0.0 && scale.is_finite()) {
        return Err("must be positive".into());
    }
    Ok(scale)
}

/// One run's result, printed as the JSON line of WORKLOADS.md.
struct Report {
    workload: &'static str,
    items: u64,
    secs: f64,
    extra: Vec<(&'static str, String)>,
}

fn print_report(implementation: Impl, scale: Option<f64>, mut report: Report) {
    if let Some(scale) = scale {
        report.extra.push(("scale", json_number(scale)));
    }
    let extra: Vec<String> = report
        .extra
        .iter()
        .map(|(k, v)| format!("\"{k}\":{v}"))
        .collect();
    println!(
        "{{\"impl\":\"{}\",\"workload\":\"{}\",\"items\":{},\"secs\":{},\"per_sec\":{},\"extra\":{{{}}}}}",
        implementation.name(),
        report.workload,
        report.items,
        json_number(report.secs),
        json_number(report.items as f64 / report.secs),
        extra.join(",")
    );
}

fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

fn scaled(n: usize, scale: Option<f64>) -> usize {
    scale.map_or(n, |s| ((n as f64 * s).round() as usize).max(1))
}

fn keys(prefix: &str, n: usize) -> Vec<Key> {
    (0..n).map(|i| Arc::from(format!("{prefix}{i}"))).collect()
}

fn main() -> ExitCode {
    if let Err(e) = check_vectors() {
        eprintln!("{e}");
        return ExitCode::from(2);
    }
    // Bad usage exits with 2 (clap).
    let args = Args::from_cli(<Cli as clap::Parser>::parse());
    for workload in &args.workloads {
        for run in 0..args.runs {
            eprintln!("{} {workload} run {}", args.implementation.name(), run + 1);
            let result = match (args.implementation, *workload) {
                (Impl::Ferrokube, "W1") => Ok(w1(args.scale)),
                (Impl::Ferrokube, "W2") => w2(args.scale),
                (Impl::Ferrokube, "W2m") => w2m(args.scale),
                (Impl::Ferrokube, "W3") => w3(args.scale),
                (Impl::Ferrokube, "W4") => Ok(w4(args.scale)),
                (Impl::Ferrokube, "W5") => w5(args.scale),
                (Impl::FloorSipHash, "W1") => {
                    Ok(w1_floor(args.scale, std::hash::RandomState::new()))
                }
                (Impl::FloorFoldHash, "W1") => {
                    Ok(w1_floor(args.scale, foldhash::fast::RandomState::default()))
                }
                _ => {
                    eprintln!("{} cannot run {workload}", args.implementation.name());
                    return ExitCode::from(3);
                }
            };
            match result {
                Ok(report) => print_report(args.implementation, args.scale, report),
                Err(e) => {
                    eprintln!("{workload} failed: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    ExitCode::SUCCESS
}

/// W1 — sequential: add every key, then get + done each, on one thread.
fn w1(scale: Option<f64>) -> Report {
    let n = scaled(1_000_000, scale);
    let keys = keys("ns/name-", n);
    let queue: WorkQueue<Key> = WorkQueue::new();
    let start = Instant::now();
    for key in &keys {
        queue.add(key.clone());
    }
    for _ in 0..n {
        let Some(key) = queue.get_blocking() else {
            break;
        };
        queue.done(&key);
    }
    let secs = start.elapsed().as_secs_f64();
    queue.shut_down();
    drop(keys);
    Report {
        workload: "W1",
        items: n as u64,
        secs,
        extra: vec![],
    }
}

/// W1 on the floor: a `VecDeque` plus a `HashSet`, one thread, no locks.
fn w1_floor<S: BuildHasher>(scale: Option<f64>, hasher: S) -> Report {
    let n = scaled(1_000_000, scale);
    let keys = keys("ns/name-", n);
    let mut queue: VecDeque<Key> = VecDeque::new();
    let mut dirty: HashSet<Key, S> = HashSet::with_hasher(hasher);
    let start = Instant::now();
    for key in &keys {
        if dirty.insert(key.clone()) {
            queue.push_back(key.clone());
        }
    }
    let mut got = 0u64;
    while let Some(key) = queue.pop_front() {
        dirty.remove(&key);
        got += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(keys);
    Report {
        workload: "W1",
        items: got,
        secs,
        extra: vec![],
    }
}

/// When the consumers of a producers-and-consumers run start (WORKLOADS.md's W2 against W2m and W3).
#[derive(Clone, Copy, PartialEq, Debug)]
enum ConsumersStart {
    /// With the clock, so they `get` while the producers add (W2m, W3).
    WithProducers,
    /// Once every producer has returned and `producers_secs` is recorded (W2 since 2026-11-28): the
    /// adds then race no consumer, so adds/s measures the queue, not how far the consumers lag.
    AfterProducers,
}

/// What one producers-and-consumers run measured.
struct Drained {
    /// Keys handed out by `get`, over all consumers.
    items: u64,
    /// Clock start → the last `done` of any consumer.
    secs: f64,
    /// Clock start → the last producer returned.
    producers_secs: f64,
}

/// Consumers for W2/W2m/W3: each waits at `start`, then `get` → `done` until shutdown; returns
/// (items, time of its last `done`).
fn spawn_consumers(
    queue: &WorkQueue<Key>,
    n: usize,
    start: &Arc<Barrier>,
) -> Vec<thread::JoinHandle<(u64, Option<Instant>)>> {
    (0..n)
        .map(|_| {
            let queue = queue.clone();
            let start = Arc::clone(start);
            thread::spawn(move || {
                start.wait();
                let mut items = 0u64;
                let mut last_done = None;
                while let Some(key) = queue.get_blocking() {
                    queue.done(&key);
                    last_done = Some(Instant::now());
                    items += 1;
                }
                (items, last_done)
            })
        })
        .collect()
}

/// Runs producers (each adding its own prepared key list) and consumers as W2, W2m and W3 define.
///
/// Every thread is created before the clock starts and waits at a barrier. With
/// [`ConsumersStart::AfterProducers`] the consumers wait at a second barrier instead, which the
/// main thread passes once the producers have returned and `producers_secs` is read; either way the
/// main thread then calls `shut_down` and the consumers drain what is left.
fn produce_and_consume(
    streams: Vec<Vec<Key>>,
    consumers: usize,
    consumers_start: ConsumersStart,
) -> Result<Drained, String> {
    let queue: WorkQueue<Key> = WorkQueue::new();
    let with_producers = consumers_start == ConsumersStart::WithProducers;
    let clock_parties = streams.len() + 1 + if with_producers { consumers } else { 0 };
    let clock = Arc::new(Barrier::new(clock_parties));
    let after_producers = Arc::new(Barrier::new(consumers + 1));
    let consumer_gate = if with_producers {
        &clock
    } else {
        &after_producers
    };
    let consumer_threads = spawn_consumers(&queue, consumers, consumer_gate);
    let producer_threads: Vec<_> = streams
        .into_iter()
        .map(|stream| {
            let queue = queue.clone();
            let clock = Arc::clone(&clock);
            thread::spawn(move || {
                clock.wait();
                for key in &stream {
                    queue.add(key.clone());
                }
                stream // kept alive until the clock stops
            })
        })
        .collect();
    let start = Instant::now();
    clock.wait();
    let mut streams = Vec::with_capacity(producer_threads.len());
    for producer in producer_threads {
        streams.push(producer.join().map_err(|_| "a producer thread panicked")?);
    }
    let producers_secs = start.elapsed().as_secs_f64();
    if !with_producers {
        after_producers.wait();
    }
    queue.shut_down();
    let mut items = 0;
    let mut end = start;
    for consumer in consumer_threads {
        let (n, last) = consumer.join().map_err(|_| "a consumer thread panicked")?;
        items += n;
        end = end.max(last.unwrap_or(start));
    }
    drop(streams);
    Ok(Drained {
        items,
        secs: (end - start).as_secs_f64(),
        producers_secs,
    })
}

/// W2's key space: `ns/name-0` … `ns/name-9999` (not scaled by `--scale`).
const W2_SPACE: usize = 10_000;

/// The four producers' streams of W2 and W2m (250,000 draws each from SplitMix64 seeded 1000 + p),
/// and how many distinct keys they hold (10,000 at full scale).
fn w2_streams(scale: Option<f64>) -> (Vec<Vec<Key>>, u64) {
    let space = keys("ns/name-", W2_SPACE);
    let per_producer = scaled(250_000, scale);
    let mut drawn = vec![false; W2_SPACE];
    let streams = (0..4u64)
        .map(|p| {
            let mut rng = SplitMix64(1000 + p);
            (0..per_producer)
                .map(|_| {
                    let i = (rng.next() % W2_SPACE as u64) as usize;
                    drawn[i] = true;
                    space[i].clone()
                })
                .collect()
        })
        .collect();
    let distinct = drawn.iter().filter(|&&d| d).count() as u64;
    (streams, distinct)
}

/// The JSON extras W2 and W2m share.
fn w2_extra(adds: u64, drained: &Drained) -> Vec<(&'static str, String)> {
    let adds = adds as f64;
    vec![
        ("adds", json_number(adds)),
        ("adds_per_sec", json_number(adds / drained.producers_secs)),
        ("dedup_ratio", json_number(adds / drained.items as f64)),
        ("producers_secs", json_number(drained.producers_secs)),
    ]
}

/// W2 — dedup storm: 4 producers × 250,000 adds over 10,000 keys with no consumer running; then 4
/// consumers drain every key exactly once (checked: items = 10,000, or the distinct keys drawn
/// under `--scale`).
fn w2(scale: Option<f64>) -> Result<Report, String> {
    let (streams, distinct) = w2_streams(scale);
    if scale.is_none() && distinct != W2_SPACE as u64 {
        return Err(format!(
            "the draws cover {distinct} keys, expected {W2_SPACE}"
        ));
    }
    let adds: u64 = streams.iter().map(|s| s.len() as u64).sum();
    let drained = produce_and_consume(streams, 4, ConsumersStart::AfterProducers)?;
    if drained.items != distinct {
        return Err(format!(
            "handed out {} keys, expected each of {distinct} exactly once",
            drained.items
        ));
    }
    Ok(Report {
        workload: "W2",
        items: drained.items,
        secs: drained.secs,
        extra: w2_extra(adds, &drained),
    })
}

/// W2m — the old mixed W2: the same adds while 4 consumers `get` → `done`; `items` is however
/// many the queue coalesced into (no check).
fn w2m(scale: Option<f64>) -> Result<Report, String> {
    let (streams, _distinct) = w2_streams(scale);
    let adds: u64 = streams.iter().map(|s| s.len() as u64).sum();
    let drained = produce_and_consume(streams, 4, ConsumersStart::WithProducers)?;
    Ok(Report {
        workload: "W2m",
        items: drained.items,
        secs: drained.secs,
        extra: w2_extra(adds, &drained),
    })
}

/// W3 — contended: 8 producers × 125,000 unique keys, 8 consumers.
fn w3(scale: Option<f64>) -> Result<Report, String> {
    let per_producer = scaled(125_000, scale);
    let streams: Vec<Vec<Key>> = (0..8)
        .map(|p| keys(&format!("ns/p{p}-"), per_producer))
        .collect();
    let expected = (8 * per_producer) as u64;
    let drained = produce_and_consume(streams, 8, ConsumersStart::WithProducers)?;
    if drained.items != expected {
        return Err(format!(
            "processed {} keys, expected {expected}",
            drained.items
        ));
    }
    Ok(Report {
        workload: "W3",
        items: drained.items,
        secs: drained.secs,
        extra: vec![("producers_secs", json_number(drained.producers_secs))],
    })
}

/// W4 — delaying: 100,000 `add_after` with uniform delays in [0, 1 s], one consumer; lateness.
fn w4(scale: Option<f64>) -> Report {
    let n = scaled(100_000, scale);
    let keys = keys("ns/name-", n);
    let mut rng = SplitMix64(2000);
    let delays: Vec<u64> = (0..n).map(|_| rng.next() % 1_000_000_001).collect();
    // due[i] in ns since the clock started, written by the producer before it adds key i.
    let due: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let queue: WorkQueue<Key> = WorkQueue::new();
    let barrier = Arc::new(Barrier::new(2));
    let start_cell = Arc::new(Mutex::new(None::<Instant>));
    let consumer = {
        let (queue, barrier, due, start_cell) = (
            queue.clone(),
            Arc::clone(&barrier),
            Arc::clone(&due),
            Arc::clone(&start_cell),
        );
        thread::spawn(move || {
            barrier.wait();
            let start = start_cell.lock().expect("start").expect("clock started");
            let mut lateness_ns: Vec<i64> = Vec::with_capacity(n);
            let mut last_get = start;
            for _ in 0..n {
                let Some(key) = queue.get_blocking() else {
                    break;
                };
                last_get = Instant::now();
                let got = (last_get - start).as_nanos() as i64;
                let i: usize = key
                    .rsplit('-')
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("key suffix");
                lateness_ns.push(got - due[i].load(Ordering::Acquire) as i64);
                queue.done(&key);
            }
            (lateness_ns, (last_get - start).as_secs_f64())
        })
    };
    let start = Instant::now();
    *start_cell.lock().expect("start") = Some(start);
    barrier.wait();
    for (i, key) in keys.iter().enumerate() {
        let due_ns = (start.elapsed().as_nanos() as u64) + delays[i];
        due[i].store(due_ns, Ordering::Release);
        queue.add_after(key.clone(), Duration::from_nanos(delays[i]));
    }
    let (mut lateness, secs) = consumer.join().expect("consumer thread");
    queue.shut_down();
    lateness.sort_unstable();
    let ms = |ns: i64| ns as f64 / 1e6;
    let rank = |p: f64| lateness[((p * lateness.len() as f64).ceil() as usize).saturating_sub(1)];
    let mean = lateness.iter().map(|&x| x as f64).sum::<f64>() / lateness.len() as f64;
    Report {
        workload: "W4",
        items: lateness.len() as u64,
        secs,
        extra: vec![
            ("p50_ms", json_number(ms(rank(0.50)))),
            ("p99_ms", json_number(ms(rank(0.99)))),
            ("max_ms", json_number(ms(*lateness.last().unwrap_or(&0)))),
            ("min_ms", json_number(ms(*lateness.first().unwrap_or(&0)))),
            ("mean_ms", json_number(mean / 1e6)),
        ],
    }
}

/// W5 — rate-limited retry: 100,000 keys (since 2026-11-28) each fail five times (exponential
/// backoff from 1 µs), then succeed; checked: 600,000 gets and 100,000 successes.
fn w5(scale: Option<f64>) -> Result<Report, String> {
    let n = scaled(100_000, scale);
    let keys = keys("ns/name-", n);
    let base = Duration::from_micros(1);
    let queue: WorkQueue<Key> = WorkQueue::builder()
        .rate_limiter(ExponentialFailureRateLimiter::new(
            base,
            Duration::from_secs(1),
        ))
        .build();
    let barrier = Arc::new(Barrier::new(5));
    let successes = Arc::new(AtomicUsize::new(0));
    let end = Arc::new(Mutex::new(None::<Instant>));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, barrier, successes, end) = (
                queue.clone(),
                Arc::clone(&barrier),
                Arc::clone(&successes),
                Arc::clone(&end),
            );
            thread::spawn(move || {
                barrier.wait();
                let mut gets = 0u64;
                while let Some(key) = queue.get_blocking() {
                    gets += 1;
                    if queue.num_requeues(&key) < 5 {
                        queue.add_rate_limited(key.clone());
                        queue.done(&key);
                    } else {
                        queue.forget(&key);
                        queue.done(&key);
                        if successes.fetch_add(1, Ordering::SeqCst) + 1 == n {
                            *end.lock().expect("end") = Some(Instant::now());
                            queue.shut_down();
                        }
                    }
                }
                gets
            })
        })
        .collect();
    let start = Instant::now();
    barrier.wait();
    for key in &keys {
        queue.add(key.clone());
    }
    let gets: u64 = consumers
        .into_iter()
        .map(|t| t.join().expect("consumer thread"))
        .sum();
    let end = end
        .lock()
        .expect("end")
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
            ("successes", json_number(successes as f64)),
            ("base", "\"1us\"".to_string()),
            ("base_ns", json_number(base.as_nanos() as f64)),
        ],
    })
}
