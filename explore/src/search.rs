//! The search: from one fault-free run to a minimal failing plan, within a budget.
//!
//! ```text
//!  reference run (no faults) ── judged by the oracles; records every point it passed
//!        │                      and the normalised end state
//!        ▼
//!  systematic: each fault class at each point it fits, one fault per run, in class order
//!        │                      (crashes around writes first: they find the most; the lasting
//!        │                      faults of a join last: a partition at each event, a lagging
//!        │                      replica per step, each in steps then in seconds)
//!        │                      the default budget tries every one of these candidates
//!        ▼
//!  random: plans of 1–3 faults drawn from the same candidates with the seed
//!        ▼  first run an oracle rejects
//!  shrink: drop each fault while the run still fails the same way; then try each fault's
//!        │  simpler forms (a shorter lag, a shorter delay, a plain crash)
//!        ▼
//!  Found: seed, minimal plan, the violation, the trace around the first fault
//! ```
//!
//! Every run is a function of (controller, scenario, seed, plan), so a found plan replays
//! exactly ([`Exploration::replay`]), and so does the whole search.
//!
//! A search that passes returns a [`Report`] saying how many of the single-fault candidates it
//! covered; under a budget that must cover them all (the default), running out of wall-clock
//! time first is [`Searched::Incomplete`], a failure, never a quiet pass.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ExploreError;
use crate::fault::{Failure, Fault, FaultPlan, Point};
use crate::oracle::{Invariant, Liveness, Violation};
use crate::run::{ControllerFn, ControllerStart, Explorer, RunOutcome, Scenario};
use crate::shared::PointSeen;
use crate::world::{NormalWorld, Normalizer};

/// How many runs a search makes (see [`Budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// Every single-fault candidate of the scenario (one run each; how many there are is known
    /// from the fault-free run), then `then` random plans of several faults.
    EveryCandidate {
        /// Random plans after the systematic phase.
        then: usize,
    },
    /// At most this many runs (the reference run included), whether or not they cover every
    /// candidate.
    AtMost(usize),
}

/// How much searching one exploration may do: a count of runs, and a wall-clock cap.
///
/// The default covers every single-fault candidate, so what a search tries does not depend on
/// the machine's speed; its cap (10 minutes) is a guard, and a search that hits it before every
/// candidate was tried **fails** ([`Searched::Incomplete`]: "coverage incomplete: 195 of 277
/// candidates") rather than passing on what it happened to reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// How many runs.
    pub runs: Runs,
    /// At most this much wall-clock time (a run under way is finished).
    pub time: Duration,
    /// Whether running out of `time` before every single-fault candidate was tried fails the
    /// search ([`Searched::Incomplete`]) rather than ending it quietly.
    pub must_cover: bool,
}

/// The default budget's wall-clock cap.
pub const DEFAULT_CAP: Duration = Duration::from_secs(600);

/// How many random plans the default budget tries after every single-fault candidate.
pub const DEFAULT_RANDOM_PLANS: usize = 100;

impl Budget {
    /// Every single-fault candidate, then `then` random plans, within [`DEFAULT_CAP`]; failing
    /// loudly if the cap comes first. `Budget::default()` is `Budget::every_candidate(100)`.
    pub fn every_candidate(then: usize) -> Budget {
        Budget {
            runs: Runs::EveryCandidate { then },
            time: DEFAULT_CAP,
            must_cover: true,
        }
    }

    /// At most `runs` runs, however long they take (the report says how many candidates they
    /// covered).
    pub fn runs(runs: usize) -> Budget {
        Budget {
            runs: Runs::AtMost(runs),
            time: Duration::MAX,
            must_cover: false,
        }
    }

    /// As many runs as fit in `time` of wall-clock time: for exploring by hand or in a
    /// benchmark (a test with it would pass or fail with the machine's speed).
    pub fn time(time: Duration) -> Budget {
        Budget {
            runs: Runs::AtMost(usize::MAX),
            time,
            must_cover: false,
        }
    }

    /// The same budget with another wall-clock cap.
    pub fn cap(mut self, time: Duration) -> Budget {
        self.time = time;
        self
    }

