//! Leader-election benchmark: client-go v0.37's `tools/leaderelection` (and, as history, v1.20's)
//! against `ferrokube::leader`, on the real kube-apiserver, in the same run, with the same settings
//! (protocol and results: benches/peers/LEADER.md).
//!
//! ```text
//! scripts/bench-leader.sh [--reps 10] [--idle-reps 3] [--idle-secs 60]   # does all of the below
//!
//! scripts/kube-apiserver.sh up && eval "$(scripts/kube-apiserver.sh env)"
//! benches/peers/client-go-v0.37/build.sh leader                          # the Go candidate
//! scripts/build-client-go-leader.sh                                      # v1.20's (--impls client-go)
//! cargo build --release -p ferrokube-examples --bin leader_candidate --bin bench_leader
//! target/release/bench_leader [--reps 10] [--idle-reps 3] [--idle-secs 60]
//!     [--impls client-go-v0.37,ferrokube] [--lease-duration 15s] [--renew-deadline 10s]
//!     [--retry-period 2s] [--settle-ms 3000] [--namespace leader-bench]
//!     [--client-go-v037 PATH] [--client-go PATH] [--ferrokube PATH] [--kubeconfig FILE]
//!     [--out FILE.jsonl]
//! ```
//!
//! Implementations: `client-go-v0.37` (`benches/peers/client-go-v0.37/leader/main.go`), `client-go`
//! (v1.20, `benches/peers/client-go-leader/main.go`, the earlier runs' peer) and `ferrokube`.
//! Every candidate is a process of its own (client-go v0.37: `benches/peers/client-go-v0.37/leader/main.go`;
//! ferrokube: `examples/src/bin/leader_candidate.rs`), started with the same flags, and prints one JSON line
//! per event on stdout (`started_leading`, `stopped_leading`, `new_leader`) stamped with its wall
//! clock in unix nanoseconds. All run on this machine, so those stamps and the driver's own are on
//! one clock.
//!
//! 1. **Drills**, `--reps` repetitions, the implementations alternating (odd reps in `--impls`
//!    order, even reps in reverse order). Each repetition of an implementation starts 3 candidates on
//!    a fresh Lease, waits until one leads and the others have reported it as the leader, lets them
//!    run `--settle-ms` plus a random part of a retry period (so that the signal falls at a random
//!    point of the renewal cycle), then (a) SIGKILLs the leader and measures from just before the
//!    `kill` to the next `started_leading` of another candidate, starts a new candidate in its
//!    place, waits and settles again (random part included), then (b) SIGTERMs the leader (a
//!    graceful stop: it releases the Lease) and measures likewise. Then it stops all three and
//!    deletes the Lease.
//! 2. **Requests to hold a Lease**, `--idle-reps` repetitions, alternating likewise, after one
//!    baseline window with no candidate: N candidates (3, then 1) on a fresh Lease, settled, then the
//!    Lease requests the kube-apiserver counted (`apiserver_request_total{resource="leases"}` on its
//!    `/metrics`, by verb and code) over `--idle-secs`. Only one implementation runs at a time, and
//!    nothing else on this server touches Leases (the baseline window shows it; every Lease in the
//!    cluster is listed before and after each window, outside it, and a Lease of someone else's
//!    written meanwhile is flagged), so the delta is the candidates'. With 1 candidate that is what
//!    a lone leader costs; (3-candidate − 1-candidate) / 2 is one follower.
//!
//! Raw JSON lines go to `benches/leader/results-<date>.jsonl`, candidates' stderr to
//! `target/bench-leader/logs/`, and a table to stdout.

use ferrokube_examples::shared::{args, go_duration};

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Parser;
use ferrokube::api::{DeleteParams, ListParams, PostParams};
use ferrokube::client::Call;
use ferrokube::{Api, Client, Config};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

unsafe extern "C" {
    /// libc's kill(2): the signal goes out the moment the driver has taken its timestamp, without
    /// a `kill` process in between.
    fn kill(pid: i32, sig: i32) -> i32;
}

fn send_signal(pid: u32, signal: i32) -> bool {
    // SAFETY: kill(2) takes two integers and touches no memory of ours. The pid is a child this
    // driver started and has not reaped yet (reaping happens in the task that owns the child,
    // which reports the exit; candidates that have exited are not signalled).
    unsafe { kill(pid as i32, signal) == 0 }
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Seconds in a Go-style duration as the candidates take it (`15s`, `500ms`); exits if malformed.
fn duration_seconds(text: &str) -> f64 {
    go_duration::parse(text)
        .unwrap_or_else(|e| panic!("{e}"))
        .as_secs_f64()
}

/// The implementations under test.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    ClientGo,
    ClientGoV037,
    Ferrokube,
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::ClientGo => "client-go",
            Impl::ClientGoV037 => "client-go-v0.37",
            Impl::Ferrokube => "ferrokube",
        }
    }
}

