//! What one run shares between its parts: the tap (requests and watch events), the outside
//! system (its calls), the supervisor (restarts) and the runner (the oracles' findings).
//!
//! ```text
//!   tap ───────────┐  pass(point) → the plan's faults there; crash(incarnation)
//!   outside calls ─┼─▶ RunShared ── restarts ──▶ supervisor (run.rs)
//!   change feed ───┘   (plan, counters, points, world, invariants, writes, violations)
//! ```
//!
//! It sits below `tap`, `outside` and `run`, and imports none of them, so the modules of a run
//! form a line, not a circle: `shared` ← `tap`, `outside` ← `run`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ferrokube_apiserver::RunningServer;
use ferrokube_apiserver::store::EventType;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use crate::fault::{Fault, FaultPlan, Point};
use crate::oracle::{Invariant, Liveness, Violation, Within};
use crate::stale::{Staleness, Window};
use crate::trace::{Recorder, TraceEntry};
use crate::world::World;

/// The most requests the controller may send at one instant of virtual time. A controller that
/// loops without ever waiting on a timer (each write bringing its key back at once, a cache that
/// never shows what it acts on) keeps the runtime busy, so virtual time never moves and the run
/// would never end; at this many requests the run stops, failed with [`Violation::Runaway`]. A
/// good controller sends a few, or a burst of a few hundred, before it waits for something.
pub const RUNAWAY_REQUESTS: u64 = 2_000;

/// A call the outside system must refuse: its incarnation has crashed.
pub(crate) struct Refused;

/// One incarnation of the controller: alive until the plan crashes it.
pub(crate) struct Incarnation {
    pub(crate) number: u32,
    /// False from the moment it crashes: its requests and outside calls are refused, its watches
    /// end.
    pub(crate) alive: AtomicBool,
    /// While its replica lags: lists are served at this revision and watch lines after it are
    /// held until the replica catches up.
    pub(crate) lag: Option<Lag>,
    pub(crate) stop: watch::Sender<bool>,
    /// The collections (paths without their query) this incarnation has watched so far.
    pub(crate) watched: Mutex<std::collections::BTreeSet<String>>,
}

impl Incarnation {
    pub(crate) fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Whether a watch of `path` is a re-watch: this incarnation has watched the same
    /// collection before (an informer's resume after its watch timed out, was dropped or went
    /// idle). A re-watch is not a point: it decides nothing, and in a fault-free run most of
    /// them are idle resumes whose number depends only on how long the run lasts, so counting
    /// them would spend the search's budget on faults that change nothing and would shift every
    /// later point when a step moves. Notes `path` as watched.
    pub(crate) fn watches_again(&self, path: &str) -> bool {
        let collection = path.split('?').next().unwrap_or(path).to_string();
        !self.watched.lock().insert(collection)
    }

    pub(crate) fn actor(&self) -> String {
        format!("controller#{}", self.number)
    }
}

/// A lagging replica: where it is, and when it has caught up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lag {
    pub(crate) revision: u64,
    pub(crate) until: tokio::time::Instant,
}

/// A point the run passed, with what happened there (`GET /api/v1/...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointSeen {
    /// The point.
    pub point: Point,
    /// What the controller did there.
    pub what: String,
    /// The incarnation that did it.
    pub incarnation: u32,
    /// Its position in the trace.
    pub at: usize,
}

#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) requests: u64,
    pub(crate) events: u64,
    pub(crate) outside: u64,
    /// The controller's requests at the virtual instant of its last one.
    pub(crate) instant: Option<(tokio::time::Instant, u64)>,
}

/// A restart the supervisor owes.
pub(crate) struct RestartOrder {
    pub(crate) lag_behind: Option<u64>,
}

/// What the tap, the outside system and the runner share within a run.
pub(crate) struct RunShared {
    pub(crate) plan: FaultPlan,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) server: Arc<RunningServer>,
    pub(crate) counts: Mutex<Counts>,
    pub(crate) points: Mutex<Vec<PointSeen>>,
    pub(crate) restarts: mpsc::UnboundedSender<RestartOrder>,
    pub(crate) world: Mutex<World>,
    pub(crate) invariants: Vec<Invariant>,
    /// The liveness properties, and for each `always_eventually` one how many steps had begun
    /// when it last held (see [`crate::Liveness`]).
    pub(crate) liveness: Vec<Liveness>,
    pub(crate) held: Mutex<Vec<Option<usize>>>,
    /// The names of the steps begun so far.
    pub(crate) steps: Mutex<Vec<String>>,
    /// Invariants already broken (each is reported once, at the first change that broke it).
    pub(crate) violations: Mutex<Vec<Violation>>,
    /// Every write of the controller: when, and what.
    pub(crate) writes: Mutex<Vec<(tokio::time::Instant, String)>>,
    /// Every object the controller created: (resource, key).
    pub(crate) created: Mutex<Vec<(String, String)>>,
    /// Turns true when the run has failed before its end (an invariant broke, the controller ran
    /// away): the runner then stops waiting and ends the run there.
    pub(crate) decided: watch::Sender<bool>,
    /// The lasting faults (a lagging replica, a partitioned watch) and the steps that end them.
    pub(crate) stale: Staleness,
}

