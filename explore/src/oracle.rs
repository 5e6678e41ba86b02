//! Oracles: how a run is judged without the author writing the expected outcome.
//!
//! | oracle | checked | fails when |
//! |---|---|---|
//! | safety invariants ([`Invariant`]) | after every change on the server and every outside call | the author's predicate over the [`World`] returns an error |
//! | liveness, `eventually` ([`Liveness::eventually`], [`Liveness::ready_at_generation`]) | once, when the world is quiet after the last step (the end of the run) | the predicate does not hold there |
//! | liveness, `always_eventually` ([`Liveness::always_eventually`]) | after every change and at the end of every step's settle; judged at the end of the run | it does not hold at the end, and has not held at any moment since the last step began |
//! | end state | at the end | the normalised world differs from the fault-free run's (see [`crate::world::Normalizer`]) |
//! | fixed point | in a quiet window after the last step and every fault; and all along, a bound on requests ([`crate::RUNAWAY_REQUESTS`]) | the controller still writes (an object rewritten forever, a status that never settles), or loops without ever letting virtual time pass ([`Violation::Runaway`]) |
//! | nothing left behind ([`crate::Exploration::leaves_nothing_behind`]) | at the end, when the scenario deleted every primary | an object the controller created still exists, an object is stuck with a finalizer, or an outside record remains |
//!
//! Safety says "nothing bad ever happens", so it is checked at every change; a property that a
//! correct controller makes true only after it has reacted ("every pod carries its group's
//! colour") breaks at the first change of the fault-free run and is a liveness property: it must
//! hold *once the controller had time*, which the runner defines as the end of the run, after the
//! finish and quiet windows (`eventually`), or some moment after each step (`always_eventually`:
//! a property that may be false again at the end, like "a rollout completed"). A
//! liveness violation names the property and what the predicate said about the last state seen.
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

/// When a [`Liveness`] property must have held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Within {
    /// Once the world is quiet after the last step (at the end of the run).
    End,
    /// At some moment of every step's settle, and at the end.
    EveryStep,
}

/// A liveness property: a name, a predicate over the world, and when it must have held. See the
/// [module docs](self).
#[derive(Clone)]
pub struct Liveness {
    pub(crate) name: String,
    pub(crate) check: Check,
    pub(crate) within: Within,
}

impl Liveness {
    /// `check` holds once the world is quiet after the last step: at the end of the run, after
    /// the finish and quiet windows. `Err(why)` says what is wrong with the last state seen.
    pub fn eventually(
        name: impl Into<String>,
        check: impl Fn(&World) -> Result<(), String> + Send + Sync + 'static,
    ) -> Liveness {
        Liveness {
            name: name.into(),
            check: Arc::new(check),
            within: Within::End,
        }
    }

    /// `check` holds at some moment after each step began (after a change, at the end of a
    /// settle, or at the end of the run): it may be false at the end if it held after the last
    /// step began. A fault may delay it past the next step; it need not hold before the next
    /// step begins, only at some moment after each (holding after the last one covers the
    /// earlier ones too, so a violation names the step since which it never held).
    pub fn always_eventually(
        name: impl Into<String>,
        check: impl Fn(&World) -> Result<(), String> + Send + Sync + 'static,
    ) -> Liveness {
        Liveness {
            name: name.into(),
            check: Arc::new(check),
            within: Within::EveryStep,
        }
    }

    /// Every object of `resource` (the world's name for it: `mirrors.example.com`, `deployments.apps`)
    /// eventually has the condition `Ready=True` at its generation: `status.conditions` holds a
    /// `Ready` condition with status `True` whose `observedGeneration` (the condition's, or
    /// `status.observedGeneration`) is the object's `metadata.generation`. The usual promise of a
    /// controller of a custom resource with conditions.
    pub fn ready_at_generation(resource: impl Into<String>) -> Liveness {
        let resource = resource.into();
        let name = format!("every {resource} is Ready=True at its generation");
        Liveness::eventually(name, move |world| {
            let not_ready: Vec<String> = world
                .objects(&resource)
                .filter_map(|(key, object)| {
                    not_ready_at_generation(object).map(|why| format!("{key}: {why}"))
                })
                .collect();
            match not_ready.is_empty() {
                true => Ok(()),
                false => Err(not_ready.join("; ")),
            }
        })
    }
}

/// Why `object` is not Ready=True at its generation, or `None` when it is.
fn not_ready_at_generation(object: &serde_json::Value) -> Option<String> {
    let generation = object["metadata"]["generation"].as_i64();
    let status = &object["status"];
    let ready = status["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"));
    let Some(ready) = ready else {
        return Some("no Ready condition".into());
    };
    let state = ready["status"].as_str().unwrap_or("<none>");
    let observed = ready["observedGeneration"]
        .as_i64()
        .or_else(|| status["observedGeneration"].as_i64());
    let reason = ready["reason"].as_str().unwrap_or("");
    if state != "True" {
        return Some(format!("Ready={state} (reason {reason:?})"));
    }
    match (generation, observed) {
        (Some(generation), Some(observed)) if observed != generation => Some(format!(
            "Ready=True observed generation {observed}, the object is at {generation}"
        )),
        (Some(generation), None) => Some(format!(
            "Ready=True with no observedGeneration, the object is at {generation}"
        )),
        _ => None,
    }
}

impl fmt::Debug for Liveness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Liveness")
            .field("name", &self.name)
            .field("within", &self.within)
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
    /// A liveness property never held when it had to.
    Liveness {
        /// The property's name.
        name: String,
        /// When it had to hold (`once the world was quiet after the last step`, `at any moment
        /// after step 1 (recolour)`).
        when: String,
        /// What its check said about the last state seen.
        last: String,
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
            Violation::Liveness { .. } => "liveness",
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
            Violation::Liveness { name, when, last } => write!(
                f,
                "liveness {name:?} never held {when}; the last state seen: {last}"
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn world_with(object: serde_json::Value) -> World {
        let mut world = World::default();
        world.put(
            "mirrors.example.com",
            "default/m",
            std::sync::Arc::new(object),
        );
        world
    }

    #[test]
    fn explore_ready_at_generation_wants_ready_true_at_the_objects_generation() {
        let property = Liveness::ready_at_generation("mirrors.example.com");
        let ready = |status: &str, observed: i64| {
            json!({"metadata": {"generation": 2}, "status": {"conditions": [
                {"type": "Ready", "status": status, "reason": "Copied",
                 "observedGeneration": observed}]}})
        };
        assert_eq!((property.check)(&world_with(ready("True", 2))), Ok(()));
        let stale = (property.check)(&world_with(ready("True", 1)));
        assert!(
            stale
                .as_ref()
                .is_err_and(|why| why.contains("observed generation 1")),
            "{stale:?}"
        );
        let not_ready = (property.check)(&world_with(ready("False", 2)));
        assert!(
            not_ready
                .as_ref()
                .is_err_and(|why| why.contains("default/m: Ready=False")),
            "{not_ready:?}"
        );
        let none = (property.check)(&world_with(json!({"metadata": {"generation": 1}})));
        assert!(none.is_err_and(|why| why.contains("no Ready condition")));
        // status.observedGeneration stands in for the condition's.
        let top = json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 3,
            "conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!((property.check)(&world_with(top)), Ok(()));
        assert_eq!((property.check)(&World::default()), Ok(()));
    }
}
