//! The workers: take a key, hand its deletions and its object to the reconciler, requeue as asked.
//!
//! One worker's loop, run on `workers` tokio tasks:
//!
//! ```text
//!  queue.get() ─▶ key ─▶ deletions recorded under key? ─▶ forget the key's writes; reconciler.deleted(last) for each
//!                    ├─▶ a cache older than the key's own last write? ─▶ skip: add_after(stale_requeue)
//!                    └─▶ object in the cache under key? ─▶ reconciler.reconcile(object)
//!                                                             │
//!          Ok(await_change)  forget backoff ◀─────────────────┤
//!          Ok(requeue(d))    forget, add_after(d) ◀───────────┤
//!          Ok(rate limited)  add_rate_limited ◀───────────────┤
//!          Err / panic       error_policy → one of the above ◀┘
//!  queue.done(key)   (always: a key added meanwhile comes back; never two workers on one key)
//! ```
//!
//! The freshness check is the [consistency store](crate::freshness::consistency)'s: a skipped key is not a
//! reconcile (no result is counted, its backoff is untouched), only `stale_sync_skips_total`.
//!
//! Then the worker asks the controller's [`Ownership`] about the object, just before the
//! reconcile ([`Claim`]): not this replica's (a cache behind a move) is skipped and forgotten;
//! one another replica asked for is handed over instead of reconciled (on this worker, so after
//! any reconcile of it in flight); one that is not yet ready (its children have not arrived)
//! waits, like a stale key. A controller that is not sharded owns everything ([`AllMine`]).
//!
//! [`AllMine`]: super::ownership::AllMine
//!
//! Each reconcile runs in a `tracing` span `reconcile{controller, key}`, is timed and counted in the
//! controller's [metrics](super::metrics), and is guarded against panics: a panic is logged,
//! counted as an error, and the key retried with backoff; the worker carries on.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use ferrokube_core::ObjectKey;
use ferrokube_informer::Lister;
use ferrokube_workqueue::WorkQueue;
use futures_util::FutureExt;
use tokio::sync::watch;
use tracing::Instrument;

use super::action::{Action, Next};
use super::context::{Context, Shared as ContextShared};
use super::metrics::{ControllerMetrics, Outcome};
use super::ownership::{Claim, Ownership};
use super::reconciler::Reconciler;
use super::source::Tombstones;
use crate::freshness::consistency::ConsistencyStore;
use crate::freshness::record::Stale;
use ferrokube_core::Kind;
use ferrokube_core::pipeline_event;

/// What every worker of one controller shares.
pub(crate) struct Workers<K, R> {
    pub(crate) name: String,
    pub(crate) queue: WorkQueue<ObjectKey>,
    pub(crate) cache: Lister<K>,
    pub(crate) tombstones: Arc<Tombstones<K>>,
    pub(crate) reconciler: R,
    pub(crate) metrics: Option<ControllerMetrics>,
    pub(crate) consistency: ConsistencyStore,
    /// What every reconcile's [`Context`] shares: the client it writes with (observed, per key,
    /// by `consistency`), the factory, the queue.
    pub(crate) context: Arc<ContextShared>,
    pub(crate) stale_requeue: Duration,
    /// Which primaries this replica reconciles: asked before each reconcile.
    pub(crate) ownership: Arc<dyn Ownership<K>>,
}

/// What a worker did with a key.
enum Ran {
    Reconciled(Action),
    /// A cache was older than the key's own last write: nothing ran.
    Skipped(Stale),
    /// The ownership did not let the object be reconciled (never [`Claim::Mine`]); nothing ran.
    Declined(Claim),
}

/// The deletions of one key that a worker took out of the tombstones and has not yet handed to
/// `Reconciler::deleted`. Invariant: whatever is still in `pending` when this is dropped (the
/// hook failed, panicked, or the reconcile was cancelled) goes back, ahead of deletions recorded
/// since, so a deletion leaves the tombstones only once its hook has returned `Ok`.
struct Unfinished<'a, K> {
    tombstones: &'a Tombstones<K>,
    key: &'a ObjectKey,
    pending: Vec<Arc<K>>,
}

impl<K> Drop for Unfinished<'_, K> {
    fn drop(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.tombstones.put_back(self.key.clone(), pending);
    }
}

