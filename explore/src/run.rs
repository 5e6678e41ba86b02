//! One run: a seed, a fault plan, a controller and a scenario in, a [`RunOutcome`] out.
//!
//! ```text
//!  Explorer::run_plan(plan, scenario, controller)
//!   │ current-thread runtime, paused clock, seeded randomness, virtual wall clock
//!   ├─ embedded server ──change feed──▶ observer: World + invariants after every change
//!   ├─ supervisor: starts incarnation 1 of the controller; on each crash (decided in the tap,
//!   │  per the plan) aborts the dead incarnation and, RESTART_DELAY later, starts the next one
//!   │  with fresh caches (and, for restart-lagging, a lagging replica)
//!   ├─ scenario: each step, then a settle
//!   ├─ finish: time for the faults to pass and the controller to converge
//!   └─ quiet window: the controller must not write; then stop, and judge the end
//! ```
//!
//! [`RunShared`] is what the tap, the outside system and the runner share within a run: the
//! plan, the point counters, the incarnations, the world and what the oracles found.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ferrokube_apiserver::{ApiServer, RunningServer};
use ferrokube_client::Client;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::ExploreError;
use crate::fault::{FaultPlan, LAG_CATCH_UP};
use crate::oracle::{Invariant, Liveness, Violation};
use crate::outside::{OutsideClient, Records};
use crate::shared::{Counts, Incarnation, Lag, PointSeen, RestartOrder, RunShared};
use crate::stale::Staleness;
use crate::tap::Tap;
use crate::trace::{Recorder, Trace, TraceEntry};
use crate::world::{Normalizer, World};

/// The error a step or a controller may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed future, as a [`Step`]'s action returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A step's requests, made through a client of the step's actor.
type ClientAction = Box<dyn FnOnce(Client) -> BoxFuture<Result<(), BoxError>> + Send>;
/// A step's action on the server itself.
type ServerAction = Box<dyn FnOnce(&RunningServer) -> Result<(), BoxError> + Send>;

/// The controller of a run, as the runner keeps it: called once per incarnation.
pub(crate) type ControllerFn = Arc<dyn Fn(ControllerStart) -> BoxFuture<()> + Send + Sync>;

/// How long a crashed controller stays down before its next incarnation starts (virtual time).
pub const RESTART_DELAY: Duration = Duration::from_secs(1);

/// What a step does.
enum Action {
    /// Requests through a client of the step's actor.
    Client(ClientAction),
    /// Something done to the server itself (close watches, compact, set a fault).
    Server(ServerAction),
}

/// One step of a scenario: a description and what it does with its client.
pub struct Step {
    name: String,
    actor: String,
    action: Action,
}

impl Step {
    /// A step of the scenario's user (actor `scenario`): `action` gets a client and does what a
    /// user would (create, edit, delete objects).
    pub fn new<F, Fut>(name: impl Into<String>, action: F) -> Step
    where
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        Step {
            name: name.into(),
            actor: "scenario".into(),
            action: Action::Client(Box::new(move |client| Box::pin(action(client)))),
        }
    }

    /// A step done to the embedded server itself rather than through its API: end every watch
    /// ([`RunningServer::close_watches`]), drop the watch history ([`RunningServer::compact`]),
    /// switch a fault on ([`RunningServer::faults`]). Its actor is `server`; it sends no request,
    /// so only what the clients do about it shows in the trace.
    pub fn on_server<F>(name: impl Into<String>, action: F) -> Step
    where
        F: FnOnce(&RunningServer) -> Result<(), BoxError> + Send + 'static,
    {
        Step {
            name: name.into(),
            actor: "server".into(),
            action: Action::Server(Box::new(action)),
        }
    }

    /// The same step done by another actor: its requests carry `actor` in the trace (e.g.
    /// `intruder` for an edit behind the controller's back).
    pub fn by(mut self, actor: impl Into<String>) -> Step {
        self.actor = actor.into();
        self
    }
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("name", &self.name)
            .field("actor", &self.actor)
            .finish_non_exhaustive()
    }
}

