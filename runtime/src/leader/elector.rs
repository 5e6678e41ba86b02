//! [`LeaderElector`]: one candidate's campaign for a Lease, its leadership, and its way out.
//!
//! One call of [`LeaderElector::run`] is one pass through this state machine ([`Phase`]):
//!
//! ```text
//!             ┌──────────── shutdown ─────────────────────────────────────────────┐
//!             │                                                                   ▼
//!   run ──▶ Following ──a write made us holder──▶ Leading ──no renewal within ──▶ Stopped(outcome)
//!           poll every retry_period·[1, 2.2)      renew (PUT) every      renew_deadline,
//!           + watch the Lease                     retry_period           or the Lease names
//!           try at: released ⇒ now;                                      someone else,
//!                   held ⇒ change seen + lease_duration                 or shutdown (release)
//! ```
//!
//! As client-go's `Run`, `run` returns once leadership is lost: a process that lost its lease
//! usually exits (or at least restarts its leader-only work from scratch), and can call `run`
//! again to campaign anew.
//!
//! Every request of the elector is bounded in time: half the renew deadline for a follower's
//! (client-go's lease client uses the same), and no later than the write deadline for a leader's.
//! No request error is fatal: a follower tries again at its next poll, a leader at its next
//! renewal, until its deadline.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::{Instant, sleep_until, timeout_at};
use tracing::Instrument;

use super::callbacks::{Callbacks, NewLeaderReports};
use super::config::{JITTER_FACTOR, LeaderElectionError, LeaderElectorBuilder, Settings, Timings};
use super::leadership::{Leadership, Publisher, gate_closes};
use super::metrics::LeaderMetrics;
use super::observe::Observed;
use super::record;
use super::watch::LeaseWatch;
use ferrokube_client::api::PostParams;
use ferrokube_client::{Api, Client, Error};

/// How a [`LeaderElector::run`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// The shutdown future completed before this candidate led.
    ShutdownWhileFollowing,
    /// The shutdown future completed while this candidate led. `released`: the lease was handed
    /// back (with `release_on_cancel`, the default) and the server accepted it, so a follower
    /// takes over at once; otherwise followers wait for it to expire.
    ShutdownWhileLeading { released: bool },
    /// This candidate led, then lost the lease.
    Lost(LostReason),
}

/// Why a leader stopped leading without being asked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// No renewal succeeded within the renew deadline of the last successful one (the server
    /// failed or could not be reached, or this process was frozen or starved past the deadline).
    /// Nothing was written after the deadline.
    RenewDeadlinePassed,
    /// Someone else wrote the Lease: it now names `holder` (`None`: no holder).
    TakenOver { holder: Option<String> },
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LostReason::RenewDeadlinePassed => {
                write!(f, "no renewal succeeded before the renew deadline")
            }
            LostReason::TakenOver {
                holder: Some(holder),
            } => {
                write!(f, "the lease was taken over by {holder}")
            }
            LostReason::TakenOver { holder: None } => {
                write!(f, "the lease was cleared by someone else")
            }
        }
    }
}

