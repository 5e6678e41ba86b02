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

    /// Whether `flag` was given.
    pub fn flag(&self, flag: &str) -> bool {
        self.0.iter().any(|a| a == flag)
    }
}
