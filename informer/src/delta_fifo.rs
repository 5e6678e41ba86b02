//! The queue between the reflector and the store: per key, the changes not yet applied, in order,
//! and each list as one batch (client-go's `DeltaFIFO`, with 1.36's atomic lists).
//!
//! The reflector must never wait for handlers, and the store must see every change of a key in the
//! order the server made them. So the reflector only *records* what it saw, as [`Delta`]s appended to
//! the key's list, and the informer's processor pops one entry at a time, applies it to the store
//! and hands it to the handlers.
//!
//! ```text
//!  reflector ── add/update/delete ──▶ items: key → [Δ, Δ, …]
//!            ── replace (a list) ───▶ one List entry: every listed object, tombstones, and the
//!            ── bookmark ──┐           deltas that were waiting (they are older than the list)
//!                          ▼
//!  queue: [List, …, List, key, key, …]   (lists first: a list takes in every key queued before it)
//!            │ pop: one key with all its Δ, or one whole list
//!            ▼
//!  processor: store (a list: all at once) + handlers; then the store's resourceVersion moves
//! ```
//!
//! A key is queued once however many deltas it collects, so a burst of changes to one object costs
//! one pop. Two deletes in a row collapse into one. A list ([`DeltaFifo::replace`]) becomes one
//! entry holding a `Replaced` per listed object, and a `Deleted` with a
//! [`DeletedObject::FinalStateUnknown`] tombstone for each object we knew (in the store, or still
//! queued) that the list no longer has: it was deleted while we were not watching, and its last
//! state is all we have. Those tombstones come after the listed objects, in key order (client-go
//! leaves them in Go's random map order; a fixed order makes runs repeatable). The processor applies that entry to the store in one step, so no reader
//! ever sees half of a relist (see [`Store::apply`]).
//!
//! ## How far the store has caught up
//!
//! Each recorded change moves `recorded`, the newest resourceVersion seen (an event's object's, a
//! list's, a bookmark's). Each queue entry remembers `before`, the value `recorded` had just before
//! its oldest change. Entries leave the queue in the order their oldest change arrived, so once
//! the entry at the front is applied, every change older than the next entry's oldest one is
//! applied too: the store has caught up to the next entry's `before`, or to `recorded` when the
//! queue is empty. That is what [`Store::resource_version`] reports, set after each pop (a bookmark
//! or an ignored delete with nothing queued moves it at once: there is nothing to apply). The
//! reflector's own last version ([`ReflectorStatus`](crate::ReflectorStatus)) is ahead of it by
//! whatever waits here.
//!
//! Objects arrive already shared (`Arc<K>`) and already transformed: the reflector applies the
//! informer's transform as each object is decoded, so the fifo, the store and every handler share
//! one immutable copy.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use ferrokube_core::pipeline_event;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use crate::pipeline::{DeltaNames, DeltasKey};
use crate::store::Store;
use ferrokube_core::object::{Object, ObjectKey};

// What the fifo records. The types live in their own module, `delta`, because the pipeline's
// printing (`pipeline`) needs them too, and the fifo uses that printing: kept here, they would make
// the two modules import each other. Re-exported under the paths they have always had.
pub use crate::delta::{DeletedObject, Delta};

/// What one pop takes out of the fifo.
#[derive(Debug)]
pub enum Changes<K> {
    /// One key's changes from the watch (or a resync), oldest first.
    Key {
        key: ObjectKey,
        deltas: Vec<Delta<K>>,
    },
    /// A whole list (the first, or a relist): per key, the deltas that were waiting when it
    /// arrived, then its `Replaced` (or a tombstone for an object it no longer has). Apply it to
    /// the store at once ([`Store::apply`]), then tell the handlers.
    List(Vec<(ObjectKey, Vec<Delta<K>>)>),
}

