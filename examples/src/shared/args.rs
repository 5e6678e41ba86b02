//! What the benchmarks' command lines share: each program's flags are its own clap `Parser`; this
//! is where their results go by default.

use std::path::{Path, PathBuf};

/// The repository's root (this package lives in `examples/`): where `benches/` and `target/` are.
pub fn repository_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Where a benchmark appends its raw JSON lines: `--out FILE` if given, or else
/// `benches/<folder>/results-<today>.jsonl` in the repository.
pub fn results_file(out: Option<&Path>, folder: &str) -> PathBuf {
    match out {
        Some(path) => path.to_path_buf(),
        None => repository_root()
            .join("benches")
            .join(folder)
            .join(format!("results-{}.jsonl", today())),
    }
}

/// Today's date as `YYYY-MM-DD` (local time, from `date`), or the unix seconds if that fails.
pub fn today() -> String {
    std::process::Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
                .to_string()
        })
}
