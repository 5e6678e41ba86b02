//! The benchmarks' command line: `--flag value` pairs and bare `--flag`s, read on demand.
//! (Issue "Fidelity and hardening" moves every binary to the ecosystem's CLI parser.)

/// The arguments after the program name.
pub struct Args(pub Vec<String>);

#[allow(dead_code)] // each benchmark uses its own subset
impl Args {
    /// The process's arguments.
    pub fn from_env() -> Args {
        Args(std::env::args().skip(1).collect())
    }

    /// The value after `flag`, or `default`.
    pub fn value(&self, flag: &str, default: &str) -> String {
        self.0
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.0.get(i + 1))
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// The number after `flag`, or `default`; exits with a message if it is not a number.
    pub fn number(&self, flag: &str, default: u64) -> u64 {
        let text = self.value(flag, &default.to_string());
        text.parse()
            .unwrap_or_else(|_| panic!("{flag} wants a number, got {text:?}"))
    }

    /// Where a benchmark appends its raw JSON lines: `--out FILE`, or by default
    /// `benches/<folder>/results-<today>.jsonl` in the repository.
    pub fn results_file(&self, folder: &str) -> std::path::PathBuf {
        match self
            .0
            .iter()
            .position(|a| a == "--out")
            .and_then(|i| self.0.get(i + 1))
        {
            Some(path) => path.into(),
            None => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("benches")
                .join(folder)
                .join(format!("results-{}.jsonl", today())),
        }
    }

    /// Whether `flag` was given.
    pub fn flag(&self, flag: &str) -> bool {
        self.0.iter().any(|a| a == flag)
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
