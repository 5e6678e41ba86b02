//! What every layer needs of an object (its metadata), and the key it is stored under.
//!
//! Every informer structure is keyed by [`ObjectKey`]: `namespace/name` for namespaced objects and
//! `name` for cluster-scoped ones, exactly client-go's `MetaNamespaceKeyFunc`. A controller puts the
//! same key in its workqueue, and its worker finds the object again with the key.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An API object: anything with Kubernetes `metadata`. Implemented for every k8s-openapi kind, and
/// by `ferrokube::DynamicObject` for kinds known only at run time.
pub trait Object: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;

    /// The object's `metadata.resourceVersion`, or `""`.
    fn resource_version(&self) -> &str {
        self.meta().resource_version.as_deref().unwrap_or("")
    }

    /// Drops `metadata.managedFields`. A type that keeps them outside its metadata (the
    /// informer's `Compact`) drops them there too.
    fn clear_managed_fields(&mut self) {
        self.meta_mut().managed_fields = None;
    }
}

impl<K> Object for K
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta>
        + Serialize
        + DeserializeOwned
        + Clone
        + Send
        + Sync
        + 'static,
{
    fn meta(&self) -> &ObjectMeta {
        self.metadata()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.metadata_mut()
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object. Cheap to clone (one shared string).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// The key of `namespace`/`name` (`namespace` empty or `None`: cluster-scoped).
    pub fn new(namespace: Option<&str>, name: &str) -> ObjectKey {
        match namespace {
            Some(ns) if !ns.is_empty() => ObjectKey(format!("{ns}/{name}").into()),
            _ => ObjectKey(name.into()),
        }
    }

    /// The key of an object.
    pub fn of<K: Object>(object: &K) -> ObjectKey {
        let meta = object.meta();
        ObjectKey::new(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or(""),
        )
    }

    /// The namespace part (`None` for a cluster-scoped key).
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ObjectKey {
    fn from(key: &str) -> ObjectKey {
        ObjectKey(key.into())
    }
}

impl From<ObjectKey> for Arc<str> {
    fn from(key: ObjectKey) -> Arc<str> {
        key.0
    }
}

impl Deref for ObjectKey {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// What a decode keeps of `metadata.managedFields`, server-side apply's record of which manager
/// set which field: often the largest part of an object (19 of 33 KB of a typical decoded Pod),
/// and read by almost no controller.
///
/// `Drop` never builds them: the decoder skips their bytes as the rest of the object decodes
/// (the client's JSON decode, `ferrokube_client::api::decode`). Informers drop them by default
/// (`ReflectorOptions::managed_fields`), as kube-controller-manager, the scheduler and
/// kube-apiserver's own informers do. Writing back an object decoded without them is safe: an
/// update or a merge patch that carries no `managedFields` leaves the server's as they were (an
/// explicit empty list is what clears them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ManagedFields {
    /// Keep them as the server sent them: what a plain `get`, `list` or `watch` does.
    #[default]
    Keep,
    /// Skip them while decoding: the object's `metadata.managed_fields` is `None`.
    Drop,
}

/// A transform for informers whose handlers never read server-side-apply bookkeeping: drops
/// `metadata.managedFields` and kubectl's `last-applied-configuration` annotation, usually the
/// largest parts of an object a controller caches. Use it with the informer's
/// `InformerBuilder::transform`.
pub fn drop_managed_fields<K: Object>(mut object: K) -> K {
    object.clear_managed_fields();
    if let Some(annotations) = object.meta_mut().annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_back_into_namespace_and_name() {
        let key = ObjectKey::new(Some("default"), "web");
        assert_eq!(key.as_str(), "default/web");
        assert_eq!(key.namespace(), Some("default"));
        assert_eq!(key.name(), "web");
        let cluster = ObjectKey::new(None, "node-1");
        assert_eq!(cluster.as_str(), "node-1");
        assert_eq!(cluster.namespace(), None);
        assert_eq!(cluster.name(), "node-1");
        assert_eq!(ObjectKey::new(Some(""), "x").as_str(), "x");
    }

    #[test]
    fn drop_managed_fields_keeps_everything_else() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
        use std::collections::BTreeMap;
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let pod = k8s_openapi::api::core::v1::Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                labels: Some(BTreeMap::from([pair("a", "b")])),
                annotations: Some(BTreeMap::from([
                    pair("kubectl.kubernetes.io/last-applied-configuration", "{}"),
                    pair("keep", "me"),
                ])),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                ..ObjectMeta::default()
            },
            ..Default::default()
        };
        let stripped = super::drop_managed_fields(pod.clone());
        assert_eq!(stripped.metadata.managed_fields, None);
        let annotations = stripped.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["keep"]);
        assert_eq!(stripped.metadata.labels, pod.metadata.labels);
        assert_eq!(stripped.spec, pod.spec);
    }
}
