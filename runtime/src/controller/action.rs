//! What a reconcile asks for next: wait for a change, or look again later.
//!
//! A reconcile is level-driven: it brings the world one step closer to the spec and says when it
//! wants to run again. Most of the time the answer is "when something changes" (an event brings the
//! key back); a reconcile that polls something outside Kubernetes asks to be run again after a
//! while. Errors are not an `Action`: they go back through the queue's rate limiter (see
//! [`Reconciler::error_policy`](super::Reconciler::error_policy)).

use std::time::Duration;

/// What the controller does with a key after its reconcile (or its error policy) returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action(Next);

/// The three ways a key can come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Only an event (or a resync) brings the key back.
    AwaitChange,
    /// The key comes back after this long (an earlier event still brings it back sooner).
    After(Duration),
    /// The key comes back after the queue's rate limiter says (per-key exponential backoff).
    RateLimited,
}

impl Action {
    /// Run again only when the object, something it owns or watches, or an external source says
    /// so, or at the next resync.
    pub fn await_change() -> Action {
        Action(Next::AwaitChange)
    }

    /// Run again after `delay` at the latest: polling the outside world, or a deadline the object
    /// carries (`minReadySeconds`, a certificate's expiry). A zero delay requeues at once.
    pub fn requeue(delay: Duration) -> Action {
        Action(Next::After(delay))
    }

    /// Run again after the queue's rate limiter delay for this key, counting one more failure of
    /// it: the default reaction to an error, and what an error policy returns to keep it.
    pub fn requeue_rate_limited() -> Action {
        Action(Next::RateLimited)
    }

    /// The fixed delay asked for, if any.
    pub fn requeue_after(&self) -> Option<Duration> {
        match self.0 {
            Next::After(delay) => Some(delay),
            _ => None,
        }
    }

    pub(crate) fn next(self) -> Next {
        self.0
    }
}
