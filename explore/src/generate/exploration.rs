//! [`Generated`]: the fault search over generated sequences, and the shrinking of a failing
//! (sequence, plan) pair.
//!
//! ```text
//!  for each sequence i (drawn with seed + i):
//!     each prefix (edits 0..=k), without faults ─▶ invariants, liveness, fixed point at its end
//!        (a value mishandled at step k and overwritten at k+1 shows at the end of prefix k)
//!     Exploration over generator.scenario(sequence)   the same controller, oracles, budget:
//!        reference run without faults ─▶ invariants, liveness, fixed point
//!        fault plans ─▶ the same oracles + end state = the reference's (differential)
//!     ▼ first failure (sequence, plan, violation)
//!  shrink, until nothing gets smaller (or the shrink budget is spent):
//!     1. drop edits: halves, quarters, …, single edits (delta debugging), each tried with the
//!        plan as it is and without faults
//!     2. simpler values: a key or item fewer, "" for a string, 0, false
//!     3. the plan: the search's own shrinking (fewer faults, simpler faults)
//!     a candidate is kept when it fails with the same class of violation
//!  ▼
//!  GeneratedFound: the minimal sequence (text that parses back), the minimal plan, the
//!  violation, the run; Generated::replay(sequence, plan) gives the same run again
//! ```

use std::fmt;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::generator::Generator;
use super::sequence::{Edit, Sequence};
use crate::ExploreError;
use crate::fault::FaultPlan;
use crate::oracle::Violation;
use crate::run::RunOutcome;
use crate::search::{Exploration, Report, Searched};

/// How many runs shrinking may make by default.
pub const DEFAULT_SHRINK_RUNS: usize = 300;

/// A fault search over generated scenarios. Made by [`Exploration::generated`].
#[derive(Debug, Clone)]
pub struct Generated {
    exploration: Exploration,
    generator: Generator,
    steps: usize,
    sequences: usize,
    shrink_runs: usize,
}

impl Exploration {
    /// Searches sequences of `steps` edits that `generator` draws instead of the exploration's
    /// scenario: the same controller, oracles, budget (per sequence) and seed (sequence `i` is
    /// drawn with the seed plus `i`). One sequence unless [`Generated::sequences`] says more.
    pub fn generated(self, generator: Generator, steps: usize) -> Generated {
        Generated {
            exploration: self,
            generator,
            steps,
            sequences: 1,
            shrink_runs: DEFAULT_SHRINK_RUNS,
        }
    }
}

impl Generated {
    /// How many sequences to search, one after the other (default 1).
    pub fn sequences(mut self, count: usize) -> Generated {
        self.sequences = count.max(1);
        self
    }

    /// How many runs shrinking a failure may make (default [`DEFAULT_SHRINK_RUNS`]).
    pub fn shrink_runs(mut self, runs: usize) -> Generated {
        self.shrink_runs = runs;
        self
    }

    /// The `index`-th sequence the search tries.
    pub fn sequence(&self, index: usize) -> Sequence {
        let seed = self.exploration.run_seed().wrapping_add(index as u64);
        self.generator.sequence(self.steps, seed)
    }

    /// The exploration of one sequence.
    fn over(&self, sequence: &Sequence) -> Exploration {
        let (generator, sequence) = (self.generator.clone(), sequence.clone());
        self.exploration
            .with_scenario(move || generator.scenario(&sequence))
    }

    /// Runs the search; panics with the [`GeneratedFound`] report if a run failed. For a test.
    pub fn check(&self) -> GeneratedReport {
        match self.explore() {
            Ok(report) => report,
            Err(searched) => panic!("{searched}"),
        }
    }

