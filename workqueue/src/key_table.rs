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

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::clock::Stamp;
use crate::probe_table::{Probe, ProbeTable};

/// Number of shards. A power of two well above the core count of a typical controller host, so that
/// two threads rarely want the same shard; 64 small tables cost no more memory than one large one.
const SHARDS: usize = 64;

/// Where a key is in its life in the queue. Keys that are in none of these states are absent from
/// the table. Stored packed into eight bytes ([`PackedState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyState {
    /// Waiting in the ready queue to be handed out.
    Queued {
        /// Names the key's one live ready-queue entry.
        ticket: u32,
        priority: i32,
    },
    /// Handed to a worker, which has not called `done` yet.
    Processing,
    /// Handed to a worker and added again meanwhile: it goes back to the queue when `done` comes.
    ProcessingDirty { priority: i32 },
}

/// When a key became dirty and when a worker took it, for the latency metrics. Kept in a table of
/// its own, which exists only in queues with metrics.
#[derive(Debug, Clone, Copy, Default)]
struct Timing {
    queued_at: Stamp,
    started_at: Stamp,
}

/// What [`KeyTable::add`] did, so the caller knows whether to push a ready-queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddOutcome {
    /// The key became `Queued` (or was raised to a higher priority): push an entry with this ticket.
    Enqueue { ticket: u32, raised: bool },
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
        ticket: u32,
        priority: i32,
    },
    /// `done` for a key that was not being processed: a caller bug, ignored as client-go ignores it.
    NotProcessing,
}

/// A [`KeyState`] in eight bytes: bits 0–1 the variant, bits 2–31 the ticket, bits 32–63 the
/// priority. With an `Arc<str>` key a bucket (hash, key, state) is then 32 bytes, two to a cache
/// line: the table is the queue's largest structure, and with a million keys its size decides how
/// often the queue misses the cache (measured on W1 of `benches/WORKLOADS.md`).
#[derive(Debug, Clone, Copy)]
struct PackedState(u64);

/// Tickets are 30 bits (see `ShardState::next_ticket` for why wrapping is harmless).
const TICKET_MASK: u32 = (1 << 30) - 1;

impl PackedState {
    fn get(self) -> KeyState {
        let ticket = (self.0 as u32) >> 2;
        let priority = (self.0 >> 32) as u32 as i32;
        match self.0 & 3 {
            0 => KeyState::Queued { ticket, priority },
            1 => KeyState::Processing,
            _ => KeyState::ProcessingDirty { priority },
        }
    }
}

impl From<KeyState> for PackedState {
    fn from(state: KeyState) -> Self {
        let (variant, ticket, priority) = match state {
            KeyState::Queued { ticket, priority } => (0, ticket & TICKET_MASK, priority),
            KeyState::Processing => (1, 0, 0),
            KeyState::ProcessingDirty { priority } => (2, 0, priority),
        };
        PackedState(((priority as u32 as u64) << 32) | (u64::from(ticket) << 2) | variant)
    }
}

struct ShardState<K> {
    /// Each known key and its state.
    slots: ProbeTable<K, PackedState>,
    /// `Some` only in queues with metrics. Invariant: holds an entry for exactly the keys in `slots`.
    timings: Option<ProbeTable<K, Timing>>,
    /// Source of tickets for keys in this shard. A key always lives in the same shard, so tickets
    /// differ between one key's entries unless 2^32 tickets are issued in the shard while a stale entry
    /// waits; even then the worst case is that the key is handed out from its older position (the
    /// claim still moves it to `Processing`, so it is never handed out twice).
    next_ticket: u32,
    /// Number of keys in this shard that are `Processing` or `ProcessingDirty`.
    processing: usize,
}

/// One shard. Cache-line aligned so that two shards never share a line and contend falsely.
#[repr(align(128))]
struct Shard<K> {
    state: Mutex<ShardState<K>>,
    /// Where the shard's bucket array is, and its mask: copies of `state.slots.layout()`, updated
    /// under the lock whenever the array moves, read without it by [`KeyTable::prefetch`]. They are
    /// hints only: a stale or torn pair makes a prefetch fetch a useless line, nothing worse (a
    /// prefetch reads nothing the program sees and cannot fault).
    bucket_base: AtomicUsize,
    bucket_mask: AtomicUsize,
}

