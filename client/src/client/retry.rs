//! When a failed request is sent again, and after how long.
//!
//! - 429 Too Many Requests: the server did not act on the request, so any verb may be retried; we
//!   wait for `Retry-After` if it says, else the backoff. The server's wait is honoured as asked
//!   (up to [`RetryPolicy::max_retry_after`]), not cut to our own backoff's cap: kube-apiserver
//!   1.34+ answers watches and unpaginated lists of a resource whose watch cache is still
//!   (re)initializing with 429 and a `Retry-After` that grows with the outage (1 s, up to 30 s), so
//!   that the clients of a cold server come back spread out rather than all at once.
//! - 5xx answers and transport errors: the server may or may not have acted, so only idempotent
//!   requests are retried (GET and LIST, DELETE with preconditions). A create is never retried blindly:
//!   it might have succeeded, and a second one would fail with AlreadyExists or, with generateName,
//!   create a second object.
//! - Everything else is the caller's to handle.
//!
//! Backoff: `initial · 2^attempt`, capped at `max`, with "equal jitter" (a random point in the upper
//! half), so a crowd of clients that failed together does not retry together.
//!
//! The settings ([`RetryPolicy`]) are part of the [`Config`](crate::Config) and live beside it
//! (`config/retry.rs`); this module is what the client does with them.

use std::time::Duration;

use crate::Error;
use crate::config::RetryPolicy;

impl RetryPolicy {
    /// How long to wait before retry number `attempt` (0-based) after `error`, or `None` to give up.
    pub(crate) fn delay(&self, error: &Error, idempotent: bool, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_retries {
            return None;
        }
        let retry_after = match error {
            Error::Api(api) if api.code == 429 => api.retry_after,
            Error::Api(api) if api.code >= 500 && idempotent => api.retry_after,
            Error::Transport { .. } | Error::Timeout { .. } if idempotent => None,
            _ => return None,
        };
        Some(match retry_after {
            Some(wait) => wait.min(self.max_retry_after),
            None => self.backoff(attempt),
        })
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let full = self
            .initial_backoff
            .saturating_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .min(self.max_backoff);
        let half = full / 2;
        half + full
            .saturating_sub(half)
            .mul_f64(ferrokube_core::random::unit_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    fn api(code: u16, retry_after: Option<u64>) -> Error {
        Error::Api(Box::new(ApiError::from_response(
            code,
            b"",
            retry_after.map(Duration::from_secs),
        )))
    }

    #[test]
    fn which_failures_are_retried() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay(&api(429, Some(2)), false, 0),
            Some(Duration::from_secs(2)),
            "429 honours Retry-After, even for a create"
        );
        assert!(policy.delay(&api(503, None), true, 0).is_some());
        assert_eq!(
            policy.delay(&api(503, None), false, 0),
            None,
            "create on 5xx"
        );
        assert_eq!(policy.delay(&api(409, None), true, 0), None);
        assert_eq!(policy.delay(&api(404, None), true, 0), None);
        assert_eq!(policy.delay(&api(429, None), true, 5), None, "bounded");
        assert_eq!(
            policy.delay(&api(429, Some(30)), true, 0),
            Some(Duration::from_secs(30)),
            "a warming watch cache's Retry-After is honoured beyond our own backoff's cap"
        );
        assert_eq!(
            policy.delay(&api(429, Some(7200)), true, 0),
            Some(Duration::from_secs(60)),
            "but not without bound"
        );
        let timeout = Error::Timeout {
            url: "u".into(),
            after: Duration::from_secs(1),
        };
        assert!(policy.delay(&timeout, true, 0).is_some());
        assert_eq!(policy.delay(&timeout, false, 0), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let policy = RetryPolicy::default();
        for attempt in 0..40 {
            let full = Duration::from_millis(100)
                .saturating_mul(1 << attempt.min(20))
                .min(Duration::from_secs(10));
            let got = policy.backoff(attempt);
            assert!(got >= full / 2 && got <= full, "attempt {attempt}: {got:?}");
        }
    }
}
