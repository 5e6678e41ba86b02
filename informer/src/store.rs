//! The informer's cache: every object of one resource, by key, with secondary indexes
//! (client-go's `ThreadSafeStore` + `Indexer`).
//!
//! Exactly one writer (the informer's delta processor, or whoever owns the store) changes it; any
//! number of readers (Listers, workers) read it at the same time. Objects are stored as `Arc<K>` and
//! never mutated: a write replaces the `Arc`, a read clones it (one atomic increment), so readers
//! share objects without the deep copies client-go asks of its callers.
//!
//! ## Why reads never wait for a relist
//!
//! client-go guards the whole map with one RWMutex and rebuilds it under the write lock on a
//! relist, so every read waits for the rebuild. Here the items live in a sharded concurrent map
//! ([`DashMap`]): a write locks one shard for the length of one insert, and a relist is applied as
//! one such write per changed key. A read waits at most for one key's insert, never for a whole
//! relist. The price: a `list` taken while a relist is applied may see some keys before it and
//! some after (each object is itself whole and at a version the server reported).

use std::collections::HashSet;
use std::sync::Arc;

use dashmap::DashMap;
use foldhash::fast::RandomState;
use parking_lot::Mutex;

use crate::index::{IndexFn, Indexers};
use crate::object::{Object, ObjectKey};

/// A read asked for an index the store does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the store has no index named {0:?}")]
pub struct UnknownIndex(pub String);

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
    indexes: Vec<Index<K>>,
    /// Held by writers, so that an item and its index entries change together.
    writer: Mutex<()>,
}

impl<K: Object> Default for Store<K> {
    fn default() -> Self {
        Store::new(Indexers::default())
    }
}

impl<K: Object> Store<K> {
    pub fn new(indexers: Indexers<K>) -> Store<K> {
        Store {
            items: DashMap::with_hasher(RandomState::default()),
            indexes: indexers
                .list
                .into_iter()
                .map(|(name, function)| Index {
                    name,
                    function,
                    values: DashMap::with_hasher(RandomState::default()),
                })
                .collect(),
            writer: Mutex::new(()),
        }
    }

    /// Adds or replaces the object under its key; returns the previous one.
    pub fn insert(&self, object: Arc<K>) -> Option<Arc<K>> {
        let _writer = self.writer.lock();
        self.insert_locked(ObjectKey::of(&*object), object)
    }

    /// Removes the object stored under `key`, and returns it.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let _writer = self.writer.lock();
        let (key, old) = self.items.remove(key)?;
        self.unindex(&key, &old, None);
        Some(old)
    }

    /// Makes the store hold exactly `objects` (a relist); returns the objects it removed.
    pub fn replace(&self, objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
        let _writer = self.writer.lock();
        let mut listed = HashSet::with_capacity(objects.len());
        for object in objects {
            let key = ObjectKey::of(&*object);
            listed.insert(key.clone());
            self.insert_locked(key, object);
        }
        let gone: Vec<ObjectKey> = self
            .items
            .iter()
            .filter(|entry| !listed.contains(entry.key()))
            .map(|entry| entry.key().clone())
            .collect();
        let mut removed = Vec::with_capacity(gone.len());
        for key in gone {
            if let Some((key, old)) = self.items.remove(&key) {
                self.unindex(&key, &old, None);
                removed.push(old);
            }
        }
        removed
    }

    fn insert_locked(&self, key: ObjectKey, object: Arc<K>) -> Option<Arc<K>> {
        let old = self.items.insert(key.clone(), object.clone());
        for index in &self.indexes {
            let new_values = (index.function)(&object);
            if let Some(old) = &old {
                self.unindex_one(index, &key, old, Some(&new_values));
            }
            for value in new_values {
                index.values.entry(value).or_default().insert(key.clone());
            }
        }
        old
    }

    /// Drops `key` from the index sets of `old`'s values, except those in `keep`.
    fn unindex(&self, key: &ObjectKey, old: &K, keep: Option<&[String]>) {
        for index in &self.indexes {
            self.unindex_one(index, key, old, keep);
        }
    }

    fn unindex_one(&self, index: &Index<K>, key: &ObjectKey, old: &K, keep: Option<&[String]>) {
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

    /// The object stored under `key` (`namespace/name`, or `name` if cluster-scoped).
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.items.get(key).map(|entry| entry.value().clone())
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.items
            .iter()
            .map(|entry| entry.value().clone())
            .collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.items.iter().map(|entry| entry.key().clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The objects whose index `index` has `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, UnknownIndex> {
        Ok(self
            .index_keys(index, value)?
            .iter()
            .filter_map(|key| self.get_by_key(key))
            .collect())
    }

    /// The keys of the objects whose index `index` has `value`.
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndex> {
        let index = self.index(index)?;
        Ok(index
            .values
            .get(value)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// Every value index `index` currently has.
    pub fn index_values(&self, index: &str) -> Result<Vec<String>, UnknownIndex> {
        let index = self.index(index)?;
        Ok(index.values.iter().map(|e| e.key().clone()).collect())
    }

    fn index(&self, name: &str) -> Result<&Index<K>, UnknownIndex> {
        self.indexes
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
}
