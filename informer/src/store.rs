//! The informer's cache: every object of one resource, by key, with secondary indexes
//! (client-go's `ThreadSafeStore` + `Indexer`), and the resourceVersion it has caught up to.
//!
//! Exactly one writer (the informer's delta processor, or whoever owns the store) changes it; any
//! number of readers (Listers, workers) read it at the same time. Objects are stored as `Arc<K>` and
//! never mutated: a write replaces the `Arc`, a read clones it (one atomic increment), so readers
//! share objects without the deep copies client-go asks of its callers.
//!
//! ## Two kinds of write
//!
//! ```text
//!  insert / remove (a watch event) ──▶ items + indexes, in place: one shard locked per write
//!  apply (a list or relist, whole) ──▶ the same, every change, while holding the list gate
//!                                       for writing
//!  get_by_key ───────────────────────▶ items: one shard, no gate (one key is always whole)
//!  list, list_keys, by_index, … ─────▶ the list gate for reading, then items / indexes
//! ```
//!
//! The items live in a sharded concurrent map ([`DashMap`]): a single-key write locks one shard
//! for the length of one insert, and a read waits at most for that. A list or relist must be
//! different: if it were applied one key at a time with readers running, a `list` taken meanwhile
//! would see some objects of the old list and some of the new one, a state the server never had.
//! So [`Store::apply`] holds the *list gate* (a read-write lock guarding nothing but that
//! promise) for writing while it applies the list's changes, and every read of more than one key
//! holds it for reading: such a read sees the store entirely before a list or entirely after it.
//! A read of one key needs no gate (a key is always whole), so the hot path, `get_by_key`, costs
//! what it always did. The price: a multi-key read that arrives during a relist waits for the
//! relist's changes to be applied (about 3 ms for 10,000 objects here), which is rare (relists
//! follow a 410) and short; client-go holds its one lock for as long, over every read.
//!
//! (A first version built complete new tables beside the current ones and swapped a pointer, so
//! that no read ever waited; the pointer load made every `get_by_key` about 30% slower, and every
//! relist twice as heavy in memory: `informer/benches/store.rs`.)
//!
//! ## How fresh the store is
//!
//! [`Store::resource_version`] is the resourceVersion the store has caught up to: every change the
//! server made up to that version has been applied (client-go's `LastStoreSyncResourceVersion`).
//! The [`DeltaFifo`](crate::DeltaFifo) knows it (it sees changes arrive and leave) and sets it, and
//! only after the changes were applied, never when the reflector merely received them. A controller
//! compares it with the resourceVersion of its own last write to know whether the cache can show
//! that write yet. Whoever must wait for the store to reach a version subscribes to it with
//! [`Store::watch_resource_version`] and is woken at each change (instead of polling).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use dashmap::DashMap;
use foldhash::fast::RandomState;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use crate::index::{IndexFn, Indexers};
use ferrokube_core::object::{Object, ObjectKey};

/// A read asked for an index the store does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the store has no index named {0:?}")]
pub struct UnknownIndex(pub String);

/// [`Store::add_index`] was asked for an index whose name the store already has (client-go's
/// `AddIndexers` refuses the same way): two functions under one name would answer lookups with
/// whichever came first, so the second is refused rather than dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the store already has an index named {0:?}")]
pub struct IndexConflict(pub String);

/// Called with the store's new resourceVersion each time it changes (e.g. to set a gauge).
pub type VersionObserver = Box<dyn Fn(&str) + Send + Sync>;

struct Index<K> {
    name: String,
    function: IndexFn<K>,
    /// value → keys of the objects whose function returned it. Invariant (between writes): a key is
    /// in the set of value `v` exactly when the stored object's function returns `v`; no set is empty.
    values: DashMap<String, HashSet<ObjectKey>, RandomState>,
}

