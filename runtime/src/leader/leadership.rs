//! [`Leadership`]: what the rest of the process sees of the election, and the write gate.
//!
//! The elector publishes its state in a `tokio::sync::watch` channel; every [`Leadership`] handle
//! reads that channel and nothing else, so a handle costs one clone and a check costs a read lock
//! and a clock read. The gate is computed, not stored:
//!
//! ```text
//!   open  ⇔  state = Leading { renewed_at, .. }  ∧  now < renewed_at + renew_deadline
//! ```
//!
//! so it closes **on time even if the elector cannot run** (the process was frozen, the runtime is
//! starved, the elector's task hangs): nobody has to flip it. `renewed_at` is the instant the last
//! successful renewal was *sent*, the earliest moment the server can have stored it, which is the
//! conservative end (see the [module docs](super) for why the deadline is `renew_deadline` and not
//! `lease_duration`).
//!
//! Renewals move `renewed_at` forward without waking the channel's subscribers (they would be
//! woken every retry period for nothing); transitions (following, leading, stopped, the observed
//! leader changing) wake them.
//!
//! Writes admitted by the gate are counted until their answer arrives, so the elector can wait
//! for them to finish before it hands the lease to someone else (release on shutdown).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use ferrokube_client::write_gate::{NotLeader, NotLeaderReason, WriteGate, WritePermit};

/// The elector's state as [`Leadership`] publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// Not running: `run` has not been called, or it returned.
    Stopped,
    /// Campaigning. `leader`: the holder of the lease as last observed (`None`: it has none, or
    /// it has not been read yet).
    Following { leader: Option<String> },
    /// Holding the lease.
    Leading {
        /// Counts this elector's leadership terms from 1; a [`Lost`] future belongs to one term.
        term: u64,
        /// When the write that won the lease was sent.
        since: Instant,
        /// When the last successful renewal (or the winning write) was sent. Moves forward with
        /// each renewal without waking subscribers. Invariant: the elector sends no write as
        /// leader at or after `renewed_at + renew_deadline`, and the gate is closed from then on.
        renewed_at: Instant,
    },
}

/// Leading, but the lease may have run out more than the tolerated time ago: the elector should
/// have stepped down and did not (client-go's `HealthzAdaptor` check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{identity} leads lease {lease}, but its last renewal was sent {since_renewal:?} ago: more than the lease duration plus {tolerance:?}"
)]
pub struct Unhealthy {
    pub lease: String,
    pub identity: String,
    pub since_renewal: Duration,
    pub tolerance: Duration,
}

/// What every handle shares: who we are, the deadlines, and the writes in flight.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) lease: String,
    pub(crate) identity: String,
    pub(crate) renew_deadline: Duration,
    pub(crate) lease_duration: Duration,
    /// Writes admitted by the gate whose answer has not arrived. Incremented *before* the state
    /// is read in [`Leadership::admit`], and the elector reads it *after* publishing `Stopped`, so
    /// a write the elector does not count cannot have seen the gate open.
    in_flight: AtomicUsize,
    /// Woken when `in_flight` drops to 0.
    writes_done: Notify,
    /// When a write admitted by the gate last left without its answer ever arriving (the caller
    /// dropped it, the connection broke, it timed out). Such a write may still be applied by the
    /// server at any moment, so the elector does not hand the lease over early (release on
    /// shutdown) for a lease duration after it: it lets the lease run out instead.
    abandoned_at: parking_lot::Mutex<Option<Instant>>,
}

/// A cheap, cloneable view of one elector: am I the leader, may I write, wait until I lead, tell
/// me when I stop. Also a [`WriteGate`] for [`Client::with_write_gate`](ferrokube_client::Client::with_write_gate).
#[derive(Clone)]
pub struct Leadership {
    state: watch::Receiver<LeaderState>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("lease", &self.shared.lease)
            .field("identity", &self.shared.identity)
            .field("state", &*self.state.borrow())
            .finish()
    }
}

impl Leadership {
    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// `namespace/name` of the Lease.
    pub fn lease(&self) -> &str {
        &self.shared.lease
    }

    /// The gate: `Ok` while this candidate leads and its last successful renewal was sent less
    /// than the renew deadline ago. Check it right before each action that only the leader may
    /// take (a gated [`Client`](ferrokube_client::Client) does it for every write).
    pub fn check(&self) -> Result<(), NotLeader> {
        self.check_at(Instant::now())
    }