struct Settings {
    kubeconfig: String,
    namespace: String,
    lease_duration: String,
    renew_deadline: String,
    retry_period: String,
    lease_duration_s: f64,
    renew_deadline_s: f64,
    retry_period_s: f64,
    settle: Duration,
    logs: PathBuf,
    client_go: PathBuf,
    client_go_v037: PathBuf,
    ferrokube: PathBuf,
    /// Distinguishes this run's Lease names from earlier runs' on the same server.
    run_id: String,
}

impl Settings {
    fn binary(&self, imp: Impl) -> &PathBuf {
        match imp {
            Impl::ClientGo => &self.client_go,
            Impl::ClientGoV037 => &self.client_go_v037,
            Impl::Ferrokube => &self.ferrokube,
        }
    }
}

/// One line of a candidate's stdout, or the driver's note that the candidate exited.
#[derive(Clone, Debug)]
struct Line {
    identity: String,
    event: String,
    /// `new_leader`: the holder reported; `exited`: the exit status.
    detail: Option<String>,
    unix_nanos: u64,
}

/// A running candidate. Its `Child` lives in the task that waits for it (and reports `exited`).
struct Candidate {
    identity: String,
    pid: u32,
}

/// The candidates of one Lease and what their lines have said so far.
struct Group<'a> {
    settings: &'a Settings,
    imp: Impl,
    lease: String,
    next: usize,
    candidates: Vec<Candidate>,
    tx: mpsc::UnboundedSender<Line>,
    rx: mpsc::UnboundedReceiver<Line>,
    /// The candidate that said `started_leading` last and has not said `stopped_leading` since.
    leader: Option<String>,
    /// The last `started_leading` line.
    last_started: Option<Line>,
    /// Every `started_leading` so far.
    acquisitions: usize,
    /// identity → the leader it last reported (`new_leader`).
    observed: HashMap<String, String>,
    /// identity → when it said `stopped_leading`.
    stopped: HashMap<String, u64>,
    /// identity → (when the driver saw it exit, exit status).
    exited: HashMap<String, (u64, String)>,
}

