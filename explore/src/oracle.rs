//! Oracles: how a run is judged without the author writing the expected outcome.
//!
//! | oracle | checked | fails when |
//! |---|---|---|
//! | safety invariants ([`Invariant`]) | after every change on the server and every outside call | the author's predicate over the [`World`] returns an error |
//! | end state | at the end | the normalised world differs from the fault-free run's (see [`crate::world::Normalizer`]) |
//! | fixed point | in a quiet window after the last step and every fault; and all along, a bound on requests ([`crate::RUNAWAY_REQUESTS`]) | the controller still writes (an object rewritten forever, a status that never settles), or loops without ever letting virtual time pass ([`Violation::Runaway`]) |
//! | nothing left behind ([`crate::Exploration::leaves_nothing_behind`]) | at the end, when the scenario deleted every primary | an object the controller created still exists, an object is stuck with a finalizer, or an outside record remains |
//!
//! A run passes when no oracle fails. The fault-free run is judged too (all but the end-state
//! comparison, which it defines): a bug that needs no fault is reported with an empty plan. A run
//! whose invariant broke, or whose controller ran away, has failed already: it ends there, without
//! the rest of its scenario and the quiet window.

use std::fmt;
use std::sync::Arc;

use crate::world::World;

/// An invariant's predicate: `Err(why)` when the world breaks it.
type Check = Arc<dyn Fn(&World) -> Result<(), String> + Send + Sync>;

/// A safety invariant: a name and a predicate over the world. See the [module docs](self).
#[derive(Clone)]
pub struct Invariant {
    pub(crate) name: String,
    pub(crate) check: Check,
}

impl Invariant {
    /// An invariant called `name`: `check` returns `Err(why)` when the world breaks it.
    pub fn new(
        name: impl Into<String>,
        check: impl Fn(&World) -> Result<(), String> + Send + Sync + 'static,
    ) -> Invariant {
        Invariant {
            name: name.into(),
            check: Arc::new(check),
        }
    }
}

impl fmt::Debug for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invariant")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A safety invariant broke.
    Invariant {
        /// The invariant's name.
        name: String,
        /// What its check said.
        why: String,
        /// The change after which it broke (`MODIFIED pods default/web-x rv=31`, `outside put a=1`).
        after: String,
        /// The position in the trace at that moment.
        at: usize,
    },
    /// The end state differs from the fault-free run's.
    EndState {
        /// The differences, one per line.
        differences: Vec<String>,
    },
    /// The controller was still writing in the quiet window.
    NeverSettles {
        /// The writes it made there (method and path).
        writes: Vec<String>,
    },
    /// The controller sent so many requests at one instant of virtual time that the run was
    /// stopped (see [`crate::RUNAWAY_REQUESTS`]): a loop that never waits, so time never moved on.
    Runaway {
        /// How many requests it had sent at that instant.
        requests: u64,
        /// Its last writes (method and path).
        last: Vec<String>,
    },
    /// Something remained after every primary was deleted.
    LeftBehind {
        /// What remained.
        what: Vec<String>,
    },
    /// A step of the scenario failed.
    Step {
        /// The step's position.
        index: usize,
        /// The step's name.
        name: String,
        /// Its error.
        error: String,
    },
    /// The controller's task panicked.
    Panicked {
        /// The panic.
        message: String,
    },
}

impl Violation {
    /// A short name for the class of violation.
    pub fn class(&self) -> &'static str {
        match self {
            Violation::Invariant { .. } => "invariant",
            Violation::EndState { .. } => "end state",
            Violation::NeverSettles { .. } | Violation::Runaway { .. } => "fixed point",
            Violation::LeftBehind { .. } => "left behind",
            Violation::Step { .. } => "step",
            Violation::Panicked { .. } => "panic",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, lines: &[String]| -> fmt::Result {
            for line in lines.iter().take(12) {
                write!(f, "\n    {line}")?;
            }
            if lines.len() > 12 {
                write!(f, "\n    … and {} more", lines.len() - 12)?;
            }
            Ok(())
        };
        match self {
            Violation::Invariant {
                name,
                why,
                after,
                at,
            } => write!(
                f,
                "invariant {name:?} broke after {after} (trace entry {at}): {why}"
            ),
            Violation::EndState { differences } => {
                write!(f, "the end state differs from the fault-free run's:")?;
                list(f, differences)
            }
            Violation::NeverSettles { writes } => {
                write!(
                    f,
                    "the controller never settles: {} writes in the quiet window:",
                    writes.len()
                )?;
                list(f, writes)
            }
            Violation::Runaway { requests, last } => {
                write!(
                    f,
                    "the controller ran away: {requests} requests without letting virtual time \
                     pass; its last writes:"
                )?;
                list(f, last)
            }
            Violation::LeftBehind { what } => {
                write!(f, "left behind after every primary was deleted:")?;
                list(f, what)
            }
            Violation::Step { index, name, error } => {
                write!(f, "step {index} ({name}) failed: {error}")
            }
            Violation::Panicked { message } => write!(f, "the controller panicked: {message}"),
        }
    }
}