/// One candidate for one Lease. See the [module docs](super) and [`LeaderElector::builder`].
pub struct LeaderElector {
    /// The Leases of the namespace, through a client without a write gate.
    api: Api<Lease>,
    settings: Settings,
    publisher: Publisher,
    metrics: Option<LeaderMetrics>,
    callbacks: Callbacks,
    /// True while a `run` is in progress; a second concurrent `run` is refused.
    running: AtomicBool,
    /// Leadership terms begun so far, over all runs.
    terms: AtomicU64,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// The state machine of one `run`; each phase owns what it needs and its invariants.
enum Phase {
    Following(Campaign),
    Leading(Leading),
    Stopped(RunOutcome),
}

/// Campaigning for the lease.
struct Campaign {
    /// What this candidate knows of the Lease, and since when; `None` until the first reading.
    observed: Option<Observed>,
    /// When the next poll (GET) is sent. The first one goes at once.
    next_poll: Instant,
    /// After an attempt that failed for another reason than a lost race: no new attempt before
    /// this (a jittered retry period later), so a failing server is not hammered.
    not_before: Instant,
    /// The watch on the Lease; its task stops when the campaign ends.
    watch: LeaseWatch,
}

/// Holding the lease.
struct Leading {
    /// The Lease as this candidate's last successful write left it. Its resourceVersion is the
    /// precondition of the next renewal, which is therefore a single PUT: a 409 means someone
    /// else wrote the Lease since, and only then is it read again.
    lease: Box<Lease>,
    /// This term's number (see `LeaderState::Leading::term`).
    term: u64,
    /// When the write that won the lease was sent.
    since: Instant,
    /// When the last successful write (the winning one, then each renewal) was sent. Invariants:
    /// the same value is published to the `Leadership` handles, and the elector sends no write as
    /// leader at or after `renewed_at + renew_deadline`.
    renewed_at: Instant,
    /// When the next renewal is due: the last attempt's send time plus the retry period.
    next_renew: Instant,
}

/// How a follower's attempt to take the lease ended.
enum Attempt {
    /// The write landed: this candidate holds the lease. The Lease as written, and the write's
    /// send time.
    Won(Box<Lease>, Instant),
    /// Someone else got there first (409/404): the Lease as read right after.
    Raced(Option<Box<Lease>>),
    /// Another failure (logged); try again later.
    Failed,
}

/// A failed request of the elector.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error(transparent)]
    Api(#[from] Error),
    #[error("no answer in time")]
    TimedOut,
}

impl RequestError {
    /// Someone else changed (or deleted, or created) the Lease since we last read it.
    fn is_race(&self) -> bool {
        matches!(self, RequestError::Api(e) if e.is_conflict() || e.is_already_exists() || e.is_not_found())
    }
}

impl LeaderElector {
    /// A builder for a candidate for Lease `namespace/name`, making its requests with `client`.
    ///
    /// Give the elector a client of its own (`Client::new(config.clone())`) if the process sends
    /// many requests: clones of one client share its rate limiter, and a renewal queued behind a
    /// controller's burst may miss its deadline. The elector strips any write gate from `client`.
    pub fn builder(client: Client, namespace: &str, name: &str) -> LeaderElectorBuilder {
        LeaderElectorBuilder::new(client, namespace, name)
    }

    pub(crate) fn new(
        client: Client,
        settings: Settings,
        metrics: Option<LeaderMetrics>,
        callbacks: Callbacks,
    ) -> LeaderElector {
        let publisher = Publisher::new(
            settings.lease_key(),
            settings.identity.clone(),
            settings.timings.renew_deadline,
            settings.timings.lease_duration,
        );
        if let Some(metrics) = &metrics {
            metrics.set(&settings.name, false);
        }
        LeaderElector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            publisher,
            metrics,
            callbacks,
            running: AtomicBool::new(false),
            terms: AtomicU64::new(0),
        }
    }

    /// A handle on this elector's state and write gate; cheap to clone, valid for the elector's
    /// whole life (across runs).
    pub fn leadership(&self) -> Leadership {
        self.publisher.leadership()
    }

    /// This candidate's identity (as written in the Lease when it leads).
    pub fn identity(&self) -> &str {
        &self.settings.identity
    }

    /// The durations in force.
    pub fn timings(&self) -> Timings {
        self.settings.timings
    }