impl<'a> Group<'a> {
    fn new(settings: &'a Settings, imp: Impl, lease: String) -> Group<'a> {
        let (tx, rx) = mpsc::unbounded_channel();
        Group {
            settings,
            imp,
            lease,
            next: 0,
            candidates: Vec::new(),
            tx,
            rx,
            leader: None,
            last_started: None,
            acquisitions: 0,
            observed: HashMap::new(),
            stopped: HashMap::new(),
            exited: HashMap::new(),
        }
    }

    /// Starts one more candidate with a new identity.
    fn spawn(&mut self) -> Result<(), BoxError> {
        self.next += 1;
        let identity = format!("{}-c{}", self.lease, self.next);
        let s = self.settings;
        let log = std::fs::File::create(s.logs.join(format!("{identity}.log")))?;
        let mut child = Command::new(s.binary(self.imp))
            .args(["--kubeconfig", &s.kubeconfig])
            .args(["--namespace", &s.namespace])
            .args(["--name", &self.lease])
            .args(["--identity", &identity])
            .args(["--lease-duration", &s.lease_duration])
            .args(["--renew-deadline", &s.renew_deadline])
            .args(["--retry-period", &s.retry_period])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("candidate exited at once")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let tx = self.tx.clone();
        let who = identity.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(text)) = lines.next_line().await {
                let Ok(value) = serde_json::from_str::<Value>(&text) else {
                    eprintln!("[driver] {who}: not a JSON line: {text}");
                    continue;
                };
                let field = |name: &str| value.get(name).and_then(Value::as_str).map(String::from);
                let line = Line {
                    identity: field("identity").unwrap_or_else(|| who.clone()),
                    event: field("event").unwrap_or_default(),
                    detail: field("leader"),
                    unix_nanos: value.get("unix_nanos").and_then(Value::as_u64).unwrap_or(0),
                };
                if tx.send(line).is_err() {
                    break;
                }
            }
            // stdout closed: the process is exiting; reap it and say so.
            let status = match child.wait().await {
                Ok(status) => match status.code() {
                    Some(code) => format!("exit {code}"),
                    None => format!(
                        "signal {}",
                        std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
                    ),
                },
                Err(e) => format!("wait failed: {e}"),
            };
            let _ = tx.send(Line {
                identity: who,
                event: "exited".into(),
                detail: Some(status),
                unix_nanos: unix_nanos(),
            });
        });
        self.candidates.push(Candidate { identity, pid });
        Ok(())
    }

    fn process(&mut self, line: Line) {
        match line.event.as_str() {
            "started_leading" => {
                self.leader = Some(line.identity.clone());
                self.acquisitions += 1;
                self.last_started = Some(line);
            }
            "stopped_leading" => {
                if self.leader.as_deref() == Some(line.identity.as_str()) {
                    self.leader = None;
                }
                self.stopped.insert(line.identity, line.unix_nanos);
            }
            "new_leader" => {
                self.observed
                    .insert(line.identity, line.detail.unwrap_or_default());
            }
            "exited" => {
                if self.leader.as_deref() == Some(line.identity.as_str()) {
                    self.leader = None;
                }
                self.candidates.retain(|c| c.identity != line.identity);
                let status = line.detail.unwrap_or_default();
                self.exited.insert(line.identity, (line.unix_nanos, status));
            }
            _ => {}
        }
    }

    /// Handles lines until `done` holds or `timeout` passes; says whether `done` held.
    async fn wait_until(&mut self, timeout: Duration, done: impl Fn(&Self) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(line)) => self.process(line),
                Ok(None) | Err(_) => return done(self),
            }
        }
    }

    /// Handles lines for `period`.
    async fn pass(&mut self, period: Duration) {
        self.wait_until(period, |_| false).await;
    }

    /// A leader leads, and every other running candidate has reported it as the leader.
    fn ready(&self) -> bool {
        let Some(leader) = &self.leader else {
            return false;
        };
        self.candidates
            .iter()
            .all(|c| &c.identity == leader || self.observed.get(&c.identity) == Some(leader))
    }

    /// Waits for [`Group::ready`], then lets the candidates run for the settle time.
    async fn settle(&mut self) -> bool {
        let ready = self
            .wait_until(Duration::from_secs(60), |g| g.ready())
            .await;
        if !ready {
            eprintln!(
                "[driver] {}: not ready after 60 s (leader {:?}, observed {:?}); logs in {}",
                self.lease,
                self.leader,
                self.observed,
                self.settings.logs.display()
            );
        }
        self.pass(self.settings.settle).await;
        ready
    }

    /// One drill: signal the leader, time the next acquisition by another candidate, start a new
    /// candidate in the stopped one's place.
    async fn drill(&mut self, graceful: bool) -> Result<Value, BoxError> {
        let ready = self.settle().await;
        // Then a random part of a retry period, so that the signal falls at a random point of the
        // leader's renewal cycle (and of the followers' polls), as a crash would. Without it the
        // signal comes at the same phase every time: the candidates start together, so "ready +
        // settle" lands ~1 s after a renewal in every repetition.
        let phase = Duration::from_secs_f64(rand::random::<f64>() * self.settings.retry_period_s);
        self.pass(phase).await;
        let old = self.leader.clone().ok_or("no leader to stop")?;
        let pid = self
            .candidates
            .iter()
            .find(|c| c.identity == old)
            .map(|c| c.pid)
            .ok_or("the leader is not running")?;
        let signal = if graceful { SIGTERM } else { SIGKILL };
        let sent = unix_nanos();
        if !send_signal(pid, signal) {
            return Err(format!("kill({pid}, {signal}) failed").into());
        }
        let timeout = Duration::from_secs_f64(
            self.settings.lease_duration_s + self.settings.renew_deadline_s + 30.0,
        );
        let taken = self
            .wait_until(timeout, |g| {
                g.last_started
                    .as_ref()
                    .is_some_and(|l| l.identity != old && l.unix_nanos >= sent)
            })
            .await;
        let new = self
            .last_started
            .clone()
            .filter(|l| taken && l.identity != old);
        // The stopped one's exit (at once after SIGKILL; after its release after SIGTERM).
        let old_name = old.clone();
        if !self
            .wait_until(Duration::from_secs(20), |g| {
                g.exited.contains_key(&old_name)
            })
            .await
        {
            eprintln!("[driver] {old} did not exit within 20 s of the signal; SIGKILL");
            send_signal(pid, SIGKILL);
            self.wait_until(Duration::from_secs(10), |g| {
                g.exited.contains_key(&old_name)
            })
            .await;
        }
        let ms = |at: u64| (at as f64 - sent as f64) / 1e6;
        let (exit_at, exit_status) = self
            .exited
            .get(&old)
            .cloned()
            .map_or((None, None), |(at, s)| (Some(ms(at)), Some(s)));
        let record = json!({
            "kind": "drill",
            "drill": if graceful { "sigterm" } else { "sigkill" },
            "impl": self.imp.name(),
            "lease": self.lease,
            "ready_before": ready,
            "phase_delay_ms": phase.as_secs_f64() * 1e3,
            "old_leader": old,
            "new_leader": new.as_ref().map(|l| l.identity.clone()),
            "signal_unix_nanos": sent,
            "takeover_ms": new.as_ref().map(|l| ms(l.unix_nanos)),
            "complete": new.is_some(),
            // From the signal to the old leader's stopped_leading line (graceful: after its release).
            "stopped_leading_ms": self.stopped.get(&old).map(|&at| ms(at)),
            "exit_seen_ms": exit_at,
            "exit_status": exit_status,
        });
        self.spawn()?;
        Ok(record)
    }

    /// SIGTERM to every candidate; SIGKILL to those still running after 20 s.
    async fn stop_all(&mut self) {
        for c in &self.candidates {
            send_signal(c.pid, SIGTERM);
        }
        if !self
            .wait_until(Duration::from_secs(20), |g| g.candidates.is_empty())
            .await
        {
            for c in &self.candidates {
                eprintln!("[driver] {} ignored SIGTERM for 20 s; SIGKILL", c.identity);
                send_signal(c.pid, SIGKILL);
            }
            self.wait_until(Duration::from_secs(10), |g| g.candidates.is_empty())
                .await;
        }
    }
}

