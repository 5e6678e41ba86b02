//! The seam itself: [`WriteGate`], the [`WritePermit`] it grants and the [`NotLeader`] refusal.
//! The story of the gate is in the parent module's docs.

use std::time::Duration;

/// Decides, right before each write of a gated [`Client`](crate::Client) is sent, whether it may go. See
/// [`Client::with_write_gate`](crate::Client::with_write_gate); the runtime's leader election (`ferrokube::leader::Leadership`) is the
/// gate ferrokube provides.
pub trait WriteGate: Send + Sync + 'static {
    /// `Ok`: send, holding the permit until the answer's head arrives (or the attempt is given up).
    /// `Err`: the request fails with [`Error::NotLeader`](crate::Error::NotLeader) and is not sent. Called once per attempt,
    /// on the request's task, so it must be quick and must not block.
    fn admit(&self) -> Result<WritePermit, NotLeader>;
}

/// Proof that a [`WriteGate`] let one write through; dropped when the write's answer has arrived
/// (or the attempt ended without one). A gate that wants to know which writes are in flight puts a
/// guard in it whose `Drop` counts the write done.
pub struct WritePermit {
    _guard: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// The last instant the write may start to leave; `None`: no limit but the request timeout.
    until: Option<tokio::time::Instant>,
    /// Called (once) if the write left and its answer never came: it may still land.
    on_abandon: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl WritePermit {
    /// A permit that tracks nothing.
    pub fn untracked() -> WritePermit {
        WritePermit {
            _guard: None,
            until: None,
            on_abandon: None,
        }
    }

    /// A permit that holds `guard` until the write is over.
    pub fn holding(guard: impl std::any::Any + Send + Sync) -> WritePermit {
        WritePermit {
            _guard: Some(Box::new(guard)),
            until: None,
            on_abandon: None,
        }
    }

    /// This permit holds only until `until`: a write that has not started to leave by then (it
    /// is still waiting for a connection or a TLS handshake) is given up unsent, as
    /// [`Error::NotLeader`](crate::Error::NotLeader). The leader election's `Leadership` sets it to the moment its
    /// gate closes.
    pub fn valid_until(mut self, until: tokio::time::Instant) -> WritePermit {
        self.until = Some(until);
        self
    }

    /// Calls `abandoned` if the write left (some of its bytes may have reached the server) but
    /// its answer never arrived: the caller dropped the request, the connection broke, or the
    /// request timed out. Such a write may still be applied later; the elector uses this to keep
    /// its lease until it has surely run out rather than hand it over early.
    pub fn on_abandon(mut self, abandoned: impl FnOnce() + Send + Sync + 'static) -> WritePermit {
        self.on_abandon = Some(Box::new(abandoned));
        self
    }

    /// When this permit stops holding, if it says.
    pub fn until(&self) -> Option<tokio::time::Instant> {
        self.until
    }

    /// Tells the gate the write left and was never answered (at most once).
    pub(crate) fn abandon(&mut self) {
        if let Some(abandoned) = self.on_abandon.take() {
            abandoned();
        }
    }
}

impl std::fmt::Debug for WritePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WritePermit").finish_non_exhaustive()
    }
}

/// Why a write gate refused (the leader election's `Leadership` is one): this candidate does not hold the lease, or may no longer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{identity} does not hold lease {lease}: {reason}")]
pub struct NotLeader {
    /// `namespace/name` of the Lease.
    pub lease: String,
    /// This candidate's identity.
    pub identity: String,
    pub reason: NotLeaderReason,
}

/// The part of [`NotLeader`] that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotLeaderReason {
    /// The elector is campaigning; `leader` is the holder it last observed.
    Following { leader: Option<String> },
    /// The elector still says "leading", but its last successful renewal was sent more than the
    /// renew deadline ago (`by` past it): it may have lost the lease without knowing (frozen,
    /// starved, cut off from the server), so the gate closed on time alone.
    DeadlinePassed { by: Duration },
    /// The elector is not running (before `run`, after it returned, or it was dropped).
    Stopped,
}

impl std::fmt::Display for NotLeaderReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotLeaderReason::Following {
                leader: Some(leader),
            } => {
                write!(f, "following; the leader is {leader}")
            }
            NotLeaderReason::Following { leader: None } => write!(f, "following; no leader"),
            NotLeaderReason::DeadlinePassed { by } => {
                write!(f, "the renew deadline passed {by:?} ago without a renewal")
            }
            NotLeaderReason::Stopped => write!(f, "the elector is not running"),
        }
    }
}
