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

/// One entry: the key and the ticket it was pushed with. (The key's hash is not kept: with it an
/// `Arc<str>` entry is 32 bytes instead of 24, and the getter has to read the key to finish it anyway.)
pub(crate) struct Entry<K> {
    pub(crate) key: K,
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

    /// Records that a popped entry was stale.
    pub(crate) fn stale_popped(&mut self) {
        self.stale = self.stale.saturating_sub(1);
    }

    /// Number of keys waiting (live entries).
    pub(crate) fn len(&self) -> usize {
        self.entries.saturating_sub(self.stale)
    }
}