    /// How many runs in all, for a scenario with `candidates` single-fault candidates (the
    /// reference run included).
    pub fn total_runs(&self, candidates: usize) -> usize {
        match self.runs {
            Runs::EveryCandidate { then } => 1 + candidates + if candidates > 0 { then } else { 0 },
            Runs::AtMost(runs) => runs,
        }
    }
}

impl Default for Budget {
    /// Every single-fault candidate, then 100 random plans; a 10-minute cap that fails the
    /// search if it comes first.
    fn default() -> Budget {
        Budget::every_candidate(DEFAULT_RANDOM_PLANS)
    }
}

/// Builds the scenario of each run (a scenario's steps run once, so each run needs its own).
type ScenarioFn = Arc<dyn Fn() -> Scenario + Send + Sync>;

/// A fault search over one controller and one scenario. See the [module docs](self) and the
/// [crate docs](crate) for an example.
#[derive(Clone)]
pub struct Exploration {
    explorer: Explorer,
    controller: ControllerFn,
    scenario: ScenarioFn,
    budget: Budget,
    max_random_faults: usize,
    /// How many runs go at once, each on a thread of its own.
    threads: usize,
    /// Whether [`Exploration::seed`] was called: its seed then wins over a runner's merged in
    /// later.
    seed_set: bool,
}

