//! The key table: where every key the queue knows about records which state it is in.
//!
//! client-go keeps three sets (`queue`, `dirty`, `processing`) under one mutex. We keep the same
//! information as one small state machine per key ([`KeyState`]) in a table split into shards, each
//! behind its own short lock. A key always hashes to the same shard, so every transition of one key is
//! serialised by that shard's lock while adds and dones of different keys proceed in parallel. The
//! common case of a busy controller (an add for a key that is already waiting) touches one shard and
//! nothing else.
//!
//! ```text
//!                add                 get (claim)               done
//!   (absent) ─────────▶ Queued ───────────────────▶ Processing ───────▶ (absent)
//!                        ▲  │ add: no-op (dedup)      │  ▲
//!                        │  │ add, higher priority:   │ add
//!                        │  ▼ re-ticket              ▼  │ add: no-op
//!                        └──────── done ──────── ProcessingDirty
//! ```
//!
//! Invariants (hold whenever a shard lock is released):
//! - a key is in exactly one of: absent, `Queued`, `Processing`, `ProcessingDirty`. In client-go terms,
//!   `Queued` is "in queue and dirty", `Processing` is "in processing", `ProcessingDirty` is "in processing
//!   and dirty": a key is never both queued and processing, so no key is handed to two workers at once.
//! - a `Queued` key has exactly one *live* entry in the ready queue: the one whose ticket equals the
//!   ticket stored here. Other entries for the key are stale and are skipped when popped (see
//!   [`crate::ready_queue`]).

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;
use parking_lot::Mutex;

use crate::clock::Stamp;

/// Number of shards. A power of two well above the core count of a typical controller host, so that
/// two threads rarely want the same shard; 64 small tables cost no more memory than one large one.
const SHARDS: usize = 64;

/// Where a key is in its life in the queue. Keys that are in none of these states are absent from
/// the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyState {
    /// Waiting in the ready queue to be handed out.
    Queued {
        /// Names the key's one live ready-queue entry.
        ticket: u64,
        priority: i32,
        /// When the key entered the queue (for `queue_duration_seconds`); `Stamp::NONE` without metrics.
        queued_at: Stamp,
    },
    /// Handed to a worker, which has not called `done` yet.
    Processing { started_at: Stamp },
    /// Handed to a worker and added again meanwhile: it goes back to the queue when `done` comes.
    ProcessingDirty {
        started_at: Stamp,
        priority: i32,
        queued_at: Stamp,
    },
}

/// What [`KeyTable::add`] did, so the caller knows whether to push a ready-queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddOutcome {
    /// The key became `Queued` (or was raised to a higher priority): push an entry with this ticket.
    Enqueue { ticket: u64, raised: bool },
    /// The key is being processed; it was marked dirty (`newly_dirty` is false if it already was).
    MarkedDirty { newly_dirty: bool },
    /// The key was already waiting at this priority or higher: nothing to do.
    AlreadyQueued,
}

/// What [`KeyTable::done`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DoneOutcome {
    /// The key was processing and is now absent.
    Finished { started_at: Stamp },
    /// The key was dirty: it is `Queued` again; push an entry with this ticket and priority.
    Requeue {
        started_at: Stamp,
        ticket: u64,
        priority: i32,
    },
    /// `done` for a key that was not being processed: a caller bug, ignored as client-go ignores it.
    NotProcessing,
}

struct Slot<K> {
    key: K,
    state: KeyState,
}

struct ShardState<K> {
    slots: HashTable<Slot<K>>,
    /// Source of tickets for keys in this shard. A key always lives in the same shard, so tickets are
    /// unique per key for the life of the queue.
    next_ticket: u64,
    /// Number of keys in this shard that are `Processing` or `ProcessingDirty`.
    processing: usize,
}

/// Cache-line aligned so that two shards never share a line and contend falsely.
#[repr(align(128))]
struct Shard<K>(Mutex<ShardState<K>>);

/// The sharded map from key to [`KeyState`].
pub(crate) struct KeyTable<K> {
    shards: Box<[Shard<K>]>,
    hasher: foldhash::fast::RandomState,
}

