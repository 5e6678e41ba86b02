//! The queue between the reflector and the store: per key, the changes not yet applied, in order
//! (client-go's `DeltaFIFO`).
//!
//! The reflector must never wait for handlers, and the store must see every change of a key in the
//! order the server made them. So the reflector only *records* what it saw, as [`Delta`]s appended to
//! the key's list, and the informer's processor pops one key at a time with all its deltas, applies
//! them to the store and hands them to the handlers.
//!
//! ```text
//!  reflector ── add/update/delete/replace ──▶ items: key → [Δ, Δ, …]   queue: keys in arrival order
//!                                                                          │ pop (one key, all its Δ)
//!                                                                          ▼
//!                                                            processor: store + handlers
//! ```
//!
//! A key is queued once however many deltas it collects, so a burst of changes to one object costs
//! one pop. Two deletes in a row collapse into one. A relist ([`DeltaFifo::replace`]) records a
//! `Replaced` per listed object, and a `Deleted` with a [`DeletedObject::FinalStateUnknown`]
//! tombstone for each object we knew (in the store, or still queued) that the list no longer has: it
//! was deleted while we were not watching, and its last state is all we have.
//!
//! Objects arrive already shared (`Arc<K>`) and already transformed: the reflector applies the
//! informer's transform as each object is decoded, so the fifo, the store and every handler share
//! one immutable copy.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use crate::object::{Object, ObjectKey};
use crate::store::Store;

/// What a delete handler receives.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletedObject<K> {
    /// A delete the watch reported: the object's last state.
    Object(Arc<K>),
    /// A delete found by a relist: the object is gone, it was deleted at some point while the
    /// watch was down, and `last_known` is the state we had (client-go's `DeletedFinalStateUnknown`).
    FinalStateUnknown { key: ObjectKey, last_known: Arc<K> },
}

impl<K: Object> DeletedObject<K> {
    /// The last state we have of the object, whichever way it was deleted.
    pub fn object(&self) -> &Arc<K> {
        match self {
            DeletedObject::Object(object) => object,
            DeletedObject::FinalStateUnknown { last_known, .. } => last_known,
        }
    }

    pub fn key(&self) -> ObjectKey {
        match self {
            DeletedObject::Object(object) => ObjectKey::of(&**object),
            DeletedObject::FinalStateUnknown { key, .. } => key.clone(),
        }
    }
}

/// One recorded change of one key.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta<K> {
    /// The watch reported ADDED.
    Added(Arc<K>),
    /// The watch reported MODIFIED.
    Updated(Arc<K>),
    /// The watch reported DELETED, or a relist no longer has the object.
    Deleted(DeletedObject<K>),
    /// A list (the first, or a relist) has the object.
    Replaced(Arc<K>),
    /// A resync: nothing changed, the stored object is offered to handlers again.
    Sync(Arc<K>),
}

impl<K: Object> Delta<K> {
    /// The object the delta carries (for a delete, the last known state).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Delta::Added(o) | Delta::Updated(o) | Delta::Replaced(o) | Delta::Sync(o) => o,
            Delta::Deleted(deleted) => deleted.object(),
        }
    }
}

struct FifoState<K> {
    /// Keys in the order they first got a pending delta. Invariant: a key is in `queue` exactly
    /// when it is in `items`, once, and its delta list is not empty.
    queue: VecDeque<ObjectKey>,
    items: HashMap<ObjectKey, Vec<Delta<K>>>,
    /// A first list (or any change) has been recorded.
    populated: bool,
    /// How many pops are left before everything the first list recorded has been processed.
    initial_population: usize,
    closed: bool,
}

/// See the [module docs](self).
pub struct DeltaFifo<K> {
    state: Mutex<FifoState<K>>,
    /// Wakes the (single) popper when a key is queued or the fifo closes.
    ready: Notify,
    /// Turns true, under the state lock, the moment `populated && initial_population == 0` first
    /// holds: after the last initial key was processed, or at once for an empty first list.
    synced: watch::Sender<bool>,
    /// What the processor has applied: used to find deletions on relist and objects to resync.
    known: Arc<Store<K>>,
}