/// The steps a run goes through, in order; after each the runner lets the system settle (see
/// [`Explorer::settle`]).
#[derive(Debug, Default)]
pub struct Scenario {
    steps: Vec<Step>,
}

impl Scenario {
    /// An empty scenario.
    pub fn new() -> Scenario {
        Scenario::default()
    }

    /// The scenario with `step` added at the end.
    pub fn step(mut self, step: Step) -> Scenario {
        self.steps.push(step);
        self
    }
}

/// What each incarnation of the controller gets.
pub struct ControllerStart {
    /// The controller's client: every request it sends is recorded, and passes the fault plan.
    pub client: Client,
    /// Completes when the run is over (or this incarnation has crashed); pass it as the
    /// controller's shutdown signal.
    pub shutdown: BoxFuture<()>,
    /// This incarnation's handle on the outside system.
    pub outside: OutsideClient,
    /// Which incarnation this is: 1, then 2 after the first crash, ...
    pub incarnation: u32,
}

/// What a run gives back.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Every request, event, fault and step, in order.
    pub trace: Trace,
    /// Every point the run passed, in order.
    pub points: Vec<PointSeen>,
    /// The world at the end.
    pub world: World,
    /// What the oracles found (the end-state comparison is the search's, see
    /// [`crate::Exploration`]).
    pub violations: Vec<Violation>,
}

/// Shapes the embedded server of each run before it starts (see [`Explorer::server`]).
type ConfigureServer = Arc<dyn Fn(ApiServer) -> ApiServer + Send + Sync>;

/// Runs a controller and a scenario deterministically, with or without faults. See the
/// [crate docs](crate).
#[derive(Clone)]
pub struct Explorer {
    seed: u64,
    settle: Duration,
    start_grace: Duration,
    finish: Duration,
    quiet: Duration,
    stop_grace: Duration,
    configure: Option<ConfigureServer>,
    /// The CustomResourceDefinitions every run's server serves from its start, as JSON (or why
    /// one could not be turned into JSON: the run then fails to set up, with that reason).
    pub(crate) crds: Vec<Result<serde_json::Value, String>>,
    pub(crate) invariants: Vec<Invariant>,
    pub(crate) liveness: Vec<Liveness>,
    pub(crate) normalizer: Normalizer,
    /// Whether [`Explorer::normalizer`] was called: an [`crate::Exploration`] merging this
    /// runner in keeps its own normalizer otherwise.
    pub(crate) normalizer_set: bool,
    pub(crate) leaves_nothing_behind: bool,
}

impl std::fmt::Debug for Explorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explorer")
            .field("seed", &self.seed)
            .field("settle", &self.settle)
            .field("finish", &self.finish)
            .field("quiet", &self.quiet)
            .field("configured_server", &self.configure.is_some())
            .field("crds", &self.crds.len())
            .field("invariants", &self.invariants)
            .field("liveness", &self.liveness)
            .field("leaves_nothing_behind", &self.leaves_nothing_behind)
            .finish()
    }
}

impl Explorer {
    /// A runner for `seed`: the first step 2 s after the controller starts, a settle of 5 s after
    /// each step, 60 s to finish after the last, a quiet window of 30 s (all virtual time; see
    /// the [crate docs](crate#time-steps-settles-and-fault-windows)).
    pub fn new(seed: u64) -> Explorer {
        Explorer {
            seed,
            settle: Duration::from_secs(5),
            start_grace: Duration::from_secs(2),
            finish: Duration::from_secs(60),
            quiet: Duration::from_secs(30),
            stop_grace: Duration::from_secs(5),
            configure: None,
            crds: Vec::new(),
            invariants: Vec::new(),
            liveness: Vec::new(),
            normalizer: Normalizer::default(),
            normalizer_set: false,
            leaves_nothing_behind: false,
        }
    }

    /// Shapes the embedded server of every run before it starts (e.g. `|server|
    /// server.bookmark_interval(Duration::from_secs(5))`). The same function for every run, so
    /// that runs stay comparable. Faults that need the running server are steps
    /// ([`Step::on_server`]).
    pub fn server(
        mut self,
        configure: impl Fn(ApiServer) -> ApiServer + Send + Sync + 'static,
    ) -> Explorer {
        self.configure = Some(Arc::new(configure));
        self
    }

