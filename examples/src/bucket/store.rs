//! An object store outside Kubernetes, simulated in-process: the outside system the Bucket
//! controller manages. What makes it "outside" for a controller:
//!
//! - Kubernetes cannot watch it: a change made at the store (someone at its console,
//!   [`ObjectStore::tamper`]) is found only by looking again, so the controller polls;
//! - deleting a Bucket object does nothing here by itself: only the controller's cleanup, which
//!   its finalizer guarantees runs first, removes the stored bucket;
//! - every stored bucket remembers the uid of the object that owns it (as a real store keeps a
//!   tag), so cleanup removes only what is its own.
//!
//! The controller reaches the store only through the trait [`BucketStore`]: three async calls
//! that may fail, as a real store's API does. [`ObjectStore`] implements it in memory for the
//! binary and `tests/bucket.rs`; the fault explorer's tests (`tests/explore_mutants_bucket.rs`)
//! implement it over the explorer's outside system, so that every store call is a point where a
//! run can crash the controller, and the stored buckets are part of the world its oracles judge.
//!
//! ```text
//!  BucketController<S: BucketStore> ──get/put/delete──▶ ObjectStore (in memory, this module)
//!                                                   └──▶ an adapter over the explorer's
//!                                                        OutsideClient (a test's)
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// One bucket as the store keeps it. Serialisable, so that a store that keeps text (the
/// explorer's outside system) can hold it as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredBucket {
    pub region: String,
    pub retention_days: i32,
    pub versioned: bool,
    /// The uid of the Bucket object that owns it.
    pub owner_uid: String,
}

/// A call to the store that did not get an answer (the store was unreachable, the process
/// died): the reconcile fails and its key is retried.
#[derive(Debug, thiserror::Error)]
#[error("the object store: {0}")]
pub struct StoreError(pub Box<dyn std::error::Error + Send + Sync>);

/// What the Bucket controller needs of an object store: the seam between the reconciler and the
/// outside system it manages (see the [module docs](self)). Every call may fail; a failed call
/// fails the reconcile, which is retried, so each use must be safe to repeat.
pub trait BucketStore: Send + Sync + 'static {
    /// The bucket `name`, if it exists.
    fn get(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<StoredBucket>, StoreError>> + Send;

    /// Creates or replaces the bucket `name`.
    fn put(
        &self,
        name: &str,
        bucket: StoredBucket,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Deletes the bucket `name` if `owner_uid` owns it; true if it was there and went. Deleting
    /// a bucket that is not there is not an error (a cleanup may run twice).
    fn delete(
        &self,
        name: &str,
        owner_uid: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
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

/// The in-memory store never fails: each call is the inherent method of the same name.
impl BucketStore for ObjectStore {
    async fn get(&self, name: &str) -> Result<Option<StoredBucket>, StoreError> {
        Ok(ObjectStore::get(self, name))
    }

    async fn put(&self, name: &str, bucket: StoredBucket) -> Result<(), StoreError> {
        ObjectStore::put(self, name, bucket);
        Ok(())
    }

    async fn delete(&self, name: &str, owner_uid: &str) -> Result<bool, StoreError> {
        Ok(ObjectStore::delete(self, name, owner_uid))
    }
}