impl fmt::Debug for Exploration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exploration")
            .field("explorer", &self.explorer)
            .field("budget", &self.budget)
            .field("max_random_faults", &self.max_random_faults)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl Exploration {
    /// A search over `controller` (called once per incarnation, as [`Explorer::run`] does) and
    /// the scenario `scenario` builds, with seed 1, the default [`Budget`] and the default
    /// [`Explorer`] timings.
    pub fn new<C, Fut, S>(controller: C, scenario: S) -> Exploration
    where
        C: Fn(ControllerStart) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        S: Fn() -> Scenario + Send + Sync + 'static,
    {
        Exploration {
            explorer: Explorer::new(1),
            controller: Arc::new(move |start| Box::pin(controller(start))),
            scenario: Arc::new(scenario),
            budget: Budget::default(),
            max_random_faults: 3,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            seed_set: false,
        }
    }

    /// The seed of every run (and of the random part of the search).
    pub fn seed(mut self, seed: u64) -> Exploration {
        self.explorer.set_seed(seed);
        self.seed_set = true;
        self
    }

    /// Takes the runner's timings and server shape from `explorer`, and **adds** its oracles to
    /// the ones set so far, so the order of the calls does not matter: invariants, liveness
    /// properties and CRDs of both (these first), nothing-left-behind if either declares it,
    /// `explorer`'s normalizer if it set one (else the one set here), and the seed given to
    /// [`Exploration::seed`] if it was called (else `explorer`'s).
    pub fn explorer(mut self, explorer: Explorer) -> Exploration {
        let mut merged = explorer;
        if self.seed_set {
            merged.set_seed(self.explorer.seed());
        }
        let ours = self.explorer;
        merged.invariants = [ours.invariants, merged.invariants].concat();
        merged.liveness = [ours.liveness, merged.liveness].concat();
        merged.crds = [ours.crds, merged.crds].concat();
        merged.leaves_nothing_behind |= ours.leaves_nothing_behind;
        if !merged.normalizer_set && ours.normalizer_set {
            merged.normalizer = ours.normalizer;
            merged.normalizer_set = true;
        }
        self.explorer = merged;
        self
    }

    /// Serves a custom resource kind from the start of every run (see [`Explorer::crd`]).
    pub fn crd(mut self, crd: impl serde::Serialize) -> Exploration {
        self.explorer = self.explorer.crd(crd);
        self
    }

    /// Serves the custom resource kind `K` from the start of every run (see
    /// [`Explorer::custom_resource`]).
    pub fn custom_resource<K: ferrokube_client::crd::CustomResourceExt>(mut self) -> Exploration {
        self.explorer = self.explorer.custom_resource::<K>();
        self
    }

    /// Adds a liveness property: `check` holds once the world is quiet after the last step (see
    /// [`Liveness::eventually`]).
    pub fn eventually(
        mut self,
        name: impl Into<String>,
        check: impl Fn(&crate::World) -> Result<(), String> + Send + Sync + 'static,
    ) -> Exploration {
        self.explorer = self.explorer.liveness(Liveness::eventually(name, check));
        self
    }

    /// Adds a liveness property: `check` holds at some moment after every step, before the
    /// next (see [`Liveness::always_eventually`]).
    pub fn always_eventually(
        mut self,
        name: impl Into<String>,
        check: impl Fn(&crate::World) -> Result<(), String> + Send + Sync + 'static,
    ) -> Exploration {
        self.explorer = self
            .explorer
            .liveness(Liveness::always_eventually(name, check));
        self
    }

    /// Adds the liveness property "every object of `resource` is eventually Ready=True at its
    /// generation" (see [`Liveness::ready_at_generation`]).
    pub fn ready_at_generation(mut self, resource: impl Into<String>) -> Exploration {
        self.explorer = self
            .explorer
            .liveness(Liveness::ready_at_generation(resource));
        self
    }

    /// Adds a safety invariant (see [`Invariant`]).
    pub fn invariant(
        mut self,
        name: impl Into<String>,
        check: impl Fn(&crate::World) -> Result<(), String> + Send + Sync + 'static,
    ) -> Exploration {
        self.explorer = self.explorer.invariant(Invariant::new(name, check));
        self
    }

    /// Sets how end states are compared (see [`Normalizer`]).
    pub fn normalizer(mut self, normalizer: Normalizer) -> Exploration {
        self.explorer = self.explorer.normalizer(normalizer);
        self
    }

    /// Declares that the scenario ends by deleting every primary (see
    /// [`Explorer::leaves_nothing_behind`]).
    pub fn leaves_nothing_behind(mut self) -> Exploration {
        self.explorer = self.explorer.leaves_nothing_behind();
        self
    }

    /// How many runs go at once, each on a thread of its own (default: the machine's
    /// parallelism). The plan a search finds is the same for any number: the first failing plan
    /// in search order; only the count of runs made before it can differ by a batch.
    pub fn threads(mut self, threads: usize) -> Exploration {
        self.threads = threads.max(1);
        self
    }

    /// How much to search (default: every single-fault candidate then 100 random plans, within
    /// a 10-minute cap that fails the search if it comes first; see [`Budget`]).
    pub fn budget(mut self, budget: Budget) -> Exploration {
        self.budget = budget;
        self
    }

    /// Runs the search; panics with the [`Found`] report (the minimal plan, how to replay it,
    /// the trace around it) if an oracle rejected a run. For a test.
    pub fn check(&self) -> Report {
        match self.explore() {
            Ok(report) => report,
            Err(searched) => panic!("{searched}"),
        }
    }

    /// Runs the search: a [`Report`] when no run failed within the budget, else what was found.
    pub fn explore(&self) -> Result<Report, Searched> {
        let began = Instant::now();
        let mut runs = 0;
        let reference = self.run(&FaultPlan::none())?;
        runs += 1;
        if let Some(violation) = reference.violations.first().cloned() {
            return Err(Searched::Found(Box::new(Found {
                seed: self.explorer.seed(),
                plan: FaultPlan::none(),
                violation,
                outcome: reference,
                runs,
                elapsed: began.elapsed(),
            })));
        }
        let normal = self.explorer.normalizer.normalize(&reference.world);
        let candidates = candidates(
            &reference.points,
            &reference.trace,
            self.explorer.settle_time(),
        );
        let mut random = SplitMix(self.explorer.seed() ^ 0x5eed_f00d_cafe_d00d);
        let mut systematic = candidates.iter();
        let total = self.budget.total_runs(candidates.len());
        let within = |runs: usize| runs < total && began.elapsed() < self.budget.time;
        while within(runs) {
            // One batch of plans, one per thread, in search order; the first that fails (in
            // that order, not in the order the threads finish) is the one reported, so the plan
            // found does not depend on the number of threads.
            let room = total.saturating_sub(runs).min(self.threads.max(1));
            let batch: Vec<FaultPlan> = (0..room)
                .map_while(|_| match systematic.next() {
                    Some(fault) => Some(FaultPlan::one(*fault)),
                    None if candidates.is_empty() => None,
                    None => Some(random_plan(
                        &candidates,
                        &mut random,
                        self.max_random_faults,
                    )),
                })
                .collect();
            if batch.is_empty() {
                break;
            }
            let judged = self.judge_all(&batch, &normal)?;
            runs += batch.len();
            let failed = batch
                .into_iter()
                .zip(judged)
                .find_map(|(plan, (outcome, violation))| Some((plan, violation?, outcome)));
            if let Some((plan, violation, outcome)) = failed {
                let (plan, violation, outcome, shrinking) =
                    self.shrink(plan, violation, outcome, &normal)?;
                return Err(Searched::Found(Box::new(Found {
                    seed: self.explorer.seed(),
                    plan,
                    violation,
                    outcome,
                    runs: runs + shrinking,
                    elapsed: began.elapsed(),
                })));
            }
        }
        // The systematic phase tries the candidates in order, one run each, after the reference.
        let covered = (runs - 1).min(candidates.len());
        let report = Report {
            seed: self.explorer.seed(),
            runs,
            points: reference.points.len(),
            candidates: candidates.len(),
            covered,
            elapsed: began.elapsed(),
        };
        if self.budget.must_cover && covered < candidates.len() {
            return Err(Searched::Incomplete(report));
        }
        Ok(report)
    }

    /// The single-fault candidates the systematic phase would try, in its order, from one
    /// fault-free run (which is not judged): to see what a search covers, or to replay one
    /// candidate by hand.
    pub fn candidates(&self) -> Result<Vec<Fault>, Searched> {
        let reference = self.run(&FaultPlan::none())?;
        Ok(candidates(
            &reference.points,
            &reference.trace,
            self.explorer.settle_time(),
        ))
    }

    /// Runs `plan` once (text as [`FaultPlan`] prints it) and judges it, end state included: the
    /// violation, if any, and the run. For replaying a [`Found`] plan in a test or a debugger.
    pub fn replay(&self, plan: &str) -> Result<(Option<Violation>, RunOutcome), Searched> {
        let plan: FaultPlan = plan
            .parse()
            .map_err(|error: crate::fault::PlanParseError| {
                Searched::Error(ExploreError::Setup(error.to_string()))
            })?;
        let reference = self.run(&FaultPlan::none())?;
        let normal = self.explorer.normalizer.normalize(&reference.world);
        let (outcome, violation) = self.judge(&plan, &normal)?;
        Ok((violation, outcome))
    }

    pub(crate) fn run(&self, plan: &FaultPlan) -> Result<RunOutcome, Searched> {
        self.explorer
            .run_boxed(plan, (self.scenario)(), &self.controller)
            .map_err(Searched::Error)
    }

    /// Judges each plan of `plans`, each on a thread of its own (each run has its own runtime,
    /// server and seeded thread, so runs in parallel are the runs they would be one by one).
    fn judge_all(
        &self,
        plans: &[FaultPlan],
        reference: &NormalWorld,
    ) -> Result<Vec<(RunOutcome, Option<Violation>)>, Searched> {
        if plans.len() == 1 {
            return Ok(vec![self.judge(&plans[0], reference)?]);
        }
        std::thread::scope(|scope| {
            let running: Vec<_> = plans
                .iter()
                .map(|plan| scope.spawn(move || self.judge(plan, reference)))
                .collect();
            running
                .into_iter()
                .map(|run| {
                    run.join().unwrap_or_else(|_| {
                        Err(Searched::Error(ExploreError::Setup(
                            "a run's thread panicked (an invariant or a normalizer rule?)".into(),
                        )))
                    })
                })
                .collect()
        })
    }

    /// Runs `plan` and applies every oracle: the first violation, if any.
    pub(crate) fn judge(
        &self,
        plan: &FaultPlan,
        reference: &NormalWorld,
    ) -> Result<(RunOutcome, Option<Violation>), Searched> {
        let outcome = self.run(plan)?;
        if let Some(violation) = outcome.violations.first().cloned() {
            return Ok((outcome, Some(violation)));
        }
        let differences = self
            .explorer
            .normalizer
            .normalize(&outcome.world)
            .differences(reference);
        let violation = (!differences.is_empty()).then_some(Violation::EndState { differences });
        Ok((outcome, violation))
    }

    /// The smallest plan found that fails with the same class of violation as `plan` does.
    pub(crate) fn shrink(
        &self,
        mut plan: FaultPlan,
        mut violation: Violation,
        mut outcome: RunOutcome,
        reference: &NormalWorld,
    ) -> Result<(FaultPlan, Violation, RunOutcome, usize), Searched> {
        let class = violation.class();
        let mut runs = 0;
        let mut smaller = true;
        while smaller {
            smaller = false;
            // Drop faults, one at a time.
            for i in 0..plan.faults.len() {
                if plan.faults.len() == 1 {
                    break;
                }
                let mut fewer = plan.clone();
                fewer.faults.remove(i);
                runs += 1;
                if let (run, Some(found)) = self.judge(&fewer, reference)? {
                    if found.class() == class {
                        (plan, violation, outcome, smaller) = (fewer, found, run, true);
                        break;
                    }
                }
            }
            if smaller {
                continue;
            }
            // Simplify each fault.
            'faults: for i in 0..plan.faults.len() {
                for simpler in plan.faults[i].simpler() {
                    let mut plainer = plan.clone();
                    plainer.faults[i] = simpler;
                    runs += 1;
                    if let (run, Some(found)) = self.judge(&plainer, reference)? {
                        if found.class() == class {
                            (plan, violation, outcome, smaller) = (plainer, found, run, true);
                            break 'faults;
                        }
                    }
                }
            }
        }
        Ok((plan, violation, outcome, runs))
    }
}

