//! The deterministic runner: one seed, one controller, one scenario, one trace.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_apiserver::{ApiServer, RunningServer};
use ferrokube_client::Client;
use tokio::sync::watch;

use crate::ExploreError;
use crate::tap::{Recorder, Tap};
use crate::trace::{Trace, TraceEntry};

/// The error a step or a controller may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed future, as a [`Step`]'s action returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A step's requests, made through a client of the step's actor.
type ClientAction = Box<dyn FnOnce(Client) -> BoxFuture<Result<(), BoxError>> + Send>;
/// A step's action on the server itself.
type ServerAction = Box<dyn FnOnce(&RunningServer) -> Result<(), BoxError> + Send>;

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

/// What the controller of a run gets: its client (actor `controller`) and the signal to stop.
pub struct ControllerStart {
    /// The controller's client: every request it sends is recorded.
    pub client: Client,
    /// Completes when the run is over; pass it as the controller's shutdown signal.
    pub shutdown: BoxFuture<()>,
}

/// Shapes the embedded server of each run before it starts (see [`Explorer::server`]).
type ConfigureServer = Arc<dyn Fn(ApiServer) -> ApiServer + Send + Sync>;

/// Runs a controller and a scenario deterministically. See the [crate docs](crate).
#[derive(Clone)]
pub struct Explorer {
    seed: u64,
    settle: Duration,
    start_grace: Duration,
    stop_grace: Duration,
    configure: Option<ConfigureServer>,
}

impl std::fmt::Debug for Explorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explorer")
            .field("seed", &self.seed)
            .field("settle", &self.settle)
            .field("start_grace", &self.start_grace)
            .field("stop_grace", &self.stop_grace)
            .field("configured_server", &self.configure.is_some())
            .finish()
    }
}

impl Explorer {
    /// A runner for `seed`, with a settle time of 5 s of virtual time after each step.
    pub fn new(seed: u64) -> Explorer {
        Explorer {
            seed,
            settle: Duration::from_secs(5),
            start_grace: Duration::from_secs(2),
            stop_grace: Duration::from_secs(5),
            configure: None,
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

    /// How long (virtual time) the runner waits after the controller starts and after each
    /// step, so that the controller reacts before the next step. Time is virtual: a long settle
    /// costs nothing while everything is idle.
    pub fn settle(mut self, settle: Duration) -> Explorer {
        self.settle = settle;
        self
    }

    /// The seed of this runner.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Runs `controller` and `scenario` on a fresh embedded server, on a single-threaded tokio
    /// runtime whose clock starts paused, and returns the trace.
    ///
    /// `controller` is called once with a [`ControllerStart`] and its future is spawned; it
    /// should run the controller until `shutdown` completes. Then each step of `scenario` runs
    /// in turn, each followed by a settle; then the controller is told to stop and given a grace
    /// period of virtual time. A step that fails ends the run with [`ExploreError::Step`].
    pub fn run<C, Fut>(&self, scenario: Scenario, controller: C) -> Result<Trace, ExploreError>
    where
        C: FnOnce(ControllerStart) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Every random choice of every layer on this thread (uids, jitter, watch timeouts) comes
        // from the seed until the guard goes, after the runtime and everything it ran.
        let seeded = ferrokube_core::random::seed_thread(self.seed);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .map_err(|error| ExploreError::Setup(format!("no tokio runtime: {error}")))?;
        let trace = runtime.block_on(self.run_inside(scenario, controller));
        // The server's tasks and any the controller left behind go with the runtime.
        drop(runtime);
        drop(seeded);
        trace
    }

    async fn run_inside<C, Fut>(
        &self,
        scenario: Scenario,
        controller: C,
    ) -> Result<Trace, ExploreError>
    where
        C: FnOnce(ControllerStart) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // The wall clock of every layer on this thread, for the length of the run: virtual time
        // since the start, from a fixed epoch.
        let started = tokio::time::Instant::now();
        let _clock = ferrokube_core::time::set_thread_clock(move || {
            VIRTUAL_EPOCH.saturating_add(started.elapsed())
        });
        let server = start_server(self.seed, self.configure.as_deref()).await?;
        let recorder = Arc::new(Recorder::default());
        let tap = Tap::new(server.clone(), recorder.clone());
        let (stop, stopped) = watch::channel(false);
        let shutdown: BoxFuture<()> = Box::pin(async move {
            let mut stopped = stopped;
            // An error means the sender is gone: the run is over either way.
            let _ = stopped.wait_for(|stop| *stop).await;
        });
        let running = tokio::spawn(controller(ControllerStart {
            client: tap.client("controller")?,
            shutdown,
        }));
        tokio::time::sleep(self.start_grace).await;
        for (index, step) in scenario.steps.into_iter().enumerate() {
            tracing::debug!(seed = self.seed, index, step = %step.name, "explore: step");
            recorder.push(TraceEntry::Step {
                index,
                name: step.name.clone(),
            });
            let done = match step.action {
                Action::Client(action) => action(tap.client(&step.actor)?).await,
                Action::Server(action) => action(&server),
            };
            done.map_err(|source| ExploreError::Step {
                index,
                name: step.name.clone(),
                source,
            })?;
            tokio::time::sleep(self.settle).await;
        }
        stop.send_replace(true);
        match tokio::time::timeout(self.stop_grace, running).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(ExploreError::Controller(error.to_string())),
            Err(_) => tracing::debug!(
                seed = self.seed,
                "explore: the controller did not stop within its grace period"
            ),
        }
        Ok(recorder.trace())
    }
}

/// The wall-clock time at which every run starts: 2026-01-01T00:00:00Z.
const VIRTUAL_EPOCH: Duration = Duration::from_secs(1_767_225_600);

/// The embedded server of a run: its random choices (faults) seeded with `seed`.
async fn start_server(
    seed: u64,
    configure: Option<&(dyn Fn(ApiServer) -> ApiServer + Send + Sync)>,
) -> Result<Arc<RunningServer>, ExploreError> {
    let server = match configure {
        Some(configure) => configure(ApiServer::new()),
        None => ApiServer::new(),
    };
    let server = server
        .start()
        .await
        .map_err(|error| ExploreError::Setup(format!("the embedded server: {error}")))?;
    server.faults().seed(seed);
    Ok(Arc::new(server))
}
