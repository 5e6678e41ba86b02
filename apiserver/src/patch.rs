//! The three patch formats of `PATCH`: JSON merge patch, JSON patch and strategic merge patch.
//!
//! - **JSON merge patch** (RFC 7386, `application/merge-patch+json`): objects merge key by key, `null`
//!   deletes, anything else (lists included) replaces. Applied by the `json-patch` crate.
//! - **JSON patch** (RFC 6902, `application/json-patch+json`): a list of `add`, `remove`, `replace`,
//!   `move`, `copy` and `test` operations on JSON pointers. Applied by the `json-patch` crate; the
//!   statuses of its errors are ours ([`apply`]).
//! - **Strategic merge patch** (`application/strategic-merge-patch+json`, kubectl's default): a merge
//!   patch that merges lists of objects by a key instead of replacing them, e.g. `containers` by `name`,
//!   so `kubectl label` or `apply` does not wipe a list. The real server reads the keys from the Go
//!   types; here they are a table of the common fields ([`merge_key`]). The `$patch: delete|replace`,
//!   `$setElementOrder/…`, `$retainKeys` and `$deleteFromPrimitiveList/…` directives are understood.
//!
//! Server-side apply (`application/apply-patch+yaml`) is not a patch format here: [`crate::apply`]
//! handles it before these are consulted (so this module answers 415 for it).

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
            let mut merged = target.clone();
            json_patch::merge(&mut merged, patch);
            Ok(merged)
        }
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(StatusError::bad_request(
                    "the strategic merge patch must be a JSON object",
                ));
            }
            Ok(strategic(target, patch))
        }
        PatchType::Json => apply_json_patch(target, patch),
    }
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

/// RFC 6902, by the `json-patch` crate. A body that is not a list is a 400; so is an operation of an unknown kind or without a `path`. Any other malformed operation (no `value`,
/// no `from`, a path that is not a JSON pointer) and any operation that fails is a 422 `Invalid`.
fn apply_json_patch(target: &Value, patch: &Value) -> Result<Value, StatusError> {
    use serde::Deserialize;

    let Some(operations) = patch.as_array() else {
        return Err(StatusError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    };
    let failed = |op: &str, why: &dyn std::fmt::Display| {
        StatusError::invalid_patch(format!(
            "the server rejected our request due to an error in our request: {op} operation failed{why}"
        ))
    };
    let mut decoded = Vec::with_capacity(operations.len());
    for operation in operations {
        match json_patch::PatchOperation::deserialize(operation) {
            Ok(decoded_operation) => decoded.push(decoded_operation),
            Err(error) => {
                let op = operation.get("op").and_then(Value::as_str).unwrap_or("");
                let known = ["add", "remove", "replace", "move", "copy", "test"].contains(&op);
                if !known || !operation.get("path").is_some_and(Value::is_string) {
                    return Err(StatusError::bad_request(format!("Unexpected kind: {op}")));
                }
                return Err(failed(op, &format_args!(": {error}")));
            }
        }
    }
    let mut document = target.clone();
    // The target is our own copy, thrown away on an error: no need for the crate's undo log.
    json_patch::patch_unsafe(&mut document, &decoded).map_err(|error| {
        let op = decoded
            .get(error.operation)
            .map_or("", |operation| operation_name(operation));
        let path = error.path.as_str();
        failed(op, &format_args!(" at {path:?}: {}", error.kind))
    })?;
    Ok(document)
}

fn operation_name(operation: &json_patch::PatchOperation) -> &'static str {
    use json_patch::PatchOperation as Op;
    match operation {
        Op::Add(_) => "add",
        Op::Remove(_) => "remove",
        Op::Replace(_) => "replace",
        Op::Move(_) => "move",
        Op::Copy(_) => "copy",
        Op::Test(_) => "test",
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
        assert_eq!(
            apply(PatchType::Json, &patched, &missing).map_err(|e| e.code),
            Err(422)
        );
        let statuses = [
            (json!({"op": "add"}), 400),
            (json!([{"op": "frobnicate", "path": "/a"}]), 400),
            (json!([{"op": "add", "value": 1}]), 400),
            (json!(["add"]), 400),
            (json!([{"op": "add", "path": "/x"}]), 422),
            (json!([{"op": "copy", "path": "/x"}]), 422),
            (json!([{"op": "add", "path": "no-slash", "value": 1}]), 422),
            (json!([{"op": "move", "from": "/b", "path": "/b/c"}]), 422),
            (json!([{"op": "add", "path": "/a/7", "value": 1}]), 422),
        ];
        for (operations, code) in statuses {
            let answer = apply(PatchType::Json, &patched, &operations).map_err(|e| e.code);
            assert_eq!(answer, Err(code), "{operations}");
        }
        let whole = json!([{"op": "replace", "path": "", "value": {"z": 1}}]);
        assert_eq!(
            apply(PatchType::Json, &patched, &whole).ok(),
            Some(json!({"z": 1}))
        );
    }

    #[test]
    fn apply_patches_are_unsupported() {
        let error = PatchType::from_content_type("application/apply-patch+yaml").expect_err("415");
        assert_eq!(error.code, 415);
    }
}
