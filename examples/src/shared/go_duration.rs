//! Durations written as Go's `time.ParseDuration` writes the simple ones (`15s`, `500ms`, `1m`,
//! `1.5s`), so that the leader-election candidates of both languages take the same flags.

use std::time::Duration;

/// `15s`, `500ms`, `1m`, `1.5s`; an error message otherwise.
pub fn parse(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        return Err(format!(
            "durations look like 15s, 500ms or 1m; got {text:?}"
        ));
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(Duration::from_secs_f64(n * scale)),
        _ => Err(format!("not a duration: {text:?}")),
    }
}
