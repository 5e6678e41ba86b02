//! # The fault explorer: find a controller's bugs before its users do
//!
//! A controller bug that shows up once in a thousand CI runs is usually an interleaving: a watch
//! event that arrived a moment later, a list served from a lagging cache, a crash between two
//! writes. Sieve (OSDI 2022) and Acto (SOSP 2023) showed how to find them on purpose: perturb
//! the controller's view and its life at chosen points, and compare the outcome with an
//! unperturbed run. This crate does that inside `cargo test`:
//!
//! 1. **Deterministic runs** ([`Explorer`]): the controller, the embedded API server and a
//!    [`Scenario`] run on one thread with a virtual clock, seeded randomness and in-memory
//!    connections, so that
//!    > a run is a function of (controller, scenario, seed, fault plan): the same four give the
//!    > identical trace of requests and watch events.
//! 2. **Faults** ([`fault`]) placed at **points** (the controller's N-th request, N-th watch event
//!    read, N-th outside call): crashes and restarts with fresh caches, restarts from a lagging
//!    replica, coalesced events, a delayed informer, 409/500/429/timeouts, compaction, dropped
//!    watches; and staleness that lasts a number of steps ([`stale`]): a lagging API server
//!    replica, a watch partitioned across its resumes. They act in the tap between the clients and the server and in the outside system
//!    ([`OutsideClient`]), so the controller under test is the one its author runs.
//! 3. **Oracles** ([`oracle`]): invariants over the [`World`] after every change, liveness
//!    properties once the world is quiet ([`Liveness`]: `eventually`, `always_eventually`, every
//!    custom resource Ready at its generation), the end state against the fault-free run's
//!    ([`Normalizer`]), a fixed point after the faults, nothing left behind after the primaries
//!    go.
//! 4. **Search and shrinking** ([`search`], [`Exploration`]): every fault class at every point of
//!    the fault-free run, then random plans, within a [`Budget`] that counts runs (by default
//!    every single-fault candidate, with a wall-clock cap that fails the search if it comes
//!    first); a failure comes back as a minimal [`FaultPlan`], a replay line and the trace around
//!    it ([`Found`]).
//! 5. **Generated scenarios** ([`generate`]): sequences of spec changes drawn from a custom
//!    resource's schema (boundary values, list and map edits, removals, delete and re-create),
//!    searched the same way; a failure is shrunk in both its sequence and its plan
//!    ([`Exploration::generated`], [`GeneratedFound`]).
//!
//! It is the layer above both the embedded API server (`ferrokube-apiserver`) and the client
//! (`ferrokube-client`), the only one that knows both: it connects them in memory and records
//! what passes between them. Neither of them depends on it. (The front crate's
//! `ferrokube::testing` also knows both, but the front crate only re-exports layers; a runner with
//! its own runtime, transport and trace is a layer of its own.)
//!
//! ## How data flows
//!
//! ```text
//!   Explorer::run(scenario, controller)          one current-thread tokio runtime, clock paused
//!   │
//!   ├── RunningServer (embedded, fresh per run; fault RNG seeded with the seed)
//!   │        ▲ serve_connection(duplex)
//!   │        │
//!   │   ┌────┴──────────────── tap (one per run) ────────────────┐
//!   │   │ HTTP/1.1 server ◀─ duplex ─┐   records, in order:      │
//!   │   │ forwards each request ─────┼─▶ Request (actor, method, │──▶ Trace
//!   │   │ reads each watch line ─────┘   path, status, rv, name) │
//!   │   │                                Event (watch, type,     │
//!   │   │                                kind, key, rv)          │
//!   │   └────▲──────────────────▲────────────────────────────────┘
//!   │        │ Dial (in-memory)  │ Dial (in-memory)
//!   ├── controller task          └── scenario steps, one by one, each followed by a settle
//!   │   (client "controller")        (client "scenario", or `Step::by(actor)`)
//! ```
//!
//! The clients reach the tap through the client's dial seam
//! ([`ferrokube_client::client::Dial`]): each connection the client's pool opens is a
//! [`tokio::io::duplex`] pipe, never a socket. [`in_memory_client`] gives the same transport
//! without the tap, for any test that wants a socket-free client of an embedded server.
//!
//! ## What is deterministic, and how
//!
//! | source of chance | how it is tamed |
//! |---|---|
//! | the scheduler | a **current-thread** runtime: one thread polls every task (server, tap, controller, scenario), in an order that depends only on which tasks were woken and when |
//! | timers, timeouts, backoff waits, settle times | the runtime's clock **starts paused** (`start_paused`): virtual time advances only when every task is idle, straight to the next timer. A 5-minute wait costs nothing, and no timer fires "a bit early" because the machine was busy |
//! | requeues and retries of keys (`Action::requeue`, rate-limited requeues after an error) | the workqueue normally waits for them on an OS thread in real time; a controller built on a thread with a virtual wall clock builds its queue with `WorkQueueBuilder::virtual_time`: the queue then reads one clock, the runtime's, for everything (delays wait in a task on it, the rate limiter's overall token bucket is handed its `now` and refills as virtual time passes, the queue's metrics measure it) |
//! | durations the layers measure (how long a watch lived, "healthy for 2 minutes" before a reconnect backoff starts over, when a handler's resync is due, an expectation's timeout, the event correlator's 10-minute windows and spam filter's refill, a reconcile's duration, the delay of the server's watch-delay fault, the shard assigner's view of member liveness) | read on the runtime's clock (`tokio::time::Instant`), which on the paused runtime is virtual time; [`ferrokube_core::backoff::Backoff`] reads no clock and is handed the runtime's `now` by its callers |
//! | which of several ready branches a `tokio::select!` takes | every `select!` in the layers a run goes through (core, client, workqueue, informer, runtime, pipeline, the embedded server) is `biased;`: branches are tried in a fixed order, chosen per site (shutdown and cancellation first, then the work; where a branch could be ready without end, as a flood of watch events, it comes after the ones it could starve) |
//! | the wall clock (`creationTimestamp`, conditions, leases, events) | [`ferrokube_core::time::set_thread_clock`]: on the run's thread every layer reads 2026-01-01T00:00:00Z plus the virtual time elapsed |
//! | random numbers (uids, backoff and retry jitter, a watch's `timeoutSeconds`, the server's fault choices) | [`ferrokube_core::random::seed_thread`] with the run's seed: every layer draws through `ferrokube_core::random` on the run's thread; the server's fault generator gets the seed too (`Faults::seed`) |
//! | the network | none: **in-memory pipes** (no sockets, no kernel buffers, no Nagle, no ports) between clients, the tap and the server |
//! | the order of the trace | entries are appended by the single thread as requests finish and events are read |
//!
//! ## What is not (yet) deterministic, and how the trace copes
//!
//! - **Real time is still read in a few places, none that decides what a run does**: the
//!   client's token-file re-read throttle (an explored client has no token), the
//!   client-side request rate limiter (its own clock; the explorer's clients have none),
//!   `BucketRateLimiter::when` (real time by contract; a queue asks `when_at` with its own
//!   clock), and the shard assigner's `shard_assignment_seconds` metric (stamped on an informer
//!   handler's own thread). A virtual-time queue touched from a thread outside the runtime reads
//!   real time there (tokio's fallback); a run does everything on its one thread.
//! - **The live view** (`ferrokube-view`) and test helpers were not audited: their `select!`s
//!   still pick at random. A run does not start the view.
//! - **The audit log's** `requestReceivedTimestamp` reads the system clock, not the thread's
//!   virtual one; the trace does not record it.
//! - **Uids and timestamps** are seeded and virtual, but the trace does not record them at all:
//!   it records names and resourceVersions, which the server hands out in order. So a trace is
//!   readable, and stays comparable if a layer draws one more random number.
//! - **HashMap order** (random per map) matters only where a controller's behaviour depends on
//!   iterating a map; the runtime's queues are FIFO, and the sources that queue many keys at
//!   once (`reconcile_all_on`, `watches_by_index`) queue them sorted. (They did not until a
//!   join sample's plan replayed 6 times in 10: which Pod a Group's relist reconciled first
//!   came from the store's hash seed.)
//! - A draw made **on another thread** (a `spawn_blocking` task, an informer handler with its
//!   own thread) is not seeded, and such a thread runs when the OS schedules it. A controller's
//!   sources are inline handlers, so an unsharded controller's run has none; the shard assigner's
//!   handlers do have threads of their own.
//!
//! The tests check 100 of 100 runs identical (`explore_determinism`), and that the retry bucket
//! and the server's watch-delay fault follow virtual time (`explore_virtual_clock`: outcomes that
//! would differ, run to run, on real time). A difference, if one ever shows, is printed with its
//! first differing entry.
//!
//! ## Use
//!
//! ```no_run
//! use ferrokube_explore::{Explorer, Scenario, Step};
//!
//! # fn demo() -> Result<(), ferrokube_explore::ExploreError> {
//! let scenario = Scenario::new().step(Step::new("create a", |client| async move {
//!     // ... client.request(...) or Api::<ConfigMap>::namespaced(client, "default").create(...)
//!     # let _ = client;
//!     Ok(())
//! }));
//! let trace = Explorer::new(7).run(scenario, |start| async move {
//!     // Controller::<ConfigMap>::new(start.client, ...).run(reconciler, start.shutdown).await
//!     start.shutdown.await;
//! })?;
//! println!("{trace}");
//! # Ok(()) }
//! ```
//!
//! A controller of a custom resource needs its kind served before it starts, or its first list
//! is a 404: [`Explorer::custom_resource`] (the derive's `Kind::crd()`) or [`Explorer::crd`] (any
//! CustomResourceDefinition) registers it in every run's server before the controller's first
//! request.
//!
//! A step may also act on the server itself rather than through its API
//! ([`Step::on_server`]: close every watch, compact the history, switch a fault on), and
//! [`Explorer::server`] shapes the embedded server of every run before it starts. A step done
//! "behind the controller's back" is an ordinary step of another actor ([`Step::by`]).
//!
//! A search wraps the same two things, the scenario as a function (each run needs its own):
//!
//! ```no_run
//! use ferrokube_explore::{Budget, Exploration, Scenario};
//!
//! let report = Exploration::new(
//!     |start| async move {
//!         // the controller as its author runs it, on start.client, with start.outside,
//!         // until start.shutdown
//!         start.shutdown.await;
//!     },
//!     || Scenario::new(), // creates, edits, edits behind the controller's back, deletes
//! )
//! .invariant("never two leaders", |_world| Ok(()))
//! .eventually("every child exists", |_world| Ok(()))
//! .leaves_nothing_behind()
//! .budget(Budget::runs(300))
//! .check(); // panics with the minimal plan, how to replay it, and the trace around it
//! println!("{report}"); // runs made, candidates covered
//! ```
//!
//! The settings of an [`Exploration`] and of an [`Explorer`] given to it
//! ([`Exploration::explorer`]) combine in any order: oracles and CRDs add up, the explorer brings
//! the timings and the server's shape.
//!
//! ## Time: steps, settles and fault windows
//!
//! A run's clock is virtual and starts at 0 when the controller's first incarnation does:
//!
//! ```text
//!  0 s          2 s (start grace)    +5 s (settle)        +5 s              +60 s (finish)  +30 s (quiet)
//!  │ controller  │ step 0 ──settle──▶ │ step 1 ──settle──▶ │ ...last step ──▶│ converge ────▶│ no write ──▶ end
//!  │ lists,      │                    │                    │                 │               │ liveness checked
//!  │ watches     │  always_eventually: noted at each change and settle end  │               │ at the end
//! ```
//!
//! - The first step comes [`Explorer::start_grace`] (2 s) after the controller starts; each
//!   step's requests then run to completion, and the next step begins [`Explorer::settle`] (5 s)
//!   later. The runner does not wait for the controller to be idle: a controller that needs
//!   more than the settle to react acts on the next step's world, as it would in production.
//! - Faults at one point act for seconds: a crash costs [`RESTART_DELAY`] (1 s), a
//!   `delay(D)` holds a watch D (the search tries 4 s), a coalesced watch relists within
//!   [`fault::COALESCE_WINDOW`] (5 s), a lagging restart catches up after
//!   [`fault::LAG_CATCH_UP`] (10 s). An informer also resumes an idle watch by itself (every
//!   15 s or so), which shows the present again. So a stale view of these faults rarely outlives
//!   the step after it.
//! - Lasting faults ([`stale`]) are measured in steps instead: `partition(S)` and
//!   `lagging-replica(N,S)` hold until the step under way and S more have settled, across
//!   resumes and relists; or in seconds, `partition(Ts)` and `lagging-replica(N,Ts)`. The end of
//!   the last step's settle ends them all, so the 60 s finish sees the controller converge. The
//!   search places the step windows at a step's boundary and chooses the timed ones from the
//!   reference run's step times: from the point, past the next step's start, to halfway
//!   through its settle (a point 1 s before a step with a 5 s settle gets `partition(4s)`), so
//!   the present comes back while the controller reacts to that step.
//! - The points of a run are the controller's requests (not its re-watches: an informer resuming
//!   a watch decides nothing), the watch events it reads and its outside calls. Point numbers
//!   follow the fault-free run, so a plan names the same moment in every run up to its first
//!   fault.
//!
//! Write steps that wait for what they need (an object the controller makes may come later
//! under a fault): a step that fails ends its run as a failure ([`Violation::Step`]).
//!
//! ## Reading a trace
//!
//! One line per entry (see [`trace`]): the scenario's `step`s, each `request` with its actor
//! (`controller#N` for the controller's N-th incarnation, `scenario`, or the actor a step
//! names), method,
//! path and query, status, and the `rv` and `name` of the answer's object or list; each watch
//! `event` with the watch's number (given by the order the watches opened), type, kind, key and
//! `rv`; each `fault` as it takes effect, each `restart`, each `outside` call. Requests enter when
//! their answer has passed the tap, events when the client reads them.

