//! Load benchmark of the embedded API server (issue 4): create N realistic Pods through the client,
//! open W watchers on all pods, then write R updates per second for S seconds. Every watcher must see
//! every write (a watcher the server closes for falling behind resumes from its last resourceVersion,
//! as a real client would); the run fails otherwise.
//!
//! ```text
//! cargo run --release -p ferrokube-examples --bin bench_apiserver -- [--pods 50000] [--watchers 20]
//!     [--rate 1000] [--seconds 30] [--history 10000]
//! ```
//!
//! Server, clients and watchers share one process, so the RSS printed covers all of them (the
//! watchers decode every event into a `Pod`).

use ferrokube_examples::shared::realistic_pod;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferrokube::api::{Patch, PatchParams, PostParams, WatchParams};
use ferrokube::apiserver::ApiServer;
use ferrokube::watch::WatchEvent;
use ferrokube::{Api, Client, Config};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;
use serde_json::json;

/// The command line.
#[derive(clap::Parser, Debug)]
#[command(
    name = "bench_apiserver",
    about = "Load benchmark of the embedded API server: N Pods, W watchers on all of them, R updates \
             a second for S seconds; every watcher must see every write.",
    args_override_self = true
)]
struct Cli {
    /// Pods created first.
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    pods: u64,
    /// Watchers on all pods.
    #[arg(long, value_name = "W", default_value_t = 20)]
    watchers: usize,
    /// Updates per second.
    #[arg(long, value_name = "R", default_value_t = 1_000)]
    rate: u64,
    /// How long to write, in seconds.
    #[arg(long, value_name = "S", default_value_t = 30)]
    seconds: u64,
    /// The server's watch history (changes kept).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    history: usize,
}

fn rss_mib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
        / 1024
}

/// One watcher: every MODIFIED resourceVersion it saw, and how often it had to resume.
#[derive(Default)]
struct Seen {
    versions: Mutex<HashSet<u64>>,
    resumes: AtomicU64,
    expired: AtomicU64,
}

async fn watch_all(api: Api<Pod>, from: u64, seen: Arc<Seen>) {
    let mut last = from;
    loop {
        let params = WatchParams::default();
        let mut stream = match api.watch(&params, &last.to_string()).await {
            Ok(stream) => stream,
            Err(e) => {
                eprintln!("watch failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Modified(pod)) => {
                    let rv = pod
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    seen.versions.lock().insert(rv);
                    last = last.max(rv);
                }
                Ok(WatchEvent::Bookmark(b)) => {
                    last = last.max(b.resource_version.parse().unwrap_or(0));
                }
                Ok(WatchEvent::Error(e)) => {
                    eprintln!("watch error: {e}");
                    seen.expired.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("watch stream error: {e}");
                    break;
                }
            }
        }
        seen.resumes.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::main]
async fn main() {
    let cli = <Cli as clap::Parser>::parse();
    let (pods, watchers, rate, seconds, history) =
        (cli.pods, cli.watchers, cli.rate, cli.seconds, cli.history);
    let server = ApiServer::new()
        .history(history)
        .start()
        .await
        .expect("server starts");
    let mut config = Config::new(server.url().parse().expect("url"));
    config.qps = None;
    let client = Client::new(config).expect("client");
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    println!("baseline RSS {} MiB", rss_mib("VmRSS:"));

    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut creators = Vec::new();
    for _ in 0..32 {
        let (api, next) = (api.clone(), next.clone());
        creators.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= pods {
                    return;
                }
                let pod = realistic_pod::pod(&format!("pod-{i}"), i);
                api.create(&PostParams::default(), &pod)
                    .await
                    .expect("create");
            }
        }));
    }
    for creator in creators {
        creator.await.expect("creator");
    }
    let took = started.elapsed().as_secs_f64();
    println!(
        "created {pods} pods in {took:.1} s: {:.0} creates/s; RSS {} MiB, objects {}",
        pods as f64 / took,
        rss_mib("VmRSS:"),
        server.store().object_count()
    );

    let from = server.store().revision();
    let everywhere: Api<Pod> = Api::all(client.clone());
    let seen: Vec<Arc<Seen>> = (0..watchers).map(|_| Arc::new(Seen::default())).collect();
    let mut watch_tasks = Vec::new();
    for s in &seen {
        watch_tasks.push(tokio::spawn(watch_all(everywhere.clone(), from, s.clone())));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let written = Arc::new(Mutex::new(HashSet::new()));
    let writers = 8;
    let per_writer = rate / writers;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (api, written) = (api.clone(), written.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_writer as f64));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            for n in 0..per_writer * seconds {
                tick.tick().await;
                let i = (n * writers + w) % pods;
                let patch = json!({"metadata": {"annotations": {"bench/step": n.to_string()}}});
                let patched = api
                    .patch(
                        &format!("pod-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .expect("patch");
                let rv = patched
                    .metadata
                    .resource_version
                    .and_then(|v| v.parse().ok());
                written.lock().insert(rv.unwrap_or(0));
            }
        }));
    }
    let mut peak = 0;
    let mut samples = Vec::new();
    while !tasks.iter().all(|t| t.is_finished()) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = rss_mib("VmRSS:");
        peak = peak.max(now);
        samples.push(now);
    }
    let every_5s: Vec<String> = samples.iter().step_by(5).map(|m| m.to_string()).collect();
    println!("RSS every 5 s during writes (MiB): {}", every_5s.join(" "));
    let took = started.elapsed().as_secs_f64();
    let writes = written.lock().len();
    println!(
        "{writes} writes in {took:.1} s: {:.0} writes/s (target {rate}/s)",
        writes as f64 / took
    );

    let deadline = Instant::now() + Duration::from_secs(120);
    let wanted = written.lock().clone();
    loop {
        let behind = seen
            .iter()
            .filter(|s| !wanted.is_subset(&s.versions.lock()))
            .count();
        if behind == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        peak = peak.max(rss_mib("VmRSS:"));
    }
    let caught_up = started.elapsed().as_secs_f64();
    let mut complete = 0;
    for s in &seen {
        let versions = s.versions.lock();
        if wanted.is_subset(&versions) {
            complete += 1;
        }
    }
    let resumes: u64 = seen.iter().map(|s| s.resumes.load(Ordering::Relaxed)).sum();
    let expired: u64 = seen.iter().map(|s| s.expired.load(Ordering::Relaxed)).sum();
    let delivered = writes as f64 * watchers as f64;
    println!(
        "{complete}/{watchers} watchers saw all {writes} writes; {resumes} resumes after the server closed a slow watcher, {expired} expired; {:.0} events/s delivered over the run",
        delivered / caught_up
    );
    println!(
        "RSS peak during writes {peak} MiB, now {} MiB, high-water {} MiB",
        rss_mib("VmRSS:"),
        rss_mib("VmHWM:")
    );
    for task in watch_tasks {
        task.abort();
    }
    if complete != watchers {
        eprintln!("FAILED: a watcher missed events");
        std::process::exit(1);
    }
}