    /// [`check`](Self::check) as it would answer at `now`.
    pub(crate) fn check_at(&self, now: Instant) -> Result<(), NotLeader> {
        if self.state.has_changed().is_err() {
            // The elector is gone (it publishes `Stopped` as it goes; this is a second guard).
            return Err(self.refusal(NotLeaderReason::Stopped));
        }
        // The guard is a temporary: the lock is released before the refusal is built.
        let verdict = gate(&self.state.borrow(), self.shared.renew_deadline, now);
        verdict.map_err(|reason| self.refusal(reason))
    }

    fn refusal(&self, reason: NotLeaderReason) -> NotLeader {
        NotLeader {
            lease: self.shared.lease.clone(),
            identity: self.shared.identity.clone(),
            reason,
        }
    }

    /// [`check`](Self::check) as a bool.
    pub fn is_leader(&self) -> bool {
        self.check().is_ok()
    }

    /// The holder of the lease as this candidate knows it: itself while the gate is open, the
    /// last observed holder while following, `None` when there is none or nothing is known.
    pub fn leader(&self) -> Option<String> {
        let state = self.state.borrow();
        match &*state {
            LeaderState::Leading { .. } => gate(&state, self.shared.renew_deadline, Instant::now())
                .ok()
                .map(|()| self.shared.identity.clone()),
            LeaderState::Following { leader } => leader.clone(),
            LeaderState::Stopped => None,
        }
    }

    /// A snapshot of the elector's state (for a leader, `renewed_at` is the latest).
    pub fn state(&self) -> LeaderState {
        self.state.borrow().clone()
    }

    /// The elector's state as a `watch` channel: woken on each transition (following, leading,
    /// stopped, a new observed leader), not on renewals. Remember that the gate also closes on
    /// time alone: use [`check`](Self::check) or [`lost`](Self::lost), not this, to decide
    /// whether to write.
    pub fn watch(&self) -> watch::Receiver<LeaderState> {
        self.state.clone()
    }

    /// When the gate closes unless a renewal succeeds first (`None` if it is not open).
    pub fn write_deadline(&self) -> Option<Instant> {
        match &*self.state.borrow() {
            LeaderState::Leading { renewed_at, .. } => {
                Some(gate_closes(*renewed_at, self.shared.renew_deadline))
            }
            _ => None,
        }
    }

    /// Completes once this candidate leads (at once if it does). Fails only if the elector has
    /// been dropped, since then it never will.
    pub fn acquired(&self) -> impl Future<Output = Result<(), NotLeader>> + Send + 'static {
        let this = self.clone();
        async move {
            let mut state = this.state.clone();
            loop {
                // Marks the current value seen, so `changed` waits for the next one.
                let open = gate(
                    &state.borrow_and_update(),
                    this.shared.renew_deadline,
                    Instant::now(),
                );
                if open.is_ok() && state.has_changed().is_ok() {
                    return Ok(());
                }
                if state.changed().await.is_err() {
                    return Err(this.refusal(NotLeaderReason::Stopped));
                }
            }
        }
    }

    /// Completes when the current leadership term ends: the elector steps down or stops, or the
    /// gate closes on time (renewals stopped succeeding, whatever the elector is doing).
    /// Completes at once if this candidate does not lead now. Bound to the term that is current
    /// when it is created: a later term does not hold it back.
    pub fn lost(&self) -> Lost {
        let mut state = self.state.clone();
        let renew_deadline = self.shared.renew_deadline;
        let term = {
            let current = state.borrow_and_update();
            match &*current {
                LeaderState::Leading { term, .. }
                    if gate(&current, renew_deadline, Instant::now()).is_ok() =>
                {
                    Some(*term)
                }
                _ => None,
            }
        };
        Lost(Box::pin(async move {
            let Some(term) = term else {
                return;
            };
            loop {
                let closes = match &*state.borrow_and_update() {
                    LeaderState::Leading {
                        term: current,
                        renewed_at,
                        ..
                    } if *current == term => gate_closes(*renewed_at, renew_deadline),
                    _ => return,
                };
                if Instant::now() >= closes {
                    return;
                }
                tokio::select! {
                    // A change first (the term may have ended). Either branch only loops back to
                    // the check above, which reads the clock itself, so neither order can let the
                    // deadline pass unnoticed.
                    biased;
                    changed = state.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                    // Renewals do not wake us: at the old deadline, look again.
                    () = tokio::time::sleep_until(closes) => {}
                }
            }
        }))
    }

    /// client-go's leader-election health check (`HealthzAdaptor`): unhealthy only if this
    /// candidate thinks it leads and the lease ran out more than `tolerance` ago, that is its last
    /// renewal was sent more than `lease_duration + tolerance` ago. The elector steps down at the
    /// renew deadline, so this fails only when the elector itself is stuck (a deadlock, a starved
    /// runtime): the process should then be restarted.
    pub fn health_check(&self, tolerance: Duration) -> Result<(), Unhealthy> {
        let LeaderState::Leading { renewed_at, .. } = &*self.state.borrow() else {
            return Ok(());
        };
        let since_renewal = Instant::now().saturating_duration_since(*renewed_at);
        if since_renewal > self.shared.lease_duration.saturating_add(tolerance) {
            return Err(Unhealthy {
                lease: self.shared.lease.clone(),
                identity: self.shared.identity.clone(),
                since_renewal,
                tolerance,
            });
        }
        Ok(())
    }
}