/// One entry popped, with what the processor needs to know about it.
#[derive(Debug)]
pub struct Popped<K> {
    pub changes: Changes<K>,
    /// The changes belong to the first list, or were queued before it was fully processed
    /// (handlers' `is_in_initial_list`).
    pub initial: bool,
    /// The resourceVersion the store has caught up to once these changes are applied: the
    /// processor sets it ([`Store::set_resource_version`]) after applying them and before telling
    /// the handlers, so a handler that looks finds it current (the fifo sets it after `process`
    /// returns in any case).
    pub resource_version: String,
}

/// A list on its way to the store: per key, in order of first appearance, its deltas.
struct ListBatch<K> {
    keys: Vec<(ObjectKey, Vec<Delta<K>>)>,
    /// key → its place in `keys`.
    position: HashMap<ObjectKey, usize>,
}

impl<K: Object> ListBatch<K> {
    fn with_capacity(capacity: usize) -> ListBatch<K> {
        ListBatch {
            keys: Vec::with_capacity(capacity),
            position: HashMap::with_capacity(capacity),
        }
    }

    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        let at = match self.position.get(&key) {
            Some(&at) => at,
            None => {
                self.position.insert(key.clone(), self.keys.len());
                self.keys.push((key, Vec::new()));
                self.keys.len() - 1
            }
        };
        let deltas = &mut self.keys[at].1;
        deltas.push(delta);
        collapse_double_delete(deltas);
    }

    /// The newest state the batch gives `key`: `Some(None)` if its last delta deletes it.
    fn newest(&self, key: &ObjectKey) -> Option<Option<Arc<K>>> {
        let deltas = &self.keys[*self.position.get(key)?].1;
        deltas.last().map(newest_state)
    }
}

/// The object a key holds after `delta`, or `None` after a delete.
fn newest_state<K: Object>(delta: &Delta<K>) -> Option<Arc<K>> {
    match delta {
        Delta::Deleted(_) => None,
        other => Some(other.object().clone()),
    }
}

/// One place in the queue.
enum Entry<K> {
    /// A key whose deltas wait in `items`.
    Key { key: ObjectKey, before: String },
    /// A whole list.
    List { batch: ListBatch<K>, before: String },
}

impl<K> Entry<K> {
    /// The newest resourceVersion recorded before this entry's oldest change.
    fn before(&self) -> &str {
        match self {
            Entry::Key { before, .. } | Entry::List { before, .. } => before,
        }
    }
}

struct FifoState<K> {
    /// Entries in the order their oldest change arrived: every `List` before every `Key` (a list
    /// takes in the keys queued before it). Invariant: a key is in `items` exactly when one
    /// `Entry::Key` for it is in `queue`, and its delta list is not empty.
    queue: VecDeque<Entry<K>>,
    items: HashMap<ObjectKey, Vec<Delta<K>>>,
    /// The resourceVersion of the newest change recorded (event, list or bookmark); `""` before
    /// the first.
    recorded: String,
    /// A first list (or any change) has been recorded.
    populated: bool,
    /// How many pops are left before everything the first list recorded has been processed.
    initial_population: usize,
    closed: bool,
}

impl<K> FifoState<K> {
    /// The resourceVersion the store has caught up to once the entries ahead of the front one
    /// (all of them, when the queue is empty) are applied.
    fn caught_up_to(&self) -> &str {
        self.queue
            .front()
            .map_or(self.recorded.as_str(), Entry::before)
    }

    fn note_recorded(&mut self, version: &str) {
        if !version.is_empty() {
            version.clone_into(&mut self.recorded);
        }
    }

    fn list_pending(&self) -> bool {
        matches!(self.queue.front(), Some(Entry::List { .. }))
    }
}

/// See the [module docs](self).
pub struct DeltaFifo<K> {
    state: Mutex<FifoState<K>>,
    /// Wakes the (single) popper when an entry is queued or the fifo closes.
    ready: Notify,
    /// Turns true, under the state lock, the moment `populated && initial_population == 0` first
    /// holds: after the last initial entry was processed, or at once for an empty first list.
    synced: watch::Sender<bool>,
    /// What the processor has applied: used to find deletions on relist and objects to resync, and
    /// where the resourceVersion the store has caught up to is published.
    known: Arc<Store<K>>,
    /// The informer's name, as the pipeline's events call this fifo (`instance`).
    name: Arc<str>,
}

