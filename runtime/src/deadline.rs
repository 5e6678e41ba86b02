//! Deadlines from durations a caller chose, without overflow.
//!
//! Why this exists: `Instant + Duration` panics when the sum does not fit the clock's
//! representation, and a caller may well pass `Duration::MAX` to mean "wait as long as it takes"
//! (a read-your-writes wait, a stabilization window, a graceful shutdown). Every deadline built
//! from such a duration goes through [`saturating_deadline`], which answers a far-future instant
//! instead of panicking: for a wait, "never" and "in thirty years" are the same.

use std::time::Duration;

use tokio::time::Instant;

/// How far ahead a deadline that would overflow is put instead: about thirty years, far beyond
/// any process's life, and small enough to add to any instant a running clock gives.
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// `at + wait`, or, where that does not fit, `at + FAR_FUTURE` (or `at` itself in the
/// impossible case that this does not fit either).
pub(crate) fn saturating_deadline(at: Instant, wait: Duration) -> Instant {
    at.checked_add(wait)
        .or_else(|| at.checked_add(FAR_FUTURE))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_waits_saturate_instead_of_panicking() {
        let now = Instant::now();
        assert_eq!(
            saturating_deadline(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let far = saturating_deadline(now, Duration::MAX);
        assert!(far >= now + Duration::from_secs(365 * 24 * 60 * 60));
    }
}
