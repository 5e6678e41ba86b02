//! An object store outside Kubernetes, simulated in-process: the outside system the Bucket
//! controller manages. What makes it "outside" for a controller:
//!
//! - Kubernetes cannot watch it: a change made at the store (someone at its console,
//!   [`ObjectStore::tamper`]) is found only by looking again, so the controller polls;
//! - deleting a Bucket object does nothing here by itself: only the controller's cleanup, which
//!   its finalizer guarantees runs first, removes the stored bucket;
//! - every stored bucket remembers the uid of the object that owns it (as a real store keeps a
//!   tag), so cleanup removes only what is its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// One bucket as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBucket {
    pub region: String,
    pub retention_days: i32,
    pub versioned: bool,
    /// The uid of the Bucket object that owns it.
    pub owner_uid: String,
}

/// See the [module docs](self). Cheap to clone; clones share one store.
#[derive(Clone, Default)]
pub struct ObjectStore {
    /// By the bucket's store-wide name, `<namespace>.<name>`.
    buckets: Arc<Mutex<BTreeMap<String, StoredBucket>>>,
    /// Calls of [`get`](Self::get), and writes through [`put`](Self::put) and
    /// [`delete`](Self::delete).
    counts: Arc<Mutex<Counts>>,
}

/// How often the store was looked at and written to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub lookups: u64,
    pub writes: u64,
}

impl ObjectStore {
    /// The bucket `name`, counted as a lookup.
    pub fn get(&self, name: &str) -> Option<StoredBucket> {
        self.counts.lock().lookups += 1;
        self.buckets.lock().get(name).cloned()
    }

    /// Every stored bucket's name.
    pub fn names(&self) -> Vec<String> {
        self.buckets.lock().keys().cloned().collect()
    }

    /// Creates or replaces the bucket `name`.
    pub fn put(&self, name: &str, bucket: StoredBucket) {
        self.buckets.lock().insert(name.to_string(), bucket);
        self.counts.lock().writes += 1;
    }

    /// Deletes the bucket `name` if `owner_uid` owns it; true if it was there and went. Deleting
    /// a bucket that is not there is not an error (a cleanup may run twice).
    pub fn delete(&self, name: &str, owner_uid: &str) -> bool {
        let mut buckets = self.buckets.lock();
        if buckets.get(name).is_none_or(|b| b.owner_uid != owner_uid) {
            return false;
        }
        buckets.remove(name);
        self.counts.lock().writes += 1;
        true
    }

    /// Someone changes the bucket `name` at the store, behind the controller's back (no event
    /// anywhere); true if it exists.
    pub fn tamper(&self, name: &str, change: impl FnOnce(&mut StoredBucket)) -> bool {
        self.buckets.lock().get_mut(name).map(change).is_some()
    }

    /// How often the store was looked at and written to: a controller that polls an unchanged
    /// world should look and never write.
    pub fn counts(&self) -> Counts {
        *self.counts.lock()
    }
}
