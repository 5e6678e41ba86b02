//! The longest delay of several limiters.

use std::time::{Duration, Instant};

use super::RateLimiter;

/// Asks every limiter and waits the longest of their delays; `num_requeues` is the largest count and
/// `forget` forgets in all. client-go's `MaxOfRateLimiter`.
pub struct MaxOfRateLimiter<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> MaxOfRateLimiter<K> {
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<K> RateLimiter<K> for MaxOfRateLimiter<K> {
    fn when(&self, key: &K) -> Duration {
        // Every limiter must count the failure, so no short-circuit.
        self.limiters
            .iter()
            .map(|l| l.when(key))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn when_at(&self, key: &K, now: Instant) -> Duration {
        // The same, each limiter at the caller's `now` (the bucket of the default controller
        // limiter sits in here).
        self.limiters
            .iter()
            .map(|l| l.when_at(key, now))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&self, key: &K) {
        self.limiters.iter().for_each(|l| l.forget(key));
    }

    fn num_requeues(&self, key: &K) -> usize {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(key))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate_limiter::{ExponentialFailureRateLimiter, FastSlowRateLimiter};

    #[test]
    fn takes_the_longest_delay_and_counts_in_all() {
        let ms = Duration::from_millis;
        let limiter = MaxOfRateLimiter::new(vec![
            Box::new(FastSlowRateLimiter::new(ms(3), ms(100), 2)),
            Box::new(ExponentialFailureRateLimiter::new(ms(1), ms(1000))),
        ]);
        let delays: Vec<_> = (0..4).map(|_| limiter.when(&"k")).collect();
        // fast/slow: 3, 3, 100, 100; exponential: 1, 2, 4, 8.
        assert_eq!(delays, [ms(3), ms(3), ms(100), ms(100)]);
        assert_eq!(limiter.num_requeues(&"k"), 4);
        limiter.forget(&"k");
        assert_eq!(limiter.num_requeues(&"k"), 0);
        assert_eq!(limiter.when(&"k"), ms(3));
    }

    #[test]
    fn empty_means_no_delay() {
        let limiter = MaxOfRateLimiter::<&str>::new(Vec::new());
        assert_eq!(limiter.when(&"k"), Duration::ZERO);
        assert_eq!(limiter.num_requeues(&"k"), 0);
    }
}
