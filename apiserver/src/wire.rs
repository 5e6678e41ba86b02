//! JSON as kube-apiserver writes it: keys in the order of its Go structs, not sorted.
//!
//! # Why
//!
//! kube-apiserver encodes a Go struct, so an object comes out as `kind`, `apiVersion`, `metadata`,
//! `spec`, `status`, and its metadata as `name`, `namespace`, `uid`, `resourceVersion`, ... The
//! embedded server holds objects as `serde_json::Value`, whose maps (without serde_json's
//! `preserve_order` feature) are sorted by key: `apiVersion` before `kind`, `status` before `spec`.
//! A client that reads JSON as data does not care; people reading `kubectl get -o json` or a
//! recorded exchange, and tools that compare bodies as text, do.
//!
//! `preserve_order` would keep the order a map was *built* in, for every crate of the workspace,
//! and cost every map an index beside its entries; the objects here are built in many places, in no
//! particular order, so it would still not give Go's order. Instead the order is imposed where
//! bytes are written: once per stored object (at commit, [`encode_object`]), and for the answers
//! built on the fly ([`to_vec`]). Only the levels that carry the familiar fields are reordered —
//! an object's top level, its `metadata` (with its `managedFields` and `ownerReferences`), a
//! list's `items` and a watch event's `object`; deeper maps (a spec's) keep serde_json's sorted
//! order.
//!
//! # How the data flows
//!
//! ```text
//!  Value ──► Ordered (a Serialize view: each level's keys ranked, ties sorted) ──► serde_json bytes
//! ```
//!
//! [`encode_object`] also says where the bytes continue after `kind` and `apiVersion`, so that a
//! list can send a built-in kind's items without them (kube-apiserver's list items of built-in
//! kinds carry no type; see [`untyped_item`]) by slicing, without parsing or re-encoding.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// Which struct a level of the object is, for the rank of its keys.
#[derive(Debug, Clone, Copy)]
enum Level {
    /// An object or a list (`TypeMeta`, then `ObjectMeta`/`ListMeta`, then the rest).
    Object,
    /// `ObjectMeta` or `ListMeta`.
    Metadata,
    /// A `ManagedFieldsEntry` of `metadata.managedFields`.
    ManagedFields,
    /// An `OwnerReference` of `metadata.ownerReferences`.
    OwnerReference,
}

/// The keys of a top level in Go struct order: TypeMeta, `metadata`, the usual `spec`/`status`,
/// a list's `items` and a Status's fields. Keys not named come after these, sorted.
const OBJECT_ORDER: &[&str] = &[
    "kind",
    "apiVersion",
    "metadata",
    "spec",
    "items",
    "status",
    "message",
    "reason",
    "details",
    "code",
];

/// `ObjectMeta`'s fields in their Go order, with `ListMeta`'s (`continue`, `remainingItemCount`,
/// `shardInfo`) after `resourceVersion` as in their own struct (the two never meet).
const METADATA_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "continue",
    "remainingItemCount",
    "shardInfo",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `ManagedFieldsEntry`'s fields in their Go order.
const MANAGED_FIELDS_ORDER: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// `OwnerReference`'s fields in their Go order.
const OWNER_REFERENCE_ORDER: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

impl Level {
    /// Where `key` goes: its place among the named keys, or after all of them.
    fn rank(self, key: &str) -> usize {
        let order = match self {
            Level::Object => OBJECT_ORDER,
            Level::Metadata => METADATA_ORDER,
            Level::ManagedFields => MANAGED_FIELDS_ORDER,
            Level::OwnerReference => OWNER_REFERENCE_ORDER,
        };
        order.iter().position(|k| *k == key).unwrap_or(order.len())
    }

    /// The level of the value under `key` of this level (of each element, for an array), `None`
    /// for a plain (sorted) value.
    fn below(self, key: &str) -> Option<Level> {
        match (self, key) {
            (Level::Object, "metadata") => Some(Level::Metadata),
            (Level::Object, "items") => Some(Level::Object),
            (Level::Metadata, "managedFields") => Some(Level::ManagedFields),
            (Level::Metadata, "ownerReferences") => Some(Level::OwnerReference),
            _ => None,
        }
    }
}

/// A serializable view of a value at one level.
struct Ordered<'a> {
    value: &'a Value,
    level: Level,
}

/// The elements of an array, each at one level (a list's `items`, `managedFields`).
struct Elements<'a> {
    items: &'a [Value],
    level: Level,
}

impl Serialize for Elements<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.items.len()))?;
        for value in self.items {
            seq.serialize_element(&Ordered {
                value,
                level: self.level,
            })?;
        }
        seq.end()
    }
}