impl RunShared {
    pub(crate) fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// The next point of `kind` (a `Point` with any number), noted as passed.
    pub(crate) fn pass(&self, kind: Point, what: String, incarnation: u32) -> Point {
        let point = {
            let mut counts = self.counts.lock();
            match kind {
                Point::Request(_) => {
                    counts.requests += 1;
                    let now = tokio::time::Instant::now();
                    let at_once = match counts.instant {
                        Some((instant, at_once)) if instant == now => at_once + 1,
                        _ => 1,
                    };
                    counts.instant = Some((now, at_once));
                    if at_once == RUNAWAY_REQUESTS {
                        self.ran_away();
                    }
                    Point::Request(counts.requests)
                }
                Point::Event(_) => {
                    counts.events += 1;
                    Point::Event(counts.events)
                }
                Point::Outside(_) => {
                    counts.outside += 1;
                    Point::Outside(counts.outside)
                }
            }
        };
        self.points.lock().push(PointSeen {
            point,
            what,
            incarnation,
            at: self.recorder.len(),
        });
        // The faults that act on the whole server act first, whatever else happens here.
        for fault in self.plan.at(point) {
            match fault {
                Fault::Compact(_) => {
                    self.server.store().advance_revision();
                    let revision = self.server.compact();
                    self.server.close_watches();
                    self.note(
                        fault,
                        format!("history compacted at rv={revision}, every watch ended"),
                    );
                }
                Fault::LaggingReplica { behind, steps, .. } => {
                    let revision = self.server.store().revision().saturating_sub(*behind);
                    self.stale.lag_replica(revision, Window::Steps(*steps));
                    self.note(
                        fault,
                        format!("the controller's replica stopped at rv={revision}"),
                    );
                }
                Fault::LaggingReplicaFor { behind, lasts, .. } => {
                    let revision = self.server.store().revision().saturating_sub(*behind);
                    self.stale.lag_replica(revision, Window::For(*lasts));
                    self.note(
                        fault,
                        format!("the controller's replica stopped at rv={revision}"),
                    );
                }
                Fault::DropWatches(_) => {
                    let ended = self.server.close_watches();
                    self.note(fault, format!("{ended} watches ended"));
                }
                _ => {}
            }
        }
        point
    }

    /// Records in the trace that `fault` took effect.
    pub(crate) fn note(&self, fault: &Fault, detail: String) {
        self.recorder.push(TraceEntry::Fault {
            fault: fault.to_string(),
            detail,
        });
    }

    /// Crashes `incarnation` (once): from now on it can do nothing; the supervisor restarts the
    /// controller.
    pub(crate) fn crash(&self, incarnation: &Incarnation, fault: &Fault, detail: &str) {
        if !incarnation.alive.swap(false, Ordering::AcqRel) {
            return;
        }
        self.note(fault, format!("{} crashed: {detail}", incarnation.actor()));
        incarnation.stop.send_replace(true);
        let lag_behind = match fault {
            Fault::RestartLagging { behind, .. } => Some(*behind),
            _ => None,
        };
        // The supervisor outlives every incarnation; if it is gone the run is ending anyway.
        let _ = self.restarts.send(RestartOrder { lag_behind });
    }

    /// A call to the outside system by `incarnation`: whether it may happen, and the fault that
    /// crashes the controller right after it, if any.
    pub(crate) fn outside_call(
        &self,
        incarnation: &Incarnation,
        what: &str,
    ) -> Result<Option<Fault>, Refused> {
        if !incarnation.alive() {
            return Err(Refused);
        }
        let point = self.pass(
            Point::Outside(0),
            format!("outside {what}"),
            incarnation.number,
        );
        let mut after = None;
        for fault in self.plan.at(point) {
            match fault {
                Fault::CrashBefore(_) | Fault::RestartLagging { .. } => {
                    self.crash(incarnation, fault, &format!("before outside {what}"));
                    return Err(Refused);
                }
                Fault::CrashAfter(_) => after = Some(*fault),
                _ => {}
            }
        }
        self.recorder.push(TraceEntry::Outside {
            actor: incarnation.actor(),
            call: what.to_string(),
        });
        Ok(after)
    }

