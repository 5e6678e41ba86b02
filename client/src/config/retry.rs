//! The retry settings of a [`Config`](crate::Config): how often and how long the client retries a
//! failed request. What is retried and the backoff itself are the client's
//! (`client/retry.rs`); the settings live here, with the rest of the config, so that the config
//! needs nothing of the client that is built from it.

use std::time::Duration;

/// Retry settings, part of [`Config`](crate::Config).
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt. Default 5; 0 disables retries.
    pub max_retries: u32,
    /// Backoff before the first retry. Default 100 ms.
    pub initial_backoff: Duration,
    /// Longest backoff of our own (when the server gives no `Retry-After`). Default 10 s.
    pub max_backoff: Duration,
    /// Longest `Retry-After` honoured; a longer one waits this long. Default 60 s: above
    /// kube-apiserver's own 30 s ceiling (client-go honours any value), a bound only against a
    /// server that asks for hours.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(60),
        }
    }
}
