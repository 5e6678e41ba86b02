//! The [`Journal`]: what the layer writes and the HTTP side reads. A bounded ring of the latest
//! records (for `/api/events` and `/api/follow`), the table of where every key is now (for
//! `/api/snapshot`), and per-stage counters, all behind one lock so that a snapshot and its `seq`
//! always agree.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::latest::LatestTable;
use super::record::{Draft, Record};

/// How many records the ring keeps by default: about 4 MB, minutes of a busy demo.
pub const DEFAULT_RING_CAPACITY: usize = 10_000;

/// How many slots (stage, instance, key) the snapshot keeps by default before dropping the one
/// updated least recently.
pub const DEFAULT_SNAPSHOT_CAPACITY: usize = 10_000;

/// How many records one `/api/events` answer holds at most unless asked for fewer.
pub const DEFAULT_EVENTS_LIMIT: usize = 1_000;

/// The shared record of pipeline events. Cheap to clone: clones share everything.
#[derive(Clone)]
pub struct Journal {
    ledger: Arc<Mutex<Ledger>>,
    /// `Record::at_ms` counts from here.
    started: Instant,
}

/// Everything the journal holds, under its one lock.
struct Ledger {
    /// The seq the next record gets. Invariant: the ring holds exactly the seqs
    /// `next_seq - ring.len() .. next_seq`, in order (consecutive: no holes).
    next_seq: u64,
    ring: VecDeque<Arc<Record>>,
    /// Invariant: `ring.len() <= ring_capacity`, and `ring_capacity >= 1`.
    ring_capacity: usize,
    latest: LatestTable,
    /// Events ever recorded per stage (not only those still in the ring).
    counts: BTreeMap<String, u64>,
    /// Per stage, the sum of every numeric field whose name ends in `_ms` (durations add up:
    /// the client's `wait_ms` is the total rate-limit wait).
    totals_ms: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Ledger {
    fn first_kept_seq(&self) -> u64 {
        self.next_seq - self.ring.len() as u64
    }

    fn trim_ring(&mut self) {
        while self.ring.len() > self.ring_capacity {
            self.ring.pop_front();
        }
    }
}

/// The state of everything at one `seq`: what `/api/snapshot` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The seq of the newest record applied (0 before any): ask `/api/events?after=seq` next.
    pub seq: u64,
    /// The table's capacity, so that the page evicts as the journal does.
    pub snapshot_capacity: usize,
    /// Events ever recorded per stage.
    pub counts: BTreeMap<String, u64>,
    /// Per stage, the sums of the `*_ms` fields.
    pub totals_ms: BTreeMap<String, BTreeMap<String, u64>>,
    /// The latest record of every live slot, oldest first.
    pub records: Vec<Record>,
}

/// Records after a given seq: what `/api/events` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsPage {
    /// The seq asked for.
    pub after: u64,
    /// The newest seq recorded; more remain when it is past the last record here.
    pub last_seq: u64,
    /// True when records right after `after` are no longer in the ring (or `after` is in the
    /// future: the journal was restarted): the reader missed something and must start again from
    /// a snapshot.
    pub gap: bool,
    /// Consecutive records, oldest first, starting with the oldest still kept after `after`.
    pub records: Vec<Record>,
}

/// Records that belong to one key's story: what `/api/follow` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyStory {
    pub key: String,
    /// The ring's records that [mention](Record::mentions) the key, oldest first.
    pub records: Vec<Record>,
}

impl Default for Journal {
    fn default() -> Self {
        Journal::new(DEFAULT_RING_CAPACITY)
    }
}

impl Journal {
    /// An empty journal keeping the latest `ring_capacity` records (at least 1).
    pub fn new(ring_capacity: usize) -> Journal {
        Journal {
            ledger: Arc::new(Mutex::new(Ledger {
                next_seq: 1,
                ring: VecDeque::new(),
                ring_capacity: ring_capacity.max(1),
                latest: LatestTable::new(DEFAULT_SNAPSHOT_CAPACITY),
                counts: BTreeMap::new(),
                totals_ms: BTreeMap::new(),
            })),
            started: Instant::now(),
        }
    }

    /// Keeps the latest `capacity` records (at least 1), dropping older ones now if needed.
    pub fn set_ring_capacity(&self, capacity: usize) {
        let mut ledger = self.ledger.lock();
        ledger.ring_capacity = capacity.max(1);
        ledger.trim_ring();
    }

    /// Keeps at most `capacity` slots (at least 1) in the snapshot.
    pub fn set_snapshot_capacity(&self, capacity: usize) {
        self.ledger.lock().latest.set_capacity(capacity);
    }

    /// Numbers `draft`, keeps it, and returns its seq.
    pub(crate) fn record(&self, draft: Draft) -> u64 {
        let millis = |ms: u128| u64::try_from(ms).unwrap_or(u64::MAX);
        let mut ledger = self.ledger.lock();
        let seq = ledger.next_seq;
        let at_ms = millis(self.started.elapsed().as_millis());
        let record = Arc::new(draft.into_record(seq, at_ms));
        ledger.next_seq += 1;
        *ledger.counts.entry(record.stage.clone()).or_default() += 1;
        for (name, value) in &record.fields {
            if let (true, Some(ms)) = (name.ends_with("_ms"), value.as_u64()) {
                let totals = ledger.totals_ms.entry(record.stage.clone()).or_default();
                let total = totals.entry(name.clone()).or_default();
                *total = total.saturating_add(ms);
            }
        }
        ledger.latest.apply(&record);
        ledger.ring.push_back(record);
        ledger.trim_ring();
        seq
    }

    /// The seq of the newest record (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.ledger.lock().next_seq - 1
    }

    /// Where everything is now.
    pub fn snapshot(&self) -> Snapshot {
        let ledger = self.ledger.lock();
        Snapshot {
            seq: ledger.next_seq - 1,
            snapshot_capacity: ledger.latest.capacity(),
            counts: ledger.counts.clone(),
            totals_ms: ledger.totals_ms.clone(),
            records: ledger.latest.records(),
        }
    }

    /// At most `limit` records after seq `after` (at least one if any), and whether some were
    /// lost in between.
    pub fn events_after(&self, after: u64, limit: usize) -> EventsPage {
        let ledger = self.ledger.lock();
        let last_seq = ledger.next_seq - 1;
        let first_kept = ledger.first_kept_seq();
        let gap = after.saturating_add(1) < first_kept || after > last_seq;
        let start = after.saturating_add(1).max(first_kept);
        let skip = usize::try_from(start - first_kept).unwrap_or(usize::MAX);
        let records = ledger
            .ring
            .iter()
            .skip(skip)
            .take(limit.max(1))
            .map(|record| Record::clone(record))
            .collect();
        EventsPage {
            after,
            last_seq,
            gap,
            records,
        }
    }

    /// The ring's records of `key`'s story.
    pub fn follow(&self, key: &str) -> KeyStory {
        let ledger = self.ledger.lock();
        KeyStory {
            key: key.to_owned(),
            records: ledger
                .ring
                .iter()
                .filter(|record| record.mentions(key))
                .map(|record| Record::clone(record))
                .collect(),
        }
    }
}