/// Lease requests counted by the kube-apiserver, by `VERB code`.
type Counts = BTreeMap<String, f64>;

struct Scrape {
    requests: Counts,
    /// Long-running requests on Leases open now (watches), from `apiserver_longrunning_gauge` and
    /// `apiserver_registered_watchers`: `apiserver_request_total` counts a watch only when it ends.
    open: Counts,
}

async fn scrape(client: &Client) -> Result<Scrape, BoxError> {
    let call = Call {
        request: http::Request::get("/metrics").body(Bytes::new())?,
        idempotent: true,
        streaming: false,
    };
    let body = client.request_bytes(call).await?;
    let text = String::from_utf8_lossy(&body);
    let mut requests = Counts::new();
    let mut open = Counts::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once('{') else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{key}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let value = value.trim().parse::<f64>().unwrap_or(0.0);
        match name {
            "apiserver_request_total" if label("resource") == "leases" => {
                *requests
                    .entry(format!("{} {}", label("verb"), label("code")))
                    .or_default() += value;
            }
            "apiserver_longrunning_gauge" if label("resource") == "leases" => {
                *open
                    .entry(format!("longrunning {}", label("verb")))
                    .or_default() += value;
            }
            "apiserver_registered_watchers" if label("kind") == "Lease" => {
                *open.entry("registered_watchers".into()).or_default() += value;
            }
            _ => {}
        }
    }
    Ok(Scrape { requests, open })
}