    /// Serves a custom resource kind from the start of every run, as `crd` (a
    /// CustomResourceDefinition: the derive's `Kind::crd()`, a k8s-openapi object, or JSON)
    /// describes it, so that a controller of that kind lists it from its first request rather
    /// than into a 404. The defaults kube-apiserver fills in are applied; a CRD it would refuse
    /// makes every run fail to set up ([`ExploreError::Setup`]) with the reasons.
    pub fn crd(mut self, crd: impl serde::Serialize) -> Explorer {
        self.crds
            .push(serde_json::to_value(crd).map_err(|error| error.to_string()));
        self
    }

    /// Serves the custom resource kind `K` from the start of every run ([`Explorer::crd`] of
    /// `K::crd()`).
    pub fn custom_resource<K: ferrokube_client::crd::CustomResourceExt>(self) -> Explorer {
        self.crd(K::crd())
    }

    /// How long the runner waits between the controller's start and the first step (default
    /// 2 s of virtual time): long enough for its first lists and watches.
    pub fn start_grace(mut self, grace: Duration) -> Explorer {
        self.start_grace = grace;
        self
    }

    /// How long (virtual time) the runner waits after each step, so that the controller reacts
    /// before the next step (default 5 s). Time is virtual: a long settle costs nothing while
    /// everything is idle.
    pub fn settle(mut self, settle: Duration) -> Explorer {
        self.settle = settle;
        self
    }

    /// The settle after each step (see [`Explorer::settle`]).
    pub(crate) fn settle_time(&self) -> Duration {
        self.settle
    }

    /// How long after the last step the controller has to converge (the fixed-point oracle's
    /// bound), before the quiet window begins. Default 60 s of virtual time.
    pub fn finish(mut self, finish: Duration) -> Explorer {
        self.finish = finish;
        self
    }

    /// How long the quiet window lasts: after `finish`, a controller that writes anything in it
    /// never settles. Default 30 s of virtual time.
    pub fn quiet(mut self, quiet: Duration) -> Explorer {
        self.quiet = quiet;
        self
    }

    /// Adds a safety invariant, checked after every change (see [`Invariant`]).
    pub fn invariant(mut self, invariant: Invariant) -> Explorer {
        self.invariants.push(invariant);
        self
    }

    /// Sets how end states are compared (see [`Normalizer`]).
    pub fn normalizer(mut self, normalizer: Normalizer) -> Explorer {
        self.normalizer = normalizer;
        self.normalizer_set = true;
        self
    }

    /// Adds a liveness property, checked once the world is quiet (see [`Liveness`]).
    pub fn liveness(mut self, property: Liveness) -> Explorer {
        self.liveness.push(property);
        self
    }

    /// Declares that the scenario ends by deleting every primary object: then at the end of every
    /// run nothing the controller created may remain, no object may be stuck with a finalizer,
    /// and the outside system must be empty.
    pub fn leaves_nothing_behind(mut self) -> Explorer {
        self.leaves_nothing_behind = true;
        self
    }

    /// The seed of this runner.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub(crate) fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }

    /// Runs `controller` and `scenario` without faults and returns the trace. A step that fails
    /// ends the run with [`ExploreError::Step`].
    ///
    /// `controller` is called with a [`ControllerStart`] for each incarnation (one, without
    /// faults) and its future is spawned; it should run the controller until `shutdown`
    /// completes.
    pub fn run<C, Fut>(&self, scenario: Scenario, controller: C) -> Result<Trace, ExploreError>
    where
        C: Fn(ControllerStart) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let outcome = self.run_plan(&FaultPlan::none(), scenario, controller)?;
        for violation in &outcome.violations {
            match violation {
                Violation::Step { index, name, error } => {
                    return Err(ExploreError::Step {
                        index: *index,
                        name: name.clone(),
                        source: error.clone().into(),
                    });
                }
                Violation::Panicked { message } => {
                    return Err(ExploreError::Controller(message.clone()));
                }
                _ => {}
            }
        }
        Ok(outcome.trace)
    }

    /// Runs `controller` and `scenario` with the faults of `plan`, on a fresh embedded server, on
    /// a single-threaded tokio runtime whose clock starts paused, and judges the run (all
    /// oracles but the end-state comparison, which needs a reference run).
    pub fn run_plan<C, Fut>(
        &self,
        plan: &FaultPlan,
        scenario: Scenario,
        controller: C,
    ) -> Result<RunOutcome, ExploreError>
    where
        C: Fn(ControllerStart) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let controller: ControllerFn = Arc::new(move |start| Box::pin(controller(start)));
        self.run_boxed(plan, scenario, &controller)
    }

    pub(crate) fn run_boxed(
        &self,
        plan: &FaultPlan,
        scenario: Scenario,
        controller: &ControllerFn,
    ) -> Result<RunOutcome, ExploreError> {
        // Every random choice of every layer on this thread (uids, jitter, watch timeouts) comes
        // from the seed until the guard goes, after the runtime and everything it ran.
        let seeded = ferrokube_core::random::seed_thread(self.seed);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .map_err(|error| ExploreError::Setup(format!("no tokio runtime: {error}")))?;
        let outcome = runtime.block_on(self.run_inside(plan, scenario, controller.clone()));
        // The server's tasks and any the controller left behind go with the runtime.
        drop(runtime);
        drop(seeded);
        outcome
    }

    async fn run_inside(
        &self,
        plan: &FaultPlan,
        scenario: Scenario,
        controller: ControllerFn,
    ) -> Result<RunOutcome, ExploreError> {
        // Long: one run from start to verdict in the order it happens (clock, server, tap,
        // supervisor, scenario, quiet window, stop, checks); the steps share the run's handles and
        // channels, and a deterministic run is easiest to follow as one sequence.
        // The wall clock of every layer on this thread, for the length of the run: virtual time
        // since the start, from a fixed epoch.
        let started = tokio::time::Instant::now();
        let _clock = ferrokube_core::time::set_thread_clock(move || {
            VIRTUAL_EPOCH.saturating_add(started.elapsed())
        });
        let server = start_server(self.seed, self.configure.as_deref(), &self.crds).await?;
        let recorder = Arc::new(Recorder::new(started));
        let (restarts, orders) = mpsc::unbounded_channel();
        let (objects, changes) = server.store().subscribe_with_state();
        let mut world = World::default();
        for (table, key, stored) in objects {
            world.put(&table, &key, stored.object);
        }
        let shared = Arc::new(RunShared {
            plan: plan.clone(),
            recorder: recorder.clone(),
            server: server.clone(),
            counts: Mutex::new(Counts::default()),
            points: Mutex::new(Vec::new()),
            restarts,
            world: Mutex::new(world),
            invariants: self.invariants.clone(),
            liveness: self.liveness.clone(),
            held: Mutex::new(vec![None; self.liveness.len()]),
            steps: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            writes: Mutex::new(Vec::new()),
            created: Mutex::new(Vec::new()),
            decided: watch::Sender::new(false),
            stale: Staleness::default(),
        });
        // Once an invariant has broken the run has failed: it ends there rather than after the
        // rest of its scenario, which also ends a controller that loops in zero virtual time.
        let mut decided = shared.decided.subscribe();
        let observer = tokio::spawn(shared.clone().observe(changes));
        let tap = Tap::new(shared.clone());
        let records = Records::default();
        let supervisor = Supervisor {
            shared: shared.clone(),
            tap: tap.clone(),
            records: records.clone(),
            controller,
            running: Arc::new(Mutex::new(Vec::new())),
        };
        let running = supervisor.running.clone();
        supervisor.start(1, None)?;
        let supervising = tokio::spawn(supervisor.clone().supervise(orders));

        let mut violations = Vec::new();
        let mut cut_short = wait(&mut decided, self.start_grace).await;
        for (index, step) in scenario.steps.into_iter().enumerate() {
            if cut_short {
                break;
            }
            tracing::debug!(seed = self.seed, index, step = %step.name, "explore: step");
            recorder.push(TraceEntry::Step {
                index,
                name: step.name.clone(),
            });
            shared.step_begins(&step.name);
            let done = match step.action {
                Action::Client(action) => action(tap.client(&step.actor)?).await,
                Action::Server(action) => action(&server),
            };
            if let Err(error) = done {
                violations.push(Violation::Step {
                    index,
                    name: step.name.clone(),
                    error: error.to_string(),
                });
                break;
            }
            cut_short = wait(&mut decided, self.settle).await;
            shared.step_settled();
            shared.stale.step_settled();
        }
        shared.stale.steps_over();
        cut_short = cut_short || wait(&mut decided, self.finish).await;
        let quiet_from = tokio::time::Instant::now();
        cut_short = cut_short || wait(&mut decided, self.quiet).await;
        // A run cut short had no quiet window (and did not finish its scenario).
        let late_writes: Vec<String> = shared
            .writes
            .lock()
            .iter()
            .filter(|(when, _)| *when >= quiet_from && !cut_short)
            .map(|(_, what)| what.clone())
            .collect();
        supervising.abort();
        // Stop the live incarnation gracefully and every one before it for good.
        let incarnations: Vec<Started> = std::mem::take(&mut *running.lock());
        for (incarnation, _) in &incarnations {
            incarnation.stop.send_replace(true);
        }
        for (incarnation, handle) in incarnations {
            if !incarnation.alive() || cut_short {
                handle.abort();
                continue;
            }
            match tokio::time::timeout(self.stop_grace, handle).await {
                Ok(Err(error)) if error.is_panic() => violations.push(Violation::Panicked {
                    message: error.to_string(),
                }),
                Ok(_) => {}
                Err(_) => tracing::debug!(
                    seed = self.seed,
                    "explore: the controller did not stop within its grace period"
                ),
            }
        }
        observer.abort();
        let world = shared.world.lock().clone();
        let mut found = std::mem::take(&mut *shared.violations.lock());
        found.append(&mut violations);
        if !late_writes.is_empty() {
            found.push(Violation::NeverSettles {
                writes: late_writes,
            });
        }
        if !cut_short {
            found.extend(shared.liveness_at_end(&world));
        }
        if self.leaves_nothing_behind && !cut_short {
            let left = left_behind(&world, &shared.created.lock(), &self.normalizer);
            if !left.is_empty() {
                found.push(Violation::LeftBehind { what: left });
            }
        }
        let points = shared.points.lock().clone();
        Ok(RunOutcome {
            trace: recorder.trace(),
            points,
            world,
            violations: found,
        })
    }
}