impl WriteGate for Leadership {
    /// Admits a write while the gate is open. The permit holds until the gate closes (the client
    /// gives the write up, unsent, if it has not started to leave by then), and a write that left
    /// but was never answered is recorded as abandoned: the elector then lets the lease run out
    /// instead of releasing it early.
    fn admit(&self) -> Result<WritePermit, NotLeader> {
        // Counted before the check (see `Shared::in_flight`).
        let counted = InFlight::enter(self.shared.clone());
        let now = Instant::now();
        self.check_at(now)?;
        let closes = match &*self.state.borrow() {
            LeaderState::Leading { renewed_at, .. } => {
                gate_closes(*renewed_at, self.shared.renew_deadline)
            }
            // Checked open just above; a change since then closes at once.
            _ => now,
        };
        let shared = self.shared.clone();
        Ok(WritePermit::holding(counted)
            .valid_until(closes)
            .on_abandon(move || {
                tracing::warn!(
                    lease = %shared.lease,
                    "a write left and was never answered: it may still land, so this lease will not be handed back early"
                );
                *shared.abandoned_at.lock() = Some(Instant::now());
            }))
    }
}

/// One admitted write, counted in `Shared::in_flight` for as long as it lives.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: Arc<Shared>) -> InFlight {
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(shared)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.writes_done.notify_waiters();
        }
    }
}

/// The end of a leadership term; see [`Leadership::lost`]. A `'static` future, so it can be moved
/// into a task.
pub struct Lost(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Future for Lost {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lost").finish_non_exhaustive()
    }
}

/// The gate's verdict for `state` at `now`.
fn gate(
    state: &LeaderState,
    renew_deadline: Duration,
    now: Instant,
) -> Result<(), NotLeaderReason> {
    match state {
        LeaderState::Leading { renewed_at, .. } => {
            let closes = gate_closes(*renewed_at, renew_deadline);
            if now < closes {
                Ok(())
            } else {
                Err(NotLeaderReason::DeadlinePassed {
                    by: now.saturating_duration_since(closes),
                })
            }
        }
        LeaderState::Following { leader } => Err(NotLeaderReason::Following {
            leader: leader.clone(),
        }),
        LeaderState::Stopped => Err(NotLeaderReason::Stopped),
    }
}

/// When a gate opened by a renewal sent at `renewed_at` closes. Durations are validated to at most
/// a year, so this cannot overflow; if it somehow did, the gate is treated as already closed.
pub(crate) fn gate_closes(renewed_at: Instant, renew_deadline: Duration) -> Instant {
    renewed_at.checked_add(renew_deadline).unwrap_or(renewed_at)
}

/// The elector's side of the channel: it alone changes the state.
#[derive(Debug)]
pub(crate) struct Publisher {
    state: watch::Sender<LeaderState>,
    shared: Arc<Shared>,
}

impl Publisher {
    pub(crate) fn new(
        lease: String,
        identity: String,
        renew_deadline: Duration,
        lease_duration: Duration,
    ) -> Publisher {
        Publisher {
            state: watch::Sender::new(LeaderState::Stopped),
            shared: Arc::new(Shared {
                lease,
                identity,
                renew_deadline,
                lease_duration,
                in_flight: AtomicUsize::new(0),
                writes_done: Notify::new(),
                abandoned_at: parking_lot::Mutex::new(None),
            }),
        }
    }

