//! The three patch formats of `PATCH`: JSON merge patch, JSON patch and strategic merge patch.
//!
//! - **JSON merge patch** (RFC 7386, `application/merge-patch+json`): objects merge key by key, `null`
//!   deletes, anything else (lists included) replaces.
//! - **JSON patch** (RFC 6902, `application/json-patch+json`): a list of `add`, `remove`, `replace`,
//!   `move`, `copy` and `test` operations on JSON pointers.
//! - **Strategic merge patch** (`application/strategic-merge-patch+json`, kubectl's default): a merge
//!   patch that merges lists of objects by a key instead of replacing them, e.g. `containers` by `name`,
//!   so `kubectl label` or `apply` does not wipe a list. The real server reads the keys from the Go
//!   types; here they are a table of the common fields ([`merge_key`]). The `$patch: delete|replace`,
//!   `$setElementOrder/…`, `$retainKeys` and `$deleteFromPrimitiveList/…` directives are understood.
//!
//! Server-side apply (`application/apply-patch+yaml`) is answered with 415.

use serde_json::Value;

use crate::status::StatusError;

/// A supported patch format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
}

impl PatchType {
    /// The format of a `Content-Type`, or 415.
    pub fn from_content_type(content_type: &str) -> Result<PatchType, StatusError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            other => Err(StatusError::unsupported_media_type(other)),
        }
    }
}

/// Applies `patch` (already parsed) to `target`.
pub fn apply(kind: PatchType, target: &Value, patch: &Value) -> Result<Value, StatusError> {
    match kind {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(StatusError::bad_request(
                    "json: cannot unmarshal a non-object merge patch into an object",
                ));
            }
            Ok(merge(target, patch))
        }
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(StatusError::bad_request(
                    "the strategic merge patch must be a JSON object",
                ));
            }
            Ok(strategic(target, patch))
        }
        PatchType::Json => json_patch(target, patch),
    }
}

/// RFC 7386.
fn merge(target: &Value, patch: &Value) -> Value {
    let Some(patch_map) = patch.as_object() else {
        return patch.clone();
    };
    let mut result = target.as_object().cloned().unwrap_or_default();
    for (key, value) in patch_map {
        if value.is_null() {
            result.remove(key);
        } else {
            let merged = merge(result.get(key).unwrap_or(&Value::Null), value);
            result.insert(key.clone(), merged);
        }
    }
    Value::Object(result)
}

/// The key that identifies elements of the list field `field` in a strategic merge, for the common
/// fields of the built-in kinds; `None` means the list is replaced whole (or, for `finalizers`, merged
/// as a set).
pub fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "hostAliases" => "ip",
        "ports" => "containerPort",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// Primitive lists merged as sets rather than replaced.
fn is_merged_set(field: &str) -> bool {
    field == "finalizers"
}

fn strategic(target: &Value, patch: &Value) -> Value {
    let Some(patch_map) = patch.as_object() else {
        return patch.clone();
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch_map.clone();
        replaced.remove("$patch");
        return Value::Object(replaced);
    }
    let mut result = target.as_object().cloned().unwrap_or_default();
    let retain: Option<Vec<String>> =
        patch_map
            .get("$retainKeys")
            .and_then(Value::as_array)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            });
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            result.remove(key);
            continue;
        }
        let current = result.get(key).cloned().unwrap_or(Value::Null);
        let merged = match (value, &current) {
            (Value::Object(_), _) => strategic(&current, value),
            (Value::Array(items), Value::Array(existing)) => merge_list(key, existing, items),
            _ => value.clone(),
        };
        result.insert(key.clone(), merged);
    }
    for (key, value) in patch_map {
        if let Some(list) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(existing)), Some(remove)) =
                (result.get_mut(list), value.as_array())
            {
                existing.retain(|item| !remove.contains(item));
            }
        }
    }
    if let Some(retain) = retain {
        result.retain(|k, _| retain.contains(k));
    }
    Value::Object(result)
}

fn merge_list(field: &str, existing: &[Value], patch: &[Value]) -> Value {
    if is_merged_set(field) {
        let mut merged = existing.to_vec();
        for item in patch {
            if !merged.contains(item) {
                merged.push(item.clone());
            }
        }
        return Value::Array(merged);
    }
    let Some(key) = merge_key(field) else {
        return Value::Array(patch.iter().filter(|v| !is_directive(v)).cloned().collect());
    };
    let mut merged: Vec<Value> = existing.to_vec();
    for item in patch {
        let id = item.get(key);
        let position = merged.iter().position(|m| id.is_some() && m.get(key) == id);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                merged.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                let updated = strategic(&merged[i], item);
                merged[i] = updated;
            }
            (None, false) => merged.push(strategic(&Value::Null, item)),
        }
    }
    Value::Array(merged)
}

fn is_directive(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.keys().all(|k| k.starts_with('$')))
}

