//! Staleness that lasts: a lagging API server replica and a partitioned watch, each kept up
//! until a number of the scenario's steps have passed.
//!
//! The faults of [`crate::fault`] that act at one moment (a delayed event, a coalesced one, a
//! restart from a lagging replica that catches up [`crate::fault::LAG_CATCH_UP`] later) leave
//! the controller's view stale for seconds; an informer's idle resume or relist then shows the
//! present again, usually before the next step. In production a replica that lags, or a watch
//! cut off by a partition, stays stale for minutes, across resumes and relists, and a bug that
//! needs the view to be stale *while the next step acts* (a controller that joins two kinds but
//! watches only one) shows only then. These faults last in units of steps:
//!
//! ```text
//!   fault at point P (during step k, or before step 0)      ends when step k+S has settled
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
//! last step has settled every lasting fault ends, so that the finish window sees the
//! controller converge.

use std::future::Future;
use std::pin::Pin;

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

/// One lasting fault and when it ends.
#[derive(Debug, Clone)]
struct Lasting {
    stale: Stale,
    /// It ends when this many steps have settled.
    until: usize,
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

    /// The count at which a fault starting now, lasting `steps` more steps, ends: when the step
    /// under way (or the first, before any) and `steps` more have settled.
    fn end_after(&self, steps: u32) -> usize {
        let settled = *self.settled.borrow();
        settled
            .saturating_add(1)
            .saturating_add(usize::try_from(steps).unwrap_or(usize::MAX))
    }

    fn active(&self) -> Vec<Lasting> {
        let settled = *self.settled.borrow();
        self.lasting
            .lock()
            .iter()
            .filter(|lasting| settled < lasting.until)
            .cloned()
            .collect()
    }

    /// From now until `steps` more steps have settled, the controller's replica is stuck at
    /// `revision`.
    pub(crate) fn lag_replica(&self, revision: u64, steps: u32) {
        let until = self.end_after(steps);
        self.lasting.lock().push(Lasting {
            stale: Stale::Replica { revision },
            until,
        });
    }

    /// From now until `steps` more steps have settled, the controller's watches of `collection`
    /// hold every line from revision `from` on.
    pub(crate) fn partition(&self, collection: &str, from: u64, steps: u32) {
        let until = self.end_after(steps);
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
        let until = self
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
            .max()?;
        let mut settled = self.settled.subscribe();
        Some(Box::pin(async move {
            // An error means the run is over (the sender went with it): nothing to hold for.
            let _ = settled.wait_for(|settled| *settled >= until).await;
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
        stale.partition("/api/v1/pods", 10, 1);
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

        stale.lag_replica(20, 0);
        assert_eq!(stale.replica_revision(), Some(20));
        assert!(stale.holds("/api/v1/configmaps", 21).is_some());
        assert!(stale.holds("/api/v1/configmaps", 20).is_none());
        stale.steps_over();
        assert_eq!(stale.replica_revision(), None);
        assert!(stale.holds("/api/v1/configmaps", 21).is_none());
    }
}