    pub(crate) fn leadership(&self) -> Leadership {
        Leadership {
            state: self.state.subscribe(),
            shared: self.shared.clone(),
        }
    }

    /// Following, with `leader` as the observed holder (subscribers woken only if that changed).
    pub(crate) fn following(&self, leader: Option<&str>) {
        self.state.send_if_modified(|state| {
            let same = matches!(state, LeaderState::Following { leader: current } if current.as_deref() == leader);
            if !same {
                *state = LeaderState::Following {
                    leader: leader.map(str::to_string),
                };
            }
            !same
        });
    }

    /// Leading from now: the gate opens.
    pub(crate) fn leading(&self, term: u64, since: Instant, renewed_at: Instant) {
        self.state.send_replace(LeaderState::Leading {
            term,
            since,
            renewed_at,
        });
    }

    /// A renewal sent at `sent` succeeded: the gate stays open until `sent + renew_deadline`.
    /// Subscribers are not woken.
    pub(crate) fn renewed(&self, sent: Instant) {
        self.state.send_if_modified(|state| {
            if let LeaderState::Leading { renewed_at, .. } = state {
                *renewed_at = (*renewed_at).max(sent);
            }
            false
        });
    }

    /// Not running (or no longer leading, on the way out of `run`): the gate closes now.
    pub(crate) fn stopped(&self) {
        self.state.send_if_modified(|state| {
            let changed = *state != LeaderState::Stopped;
            *state = LeaderState::Stopped;
            changed
        });
    }

    /// Waits until no write admitted by the gate is in flight, or `deadline`; true if none is.
    /// Call after closing the gate, so that no new write can be admitted meanwhile.
    pub(crate) async fn writes_finished(&self, deadline: Instant) -> bool {
        loop {
            let done = self.shared.writes_done.notified();
            tokio::pin!(done);
            // Registered before the count is read, so a drop to 0 in between still wakes us.
            done.as_mut().enable();
            if self.shared.in_flight.load(Ordering::SeqCst) == 0 {
                return true;
            }
            tokio::select! {
                // The deadline first: it is the bound the caller relies on, and the answer there
                // reads the count itself, so a write that just finished still counts as finished.
                biased;
                () = tokio::time::sleep_until(deadline) => {
                    return self.shared.in_flight.load(Ordering::SeqCst) == 0;
                }
                () = done => {}
            }
        }
    }
}

impl Publisher {
    /// True if a write admitted by the gate was abandoned in flight less than a lease duration
    /// ago (see [`Shared::abandoned_at`]): it may still land, so the lease must not be released.
    pub(crate) fn abandoned_write_may_land(&self) -> bool {
        let abandoned_at = *self.shared.abandoned_at.lock();
        abandoned_at.is_some_and(|at| at.elapsed() < self.shared.lease_duration)
    }
}