/// name → resourceVersion of every Lease in the cluster.
async fn lease_versions(client: &Client) -> Result<BTreeMap<String, String>, BoxError> {
    let list = Api::<Lease>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .map(|l| {
            (
                format!(
                    "{}/{}",
                    l.metadata.namespace.as_deref().unwrap_or(""),
                    l.metadata.name.as_deref().unwrap_or("")
                ),
                l.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect())
}

/// One idle window: `candidates` candidates of `imp` (none: the baseline) hold a fresh Lease for
/// `window`; the Lease requests the server counted meanwhile.
async fn idle(
    settings: &Settings,
    client: &Client,
    imp: Option<Impl>,
    candidates: usize,
    lease: String,
    window: Duration,
) -> Result<Value, BoxError> {
    let mut group = imp.map(|imp| Group::new(settings, imp, lease.clone()));
    let mut ready = true;
    if let Some(group) = group.as_mut() {
        for _ in 0..candidates {
            group.spawn()?;
        }
        ready = group.settle().await;
    }
    let before_versions = lease_versions(client).await?;
    let acquisitions_before = group.as_ref().map_or(0, |g| g.acquisitions);
    let before = scrape(client).await?;
    let start = Instant::now();
    match group.as_mut() {
        Some(group) => group.pass(window).await,
        None => tokio::time::sleep(window).await,
    }
    let after = scrape(client).await?;
    let seconds = start.elapsed().as_secs_f64();
    let after_versions = lease_versions(client).await?;
    let acquisitions = group.as_ref().map_or(0, |g| g.acquisitions) - acquisitions_before;
    let ours = format!("{}/{}", settings.namespace, lease);
    let foreign: Vec<&String> = after_versions
        .iter()
        .filter(|(name, version)| **name != ours && before_versions.get(*name) != Some(*version))
        .map(|(name, _)| name)
        .collect();
    if let Some(group) = group.as_mut() {
        group.stop_all().await;
    }
    let mut requests = Counts::new();
    let mut by_verb = Counts::new();
    for (key, value) in &after.requests {
        let delta = value - before.requests.get(key).copied().unwrap_or(0.0);
        if delta != 0.0 {
            requests.insert(key.clone(), delta);
            let verb = key.split(' ').next().unwrap_or_default().to_string();
            *by_verb.entry(verb).or_default() += delta;
        }
    }
    let total: f64 = requests.values().fold(0.0, |sum, n| sum + n);
    let per_minute = |n: f64| n * 60.0 / seconds;
    Ok(json!({
        "kind": "idle",
        "impl": imp.map_or("none", Impl::name),
        "lease": lease,
        "candidates": candidates,
        "ready_before": ready,
        "window_s": seconds,
        "requests": requests,
        "by_verb": by_verb,
        "total": total,
        "per_minute": per_minute(total),
        "per_minute_by_verb": by_verb.iter().map(|(v, n)| (v.clone(), per_minute(*n))).collect::<BTreeMap<_, _>>(),
        "open_long_running_after": after.open,
        "leader_changes": acquisitions,
        "foreign_lease_writes": foreign,
    }))
}

/// Odd repetitions run the implementations in `--impls` order, even ones in reverse order.
fn order(impls: &[Impl], rep: u64) -> Vec<Impl> {
    let mut order = impls.to_vec();
    if rep % 2 == 0 {
        order.reverse();
    }
    order
}

fn write_line(file: &mut std::fs::File, record: &Value) {
    println!("{record}");
    writeln!(file, "{record}").expect("write results");
}

/// The driver's command line (durations are Go's, as the candidates take them: `15s`, `1m30s`).
#[derive(Parser, Debug)]
#[command(
    name = "bench_leader",
    about = "Leader-election benchmark: client-go's tools/leaderelection against ferrokube::leader on \
             the real kube-apiserver (benches/peers/LEADER.md; scripts/bench-leader.sh runs it).",
    args_override_self = true
)]
struct Args {
    /// Repetitions of the drills (kill and graceful stop of the leader).
    #[arg(long, value_name = "N", default_value_t = 10)]
    reps: u64,
    /// Repetitions of the idle windows (the requests it takes to hold a Lease).
    #[arg(long, value_name = "N", default_value_t = 3)]
    idle_reps: u64,
    /// Length of an idle window, in seconds.
    #[arg(long, value_name = "S", default_value_t = 60)]
    idle_secs: u64,
    /// Which implementations to run, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "client-go-v0.37,ferrokube")]
    impls: String,
    /// The candidates' --lease-duration.
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    lease_duration: String,
    /// The candidates' --renew-deadline.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    renew_deadline: String,
    /// The candidates' --retry-period.
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    retry_period: String,
    /// How long to let a new leader settle before a drill, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    settle_ms: u64,
    /// The Leases' namespace.
    #[arg(long, value_name = "NS", default_value = "leader-bench")]
    namespace: String,
    /// The client-go v0.37 candidate [default:
    /// $XDG_CACHE_HOME/ferrokube/bin/client-go-v0.37-leader, ~/.cache without it]
    #[arg(long, value_name = "PATH")]
    client_go_v037: Option<PathBuf>,
    /// The client-go v1.20 candidate [default: $XDG_CACHE_HOME/ferrokube/bin/client-go-leader, ~/.cache
    /// without it]
    #[arg(long, value_name = "PATH")]
    client_go: Option<PathBuf>,
    /// The ferrokube candidate [default: leader_candidate beside this program]
    #[arg(long, value_name = "PATH")]
    ferrokube: Option<PathBuf>,
    /// The cluster [default: $KUBECONFIG]
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<String>,
    /// Append the raw JSON lines here [default: benches/leader/results-DATE.jsonl]
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let reps = args.reps;
    let idle_reps = args.idle_reps;
    let idle_secs = args.idle_secs;
    let root = args::repository_root();
    let out = args::results_file(args.out.as_deref(), "leader");
    let kubeconfig = args
        .kubeconfig
        .clone()
        .unwrap_or_else(|| std::env::var("KUBECONFIG").unwrap_or_default());
    if kubeconfig.is_empty() {
        return Err(
            "no kubeconfig: run scripts/bench-leader.sh, or scripts/kube-apiserver.sh up and \
                    eval \"$(scripts/kube-apiserver.sh env)\" first, or pass --kubeconfig"
                .into(),
        );
    }
    let cache = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache")
        });
    let own_dir = std::env::current_exe()?
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let lease_duration = args.lease_duration.clone();
    let renew_deadline = args.renew_deadline.clone();
    let retry_period = args.retry_period.clone();
    let logs = root.join("target/bench-leader/logs");
    std::fs::create_dir_all(&logs)?;
    let settings = Settings {
        kubeconfig: kubeconfig.clone(),
        namespace: args.namespace.clone(),
        lease_duration_s: duration_seconds(&lease_duration),
        renew_deadline_s: duration_seconds(&renew_deadline),
        retry_period_s: duration_seconds(&retry_period),
        lease_duration,
        renew_deadline,
        retry_period,
        settle: Duration::from_millis(args.settle_ms),
        logs,
        client_go: args
            .client_go
            .clone()
            .unwrap_or_else(|| cache.join("ferrokube/bin/client-go-leader")),
        client_go_v037: args
            .client_go_v037
            .clone()
            .unwrap_or_else(|| cache.join("ferrokube/bin/client-go-v0.37-leader")),
        ferrokube: args
            .ferrokube
            .clone()
            .unwrap_or_else(|| own_dir.join("leader_candidate")),
        run_id: format!("{:x}", (unix_nanos() / 1_000_000_000) & 0xffffff),
    };
    let mut impls = Vec::new();
    for name in args.impls.split(',') {
        let imp = match name {
            "client-go" => Impl::ClientGo,
            "client-go-v0.37" => Impl::ClientGoV037,
            "ferrokube" => Impl::Ferrokube,
            other => return Err(format!("unknown implementation {other}").into()),
        };
        if settings.binary(imp).exists() {
            impls.push(imp);
        } else {
            eprintln!(
                "[driver] no {} candidate at {} ({}); running without it",
                name,
                settings.binary(imp).display(),
                match imp {
                    Impl::ClientGo => "build it: scripts/build-client-go-leader.sh",
                    Impl::ClientGoV037 => "build it: benches/peers/client-go-v0.37/build.sh leader",
                    Impl::Ferrokube => {
                        "build it: cargo build --release -p ferrokube-examples --bin leader_candidate"
                    }
                }
            );
        }
    }
    if impls.is_empty() {
        return Err("no candidate binaries".into());
    }

    let mut config = Config::from_kubeconfig_files(&[PathBuf::from(&kubeconfig)], None)?;
    config.qps = None;
    let client = Client::new(config)?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": settings.namespace}}))?;
    if let Err(e) = namespaces.create(&PostParams::default(), &namespace).await
        && !e.is_already_exists()
    {
        return Err(e.into());
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), &settings.namespace);

    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)?;
    let mut results: Vec<Value> = Vec::new();
    let header = json!({
        "kind": "run",
        "run_id": settings.run_id,
        "started_unix": unix_nanos() / 1_000_000_000,
        "impls": impls.iter().map(|i| i.name()).collect::<Vec<_>>(),
        "reps": reps,
        "idle_reps": idle_reps,
        "idle_secs": idle_secs,
        "settle_ms": settings.settle.as_millis() as u64,
        "random_phase": "uniform in [0, retry_period) after the settle, before each signal",
        "lease_duration": settings.lease_duration,
        "renew_deadline": settings.renew_deadline,
        "retry_period": settings.retry_period,
        "candidates": 3,
        "client_go": settings.client_go,
        "client_go_v037": settings.client_go_v037,
        "ferrokube": settings.ferrokube,
        "server_version": client.request_bytes(Call {
            request: http::Request::get("/version").body(Bytes::new())?,
            idempotent: true,
            streaming: false,
        }).await.ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v.get("gitVersion").cloned()),
    });
    write_line(&mut file, &header);

    // 1. Drills.
    for rep in 1..=reps {
        for (position, imp) in order(&impls, rep).into_iter().enumerate() {
            let lease = format!("{}-{}-r{rep}", imp.name(), settings.run_id);
            let mut group = Group::new(&settings, imp, lease.clone());
            eprintln!(
                "[driver] rep {rep}/{reps} {}: drills on Lease {lease}",
                imp.name()
            );
            for _ in 0..3 {
                group.spawn()?;
            }
            for graceful in [false, true] {
                let mut record = match group.drill(graceful).await {
                    Ok(record) => record,
                    Err(e) => json!({
                        "kind": "drill",
                        "drill": if graceful { "sigterm" } else { "sigkill" },
                        "impl": imp.name(),
                        "lease": lease,
                        "complete": false,
                        "error": e.to_string(),
                    }),
                };
                record["rep"] = json!(rep);
                record["position"] = json!(position);
                write_line(&mut file, &record);
                results.push(record);
            }
            group.stop_all().await;
            let _ = leases.delete(&lease, &DeleteParams::default()).await;
        }
    }

    // 2. Requests to hold a Lease.
    if idle_reps > 0 {
        let window = Duration::from_secs(idle_secs);
        eprintln!("[driver] baseline: {idle_secs} s with no candidate");
        let lease = format!("none-{}", settings.run_id);
        let mut record = idle(&settings, &client, None, 0, lease, window).await?;
        record["rep"] = json!(0);
        write_line(&mut file, &record);
        results.push(record);
    }
    for rep in 1..=idle_reps {
        for imp in order(&impls, rep) {
            for candidates in [3, 1] {
                let lease = format!("{}-{}-idle{candidates}-r{rep}", imp.name(), settings.run_id);
                eprintln!(
                    "[driver] idle rep {rep}/{idle_reps} {}: {candidates} candidate(s), {idle_secs} s",
                    imp.name()
                );
                let mut record = idle(
                    &settings,
                    &client,
                    Some(imp),
                    candidates,
                    lease.clone(),
                    Duration::from_secs(idle_secs),
                )
                .await?;
                record["rep"] = json!(rep);
                write_line(&mut file, &record);
                results.push(record);
                let _ = leases.delete(&lease, &DeleteParams::default()).await;
            }
        }
    }

    print_table(&settings, &impls, &results, reps, idle_reps, idle_secs);
    eprintln!("[driver] raw lines: {}", out.display());
    Ok(())
}

fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NAN, f64::max)
}

fn print_table(
    settings: &Settings,
    impls: &[Impl],
    results: &[Value],
    reps: u64,
    idle_reps: u64,
    idle_secs: u64,
) {
    let takeovers = |imp: Impl, drill: &str| -> (Vec<f64>, usize) {
        let records: Vec<&Value> = results
            .iter()
            .filter(|r| r["kind"] == "drill" && r["impl"] == imp.name() && r["drill"] == drill)
            .collect();
        let done: Vec<f64> = records
            .iter()
            .filter_map(|r| r["takeover_ms"].as_f64())
            .collect();
        let failed = records.len() - done.len();
        (done, failed)
    };
    let idle_rates = |imp: Impl, candidates: u64, verb: Option<&str>| -> Vec<f64> {
        results
            .iter()
            .filter(|r| {
                r["kind"] == "idle" && r["impl"] == imp.name() && r["candidates"] == candidates
            })
            .map(|r| match verb {
                None => r["per_minute"].as_f64().unwrap_or(f64::NAN),
                Some(verb) => r["per_minute_by_verb"][verb].as_f64().unwrap_or(0.0),
            })
            .collect()
    };
    let verbs: Vec<String> = {
        let mut verbs: Vec<String> = results
            .iter()
            .filter(|r| r["kind"] == "idle")
            .flat_map(|r| {
                r["by_verb"]
                    .as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect();
        verbs.sort();
        verbs.dedup();
        verbs
    };

    println!();
    println!(
        "leader election: 3 candidates, lease {} / renew {} / retry {}, {reps} reps per drill, \
         idle windows {idle_secs} s x {idle_reps}",
        settings.lease_duration, settings.renew_deadline, settings.retry_period
    );
    let mut header = format!("{:<44}", "figure");
    for imp in impls {
        header.push_str(&format!("{:>17}", imp.name()));
    }
    // The ratio column: ferrokube over the first other implementation of --impls (client-go
    // v0.37 by default), when both ran.
    let ours = impls.iter().position(|&i| i == Impl::Ferrokube);
    let reference = impls.iter().position(|&i| i != Impl::Ferrokube);
    let ratio_of = ours.zip(reference);
    if let Some((_, r)) = ratio_of {
        header.push_str(&format!(
            "{:>28}  goal",
            format!("ferrokube/{}", impls[r].name())
        ));
    }
    println!("{header}");
    let row = |label: &str, values: Vec<f64>, goal: &str| {
        let mut line = format!("{label:<44}");
        for v in &values {
            line.push_str(&format!("{v:>17.1}"));
        }
        if let Some((o, r)) = ratio_of {
            let ratio = values[o] / values[r];
            let verdict = match goal {
                "le" if ratio <= 1.0 => "never slower: yes",
                "le" => "never slower: NO",
                "half" if ratio <= 0.5 => "<= 1/2: yes",
                "half" => "<= 1/2: NO",
                "fewer" if ratio <= 1.0 => "no more requests: yes",
                "fewer" => "no more requests: NO",
                _ => "",
            };
            line.push_str(&format!("{ratio:>28.2}  {verdict}"));
        }
        println!("{line}");
    };
    for (drill, label) in [("sigkill", "SIGKILL"), ("sigterm", "SIGTERM (graceful)")] {
        let per: Vec<(Vec<f64>, usize)> = impls.iter().map(|&i| takeovers(i, drill)).collect();
        let goal_median = if drill == "sigterm" { "half" } else { "le" };
        row(
            &format!("{label} takeover median (ms)"),
            per.iter().map(|(v, _)| median(v)).collect(),
            goal_median,
        );
        row(
            &format!("{label} takeover max (ms)"),
            per.iter().map(|(v, _)| max(v)).collect(),
            "le",
        );
        if per.iter().any(|(_, failed)| *failed > 0) {
            let failures: Vec<String> = impls
                .iter()
                .zip(&per)
                .map(|(i, (_, f))| format!("{} {f}", i.name()))
                .collect();
            println!(
                "  {label}: drills with no takeover: {}",
                failures.join(", ")
            );
        }
    }
    if idle_reps > 0 {
        row(
            "requests/min to hold, 3 candidates (median)",
            impls
                .iter()
                .map(|&i| median(&idle_rates(i, 3, None)))
                .collect(),
            "fewer",
        );
        for verb in &verbs {
            row(
                &format!("  {verb}"),
                impls
                    .iter()
                    .map(|&i| median(&idle_rates(i, 3, Some(verb))))
                    .collect(),
                "",
            );
        }
        row(
            "requests/min, 1 candidate (the leader alone)",
            impls
                .iter()
                .map(|&i| median(&idle_rates(i, 1, None)))
                .collect(),
            "fewer",
        );
        for verb in &verbs {
            row(
                &format!("  {verb}"),
                impls
                    .iter()
                    .map(|&i| median(&idle_rates(i, 1, Some(verb))))
                    .collect(),
                "",
            );
        }
        row(
            "requests/min per follower ((3 - 1) / 2)",
            impls
                .iter()
                .map(|&i| (median(&idle_rates(i, 3, None)) - median(&idle_rates(i, 1, None))) / 2.0)
                .collect(),
            "fewer",
        );
        let open_watches = |imp: Impl, candidates: u64| -> Vec<f64> {
            results
                .iter()
                .filter(|r| {
                    r["kind"] == "idle" && r["impl"] == imp.name() && r["candidates"] == candidates
                })
                .map(|r| {
                    r["open_long_running_after"]["longrunning WATCH"]
                        .as_f64()
                        .unwrap_or(0.0)
                })
                .collect()
        };
        row(
            "Lease watches open at window end, 3 cand.",
            impls.iter().map(|&i| median(&open_watches(i, 3))).collect(),
            "",
        );
        println!(
            "  (a watch enters apiserver_request_total only when it ends, so open ones are not in \
             the request rates above)"
        );
        if let Some(baseline) = results
            .iter()
            .find(|r| r["kind"] == "idle" && r["impl"] == "none")
        {
            println!(
                "baseline (no candidate): {} lease requests in {:.0} s",
                baseline["total"],
                baseline["window_s"].as_f64().unwrap_or(0.0)
            );
        }
        let polluted = results
            .iter()
            .filter(|r| {
                r["kind"] == "idle"
                    && r["foreign_lease_writes"]
                        .as_array()
                        .is_some_and(|a| !a.is_empty())
            })
            .count();
        if polluted > 0 {
            println!("WARNING: {polluted} idle window(s) saw writes to Leases not ours");
        }
    }
}