/// The sharded map from key to [`KeyState`].
pub(crate) struct KeyTable<K> {
    shards: Box<[Shard<K>]>,
    hasher: foldhash::fast::RandomState,
}

impl<K: Hash + Eq + Clone> KeyTable<K> {
    /// `timed`: keep [`Timing`]s (queues with metrics).
    pub(crate) fn new(timed: bool) -> Self {
        let shards = (0..SHARDS)
            .map(|_| Shard {
                state: Mutex::new(ShardState {
                    slots: ProbeTable::new(),
                    timings: timed.then(ProbeTable::new),
                    next_ticket: 0,
                    processing: 0,
                }),
                bucket_base: AtomicUsize::new(0),
                bucket_mask: AtomicUsize::new(0),
            })
            .collect();
        KeyTable {
            shards,
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The key's hash, computed once per operation and passed to the table methods below.
    pub(crate) fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard_of(&self, hash: u64) -> &Shard<K> {
        // The shard's table places keys by the low bits; take the shard from high bits so the two do
        // not correlate.
        &self.shards[(hash >> 40) as usize & (SHARDS - 1)]
    }

    fn shard(&self, hash: u64) -> &Mutex<ShardState<K>> {
        &self.shard_of(hash).state
    }

    /// Asks the CPU to start loading the cache line of the bucket where the key with this hash
    /// lives, without waiting for it. A getter calls it for the key after the one it takes, so that
    /// the next claim finds its bucket in the cache instead of waiting for memory (in a table of a
    /// million keys, that wait was a third of W1's time). No lock, no effect on the table.
    pub(crate) fn prefetch(&self, hash: u64) {
        if let Some(address) = self.home_bucket_address(hash) {
            prefetch_line(address);
        }
    }

    /// The address of the home bucket of a key with this hash, from the shard's published layout
    /// (`None` while the shard has no array).
    fn home_bucket_address(&self, hash: u64) -> Option<usize> {
        let shard = self.shard_of(hash);
        let base = shard.bucket_base.load(Ordering::Relaxed);
        let mask = shard.bucket_mask.load(Ordering::Relaxed);
        if base == 0 || mask == usize::MAX {
            return None;
        }
        let offset =
            (hash as usize & mask).wrapping_mul(ProbeTable::<K, PackedState>::BUCKET_BYTES);
        Some(base.wrapping_add(offset))
    }

    /// Records an add of `key` at `priority`; `now` is the stamp to use if the key becomes dirty.
    pub(crate) fn add(&self, key: &K, hash: u64, priority: i32, now: Stamp) -> AddOutcome {
        let home = self.shard_of(hash);
        let mut shard = home.state.lock();
        let shard = &mut *shard;
        shard.slots.reserve_one();
        let (base, mask) = shard.slots.layout();
        if home.bucket_base.load(Ordering::Relaxed) != base {
            home.bucket_base.store(base, Ordering::Relaxed);
            home.bucket_mask.store(mask, Ordering::Relaxed);
        }
        let outcome = match shard.slots.find(hash, |k| k == key) {
            Probe::Vacant(at) => {
                let ticket = next(&mut shard.next_ticket);
                let state = KeyState::Queued { ticket, priority }.into();
                shard.slots.insert(at, hash, key.clone(), state);
                AddOutcome::Enqueue {
                    ticket,
                    raised: false,
                }
            }
            Probe::Found(at) => {
                let Some(slot) = shard.slots.value_mut(at) else {
                    return AddOutcome::AlreadyQueued;
                };
                let (state, outcome) = match slot.get() {
                    KeyState::Queued { priority: p, .. } if priority > p => {
                        let ticket = next(&mut shard.next_ticket);
                        let raised = AddOutcome::Enqueue {
                            ticket,
                            raised: true,
                        };
                        (KeyState::Queued { ticket, priority }, raised)
                    }
                    queued @ KeyState::Queued { .. } => (queued, AddOutcome::AlreadyQueued),
                    KeyState::Processing => (
                        KeyState::ProcessingDirty { priority },
                        AddOutcome::MarkedDirty { newly_dirty: true },
                    ),
                    KeyState::ProcessingDirty { priority: p } => (
                        KeyState::ProcessingDirty {
                            priority: p.max(priority),
                        },
                        AddOutcome::MarkedDirty { newly_dirty: false },
                    ),
                };
                *slot = state.into();
                outcome
            }
        };
        if let Some(timings) = &mut shard.timings {
            let newly_dirty = matches!(
                outcome,
                AddOutcome::Enqueue { raised: false, .. }
                    | AddOutcome::MarkedDirty { newly_dirty: true }
            );
            if newly_dirty {
                if let Some(timing) = timing_mut(timings, key, hash) {
                    timing.queued_at = now;
                }
            }
        }
        outcome
    }

    /// Moves the key from `Queued` to `Processing` if `ticket` is its live ticket. Returns when it
    /// became dirty (`Stamp::NONE` without metrics), or `None` if the entry was stale (the key was
    /// re-ticketed after that entry was pushed).
    pub(crate) fn claim(&self, key: &K, hash: u64, ticket: u32, now: Stamp) -> Option<Stamp> {
        let mut shard = self.shard(hash).lock();
        let shard = &mut *shard;
        let Probe::Found(at) = shard.slots.find(hash, |k| k == key) else {
            return None;
        };
        let slot = shard.slots.value_mut(at)?;
        match slot.get() {
            KeyState::Queued { ticket: live, .. } if live == ticket => {
                *slot = KeyState::Processing.into();
                shard.processing += 1;
                let Some(timings) = &mut shard.timings else {
                    return Some(Stamp::NONE);
                };
                let timing = timing_mut(timings, key, hash)?;
                timing.started_at = now;
                Some(timing.queued_at)
            }
            _ => None,
        }
    }

    /// Records that processing of `key` has finished.
    pub(crate) fn done(&self, key: &K, hash: u64) -> DoneOutcome {
        let mut shard = self.shard(hash).lock();
        let shard = &mut *shard;
        let Probe::Found(at) = shard.slots.find(hash, |k| k == key) else {
            return DoneOutcome::NotProcessing;
        };
        let Some(slot) = shard.slots.value_mut(at) else {
            return DoneOutcome::NotProcessing;
        };
        let outcome = match slot.get() {
            KeyState::Processing => {
                shard.slots.remove(at);
                DoneOutcome::Finished {
                    started_at: Stamp::NONE,
                }
            }
            KeyState::ProcessingDirty { priority } => {
                let ticket = next(&mut shard.next_ticket);
                *slot = KeyState::Queued { ticket, priority }.into();
                DoneOutcome::Requeue {
                    started_at: Stamp::NONE,
                    ticket,
                    priority,
                }
            }
            KeyState::Queued { .. } => return DoneOutcome::NotProcessing,
        };
        shard.processing -= 1;
        let Some(timings) = &mut shard.timings else {
            return outcome;
        };
        let Probe::Found(at) = timings.find(hash, |k| k == key) else {
            return outcome;
        };
        let started = timings
            .value_mut(at)
            .map(|t| t.started_at)
            .unwrap_or_default();
        match outcome {
            DoneOutcome::Finished { .. } => {
                timings.remove(at);
                DoneOutcome::Finished {
                    started_at: started,
                }
            }
            DoneOutcome::Requeue {
                ticket, priority, ..
            } => DoneOutcome::Requeue {
                started_at: started,
                ticket,
                priority,
            },
            DoneOutcome::NotProcessing => outcome,
        }
    }

    /// The key's current state, if the queue knows it.
    pub(crate) fn state(&self, key: &K) -> Option<KeyState> {
        let hash = self.hash(key);
        let mut shard = self.shard(hash).lock();
        let Probe::Found(at) = shard.slots.find(hash, |k| k == key) else {
            return None;
        };
        shard.slots.value_mut(at).map(|state| state.get())
    }

    /// Number of keys being processed, summed over shards (locks each shard in turn; not for hot paths).
    pub(crate) fn processing_count(&self) -> usize {
        self.shards.iter().map(|s| s.state.lock().processing).sum()
    }

    /// Calls `f` with the start stamp of every key being processed (for the unfinished-work metrics;
    /// nothing without metrics).
    pub(crate) fn for_each_processing(&self, mut f: impl FnMut(Stamp)) {
        for shard in self.shards.iter() {
            let shard = shard.state.lock();
            let Some(timings) = &shard.timings else {
                return;
            };
            for (hash, key, state) in shard.slots.iter() {
                if matches!(
                    state.get(),
                    KeyState::Processing | KeyState::ProcessingDirty { .. }
                ) {
                    if let Probe::Found(at) = timings.find(hash, |k| k == key) {
                        if let Some(timing) = timings.value(at) {
                            f(timing.started_at);
                        }
                    }
                }
            }
        }
    }
}

/// The key's timing entry, created if missing (`None` only if the table breaks its own rules).
fn timing_mut<'a, K: Hash + Eq + Clone>(
    timings: &'a mut ProbeTable<K, Timing>,
    key: &K,
    hash: u64,
) -> Option<&'a mut Timing> {
    timings.reserve_one();
    let at = match timings.find(hash, |k| k == key) {
        Probe::Found(at) => at,
        Probe::Vacant(at) => {
            timings.insert(at, hash, key.clone(), Timing::default());
            at
        }
    };
    timings.value_mut(at)
}