/// Sleeps `duration` of virtual time, or less if the run is decided meanwhile (see
/// [`RunShared::decided`]); whether it is.
async fn wait(decided: &mut watch::Receiver<bool>, duration: Duration) -> bool {
    let slept = tokio::select! {
        biased;
        _ = decided.wait_for(|decided| *decided) => false,
        () = tokio::time::sleep(duration) => true,
    };
    !slept || *decided.borrow()
}

/// What remains that should not: objects the controller created, objects stuck terminating,
/// outside records.
fn left_behind(
    world: &World,
    created: &[(String, String)],
    normalizer: &Normalizer,
) -> Vec<String> {
    let mut left = Vec::new();
    for (resource, key) in created {
        if !normalizer.ignores(resource) && world.get(resource, key).is_some() {
            left.push(format!(
                "{resource} {key}: created by the controller, still there"
            ));
        }
    }
    for (resource, objects) in &world.objects {
        for (key, object) in objects {
            let metadata = &object["metadata"];
            if metadata.get("deletionTimestamp").is_some() {
                left.push(format!(
                    "{resource} {key}: stuck terminating, finalizers {}",
                    metadata["finalizers"]
                ));
            }
        }
    }
    for (name, value) in &world.outside {
        left.push(format!("outside record {name}={value}"));
    }
    left.sort();
    left.dedup();
    left
}

/// An incarnation and its task.
type Started = (Arc<Incarnation>, JoinHandle<()>);

/// Starts incarnations: the first, and one after each crash.
#[derive(Clone)]
struct Supervisor {
    shared: Arc<RunShared>,
    tap: Tap,
    records: Records,
    controller: ControllerFn,
    /// Every incarnation started, with its task.
    running: Arc<Mutex<Vec<Started>>>,
}

