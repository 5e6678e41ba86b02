//! Client-side rate limiting: a token bucket shared by every clone of a [`Client`](super::Client),
//! with two lanes.
//!
//! ```text
//!  Foreground request ──▶ turn (fair mutex: arrival order) ──▶ bucket.until_ready() ──▶ send
//!  Background request ──▶ wait until no foreground request is waiting ──▶ a token if one is free now
//!                          ▲                                               │ none free yet
//!                          └──────────── sleep until the next token ◀─────┘
//! ```
//!
//! **Foreground** (the default) is client-go's behaviour: one token bucket (QPS, burst), tokens
//! handed out first come, first served. **Background** is for best-effort traffic that must not
//! slow the work it reports on, such as a controller's Events: a background request takes a token
//! only when no foreground request is waiting for one, so under load it waits and the foreground
//! requests go first; when the client is idle it goes at once. client-go has no such lane (its
//! event recorder queues behind reconcile requests); this is a deliberate difference.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{Mutex, Notify};

/// Which lane of the client-side rate limiter a client's requests wait in; see
/// [`Client::with_priority`](super::Client::with_priority). Foreground requests share tokens first
/// come, first served (client-go's behaviour); a background request takes a token only when no
/// foreground request is waiting for one, so under load it waits and when the client is idle it
/// goes at once. client-go has no background lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// First come, first served, as client-go. Default.
    #[default]
    Foreground,
    /// Only tokens no foreground request is waiting for.
    Background,
}

/// The bucket and its two lanes.
pub(crate) struct RateLimit {
    bucket: DefaultDirectRateLimiter,
    /// Foreground callers wait for the bucket one at a time, in arrival order (tokio's `Mutex` is
    /// fair), so a caller that sends one request at a time gets its turn behind a burst, not ahead
    /// of it.
    turn: Mutex<()>,
    /// Foreground callers that have arrived and not yet got their token. A background caller takes
    /// a token only while this is 0.
    foreground_waiting: AtomicUsize,
    /// Woken each time `foreground_waiting` drops to 0.
    foreground_idle: Notify,
}

impl RateLimit {
    /// `qps` tokens per second, at most `burst` at once; `None` if `qps` is not positive (no limit).
    pub(crate) fn new(qps: f32, burst: u32) -> Option<RateLimit> {
        if qps.is_nan() || qps <= 0.0 {
            return None;
        }
        let period = Duration::from_secs_f64(1.0 / f64::from(qps));
        let burst = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(period)?.allow_burst(burst);
        Some(RateLimit {
            bucket: RateLimiter::direct(quota),
            turn: Mutex::new(()),
            foreground_waiting: AtomicUsize::new(0),
            foreground_idle: Notify::new(),
        })
    }

    /// Waits for one token in `priority`'s lane.
    pub(crate) async fn acquire(&self, priority: Priority) {
        match priority {
            Priority::Foreground => self.acquire_foreground().await,
            Priority::Background => self.acquire_background().await,
        }
    }

    async fn acquire_foreground(&self) {
        let _waiting = ForegroundWaiting::enter(self);
        let _turn = self.turn.lock().await;
        self.bucket.until_ready().await;
    }

    async fn acquire_background(&self) {
        loop {
            self.foreground_gone().await;
            let next_token = {
                let _turn = self.turn.lock().await;
                if self.foreground_waiting.load(Ordering::SeqCst) > 0 {
                    continue;
                }
                match self.bucket.check() {
                    Ok(()) => return,
                    Err(not_until) => not_until.wait_time_from(self.bucket.clock().now()),
                }
            };
            tokio::time::sleep(next_token).await;
        }
    }

    /// Returns once no foreground caller is waiting.
    async fn foreground_gone(&self) {
        loop {
            let idle = self.foreground_idle.notified();
            tokio::pin!(idle);
            // Registered before the check, so a drop to 0 between the two still wakes us.
            idle.as_mut().enable();
            if self.foreground_waiting.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// Counts one foreground caller in `foreground_waiting` for as long as it lives (also when its
/// future is dropped mid-wait).
struct ForegroundWaiting<'a>(&'a RateLimit);

impl<'a> ForegroundWaiting<'a> {
    fn enter(limit: &'a RateLimit) -> ForegroundWaiting<'a> {
        limit.foreground_waiting.fetch_add(1, Ordering::SeqCst);
        ForegroundWaiting(limit)
    }
}

impl Drop for ForegroundWaiting<'_> {
    fn drop(&mut self) {
        if self.0.foreground_waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.foreground_idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Takes a token, then notes `name` in `log` (so `log` is the order tokens went in).
    async fn take(
        limit: Arc<RateLimit>,
        priority: Priority,
        name: &'static str,
        log: Arc<parking_lot::Mutex<Vec<&'static str>>>,
    ) {
        limit.acquire(priority).await;
        log.lock().push(name);
    }

    #[tokio::test]
    async fn background_waits_while_foreground_requests_are_waiting() {
        // 20 per second, burst 1: one token every 50 ms.
        let limit = Arc::new(RateLimit::new(20.0, 1).expect("a limit"));
        limit.acquire(Priority::Foreground).await; // the burst is spent
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let background = tokio::spawn(take(
            limit.clone(),
            Priority::Background,
            "background",
            log.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(5)).await;
        let mut foreground = Vec::new();
        for name in ["f1", "f2", "f3"] {
            foreground.push(tokio::spawn(take(
                limit.clone(),
                Priority::Foreground,
                name,
                log.clone(),
            )));
        }
        for task in foreground {
            task.await.expect("foreground task");
        }
        background.await.expect("background task");
        assert_eq!(*log.lock(), ["f1", "f2", "f3", "background"]);
    }

    #[tokio::test]
    async fn background_goes_at_once_on_an_idle_client() {
        let limit = RateLimit::new(20.0, 5).expect("a limit");
        let started = std::time::Instant::now();
        for _ in 0..5 {
            limit.acquire(Priority::Background).await;
        }
        assert!(
            started.elapsed() < Duration::from_millis(40),
            "the burst is free"
        );
        limit.acquire(Priority::Background).await;
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "then the bucket's rate holds"
        );
    }

    #[test]
    fn no_limit_without_a_positive_qps() {
        assert!(RateLimit::new(0.0, 10).is_none());
        assert!(RateLimit::new(-1.0, 10).is_none());
        assert!(RateLimit::new(f32::NAN, 10).is_none());
    }
}
