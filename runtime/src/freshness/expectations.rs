//! Expectations: what a controller has asked for and not yet seen in its cache.
//!
//! A controller reads its children from an informer's cache, and that cache lags the API server: a
//! child it created a moment ago is not in the cache until the watch event arrives. A reconcile
//! that trusted the cache right after creating would count too few children and create them again.
//! The timeline that goes wrong without expectations (a ReplicaSet with `replicas: 3`, no pods yet):
//!
//! ```text
//!  t0  sync #1: cache has 0 pods, want 3   → POST pod a, b, c          (server: 3 pods)
//!  t1  pod a's watch event arrives         → cache 1 pod, RS enqueued
//!  t2  sync #2: cache has 1 pod, want 3    → POST pod d, e   ✗ over-created: server has 5
//!  t3  events for b, c, d, e arrive        → cache 5 pods    → sync #3 deletes 2 (churn)
//! ```
//!
//! With expectations, sync #1 first records "expect 3 adds for this owner"; every child add the
//! informer delivers lowers that by one; and a reconcile whose expectations are not yet met does not
//! create or delete anything (it may still adopt, release and write status). At t2 the expectation
//! is 2, so sync #2 waits; after the last event (t3) it is 0 and the next sync sees the true count.
//!
//! ```text
//!  reconcile: expect_creations(owner, 3) ─POST×3─▶ server ─watch─▶ informer ─▶ creation_observed(owner)
//!             satisfied(owner)? ◀────────── adds ≤ 0 and deletes ≤ 0, or older than the timeout ──┘
//! ```
//!
//! Deletions are tracked by child key as well as by count (upstream's UID-tracking expectations): a
//! delete event lowers the count only for a child this controller asked to delete, so a child
//! someone else deleted at the same moment is not mistaken for ours.
//!
//! The timeout (default 5 minutes, client-go's `ExpectationsTimeout`) is the safety net: a create
//! that failed without our knowing (or an event lost in a way the informer did not repair) must not
//! freeze the owner forever. A failed create we *do* know about is un-expected at once
//! (`creation_observed` for each child not created).
//!
//! Keys are the owner's key (`namespace/name`); forget an owner's record when it is deleted
//! ([`Reconciler::deleted`](crate::controller::Reconciler::deleted) is the place).
//!
//! The timeout is counted on the tokio runtime's clock (`tokio::time::Instant`), the clock the
//! controller's requeues wait on: real time in production, virtual time in a deterministic run on
//! a paused runtime (`ferrokube-explore`). Called from a thread in no runtime, it reads real time.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use parking_lot::Mutex;

/// How long a record of expectations is trusted (client-go's `ExpectationsTimeout`: 5 minutes).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Pending adds and deletes of one owner, with when they were set.
#[derive(Debug, Clone)]
struct Record {
    /// Creates not yet seen. May go below zero (an add seen for a child created elsewhere).
    adds: i64,
    /// Deletes not yet seen.
    deletes: i64,
    /// Child keys whose deletion we asked for and have not seen. Invariant: `deletes` was lowered once
    /// for every key removed from here.
    deleting: HashSet<String>,
    set_at: Instant,
}

impl Record {
    fn fulfilled(&self) -> bool {
        self.adds <= 0 && self.deletes <= 0
    }
}

/// Expectations of every owner, keyed by `namespace/name`. See the [module docs](self).
#[derive(Debug)]
pub struct Expectations {
    records: Mutex<HashMap<String, Record>>,
    timeout: Duration,
}

impl Default for Expectations {
    fn default() -> Self {
        Expectations::new(EXPECTATIONS_TIMEOUT)
    }
}