/// What a generated scenario's search ([`crate::generate`]) needs of an exploration: the same
/// search (controller, oracles, budget, seed) over another scenario.
impl Exploration {
    /// This exploration with `scenario` for its scenario.
    pub(crate) fn with_scenario(
        &self,
        scenario: impl Fn() -> Scenario + Send + Sync + 'static,
    ) -> Exploration {
        let mut other = self.clone();
        other.scenario = Arc::new(scenario);
        other
    }

    /// The seed of its runs.
    pub(crate) fn run_seed(&self) -> u64 {
        self.explorer.seed()
    }

    /// The end state of `outcome`'s world as the oracles compare it.
    pub(crate) fn normal(&self, outcome: &RunOutcome) -> NormalWorld {
        self.explorer.normalizer.normalize(&outcome.world)
    }
}

/// Every single fault the systematic phase tries, in order: by class, then by point.
fn candidates(points: &[PointSeen], trace: &crate::Trace, settle: Duration) -> Vec<Fault> {
    let writes: Vec<Point> = points
        .iter()
        .filter(|seen| match seen.point {
            Point::Request(_) => !seen.what.starts_with("GET "),
            Point::Outside(_) => {
                seen.what.starts_with("outside put") || seen.what.starts_with("outside delete")
            }
            Point::Event(_) => false,
        })
        .map(|seen| seen.point)
        .collect();
    let requests: Vec<Point> = points
        .iter()
        .filter(|seen| matches!(seen.point, Point::Request(_)))
        .map(|seen| seen.point)
        .collect();
    let api_writes: Vec<Point> = writes
        .iter()
        .copied()
        .filter(|point| matches!(point, Point::Request(_)))
        .collect();
    let events: Vec<Point> = points
        .iter()
        .filter(|seen| matches!(seen.point, Point::Event(_)))
        .map(|seen| seen.point)
        .collect();
    let mut faults = Vec::new();
    faults.extend(writes.iter().map(|&at| Fault::CrashAfter(at)));
    faults.extend(writes.iter().map(|&at| Fault::CrashBefore(at)));
    faults.extend(api_writes.iter().map(|&at| Fault::Fail {
        at,
        failure: Failure::Conflict,
    }));
    faults.extend(api_writes.iter().map(|&at| Fault::Fail {
        at,
        failure: Failure::Timeout,
    }));
    faults.extend(events.iter().map(|&at| Fault::Coalesce(at)));
    faults.extend(events.iter().map(|&at| Fault::Delay {
        at,
        by: Duration::from_secs(4),
    }));
    // A restart from a lagging replica, at each write, 2, 4, 8 and 16 revisions behind: how far
    // back the stale view must go for a bug to show depends on the scenario (a deletion two
    // writes ago, a spec three edits ago).
    for behind in [2, 4, 8, 16] {
        faults.extend(
            writes
                .iter()
                .map(|&at| Fault::RestartLagging { at, behind }),
        );
    }
    faults.extend(events.iter().map(|&at| Fault::CrashBefore(at)));
    faults.extend(requests.iter().map(|&at| Fault::Fail {
        at,
        failure: Failure::Internal,
    }));
    faults.extend(requests.iter().map(|&at| Fault::Fail {
        at,
        failure: Failure::TooManyRequests,
    }));
    faults.extend(events.iter().map(|&at| Fault::Compact(at)));
    faults.extend(events.iter().map(|&at| Fault::DropWatches(at)));
    faults.extend(lasting(points, trace, settle));
    faults
}