    /// Campaigns until this candidate leads, leads while renewals succeed, and returns when
    /// leadership is lost or when `shutdown` completes (after releasing the lease, if leading and
    /// `release_on_cancel`). Request failures are logged and retried, never returned; the only
    /// error is a second concurrent `run` on the same elector.
    ///
    /// Dropping the returned future (aborting its task) closes the write gate at once but
    /// releases nothing: to the others it looks like a crash, and they take over when the lease
    /// expires.
    pub async fn run<S>(&self, shutdown: S) -> Result<RunOutcome, LeaderElectionError>
    where
        S: Future<Output = ()>,
    {
        let _running = RunGuard::claim(self)?;
        let span = tracing::info_span!(
            "leader_election",
            lease = %self.settings.lease_key(),
            identity = %self.settings.identity,
        );
        let mut shutdown = pin!(shutdown.fuse());
        let mut reports = NewLeaderReports::default();
        async {
            tracing::info!("campaigning for the lease");
            let mut phase = Phase::Following(self.start_campaign());
            loop {
                phase = match phase {
                    Phase::Following(campaign) => {
                        self.campaign(campaign, shutdown.as_mut(), &mut reports)
                            .await
                    }
                    Phase::Leading(leading) => {
                        self.lead(leading, shutdown.as_mut(), &mut reports).await
                    }
                    Phase::Stopped(outcome) => {
                        tracing::info!(?outcome, "leader election ended");
                        return Ok(outcome);
                    }
                };
            }
        }
        .instrument(span)
        .await
    }

    fn start_campaign(&self) -> Campaign {
        self.publisher.following(None);
        let now = Instant::now();
        Campaign {
            observed: None,
            next_poll: now,
            not_before: now,
            watch: LeaseWatch::start(
                self.api.clone(),
                &self.settings.name,
                self.settings.timings.retry_period,
            ),
        }
    }

    /// Following: returns once this candidate leads, or on shutdown.
    async fn campaign<S: Future<Output = ()>>(
        &self,
        mut campaign: Campaign,
        mut shutdown: Pin<&mut S>,
        reports: &mut NewLeaderReports,
    ) -> Phase {
        let timings = self.settings.timings;
        loop {
            let try_at = campaign
                .observed
                .as_ref()
                .and_then(|o| o.acquirable_at(&self.settings.identity, timings.lease_duration))
                .map(|at| at.max(campaign.not_before));
            // Due now: try (`try_at` is only ever set when something was observed).
            let due = campaign
                .observed
                .as_ref()
                .filter(|_| try_at.is_some_and(|at| at <= Instant::now()));
            if let Some(observed) = due {
                // A candidate asked to stop never takes the lease, even when a try is due in
                // the same instant.
                if shutdown.as_mut().now_or_never().is_some() {
                    return Phase::Stopped(RunOutcome::ShutdownWhileFollowing);
                }
                match self.try_acquire(observed).await {
                    Attempt::Won(lease, sent) => {
                        return Phase::Leading(self.won(lease, sent));
                    }
                    Attempt::Raced(reading) => {
                        self.observe(&mut campaign, reading.map(|lease| *lease), reports);
                    }
                    Attempt::Failed => {
                        campaign.not_before = later(Instant::now(), jittered(timings.retry_period));
                    }
                }
                continue;
            }
            tokio::select! {
                // Shutdown first; then news of the Lease (a watch reading), which may make the
                // poll or the try moot. A reading comes only when the Lease changes, so it cannot
                // starve the timers.
                biased;
                () = shutdown.as_mut() => return Phase::Stopped(RunOutcome::ShutdownWhileFollowing),
                reading = campaign.watch.next() => self.observe(&mut campaign, reading, reports),
                () = sleep_until(campaign.next_poll) => {
                    let read = tokio::select! {
                        // Shutdown first: no reading is waited for once asked to stop.
                        biased;
                        () = shutdown.as_mut() => {
                            return Phase::Stopped(RunOutcome::ShutdownWhileFollowing);
                        }
                        read = self.read() => read,
                    };
                    match read {
                        Ok(reading) => self.observe(&mut campaign, reading, reports),
                        Err(error) => tracing::warn!(%error, "could not read the lease"),
                    }
                    campaign.next_poll = later(Instant::now(), jittered(timings.retry_period));
                }
                () = sleep_until_some(try_at) => {}
            }
        }
    }

    /// Takes a reading of the Lease into the campaign's knowledge, and publishes the holder.
    fn observe(
        &self,
        campaign: &mut Campaign,
        reading: Option<Lease>,
        reports: &mut NewLeaderReports,
    ) {
        let observed = Observed::update(campaign.observed.take(), reading, Instant::now());
        let holder = observed.holder();
        self.publisher.following(holder);
        reports.observe(holder, &self.callbacks);
        campaign.observed = Some(observed);
    }

