//! Index functions: secondary keys under which the [`Store`](crate::Store) can find objects.
//!
//! An index function maps an object to zero or more *index values*; the store keeps, per index,
//! `value → keys of the objects that produced it`, so "all pods of this ReplicaSet" is one lookup
//! instead of a scan. Every store has the [`namespace`] index ([`NAMESPACE_INDEX`]); add others with
//! [`Indexers::with`]. Index functions run on every write, so keep them cheap and pure: the same
//! object must always give the same values.

use std::sync::Arc;

use ferrokube_core::object::Object;

/// Maps an object to its index values.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// The name of the index every store has: objects by namespace (`""` for cluster-scoped ones).
pub const NAMESPACE_INDEX: &str = "namespace";

/// The named index functions of one store. Default: just [`NAMESPACE_INDEX`].
#[must_use]
pub struct Indexers<K> {
    pub(crate) list: Vec<(String, IndexFn<K>)>,
}

impl<K: Object> Default for Indexers<K> {
    fn default() -> Self {
        Indexers {
            list: vec![(NAMESPACE_INDEX.to_string(), namespace())],
        }
    }
}

impl<K> Clone for Indexers<K> {
    fn clone(&self) -> Self {
        Indexers {
            list: self.list.clone(),
        }
    }
}

impl<K: Object> Indexers<K> {
    /// Adds (or replaces) the index `name`.
    pub fn with(mut self, name: &str, function: IndexFn<K>) -> Self {
        self.list.retain(|(existing, _)| existing != name);
        self.list.push((name.to_string(), function));
        self
    }
}

/// The object's namespace (`""` when cluster-scoped).
pub fn namespace<K: Object>() -> IndexFn<K> {
    Arc::new(|object: &K| vec![object.meta().namespace.clone().unwrap_or_default()])
}

/// The value of label `key`, for objects that have it.
pub fn label<K: Object>(key: &str) -> IndexFn<K> {
    let key = key.to_string();
    Arc::new(move |object: &K| {
        object
            .meta()
            .labels
            .as_ref()
            .and_then(|labels| labels.get(&key))
            .map(|value| vec![value.clone()])
            .unwrap_or_default()
    })
}

/// The uid of each owner in `metadata.ownerReferences` ("which objects does this uid own?").
pub fn owner_uid<K: Object>() -> IndexFn<K> {
    Arc::new(|object: &K| {
        object
            .meta()
            .owner_references
            .iter()
            .flatten()
            .map(|owner| owner.uid.clone())
            .collect()
    })
}