impl Expectations {
    /// Expectations that are trusted for `timeout` (default [`EXPECTATIONS_TIMEOUT`], 5 min).
    pub fn new(timeout: Duration) -> Expectations {
        Expectations {
            records: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    /// Whether a sync of `key` may create or delete: nothing pending, no record at all (a new or
    /// deleted owner), or a record older than the timeout.
    pub fn satisfied(&self, key: &str) -> bool {
        match self.records.lock().get(key) {
            None => true,
            Some(record) if record.fulfilled() => true,
            Some(record) if record.set_at.elapsed() > self.timeout => {
                tracing::info!(
                    key,
                    adds = record.adds,
                    deletes = record.deletes,
                    "expectations expired; syncing anyway"
                );
                true
            }
            Some(_) => false,
        }
    }

    /// Records that `adds` children are about to be created (replacing any earlier record).
    pub fn expect_creations(&self, key: &str, adds: usize) {
        self.set(key, adds as i64, HashSet::new());
    }

    /// Records that the children `child_keys` are about to be deleted (replacing any earlier record).
    pub fn expect_deletions(&self, key: &str, child_keys: impl IntoIterator<Item = String>) {
        let deleting: HashSet<String> = child_keys.into_iter().collect();
        self.set(key, 0, deleting);
    }

    fn set(&self, key: &str, adds: i64, deleting: HashSet<String>) {
        let record = Record {
            adds,
            deletes: deleting.len() as i64,
            deleting,
            set_at: Instant::now(),
        };
        self.records.lock().insert(key.to_string(), record);
    }

    /// A child created by `key`'s owner was seen (or a create was given up).
    pub fn creation_observed(&self, key: &str) {
        if let Some(record) = self.records.lock().get_mut(key) {
            record.adds -= 1;
        }
    }

    /// Child `child_key` was seen deleted (or its delete failed); counts only if we asked for it.
    pub fn deletion_observed(&self, key: &str, child_key: &str) {
        if let Some(record) = self.records.lock().get_mut(key) {
            if record.deleting.remove(child_key) {
                record.deletes -= 1;
            }
        }
    }

    /// Forgets `key` (its owner is gone).
    pub fn forget(&self, key: &str) {
        self.records.lock().remove(key);
    }

    /// `(adds, deletes)` still pending for `key`, if it has a record.
    pub fn pending(&self, key: &str) -> Option<(i64, i64)> {
        self.records
            .lock()
            .get(key)
            .map(|record| (record.adds, record.deletes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_expectations_creations_block_until_observed() {
        let expectations = Expectations::default();
        assert!(expectations.satisfied("ns/rs"), "no record: free to act");
        expectations.expect_creations("ns/rs", 2);
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(expectations.satisfied("ns/rs"));
        assert_eq!(expectations.pending("ns/rs"), Some((0, 0)));
    }

    #[test]
    fn controller_expectations_deletions_count_only_the_children_we_deleted() {
        let expectations = Expectations::default();
        expectations.expect_deletions("ns/rs", ["ns/a".to_string(), "ns/b".to_string()]);
        expectations.deletion_observed("ns/rs", "ns/other");
        expectations.deletion_observed("ns/rs", "ns/a");
        expectations.deletion_observed("ns/rs", "ns/a");
        assert_eq!(expectations.pending("ns/rs"), Some((0, 1)));
        assert!(!expectations.satisfied("ns/rs"));
        expectations.deletion_observed("ns/rs", "ns/b");
        assert!(expectations.satisfied("ns/rs"));
    }

    #[test]
    fn controller_expectations_an_old_record_expires_and_a_forgotten_one_is_gone() {
        let expectations = Expectations::new(Duration::from_millis(20));
        expectations.expect_creations("ns/rs", 5);
        assert!(!expectations.satisfied("ns/rs"));
        std::thread::sleep(Duration::from_millis(40));
        assert!(expectations.satisfied("ns/rs"), "expired");
        expectations.expect_creations("ns/rs", 1);
        expectations.forget("ns/rs");
        assert_eq!(expectations.pending("ns/rs"), None);
        assert!(expectations.satisfied("ns/rs"));
    }
}