impl<K: Object> DeltaFifo<K> {
    /// A fifo feeding `known` (the store its popper applies deltas to).
    pub fn new(known: Arc<Store<K>>) -> DeltaFifo<K> {
        DeltaFifo {
            state: Mutex::new(FifoState {
                queue: VecDeque::new(),
                items: HashMap::new(),
                populated: false,
                initial_population: 0,
                closed: false,
            }),
            ready: Notify::new(),
            synced: watch::channel(false).0,
            known,
        }
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
    /// is nothing to delete, as in client-go).
    pub fn delete(&self, object: impl Into<Arc<K>>) {
        let object = object.into();
        let key = ObjectKey::of(&*object);
        let mut state = self.state.lock();
        state.populated = true;
        self.note_synced(&state);
        if !state.items.contains_key(&key) && self.known.get_by_key(&key).is_none() {
            return;
        }
        let delta = Delta::Deleted(DeletedObject::Object(object));
        self.queue_delta(&mut state, key, delta);
    }

    /// Records a complete list: `Replaced` for each object, and a tombstone delete for each object
    /// we knew of that the list does not have.
    pub fn replace(&self, objects: impl IntoIterator<Item = impl Into<Arc<K>>>) {
        let mut state = self.state.lock();
        let mut listed = HashSet::new();
        for object in objects {
            let object: Arc<K> = object.into();
            let key = ObjectKey::of(&*object);
            listed.insert(key.clone());
            self.queue_delta(&mut state, key, Delta::Replaced(object));
        }
        // Objects we know of that the list lacks: the last state is the newest queued one if any
        // (it is newer than the store's), else the stored one.
        let mut gone: Vec<(ObjectKey, Arc<K>)> = Vec::new();
        for (key, deltas) in &state.items {
            if !listed.contains(key) {
                if let Some(newest) = deltas.last().filter(|d| !matches!(d, Delta::Deleted(_))) {
                    gone.push((key.clone(), newest.object().clone()));
                }
            }
        }
        for key in self.known.list_keys() {
            if listed.contains(&key) || state.items.contains_key(&key) {
                continue;
            }
            if let Some(stored) = self.known.get_by_key(&key) {
                gone.push((key, stored));
            }
        }
        for (key, last_known) in gone {
            let delta = Delta::Deleted(DeletedObject::FinalStateUnknown {
                key: key.clone(),
                last_known,
            });
            self.queue_delta(&mut state, key, delta);
        }
        if !state.populated {
            state.populated = true;
            state.initial_population = state.queue.len();
        }
        self.note_synced(&state);
    }

    /// Publishes `synced` once the first list has been fully processed. Call with the state lock.
    fn note_synced(&self, state: &FifoState<K>) {
        if state.populated && state.initial_population == 0 {
            self.synced
                .send_if_modified(|synced| !std::mem::replace(synced, true));
        }
    }

    /// Resolves once [`has_synced`](Self::has_synced) is true (immediately if it already is).
    pub async fn wait_for_sync(&self) {
        let mut synced = self.synced.subscribe();
        // The sender lives as long as `self`, so this cannot fail while we borrow it.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// Queues a `Sync` for every stored object that has no pending delta (a pending delta will
    /// reach the handlers anyway).
    pub fn resync(&self) {
        let mut state = self.state.lock();
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
        let deltas = match state.items.get_mut(&key) {
            Some(deltas) => deltas,
            None => {
                state.queue.push_back(key.clone());
                state.items.entry(key).or_default()
            }
        };
        deltas.push(delta);
        collapse_double_delete(deltas);
        self.ready.notify_one();
    }

    /// Waits for a queued key, removes it with all its deltas, and runs `process` on them while
    /// still holding the fifo (so nothing new is recorded for the key in between, and `has_synced`
    /// turns true only after the first list is fully processed). `process` also learns whether the
    /// key belongs to the first list (`is_in_initial_list`). `None` once closed.
    pub async fn pop<R>(
        &self,
        process: impl FnOnce(ObjectKey, Vec<Delta<K>>, bool) -> R,
    ) -> Option<R> {
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.state.lock();
                if state.closed {
                    return None;
                }
                if let Some(key) = state.queue.pop_front() {
                    let deltas = state.items.remove(&key).unwrap_or_default();
                    let initial = !(state.populated && state.initial_population == 0);
                    let result = process(key, deltas, initial);
                    state.initial_population = state.initial_population.saturating_sub(1);
                    self.note_synced(&state);
                    return Some(result);
                }
            }
            notified.await;
        }
    }

    /// True once the first list has been recorded and every key it queued has been popped.
    pub fn has_synced(&self) -> bool {
        let state = self.state.lock();
        state.populated && state.initial_population == 0
    }

    /// Keys waiting to be popped.
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

    #[tokio::test]
    async fn deltas_are_coalesced_per_key_in_order() {
        let fifo = DeltaFifo::new(Arc::new(Store::default()));
        fifo.add(cm("a", "1"));
        fifo.add(cm("b", "2"));
        fifo.update(cm("a", "3"));
        fifo.delete(cm("a", "4"));
        fifo.delete(cm("a", "4"));
        assert_eq!(fifo.len(), 2);
        let (key, deltas) = fifo.pop(|k, d, _| (k, d)).await.unwrap();
        assert_eq!(key.as_str(), "ns/a");
        assert_eq!(kinds(&deltas), ["Added@1", "Updated@3", "Deleted@4"]);
        let (key, _) = fifo.pop(|k, d, _| (k, d)).await.unwrap();
        assert_eq!(key.as_str(), "ns/b");
    }

    #[tokio::test]
    async fn replace_tombstones_known_and_queued_objects_missing_from_the_list() {
        let store = Arc::new(Store::default());
        store.insert(Arc::new(cm("stored", "1")));
        store.insert(Arc::new(cm("kept", "1")));
        let fifo = DeltaFifo::new(store.clone());
        fifo.add(cm("queued", "2"));
        fifo.replace(vec![cm("kept", "3"), cm("new", "3")]);
        let mut all = Vec::new();
        while !fifo.is_empty() {
            all.push(
                fifo.pop(|k, d, _| (k.to_string(), kinds(&d)))
                    .await
                    .unwrap(),
            );
        }
        all.sort();
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

    #[tokio::test]
    async fn synced_after_the_first_list_is_popped_and_resync_skips_pending_keys() {
        let store = Arc::new(Store::default());
        let fifo = DeltaFifo::new(store.clone());
        assert!(!fifo.has_synced());
        fifo.replace(vec![cm("a", "1"), cm("b", "1")]);
        assert!(!fifo.has_synced());
        for _ in 0..2 {
            fifo.pop(|_, deltas, _| store.insert(deltas[0].object().clone()))
                .await
                .unwrap();
        }
        assert!(fifo.has_synced());
        fifo.update(cm("a", "2"));
        fifo.resync();
        let mut all = Vec::new();
        while !fifo.is_empty() {
            all.push(
                fifo.pop(|k, d, _| (k.to_string(), kinds(&d)))
                    .await
                    .unwrap(),
            );
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
