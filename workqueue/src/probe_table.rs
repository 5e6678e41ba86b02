//! A small open-addressing hash table tuned for the key table: one cache miss per lookup.
//!
//! Why not `hashbrown`? A hashbrown table keeps its control bytes in one array and its entries in
//! another, so a lookup in a table much larger than the cache misses twice: once for the control
//! group, once for the entry. With a million keys the queue is memory-bound, and those misses are most
//! of what an add or a get costs (W1 in `benches/WORKLOADS.md`). Here each bucket holds the key's full
//! hash beside the key and its value, so one line fetch answers "is this my key?" and hands over the
//! value at once. Keeping the hash also means growing the table and shifting entries on removal never
//! re-hash a key (which would read the key's bytes: another miss per key for `Arc<str>`).
//!
//! Layout and rules:
//! - `buckets.len()` is zero or a power of two; a key's *home* is `hash & mask`.
//! - Linear probing: a key sits at its home or after it, with no empty bucket between its home and its
//!   bucket (walking forward from the home always finds it before an empty bucket).
//! - Removal shifts later entries of the same run back (no tombstones), which keeps the rule above.
//! - The table grows (doubles) before an insert would push it past 7/8 full.

/// One occupied bucket.
struct Bucket<K, V> {
    hash: u64,
    key: K,
    value: V,
}

pub(crate) struct ProbeTable<K, V> {
    /// `None` is an empty bucket. Length zero or a power of two.
    buckets: Box<[Option<Bucket<K, V>>]>,
    /// Occupied buckets. Invariant: `len ≤ 7/8 · buckets.len()`.
    len: usize,
}

/// Where [`ProbeTable::find`] stopped: the key's bucket, or the empty bucket where it would go.
pub(crate) enum Probe {
    Found(usize),
    Vacant(usize),
}

impl<K, V> ProbeTable<K, V> {
    pub(crate) fn new() -> Self {
        ProbeTable {
            buckets: Box::new([]),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }

    /// Where the bucket array is and its mask: a key with hash `h` sits at or just after
    /// `base + (h & mask) · size_of::<bucket>()`. For prefetching only (see `key_table`).
    pub(crate) fn layout(&self) -> (usize, usize) {
        (self.buckets.as_ptr() as usize, self.mask())
    }

    /// The size of one bucket in bytes.
    pub(crate) const BUCKET_BYTES: usize = size_of::<Option<Bucket<K, V>>>();

    /// Makes room for one more entry, growing if needed. Call before a [`find`](Self::find) whose
    /// `Vacant` answer will be passed to [`insert`](Self::insert).
    pub(crate) fn reserve_one(&mut self) {
        let capacity = self.buckets.len();
        if (self.len + 1) * 8 > capacity * 7 {
            self.grow((capacity * 2).max(8));
        }
    }

    fn grow(&mut self, capacity: usize) {
        let fresh = std::iter::repeat_with(|| None).take(capacity).collect();
        let old = std::mem::replace(&mut self.buckets, fresh);
        let mask = self.mask();
        for bucket in old.into_vec().into_iter().flatten() {
            let mut at = bucket.hash as usize & mask;
            while self.buckets[at].is_some() {
                at = (at + 1) & mask;
            }
            self.buckets[at] = Some(bucket);
        }
    }

    /// Looks for the key with this `hash` for which `eq` says true.
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(&K) -> bool) -> Probe {
        let mask = self.mask();
        if self.buckets.is_empty() {
            return Probe::Vacant(0);
        }
        let mut at = hash as usize & mask;
        loop {
            match &self.buckets[at] {
                None => return Probe::Vacant(at),
                Some(bucket) if bucket.hash == hash && eq(&bucket.key) => return Probe::Found(at),
                Some(_) => at = (at + 1) & mask,
            }
        }
    }