impl Drop for Publisher {
    /// The elector is gone: whatever it said last, it leads no more.
    fn drop(&mut self) {
        self.stopped();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENEW_DEADLINE: Duration = Duration::from_millis(600);

    fn publisher() -> Publisher {
        Publisher::new(
            "ns/lock".into(),
            "me".into(),
            RENEW_DEADLINE,
            Duration::from_secs(1),
        )
    }

    #[test]
    fn leader_gate_is_open_only_while_leading_and_before_the_deadline() {
        let publisher = publisher();
        let leadership = publisher.leadership();
        let t0 = Instant::now();
        assert_eq!(
            leadership.check_at(t0).map_err(|e| e.reason),
            Err(NotLeaderReason::Stopped)
        );
        publisher.following(Some("other"));
        assert_eq!(
            leadership.check_at(t0).map_err(|e| e.reason),
            Err(NotLeaderReason::Following {
                leader: Some("other".into())
            })
        );
        publisher.leading(1, t0, t0);
        assert!(leadership.check_at(t0).is_ok());
        assert!(
            leadership
                .check_at(t0 + RENEW_DEADLINE - Duration::from_nanos(1))
                .is_ok()
        );
        assert_eq!(
            leadership
                .check_at(t0 + RENEW_DEADLINE + Duration::from_millis(5))
                .map_err(|e| e.reason),
            Err(NotLeaderReason::DeadlinePassed {
                by: Duration::from_millis(5)
            }),
            "closed at the deadline, though the state still says leading"
        );
        publisher.renewed(t0 + Duration::from_millis(200));
        assert!(
            leadership
                .check_at(t0 + RENEW_DEADLINE + Duration::from_millis(5))
                .is_ok()
        );
        publisher.renewed(t0); // an older send time never moves the deadline back
        assert!(
            leadership
                .check_at(t0 + RENEW_DEADLINE + Duration::from_millis(5))
                .is_ok()
        );
        publisher.stopped();
        assert!(leadership.check_at(t0).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn leader_frozen_gate_closes_exactly_at_the_renew_deadline() {
        // A leader whose elector makes no progress (frozen): nothing but the clock moves.
        let publisher = publisher();
        let leadership = publisher.leadership();
        let t0 = Instant::now();
        publisher.leading(1, t0, t0);
        let lost = leadership.lost();
        let lost = tokio::spawn(lost);
        tokio::time::advance(RENEW_DEADLINE - Duration::from_millis(1)).await;
        assert!(leadership.is_leader());
        assert!(!lost.is_finished());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(
            !leadership.is_leader(),
            "closed the instant the deadline passed"
        );
        assert!(matches!(
            leadership.check().map_err(|e| e.reason),
            Err(NotLeaderReason::DeadlinePassed { .. })
        ));
        lost.await.expect("lost completes on time alone");
        assert_eq!(leadership.write_deadline(), Some(t0 + RENEW_DEADLINE));
    }

    #[tokio::test(start_paused = true)]
    async fn leader_lost_waits_through_renewals_and_ends_with_the_term() {
        let publisher = publisher();
        let leadership = publisher.leadership();
        let t0 = Instant::now();
        publisher.leading(1, t0, t0);
        let lost = tokio::spawn(leadership.lost());
        for _ in 0..10 {
            tokio::time::advance(Duration::from_millis(200)).await;
            publisher.renewed(Instant::now());
        }
        assert!(!lost.is_finished(), "renewals keep the term alive");
        publisher.following(Some("other"));
        tokio::task::yield_now().await;
        lost.await.expect("the term ended");
        // Not leading: completes at once.
        leadership.lost().await;
    }

    #[tokio::test(start_paused = true)]
    async fn leader_acquired_waits_for_leading() {
        let publisher = publisher();
        let leadership = publisher.leadership();
        publisher.following(None);
        let acquired = tokio::spawn(leadership.acquired());
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(!acquired.is_finished());
        let now = Instant::now();
        publisher.leading(1, now, now);
        assert_eq!(acquired.await.expect("task"), Ok(()));
        drop(publisher);
        let gone = leadership.acquired().await;
        assert!(gone.is_err(), "the elector is gone: it never will");
    }

    #[tokio::test(start_paused = true)]
    async fn leader_health_fails_only_when_leading_past_the_lease_plus_tolerance() {
        let publisher = publisher();
        let leadership = publisher.leadership();
        let tolerance = Duration::from_millis(100);
        assert!(leadership.health_check(tolerance).is_ok(), "stopped");
        let t0 = Instant::now();
        publisher.leading(1, t0, t0);
        tokio::time::advance(Duration::from_millis(1100)).await;
        assert!(
            leadership.health_check(tolerance).is_ok(),
            "exactly at the limit"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(leadership.health_check(tolerance).is_err());
        publisher.following(None);
        assert!(
            leadership.health_check(tolerance).is_ok(),
            "a follower is healthy"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn leader_gate_counts_writes_in_flight() {
        let publisher = publisher();
        let leadership = publisher.leadership();
        let now = Instant::now();
        publisher.leading(1, now, now);
        let permit = leadership.admit().expect("leading");
        publisher.stopped();
        assert!(
            leadership.admit().is_err(),
            "closed: nothing new is admitted"
        );
        let deadline = Instant::now() + Duration::from_millis(50);
        assert!(
            !publisher.writes_finished(deadline).await,
            "one write still in flight at the deadline"
        );
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(permit);
        });
        assert!(
            publisher
                .writes_finished(Instant::now() + Duration::from_secs(1))
                .await
        );
        release.await.expect("task");
    }
}
