//! Leader election (`ferrokube_runtime::leader`) against the embedded API server: one leader among
//! candidates, never two at once (also under churn), takeover after a crash and after a graceful
//! stop, stepping down when renewals fail or hang, the write gate (nothing is sent while not
//! leading, also after a long rate-limit wait), a frozen leader that wakes up and writes nothing,
//! one PUT per renewal, the watch on the one Lease, polling when that watch is broken, foreign
//! edits of the Lease, callbacks, metrics and health.
//!
//! Durations are short (lease 1 s, renew deadline 0.6 s, retry period 0.2 s) to keep the tests
//! fast. Every wait is on a condition with a time limit; where timing is asserted, it is against
//! the instants the elector publishes (the send time of its writes), not against sleeps.

use ferrokube_testkit as common;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_apiserver::WriteFailure;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::Config;
use ferrokube_client::Error;
use ferrokube_client::api::ListParams;
use ferrokube_client::api::Patch;
use ferrokube_client::api::PatchParams;
use ferrokube_client::api::PostParams;
use ferrokube_client::api::WatchParams;
use ferrokube_client::watch::WatchEvent;
use ferrokube_runtime::leader::LeaderElectionError;
use ferrokube_runtime::leader::LeaderElector;
use ferrokube_runtime::leader::LeaderElectorBuilder;
use ferrokube_runtime::leader::LeaderMetrics;
use ferrokube_runtime::leader::LeaderState;
use ferrokube_runtime::leader::Leadership;
use ferrokube_runtime::leader::LostReason;
use ferrokube_runtime::leader::NotLeaderReason;
use ferrokube_runtime::leader::RunOutcome;
use futures_util::StreamExt;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

const NAMESPACE: &str = "default";
const LEASE: &str = "lock";
const LEASE_DURATION: Duration = Duration::from_millis(1000);
const RENEW_DEADLINE: Duration = Duration::from_millis(600);
const RETRY_PERIOD: Duration = Duration::from_millis(200);

async fn server() -> (RunningServer, Client) {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    (server, client)
}

/// A candidate for the test Lease with the short durations.
fn candidate(client: &Client, identity: &str) -> LeaderElectorBuilder {
    LeaderElector::builder(client.clone(), NAMESPACE, LEASE)
        .identity(identity)
        .lease_duration(LEASE_DURATION)
        .renew_deadline(RENEW_DEADLINE)
        .retry_period(RETRY_PERIOD)
}

/// A running elector: its handle, its shutdown switch, its task.
struct Running {
    leadership: Leadership,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<RunOutcome, LeaderElectionError>>,
}

impl Running {
    fn start(elector: LeaderElector) -> Running {
        Running::start_wrapped(elector, |run| run)
    }

    /// Runs the elector's `run` future through `wrap` (e.g. to freeze it).
    fn start_wrapped<W, F>(elector: LeaderElector, wrap: W) -> Running
    where
        W: FnOnce(
            Pin<Box<dyn Future<Output = Result<RunOutcome, LeaderElectionError>> + Send>>,
        ) -> F,
        F: Future<Output = Result<RunOutcome, LeaderElectionError>> + Send + 'static,
    {
        let leadership = elector.leadership();
        let (stop, stopped) = oneshot::channel::<()>();
        let run = Box::pin(async move {
            elector
                .run(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Running {
            leadership,
            stop: Some(stop),
            task: tokio::spawn(wrap(run)),
        }
    }

    /// Fires the shutdown and waits for `run` to return.
    async fn stop(mut self) -> RunOutcome {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.finished().await
    }

    /// Waits for `run` to return by itself.
    async fn finished(self) -> RunOutcome {
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("run returns")
            .expect("run task")
            .expect("run")
    }
}

/// Polls `condition` every millisecond until it holds; panics after `limit`. Returns when it held.
async fn wait_for(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) -> Instant {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(1)).await;
    }
}

/// The candidates that lead now.
fn leaders<'a>(candidates: impl IntoIterator<Item = &'a Leadership>) -> Vec<String> {
    candidates
        .into_iter()
        .filter(|l| l.is_leader())
        .map(|l| l.identity().to_string())
        .collect()
}

