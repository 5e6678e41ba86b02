//! Logs of the sample programs: `tracing` to stderr (stdout is the story's), filtered by
//! `RUST_LOG`, else by the program's default level.

/// Sends `tracing` events to stderr, filtered by `RUST_LOG` or else `default` (e.g. `"warn"`).
pub fn to_stderr(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
