//! Per-key failure counts, shared by the per-key limiters.
//!
//! Every retry of every key reads and bumps its count (`num_requeues`, then `when`), from every
//! worker at once, so one map behind one lock would be a point of contention on the retry path. The
//! counts are split over shards by key hash, each with its own short lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

use parking_lot::Mutex;

/// Shards: a power of two comfortably above the worker count of a typical controller.
const SHARDS: usize = 16;

/// A saturating failure count per key; a key with no failures is absent.
pub(super) struct FailureCounts<K> {
    shards: Box<[Mutex<HashMap<K, u32, foldhash::fast::RandomState>>]>,
    hasher: foldhash::fast::RandomState,
}

impl<K: Hash + Eq + Clone> FailureCounts<K> {
    pub(super) fn new() -> Self {
        FailureCounts {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    fn shard(&self, key: &K) -> &Mutex<HashMap<K, u32, foldhash::fast::RandomState>> {
        &self.shards[self.hasher.hash_one(key) as usize & (SHARDS - 1)]
    }

    /// Counts one more failure of `key`; returns the count before it.
    pub(super) fn bump(&self, key: &K) -> u32 {
        let mut shard = self.shard(key).lock();
        let count = match shard.get_mut(key) {
            Some(count) => count,
            None => shard.entry(key.clone()).or_insert(0),
        };
        let before = *count;
        *count = count.saturating_add(1);
        before
    }

    pub(super) fn get(&self, key: &K) -> u32 {
        self.shard(key).lock().get(key).copied().unwrap_or(0)
    }

    pub(super) fn forget(&self, key: &K) {
        self.shard(key).lock().remove(key);
    }

    #[cfg(test)]
    pub(super) fn set(&self, key: K, count: u32) {
        self.shard(&key).lock().insert(key, count);
    }
}