    /// One try to become the holder: create the Lease if there is none, else replace it with the
    /// observed resourceVersion as precondition (so it fails if anyone wrote since).
    async fn try_acquire(&self, observed: &Observed) -> Attempt {
        let seconds = record::lease_seconds(self.settings.timings.lease_duration);
        let identity = &self.settings.identity;
        let params = PostParams::default();
        let sent = Instant::now();
        let write = match observed.lease() {
            None => {
                let spec = record::acquired(None, identity, seconds, record::now());
                let mut lease =
                    record::new_lease(&self.settings.namespace, &self.settings.name, spec);
                if !self.settings.labels.is_empty() {
                    lease.metadata.labels = Some(self.settings.labels.clone());
                }
                self.bounded(self.api.create(&params, &lease)).await
            }
            Some(current) => {
                let mut lease = current.clone();
                lease.spec = Some(record::acquired(
                    current.spec.as_ref(),
                    identity,
                    seconds,
                    record::now(),
                ));
                self.bounded(self.api.replace(&self.settings.name, &params, &lease))
                    .await
            }
        };
        match write {
            Ok(lease) => Attempt::Won(Box::new(lease), sent),
            Err(error) if error.is_race() => {
                tracing::debug!(%error, "another candidate wrote the lease first");
                match self.read().await {
                    Ok(reading) => Attempt::Raced(reading.map(Box::new)),
                    Err(error) => {
                        tracing::warn!(%error, "could not read the lease");
                        Attempt::Failed
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not take the lease");
                Attempt::Failed
            }
        }
    }

    /// The Lease now (`None`: there is none), within a follower's request time.
    async fn read(&self) -> Result<Option<Lease>, RequestError> {
        self.bounded(self.api.get_opt(&self.settings.name)).await
    }

    /// `request` within a follower's request time (half the renew deadline).
    async fn bounded<T>(
        &self,
        request: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, RequestError> {
        let limit = later(Instant::now(), self.settings.timings.request_timeout());
        bounded_until(limit, request).await
    }

    /// The write sent at `sent` made this candidate the holder.
    fn won(&self, lease: Box<Lease>, sent: Instant) -> Leading {
        let term = self.terms.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        Leading {
            lease,
            term,
            since: sent,
            renewed_at: sent,
            next_renew: later(sent, self.settings.timings.retry_period),
        }
    }

    /// Leading: renews every retry period; returns when leadership ends.
    async fn lead<S: Future<Output = ()>>(
        &self,
        mut leading: Leading,
        mut shutdown: Pin<&mut S>,
        reports: &mut NewLeaderReports,
    ) -> Phase {
        // The metric first, so that whoever sees the gate open sees the metric at 1. The gate
        // opens now; the term's `lost` future is made after, so it belongs to this term.
        self.set_metric(true);
        self.publisher
            .leading(leading.term, leading.since, leading.renewed_at);
        tracing::info!(term = leading.term, "became the leader");
        reports.observe(Some(&self.settings.identity), &self.callbacks);
        self.callbacks
            .started_leading(self.publisher.leadership().lost());
        loop {
            tokio::select! {
                // Shutdown first: a leader asked to stop releases rather than renews.
                biased;
                () = shutdown.as_mut() => {
                    return Phase::Stopped(self.shut_down_leading(&leading).await);
                }
                () = sleep_until(leading.next_renew) => {}
            }
            if let Err(reason) = self.renew(&mut leading).await {
                return Phase::Stopped(self.step_down(reason));
            }
        }
    }

    /// One renewal: Ok if it succeeded or may still succeed before the deadline (the next try is
    /// at `next_renew`), Err if leadership is over. Never sends at or after the write deadline.
    async fn renew(&self, leading: &mut Leading) -> Result<(), LostReason> {
        let timings = self.settings.timings;
        let seconds = record::lease_seconds(timings.lease_duration);
        let identity = &self.settings.identity;
        // A renewal that finds the Lease changed but still ours (someone edited a label, or an
        // earlier renewal of ours landed after we gave up on it) is sent again with the fresh
        // resourceVersion; the deadline bounds how often.
        loop {
            let deadline = gate_closes(leading.renewed_at, timings.renew_deadline);
            let sent = Instant::now();
            if sent >= deadline {
                // Woken too late (frozen, starved): the lease may be someone else's by now. No
                // write, not even a renewal attempt.
                return Err(LostReason::RenewDeadlinePassed);
            }
            leading.next_renew = later(sent, timings.retry_period);
            let limit = deadline.min(later(sent, timings.request_timeout()));
            let mut lease = (*leading.lease).clone();
            lease.spec = Some(record::renewed(
                lease.spec.as_ref(),
                identity,
                seconds,
                record::now(),
            ));
            let params = PostParams::default();
            let result = if lease.metadata.resource_version.is_some() {
                bounded_until(
                    limit,
                    self.api.replace(&self.settings.name, &params, &lease),
                )
                .await
            } else {
                // The Lease was deleted under us: put it back (it fails if another candidate
                // created it first).
                bounded_until(limit, self.api.create(&params, &lease)).await
            };
            if Instant::now() >= deadline {
                // Answered too late, or not at all, as client-go's renew deadline cancels it.
                return Err(LostReason::RenewDeadlinePassed);
            }
            match result {
                Ok(written) => {
                    *leading.lease = written;
                    leading.renewed_at = sent;
                    self.publisher.renewed(sent);
                    tracing::trace!("renewed the lease");
                    return Ok(());
                }
                Err(error) if error.is_race() => {
                    tracing::debug!(%error, "the lease changed under us; reading it");
                    let limit = deadline.min(later(Instant::now(), timings.request_timeout()));
                    match bounded_until(limit, self.api.get_opt(&self.settings.name)).await {
                        Ok(Some(current))
                            if record::holder(&current) == Some(identity.as_str()) =>
                        {
                            *leading.lease = current;
                        }
                        Ok(Some(current)) => {
                            return Err(LostReason::TakenOver {
                                holder: record::holder(&current).map(str::to_string),
                            });
                        }
                        Ok(None) => {
                            // Recreated by the next pass, without a resourceVersion.
                            leading.lease.metadata.resource_version = None;
                            leading.lease.metadata.uid = None;
                        }
                        Err(error) => {
                            tracing::warn!(%error, "could not read the lease after a conflict");
                            return Ok(());
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "could not renew the lease; retrying until the renew deadline");
                    return Ok(());
                }
            }
        }
    }

    /// Leadership lost: the gate closes, then the callbacks run.
    fn step_down(&self, reason: LostReason) -> RunOutcome {
        self.publisher.stopped();
        self.set_metric(false);
        tracing::warn!(%reason, "stopped leading");
        self.callbacks.stopped_leading();
        RunOutcome::Lost(reason)
    }

    /// Shutdown while leading: close the gate, then (release on cancel) wait for the writes it
    /// admitted and hand the lease back, all before the write deadline.
    async fn shut_down_leading(&self, leading: &Leading) -> RunOutcome {
        self.publisher.stopped();
        self.set_metric(false);
        let released = self.settings.release_on_cancel && self.release(leading).await;
        tracing::info!(released, "stopped leading: shutting down");
        self.callbacks.stopped_leading();
        RunOutcome::ShutdownWhileLeading { released }
    }

    /// Writes the Lease with no holder, so that a follower takes it at once. Only within the
    /// write deadline, and only once the writes admitted by the gate have been answered: a
    /// follower that takes over must not meet one of our writes still on its way.
    async fn release(&self, leading: &Leading) -> bool {
        let timings = self.settings.timings;
        let deadline = gate_closes(leading.renewed_at, timings.renew_deadline);
        if !self.publisher.writes_finished(deadline).await {
            tracing::warn!(
                "writes admitted before the gate closed are still unanswered at the deadline; not releasing (the lease will expire)"
            );
            return false;
        }
        // A write that left and was dropped before its answer (an aborted reconcile) no longer
        // counts as in flight, but the server may still apply it: a follower taking over now
        // could meet it. Let the lease run out instead.
        if self.publisher.abandoned_write_may_land() {
            tracing::warn!(
                "a write admitted by the gate was abandoned in flight; not releasing (the lease will expire)"
            );
            return false;
        }
        let mut lease = (*leading.lease).clone();
        // Two tries: the second with a fresh resourceVersion if the Lease changed but is ours.
        for _ in 0..2 {
            let sent = Instant::now();
            if sent >= deadline || lease.metadata.resource_version.is_none() {
                return false;
            }
            let mut released = lease.clone();
            released.spec = Some(record::released(lease.spec.as_ref(), record::now()));
            let limit = deadline.min(later(sent, timings.request_timeout()));
            let params = PostParams::default();
            match bounded_until(
                limit,
                self.api.replace(&self.settings.name, &params, &released),
            )
            .await
            {
                Ok(_) => return true,
                Err(error) if error.is_race() => {
                    let limit = deadline.min(later(Instant::now(), timings.request_timeout()));
                    match bounded_until(limit, self.api.get_opt(&self.settings.name)).await {
                        Ok(Some(current))
                            if record::holder(&current)
                                == Some(self.settings.identity.as_str()) =>
                        {
                            lease = current;
                        }
                        // Someone else's now, or gone: nothing of ours to release.
                        Ok(_) => return false,
                        Err(error) => {
                            tracing::warn!(%error, "could not release the lease");
                            return false;
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "could not release the lease");
                    return false;
                }
            }
        }
        false
    }

    fn set_metric(&self, leading: bool) {
        if let Some(metrics) = &self.metrics {
            metrics.set(&self.settings.name, leading);
        }
    }
}

/// Marks the elector running for the life of one `run`; on the way out, however `run` ends
/// (returned, or its future dropped), the gate closes and the metric drops to 0.
struct RunGuard<'a>(&'a LeaderElector);

impl<'a> RunGuard<'a> {
    fn claim(elector: &'a LeaderElector) -> Result<RunGuard<'a>, LeaderElectionError> {
        elector
            .running
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .map_err(|_| LeaderElectionError::AlreadyRunning)?;
        Ok(RunGuard(elector))
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        self.0.publisher.stopped();
        self.0.set_metric(false);
        self.0.running.store(false, Ordering::SeqCst);
    }
}

/// `request`, given up at `limit`.
async fn bounded_until<T>(
    limit: Instant,
    request: impl Future<Output = Result<T, Error>>,
) -> Result<T, RequestError> {
    match timeout_at(limit, request).await {
        Ok(result) => result.map_err(RequestError::Api),
        Err(_) => Err(RequestError::TimedOut),
    }
}

/// Sleeps until `at`, or forever if `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `at + wait`; durations are validated to at most a year, so this cannot overflow (were it to,
/// `at` itself: every use of it tolerates "earlier").
fn later(at: Instant, wait: Duration) -> Instant {
    at.checked_add(wait).unwrap_or(at)
}

/// client-go's `wait.Jitter(period, 1.2)`: uniformly in `[period, period × 2.2)`.
fn jittered(period: Duration) -> Duration {
    let extra = ferrokube_core::random::unit_f64() * JITTER_FACTOR;
    period.saturating_add(period.mul_f64(extra))
}

impl LeaderElectorBuilder {
    /// Checks the settings (client-go's rules) and builds the elector.
    pub fn build(self) -> Result<LeaderElector, LeaderElectionError> {
        let checked = self.checked()?;
        // The elector's own requests must never wait for the leadership they keep alive.
        Ok(LeaderElector::new(
            checked.client.without_write_gate(),
            checked.settings,
            checked.metrics,
            checked.callbacks,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_poll_jitter_is_client_go_s() {
        let period = Duration::from_secs(2);
        for _ in 0..1000 {
            let wait = jittered(period);
            assert!(
                wait >= period && wait < Duration::from_millis(4400),
                "{wait:?}"
            );
        }
    }
}
