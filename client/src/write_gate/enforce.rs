//! The write gate's enforcement: how the client holds a gated write to the gate's word from the
//! first "yes" to the answer (the seam itself, [`WriteGate`], is in the parent module).
//!
//! Why it lives beside the trait: the rules of the gate (ask at the last moment, ask again when
//! the request starts to leave, give a write up when its permit runs out before it left, report a
//! write that left and was never answered) are one story with the trait's promises, and reading
//! them should not need the rest of the HTTP client. The client calls three things, in order:
//!
//! ```text
//!  Client::send ─ admit(gate) ─▶ WritePermit ─▶ GatedWrite::new(permit, gate) ── departure ──▶ RequestBody
//!                                                 │ send(sent): races the permit's limit          │ hyper polls the body:
//!                                                 │   against the request starting to leave       ▼ Departure::leave (2nd look)
//!                                                 ├ answered(): the head arrived
//!                                                 └ dropped unanswered after leaving ─▶ permit.abandon()
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::Response;
use hyper::body::Incoming;

use super::gate::{NotLeader, WriteGate, WritePermit};
use crate::error::Error;

/// The first look: asks `gate` whether a write (`method` on `url`) may go; a refusal is the
/// client's [`Error::NotLeader`], nothing sent.
pub(crate) fn admit(
    gate: &dyn WriteGate,
    method: &http::Method,
    url: &str,
) -> Result<WritePermit, Error> {
    gate.admit().map_err(|refusal| {
        tracing::debug!(%method, url, %refusal, "write refused by the write gate");
        Error::NotLeader {
            method: method.to_string(),
            url: url.to_string(),
            source: Box::new(refusal),
        }
    })
}

/// A gated write's passage through hyper: whether it has started to leave.
pub(crate) struct Departure {
    gate: Arc<dyn WriteGate>,
    /// Invariant: moves only `Waiting → Left` or `Waiting → Refused`, once.
    state: parking_lot::Mutex<DepartureState>,
}

enum DepartureState {
    /// hyper has not asked for the body yet: nothing of the request has left.
    Waiting,
    /// The gate said yes a second time and the request is on its way.
    Left,
    /// The gate said no: the request was abandoned before its body.
    Refused(NotLeader),
}

impl Departure {
    /// The second look at the gate.
    pub(crate) fn leave(&self) -> Result<(), NotLeader> {
        let verdict = self.gate.admit().map(drop);
        *self.state.lock() = match &verdict {
            Ok(()) => DepartureState::Left,
            Err(refusal) => DepartureState::Refused(refusal.clone()),
        };
        verdict
    }

    fn has_left(&self) -> bool {
        matches!(*self.state.lock(), DepartureState::Left)
    }

    fn refusal(&self) -> Option<NotLeader> {
        match &*self.state.lock() {
            DepartureState::Refused(refusal) => Some(refusal.clone()),
            _ => None,
        }
    }
}

/// One attempt of a request, gated or not: its permit, its departure, and whether its answer came.
/// Dropped without an answer after the request left, it tells the permit (see
/// [`WritePermit::on_abandon`]).
pub(crate) struct GatedWrite {
    permit: Option<WritePermit>,
    pub(crate) departure: Option<Arc<Departure>>,
    answered: bool,
}

/// Why an attempt produced no response.
pub(crate) enum SendError {
    Hyper(hyper_util::client::legacy::Error),
    Timeout {
        url: String,
        after: Duration,
    },
    /// The permit ran out while the write was still waiting for a connection.
    Expired,
}

impl GatedWrite {
    pub(crate) fn new(permit: Option<WritePermit>, gate: Option<Arc<dyn WriteGate>>) -> GatedWrite {
        let departure = match (&permit, gate) {
            (Some(_), Some(gate)) => Some(Arc::new(Departure {
                gate,
                state: parking_lot::Mutex::new(DepartureState::Waiting),
            })),
            _ => None,
        };
        GatedWrite {
            permit,
            departure,
            answered: false,
        }
    }

    /// Awaits `sent`; for a permit with a limit, gives the request up if the limit passes before
    /// it has started to leave.
    pub(crate) async fn send(
        &self,
        sent: impl Future<Output = Result<Response<Incoming>, hyper_util::client::legacy::Error>>,
    ) -> Result<Response<Incoming>, SendError> {
        let until = self.permit.as_ref().and_then(WritePermit::until);
        let (Some(until), Some(departure)) = (until, &self.departure) else {
            return sent.await.map_err(SendError::Hyper);
        };
        tokio::pin!(sent);
        tokio::select! {
            // An answer that is there wins over a limit that passed in the same poll.
            biased;
            response = &mut sent => return response.map_err(SendError::Hyper),
            () = tokio::time::sleep_until(until) => {}
        }
        if departure.has_left() {
            // Already on the wire: only the answer is awaited now.
            sent.await.map_err(SendError::Hyper)
        } else {
            // Dropping `sent` here cancels the request before hyper writes it.
            Err(SendError::Expired)
        }
    }

    /// The answer's head arrived: the write is over, whatever its status.
    pub(crate) fn answered(&mut self) {
        self.answered = true;
    }

    /// The client error for `error`.
    pub(crate) fn error(&self, error: SendError, method: &http::Method, url: &str) -> Error {
        let not_leader = |refusal: NotLeader| Error::NotLeader {
            method: method.to_string(),
            url: url.to_string(),
            source: Box::new(refusal),
        };
        if let Some(refusal) = self.departure.as_ref().and_then(|d| d.refusal()) {
            tracing::debug!(%method, url, %refusal, "write refused by the write gate as it was leaving");
            return not_leader(refusal);
        }
        match error {
            SendError::Hyper(source) => Error::Transport {
                url: url.to_string(),
                source: Box::new(source),
            },
            SendError::Timeout { url, after } => Error::Timeout { url, after },
            SendError::Expired => {
                // Nothing left. Ask the gate why: it is closed by now, unless a renewal reopened
                // it meanwhile, and then the connection was simply too slow.
                match self.departure.as_ref().map(|d| d.gate.admit()) {
                    Some(Err(refusal)) => {
                        tracing::debug!(%method, url, %refusal, "write gave up waiting for a connection past its permit");
                        not_leader(refusal)
                    }
                    _ => Error::Timeout {
                        url: url.to_string(),
                        after: Duration::ZERO,
                    },
                }
            }
        }
    }
}

impl Drop for GatedWrite {
    fn drop(&mut self) {
        let left = self.departure.as_ref().is_some_and(|d| d.has_left());
        if left && !self.answered {
            if let Some(permit) = &mut self.permit {
                permit.abandon();
            }
        }
    }
}