/// True for an object kube-apiserver encodes from a Go struct: a built-in kind (one the generated
/// protobuf table knows), `meta.k8s.io`'s (Table, PartialObjectMetadata) and `Status`. A custom
/// object is a map to it (`unstructured`), written sorted, as serde_json writes it.
fn go_typed(map: &Map<String, Value>) -> bool {
    let text = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    api_version.starts_with("meta.k8s.io/")
        || ferrokube_core::protobuf::top_level(api_version, kind).is_some()
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let map = match self.value {
            Value::Object(map) if !matches!(self.level, Level::Object) || go_typed(map) => map,
            plain => return plain.serialize(serializer),
        };
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        // Stable: keys of one rank keep the map's sorted order.
        entries.sort_by_key(|(key, _)| self.level.rank(key));
        let mut out = serializer.serialize_map(Some(entries.len()))?;
        for (key, value) in entries {
            match (self.level.below(key), value) {
                (Some(level), Value::Array(items)) => {
                    out.serialize_entry(key, &Elements { items, level })?
                }
                (Some(level), _) => out.serialize_entry(key, &Ordered { value, level })?,
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// `value` as JSON bytes in Go struct order (see the [module docs](self)).
pub fn to_vec(value: &Value) -> Vec<u8> {
    let ordered = Ordered {
        value,
        level: Level::Object,
    };
    // Serializing a `Value` into a Vec cannot fail: its keys are strings and it holds no
    // non-finite numbers; an empty body is what a failure would give.
    serde_json::to_vec(&ordered).unwrap_or_default()
}

/// `value` as a JSON string in Go struct order.
pub fn to_string(value: &Value) -> String {
    String::from_utf8(to_vec(value)).unwrap_or_default()
}

/// A watch event's line (without its newline): `type` before `object`, as kube-apiserver's
/// `WatchEvent` struct has them, the object in Go order.
pub fn event(kind: &str, object: &Value) -> Vec<u8> {
    let mut line = Vec::with_capacity(64);
    line.extend_from_slice(b"{\"type\":");
    line.extend_from_slice(&serde_json::to_vec(kind).unwrap_or_default());
    line.extend_from_slice(b",\"object\":");
    line.extend_from_slice(&to_vec(object));
    line.push(b'}');
    line
}

/// A list's JSON around its items: what comes before the first item (up to `"items":[`) and after
/// the last (from `]`), for a list `head` without `items`. A built-in kind's list has its items
/// after `metadata`, as Go's struct; a custom kind's, as a sorted map, between `apiVersion` and
/// `kind`.
pub fn list_frame(head: &Value) -> (Vec<u8>, Vec<u8>) {
    let map = match head.as_object() {
        Some(map) if !go_typed(map) => map,
        _ => {
            let mut before = to_vec(head);
            // `{...}`: reopen it (an empty head `{}` has no entry to follow).
            before.pop();
            if before.len() > 1 {
                before.push(b',');
            }
            before.extend_from_slice(b"\"items\":[");
            return (before, b"]}".to_vec());
        }
    };
    let entries = |after: bool| -> Vec<u8> {
        let part: Map<String, Value> = map
            .iter()
            .filter(|(key, _)| (key.as_str() > "items") == after)
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let mut text = serde_json::to_vec(&part).unwrap_or_else(|_| b"{}".to_vec());
        // Without the braces.
        text.pop();
        text.remove(0);
        text
    };
    let (first, last) = (entries(false), entries(true));
    let mut before = b"{".to_vec();
    before.extend_from_slice(&first);
    if !first.is_empty() {
        before.push(b',');
    }
    before.extend_from_slice(b"\"items\":[");
    let mut after = b"]".to_vec();
    if !last.is_empty() {
        after.push(b',');
        after.extend_from_slice(&last);
    }
    after.push(b'}');
    (before, after)
}

/// A stored object's JSON and where it continues after its `kind` and `apiVersion`.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub json: Vec<u8>,
    /// The offset just past the `kind` and `apiVersion` entries of a built-in kind's object (1,
    /// just past `{`, without them); 0 for a custom object, whose type stays in its list items.
    /// Invariant: when above 1, `json[..untyped_from]` is `{` and those entries only, so `{`
    /// followed by `json[untyped_from..]` minus a leading comma is the object without them.
    pub untyped_from: usize,
}

/// Encodes an object to store: its JSON in Go order and where its type entries end.
pub fn encode_object(value: &Value) -> Encoded {
    let json = to_vec(value);
    let untyped_from = match value.as_object() {
        // A custom object is written sorted: nothing to cut (its list items keep their type).
        Some(map) if go_typed(map) => {
            // The entries that come first: `kind`, `apiVersion` (ranked so), each `"key":value`.
            let typed: usize = ["kind", "apiVersion"]
                .iter()
                .filter_map(|key| map.get(*key).map(|v| (key, v)))
                .map(|(key, v)| key.len() + 3 + serde_json::to_vec(v).map_or(0, |b| b.len()))
                .sum();
            let count = ["kind", "apiVersion"]
                .iter()
                .filter(|key| map.contains_key(**key))
                .count();
            // `{`, the entries, and the comma between the two.
            1 + typed + count.saturating_sub(1)
        }
        _ => 0,
    };
    Encoded { json, untyped_from }
}

/// The stored `json` of an object without its `kind` and `apiVersion` (see [`Encoded`]): how a
/// built-in kind's object appears among a list's items. A custom object's comes whole.
pub fn untyped_item(json: &[u8], untyped_from: usize) -> impl Iterator<Item = &[u8]> {
    let (head, rest): (&[u8], &[u8]) = match json.get(untyped_from..) {
        Some(rest) if untyped_from > 1 => (b"{", rest.strip_prefix(b",").unwrap_or(rest)),
        _ => (b"", json),
    };
    [head, rest].into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(parts: impl Iterator<Item = impl AsRef<[u8]>>) -> String {
        let bytes: Vec<u8> = parts.flat_map(|p| p.as_ref().to_vec()).collect();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn objects_come_out_in_go_struct_order() {
        let pod = json!({"status": {"phase": "Pending"}, "spec": {"b": 1, "a": 2},
            "metadata": {"uid": "u", "name": "p", "namespace": "n", "labels": {"z": "1", "a": "2"},
                         "resourceVersion": "3",
                         "ownerReferences": [{"uid": "o", "kind": "K", "apiVersion": "v1", "name": "k"}],
                         "managedFields": [{"time": "t", "operation": "Update", "manager": "m"}]},
            "kind": "Pod", "apiVersion": "v1", "zeta": 1, "alpha": 2});
        assert_eq!(
            to_string(&pod),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"n","uid":"u","resourceVersion":"3","labels":{"a":"2","z":"1"},"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"k","uid":"o"}],"managedFields":[{"manager":"m","operation":"Update","time":"t"}]},"spec":{"a":2,"b":1},"status":{"phase":"Pending"},"alpha":2,"zeta":1}"#
        );
    }

    #[test]
    fn lists_statuses_and_events_are_ordered_too() {
        let list = json!({"items": [{"metadata": {"name": "a"}, "apiVersion": "v1", "kind": "Pod"}],
                          "metadata": {"resourceVersion": "1", "continue": "c"},
                          "apiVersion": "v1", "kind": "PodList"});
        assert_eq!(
            to_string(&list),
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1","continue":"c"},"items":[{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}]}"#
        );
        let status = json!({"code": 404, "reason": "NotFound", "message": "m", "status": "Failure",
                            "metadata": {}, "apiVersion": "v1", "kind": "Status", "details": {}});
        assert_eq!(
            to_string(&status),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"NotFound","details":{},"code":404}"#
        );
        let object =
            json!({"metadata": {}, "type": "Opaque", "kind": "Secret", "apiVersion": "v1"});
        assert_eq!(
            String::from_utf8(event("ADDED", &object)).expect("utf-8"),
            r#"{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{},"type":"Opaque"}}"#
        );
    }

    #[test]
    fn custom_objects_are_written_sorted_as_kube_apiserver_writes_unstructured_ones() {
        let widget = json!({"kind": "Widget", "apiVersion": "example.com/v1", "spec": {},
                            "metadata": {"uid": "u", "name": "w"}});
        assert_eq!(
            to_string(&widget),
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","uid":"u"},"spec":{}}"#
        );
        let encoded = encode_object(&widget);
        assert_eq!(encoded.untyped_from, 0);
        assert_eq!(
            text(untyped_item(&encoded.json, encoded.untyped_from)),
            to_string(&widget)
        );
    }

    #[test]
    fn list_frames_place_items_as_the_list_is_written() {
        let frame = |head: Value| {
            let (before, after) = list_frame(&head);
            format!(
                "{}1,2{}",
                String::from_utf8(before).expect("utf-8"),
                String::from_utf8(after).expect("utf-8")
            )
        };
        assert_eq!(
            frame(
                json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"}})
            ),
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[1,2]}"#
        );
        assert_eq!(
            frame(json!({"kind": "WidgetList", "apiVersion": "x.io/v1", "metadata": {}})),
            r#"{"apiVersion":"x.io/v1","items":[1,2],"kind":"WidgetList","metadata":{}}"#
        );
        assert_eq!(frame(json!({})), r#"{"items":[1,2]}"#);
    }

    #[test]
    fn a_list_item_is_the_stored_object_without_its_type() {
        for (object, untyped) in [
            (
                json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p\"q"}}),
                r#"{"metadata":{"name":"p\"q"}}"#,
            ),
            (
                json!({"kind": "Deployment", "apiVersion": "apps/v1", "spec": {}}),
                r#"{"spec":{}}"#,
            ),
            (json!({"kind": "ConfigMap", "apiVersion": "v1"}), "{}"),
            (json!({"metadata": {}}), r#"{"metadata":{}}"#),
            (json!({}), "{}"),
        ] {
            let encoded = encode_object(&object);
            assert_eq!(
                text(untyped_item(&encoded.json, encoded.untyped_from)),
                untyped,
                "{object}"
            );
        }
    }
}