    /// Runs the search: a [`GeneratedReport`] when no run failed, else the minimal failing
    /// (sequence, plan).
    pub fn explore(&self) -> Result<GeneratedReport, GeneratedSearched> {
        let began = Instant::now();
        let mut report = GeneratedReport {
            seed: self.exploration.run_seed(),
            sequences: Vec::new(),
        };
        let mut runs = 0;
        for index in 0..self.sequences {
            let sequence = self.sequence(index);
            let failed = |searched| GeneratedSearched::Search {
                sequence: sequence.clone(),
                searched,
            };
            // Every prefix without faults, shortest first: the oracles at the end of each.
            let mut rejected = 0;
            let mut first_failure = None;
            for end in 1..=sequence.len() {
                let prefix = Sequence {
                    edits: sequence.edits[..end].to_vec(),
                };
                let outcome = self.over(&prefix).run(&FaultPlan::none()).map_err(failed)?;
                runs += 1;
                rejected = Generator::rejected(&outcome.trace);
                if let Some(violation) = outcome.violations.first().cloned() {
                    first_failure = Some(Failing {
                        sequence: prefix,
                        plan: FaultPlan::none(),
                        violation,
                        outcome,
                    });
                    break;
                }
            }
            // Then the whole sequence under every fault the budget allows.
            let failing = match first_failure {
                Some(failing) => failing,
                None => match self.over(&sequence).explore() {
                    Ok(searched) => {
                        runs += searched.runs;
                        report.sequences.push(SequenceReport {
                            steps: sequence.len(),
                            rejected,
                            prefix_runs: sequence.len(),
                            report: searched,
                        });
                        continue;
                    }
                    Err(Searched::Found(found)) => {
                        runs += found.runs;
                        Failing {
                            sequence: sequence.clone(),
                            plan: found.plan,
                            violation: found.violation,
                            outcome: found.outcome,
                        }
                    }
                    Err(other) => return Err(failed(other)),
                },
            };
            let mut shrinker = Shrinker {
                generated: self,
                class: failing.violation.class(),
                runs: 0,
            };
            let minimal = shrinker.shrink(failing).map_err(failed)?;
            return Err(GeneratedSearched::Found(Box::new(GeneratedFound {
                seed: self.exploration.run_seed(),
                index,
                drawn: sequence,
                rejected: Generator::rejected(&minimal.outcome.trace),
                sequence: minimal.sequence,
                plan: minimal.plan,
                violation: minimal.violation,
                outcome: minimal.outcome,
                runs: runs + shrinker.runs,
                elapsed: began.elapsed(),
            })));
        }
        Ok(report)
    }

    /// Runs `sequence` (text as [`Sequence`] prints it) under `plan` (as [`FaultPlan`] prints
    /// it) once and judges it: for replaying a [`GeneratedFound`] word for word.
    pub fn replay(
        &self,
        sequence: &str,
        plan: &str,
    ) -> Result<(Option<Violation>, RunOutcome), Searched> {
        let sequence: Sequence =
            sequence
                .parse()
                .map_err(|error: super::sequence::SequenceParseError| {
                    Searched::Error(ExploreError::Setup(error.to_string()))
                })?;
        self.over(&sequence).replay(plan)
    }
}

/// A failing pair and its run.
struct Failing {
    sequence: Sequence,
    plan: FaultPlan,
    violation: Violation,
    outcome: RunOutcome,
}

/// Shrinks one failure (see the module docs), counting its runs.
struct Shrinker<'a> {
    generated: &'a Generated,
    /// The class of violation a smaller pair must fail with.
    class: &'static str,
    runs: usize,
}

