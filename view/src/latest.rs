//! The "where is everything now" table: the latest record per slot, which is what the snapshot
//! serves and what the page's own table mirrors.
//!
//! The rule, the same in Rust and in the page's JavaScript, knows nothing of stages:
//!
//! - a record's slot is `(stage, instance, key)`, or `(stage, instance)` for a keyless record;
//! - a record replaces whatever its slot held, or removes the slot when its state is `"gone"`;
//! - past `capacity` slots, the slot updated least recently is dropped.
//!
//! So a key queued, then taken by a worker, then done, shows `queued`, `processing`, and then
//! nothing in the queue's row, while the store's row still shows it `stored`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::record::Record;

/// Where a record lives in the table. A keyless record's slot has `key: None`, so it never
/// collides with a keyed one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Slot {
    stage: String,
    instance: Option<String>,
    key: Option<String>,
}

impl Slot {
    fn of(record: &Record) -> Slot {
        Slot {
            stage: record.stage.clone(),
            instance: record.instance.clone(),
            key: record.key.clone(),
        }
    }
}

/// The latest record of every live slot.
#[derive(Debug)]
pub(crate) struct LatestTable {
    /// Invariant: `by_slot` and `by_seq` hold the same slots: `by_slot[s].seq == q` exactly when
    /// `by_seq[q] == s`.
    by_slot: HashMap<Slot, Arc<Record>>,
    /// The slots by the seq of their record, oldest first: the eviction order.
    by_seq: BTreeMap<u64, Slot>,
    /// Invariant: `by_slot.len() <= capacity`, and `capacity >= 1`.
    capacity: usize,
}

impl LatestTable {
    pub(crate) fn new(capacity: usize) -> LatestTable {
        LatestTable {
            by_slot: HashMap::new(),
            by_seq: BTreeMap::new(),
            capacity: capacity.max(1),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        self.evict_over_capacity();
    }

    /// Applies `record` by the rule in the module docs.
    pub(crate) fn apply(&mut self, record: &Arc<Record>) {
        let slot = Slot::of(record);
        let previous = if record.is_gone() {
            self.by_slot.remove(&slot)
        } else {
            self.by_seq.insert(record.seq, slot.clone());
            self.by_slot.insert(slot, record.clone())
        };
        if let Some(previous) = previous {
            self.by_seq.remove(&previous.seq);
        }
        self.evict_over_capacity();
    }

    fn evict_over_capacity(&mut self) {
        while self.by_slot.len() > self.capacity {
            let Some((_, slot)) = self.by_seq.pop_first() else {
                break;
            };
            self.by_slot.remove(&slot);
        }
    }

    /// Every live record, oldest first (the order the page applies them in).
    pub(crate) fn records(&self) -> Vec<Record> {
        self.by_seq
            .values()
            .filter_map(|slot| self.by_slot.get(slot))
            .map(|record| Record::clone(record))
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_slot.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn record(seq: u64, key: Option<&str>, state: &str) -> Arc<Record> {
        Arc::new(Record {
            seq,
            at_ms: 0,
            stage: "queue".into(),
            op: "op".into(),
            instance: Some("q".into()),
            key: key.map(Into::into),
            state: Some(state.into()),
            cause: None,
            fields: BTreeMap::new(),
        })
    }

    fn states(table: &LatestTable) -> Vec<(Option<String>, Option<String>)> {
        table
            .records()
            .into_iter()
            .map(|r| (r.key, r.state))
            .collect()
    }

    #[test]
    fn latest_per_slot_wins_and_gone_removes() {
        let mut table = LatestTable::new(10);
        table.apply(&record(1, Some("a"), "queued"));
        table.apply(&record(2, Some("b"), "queued"));
        table.apply(&record(3, None, "listing"));
        table.apply(&record(4, Some("a"), "processing"));
        assert_eq!(
            states(&table),
            vec![
                (Some("b".into()), Some("queued".into())),
                (None, Some("listing".into())),
                (Some("a".into()), Some("processing".into())),
            ]
        );
        table.apply(&record(5, Some("a"), "gone"));
        table.apply(&record(6, Some("zzz"), "gone"));
        assert_eq!(table.len(), 2);
        assert_eq!(table.by_seq.len(), 2);
    }

    #[test]
    fn the_least_recently_updated_slot_is_evicted_past_capacity() {
        let mut table = LatestTable::new(2);
        table.apply(&record(1, Some("a"), "queued"));
        table.apply(&record(2, Some("b"), "queued"));
        table.apply(&record(3, Some("a"), "processing"));
        table.apply(&record(4, Some("c"), "queued"));
        let keys: Vec<_> = table.records().into_iter().map(|r| r.key).collect();
        assert_eq!(keys, vec![Some("a".into()), Some("c".into())]);
        table.set_capacity(1);
        assert_eq!(table.records()[0].key.as_deref(), Some("c"));
    }
}