    /// The value of the key [`find`](Self::find) found at `at`.
    pub(crate) fn value(&self, at: usize) -> Option<&V> {
        self.buckets
            .get(at)
            .and_then(Option::as_ref)
            .map(|b| &b.value)
    }

    /// The value of the key [`find`](Self::find) found at `at`, to change it.
    pub(crate) fn value_mut(&mut self, at: usize) -> Option<&mut V> {
        self.buckets
            .get_mut(at)
            .and_then(Option::as_mut)
            .map(|b| &mut b.value)
    }

    /// Fills the empty bucket [`find`](Self::find) returned (after [`reserve_one`](Self::reserve_one)).
    pub(crate) fn insert(&mut self, at: usize, hash: u64, key: K, value: V) {
        debug_assert!(self.buckets[at].is_none(), "insert into an occupied bucket");
        self.buckets[at] = Some(Bucket { hash, key, value });
        self.len += 1;
    }

    /// Empties bucket `at` and shifts back the entries after it that would otherwise become
    /// unreachable from their home.
    pub(crate) fn remove(&mut self, at: usize) -> Option<(K, V)> {
        let removed = self.buckets.get_mut(at)?.take()?;
        self.len -= 1;
        let mask = self.mask();
        let mut hole = at;
        let mut next = (at + 1) & mask;
        while let Some(bucket) = &self.buckets[next] {
            let home = bucket.hash as usize & mask;
            // Distance from home; the entry may move into the hole only if the hole is not before
            // its home (all measured cyclically).
            let from_home = next.wrapping_sub(home) & mask;
            let hole_from_home = hole.wrapping_sub(home) & mask;
            if hole_from_home <= from_home {
                self.buckets[hole] = self.buckets[next].take();
                hole = next;
            }
            next = (next + 1) & mask;
        }
        Some((removed.key, removed.value))
    }

    /// Every entry with its hash, in bucket order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &K, &V)> {
        self.buckets
            .iter()
            .flatten()
            .map(|b| (b.hash, &b.key, &b.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn an_arc_str_bucket_is_half_a_cache_line() {
        assert_eq!(size_of::<Option<Bucket<std::sync::Arc<str>, u64>>>(), 32);
    }

    /// Random inserts and removes with deliberately colliding hashes, checked against a `HashMap`.
    #[test]
    fn agrees_with_a_hash_map_under_collisions() {
        let mut table: ProbeTable<u32, u32> = ProbeTable::new();
        let mut model: HashMap<u32, u32> = HashMap::new();
        let mut state = 12345u64;
        let mut rand = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        // Few distinct hashes, so runs are long and wrap around the end of the table.
        let hash_of =
            |k: u32| u64::from(k % 7).wrapping_mul(0x9e37_79b9_7f4a_7c15) | u64::from(k % 3);
        for _ in 0..20_000 {
            let key = rand() % 300;
            let hash = hash_of(key);
            if rand() % 3 == 0 {
                if let Probe::Found(at) = table.find(hash, |k| *k == key) {
                    assert_eq!(table.remove(at).map(|(k, _)| k), Some(key));
                    assert!(model.remove(&key).is_some());
                } else {
                    assert!(!model.contains_key(&key));
                }
            } else {
                table.reserve_one();
                match table.find(hash, |k| *k == key) {
                    Probe::Found(at) => {
                        let value = table.value_mut(at).expect("found bucket is occupied");
                        *value += 1;
                        *model.get_mut(&key).expect("model has it") += 1;
                    }
                    Probe::Vacant(at) => {
                        table.insert(at, hash, key, 0);
                        assert!(model.insert(key, 0).is_none());
                    }
                }
            }
            assert_eq!(table.len(), model.len());
        }
        for (key, value) in &model {
            let Probe::Found(at) = table.find(hash_of(*key), |k| k == key) else {
                panic!("key {key} lost");
            };
            assert_eq!(table.value_mut(at).map(|v| *v), Some(*value));
        }
        assert_eq!(table.iter().count(), model.len());
    }
}
