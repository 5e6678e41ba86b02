//! Exponential backoff with jitter, reset after a healthy stretch: how long to wait before
//! reconnecting a watch (and relisting), with client-go's reflector settings as defaults.
//!
//! Each failure doubles the base wait (800 ms, 1.6 s, 3.2 s, … capped at 30 s) and the actual wait is
//! the base plus a random fraction of it (jitter 1.0: somewhere in `[base, 2·base)`), so that many
//! clients that lost the same server do not come back in lock step. If no failure happened for
//! `reset_after` (2 minutes), the next failure starts again from the initial wait.
//!
//! **Whose clock.** "No failure for 2 minutes" is a reading of a clock, and this crate reads none
//! (see [`crate::time`]): the caller passes `now` to [`Backoff::failure`]. It should be the clock
//! the caller waits on. Code on a tokio runtime sleeps on the runtime's clock, so it passes
//! `tokio::time::Instant::now().into_std()`: on a paused runtime (a deterministic run,
//! `ferrokube-explore`) that is virtual time, and the reset then follows the same clock as the
//! waits, not the machine's speed. Code off any runtime passes `Instant::now()`.

use std::time::{Duration, Instant};

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Backoff {
    /// First wait. Default 800 ms.
    pub initial: Duration,
    /// Longest base wait. Default 30 s.
    pub max: Duration,
    /// Quiet time after which the wait starts over. Default 2 minutes.
    pub reset_after: Duration,
    /// The base wait for the next failure.
    current: Duration,
    last_failure: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(
            Duration::from_millis(800),
            Duration::from_secs(30),
            Duration::from_secs(120),
        )
    }
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration, reset_after: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            reset_after,
            current: initial,
            last_failure: None,
        }
    }

    /// Records a failure at `now` (the caller's clock: see the [module docs](self)); returns how
    /// long to wait before trying again.
    pub fn failure(&mut self, now: Instant) -> Duration {
        if self
            .last_failure
            .is_some_and(|last| now.duration_since(last) >= self.reset_after)
        {
            self.current = self.initial;
        }
        self.last_failure = Some(now);
        let base = self.current;
        self.current = self.current.saturating_mul(2).min(self.max);
        base + base.mul_f64(crate::random::unit_f64())
    }

    /// Forgets past failures (after a success the caller considers proof of health).
    pub fn reset(&mut self) {
        self.current = self.initial;
        self.last_failure = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_with_jitter_caps_and_resets() {
        let mut backoff = Backoff::default();
        let mut base = Duration::from_millis(800);
        for _ in 0..10 {
            let wait = backoff.failure(Instant::now());
            assert!(
                wait >= base && wait < base * 2,
                "{wait:?} for base {base:?}"
            );
            base = (base * 2).min(Duration::from_secs(30));
        }
        assert!(backoff.failure(Instant::now()) >= Duration::from_secs(30));
        backoff.reset();
        assert!(backoff.failure(Instant::now()) < Duration::from_millis(1600));

        let mut quick = Backoff::new(
            Duration::from_millis(1),
            Duration::from_secs(1),
            Duration::from_millis(20),
        );
        let t0 = Instant::now();
        quick.failure(t0);
        assert!(quick.failure(t0) >= Duration::from_millis(2), "doubled");
        // The caller's clock says 30 ms passed (none did in real time): that is a quiet stretch.
        assert!(
            quick.failure(t0 + Duration::from_millis(30)) < Duration::from_millis(2),
            "reset after a quiet stretch"
        );
    }
}