/// The lasting faults worth a run each (see [`crate::stale`]), for a controller that watches
/// more than one kind (a join: the kind whose changes another kind's objects depend on):
///
/// - `partition(1)` at every event the controller reads (of any kind: which kind depends on
///   which is the controller's secret): from that change on, its kind's watches stay stale
///   while the next step acts;
/// - `lagging-replica(0,2)` at the controller's last point before each step: its replica stops
///   just before the step (the point is in the step before's window, which counts as the one
///   under way), and shows neither the step nor the next one until both have settled;
/// - the same two in seconds ([`Fault::PartitionFor`], [`Fault::LaggingReplicaFor`]), with a
///   window that straddles the next step and heals halfway through that step's settle (see
///   [`StepWindows::straddling`]): the stale view meets the step, and the present comes back
///   while the controller is still reacting to it, not at a step's boundary as a step window
///   does.
///
/// A point in the last step's window has no next step to straddle; a timed window there would
/// end with the steps, as `partition(1)` does, so it gets none.
fn lasting(points: &[PointSeen], trace: &crate::Trace, settle: Duration) -> Vec<Fault> {
    let step_starts: Vec<usize> = trace
        .entries
        .iter()
        .enumerate()
        .filter(|(_, entry)| matches!(entry, crate::TraceEntry::Step { .. }))
        .map(|(at, _)| at)
        .collect();
    // `event MODIFIED Group default/g rv=5`: the kind is the third word.
    let kind = |what: &str| what.split(' ').nth(2).map(str::to_string);
    let events: Vec<(String, &PointSeen)> = points
        .iter()
        .filter(|seen| matches!(seen.point, Point::Event(_)))
        .filter_map(|seen| Some((kind(&seen.what)?, seen)))
        .collect();
    let mut kinds: Vec<&String> = events.iter().map(|(kind, _)| kind).collect();
    kinds.sort();
    kinds.dedup();
    if kinds.len() < 2 {
        return Vec::new();
    }
    let windows = StepWindows::of(trace, &step_starts, settle);
    let mut faults: Vec<Fault> = events
        .iter()
        .map(|&(_, seen)| Fault::Partition {
            at: seen.point,
            steps: 1,
        })
        .collect();
    let mut before_steps: Vec<&PointSeen> = Vec::new();
    for &start in &step_starts {
        if let Some(before) = points.iter().rev().find(|seen| seen.at < start) {
            let fault = Fault::LaggingReplica {
                at: before.point,
                behind: 0,
                steps: 2,
            };
            if !faults.contains(&fault) {
                faults.push(fault);
                before_steps.push(before);
            }
        }
    }
    faults.extend(events.iter().filter_map(|&(_, seen)| {
        let lasts = windows.straddling(seen.at)?;
        Some(Fault::PartitionFor {
            at: seen.point,
            lasts,
        })
    }));
    faults.extend(before_steps.iter().filter_map(|seen| {
        let lasts = windows.straddling(seen.at)?;
        Some(Fault::LaggingReplicaFor {
            at: seen.point,
            behind: 0,
            lasts,
        })
    }));
    faults
}