/// See the [module docs](self).
pub struct Store<K> {
    items: DashMap<ObjectKey, Arc<K>, RandomState>,
    /// Grows only ([`Store::add_index`]), never shrinks or replaces an index. Lock order: `writer`,
    /// then `lists`, then this; a new index is built over every item while `writer` and the list
    /// gate are held, so no write and no multi-key read sees it half built.
    indexes: RwLock<Vec<Index<K>>>,
    /// Held by writers, so that an item and its index entries change together.
    writer: Mutex<()>,
    /// The list gate: held for writing while a list's changes are applied, and for reading by
    /// every read of more than one key. Invariant: no such read sees part of a list applied.
    lists: RwLock<()>,
    /// The resourceVersion the store has caught up to (`""` until the first list is applied), in a
    /// channel so that waiters are woken when it moves. Invariant: it is set only after the changes
    /// up to it are in `items`, so a reader woken by a new value finds them; it never holds the
    /// same value twice in a row (an unchanged version wakes nobody).
    version: watch::Sender<String>,
    observer: Option<VersionObserver>,
}

impl<K: Object> Default for Store<K> {
    fn default() -> Self {
        Store::new(Indexers::default())
    }
}

/// Drops `key` from the index sets of `old`'s values, except those in `keep`.
fn unindex_one<K>(index: &Index<K>, key: &ObjectKey, old: &K, keep: Option<&[String]>) {
    for value in (index.function)(old) {
        if keep.is_some_and(|keep| keep.contains(&value)) {
            continue;
        }
        index.values.remove_if_mut(&value, |_, keys| {
            keys.remove(key);
            keys.is_empty()
        });
    }
}

impl<K: Object> Store<K> {
    pub fn new(indexers: Indexers<K>) -> Store<K> {
        Store {
            items: DashMap::with_hasher(RandomState::default()),
            indexes: RwLock::new(
                indexers
                    .list
                    .into_iter()
                    .map(|(name, function)| Index {
                        name,
                        function,
                        values: DashMap::with_hasher(RandomState::default()),
                    })
                    .collect(),
            ),
            writer: Mutex::new(()),
            lists: RwLock::new(()),
            version: watch::Sender::new(String::new()),
            observer: None,
        }
    }

    /// Calls `observer` with the new resourceVersion whenever it changes. Default: none.
    pub fn with_version_observer(mut self, observer: VersionObserver) -> Store<K> {
        self.observer = Some(observer);
        self
    }

    /// Adds the index `name` and fills it from every object held now (a re-index), so that it
    /// answers as if it had been there from the start; later writes keep it current. Refused if
    /// the store has an index of that name already.
    pub fn add_index(&self, name: &str, function: IndexFn<K>) -> Result<(), IndexConflict> {
        let _writer = self.writer.lock();
        let _gate = self.lists.write();
        let mut indexes = self.indexes.write();
        if indexes.iter().any(|index| index.name == name) {
            return Err(IndexConflict(name.to_string()));
        }
        let index = Index {
            name: name.to_string(),
            function,
            values: DashMap::with_hasher(RandomState::default()),
        };
        for entry in self.items.iter() {
            for value in (index.function)(entry.value()) {
                index
                    .values
                    .entry(value)
                    .or_default()
                    .insert(entry.key().clone());
            }
        }
        indexes.push(index);
        Ok(())
    }

    /// Whether the store has an index called `name`.
    pub fn has_index(&self, name: &str) -> bool {
        self.indexes.read().iter().any(|index| index.name == name)
    }

    /// Adds or replaces the object under its key; returns the previous one.
    pub fn insert(&self, object: Arc<K>) -> Option<Arc<K>> {
        let _writer = self.writer.lock();
        self.insert_locked(ObjectKey::of(&*object), object)
    }