impl<K: Object> DeltaFifo<K> {
    /// A fifo feeding `known` (the store its popper applies deltas to).
    pub fn new(known: Arc<Store<K>>) -> DeltaFifo<K> {
        DeltaFifo {
            state: Mutex::new(FifoState {
                queue: VecDeque::new(),
                items: HashMap::new(),
                recorded: String::new(),
                populated: false,
                initial_population: 0,
                closed: false,
            }),
            ready: Notify::new(),
            synced: watch::channel(false).0,
            known,
            name: Arc::from(""),
        }
    }

    /// Names the fifo in the pipeline's `tracing` events (the informer's name). Default empty.
    pub fn with_name(mut self, name: &str) -> Self {
        self.name = Arc::from(name);
        self
    }

    /// Records an ADDED from the watch.
    pub fn add(&self, object: impl Into<Arc<K>>) {
        let object = object.into();
        let mut state = self.state.lock();
        state.populated = true;
        self.queue_delta(&mut state, ObjectKey::of(&*object), Delta::Added(object));
        self.note_synced(&state);
    }

    /// Records a MODIFIED from the watch.
    pub fn update(&self, object: impl Into<Arc<K>>) {
        let object = object.into();
        let mut state = self.state.lock();
        state.populated = true;
        self.queue_delta(&mut state, ObjectKey::of(&*object), Delta::Updated(object));
        self.note_synced(&state);
    }

    /// Records a DELETED from the watch. Ignored for an object neither stored nor queued (there
    /// is nothing to delete, as in client-go); the store is then already at its version.
    pub fn delete(&self, object: impl Into<Arc<K>>) {
        let object = object.into();
        let key = ObjectKey::of(&*object);
        let mut state = self.state.lock();
        state.populated = true;
        self.note_synced(&state);
        let in_a_list = state.queue.iter().any(|entry| match entry {
            Entry::List { batch, .. } => batch.position.contains_key(&key),
            Entry::Key { .. } => false,
        });
        if !in_a_list && !state.items.contains_key(&key) && self.known.get_by_key(&key).is_none() {
            state.note_recorded(object.resource_version());
            self.publish_if_idle(&state);
            return;
        }
        let delta = Delta::Deleted(DeletedObject::Object(object));
        self.queue_delta(&mut state, key, delta);
    }

    /// Records a BOOKMARK: no object changed, but the server is at `resource_version`. With
    /// nothing queued, the store has caught up to it at once.
    pub fn bookmark(&self, resource_version: &str) {
        let mut state = self.state.lock();
        state.note_recorded(resource_version);
        self.publish_if_idle(&state);
    }