impl<K: Hash + Eq + Clone> KeyTable<K> {
    pub(crate) fn new() -> Self {
        let shards = (0..SHARDS)
            .map(|_| {
                Shard(Mutex::new(ShardState {
                    slots: HashTable::new(),
                    next_ticket: 0,
                    processing: 0,
                }))
            })
            .collect();
        KeyTable {
            shards,
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The key's hash. Computed once per operation and carried along (ready-queue entries keep it).
    pub(crate) fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard(&self, hash: u64) -> &Mutex<ShardState<K>> {
        // hashbrown uses the low bits (bucket index) and the top seven bits (tag); take the shard from
        // bits in between so the two do not correlate.
        &self.shards[(hash >> 40) as usize & (SHARDS - 1)].0
    }

    /// Records an add of `key` at `priority`; `now` is the stamp to use if the key starts waiting.
    pub(crate) fn add(&self, key: &K, hash: u64, priority: i32, now: Stamp) -> AddOutcome {
        let mut shard = self.shard(hash).lock();
        let shard = &mut *shard;
        let hasher = |slot: &Slot<K>| self.hasher.hash_one(&slot.key);
        match shard.slots.find_mut(hash, |slot| slot.key == *key) {
            None => {
                let ticket = next(&mut shard.next_ticket);
                let state = KeyState::Queued {
                    ticket,
                    priority,
                    queued_at: now,
                };
                let slot = Slot {
                    key: key.clone(),
                    state,
                };
                shard.slots.insert_unique(hash, slot, hasher);
                AddOutcome::Enqueue {
                    ticket,
                    raised: false,
                }
            }
            Some(slot) => match &mut slot.state {
                KeyState::Queued {
                    ticket, priority: p, ..
                } if priority > *p => {
                    *ticket = next(&mut shard.next_ticket);
                    *p = priority;
                    AddOutcome::Enqueue {
                        ticket: *ticket,
                        raised: true,
                    }
                }
                KeyState::Queued { .. } => AddOutcome::AlreadyQueued,
                KeyState::Processing { started_at } => {
                    slot.state = KeyState::ProcessingDirty {
                        started_at: *started_at,
                        priority,
                        queued_at: now,
                    };
                    AddOutcome::MarkedDirty { newly_dirty: true }
                }
                KeyState::ProcessingDirty { priority: p, .. } => {
                    *p = (*p).max(priority);
                    AddOutcome::MarkedDirty { newly_dirty: false }
                }
            },
        }
    }

    /// Moves the key from `Queued` to `Processing` if `ticket` is its live ticket. Returns when it was
    /// queued, or `None` if the entry was stale (the key was re-ticketed after that entry was pushed).
    pub(crate) fn claim(&self, key: &K, hash: u64, ticket: u64, now: Stamp) -> Option<Stamp> {
        let mut shard = self.shard(hash).lock();
        let slot = shard.slots.find_mut(hash, |slot| slot.key == *key)?;
        match slot.state {
            KeyState::Queued {
                ticket: live,
                queued_at,
                ..
            } if live == ticket => {
                slot.state = KeyState::Processing { started_at: now };
                shard.processing += 1;
                Some(queued_at)
            }
            _ => None,
        }
    }

    /// Records that processing of `key` has finished.
    pub(crate) fn done(&self, key: &K, hash: u64) -> DoneOutcome {
        let mut shard = self.shard(hash).lock();
        let shard = &mut *shard;
        let Ok(entry) = shard.slots.find_entry(hash, |slot| slot.key == *key) else {
            return DoneOutcome::NotProcessing;
        };
        match entry.get().state {
            KeyState::Processing { started_at } => {
                entry.remove();
                shard.processing -= 1;
                DoneOutcome::Finished { started_at }
            }
            KeyState::ProcessingDirty {
                started_at,
                priority,
                queued_at,
            } => {
                let ticket = next(&mut shard.next_ticket);
                entry.into_mut().state = KeyState::Queued {
                    ticket,
                    priority,
                    queued_at,
                };
                shard.processing -= 1;
                DoneOutcome::Requeue {
                    started_at,
                    ticket,
                    priority,
                }
            }
            KeyState::Queued { .. } => DoneOutcome::NotProcessing,
        }
    }

    /// The key's current state, if the queue knows it.
    pub(crate) fn state(&self, key: &K) -> Option<KeyState> {
        let hash = self.hash(key);
        let shard = self.shard(hash).lock();
        shard
            .slots
            .find(hash, |slot| slot.key == *key)
            .map(|slot| slot.state)
    }

    /// Number of keys being processed, summed over shards (locks each shard in turn; not for hot paths).
    pub(crate) fn processing_count(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().processing).sum()
    }

    /// Calls `f` with the start stamp of every key being processed (for the unfinished-work metrics).
    pub(crate) fn for_each_processing(&self, mut f: impl FnMut(Stamp)) {
        for shard in self.shards.iter() {
            let shard = shard.0.lock();
            for slot in shard.slots.iter() {
                match slot.state {
                    KeyState::Processing { started_at }
                    | KeyState::ProcessingDirty { started_at, .. } => f(started_at),
                    KeyState::Queued { .. } => {}
                }
            }
        }
    }
}

fn next(counter: &mut u64) -> u64 {
    *counter += 1;
    *counter
}
