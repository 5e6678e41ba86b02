//! One raw benchmark line per corpus search, printed by the mutant tests and gathered by
//! `scripts/bench-explore-corpus.sh` into `benches/explore/corpus-<date>.jsonl`.
//!
//! Why the tests print them: the searches of the corpus are the tests (each asserts what it
//! finds and that the plan replays), so the benchmark runs the very same code rather than a copy
//! that could drift from it. Data flow:
//!
//! ```text
//!  a test in examples/tests/explore_mutants_*.rs
//!     │  search ─▶ Found (a mutant) or Report (a correct sample)
//!     ▼
//!  found_line / clean_line ─▶ stdout: `explore-bench {"sample": …, "runs": …, "seconds": …}`
//!     ▼
//!  scripts/bench-explore-corpus.sh (3 rounds, every test target once per round)
//!     └─ keeps the lines with the prefix, adds round, date, build and the machine's load
//! ```
//!
//! The lines carry what the search alone knows (runs, wall-clock seconds, the minimal plan); what
//! the machine was doing at the time is the script's to add.

use ferrokube::explore::{Found, Report};
use serde_json::{Value, json};

/// The prefix of every benchmark line on a test's standard output.
pub const PREFIX: &str = "explore-bench ";

/// Seconds, rounded to hundredths.
fn seconds(elapsed: std::time::Duration) -> f64 {
    (elapsed.as_secs_f64() * 100.0).round() / 100.0
}

/// The line of a mutant's search: found, with its minimal plan. `budget` names the budget
/// searched under ("default").
pub fn found_line(sample: &str, case: &str, budget: &str, found: &Found) -> Value {
    json!({
        "sample": sample,
        "case": case,
        "budget": budget,
        "violation": found.violation.class(),
        "runs": found.runs,
        "seconds": seconds(found.elapsed),
        "plan": found.plan.to_string(),
    })
}

/// The line of a correct sample's search: nothing found, and how much was covered.
pub fn clean_line(sample: &str, case: &str, budget: &str, report: &Report) -> Value {
    json!({
        "sample": sample,
        "case": case,
        "budget": budget,
        "violation": "none",
        "runs": report.runs,
        "candidates": report.candidates,
        "covered": report.covered,
        "seconds": seconds(report.elapsed),
    })
}

/// Prints `line` with [`PREFIX`], for the script to pick up.
pub fn print(line: &Value) {
    println!("{PREFIX}{line}");
}

/// The budget a mutant is searched under, as the lines name it.
pub const DEFAULT_BUDGET: &str = "default (every candidate + 100 random plans)";

/// The budget a correct sample is searched under: twice the default's random plans.
pub const TWICE_THE_DEFAULT: &str = "every candidate + 200 random plans (2x default)";