    /// The outside system's records changed: update the world and check the invariants.
    pub(crate) fn outside_changed(
        &self,
        records: std::collections::BTreeMap<String, String>,
        what: &str,
    ) {
        let mut world = self.world.lock();
        world.outside = records;
        self.check_invariants(&world, &format!("outside {what}"));
    }

    /// A write of the controller (for the fixed-point oracle) and, for a create, what it made.
    pub(crate) fn controller_wrote(&self, what: String, created: Option<(String, String)>) {
        self.writes.lock().push((tokio::time::Instant::now(), what));
        if let Some(created) = created {
            self.created.lock().push(created);
        }
    }

    /// The controller sent [`RUNAWAY_REQUESTS`] requests at one instant: the run fails, and ends.
    pub(crate) fn ran_away(&self) {
        let writes = self.writes.lock();
        let last = writes
            .iter()
            .skip(writes.len().saturating_sub(12))
            .map(|(_, what)| what.clone())
            .collect();
        self.violations.lock().push(Violation::Runaway {
            requests: RUNAWAY_REQUESTS,
            last,
        });
        self.decided.send_replace(true);
    }

    /// Notes which `always_eventually` properties hold in `world` (after a change, or at the
    /// end of a step's settle): each one that does has held since the current step began.
    fn note_liveness(&self, world: &World) {
        let begun = self.steps.lock().len();
        let mut held = self.held.lock();
        for (property, held) in self.liveness.iter().zip(held.iter_mut()) {
            if property.within == Within::EveryStep
                && *held != Some(begun)
                && (property.check)(world).is_ok()
            {
                *held = Some(begun);
            }
        }
    }

    /// Step `name` begins.
    pub(crate) fn step_begins(&self, name: &str) {
        self.steps.lock().push(name.to_string());
    }

    /// A step's settle has ended: the world as it is counts as a moment after the step.
    pub(crate) fn step_settled(&self) {
        let world = self.world.lock();
        self.note_liveness(&world);
    }

    /// The run is over and the world quiet: every liveness property violated. An `eventually`
    /// one must hold now; an `always_eventually` one must hold now, or have held at some moment
    /// since the last step began (then it held after every step, the ones before included).
    pub(crate) fn liveness_at_end(&self, world: &World) -> Vec<Violation> {
        let steps = self.steps.lock().clone();
        let held = self.held.lock().clone();
        self.liveness
            .iter()
            .zip(held)
            .filter_map(|(property, held)| {
                let last = (property.check)(world).err()?;
                let when = match property.within {
                    Within::End => "once the world was quiet after the last step".to_string(),
                    Within::EveryStep if held == Some(steps.len()) => return None,
                    Within::EveryStep => {
                        // It held last while step `n - 1` was under way: never since step `n`.
                        let since = held.unwrap_or(0);
                        match steps.get(since) {
                            Some(name) => format!("at any moment after step {since} ({name})"),
                            None => "at any moment of the run".to_string(),
                        }
                    }
                };
                Some(Violation::Liveness {
                    name: property.name.clone(),
                    when,
                    last,
                })
            })
            .collect()
    }

    pub(crate) fn check_invariants(&self, world: &World, after: &str) {
        self.note_liveness(world);
        if self.invariants.is_empty() {
            return;
        }
        let mut violations = self.violations.lock();
        for invariant in &self.invariants {
            let already = violations
                .iter()
                .any(|v| matches!(v, Violation::Invariant { name, .. } if *name == invariant.name));
            if already {
                continue;
            }
            if let Err(why) = (invariant.check)(world) {
                violations.push(Violation::Invariant {
                    name: invariant.name.clone(),
                    why,
                    after: after.to_string(),
                    at: self.recorder.len(),
                });
                self.decided.send_replace(true);
            }
        }
    }

    /// Applies the server's changes to the world, checking the invariants after each.
    pub(crate) async fn observe(
        self: Arc<RunShared>,
        mut changes: mpsc::UnboundedReceiver<Arc<ferrokube_apiserver::store::Change>>,
    ) {
        while let Some(change) = changes.recv().await {
            let mut world = self.world.lock();
            match change.event {
                EventType::Deleted => world.remove(&change.table, &change.key),
                EventType::Added | EventType::Modified => {
                    world.put(&change.table, &change.key, change.object.object.clone());
                }
            }
            let after = format!(
                "{} {} {} rv={}",
                change.event.as_str(),
                change.table,
                change.key,
                change.revision
            );
            self.check_invariants(&world, &after);
        }
    }
}