    /// Removes the object stored under `key`, and returns it.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let _writer = self.writer.lock();
        self.remove_locked(key)
    }

    /// Applies every change at once: `Some(object)` stores it under the key, `None` removes the
    /// key. A read of more than one key sees the store as it was before, or with all of the
    /// changes, never with some of them (see the [module docs](self)). For lists and relists.
    pub fn apply(&self, changes: HashMap<ObjectKey, Option<Arc<K>>>) {
        let _writer = self.writer.lock();
        let _gate = self.lists.write();
        for (key, object) in changes {
            match object {
                Some(object) => {
                    self.insert_locked(key, object);
                }
                None => {
                    self.remove_locked(&key);
                }
            }
        }
    }

    /// Makes the store hold exactly `objects`, at once (see [`apply`](Self::apply)); returns the
    /// objects it removed.
    pub fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
        let mut changes: HashMap<ObjectKey, Option<Arc<K>>> = objects
            .into_iter()
            .map(|object| (ObjectKey::of(&*object), Some(object)))
            .collect();
        let mut removed = Vec::new();
        for entry in self.items.iter() {
            if !changes.contains_key(entry.key()) {
                removed.push(entry.value().clone());
                changes.insert(entry.key().clone(), None);
            }
        }
        self.apply(changes);
        removed
    }

    /// Call with the writer lock.
    fn insert_locked(&self, key: ObjectKey, object: Arc<K>) -> Option<Arc<K>> {
        let old = self.items.insert(key.clone(), object.clone());
        for index in self.indexes.read().iter() {
            let new_values = (index.function)(&object);
            if let Some(old) = &old {
                unindex_one(index, &key, old, Some(&new_values));
            }
            for value in new_values {
                index.values.entry(value).or_default().insert(key.clone());
            }
        }
        old
    }

    /// Call with the writer lock.
    fn remove_locked(&self, key: &str) -> Option<Arc<K>> {
        let (key, old) = self.items.remove(key)?;
        for index in self.indexes.read().iter() {
            unindex_one(index, &key, &old, None);
        }
        Some(old)
    }

    /// The resourceVersion the store has caught up to: every change up to it is applied (client-go's
    /// `LastStoreSyncResourceVersion`). `""` before the first list was applied.
    pub fn resource_version(&self) -> String {
        self.version.borrow().clone()
    }

    /// A receiver of the store's resourceVersion: `changed().await` returns each time it moves
    /// (after the changes up to the new version were applied), `borrow()` reads it. For waiting
    /// until the store has caught up to some version without polling.
    pub fn watch_resource_version(&self) -> watch::Receiver<String> {
        self.version.subscribe()
    }

    /// Records that the store has applied every change up to `version` (the
    /// [`DeltaFifo`](crate::DeltaFifo) and the informer's processor call this, after applying).
    pub fn set_resource_version(&self, version: &str) {
        let changed = self.version.send_if_modified(|current| {
            if *current == version {
                return false;
            }
            version.clone_into(current);
            true
        });
        if !changed {
            return;
        }
        if let Some(observer) = &self.observer {
            observer(version);
        }
    }

    /// The object stored under `key` (`namespace/name`, or `name` if cluster-scoped). No gate:
    /// one key is always whole.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.items.get(key).map(|entry| entry.value().clone())
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let _gate = self.lists.read();
        self.items
            .iter()
            .map(|entry| entry.value().clone())
            .collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let _gate = self.lists.read();
        self.items.iter().map(|entry| entry.key().clone()).collect()
    }

    pub fn len(&self) -> usize {
        let _gate = self.lists.read();
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        let _gate = self.lists.read();
        self.items.is_empty()
    }

    /// The objects whose index `index` has `value` (keys and objects read under one gate).
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, UnknownIndex> {
        let _gate = self.lists.read();
        Ok(self
            .keys_of(index, value)?
            .iter()
            .filter_map(|key| self.items.get(key).map(|entry| entry.value().clone()))
            .collect())
    }

    /// The keys of the objects whose index `index` has `value`.
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndex> {
        let _gate = self.lists.read();
        self.keys_of(index, value)
    }

    /// Every value index `index` currently has.
    pub fn index_values(&self, index: &str) -> Result<Vec<String>, UnknownIndex> {
        let _gate = self.lists.read();
        let indexes = self.indexes.read();
        let index = Self::index(&indexes, index)?;
        Ok(index.values.iter().map(|e| e.key().clone()).collect())
    }

    /// Call with the gate held (a gated read must never take it twice: a writer waiting between
    /// the two would deadlock them).
    fn keys_of(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndex> {
        let indexes = self.indexes.read();
        let index = Self::index(&indexes, index)?;
        Ok(index
            .values
            .get(value)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default())
    }

    fn index<'a>(indexes: &'a [Index<K>], name: &str) -> Result<&'a Index<K>, UnknownIndex> {
        indexes
            .iter()
            .find(|index| index.name == name)
            .ok_or_else(|| UnknownIndex(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::index::{self, NAMESPACE_INDEX};

    fn cm(ns: &str, name: &str, app: &str) -> Arc<ConfigMap> {
        let mut object = ConfigMap::default();
        object.metadata.namespace = Some(ns.into());
        object.metadata.name = Some(name.into());
        object.metadata.labels = Some(BTreeMap::from([("app".into(), app.into())]));
        Arc::new(object)
    }

    fn sorted(mut keys: Vec<ObjectKey>) -> Vec<String> {
        keys.sort();
        keys.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn an_index_added_later_indexes_what_is_held_and_a_second_of_one_name_is_refused() {
        let store = Store::<ConfigMap>::default();
        store.insert(cm("ns", "a", "web"));
        store.insert(cm("ns", "b", "db"));
        assert_eq!(
            store.index_keys("app", "web"),
            Err(UnknownIndex("app".into()))
        );
        store.add_index("app", index::label("app")).unwrap();
        assert_eq!(sorted(store.index_keys("app", "web").unwrap()), ["ns/a"]);
        store.insert(cm("ns", "c", "web"));
        store.insert(cm("ns", "a", "db"));
        assert_eq!(sorted(store.index_keys("app", "web").unwrap()), ["ns/c"]);
        assert_eq!(
            store.add_index("app", index::label("other")),
            Err(IndexConflict("app".into()))
        );
        assert_eq!(
            store.add_index(NAMESPACE_INDEX, index::namespace()),
            Err(IndexConflict(NAMESPACE_INDEX.into()))
        );
    }

    #[test]
    fn indexes_follow_inserts_updates_removes_and_replace() {
        let store = Store::new(Indexers::default().with("app", index::label("app")));
        store.insert(cm("a", "one", "web"));
        store.insert(cm("a", "two", "web"));
        store.insert(cm("b", "three", "db"));
        assert_eq!(
            sorted(store.index_keys("app", "web").unwrap()),
            ["a/one", "a/two"]
        );
        assert_eq!(
            sorted(store.index_keys(NAMESPACE_INDEX, "b").unwrap()),
            ["b/three"]
        );

        // An update that changes the label moves the key between index values.
        let old = store.insert(cm("a", "two", "db"));
        assert!(old.is_some());
        assert_eq!(sorted(store.index_keys("app", "web").unwrap()), ["a/one"]);
        assert_eq!(
            sorted(store.index_keys("app", "db").unwrap()),
            ["a/two", "b/three"]
        );

        store.remove("a/one");
        assert!(store.index_keys("app", "web").unwrap().is_empty());
        let mut values = store.index_values("app").unwrap();
        values.sort();
        assert_eq!(values, ["db"], "empty value sets are dropped");

        let removed = store.replace(vec![cm("b", "three", "db"), cm("c", "four", "web")]);
        assert_eq!(removed.len(), 1);
        assert_eq!(sorted(store.list_keys()), ["b/three", "c/four"]);
        assert_eq!(sorted(store.index_keys("app", "web").unwrap()), ["c/four"]);
        assert!(store.index_keys(NAMESPACE_INDEX, "a").unwrap().is_empty());
        assert_eq!(
            store.by_index("nope", "x").unwrap_err(),
            UnknownIndex("nope".into())
        );
    }

    #[test]
    fn version_watchers_are_woken_by_changes_only() {
        let store: Store<ConfigMap> = Store::default();
        let mut versions = store.watch_resource_version();
        assert_eq!(*versions.borrow(), "");
        store.set_resource_version("7");
        assert!(versions.has_changed().unwrap());
        assert_eq!(*versions.borrow_and_update(), "7");
        store.set_resource_version("7");
        assert!(
            !versions.has_changed().unwrap(),
            "the same version wakes nobody"
        );
        store.set_resource_version("9");
        assert_eq!(*versions.borrow_and_update(), "9");
        assert_eq!(store.resource_version(), "9");
    }
}