impl Shrinker<'_> {
    fn spent(&self) -> bool {
        self.runs >= self.generated.shrink_runs
    }

    /// Runs `sequence` without faults, and under `plan` if that passed: the failure, if of the
    /// class sought (without faults first: a failure that needs none is the simpler one).
    fn try_pair(
        &mut self,
        sequence: &Sequence,
        plan: &FaultPlan,
    ) -> Result<Option<Failing>, Searched> {
        let exploration = self.generated.over(sequence);
        let reference = exploration.run(&FaultPlan::none())?;
        self.runs += 1;
        if let Some(violation) = reference.violations.first() {
            return Ok((violation.class() == self.class).then(|| Failing {
                sequence: sequence.clone(),
                plan: FaultPlan::none(),
                violation: violation.clone(),
                outcome: reference.clone(),
            }));
        }
        if plan.is_empty() {
            return Ok(None);
        }
        let (outcome, violation) = exploration.judge(plan, &exploration.normal(&reference))?;
        self.runs += 1;
        Ok(violation
            .filter(|violation| violation.class() == self.class)
            .map(|violation| Failing {
                sequence: sequence.clone(),
                plan: plan.clone(),
                violation,
                outcome,
            }))
    }

    fn shrink(&mut self, mut failing: Failing) -> Result<Failing, Searched> {
        loop {
            let mut smaller = self.drop_edits(&mut failing)?;
            smaller |= self.simplify_values(&mut failing)?;
            smaller |= self.shrink_plan(&mut failing)?;
            if !smaller || self.spent() {
                return Ok(failing);
            }
        }
    }

    /// Drops runs of edits, halves first, then quarters, down to single edits.
    fn drop_edits(&mut self, failing: &mut Failing) -> Result<bool, Searched> {
        let mut smaller = false;
        let mut chunk = (failing.sequence.len() / 2).max(1);
        loop {
            let mut start = 0;
            while start < failing.sequence.len() && !self.spent() {
                let mut fewer = failing.sequence.clone();
                let end = (start + chunk).min(fewer.len());
                fewer.edits.drain(start..end);
                match self.try_pair(&fewer, &failing.plan)? {
                    Some(found) => {
                        *failing = found;
                        smaller = true;
                    }
                    None => start += chunk,
                }
            }
            if chunk == 1 || self.spent() {
                return Ok(smaller);
            }
            chunk /= 2;
        }
    }

    /// Tries each edit's simpler values; keeps the first that still fails.
    fn simplify_values(&mut self, failing: &mut Failing) -> Result<bool, Searched> {
        for at in 0..failing.sequence.len() {
            for edit in simpler_edits(&failing.sequence.edits[at]) {
                if self.spent() {
                    return Ok(false);
                }
                let mut plainer = failing.sequence.clone();
                plainer.edits[at] = edit;
                if let Some(found) = self.try_pair(&plainer, &failing.plan)? {
                    *failing = found;
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The search's own shrinking of the plan, on this sequence.
    fn shrink_plan(&mut self, failing: &mut Failing) -> Result<bool, Searched> {
        if failing.plan.faults.len() <= 1
            && failing.plan.faults.iter().all(|f| f.simpler().is_empty())
        {
            return Ok(false);
        }
        let exploration = self.generated.over(&failing.sequence);
        let reference = exploration.run(&FaultPlan::none())?;
        self.runs += 1;
        let normal = exploration.normal(&reference);
        let (plan, violation, outcome, runs) = exploration.shrink(
            failing.plan.clone(),
            failing.violation.clone(),
            failing.outcome.clone(),
            &normal,
        )?;
        self.runs += runs;
        let smaller = plan != failing.plan;
        (failing.plan, failing.violation, failing.outcome) = (plan, violation, outcome);
        Ok(smaller)
    }
}

/// The edits like `edit` with a simpler value, most simplifying first.
fn simpler_edits(edit: &Edit) -> Vec<Edit> {
    match edit {
        Edit::Create { spec } => simpler_values(spec)
            .into_iter()
            .map(|spec| Edit::Create { spec })
            .collect(),
        Edit::Set { path, value } => simpler_values(value)
            .into_iter()
            .map(|value| Edit::Set {
                path: path.clone(),
                value,
            })
            .collect(),
        Edit::Remove { .. } | Edit::Delete => Vec::new(),
    }
}

/// Values like `value` but simpler: a key or an item fewer, a simpler member, `""`, `0`,
/// `false`.
fn simpler_values(value: &Value) -> Vec<Value> {
    match value {
        Value::Object(object) => {
            let fewer = object.keys().map(|key| {
                let mut less = object.clone();
                less.remove(key);
                Value::Object(less)
            });
            let plainer = object.iter().flat_map(|(key, member)| {
                simpler_values(member).into_iter().map(|simpler| {
                    let mut plain = object.clone();
                    plain.insert(key.clone(), simpler);
                    Value::Object(plain)
                })
            });
            fewer.chain(plainer).collect()
        }
        Value::Array(items) => (0..items.len())
            .map(|at| {
                let mut less = items.clone();
                less.remove(at);
                Value::Array(less)
            })
            .collect(),
        Value::String(text) if !text.is_empty() => {
            let mut values = vec![Value::String(String::new())];
            if let Some(first) = text.chars().next().filter(|_| text.chars().count() > 1) {
                values.push(Value::String(first.to_string()));
            }
            values
        }
        Value::Number(number) if number.as_f64() != Some(0.0) => vec![Value::from(0)],
        Value::Bool(true) => vec![Value::Bool(false)],
        _ => Vec::new(),
    }
}

/// How one sequence's search went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceReport {
    /// Its edits.
    pub steps: usize,
    /// How many of them the server refused in the fault-free run.
    pub rejected: usize,
    /// Fault-free runs of its prefixes (the whole sequence included).
    pub prefix_runs: usize,
    /// The fault search over the whole sequence.
    pub report: Report,
}

/// A generated search that found nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedReport {
    /// The seed of every run (sequence `i` is drawn with it plus `i`).
    pub seed: u64,
    /// Each sequence's search, in order.
    pub sequences: Vec<SequenceReport>,
}

impl GeneratedReport {
    /// Runs made in all.
    pub fn runs(&self) -> usize {
        self.sequences
            .iter()
            .map(|s| s.report.runs + s.prefix_runs)
            .sum()
    }
}

impl fmt::Display for GeneratedReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sum =
            |part: fn(&SequenceReport) -> usize| self.sequences.iter().map(part).sum::<usize>();
        write!(
            f,
            "no bug found in {} generated sequences (seed {}): {} steps ({} refused by the \
             server), {} runs, {} of {} single-fault candidates covered",
            self.sequences.len(),
            self.seed,
            sum(|s| s.steps),
            sum(|s| s.rejected),
            self.runs(),
            sum(|s| s.report.covered),
            sum(|s| s.report.candidates),
        )
    }
}