impl Supervisor {
    fn start(&self, number: u32, lag: Option<Lag>) -> Result<(), ExploreError> {
        let (stop, stopped) = watch::channel(false);
        let incarnation = Arc::new(Incarnation {
            number,
            alive: AtomicBool::new(true),
            lag,
            stop,
            watched: Mutex::new(Default::default()),
        });
        let shutdown: BoxFuture<()> = Box::pin(async move {
            let mut stopped = stopped;
            // An error means the sender is gone: the run is over either way.
            let _ = stopped.wait_for(|stop| *stop).await;
        });
        let start = ControllerStart {
            client: self.tap.controller_client(incarnation.clone())?,
            shutdown,
            outside: OutsideClient::new(
                self.records.clone(),
                incarnation.clone(),
                self.shared.clone(),
            ),
            incarnation: number,
        };
        let handle = tokio::spawn((self.controller)(start));
        self.running.lock().push((incarnation, handle));
        Ok(())
    }

    async fn supervise(self, mut orders: mpsc::UnboundedReceiver<RestartOrder>) {
        let mut number = 1;
        while let Some(order) = orders.recv().await {
            // The dead incarnation's task goes now; whatever it spawned can no longer reach
            // the server or the outside system, and has been told to stop.
            for (incarnation, handle) in self.running.lock().iter() {
                if !incarnation.alive() {
                    handle.abort();
                }
            }
            tokio::time::sleep(RESTART_DELAY).await;
            number += 1;
            let lag = order.lag_behind.map(|behind| Lag {
                revision: self.shared.server.store().revision().saturating_sub(behind),
                until: tokio::time::Instant::now() + LAG_CATCH_UP,
            });
            self.shared.recorder.push(TraceEntry::Restart {
                incarnation: number,
                lagging_at: lag.map(|lag| lag.revision),
            });
            if let Err(error) = self.start(number, lag) {
                tracing::warn!(%error, "explore: the controller could not be restarted");
                return;
            }
        }
    }
}

/// `server` serving the kinds `crd` describes, as kube-apiserver would once it is established:
/// its defaults filled in, refused with kube-apiserver's reasons if it is not valid.
fn serve_crd(
    server: ApiServer,
    crd: &Result<serde_json::Value, String>,
) -> Result<ApiServer, ExploreError> {
    let mut crd = crd
        .clone()
        .map_err(|error| ExploreError::Setup(format!("a CRD that is not JSON: {error}")))?;
    ferrokube_apiserver::crd::apply_defaults(&mut crd);
    let causes = ferrokube_apiserver::crd::validate(&crd);
    if !causes.is_empty() {
        let name = crd["metadata"]["name"].as_str().unwrap_or("<no name>");
        let why: Vec<String> = causes
            .iter()
            .map(|cause| format!("{}: {}", cause.field, cause.message))
            .collect();
        return Err(ExploreError::Setup(format!(
            "the CRD {name} is invalid: {}",
            why.join("; ")
        )));
    }
    let served = ferrokube_apiserver::crd::served_types(&crd, false);
    Ok(served.into_iter().fold(server, ApiServer::register))
}

/// The wall-clock time at which every run starts: 2026-01-01T00:00:00Z.
const VIRTUAL_EPOCH: Duration = Duration::from_secs(1_767_225_600);

/// The embedded server of a run: its random choices (faults) seeded with `seed`.
async fn start_server(
    seed: u64,
    configure: Option<&(dyn Fn(ApiServer) -> ApiServer + Send + Sync)>,
    crds: &[Result<serde_json::Value, String>],
) -> Result<Arc<RunningServer>, ExploreError> {
    let mut server = match configure {
        Some(configure) => configure(ApiServer::new()),
        None => ApiServer::new(),
    };
    for crd in crds {
        server = serve_crd(server, crd)?;
    }
    let server = server
        .start()
        .await
        .map_err(|error| ExploreError::Setup(format!("the embedded server: {error}")))?;
    server.faults().seed(seed);
    Ok(Arc::new(server))
}
