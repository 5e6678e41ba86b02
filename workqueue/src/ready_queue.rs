//! The ready queue: keys that may be handed out now, highest priority first, FIFO within a priority.
//!
//! Keys at the default priority 0 (nearly all of them in most controllers) live in one `VecDeque`; any
//! other priority gets its own `VecDeque` in a `BTreeMap`, created on demand and removed when empty, so a
//! queue that never uses priorities pays one empty-map check per pop.
//!
//! Raising the priority of a waiting key does not search for its old entry: the key table gives the key
//! a new ticket and a new entry is pushed at the higher priority. The old entry is *stale*; it is dropped
//! when it reaches the front (its ticket no longer matches, see [`crate::key_table`]). `stale` counts those
//! entries so that [`ReadyQueue::len`] stays exact.

use std::collections::{BTreeMap, VecDeque};

/// One entry: the key, its hash and the ticket it was pushed with. The hash (8 of an `Arc<str>`
/// entry's 32 bytes) lets a getter find the key's bucket without reading the key's bytes, and
/// prefetch the bucket of the key after it (see `Inner::take`).
pub(crate) struct Entry<K> {
    pub(crate) key: K,
    pub(crate) hash: u64,
    pub(crate) ticket: u32,
}

pub(crate) struct ReadyQueue<K> {
    /// Entries at priority 0.
    default: VecDeque<Entry<K>>,
    /// Entries at every other priority; never holds an empty `VecDeque`.
    others: BTreeMap<i32, VecDeque<Entry<K>>>,
    /// Number of entries across both that are stale (their key was re-ticketed). `stale ≤ entries`.
    stale: usize,
    /// Total entries across both.
    entries: usize,
}

impl<K> ReadyQueue<K> {
    pub(crate) fn new() -> Self {
        ReadyQueue {
            default: VecDeque::new(),
            others: BTreeMap::new(),
            stale: 0,
            entries: 0,
        }
    }

    /// Appends an entry. `raised` says the key already had a live entry, which this one makes stale.
    pub(crate) fn push(&mut self, entry: Entry<K>, priority: i32, raised: bool) {
        if priority == 0 {
            self.default.push_back(entry);
        } else {
            self.others.entry(priority).or_default().push_back(entry);
        }
        self.entries += 1;
        if raised {
            self.stale += 1;
        }
    }

    /// Removes the first entry of the highest priority. The caller must check it against the key
    /// table and call [`ReadyQueue::stale_popped`] if it turns out stale.
    pub(crate) fn pop(&mut self) -> Option<Entry<K>> {
        let entry = match self.others.last_entry() {
            Some(mut high) if *high.key() > 0 || self.default.is_empty() => {
                let entry = high.get_mut().pop_front();
                if high.get().is_empty() {
                    high.remove();
                }
                entry
            }
            _ => self.default.pop_front(),
        }?;
        self.entries -= 1;
        Some(entry)
    }

    /// The entry [`ReadyQueue::pop`] would remove next, left in place.
    pub(crate) fn peek(&self) -> Option<&Entry<K>> {
        match self.others.last_key_value() {
            Some((priority, high)) if *priority > 0 || self.default.is_empty() => high.front(),
            _ => self.default.front(),
        }
    }

    /// Records that a popped entry was stale.
    pub(crate) fn stale_popped(&mut self) {
        self.stale = self.stale.saturating_sub(1);
    }

    /// Number of keys waiting (live entries).
    pub(crate) fn len(&self) -> usize {
        self.entries.saturating_sub(self.stale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `peek` names the entry `pop` removes next, across priorities and as queues empty.
    #[test]
    fn peek_agrees_with_pop() {
        let mut ready = ReadyQueue::new();
        let mut state = 7u64;
        for i in 0..2_000u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let priority = [0, 0, 0, 1, -1, 5][(state >> 33) as usize % 6];
            let entry = Entry {
                key: i,
                hash: i,
                ticket: 0,
            };
            ready.push(entry, priority, false);
            if state % 3 == 0 {
                let peeked = ready.peek().map(|e| e.hash);
                assert_eq!(peeked, ready.pop().map(|e| e.hash));
            }
        }
        loop {
            let peeked = ready.peek().map(|e| e.hash);
            let popped = ready.pop().map(|e| e.hash);
            assert_eq!(peeked, popped);
            if popped.is_none() {
                break;
            }
        }
    }
}