/// How a generated search ended when it did not pass.
#[derive(Debug)]
pub enum GeneratedSearched {
    /// A run failed: the minimal (sequence, plan).
    Found(Box<GeneratedFound>),
    /// A sequence's search could not run, or ran out of time before it covered every
    /// candidate ([`Searched::Error`], [`Searched::Incomplete`]).
    Search {
        /// The sequence.
        sequence: Sequence,
        /// What its search said.
        searched: Searched,
    },
}

impl fmt::Display for GeneratedSearched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GeneratedSearched::Found(found) => found.fmt(f),
            GeneratedSearched::Search { sequence, searched } => {
                writeln!(f, "{searched}")?;
                writeln!(f, "  the sequence:")?;
                for edit in &sequence.edits {
                    writeln!(f, "    {edit}")?;
                }
                Ok(())
            }
        }
    }
}

/// A failing generated run, shrunk.
#[derive(Debug, Clone)]
pub struct GeneratedFound {
    /// The seed of every run.
    pub seed: u64,
    /// Which sequence failed (drawn with `seed + index`).
    pub index: usize,
    /// That sequence as drawn.
    pub drawn: Sequence,
    /// The minimal sequence.
    pub sequence: Sequence,
    /// The minimal plan (empty: the sequence fails without faults).
    pub plan: FaultPlan,
    /// What the oracle said about the minimal pair's run.
    pub violation: Violation,
    /// The minimal pair's run.
    pub outcome: RunOutcome,
    /// How many of its steps the server refused in that run.
    pub rejected: usize,
    /// Runs made in all (searches of the sequences before, this one's, shrinking).
    pub runs: usize,
    /// Wall-clock time until then.
    pub elapsed: Duration,
}

impl fmt::Display for GeneratedFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the explorer found a bug in a generated scenario (seed {}, sequence {}, {} runs, \
             {:.1} s)",
            self.seed,
            self.index,
            self.runs,
            self.elapsed.as_secs_f64()
        )?;
        writeln!(f, "  {}", self.violation)?;
        writeln!(
            f,
            "  minimal sequence ({} of {} steps, {} refused by the server):",
            self.sequence.len(),
            self.drawn.len(),
            self.rejected
        )?;
        for edit in &self.sequence.edits {
            writeln!(f, "    {edit}")?;
        }
        if self.plan.is_empty() {
            writeln!(f, "  it needs no fault")?;
        } else {
            writeln!(f, "  minimal plan: {}", self.plan)?;
        }
        writeln!(
            f,
            "  replay: generated.replay({:?}, \"{}\")",
            self.sequence.to_string(),
            self.plan
        )?;
        writeln!(f, "  the trace around it:")?;
        let trace = &self.outcome.trace;
        let center = trace
            .entries
            .iter()
            .position(|entry| matches!(entry, crate::TraceEntry::Fault { .. }))
            .unwrap_or(0);
        write!(
            f,
            "{}",
            trace.excerpt(center.saturating_sub(12), center + 24)
        )
    }
}