impl<K: Kind, R: Reconciler<K>> Workers<K, R> {
    /// One worker: keys until the queue is empty and shut down, or `stop` turns true (then the
    /// reconcile in flight finishes and no new key is taken).
    /// `worker` numbers it among the controller's workers (from 0), for the pipeline's events.
    pub(crate) async fn work(self: Arc<Self>, worker: usize, mut stop: watch::Receiver<bool>) {
        // This worker's own copy of what contexts share: each reconcile's context takes a
        // reference to it, and a count no other worker touches stays in this core's cache.
        let shared = Arc::new(ContextShared::clone(&self.context));
        loop {
            let key = tokio::select! {
                // Stop first: a busy queue cannot keep a stopping worker taking keys.
                biased;
                _ = stop.wait_for(|stopping| *stopping) => return,
                key = self.queue.get() => key,
            };
            let Some(key) = key else { return };
            self.process(key, worker, &shared).await;
            // A busy queue hands out keys without ever being Pending, and a reconcile that does
            // no I/O never is either: without this, workers would keep the runtime's threads to
            // themselves and starve the informers (and everything else) while keys keep coming.
            // It counts against tokio's cooperative budget and yields only once that is spent.
            tokio::task::consume_budget().await;
        }
    }

    async fn process(&self, key: ObjectKey, worker: usize, shared: &Arc<ContextShared>) {
        let mut in_flight = InFlight {
            queue: &self.queue,
            key: &key,
            finished: false,
        };
        if let Some(metrics) = &self.metrics {
            metrics.active.inc();
        }
        // The runtime's clock: a reconcile's duration (metrics, pipeline events) is virtual time
        // in a deterministic run, like every other time it reads.
        let started = tokio::time::Instant::now();
        let span = tracing::info_span!("reconcile", controller = %self.name, key = %key);
        pipeline_event!(stage = "reconcile", op = "start", instance = %self.name, key = %key, state = "running", worker = worker as u64);
        let result = AssertUnwindSafe(self.run_reconciler(&key, shared))
            .catch_unwind()
            .instrument(span)
            .await;
        let reconciled = match result {
            Ok(Ok(Ran::Declined(claim))) => {
                self.declined(&key, worker, started, claim);
                None
            }
            Ok(Ok(Ran::Skipped(stale))) => {
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = "skipped", worker = worker as u64, result = %stale, duration_ms = started.elapsed().as_millis() as u64);
                self.skipped(&key, &stale);
                None
            }
            Ok(Ok(Ran::Reconciled(action))) => {
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = end_state(&action), worker = worker as u64, result = ?action, duration_ms = started.elapsed().as_millis() as u64);
                Some((self.apply(&key, action, true), false))
            }
            Ok(Err(error)) => {
                let retries = self.queue.num_requeues(&key);
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = "error", worker = worker as u64, result = %error, duration_ms = started.elapsed().as_millis() as u64, retries = retries as u64);
                tracing::warn!(controller = %self.name, %key, %error, retries, "reconcile failed");
                let action = self.reconciler.error_policy(&key, &error, retries);
                self.apply(&key, action, false);
                Some((Outcome::Error, false))
            }
            Err(_) => {
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = "error", worker = worker as u64, result = "panicked", duration_ms = started.elapsed().as_millis() as u64);
                tracing::error!(controller = %self.name, %key, "reconcile panicked; retrying with backoff");
                self.queue.add_rate_limited(key.clone());
                Some((Outcome::Error, true))
            }
        };
        if let Some(metrics) = &self.metrics {
            metrics.active.dec();
            if let Some((outcome, panicked)) = reconciled {
                metrics.reconciled(outcome, started.elapsed(), panicked);
            }
        }
        in_flight.finished = true;
    }

    /// The deletions recorded under `key`, then (if the caches show the key's own writes) the
    /// object under it, if any.
    async fn run_reconciler(
        &self,
        key: &ObjectKey,
        shared: &Arc<ContextShared>,
    ) -> Result<Ran, R::Error> {
        let mut gone = Unfinished {
            tombstones: &self.tombstones,
            key,
            pending: self.tombstones.take(key),
        };
        if !gone.pending.is_empty() {
            // The object is gone: its writes need not be waited for (writes the deletion hooks
            // make are recorded afresh).
            self.consistency.forget(key);
        }
        while let Some(deleted) = gone.pending.first().cloned() {
            // On an error, a panic (caught in `work`) or a cancelled reconcile, `gone` puts
            // this deletion and the ones after it back when it is dropped: the retry of the key
            // calls the hook again, and no deletion is lost.
            self.reconciler
                .deleted(deleted, Context::new(key.clone(), shared.clone()))
                .await?;
            gone.pending.remove(0);
        }
        drop(gone);
        if let Err(stale) = self.consistency.ensure_fresh(key) {
            return Ok(Ran::Skipped(stale));
        }
        let action = match self.cache.get(key.namespace(), key.name()) {
            Some(object) => {
                match self.ownership.claim(key, object.as_ref()).await {
                    Claim::Mine => {}
                    declined => return Ok(Ran::Declined(declined)),
                }
                self.reconciler
                    .reconcile(object, Context::new(key.clone(), shared.clone()))
                    .await?
            }
            None => {
                self.ownership.forget(key);
                Action::await_change()
            }
        };
        Ok(Ran::Reconciled(action))
    }

    /// A key the ownership declined: forgotten, back shortly, or retried with backoff, as the
    /// claim says.
    fn declined(
        &self,
        key: &ObjectKey,
        worker: usize,
        started: tokio::time::Instant,
        claim: Claim,
    ) {
        let duration_ms = started.elapsed().as_millis() as u64;
        match claim {
            Claim::Mine | Claim::HandedOver => {
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = "ok", worker = worker as u64, result = "handed over", duration_ms = duration_ms);
                self.queue.forget(key);
            }
            Claim::NotMine(why) => {
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = "skipped", worker = worker as u64, result = why, duration_ms = duration_ms);
                self.queue.forget(key);
            }
            Claim::NotYet(why) => {
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = "skipped", worker = worker as u64, result = %why, duration_ms = duration_ms);
                tracing::debug!(controller = %self.name, %key, %why, "not this replica's yet; waiting");
                self.queue.add_after(key.clone(), self.stale_requeue);
            }
            Claim::HandOverFailed(error) => {
                pipeline_event!(stage = "reconcile", op = "end", instance = %self.name, key = %key, state = "error", worker = worker as u64, result = %error, duration_ms = duration_ms);
                tracing::warn!(controller = %self.name, %key, %error, "handover failed; retrying");
                self.queue.add_rate_limited(key.clone());
            }
        }
    }

    /// A key whose caches were stale: counted, and back after `stale_requeue` (or an event).
    fn skipped(&self, key: &ObjectKey, stale: &Stale) {
        tracing::debug!(controller = %self.name, %key, %stale, "cache older than this controller's own write; reconcile skipped");
        self.consistency.count_skip();
        if let Some(metrics) = &self.metrics {
            metrics.stale_skip();
        }
        self.queue.add_after(key.clone(), self.stale_requeue);
    }

    /// Requeues `key` as `action` says; `succeeded` resets its backoff unless the action asks for
    /// the rate limiter.
    fn apply(&self, key: &ObjectKey, action: Action, succeeded: bool) -> Outcome {
        match action.next() {
            Next::AwaitChange => {
                self.queue.forget(key);
                if succeeded {
                    Outcome::Success
                } else {
                    Outcome::Error
                }
            }
            Next::After(delay) => {
                if succeeded {
                    self.queue.forget(key);
                }
                self.queue.add_after(key.clone(), delay);
                Outcome::RequeueAfter
            }
            Next::RateLimited => {
                self.queue.add_rate_limited(key.clone());
                Outcome::Requeue
            }
        }
    }
}

/// How the pipeline's events name what a reconcile asked for.
fn end_state(action: &Action) -> &'static str {
    match action.next() {
        Next::AwaitChange => "ok",
        Next::After(_) | Next::RateLimited => "requeue",
    }
}

/// Calls `done` for a key however its processing ends; if it did not finish (its task was
/// aborted at the shutdown deadline), the key is first re-added so that it is not lost while the
/// queue still runs.
struct InFlight<'a> {
    queue: &'a WorkQueue<ObjectKey>,
    key: &'a ObjectKey,
    finished: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.queue.add_rate_limited(self.key.clone());
        }
        self.queue.done(self.key);
    }
}
