//! Expectations: what a controller has asked for and not yet seen in its cache.
//!
//! The controller reads pods from an informer's cache, and that cache lags the API server: a pod it
//! created a moment ago is not in the cache until the watch event arrives. A sync that trusted the
//! cache right after creating would count too few pods and create them again. The timeline that goes
//! wrong without expectations (`replicas: 3`, no pods yet):
//!
//! ```text
//!  t0  sync #1: cache has 0 pods, want 3   → POST pod a, b, c          (server: 3 pods)
//!  t1  pod a's watch event arrives         → cache 1 pod, RS enqueued
//!  t2  sync #2: cache has 1 pod, want 3    → POST pod d, e   ✗ over-created: server has 5
//!  t3  events for b, c, d, e arrive        → cache 5 pods    → sync #3 deletes 2 (churn)
//! ```
//!
//! With expectations, sync #1 first records "expect 3 adds for this ReplicaSet"; every pod add the
//! informer delivers lowers that by one; and a sync whose expectations are not yet met does not create
//! or delete anything (it still adopts, releases and writes status). At t2 the expectation is 2, so sync
//! #2 waits; after the last event (t3) it is 0 and the next sync sees the true count, 3.
//!
//! ```text
//!  sync: expect_creations(rs, 3) ─POST×3─▶ server ─watch─▶ informer ─on_add─▶ creation_observed(rs)
//!        satisfied(rs)? ◀──────────────── add ≤ 0 and del ≤ 0, or older than 5 min ────────────────┘
//! ```
//!
//! Deletions are tracked by pod key as well as by count (client-go's UID-tracking expectations): a
//! delete event lowers the count only for a pod this controller asked to delete, so a pod someone else
//! deleted at the same moment is not mistaken for ours.
//!
//! The 5-minute expiry is the safety net: a create that failed without our knowing (or an event lost in
//! some way the informer did not repair) must not freeze the ReplicaSet forever. A failed create we *do*
//! know about is un-expected at once (`creation_observed` for each pod not created).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long a record of expectations is trusted (client-go's `ExpectationsTimeout`: 5 minutes).
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Pending adds and deletes of one controller (one ReplicaSet), with when they were set.
#[derive(Debug, Clone)]
struct Record {
    /// Creates not yet seen. May go below zero (an add seen for a pod created elsewhere).
    adds: i64,
    /// Deletes not yet seen.
    deletes: i64,
    /// Pod keys whose deletion we asked for and have not seen. Invariant: `deletes` was lowered once
    /// for every key removed from here.
    deleting: HashSet<String>,
    set_at: Instant,
}

impl Record {
    fn fulfilled(&self) -> bool {
        self.adds <= 0 && self.deletes <= 0
    }
}

/// Expectations of every ReplicaSet, keyed by `namespace/name`. See the [module docs](self).
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
    pub fn new(timeout: Duration) -> Expectations {
        Expectations {
            records: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    /// Whether a sync of `key` may create or delete: nothing pending, no record at all (a new or
    /// deleted controller), or a record older than the timeout.
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

    /// Records that `adds` pods are about to be created (replacing any earlier record).
    pub fn expect_creations(&self, key: &str, adds: usize) {
        self.set(key, adds as i64, HashSet::new());
    }

    /// Records that the pods `pod_keys` are about to be deleted (replacing any earlier record).
    pub fn expect_deletions(&self, key: &str, pod_keys: impl IntoIterator<Item = String>) {
        let deleting: HashSet<String> = pod_keys.into_iter().collect();
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

    /// A pod created by `key`'s controller was seen (or a create was given up).
    pub fn creation_observed(&self, key: &str) {
        if let Some(record) = self.records.lock().get_mut(key) {
            record.adds -= 1;
        }
    }

    /// Pod `pod_key` was seen deleted (or its delete failed); counts only if we asked for it.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        if let Some(record) = self.records.lock().get_mut(key) {
            if record.deleting.remove(pod_key) {
                record.deletes -= 1;
            }
        }
    }

    /// Forgets `key` (its ReplicaSet is gone).
    pub fn forget(&self, key: &str) {
        self.records.lock().remove(key);
    }

    /// `(adds, deletes)` still pending for `key`, if it has a record.
    #[cfg(test)]
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
    fn creations_block_until_observed() {
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
    fn deletions_count_only_the_pods_we_deleted() {
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
    fn an_old_record_expires_and_a_forgotten_one_is_gone() {
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