/// When the reference run's steps began and settled, in virtual time since the run began: what
/// a timed lasting fault's window is chosen from.
struct StepWindows<'a> {
    /// Virtual milliseconds of each trace entry (the reference trace's `times`).
    times: &'a [u64],
    /// Each step's position in the trace, when it began and when it settled (milliseconds): a
    /// step has settled when the next one begins, the last one a settle after it began.
    steps: Vec<StepWindow>,
}

/// One step of the reference run, as [`StepWindows`] keeps it.
struct StepWindow {
    /// The position of its `step` entry in the trace.
    at: usize,
    /// When it began (virtual milliseconds).
    began: u64,
    /// When it settled (virtual milliseconds; not before `began`).
    settled: u64,
}

impl<'a> StepWindows<'a> {
    fn of(trace: &'a crate::Trace, step_starts: &[usize], settle: Duration) -> StepWindows<'a> {
        let times = trace.times.as_slice();
        let began: Vec<(usize, u64)> = step_starts
            .iter()
            .filter_map(|&at| Some((at, *times.get(at)?)))
            .collect();
        let settle = u64::try_from(settle.as_millis()).unwrap_or(u64::MAX);
        let steps = began
            .iter()
            .enumerate()
            .map(|(i, &(at, began_at))| StepWindow {
                at,
                began: began_at,
                settled: began
                    .get(i + 1)
                    .map_or(began_at.saturating_add(settle), |&(_, next)| next)
                    .max(began_at),
            })
            .collect();
        StepWindows { times, steps }
    }

    /// How long a window opened at trace position `at` lasts to straddle the next step (the first
    /// to begin after `at`, as the step candidates count) and heal halfway through that step's
    /// settle, in whole seconds rounded up, so that it always reaches past the step's start:
    /// `None` when no step begins after `at`, or the trace has no times.
    fn straddling(&self, at: usize) -> Option<Duration> {
        // A point's position is the trace's length when it was passed: its time is that of the
        // entry recorded there (or the last one, if none came after).
        let now = self.times.get(at).or_else(|| self.times.last()).copied()?;
        let next = self.steps.iter().find(|step| step.at > at)?;
        let heals = next.began + (next.settled - next.began) / 2;
        let millis = heals.saturating_sub(now).max(1);
        Some(Duration::from_secs(millis.div_ceil(1000)))
    }
}

/// A plan of 1 to `max` faults drawn from `candidates`, ordered by point.
fn random_plan(candidates: &[Fault], random: &mut SplitMix, max: usize) -> FaultPlan {
    let count = 1 + random.below(max.max(1) as u64) as usize;
    let mut faults: Vec<Fault> = (0..count)
        .map(|_| candidates[random.below(candidates.len() as u64) as usize])
        .collect();
    faults.sort_by_key(Fault::point);
    faults.dedup();
    FaultPlan { faults }
}

/// The search's own random numbers (SplitMix64): independent of the runs' generator, which each
/// run reseeds.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0).
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}

