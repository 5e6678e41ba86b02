//! Per-key fast/slow: a few quick retries, then slow ones.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;

use super::RateLimiter;

/// The first `max_fast_attempts` failures of a key wait `fast`; later ones wait `slow`.
/// client-go's `ItemFastSlowRateLimiter` (which has no defaults either).
pub struct FastSlowRateLimiter<K> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    /// Failures per key since its last `forget`; a key with none is absent.
    attempts: Mutex<HashMap<K, u32, foldhash::fast::RandomState>>,
}

impl<K> FastSlowRateLimiter<K> {
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        FastSlowRateLimiter {
            fast,
            slow,
            max_fast_attempts,
            attempts: Mutex::new(HashMap::default()),
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync> RateLimiter<K> for FastSlowRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        let mut attempts = self.attempts.lock();
        let count = match attempts.get_mut(key) {
            Some(count) => count,
            None => attempts.entry(key.clone()).or_insert(0),
        };
        *count = count.saturating_add(1);
        if *count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, key: &K) {
        self.attempts.lock().remove(key);
    }

    fn num_requeues(&self, key: &K) -> usize {
        self.attempts.lock().get(key).map_or(0, |&n| n as usize)
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