/// `(term, since, renewed_at)` of a leading handle.
fn term_of(leadership: &Leadership) -> Option<(u64, Instant, Instant)> {
    match leadership.state() {
        LeaderState::Leading {
            term,
            since,
            renewed_at,
        } => Some((term, since, renewed_at)),
        _ => None,
    }
}

async fn lease(client: &Client) -> Lease {
    Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get(LEASE)
        .await
        .expect("the lease")
}

fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
}

// ---------------------------------------------------------------------------------------------
// A counting proxy in front of the embedded server: what a client really sent.

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// One request the proxy forwarded.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    method: Method,
    path: String,
}

struct Proxy {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Proxy {
    async fn start(upstream: &str) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let upstream = upstream.trim_end_matches('/').to_string();
        let http: hyper_util::client::legacy::Client<_, Incoming> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let (http, log, upstream) = (http.clone(), log.clone(), upstream.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let path = request
                            .uri()
                            .path_and_query()
                            .map(|p| p.to_string())
                            .unwrap_or_default();
                        log.lock().push(Seen {
                            at: Instant::now(),
                            method: request.method().clone(),
                            path: path.clone(),
                        });
                        let (mut parts, body) = request.into_parts();
                        parts.uri = format!("{upstream}{path}").parse().expect("upstream uri");
                        parts.headers.remove(http::header::HOST);
                        let forwarded = http.request(Request::from_parts(parts, body));
                        async move {
                            let response: Response<ProxyBody> = match forwarded.await {
                                Ok(response) => response.map(BodyExt::boxed),
                                Err(_) => Response::builder()
                                    .status(502)
                                    .body(
                                        http_body_util::Empty::<Bytes>::new()
                                            .map_err(|never| match never {})
                                            .boxed(),
                                    )
                                    .expect("response"),
                            };
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                    .await;
                });
            }
        });
        Proxy { url, seen }
    }

    /// A client through the proxy (no rate limit, no retries).
    fn client(&self) -> Client {
        let mut config = Config::new(self.url.parse().expect("proxy url"));
        config.qps = None;
        config.retry.max_retries = 0;
        Client::new(config).expect("client")
    }

    fn since(&self, from: Instant) -> Vec<Seen> {
        self.seen
            .lock()
            .iter()
            .filter(|s| s.at >= from)
            .cloned()
            .collect()
    }

    fn count(&self) -> usize {
        self.seen.lock().len()
    }
}

fn is_write(seen: &Seen) -> bool {
    !matches!(seen.method, Method::GET | Method::HEAD | Method::OPTIONS)
}

// ---------------------------------------------------------------------------------------------
// A future that can be frozen: not polled at all, as a SIGSTOPped process runs nothing.

#[derive(Clone, Default)]
struct Freezer {
    frozen: Arc<AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl Freezer {
    fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
        if let Some(waker) = self.waker.lock().take() {
            waker.wake();
        }
    }

    fn wrap<F: Future>(&self, inner: F) -> Frozen<F> {
        Frozen {
            inner: Box::pin(inner),
            freezer: self.clone(),
        }
    }
}

struct Frozen<F> {
    inner: Pin<Box<F>>,
    freezer: Freezer,
}

