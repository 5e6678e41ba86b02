//! Staleness that lasts: a lagging API server replica and a partitioned watch, each kept up
//! until a number of the scenario's steps have passed, or for a number of (virtual) seconds.
//!
//! The faults of [`crate::fault`] that act at one moment (a delayed event, a coalesced one, a
//! restart from a lagging replica that catches up [`crate::fault::LAG_CATCH_UP`] later) leave
//! the controller's view stale for seconds; an informer's idle resume or relist then shows the
//! present again, usually before the next step. In production a replica that lags, or a watch
//! cut off by a partition, stays stale for minutes, across resumes and relists, and a bug that
//! needs the view to be stale *while the next step acts* (a controller that joins two kinds but
//! watches only one) shows only then. These faults last in units of steps (`S`), or of seconds
//! of virtual time (`Ts`: `lagging-replica(N,30s)`, `partition(30s)`) for a plan that wants the
//! staleness to outlive an informer's resync or relist rather than a step:
//!
//! ```text
//!   fault at point P (during step k, or before step 0)      ends when step k+S has settled
//!                                                           (or T seconds after P)
//!   ──────────────┬──────────────────────────────────────────────┬───────────────────────────
//!                 │ lagging-replica(N,S): every watch of the      │ everything held comes
//!                 │ controller holds lines past revision R        │ through, in order
//!                 │ (N behind at P); lists that allow a cache     │
//!                 │ (resourceVersion=0, NotOlderThan <= R) are    │
//!                 │ answered at R                                 │
//!                 │ partition(S): the watch that carried event P, │
//!                 │ and every later watch of the same collection  │
//!                 │ (resumes, relists), hold lines from P's       │
//!                 │ revision on                                   │
//! ```
//!
//! Consistent lists and GETs read the present, as kube-apiserver's do (it never answers them from
//! a cache behind etcd). The runner counts settled steps (`Staleness::step_settled`); once the
//! last step has settled every lasting fault ends, a timed one too, so that the finish window
//! sees the controller converge.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

/// A future that completes when a lasting fault no longer holds a line.
pub(crate) type Release = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What one lasting fault does while it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stale {
    /// The controller talks to a replica stuck at `revision`.
    Replica { revision: u64 },
    /// The controller's watches of `collection` (a path without its query) deliver nothing
    /// from `from` (a revision) on.
    Partition { collection: String, from: u64 },
}

/// How long a lasting fault lasts, as a plan gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    /// Until the step under way and this many more have settled.
    Steps(u32),
    /// For this long (virtual time), or until the last step has settled if that comes first.
    For(Duration),
}

/// When a started lasting fault ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// When this many steps have settled.
    Settled(usize),
    /// At this virtual instant (or when the last step has settled, if earlier).
    At(tokio::time::Instant),
}

/// One lasting fault and when it ends.
#[derive(Debug, Clone)]
struct Lasting {
    stale: Stale,
    until: End,
}

/// The lasting faults of one run, and the count of steps settled that ends them.
pub(crate) struct Staleness {
    /// How many of the scenario's steps have settled; `usize::MAX` once the last one has.
    settled: watch::Sender<usize>,
    /// Every lasting fault started so far (ended ones included; they are few).
    lasting: Mutex<Vec<Lasting>>,
}

impl Default for Staleness {
    fn default() -> Staleness {
        Staleness {
            settled: watch::Sender::new(0),
            lasting: Mutex::new(Vec::new()),
        }
    }
}

impl Staleness {
    /// A step's settle has ended.
    pub(crate) fn step_settled(&self) {
        self.settled
            .send_modify(|settled| *settled = settled.saturating_add(1));
    }

    /// The last step has settled: every lasting fault ends.
    pub(crate) fn steps_over(&self) {
        self.settled.send_replace(usize::MAX);
    }

    /// When a fault starting now, lasting `window`, ends: when the step under way (or the first,
    /// before any) and `steps` more have settled; or `for` from now.
    fn end_after(&self, window: Window) -> End {
        match window {
            Window::Steps(steps) => {
                let settled = *self.settled.borrow();
                End::Settled(
                    settled
                        .saturating_add(1)
                        .saturating_add(usize::try_from(steps).unwrap_or(usize::MAX)),
                )
            }
            Window::For(time) => End::At(tokio::time::Instant::now() + time),
        }
    }

    /// Whether a fault ending at `end` still lasts, with `settled` steps settled.
    fn lasts(end: End, settled: usize) -> bool {
        match end {
            End::Settled(until) => settled < until,
            End::At(at) => settled != usize::MAX && tokio::time::Instant::now() < at,
        }
    }

