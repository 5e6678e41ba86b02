//! Rate limiters: how long a key must wait before it is retried.
//!
//! `add_rate_limited(key)` asks the queue's [`RateLimiter`] [`when`](RateLimiter::when) the key may come
//! back, and adds it after that delay. Each call to `when` counts as one failure of the key; `forget`
//! clears the count once the key succeeds. The limiters here are client-go's, with its defaults:
//!
//! | limiter | delay | client-go |
//! |---|---|---|
//! | [`ExponentialFailureRateLimiter`] | `base · 2^failures`, capped (default 5 ms … 1000 s) | `ItemExponentialFailureRateLimiter` |
//! | [`FastSlowRateLimiter`] | `fast` for the first attempts, then `slow` | `ItemFastSlowRateLimiter` |
//! | [`BucketRateLimiter`] | an overall token bucket shared by all keys (default 10/s, burst 100) | `BucketRateLimiter` |
//! | [`MaxOfRateLimiter`] | the longest delay of several limiters | `MaxOfRateLimiter` |
//!
//! [`default_controller_rate_limiter`] combines the first and the third, as client-go's
//! `DefaultControllerRateLimiter` does: per-key backoff for a key that keeps failing, and an overall
//! bound on retries so that many failing keys cannot flood the API server.
//!
//! **Whose clock.** Only the bucket depends on the time (it refills as time passes). A queue asks
//! [`RateLimiter::when_at`] with `now` read from its own clock: real time, or the tokio runtime's
//! for a queue built with `WorkQueueBuilder::virtual_time` (a deterministic run, whose virtual
//! time may run far ahead of real time). So the limiter never reads a clock the queue does not
//! count on. [`RateLimiter::when`] is the same question on real time, for use outside a queue.

mod bucket;
mod exponential;
mod failure_counts;
mod fast_slow;
mod max_of;

use std::time::{Duration, Instant};

pub use bucket::BucketRateLimiter;
pub use exponential::ExponentialFailureRateLimiter;
pub use fast_slow::FastSlowRateLimiter;
pub use max_of::MaxOfRateLimiter;

/// Decides how long a key waits before a retry, and remembers its failures.
pub trait RateLimiter<K>: Send + Sync {
    /// How long `key` must wait now (real time). Counts one more failure of `key`.
    fn when(&self, key: &K) -> Duration;
    /// [`when`](Self::when) at `now`, a reading of the asking queue's clock (see the
    /// [module docs](self)): what the queue calls. A limiter that depends on the time counts it
    /// from `now`, and one that wraps others passes `now` on. The default ignores `now` and asks
    /// [`when`](Self::when), which is right for a limiter that only counts failures.
    fn when_at(&self, key: &K, now: Instant) -> Duration {
        let _ = now;
        self.when(key)
    }
    /// Clears what is remembered about `key` (call when it succeeded).
    fn forget(&self, key: &K);
    /// How many failures of `key` are remembered.
    fn num_requeues(&self, key: &K) -> usize;
}

impl<K, R: RateLimiter<K> + ?Sized> RateLimiter<K> for Box<R> {
    fn when(&self, key: &K) -> Duration {
        (**self).when(key)
    }
    fn when_at(&self, key: &K, now: Instant) -> Duration {
        (**self).when_at(key, now)
    }
    fn forget(&self, key: &K) {
        (**self).forget(key)
    }
    fn num_requeues(&self, key: &K) -> usize {
        (**self).num_requeues(key)
    }
}

/// client-go's `DefaultControllerRateLimiter`: the longer of per-key exponential backoff (5 ms doubling
/// to 1000 s) and an overall token bucket (10 retries/s, burst 100).
pub fn default_controller_rate_limiter<K>() -> MaxOfRateLimiter<K>
where
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ExponentialFailureRateLimiter::default()),
        Box::new(BucketRateLimiter::default()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_controller_limiter_is_max_of_backoff_and_bucket() {
        let limiter = default_controller_rate_limiter::<&str>();
        // The bucket has a burst of 100, so the first failures show only the per-key backoff.
        assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
        assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
        assert_eq!(limiter.when(&"b"), Duration::from_millis(5));
        assert_eq!(limiter.num_requeues(&"a"), 2);
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
    }

    #[test]
    fn default_controller_limiter_is_bounded_by_the_bucket_after_the_burst() {
        let limiter = default_controller_rate_limiter::<u32>();
        // 100 distinct keys use up the burst; the 101st key waits for the bucket (~100 ms at 10/s),
        // longer than its own 5 ms backoff.
        for key in 0..100 {
            assert_eq!(limiter.when(&key), Duration::from_millis(5));
        }
        let delay = limiter.when(&100);
        assert!(delay > Duration::from_millis(90), "{delay:?}");
        assert!(delay <= Duration::from_millis(100), "{delay:?}");
    }

    #[test]
    fn default_controller_limiter_reads_the_callers_clock() {
        let limiter = default_controller_rate_limiter::<u32>();
        let now = Instant::now();
        for key in 0..100 {
            assert_eq!(limiter.when_at(&key, now), Duration::from_millis(5));
        }
        assert_eq!(limiter.when_at(&100, now), Duration::from_millis(100));
        // An hour later on the caller's clock (a virtual hour, say: no real time passed) the
        // bucket is full again, and only the keys' own backoff counts.
        let later = now + Duration::from_secs(3600);
        for key in 200..300 {
            assert_eq!(limiter.when_at(&key, later), Duration::from_millis(5));
        }
    }
}
