//! The table of the mutant corpus benchmark: reads the JSON lines `scripts/bench-explore-corpus.sh`
//! wrote (one per search and round) and prints, per (sample, case), the median round by seconds
//! as a Markdown table row, as docs/src/explorer.md shows it.
//!
//! Why a program: the script keeps its lines with grep and sed only; grouping and medians need a
//! JSON reader, and this one is the workspace's own (serde_json), so the benchmark needs no tool
//! the project does not build.
//!
//! Usage: `cargo run -q -p ferrokube-examples --bin explore_corpus_table -- FILE`

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::Value;

/// A field of a line as text (`-` when it is missing).
fn text(line: &Value, field: &str) -> String {
    match &line[field] {
        Value::String(text) => text.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: explore_corpus_table FILE.jsonl");
        return ExitCode::from(2);
    };
    let contents = match std::fs::read_to_string(&path) {
        Ok(contents) => contents,
        Err(error) => {
            eprintln!("{path}: {error}");
            return ExitCode::FAILURE;
        }
    };
    // (sample, case) -> its lines, in file order.
    let mut searches: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for (number, line) in contents.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(value) => searches
                .entry((text(&value, "sample"), text(&value, "case")))
                .or_default()
                .push(value),
            Err(error) => {
                eprintln!("{path}:{}: not JSON: {error}", number + 1);
                return ExitCode::FAILURE;
            }
        }
    }
    println!("| sample | case | violation | runs | seconds (median) | rounds | plan / budget |");
    println!("|---|---|---|---|---|---|---|");
    for ((sample, case), mut lines) in searches {
        lines.sort_by(|a, b| {
            let seconds = |line: &Value| line["seconds"].as_f64().unwrap_or(f64::MAX);
            seconds(a).total_cmp(&seconds(b))
        });
        let Some(median) = lines.get(lines.len() / 2) else {
            continue;
        };
        let plan = match &median["plan"] {
            Value::String(plan) => format!("`{plan}`"),
            _ => text(median, "budget"),
        };
        println!(
            "| {sample} | {case} | {} | {} | {} | {} | {plan} |",
            text(median, "violation"),
            text(median, "runs"),
            text(median, "seconds"),
            lines.len()
        );
    }
    ExitCode::SUCCESS
}