/// How a search ended when it did not pass.
#[derive(Debug)]
pub enum Searched {
    /// A run failed: what, and how to replay it.
    Found(Box<Found>),
    /// A run could not be made at all.
    Error(ExploreError),
    /// The wall-clock cap came before every single-fault candidate was tried, under a budget
    /// that must cover them ([`Budget::must_cover`]): no bug found, but not because there is
    /// none to find.
    Incomplete(Report),
}

impl fmt::Display for Searched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Searched::Found(found) => found.fmt(f),
            Searched::Error(error) => write!(f, "the exploration could not run: {error}"),
            Searched::Incomplete(report) => write!(
                f,
                "coverage incomplete: {} of {} candidates in {:.1} s ({} runs); the cap came \
                 first: raise it (Budget::cap), or shorten the scenario",
                report.covered,
                report.candidates,
                report.elapsed.as_secs_f64(),
                report.runs
            ),
        }
    }
}

/// A search that found nothing: how much it looked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Runs made, the reference run included.
    pub runs: usize,
    /// Points the reference run passed.
    pub points: usize,
    /// Single faults the systematic phase had to try.
    pub candidates: usize,
    /// How many of them it tried (all of them under the default budget).
    pub covered: usize,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no bug found (seed {}): {} runs, {} of {} single-fault candidates covered, {} points, \
             {:.1} s",
            self.seed,
            self.runs,
            self.covered,
            self.candidates,
            self.points,
            self.elapsed.as_secs_f64()
        )
    }
}

