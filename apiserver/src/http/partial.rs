//! Metadata-only answers: `PartialObjectMetadata` and `PartialObjectMetadataList`.
//!
//! # Why this module exists
//!
//! client-go's metadata client (and so controller-runtime's metadata-only caches and
//! `PartialObjectMetadata` clients) asks with `Accept: ...;as=PartialObjectMetadata;g=meta.k8s.io;
//! v=v1` for gets, writes and watches, and `as=PartialObjectMetadataList` for lists. It decodes
//! only those kinds: a full object where it expects one is a decode error (a watch turns it into
//! an `ERROR` event). kube-apiserver converts every answer it asked for so; this module does that
//! conversion for the verb handlers ([`super::verbs`]).
//!
//! # How data flows
//!
//! ```text
//!  Accept ─▶ table::negotiate ─▶ Answer.metadata = PartialMetadata { shape, version }
//!  handler's answer (object | list | watch event object) ─▶ object() / list() ─▶ JSON
//!  shape ≠ answer (a list asked as PartialObjectMetadata, or the reverse) ─▶ 406, after the verb ran
//! ```
//!
//! A Status (a delete's `Success`, a watch's `ERROR`) is never converted, as on kube-apiserver.

use serde_json::{Map, Value, json};

use crate::resource::ResourceType;
use crate::table::TableVersion;

/// `PartialObjectMetadata` of `object`: its `metadata` alone, under the meta.k8s.io kind.
pub fn object(object: &Value, version: TableVersion) -> Value {
    let metadata = object
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    json!({"kind": "PartialObjectMetadata", "apiVersion": version.api_version(), "metadata": metadata})
}

/// `PartialObjectMetadataList` of `items` with the list's own `metadata`; each item is a
/// `PartialObjectMetadata` with its kind and apiVersion (kube-apiserver writes them on these items).
pub fn list<'a>(
    version: TableVersion,
    list_metadata: Value,
    items: impl Iterator<Item = &'a Value>,
) -> Value {
    let items: Vec<Value> = items.map(|item| object(item, version)).collect();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": version.api_version(),
           "metadata": list_metadata, "items": items})
}

/// The Go type kube-apiserver names in its 406 for a shape mismatch: `*core.ConfigMapList`,
/// `*apps.Deployment`; a custom resource's is unstructured. The package is the group's first
/// label (`core` for the core group), which is the internal package's name for the groups served.
pub fn go_type(resource: &ResourceType, list: bool) -> String {
    let suffix = if list { "List" } else { "" };
    if resource.is_custom() {
        return format!("*unstructured.Unstructured{suffix}");
    }
    let package = match resource.group.split('.').next() {
        Some("") | None => "core",
        Some(first) => first,
    };
    format!("*{package}.{}{suffix}", resource.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_metadata_is_kept() {
        let pod = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "a"}, "spec": {}});
        assert_eq!(
            object(&pod, TableVersion::V1),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}})
        );
        let listed = list(
            TableVersion::V1Beta1,
            json!({"resourceVersion": "7"}),
            [&pod].into_iter(),
        );
        assert_eq!(listed["kind"], "PartialObjectMetadataList");
        assert_eq!(listed["items"][0]["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(listed["items"][0].get("spec"), None);
    }
}
