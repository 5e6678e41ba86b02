//! Per-key fast/slow: a few quick retries, then slow ones.

use std::hash::Hash;
use std::time::Duration;

use super::RateLimiter;
use super::failure_counts::FailureCounts;

/// The first `max_fast_attempts` failures of a key wait `fast`; later ones wait `slow`.
/// client-go's `ItemFastSlowRateLimiter` (which has no defaults either).
pub struct FastSlowRateLimiter<K> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    /// Failures per key since its last `forget`.
    attempts: FailureCounts<K>,
}

impl<K: Hash + Eq + Clone> FastSlowRateLimiter<K> {
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        FastSlowRateLimiter {
            fast,
            slow,
            max_fast_attempts,
            attempts: FailureCounts::new(),
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync> RateLimiter<K> for FastSlowRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        // This failure is attempt number `before + 1`.
        if self.attempts.bump(key) < self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, key: &K) {
        self.attempts.forget(key);
    }

    fn num_requeues(&self, key: &K) -> usize {
        self.attempts.get(key) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_then_slow_then_fast_after_forget() {
        let fast = Duration::from_millis(5);
        let slow = Duration::from_secs(10);
        let limiter = FastSlowRateLimiter::new(fast, slow, 3);
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"k")).collect();
        assert_eq!(delays, [fast, fast, fast, slow, slow]);
        assert_eq!(limiter.num_requeues(&"k"), 5);
        assert_eq!(limiter.when(&"other"), fast);
        limiter.forget(&"k");
        assert_eq!(limiter.num_requeues(&"k"), 0);
        assert_eq!(limiter.when(&"k"), fast);
    }
}