    /// Records a complete list at `resource_version` as one entry (see the [module docs](self)):
    /// the deltas still queued, then `Replaced` for each object, and a tombstone delete for each
    /// object we knew of that the list does not have.
    pub fn replace(
        &self,
        objects: impl IntoIterator<Item = impl Into<Arc<K>>>,
        resource_version: &str,
    ) {
        let objects: Vec<Arc<K>> = objects.into_iter().map(Into::into).collect();
        let mut state = self.state.lock();
        let state = &mut *state;
        // The keys queued since the last list: older than this list, so they go in first.
        let first_key = state
            .queue
            .iter()
            .position(|entry| matches!(entry, Entry::Key { .. }))
            .unwrap_or(state.queue.len());
        let folded = state.queue.split_off(first_key);
        let before = folded.front().map_or_else(
            || state.recorded.clone(),
            |entry| entry.before().to_string(),
        );
        let mut batch = ListBatch::with_capacity(objects.len() + folded.len());
        for entry in folded {
            if let Entry::Key { key, .. } = entry {
                for delta in state.items.remove(&key).unwrap_or_default() {
                    batch.push(key.clone(), delta);
                }
            }
        }
        // What we know of every key before this list: the store, then the lists still queued,
        // then the deltas just taken in (each newer than the one before). Ordered by key, so the
        // deletions this list finds are queued (and handed to the handlers) in key order, the
        // same on every run: neither the store's map nor a hash map's iteration decides it.
        let mut known: BTreeMap<ObjectKey, Option<Arc<K>>> = BTreeMap::new();
        for key in self.known.list_keys() {
            let stored = self.known.get_by_key(&key);
            known.insert(key, stored);
        }
        for entry in &state.queue {
            if let Entry::List { batch: earlier, .. } = entry {
                for (key, deltas) in &earlier.keys {
                    if let Some(last) = deltas.last() {
                        known.insert(key.clone(), newest_state(last));
                    }
                }
            }
        }
        for (key, _) in &batch.keys {
            if let Some(newest) = batch.newest(key) {
                known.insert(key.clone(), newest);
            }
        }
        let mut listed = HashSet::with_capacity(objects.len());
        for object in objects {
            let key = ObjectKey::of(&*object);
            listed.insert(key.clone());
            batch.push(key, Delta::Replaced(object));
        }
        for (key, last_known) in known {
            let Some(last_known) = last_known else {
                continue; // already deleted
            };
            if !listed.contains(&key) {
                let delta = Delta::Deleted(DeletedObject::FinalStateUnknown {
                    key: key.clone(),
                    last_known,
                });
                batch.push(key, delta);
            }
        }
        pipeline_event!(
            stage = "fifo",
            op = "list_queued",
            instance = %self.name,
            state = "list_queued",
            items = batch.keys.len() as u64,
            rv = resource_version,
            depth = state.queue.len() as u64 + 1,
        );
        state.queue.push_back(Entry::List { batch, before });
        state.note_recorded(resource_version);
        if !state.populated {
            state.populated = true;
            state.initial_population = state.queue.len();
        }
        self.ready.notify_one();
        self.note_synced(state);
    }

    /// Publishes `synced` once the first list has been fully processed. Call with the state lock.
    fn note_synced(&self, state: &FifoState<K>) {
        if state.populated && state.initial_population == 0 {
            self.synced
                .send_if_modified(|synced| !std::mem::replace(synced, true));
        }
    }

    /// With nothing queued, the store has caught up to everything recorded. Call with the state
    /// lock (the popper sets the version under it too, so the two never cross).
    fn publish_if_idle(&self, state: &FifoState<K>) {
        if state.queue.is_empty() && !state.recorded.is_empty() {
            self.known.set_resource_version(&state.recorded);
        }
    }

