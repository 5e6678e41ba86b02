//! Per-key exponential backoff: each failure of a key doubles its next delay, up to a cap.

use std::hash::Hash;
use std::time::Duration;

use super::RateLimiter;
use super::failure_counts::FailureCounts;

/// Delay for a key's `n`-th failure (counting from 0) is `base · 2^n`, capped at `max`: with the
/// defaults 5 ms, 10 ms, 20 ms, … 1000 s. No overflow however many failures: the count saturates
/// and any delay past `max` is `max`. client-go's `ItemExponentialFailureRateLimiter`.
pub struct ExponentialFailureRateLimiter<K> {
    base: Duration,
    max: Duration,
    /// Failures per key since its last `forget`.
    failures: FailureCounts<K>,
}

impl<K: Hash + Eq + Clone> ExponentialFailureRateLimiter<K> {
    /// `base` is the first delay, `max` the cap.
    pub fn new(base: Duration, max: Duration) -> Self {
        ExponentialFailureRateLimiter {
            base,
            max,
            failures: FailureCounts::new(),
        }
    }

    /// The delay after `failures` earlier failures.
    fn delay(&self, failures: u32) -> Duration {
        // base is below 2^64 ns, so for a shift below 64 the product fits in a u128.
        if failures >= 64 {
            return self.max;
        }
        let nanos = self.base.as_nanos().saturating_mul(1u128 << failures);
        match u64::try_from(nanos) {
            Ok(nanos) => Duration::from_nanos(nanos).min(self.max),
            Err(_) => self.max,
        }
    }
}

impl<K: Hash + Eq + Clone> Default for ExponentialFailureRateLimiter<K> {
    /// base 5 ms, max 1000 s (client-go's `DefaultControllerRateLimiter` values).
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

impl<K: Hash + Eq + Clone + Send + Sync> RateLimiter<K> for ExponentialFailureRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        self.delay(self.failures.bump(key))
    }

    fn forget(&self, key: &K) {
        self.failures.forget(key);
    }

    fn num_requeues(&self, key: &K) -> usize {
        self.failures.get(key) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_base_per_failure() {
        let limiter = ExponentialFailureRateLimiter::default();
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"k")).collect();
        let ms = Duration::from_millis;
        assert_eq!(delays, [ms(5), ms(10), ms(20), ms(40), ms(80)]);
        assert_eq!(limiter.num_requeues(&"k"), 5);
    }

    #[test]
    fn keys_are_independent_and_forget_resets() {
        let limiter =
            ExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1));
        limiter.when(&"a");
        limiter.when(&"a");
        assert_eq!(limiter.when(&"b"), Duration::from_millis(1));
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.when(&"a"), Duration::from_millis(1));
    }

    #[test]
    fn caps_at_max_and_never_overflows() {
        let limiter = ExponentialFailureRateLimiter::default();
        let mut last = Duration::ZERO;
        for _ in 0..1000 {
            last = limiter.when(&"k");
        }
        assert_eq!(last, Duration::from_secs(1000));
        // The largest base there is still cannot overflow.
        let huge = ExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
        for _ in 0..200 {
            assert_eq!(huge.when(&"k"), Duration::MAX);
        }
        // The failure count saturates instead of wrapping back to short delays.
        let saturated = ExponentialFailureRateLimiter::default();
        saturated.failures.set("k", u32::MAX);
        assert_eq!(saturated.when(&"k"), Duration::from_secs(1000));
        assert_eq!(saturated.num_requeues(&"k"), u32::MAX as usize);
    }
}