/// RFC 6902.
fn json_patch(target: &Value, patch: &Value) -> Result<Value, StatusError> {
    let Some(operations) = patch.as_array() else {
        return Err(StatusError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    };
    let mut document = target.clone();
    for operation in operations {
        let op = operation.get("op").and_then(Value::as_str).unwrap_or("");
        let path = operation.get("path").and_then(Value::as_str);
        let from = operation.get("from").and_then(Value::as_str);
        let value = operation.get("value");
        let failed = |why: &str| {
            StatusError::invalid_patch(format!(
                "the server rejected our request due to an error in our request: {op} operation failed: {why}"
            ))
        };
        match (op, path) {
            ("add", Some(path)) => {
                let value = value.ok_or_else(|| failed("missing value"))?;
                add(&mut document, path, value.clone()).map_err(|e| failed(&e))?;
            }
            ("remove", Some(path)) => {
                remove(&mut document, path).map_err(|e| failed(&e))?;
            }
            ("replace", Some(path)) => {
                let value = value.ok_or_else(|| failed("missing value"))?;
                remove(&mut document, path).map_err(|e| failed(&e))?;
                add(&mut document, path, value.clone()).map_err(|e| failed(&e))?;
            }
            ("move", Some(path)) => {
                let from = from.ok_or_else(|| failed("missing from"))?;
                let moved = remove(&mut document, from).map_err(|e| failed(&e))?;
                add(&mut document, path, moved).map_err(|e| failed(&e))?;
            }
            ("copy", Some(path)) => {
                let from = from.ok_or_else(|| failed("missing from"))?;
                let copied = document
                    .pointer(from)
                    .cloned()
                    .ok_or_else(|| failed(&format!("path {from:?} not found")))?;
                add(&mut document, path, copied).map_err(|e| failed(&e))?;
            }
            ("test", Some(path)) => {
                if document.pointer(path) != value {
                    return Err(failed(&format!("testing value {path} failed")));
                }
            }
            _ => {
                return Err(StatusError::bad_request(format!("Unexpected kind: {op}")));
            }
        }
    }
    Ok(document)
}

/// Splits a JSON pointer into its parent pointer and unescaped last token.
fn split_pointer(path: &str) -> Result<(&str, String), String> {
    let at = path
        .rfind('/')
        .ok_or_else(|| format!("invalid path {path:?}"))?;
    let token = path[at + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..at], token))
}

fn add(document: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *document = value;
        return Ok(());
    }
    let (parent, token) = split_pointer(path)?;
    match document.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(token, value);
            Ok(())
        }
        Some(Value::Array(list)) => {
            let index = if token == "-" {
                list.len()
            } else {
                token
                    .parse::<usize>()
                    .map_err(|_| format!("invalid index {token:?}"))?
            };
            if index > list.len() {
                return Err(format!("index {index} out of range"));
            }
            list.insert(index, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

fn remove(document: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, token) = split_pointer(path)?;
    let missing = || format!("doc is missing key: {path:?}");
    match document.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(&token).ok_or_else(missing),
        Some(Value::Array(list)) => {
            let index = token.parse::<usize>().map_err(|_| missing())?;
            if index >= list.len() {
                return Err(missing());
            }
            Ok(list.remove(index))
        }
        _ => Err(missing()),
    }
}

/// Keeps map keys in a stable place; used by tests to compare.
#[cfg(test)]
fn object(pairs: &[(&str, Value)]) -> Value {
    let map: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_replaces_lists_and_deletes_nulls() {
        let target = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        let patched = apply(
            PatchType::Merge,
            &target,
            &json!({"a": {"c": null, "d": 3}, "l": [3]}),
        );
        assert_eq!(
            patched.expect("valid"),
            json!({"a": {"b": 1, "d": 3}, "l": [3]})
        );
    }

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let target = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
                            "metadata": {"finalizers": ["f1"]}});
        let patch = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}],
                                    "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
                           "metadata": {"finalizers": ["f2"]}});
        let patched = apply(PatchType::Strategic, &target, &patch).expect("valid");
        let images: Vec<&str> = patched["spec"]["containers"]
            .as_array()
            .map(|l| l.iter().filter_map(|c| c["image"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(images, ["x", "z", "w"]);
        assert_eq!(patched["metadata"]["finalizers"], json!(["f1", "f2"]));
        let deleted = apply(
            PatchType::Strategic,
            &patched,
            &json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        );
        assert_eq!(
            deleted.expect("valid")["spec"]["containers"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn json_patch_operations_and_a_failed_test() {
        let target = object(&[("a", json!([1, 2])), ("b", json!({"c/d": 1}))]);
        let ops = json!([
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "replace", "path": "/b/c~1d", "value": 2},
            {"op": "copy", "from": "/a/0", "path": "/e"},
            {"op": "remove", "path": "/a/1"},
            {"op": "test", "path": "/e", "value": 1}
        ]);
        let patched = apply(PatchType::Json, &target, &ops).expect("valid");
        assert_eq!(patched, json!({"a": [1, 3], "b": {"c/d": 2}, "e": 1}));
        let failing = json!([{"op": "test", "path": "/e", "value": 9}]);
        let error = apply(PatchType::Json, &patched, &failing).expect_err("test fails");
        assert_eq!(error.code, 422);
        let missing = json!([{"op": "remove", "path": "/nope"}]);
        assert!(apply(PatchType::Json, &patched, &missing).is_err());
    }

    #[test]
    fn apply_patches_are_unsupported() {
        let error = PatchType::from_content_type("application/apply-patch+yaml").expect_err("415");
        assert_eq!(error.code, 415);
    }
}