    /// Resolves once [`has_synced`](Self::has_synced) is true (immediately if it already is).
    pub async fn wait_for_sync(&self) {
        let mut synced = self.synced.subscribe();
        // The sender lives as long as `self`, so this cannot fail while we borrow it.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// Queues a `Sync` for every stored object that has no pending delta (a pending delta will
    /// reach the handlers anyway). Does nothing while a list waits: it will reach every handler
    /// anyway, and a `Sync` of the stored object queued behind it would undo it.
    pub fn resync(&self) {
        let mut state = self.state.lock();
        if state.list_pending() {
            return;
        }
        for key in self.known.list_keys() {
            if state.items.contains_key(&key) {
                continue;
            }
            if let Some(stored) = self.known.get_by_key(&key) {
                self.queue_delta(&mut state, key, Delta::Sync(stored));
            }
        }
    }

    fn queue_delta(&self, state: &mut FifoState<K>, key: ObjectKey, delta: Delta<K>) {
        let version = match &delta {
            Delta::Sync(_) => String::new(),
            other => other.object().resource_version().to_string(),
        };
        let deltas = match state.items.get_mut(&key) {
            Some(deltas) => deltas,
            None => {
                let before = state.recorded.clone();
                state.queue.push_back(Entry::Key {
                    key: key.clone(),
                    before,
                });
                state.items.entry(key).or_default()
            }
        };
        deltas.push(delta);
        collapse_double_delete(deltas);
        pipeline_event!(
            stage = "fifo",
            op = "queued",
            instance = %self.name,
            key = %DeltasKey(deltas),
            state = "queued",
            deltas = %DeltaNames(deltas),
            depth = state.queue.len() as u64,
        );
        state.note_recorded(&version);
        self.ready.notify_one();
    }

    /// Waits for a queued entry, removes it (a key with all its deltas, or a whole list), and
    /// runs `process` on it while still holding the fifo (so nothing new is recorded in between,
    /// and `has_synced` turns true only after the first list is fully processed). Then the store's
    /// resourceVersion moves to [`Popped::resource_version`]. `None` once closed.
    pub async fn pop<R>(&self, process: impl FnOnce(Popped<K>) -> R) -> Option<R> {
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.state.lock();
                if state.closed {
                    return None;
                }
                if let Some(entry) = state.queue.pop_front() {
                    let changes = match entry {
                        Entry::Key { key, .. } => {
                            let deltas = state.items.remove(&key).unwrap_or_default();
                            pipeline_event!(
                                stage = "fifo",
                                op = "popped",
                                instance = %self.name,
                                key = %key,
                                state = "gone",
                                deltas = %DeltaNames(&deltas),
                                depth = state.queue.len() as u64,
                            );
                            Changes::Key { key, deltas }
                        }
                        Entry::List { batch, .. } => {
                            pipeline_event!(
                                stage = "fifo",
                                op = "list_popped",
                                instance = %self.name,
                                state = "list_popped",
                                items = batch.keys.len() as u64,
                                depth = state.queue.len() as u64,
                            );
                            Changes::List(batch.keys)
                        }
                    };
                    let initial = !(state.populated && state.initial_population == 0);
                    let version = state.caught_up_to().to_string();
                    let result = process(Popped {
                        changes,
                        initial,
                        resource_version: version.clone(),
                    });
                    if !version.is_empty() {
                        self.known.set_resource_version(&version);
                    }
                    state.initial_population = state.initial_population.saturating_sub(1);
                    self.note_synced(&state);
                    return Some(result);
                }
            }
            notified.await;
        }
    }

    /// True once the first list has been recorded and every entry it queued has been popped.
    pub fn has_synced(&self) -> bool {
        let state = self.state.lock();
        state.populated && state.initial_population == 0
    }

    /// Entries waiting to be popped (a key, or a whole list).
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Wakes the popper; every later `pop` returns `None`.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_one();
    }
}