pub mod fault;
pub mod generate;
pub mod oracle;
mod outside;
mod run;
pub mod search;
mod shared;
pub mod stale;
mod tap;
pub mod trace;
pub mod world;

pub use fault::{Failure, Fault, FaultPlan, Point};
pub use generate::{Generated, GeneratedFound, GeneratedSearched, Generator, Sequence};
pub use oracle::{Invariant, Liveness, Violation};
pub use outside::{OutsideClient, OutsideError};
pub use run::{
    BoxError, BoxFuture, ControllerStart, Explorer, RESTART_DELAY, RunOutcome, Scenario, Step,
};
pub use search::{Budget, Exploration, Found, Report, Runs, Searched};
pub use shared::{PointSeen, RUNAWAY_REQUESTS};
pub use tap::in_memory_client;
pub use trace::{Difference, Trace, TraceEntry};
pub use world::{NormalWorld, Normalizer, World};

/// Why a run could not be made or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    /// The runtime, the server or a client could not be set up.
    #[error("setting up the run: {0}")]
    Setup(String),
    /// A client could not be built.
    #[error("building a client: {0}")]
    Client(#[from] ferrokube_client::Error),
    /// A step of the scenario failed.
    #[error("step {index} ({name}) failed: {source}")]
    Step {
        /// The step's position, from 0.
        index: usize,
        /// The step's description.
        name: String,
        /// What it returned.
        source: BoxError,
    },
    /// The controller's task panicked.
    #[error("the controller's task failed: {0}")]
    Controller(String),
}