impl<F: Future> Future for Frozen<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if this.freezer.frozen.load(Ordering::SeqCst) {
            *this.freezer.waker.lock() = Some(cx.waker().clone());
            // Re-checked after the waker is stored, so a thaw in between is not missed.
            if this.freezer.frozen.load(Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        this.inner.as_mut().poll(cx)
    }
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_one_of_three_candidates_acquires() {
    let (_server, client) = server().await;
    let candidates: Vec<Running> = ["a", "b", "c"]
        .into_iter()
        .map(|id| Running::start(candidate(&client, id).build().expect("builds")))
        .collect();
    let handles: Vec<&Leadership> = candidates.iter().map(|c| &c.leadership).collect();
    wait_for("a leader", Duration::from_secs(5), || {
        leaders(handles.iter().copied()).len() == 1
    })
    .await;
    let leader = leaders(handles.iter().copied()).remove(0);
    assert_eq!(holder(&lease(&client).await), Some(leader.as_str()));
    // The followers learn who leads (by watch or poll).
    wait_for("followers know the leader", Duration::from_secs(5), || {
        handles
            .iter()
            .all(|h| h.leader().as_deref() == Some(leader.as_str()))
    })
    .await;
    // It keeps leading, alone, across several renewals.
    let until = Instant::now() + 3 * RETRY_PERIOD;
    while Instant::now() < until {
        assert_eq!(
            leaders(handles.iter().copied()),
            std::slice::from_ref(&leader)
        );
        sleep(Duration::from_millis(5)).await;
    }
    for candidate in candidates {
        candidate.stop().await;
    }
}

/// On one thread, a snapshot of all handles taken without an await in between is atomic with
/// respect to the electors (their tasks cannot run meanwhile; a gate can only close by time
/// during it), so "two leaders in one snapshot" is a real overlap, not a race of the test.
#[tokio::test(flavor = "current_thread")]
async fn leader_exclusive_at_every_instant_under_churn() {
    let (server, client) = server().await;
    let all: Arc<Mutex<Vec<Leadership>>> = Arc::new(Mutex::new(Vec::new()));
    let mut running: Vec<Running> = Vec::new();
    let mut next_id = 0;
    let mut add = |running: &mut Vec<Running>, all: &Arc<Mutex<Vec<Leadership>>>| {
        next_id += 1;
        let started = Running::start(
            candidate(&client, &format!("c{next_id}"))
                .build()
                .expect("builds"),
        );
        all.lock().push(started.leadership.clone());
        running.push(started);
    };
    for _ in 0..3 {
        add(&mut running, &all);
    }

    // The monitor: a snapshot every millisecond; every term it saw.
    let watching = Arc::new(AtomicBool::new(true));
    let monitor = {
        let (all, watching) = (all.clone(), watching.clone());
        tokio::spawn(async move {
            let mut terms = BTreeSet::new();
            let mut snapshots = 0u64;
            while watching.load(Ordering::SeqCst) {
                {
                    // One synchronous snapshot (see the test's docs).
                    let handles = all.lock();
                    let leading = leaders(handles.iter());
                    assert!(leading.len() <= 1, "two leaders at once: {leading:?}");
                    for handle in handles.iter().filter(|h| h.is_leader()) {
                        if let Some((term, since, _)) = term_of(handle) {
                            terms.insert((since, handle.identity().to_string(), term));
                        }
                    }
                }
                snapshots += 1;
                sleep(Duration::from_millis(1)).await;
            }
            (terms, snapshots)
        })
    };

    // Every term, as the churn saw it: (since, identity, term).
    let mut churned = BTreeSet::new();
    for round in 0..6 {
        let handles: Vec<Leadership> = running.iter().map(|r| r.leadership.clone()).collect();
        wait_for("a leader", Duration::from_secs(5), || {
            leaders(handles.iter()).len() == 1
        })
        .await;
        // Hold it through a few renewals, under the monitor's eyes.
        sleep(3 * RETRY_PERIOD).await;
        let position = running
            .iter()
            .position(|r| r.leadership.is_leader())
            .expect("the leader is running");
        let leader = running.remove(position);
        if let Some((term, since, _)) = term_of(&leader.leadership) {
            churned.insert((since, leader.leadership.identity().to_string(), term));
        }
        if round % 2 == 0 {
            assert_eq!(
                leader.stop().await,
                RunOutcome::ShutdownWhileLeading { released: true }
            );
        } else {
            leader.task.abort();
        }
        if round == 3 {
            // A broken watch on top: every open watch ends now (they reopen by themselves).
            server.close_watches();
        }
        add(&mut running, &all);
    }
    let handles: Vec<Leadership> = running.iter().map(|r| r.leadership.clone()).collect();
    wait_for("a last leader", Duration::from_secs(5), || {
        leaders(handles.iter()).len() == 1
    })
    .await;
    watching.store(false, Ordering::SeqCst);
    let (sampled, snapshots) = monitor.await.expect("monitor: never two leaders");
    let identities: BTreeSet<&str> = churned.iter().map(|(_, id, _)| id.as_str()).collect();
    assert_eq!(
        identities.len(),
        6,
        "each round had a new leader: {churned:?}"
    );
    assert!(
        churned.iter().all(|term| sampled.contains(term)),
        "the monitor watched every term: {churned:?} vs {sampled:?}"
    );
    eprintln!(
        "{} terms churned, {} seen by {snapshots} snapshots of the monitor",
        churned.len(),
        sampled.len()
    );
    for candidate in running {
        candidate.stop().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn leader_killed_is_replaced_after_about_a_lease_duration() {
    let (_server, client) = server().await;
    let first = Running::start(candidate(&client, "first").build().expect("builds"));
    first.leadership.acquired().await.expect("leads");
    let second = Running::start(candidate(&client, "second").build().expect("builds"));
    wait_for(
        "the follower sees the leader",
        Duration::from_secs(5),
        || second.leadership.leader().as_deref() == Some("first"),
    )
    .await;
    sleep(3 * RETRY_PERIOD).await; // a few renewals, so the follower saw one written
    // Killed: no release. On one thread the task cannot renew between this read and the abort.
    let (_, _, last_renewal) = term_of(&first.leadership).expect("leading");
    first.task.abort();
    let killed = Instant::now();
    second.leadership.acquired().await.expect("takes over");
    let taken = Instant::now();
    let (_, since, _) = term_of(&second.leadership).expect("leading");
    let after_renewal = since - last_renewal;
    eprintln!(
        "takeover {:?} after the kill, {after_renewal:?} after the last renewal was sent",
        taken - killed
    );
    assert!(
        after_renewal >= LEASE_DURATION,
        "never before a lease duration since the last renewal: {after_renewal:?}"
    );
    // The watch saw the last renewal as it was written: the takeover is scheduled from it, not
    // from a poll up to 2.2 retry periods later (client-go's worst case adds 440 ms here). One
    // retry period is allowed for a renewal that was already on the wire when the task was
    // aborted: it lands after the kill, and the count starts from it.
    assert!(
        after_renewal < LEASE_DURATION + RETRY_PERIOD + Duration::from_millis(100),
        "{after_renewal:?}"
    );
    assert_eq!(holder(&lease(&client).await), Some("second"));
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_graceful_shutdown_releases_and_hands_over_fast() {
    let (_server, client) = server().await;
    let first = Running::start(candidate(&client, "first").build().expect("builds"));
    first.leadership.acquired().await.expect("leads");
    let second = Running::start(candidate(&client, "second").build().expect("builds"));
    wait_for(
        "the follower sees the leader",
        Duration::from_secs(5),
        || second.leadership.leader().as_deref() == Some("first"),
    )
    .await;
    let transitions_before = lease(&client)
        .await
        .spec
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0);
    let first_leadership = first.leadership.clone();
    let asked = Instant::now();
    assert_eq!(
        first.stop().await,
        RunOutcome::ShutdownWhileLeading { released: true }
    );
    assert!(!first_leadership.is_leader());
    let taken = wait_for("the follower takes over", Duration::from_secs(5), || {
        second.leadership.is_leader()
    })
    .await;
    let handover = taken - asked;
    eprintln!("graceful handover in {handover:?}");
    assert!(
        handover < RETRY_PERIOD,
        "the watch sees the release: well under a retry period, not a poll later ({handover:?})"
    );
    let lease = lease(&client).await;
    assert_eq!(holder(&lease), Some("second"));
    assert_eq!(
        lease.spec.and_then(|s| s.lease_transitions),
        Some(transitions_before + 1)
    );
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_whose_renewals_fail_steps_down_before_the_lease_expires() {
    let (server, client) = server().await;
    let leader = Running::start(candidate(&client, "leader").build().expect("builds"));
    leader.leadership.acquired().await.expect("leads");
    let follower = Running::start(candidate(&client, "follower").build().expect("builds"));
    sleep(2 * RETRY_PERIOD).await;
    let leadership = leader.leadership.clone();
    let (_, _, renewed_before) = term_of(&leadership).expect("leading");

    server
        .faults()
        .fail_writes(1.0, WriteFailure::InternalError);
    let failing = Instant::now();
    let closed = wait_for("the gate closes", Duration::from_secs(3), || {
        !leadership.is_leader()
    })
    .await;
    let closed_after = closed - failing;
    eprintln!("gate closed {closed_after:?} after writes started failing");
    // Renewals were succeeding until `failing`, so the last good one was sent at most a retry
    // period (plus a request) before it; the gate closes a renew deadline after that one.
    assert!(closed >= renewed_before + RENEW_DEADLINE);
    assert!(
        closed_after <= RENEW_DEADLINE + Duration::from_millis(50),
        "{closed_after:?}"
    );
    assert!(
        closed_after < LEASE_DURATION,
        "before any follower may take over"
    );
    assert_eq!(
        leader.finished().await,
        RunOutcome::Lost(LostReason::RenewDeadlinePassed)
    );
    assert!(
        !follower.leadership.is_leader(),
        "nobody can write the lease"
    );

    server
        .faults()
        .fail_writes(0.0, WriteFailure::InternalError);
    follower
        .leadership
        .acquired()
        .await
        .expect("takes over once writes work");
    follower.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_whose_renewals_hang_steps_down_at_the_renew_deadline() {
    let (server, client) = server().await;
    let leader = Running::start(candidate(&client, "leader").build().expect("builds"));
    leader.leadership.acquired().await.expect("leads");
    sleep(2 * RETRY_PERIOD).await;
    let leadership = leader.leadership.clone();
    server.faults().pause(); // every request now waits: a partition, seen from the client
    let paused = Instant::now();
    let closed = wait_for("the gate closes", Duration::from_secs(3), || {
        !leadership.is_leader()
    })
    .await;
    eprintln!("gate closed {:?} after the server hung", closed - paused);
    assert!(closed - paused <= RENEW_DEADLINE + Duration::from_millis(50));
    assert_eq!(
        leader.finished().await,
        RunOutcome::Lost(LostReason::RenewDeadlinePassed),
        "hung renewals are given up at the deadline"
    );
    server.faults().resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_gated_client_sends_no_write_unless_leading() {
    let (server, client) = server().await;
    let proxy = Proxy::start(server.url()).await;
    let elector = candidate(&client, "writer").build().expect("builds");
    let gated = proxy.client().with_write_gate(elector.leadership());
    let maps: Api<ConfigMap> = Api::namespaced(gated.clone(), NAMESPACE);
    let map = |name: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };

    // Not running yet: refused, and nothing reaches the proxy.
    let revision = server.store().revision();
    let refused = maps
        .create(&PostParams::default(), &map("early"))
        .await
        .expect_err("not the leader");
    assert!(refused.is_not_leader(), "{refused}");
    match &refused {
        Error::NotLeader { method, source, .. } => {
            assert_eq!(method, "POST");
            assert_eq!(source.reason, NotLeaderReason::Stopped);
        }
        other => panic!("unexpected {other}"),
    }
    let patch = Patch::Merge(json!({"data": {"k": "v"}}));
    for refused in [
        maps.patch("early", &PatchParams::default(), &patch)
            .await
            .map(|_| ()),
        maps.replace("early", &PostParams::default(), &map("early"))
            .await
            .map(|_| ()),
        maps.delete("early", &Default::default()).await.map(|_| ()),
    ] {
        assert!(refused.expect_err("refused").is_not_leader());
    }
    assert_eq!(proxy.count(), 0, "not one request left the client");
    assert_eq!(server.store().revision(), revision, "nothing was written");
    // Reads are never gated.
    assert!(maps.get_opt("early").await.expect("a read").is_none());
    assert_eq!(proxy.count(), 1);

    // Leading: writes go through.
    let running = Running::start(elector);
    running.leadership.acquired().await.expect("leads");
    maps.create(&PostParams::default(), &map("led"))
        .await
        .expect("the leader writes");
    assert_eq!(proxy.count(), 2);

    // Stopped: refused again, nothing sent.
    let leadership = running.leadership.clone();
    running.stop().await;
    let refused = maps
        .create(&PostParams::default(), &map("late"))
        .await
        .expect_err("not the leader any more");
    assert!(refused.is_not_leader());
    assert_eq!(proxy.count(), 2);
    assert!(leadership.check().is_err());
    // The ungated handle of the same client is not affected.
    Api::<ConfigMap>::namespaced(gated.without_write_gate(), NAMESPACE)
        .create(&PostParams::default(), &map("ungated"))
        .await
        .expect("ungated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_gate_is_checked_again_after_a_rate_limit_wait() {
    let (server, client) = server().await;
    let proxy = Proxy::start(server.url()).await;
    let running = Running::start(candidate(&client, "writer").build().expect("builds"));
    running.leadership.acquired().await.expect("leads");
    // One request per second, burst 1: the second request waits about a second for its token.
    let mut config = Config::new(proxy.url.parse().expect("url"));
    config.qps = Some(1.0);
    config.burst = 1;
    let gated = Client::new(config)
        .expect("client")
        .with_write_gate(running.leadership.clone());
    let maps: Api<ConfigMap> = Api::namespaced(gated, NAMESPACE);
    maps.get_opt("x").await.expect("spends the token");
    let write = tokio::spawn(async move {
        maps.create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("queued".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
    });
    sleep(Duration::from_millis(100)).await; // the write is queued for its token
    assert!(!write.is_finished());
    // Leadership ends while the write is queued (it was made while leading).
    running.stop().await;
    let result = write.await.expect("task");
    assert!(
        result.as_ref().is_err_and(Error::is_not_leader),
        "judged when it leaves, not when it was made: {result:?}"
    );
    assert_eq!(
        proxy.count(),
        1,
        "only the read reached the server: {:?}",
        proxy.since(Instant::now() - Duration::from_secs(60))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_frozen_past_its_deadline_wakes_and_writes_nothing() {
    let (server, client) = server().await;
    let proxy = Proxy::start(server.url()).await;
    let freezer = Freezer::default();
    // The frozen candidate talks through the proxy, so everything it sends is seen.
    let frozen = Running::start_wrapped(
        candidate(&proxy.client(), "frozen")
            .build()
            .expect("builds"),
        |run| freezer.wrap(run),
    );
    frozen.leadership.acquired().await.expect("leads");
    let other = Running::start(candidate(&client, "other").build().expect("builds"));
    sleep(2 * RETRY_PERIOD).await;

    freezer.freeze(); // SIGSTOP: the elector runs no more; only the clock moves
    let gate = frozen.leadership.clone();
    let closed = wait_for(
        "the frozen leader's gate closes",
        Duration::from_secs(3),
        || !gate.is_leader(),
    )
    .await;
    // The state still says leading (nobody told it otherwise): the gate closed on time alone.
    let Some((_, _, last_renewal)) = term_of(&gate) else {
        panic!("a frozen elector cannot change its state");
    };
    assert!(matches!(
        gate.check().map_err(|e| e.reason),
        Err(NotLeaderReason::DeadlinePassed { .. })
    ));
    assert!(closed >= last_renewal + RENEW_DEADLINE);
    assert!(
        closed - (last_renewal + RENEW_DEADLINE) < Duration::from_millis(50),
        "closed as the deadline passed: {:?} late",
        closed - (last_renewal + RENEW_DEADLINE)
    );

    other
        .leadership
        .acquired()
        .await
        .expect("the other takes over");
    let (_, other_since, _) = term_of(&other.leadership).expect("leading");
    assert!(
        other_since >= last_renewal + LEASE_DURATION,
        "the takeover waited for the lease to expire"
    );
    assert!(other_since > closed, "the frozen gate had closed before");

    let thawed = Instant::now();
    freezer.thaw(); // SIGCONT, long past the deadline
    assert_eq!(
        frozen.finished().await,
        RunOutcome::Lost(LostReason::RenewDeadlinePassed)
    );
    let sent = proxy.since(thawed);
    assert_eq!(
        sent.iter().filter(|s| is_write(s)).count(),
        0,
        "the woken leader wrote: {sent:?}"
    );
    assert!(sent.is_empty(), "not even a read: {sent:?}");
    assert!(other.leadership.is_leader());
    assert_eq!(holder(&lease(&client).await), Some("other"));
    other.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_holds_the_lease_with_one_put_per_renewal() {
    let (server, _client) = server().await;
    let proxy = Proxy::start(server.url()).await;
    let running = Running::start(candidate(&proxy.client(), "lean").build().expect("builds"));
    running.leadership.acquired().await.expect("leads");
    let from = Instant::now();
    let window = Duration::from_secs(2);
    sleep(window).await; // the measuring window, not an assertion by sleep
    let sent = proxy.since(from);
    let puts = sent.iter().filter(|s| s.method == Method::PUT).count();
    eprintln!(
        "{} requests in {window:?} while leading ({} a minute at the default 2 s retry period)",
        sent.len(),
        sent.len() as f64 / (window.as_secs_f64() / RETRY_PERIOD.as_secs_f64()) * 30.0
    );
    assert!(
        sent.iter()
            .all(|s| s.method == Method::PUT && s.path.contains("/leases/lock")),
        "renewals only, and no GET before them: {sent:?}"
    );
    let expected = (window.as_millis() / RETRY_PERIOD.as_millis()) as usize;
    assert!(
        (expected - 2..=expected + 1).contains(&puts),
        "one PUT per retry period: {puts} in {window:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_lease_watch_with_a_name_field_selector_works_on_the_embedded_server() {
    let (_server, client) = server().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let make = |name: &str| Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("x".into()),
            ..LeaseSpec::default()
        }),
    };
    leases
        .create(&PostParams::default(), &make("a"))
        .await
        .expect("a");
    leases
        .create(&PostParams::default(), &make("b"))
        .await
        .expect("b");
    let params = WatchParams::default().fields("metadata.name=a");
    // From "": the current state of the selected Lease only.
    let mut stream = leases.watch(&params, "").await.expect("watch");
    let first = stream.next().await.expect("an event").expect("decodes");
    assert!(matches!(&first, WatchEvent::Added(l) if l.metadata.name.as_deref() == Some("a")));
    let patch = Patch::Merge(json!({"spec": {"holderIdentity": "y"}}));
    leases
        .patch("b", &PatchParams::default(), &patch)
        .await
        .expect("b changes");
    leases
        .patch("a", &PatchParams::default(), &patch)
        .await
        .expect("a changes");
    let next = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("an event in time")
        .expect("an event")
        .expect("decodes");
    assert!(
        matches!(&next, WatchEvent::Modified(l) if l.metadata.name.as_deref() == Some("a")),
        "b's change is filtered out: {next:?}"
    );
    let listed = leases
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_takeover_falls_back_to_polling_when_the_watch_is_broken() {
    let (server, client) = server().await;
    // Watch events arrive 30 s late: as good as no watch.
    server.faults().delay_watches(Duration::from_secs(30));
    let first = Running::start(candidate(&client, "first").build().expect("builds"));
    first.leadership.acquired().await.expect("leads");
    let second = Running::start(candidate(&client, "second").build().expect("builds"));
    wait_for(
        "the follower polls the leader",
        Duration::from_secs(5),
        || second.leadership.leader().as_deref() == Some("first"),
    )
    .await;
    let asked = Instant::now();
    assert_eq!(
        first.stop().await,
        RunOutcome::ShutdownWhileLeading { released: true }
    );
    let taken = wait_for("a takeover by polling", Duration::from_secs(5), || {
        second.leadership.is_leader()
    })
    .await;
    eprintln!("handover by polling in {:?}", taken - asked);
    assert!(
        taken - asked < RETRY_PERIOD.mul_f64(2.2) + Duration::from_millis(200),
        "at the next poll"
    );
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_keeps_leading_through_a_foreign_edit_of_the_lease() {
    let (_server, client) = server().await;
    let running = Running::start(candidate(&client, "keeper").build().expect("builds"));
    running.leadership.acquired().await.expect("leads");
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    // Someone labels the Lease: the leader's next PUT (with its old resourceVersion) gets 409.
    leases
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"edited": "yes"}}})),
        )
        .await
        .expect("edited");
    let edited_at = Instant::now();
    let renewed_before = lease(&client).await.spec.and_then(|s| s.renew_time);
    let until = edited_at + 4 * RETRY_PERIOD;
    while Instant::now() < until {
        assert!(running.leadership.is_leader(), "no step down over a label");
        sleep(Duration::from_millis(2)).await;
    }
    let now = lease(&client).await;
    assert_eq!(holder(&now), Some("keeper"));
    assert_ne!(
        now.spec.and_then(|s| s.renew_time),
        renewed_before,
        "renewed since"
    );
    assert_eq!(
        now.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("edited"))
            .map(String::as_str),
        Some("yes"),
        "the renewal kept the edit"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_steps_down_when_someone_else_takes_the_lease() {
    let (_server, client) = server().await;
    let running = Running::start(candidate(&client, "victim").build().expect("builds"));
    running.leadership.acquired().await.expect("leads");
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    leases
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "intruder"}})),
        )
        .await
        .expect("taken");
    let leadership = running.leadership.clone();
    assert_eq!(
        running.finished().await,
        RunOutcome::Lost(LostReason::TakenOver {
            holder: Some("intruder".into())
        })
    );
    assert!(!leadership.is_leader());
    assert_eq!(
        holder(&lease(&client).await),
        Some("intruder"),
        "not overwritten"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_callbacks_metrics_and_health() {
    let (_server, client) = server().await;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = LeaderMetrics::register(&mut registry);
    let (events, mut seen) = mpsc::unbounded_channel::<String>();
    let (started, stopped, new_leader) = (events.clone(), events.clone(), events.clone());
    let first = candidate(&client, "first")
        .metrics(&metrics)
        .on_started_leading(move |lost| {
            let events = started.clone();
            async move {
                let _ = events.send("started".into());
                lost.await;
                let _ = events.send("lost".into());
            }
        })
        .on_stopped_leading(move || {
            let _ = stopped.send("stopped".into());
        })
        .on_new_leader(move |leader| {
            let _ = new_leader.send(format!("new leader {leader}"));
        })
        .build()
        .expect("builds");
    let gauge = |registry: &prometheus_client::registry::Registry| {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
        text.lines()
            .find(|l| l.starts_with("leader_election_master_status{name=\"lock\"}"))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert!(gauge(&registry).ends_with(" 0"), "0 from the start");
    let running = Running::start(first);
    running.leadership.acquired().await.expect("leads");
    assert!(gauge(&registry).ends_with(" 1"));
    assert!(running.leadership.health_check(Duration::ZERO).is_ok());
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(5), seen.recv())
            .await
            .expect("an event in time")
            .expect("an event")
    };
    assert_eq!(next().await, "new leader first");
    assert_eq!(next().await, "started");
    running.stop().await;
    // The lost future fires when the gate closes, before the release; stopped comes after it.
    let mut rest = vec![next().await, next().await];
    rest.sort();
    assert_eq!(rest, ["lost", "stopped"]);
    assert!(gauge(&registry).ends_with(" 0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_builder_checks_settings_and_refuses_a_second_run() {
    let (_server, client) = server().await;
    let refuse = |builder: LeaderElectorBuilder| builder.build().expect_err("refused");
    assert!(matches!(
        refuse(candidate(&client, "x").renew_deadline(LEASE_DURATION)),
        LeaderElectionError::LeaseDurationNotAboveRenewDeadline { .. }
    ));
    assert!(matches!(
        refuse(candidate(&client, "x").retry_period(Duration::from_millis(500))),
        LeaderElectionError::RenewDeadlineNotAboveRetryPeriod { .. }
    ));
    assert_eq!(
        refuse(candidate(&client, "")),
        LeaderElectionError::EmptyIdentity
    );
    assert!(matches!(
        refuse(LeaderElector::builder(client.clone(), NAMESPACE, "a/b")),
        LeaderElectionError::BadLeaseName { .. }
    ));
    let defaults = LeaderElector::builder(client.clone(), NAMESPACE, LEASE)
        .build()
        .expect("client-go's defaults are valid");
    assert_eq!(
        (
            defaults.timings().lease_duration,
            defaults.timings().renew_deadline,
            defaults.timings().retry_period
        ),
        (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert!(defaults.identity().contains('_'), "host_uuid");

    let elector = Arc::new(candidate(&client, "once").build().expect("builds"));
    let (stop, stopped) = oneshot::channel::<()>();
    let first = tokio::spawn({
        let elector = elector.clone();
        async move {
            elector
                .run(async move {
                    let _ = stopped.await;
                })
                .await
        }
    });
    elector.leadership().acquired().await.expect("leads");
    assert_eq!(
        elector.run(std::future::pending()).await,
        Err(LeaderElectionError::AlreadyRunning)
    );
    let _ = stop.send(());
    assert!(first.await.expect("task").is_ok());
}
