//! Per-key failure counts, shared by the per-key limiters.
//!
//! Every retry of every key reads and bumps its count (`num_requeues`, then `when`), from every
//! worker at once, so one map behind one lock would be a point of contention on the retry path. The
//! counts are split over shards by key hash, each with its own short lock.

use std::hash::{BuildHasher, Hash};

use parking_lot::Mutex;

use crate::probe_table::{Probe, ProbeTable};

/// Shards: a power of two comfortably above the worker count of a typical controller.
const SHARDS: usize = 16;

/// One shard, cache-line aligned so that workers bumping keys of different shards do not pass the
/// same line back and forth between cores.
#[repr(align(128))]
struct Shard<K>(Mutex<ProbeTable<K, u32>>);

/// A saturating failure count per key; a key with no failures is absent.
pub(super) struct FailureCounts<K> {
    shards: Box<[Shard<K>]>,
    hasher: foldhash::fast::RandomState,
}

impl<K: Hash + Eq + Clone> FailureCounts<K> {
    pub(super) fn new() -> Self {
        FailureCounts {
            shards: (0..SHARDS)
                .map(|_| Shard(Mutex::new(ProbeTable::new())))
                .collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The key's hash and its shard. The shard comes from high bits: the table uses the low ones.
    fn locate(&self, key: &K) -> (u64, &Mutex<ProbeTable<K, u32>>) {
        let hash = self.hasher.hash_one(key);
        (hash, &self.shards[(hash >> 40) as usize & (SHARDS - 1)].0)
    }

    /// Counts one more failure of `key`; returns the count before it.
    pub(super) fn bump(&self, key: &K) -> u32 {
        let (hash, shard) = self.locate(key);
        let mut table = shard.lock();
        table.reserve_one();
        match table.find(hash, |k| k == key) {
            Probe::Found(at) => match table.value_mut(at) {
                Some(count) => {
                    let before = *count;
                    *count = count.saturating_add(1);
                    before
                }
                None => 0,
            },
            Probe::Vacant(at) => {
                table.insert(at, hash, key.clone(), 1);
                0
            }
        }
    }

    pub(super) fn get(&self, key: &K) -> u32 {
        let (hash, shard) = self.locate(key);
        let table = shard.lock();
        match table.find(hash, |k| k == key) {
            Probe::Found(at) => table.value(at).copied().unwrap_or(0),
            Probe::Vacant(_) => 0,
        }
    }

    pub(super) fn forget(&self, key: &K) {
        let (hash, shard) = self.locate(key);
        let mut table = shard.lock();
        if let Probe::Found(at) = table.find(hash, |k| k == key) {
            table.remove(at);
        }
    }

    #[cfg(test)]
    pub(super) fn set(&self, key: K, count: u32) {
        let (hash, shard) = self.locate(&key);
        let mut table = shard.lock();
        table.reserve_one();
        match table.find(hash, |k| *k == key) {
            Probe::Found(at) => {
                if let Some(value) = table.value_mut(at) {
                    *value = count;
                }
            }
            Probe::Vacant(at) => table.insert(at, hash, key, count),
        }
    }
}
