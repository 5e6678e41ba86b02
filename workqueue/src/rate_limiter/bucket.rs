//! An overall token bucket: bounds the retry rate of all keys together.
//!
//! client-go's `BucketRateLimiter` calls `rate.Limiter.Reserve()`: every call takes a token, and when the
//! bucket is empty the call *reserves* the next free token in the future and returns how long until then.
//! So 150 failures at once with burst 100 and 10/s come back at 0 s (×100), 0.1 s, 0.2 s, … 5 s, never
//! more than the rate. governor (which the client uses for request rate limits) cannot do this: it only
//! answers "allowed now" or "not before t" without taking the future token, so every caller would be
//! told the same t and they would all retry together. Hence this small reservation-based GCRA
//! (generic cell rate algorithm, the token bucket written as one timestamp).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::RateLimiter;

/// A token bucket of `burst` tokens refilled at `qps` per second, shared by all keys. `when` always
/// takes a token (reserving a future one if need be) and returns the wait for it; `forget` does nothing
/// and `num_requeues` is 0, as in client-go.
///
/// The bucket is a clock reading (`tat`), so it must be asked on one clock: a queue asks
/// [`when_at`](RateLimiter::when_at) with its own clock's `now` (real time, or a deterministic
/// run's virtual time); [`when`](RateLimiter::when) reads real time.
pub struct BucketRateLimiter {
    /// Time between tokens.
    interval: Duration,
    /// How far ahead of `now` the next token may be while still being free: `(burst - 1) · interval`.
    tolerance: Duration,
    /// The theoretical arrival time: when the bucket would be full again if no token were taken
    /// from now on. `None` until the first call (a full bucket).
    tat: Mutex<Option<Instant>>,
}

impl BucketRateLimiter {
    /// `qps` tokens per second (must be > 0; a non-positive or non-finite rate means no limit), with
    /// room for `burst` at once (at least 1).
    pub fn new(qps: f64, burst: u32) -> Self {
        let interval = if qps.is_finite() && qps > 0.0 {
            Duration::try_from_secs_f64(1.0 / qps).unwrap_or(Duration::MAX)
        } else {
            Duration::ZERO
        };
        let tolerance = interval.saturating_mul(burst.max(1) - 1);
        BucketRateLimiter {
            interval,
            tolerance,
            tat: Mutex::new(None),
        }
    }

    fn reserve(&self, now: Instant) -> Duration {
        let mut tat = self.tat.lock();
        let start = tat.map_or(now, |t| t.max(now));
        // This token is free at `start - tolerance`; wait until then if that is later than now.
        let free_at = start.checked_sub(self.tolerance).unwrap_or(now);
        *tat = Some(start.checked_add(self.interval).unwrap_or(start));
        free_at.saturating_duration_since(now)
    }
}

impl Default for BucketRateLimiter {
    /// 10 tokens per second, burst 100 (client-go's `DefaultControllerRateLimiter` values).
    fn default() -> Self {
        Self::new(10.0, 100)
    }
}

impl<K> RateLimiter<K> for BucketRateLimiter {
    fn when(&self, _key: &K) -> Duration {
        self.reserve(Instant::now())
    }

    fn when_at(&self, _key: &K, now: Instant) -> Duration {
        self.reserve(now)
    }

    fn forget(&self, _key: &K) {}

    fn num_requeues(&self, _key: &K) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_is_free_then_each_token_is_reserved_one_interval_later() {
        let limiter = BucketRateLimiter::new(10.0, 100);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(limiter.reserve(now), Duration::ZERO);
        }
        let ms = Duration::from_millis;
        // Each later call reserves its own future token: 100 ms, 200 ms, 300 ms.
        assert_eq!(limiter.reserve(now), ms(100));
        assert_eq!(limiter.reserve(now), ms(200));
        assert_eq!(limiter.reserve(now), ms(300));
        // A second later ten tokens have been produced and three of them were already reserved, so
        // seven are free again.
        let later = now + Duration::from_secs(1);
        for _ in 0..7 {
            assert_eq!(limiter.reserve(later), Duration::ZERO);
        }
        assert_eq!(limiter.reserve(later), ms(100));
    }

    #[test]
    fn refills_at_the_rate() {
        let limiter = BucketRateLimiter::new(2.0, 1);
        let now = Instant::now();
        assert_eq!(limiter.reserve(now), Duration::ZERO);
        assert_eq!(limiter.reserve(now), Duration::from_millis(500));
        // After 5 s idle the bucket is full again (burst 1: one free token).
        let later = now + Duration::from_secs(5);
        assert_eq!(limiter.reserve(later), Duration::ZERO);
        assert_eq!(limiter.reserve(later), Duration::from_millis(500));
    }

    #[test]
    fn nonsense_rates_do_not_panic() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-300] {
            let limiter = BucketRateLimiter::new(qps, 0);
            let now = Instant::now();
            limiter.reserve(now);
            limiter.reserve(now);
        }
    }
}