/// Two deletes in a row say the same thing; keep the one with the most information.
fn collapse_double_delete<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    if let (Delta::Deleted(_), Delta::Deleted(last)) = (&deltas[n - 2], &deltas[n - 1]) {
        if matches!(last, DeletedObject::FinalStateUnknown { .. }) {
            deltas.pop();
        } else {
            deltas.remove(n - 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(name: &str, rv: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.namespace = Some("ns".into());
        object.metadata.name = Some(name.into());
        object.metadata.resource_version = Some(rv.into());
        object
    }

    fn kinds(deltas: &[Delta<ConfigMap>]) -> Vec<String> {
        deltas
            .iter()
            .map(|d| {
                let kind = match d {
                    Delta::Added(_) => "Added",
                    Delta::Updated(_) => "Updated",
                    Delta::Deleted(DeletedObject::Object(_)) => "Deleted",
                    Delta::Deleted(DeletedObject::FinalStateUnknown { .. }) => "Tombstone",
                    Delta::Replaced(_) => "Replaced",
                    Delta::Sync(_) => "Sync",
                };
                format!("{kind}@{}", d.object().resource_version())
            })
            .collect()
    }

    /// Every (key, deltas) of one popped entry, sorted by key; and whether it was a list.
    fn described(changes: &Changes<ConfigMap>) -> (bool, Vec<(String, Vec<String>)>) {
        let (list, mut all) = match changes {
            Changes::Key { key, deltas } => (false, vec![(key.to_string(), kinds(deltas))]),
            Changes::List(keys) => (
                true,
                keys.iter()
                    .map(|(key, deltas)| (key.to_string(), kinds(deltas)))
                    .collect(),
            ),
        };
        all.sort();
        (list, all)
    }

    /// Applies a popped entry to `store` as the informer does (a list at once).
    fn apply(store: &Store<ConfigMap>, changes: Changes<ConfigMap>) {
        let keys = match changes {
            Changes::Key { key, deltas } => vec![(key, deltas)],
            Changes::List(keys) => keys,
        };
        let mut applied = HashMap::new();
        for (key, deltas) in keys {
            applied.insert(key, deltas.last().and_then(newest_state));
        }
        store.apply(applied);
    }

    #[tokio::test]
    async fn deltas_are_coalesced_per_key_in_order() {
        let fifo = DeltaFifo::new(Arc::new(Store::default()));
        fifo.add(cm("a", "1"));
        fifo.add(cm("b", "2"));
        fifo.update(cm("a", "3"));
        fifo.delete(cm("a", "4"));
        fifo.delete(cm("a", "4"));
        assert_eq!(fifo.len(), 2);
        let (list, a) = fifo.pop(|p| described(&p.changes)).await.unwrap();
        assert!(!list);
        assert_eq!(
            a,
            [(
                "ns/a".to_string(),
                vec!["Added@1".into(), "Updated@3".into(), "Deleted@4".into()]
            )]
        );
        let (_, b) = fifo.pop(|p| described(&p.changes)).await.unwrap();
        assert_eq!(b[0].0, "ns/b");
    }

    #[tokio::test]
    async fn replace_is_one_entry_that_tombstones_known_and_queued_objects_missing_from_the_list() {
        let store = Arc::new(Store::default());
        store.insert(Arc::new(cm("stored", "1")));
        store.insert(Arc::new(cm("kept", "1")));
        let fifo = DeltaFifo::new(store.clone());
        fifo.add(cm("queued", "2"));
        fifo.replace(vec![cm("kept", "3"), cm("new", "3")], "3");
        assert_eq!(fifo.len(), 1, "the queued key went into the list");
        let (list, all) = fifo.pop(|p| described(&p.changes)).await.unwrap();
        assert!(list);
        assert_eq!(
            all,
            [
                ("ns/kept".to_string(), vec!["Replaced@3".to_string()]),
                ("ns/new".to_string(), vec!["Replaced@3".to_string()]),
                (
                    "ns/queued".to_string(),
                    vec!["Added@2".to_string(), "Tombstone@2".to_string()]
                ),
                ("ns/stored".to_string(), vec!["Tombstone@1".to_string()]),
            ]
        );
    }

    /// The deletions a relist finds are queued in key order, whatever order the store (a hash
    /// map) holds them in; the keys queued before the list keep their arrival order. With 29
    /// stored keys to delete, a random order passes this one time in 29! (the order used to come
    /// from a `HashMap`).
    #[tokio::test]
    async fn replace_queues_the_deletions_it_finds_in_key_order() {
        let store = Arc::new(Store::default());
        for at in (0..30).rev() {
            store.insert(Arc::new(cm(&format!("stored-{at:02}"), "1")));
        }
        let fifo = DeltaFifo::new(store.clone());
        for at in (0..10).rev() {
            fifo.add(cm(&format!("queued-{at:02}"), "2"));
        }
        fifo.replace(vec![cm("stored-15", "3")], "3");
        let order = fifo
            .pop(|p| match p.changes {
                Changes::List(keys) => keys
                    .iter()
                    .map(|(key, deltas)| (key.to_string(), kinds(deltas)))
                    .collect::<Vec<_>>(),
                Changes::Key { .. } => Vec::new(),
            })
            .await
            .unwrap_or_default();
        let queued = (0..10).rev().map(|at| {
            (
                format!("ns/queued-{at:02}"),
                vec!["Added@2".to_string(), "Tombstone@2".to_string()],
            )
        });
        let listed = [("ns/stored-15".to_string(), vec!["Replaced@3".to_string()])];
        let deleted = (0..30).filter(|at| *at != 15).map(|at| {
            (
                format!("ns/stored-{at:02}"),
                vec!["Tombstone@1".to_string()],
            )
        });
        let expected: Vec<_> = queued.chain(listed).chain(deleted).collect();
        assert_eq!(
            order, expected,
            "the queued keys in arrival order, the listed object, then the deletions by key"
        );
    }

    #[tokio::test]
    async fn a_second_list_before_the_first_is_applied_still_tombstones_what_the_first_had() {
        let store = Arc::new(Store::default());
        let fifo = DeltaFifo::new(store.clone());
        fifo.replace(vec![cm("a", "1"), cm("b", "1")], "1");
        fifo.update(cm("c", "2"));
        // A watch DELETED for an object only the queued list has must not be ignored.
        fifo.delete(cm("b", "3"));
        fifo.replace(vec![cm("a", "4")], "4");
        assert_eq!(
            fifo.len(),
            2,
            "two lists; the keys queued between went into the second"
        );
        let (_, first) = fifo
            .pop(|p| {
                let described = described(&p.changes);
                apply(&store, p.changes);
                described
            })
            .await
            .unwrap();
        assert_eq!(first.len(), 2);
        let (_, second) = fifo.pop(|p| described(&p.changes)).await.unwrap();
        assert_eq!(
            second,
            [
                ("ns/a".to_string(), vec!["Replaced@4".to_string()]),
                // Already deleted by the watch: no tombstone on top.
                ("ns/b".to_string(), vec!["Deleted@3".to_string()]),
                (
                    "ns/c".to_string(),
                    vec!["Updated@2".to_string(), "Tombstone@2".to_string()]
                ),
            ]
        );
    }

    #[tokio::test]
    async fn the_store_version_moves_only_as_far_as_every_older_change_is_applied() {
        let store = Arc::new(Store::default());
        let fifo = DeltaFifo::new(store.clone());
        fifo.replace(vec![cm("a", "1")], "10");
        assert_eq!(store.resource_version(), "", "recorded is not applied");
        let popped = fifo.pop(|p| p.resource_version).await.unwrap();
        assert_eq!(popped, "10");
        assert_eq!(store.resource_version(), "10");

        fifo.add(cm("b", "11"));
        fifo.add(cm("c", "12"));
        fifo.update(cm("b", "13"));
        fifo.bookmark("15");
        assert_eq!(store.resource_version(), "10");
        // Popping b applies 11 and 13, but c's 12 is still queued: the store has every change up
        // to 11, and no further.
        let version = fifo.pop(|p| p.resource_version).await.unwrap();
        assert_eq!(version, "11");
        assert_eq!(store.resource_version(), "11");
        let version = fifo.pop(|p| p.resource_version).await.unwrap();
        assert_eq!(
            version, "15",
            "empty: everything recorded, the bookmark too"
        );
        assert_eq!(store.resource_version(), "15");

        // With nothing queued, a bookmark or a delete of an unknown object moves it at once.
        fifo.bookmark("16");
        assert_eq!(store.resource_version(), "16");
        fifo.delete(cm("never-seen", "17"));
        assert_eq!(store.resource_version(), "17");
        assert!(fifo.is_empty());
    }

    #[tokio::test]
    async fn synced_after_the_first_list_is_popped_and_resync_skips_pending_keys() {
        let store = Arc::new(Store::default());
        let fifo = DeltaFifo::new(store.clone());
        assert!(!fifo.has_synced());
        fifo.replace(vec![cm("a", "1"), cm("b", "1")], "1");
        assert!(!fifo.has_synced());
        fifo.resync();
        assert_eq!(fifo.len(), 1, "no resync while a list waits");
        let initial = fifo
            .pop(|p| {
                let initial = p.initial;
                apply(&store, p.changes);
                initial
            })
            .await
            .unwrap();
        assert!(initial);
        assert!(fifo.has_synced());
        fifo.update(cm("a", "2"));
        fifo.resync();
        let mut all = Vec::new();
        while !fifo.is_empty() {
            all.extend(fifo.pop(|p| described(&p.changes).1).await.unwrap());
        }
        all.sort();
        assert_eq!(
            all,
            [
                ("ns/a".to_string(), vec!["Updated@2".to_string()]),
                ("ns/b".to_string(), vec!["Sync@1".to_string()]),
            ]
        );
    }
}
