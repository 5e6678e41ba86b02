//! Reading and writing `metadata` on objects held as untyped JSON.
//!
//! The server stores every kind as a `serde_json::Value`, so it can serve a registered CRD-like kind as
//! easily as a Pod. These are the few accessors it needs on `metadata`, plus the values the server
//! stamps on objects: uids and timestamps (from `ferrokube-core`), and `generateName` suffixes.

use std::collections::BTreeMap;

use ferrokube_core::random;
use serde_json::{Map, Value};

/// `object.metadata`, if it is an object.
pub fn metadata(object: &Value) -> Option<&Map<String, Value>> {
    object.get("metadata").and_then(Value::as_object)
}

/// `object.metadata`, created empty if missing or not an object.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let map = match object {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(meta) => meta,
        _ => unreachable!("made an object above"),
    }
}

/// `metadata.<field>` as a string, if present.
pub fn string<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    metadata(object)?.get(field)?.as_str()
}

/// `metadata.name`.
pub fn name(object: &Value) -> Option<&str> {
    string(object, "name").filter(|n| !n.is_empty())
}

/// `metadata.namespace`.
pub fn namespace(object: &Value) -> Option<&str> {
    string(object, "namespace").filter(|n| !n.is_empty())
}

/// `metadata.uid`.
pub fn uid(object: &Value) -> Option<&str> {
    string(object, "uid").filter(|n| !n.is_empty())
}

/// `metadata.labels` as a map, for selector matching (non-string values are skipped).
pub fn labels(object: &Value) -> BTreeMap<String, String> {
    metadata(object)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub fn finalizers(object: &Value) -> Vec<String> {
    metadata(object)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.ownerReferences`, as (apiVersion, kind, name, uid, controller?, blockOwnerDeletion?).
pub fn owner_references(object: &Value) -> Vec<OwnerReference> {
    metadata(object)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| refs.iter().filter_map(OwnerReference::from_json).collect())
        .unwrap_or_default()
}

/// The parts of an ownerReference the garbage collector reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl OwnerReference {
    fn from_json(value: &Value) -> Option<OwnerReference> {
        Some(OwnerReference {
            api_version: value.get("apiVersion")?.as_str()?.to_string(),
            kind: value.get("kind")?.as_str()?.to_string(),
            name: value.get("name")?.as_str()?.to_string(),
            uid: value.get("uid")?.as_str()?.to_string(),
        })
    }
}

/// The current time as the API server writes it: RFC 3339, seconds, UTC (`2026-11-23T05:04:01Z`).
/// (`metadata.uid` is `ferrokube_core::id::uuid_v4`.)
pub use ferrokube_core::time::now_rfc3339 as now;
/// Formats seconds since the Unix epoch as RFC 3339 in UTC.
pub use ferrokube_core::time::rfc3339;

/// `prefix` plus five random characters from the alphabet the API server uses for `generateName`
/// (no vowels, so no words; no look-alike digits).
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    // Names are at most 63 characters from generateName: the prefix is cut to leave room.
    let prefix: String = prefix.chars().take(58).collect();
    // Drawn through `ferrokube_core::random`, so a seeded run (the explorer's) names alike.
    let suffix: String = (0..5)
        .map(|_| char::from(ALPHABET[random::range_u64(0, ALPHABET.len() as u64) as usize]))
        .collect();
    format!("{prefix}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generated_names_keep_the_prefix() {
        let name = generate_name("web-");
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    }

    #[test]
    fn metadata_mut_repairs_a_missing_or_wrong_metadata() {
        let mut object = json!({"metadata": 3});
        metadata_mut(&mut object).insert("name".into(), "a".into());
        assert_eq!(name(&object), Some("a"));
        assert_eq!(labels(&object).len(), 0);
    }
}
