//! Listers: the read side of an informer, as a controller's worker uses it (client-go's generated
//! `PodLister`, `PodNamespaceLister`, for every type at once).
//!
//! A worker reads the cache, never the server: `lister.namespace("default").get("web")` is a
//! lookup in memory. Reads return `Arc<K>`, shared with the store.
//!
//! **Cost.** `get` is one hash lookup under one shard's read lock of the store (no global lock, no
//! copy: an `Arc` increment). `list` over a namespace uses the namespace index, so it touches only
//! that namespace's objects; `list` over everything visits every shard. A label selector is
//! matched against each visited object. Reads run concurrently with each other and with the
//! informer's writes; they wait at most for a write to the same shard.

use std::sync::Arc;

use crate::index::NAMESPACE_INDEX;
use crate::store::Store;
use ferrokube_core::labels::LabelSelector;
use ferrokube_core::object::{Object, ObjectKey};

/// See the [module docs](self).
pub struct Lister<K> {
    store: Arc<Store<K>>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister {
            store: self.store.clone(),
        }
    }
}

impl<K: Object> Lister<K> {
    pub fn new(store: Arc<Store<K>>) -> Lister<K> {
        Lister { store }
    }

    /// The object `namespace`/`name` (`namespace` `None` for a cluster-scoped object).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.store.get_by_key(&ObjectKey::new(namespace, name))
    }

    /// Every object the selector matches, in all namespaces.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        let mut objects = self.store.list();
        if !selector.is_everything() {
            objects.retain(|o| selector.matches(o.meta().labels.as_ref()));
        }
        objects
    }

    /// The objects of one namespace.
    pub fn namespace(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            store: self.store.clone(),
            namespace: namespace.to_string(),
        }
    }
}

/// A [`Lister`] limited to one namespace.
pub struct NamespaceLister<K> {
    store: Arc<Store<K>>,
    namespace: String,
}

impl<K: Object> NamespaceLister<K> {
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.store
            .get_by_key(&ObjectKey::new(Some(&self.namespace), name))
    }

    /// The namespace's objects that the selector matches.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        let mut objects = match self.store.by_index(NAMESPACE_INDEX, &self.namespace) {
            Ok(objects) => objects,
            // A store built without the namespace index: filter a full list instead.
            Err(_) => self
                .store
                .list()
                .into_iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(&self.namespace))
                .collect(),
        };
        if !selector.is_everything() {
            objects.retain(|o| selector.matches(o.meta().labels.as_ref()));
        }
        objects
    }
}