impl Report {
    /// Runs per second of wall-clock time.
    pub fn runs_per_second(&self) -> f64 {
        self.runs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A failing run, shrunk: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Found {
    /// The seed of every run of the search.
    pub seed: u64,
    /// The minimal plan (empty: the bug needs no fault).
    pub plan: FaultPlan,
    /// What the oracle said about the minimal plan's run.
    pub violation: Violation,
    /// The minimal plan's run.
    pub outcome: RunOutcome,
    /// Runs made until the plan was minimal (search and shrinking).
    pub runs: usize,
    /// Wall-clock time until then.
    pub elapsed: Duration,
}

impl Found {
    /// Runs per second of wall-clock time.
    pub fn runs_per_second(&self) -> f64 {
        self.runs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The trace around the first fault (or around the violation, or the whole trace's start).
    pub fn excerpt(&self) -> String {
        let trace = &self.outcome.trace;
        let first_fault = trace
            .entries
            .iter()
            .position(|entry| matches!(entry, crate::TraceEntry::Fault { .. }));
        let center = match (&self.violation, first_fault) {
            (_, Some(at)) => at,
            (Violation::Invariant { at, .. }, None) => *at,
            _ => 0,
        };
        trace.excerpt(center.saturating_sub(12), center + 24)
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the explorer found a bug (seed {}, {} runs, {:.1} s, {:.1} runs/s)",
            self.seed,
            self.runs,
            self.elapsed.as_secs_f64(),
            self.runs_per_second()
        )?;
        writeln!(f, "  {}", self.violation)?;
        if self.plan.is_empty() {
            writeln!(f, "  it needs no fault: the fault-free run fails")?;
        } else {
            writeln!(f, "  minimal plan: {}", self.plan)?;
        }
        writeln!(
            f,
            "  replay: exploration.seed({}).replay(\"{}\")",
            self.seed, self.plan
        )?;
        writeln!(f, "  the trace around it:")?;
        write!(f, "{}", self.excerpt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Trace, TraceEntry};

    fn step(index: usize) -> TraceEntry {
        TraceEntry::Step {
            index,
            name: format!("step {index}"),
        }
    }

    fn outside(call: &str) -> TraceEntry {
        TraceEntry::Outside {
            actor: "controller#1".into(),
            call: call.into(),
        }
    }

    #[test]
    fn explore_a_timed_window_straddles_the_next_step_and_heals_in_its_settle() {
        // Steps at 2 s and 7 s (a 5 s settle); points at 0.5 s, 3 s and 8 s.
        let trace = Trace {
            entries: vec![
                outside("put a"),
                step(0),
                outside("put b"),
                step(1),
                outside("put c"),
            ],
            times: vec![500, 2000, 3000, 7000, 8000],
        };
        let windows = StepWindows::of(&trace, &[1, 3], Duration::from_secs(5));
        // Before step 0: until halfway through step 0's settle (4.5 s), 4 s on.
        assert_eq!(windows.straddling(0), Some(Duration::from_secs(4)));
        // In step 0's window: past step 1 (7 s) to 9.5 s, rounded up to 7 s on.
        assert_eq!(windows.straddling(2), Some(Duration::from_secs(7)));
        // In the last step's window: no step left to straddle.
        assert_eq!(windows.straddling(4), None);
        // A trace without times (built by hand) gives no timed windows.
        let untimed = Trace {
            entries: trace.entries.clone(),
            times: Vec::new(),
        };
        let windows = StepWindows::of(&untimed, &[1, 3], Duration::from_secs(5));
        assert_eq!(windows.straddling(0), None);
    }
}