/// Prefetches the cache line at `address` into all cache levels (x86-64; elsewhere nothing). The
/// address need not be valid: a prefetch is a hint, it reads nothing the program can observe and
/// never faults.
#[inline]
fn prefetch_line(address: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE, which `_mm_prefetch` needs, is part of every x86-64 CPU (the baseline
        // target enables it); a prefetch does not access memory in the program's sense, so any
        // address is fine.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

fn next(counter: &mut u32) -> u32 {
    *counter = counter.wrapping_add(1) & TICKET_MASK;
    *counter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_state_round_trips() {
        for priority in [i32::MIN, -1, 0, 1, 7, i32::MAX] {
            for ticket in [0, 1, 12345, TICKET_MASK] {
                let queued = KeyState::Queued { ticket, priority };
                assert_eq!(PackedState::from(queued).get(), queued);
            }
            let dirty = KeyState::ProcessingDirty { priority };
            assert_eq!(PackedState::from(dirty).get(), dirty);
        }
        assert_eq!(
            PackedState::from(KeyState::Processing).get(),
            KeyState::Processing
        );
    }

    /// The prefetch hint must follow the bucket array as it grows: after every add, the published
    /// layout is the array's, and the hint is the key's home bucket in it.
    #[test]
    fn the_prefetch_hint_is_the_home_bucket_of_the_current_array() {
        let table: KeyTable<u32> = KeyTable::new(false);
        for key in 0..5_000u32 {
            let hash = table.hash(&key);
            table.add(&key, hash, 0, Stamp::NONE);
            let shard = table.shard_of(hash).state.lock();
            let (base, mask) = shard.slots.layout();
            let home = base + (hash as usize & mask) * ProbeTable::<u32, PackedState>::BUCKET_BYTES;
            assert_eq!(table.home_bucket_address(hash), Some(home), "key {key}");
        }
    }

    #[test]
    fn stale_tickets_are_told_apart_from_live_ones() {
        let table: KeyTable<&str> = KeyTable::new(false);
        let hash = table.hash(&"k");
        let AddOutcome::Enqueue { ticket: first, .. } = table.add(&"k", hash, 0, Stamp::NONE)
        else {
            panic!("not enqueued");
        };
        let AddOutcome::Enqueue {
            ticket: raised,
            raised: true,
        } = table.add(&"k", hash, 5, Stamp::NONE)
        else {
            panic!("not raised");
        };
        assert_eq!(table.claim(&"k", hash, first, Stamp::NONE), None);
        assert!(table.claim(&"k", hash, raised, Stamp::NONE).is_some());
        assert_eq!(
            table.claim(&"k", hash, raised, Stamp::NONE),
            None,
            "claimed twice"
        );
    }
}