    fn active(&self) -> Vec<Lasting> {
        let settled = *self.settled.borrow();
        self.lasting
            .lock()
            .iter()
            .filter(|lasting| Self::lasts(lasting.until, settled))
            .cloned()
            .collect()
    }

    /// From now until `window` has passed, the controller's replica is stuck at `revision`.
    pub(crate) fn lag_replica(&self, revision: u64, window: Window) {
        let until = self.end_after(window);
        self.lasting.lock().push(Lasting {
            stale: Stale::Replica { revision },
            until,
        });
    }

    /// From now until `window` has passed, the controller's watches of `collection` hold every
    /// line from revision `from` on.
    pub(crate) fn partition(&self, collection: &str, from: u64, window: Window) {
        let until = self.end_after(window);
        self.lasting.lock().push(Lasting {
            stale: Stale::Partition {
                collection: collection.to_string(),
                from,
            },
            until,
        });
    }

    /// The revision of the lagging replica, while one lags (the oldest, if several do).
    pub(crate) fn replica_revision(&self) -> Option<u64> {
        self.active()
            .iter()
            .filter_map(|lasting| match lasting.stale {
                Stale::Replica { revision } => Some(revision),
                Stale::Partition { .. } => None,
            })
            .min()
    }

    /// Whether a line at `revision` of a controller's watch of `collection` is held now: the
    /// future that completes when the fault holding it ends.
    pub(crate) fn holds(&self, collection: &str, revision: u64) -> Option<Release> {
        let ends: Vec<End> = self
            .active()
            .iter()
            .filter(|lasting| match &lasting.stale {
                Stale::Replica { revision: at } => revision > *at,
                Stale::Partition {
                    collection: held,
                    from,
                } => held == collection && revision >= *from,
            })
            .map(|lasting| lasting.until)
            .collect();
        if ends.is_empty() {
            return None;
        }
        let mut settled = self.settled.subscribe();
        Some(Box::pin(async move {
            // The line goes when every fault holding it has ended. An error from `wait_for`
            // means the run is over (the sender went with it): nothing to hold for.
            for end in ends {
                match end {
                    End::Settled(until) => {
                        let _ = settled.wait_for(|settled| *settled >= until).await;
                    }
                    End::At(at) => {
                        tokio::select! {
                            biased;
                            _ = settled.wait_for(|settled| *settled == usize::MAX) => {}
                            () = tokio::time::sleep_until(at) => {}
                        }
                    }
                }
            }
        }))
    }
}

/// The collection a path names: the path without its query (`/api/v1/namespaces/x/pods`).
pub(crate) fn collection_of(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explore_a_lasting_fault_ends_with_the_steps_it_outlasts() {
        let stale = Staleness::default();
        stale.partition("/api/v1/pods", 10, Window::Steps(1));
        assert!(stale.holds("/api/v1/pods", 10).is_some());
        assert!(stale.holds("/api/v1/pods", 9).is_none());
        assert!(stale.holds("/api/v1/configmaps", 10).is_none());
        stale.step_settled();
        assert!(
            stale.holds("/api/v1/pods", 12).is_some(),
            "outlasts one step"
        );
        stale.step_settled();
        assert!(stale.holds("/api/v1/pods", 12).is_none());

        stale.lag_replica(20, Window::Steps(0));
        assert_eq!(stale.replica_revision(), Some(20));
        assert!(stale.holds("/api/v1/configmaps", 21).is_some());
        assert!(stale.holds("/api/v1/configmaps", 20).is_none());
        stale.steps_over();
        assert_eq!(stale.replica_revision(), None);
        assert!(stale.holds("/api/v1/configmaps", 21).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn explore_a_timed_lasting_fault_ends_after_its_seconds_or_with_the_steps() {
        let stale = Staleness::default();
        stale.lag_replica(20, Window::For(Duration::from_secs(30)));
        stale.step_settled();
        stale.step_settled();
        assert_eq!(stale.replica_revision(), Some(20), "steps do not end it");
        let Some(release) = stale.holds("/api/v1/pods", 21) else {
            panic!("a line past the replica is held");
        };
        let began = tokio::time::Instant::now();
        release.await;
        assert_eq!(began.elapsed(), Duration::from_secs(30));
        assert_eq!(stale.replica_revision(), None);

        stale.partition("/api/v1/pods", 5, Window::For(Duration::from_secs(60)));
        let Some(release) = stale.holds("/api/v1/pods", 5) else {
            panic!("the partition holds its collection");
        };
        stale.steps_over();
        release.await;
        assert_eq!(
            began.elapsed(),
            Duration::from_secs(30),
            "the last step ends it"
        );
        assert!(stale.holds("/api/v1/pods", 5).is_none());
    }
}
