//! Unknown fields in a write's body, and the `fieldValidation` query parameter that says what to do
//! about them.
//!
//! # Why this module exists
//!
//! kube-apiserver decodes a body into its Go type (or, for a custom resource, checks it against the
//! CRD's structural schema); a field the type does not have is *unknown*. 1.37 then follows the
//! request's `fieldValidation`:
//!
//! | value | unknown fields |
//! |---|---|
//! | `Strict` | 400 `BadRequest`: `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error: unknown field "spec.foo", ...` |
//! | `Warn` (the default) | dropped, each named in a `Warning: 299 - "unknown field \"spec.foo\""` header |
//! | `Ignore` | dropped silently |
//!
//! controller-runtime's clients (and `kubectl --validate`) rely on this to report typos.
//!
//! # How data flows
//!
//! ```text
//!  body (create, update; a merge patch's body) ─▶ strip_unknown(resource, body) ─▶ paths, removed
//!      paths empty ─▶ the write goes on
//!      Strict ─▶ 400 now, nothing written      Warn ─▶ Warning headers on the answer      Ignore ─▶ —
//! ```
//!
//! What is known: for a custom resource, its schema ([`crate::schema::Schema::strip_unknown`]:
//! what pruning would drop, `metadata` included); for a built-in kind, the fields listed in
//! [`builtin_shape`] (top-level fields of the common kinds, an ObjectMeta's fields, a Node's spec).
//! A built-in kind or subtree not listed is taken as it is (no field unknown), a known difference:
//! kube-apiserver knows every field of every built-in type. Paths are written in the object's key
//! order (sorted here; kube-apiserver follows the body's order). Duplicate fields are not detected
//! (serde keeps the last).

use serde_json::{Map, Value};

use crate::resource::ResourceType;
use crate::status::StatusError;

/// The `fieldValidation` directive of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them and warn (the default of kube-apiserver 1.37).
    #[default]
    Warn,
    /// Refuse the write.
    Strict,
}

impl FieldValidation {
    /// The query parameter's value; kube-apiserver refuses a value it does not know with a 400.
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, StatusError> {
        match value {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(StatusError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn, Strict: got {other:?}"
            ))),
        }
    }

    /// Applies the directive to the unknown fields of a body: the warnings to send, or the 400 of
    /// a strict write.
    pub fn judge(
        self,
        resource: &ResourceType,
        unknown: Vec<String>,
    ) -> Result<Vec<String>, StatusError> {
        if unknown.is_empty() {
            return Ok(Vec::new());
        }
        let named: Vec<String> = unknown
            .iter()
            .map(|path| format!("unknown field {path:?}"))
            .collect();
        match self {
            FieldValidation::Ignore => Ok(Vec::new()),
            FieldValidation::Warn => Ok(named),
            FieldValidation::Strict => Err(StatusError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                named.join(", "),
                kind = resource.kind,
                version = resource.version,
            ))),
        }
    }
}

/// Removes the unknown fields of `body`, a whole object of `resource` (or a merge patch of one),
/// and returns their paths (`spec.containers[0].bar`).
pub fn strip_unknown(resource: &ResourceType, body: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(schema) = &resource.schema {
        schema.strip_unknown(body, &mut unknown);
        return unknown;
    }
    if let Some(shape) = builtin_shape(resource) {
        shape.strip(body, "", &mut unknown);
    }
    unknown
}

/// What a built-in type's field may hold, as far as this server knows it.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// Anything: not checked.
    Open,
    /// An object with these fields only.
    Fields(&'static [(&'static str, Shape)]),
}

impl Shape {
    fn strip(self, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
        let (Shape::Fields(fields), Some(map)) = (self, value.as_object_mut()) else {
            return;
        };
        strip_fields(map, fields, path, unknown);
    }
}

fn strip_fields(
    map: &mut Map<String, Value>,
    fields: &[(&str, Shape)],
    path: &str,
    unknown: &mut Vec<String>,
) {
    map.retain(|key, value| {
        // A strategic merge patch's directives (`$patch`, `$setElementOrder/...`) are not fields.
        if key.starts_with('$') {
            return true;
        }
        let child = join(path, key);
        match fields.iter().find(|(name, _)| name == key) {
            Some((_, shape)) => {
                shape.strip(value, &child, unknown);
                true
            }
            None => {
                unknown.push(child);
                false
            }
        }
    });
}

/// Joins a field path as kube-apiserver's unknown-field messages write it.
pub fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

const O: Shape = Shape::Open;

const METADATA: Shape = Shape::Fields(&[
    ("name", O),
    ("generateName", O),
    ("namespace", O),
    ("selfLink", O),
    ("uid", O),
    ("resourceVersion", O),
    ("generation", O),
    ("creationTimestamp", O),
    ("deletionTimestamp", O),
    ("deletionGracePeriodSeconds", O),
    ("labels", O),
    ("annotations", O),
    ("ownerReferences", O),
    ("finalizers", O),
    ("managedFields", O),
]);

const CONFIG_MAP: Shape = Shape::Fields(&[
    ("apiVersion", O),
    ("kind", O),
    ("metadata", METADATA),
    ("data", O),
    ("binaryData", O),
    ("immutable", O),
]);

const SECRET: Shape = Shape::Fields(&[
    ("apiVersion", O),
    ("kind", O),
    ("metadata", METADATA),
    ("data", O),
    ("stringData", O),
    ("type", O),
    ("immutable", O),
]);

const SERVICE_ACCOUNT: Shape = Shape::Fields(&[
    ("apiVersion", O),
    ("kind", O),
    ("metadata", METADATA),
    ("secrets", O),
    ("imagePullSecrets", O),
    ("automountServiceAccountToken", O),
]);

const NODE: Shape = Shape::Fields(&[
    ("apiVersion", O),
    ("kind", O),
    ("metadata", METADATA),
    (
        "spec",
        Shape::Fields(&[
            ("podCIDR", O),
            ("podCIDRs", O),
            ("providerID", O),
            ("unschedulable", O),
            ("taints", O),
            ("configSource", O),
            ("externalID", O),
        ]),
    ),
    ("status", O),
]);

/// Kinds with a spec and a status and nothing else at the top.
const SPEC_AND_STATUS: Shape = Shape::Fields(&[
    ("apiVersion", O),
    ("kind", O),
    ("metadata", METADATA),
    ("spec", O),
    ("status", O),
]);

/// The known shape of a built-in kind, if this server lists it.
pub fn builtin_shape(resource: &ResourceType) -> Option<Shape> {
    if resource.is_custom() {
        return None;
    }
    let shape = match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "ConfigMap") => CONFIG_MAP,
        ("", "Secret") => SECRET,
        ("", "ServiceAccount") => SERVICE_ACCOUNT,
        ("", "Node") => NODE,
        (
            "",
            "Pod"
            | "Namespace"
            | "Service"
            | "ReplicationController"
            | "PersistentVolumeClaim"
            | "PersistentVolume",
        )
        | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job" | "CronJob")
        | ("coordination.k8s.io", "Lease") => SPEC_AND_STATUS,
        _ => return None,
    };
    Some(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn directives() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert_eq!(
            FieldValidation::parse(Some("Strict")),
            Ok(FieldValidation::Strict)
        );
        assert_eq!(
            FieldValidation::parse(Some("strict")).map_err(|e| e.code),
            Err(400)
        );
    }

    #[test]
    fn listed_fields_are_known_and_the_rest_removed() {
        let mut node = json!({"kind": "Node", "metadata": {"name": "n", "foo": 1},
                              "spec": {"invalidField": "v", "podCIDR": "x"}, "status": {"any": 1}});
        let mut unknown = Vec::new();
        NODE.strip(&mut node, "", &mut unknown);
        assert_eq!(unknown, vec!["metadata.foo", "spec.invalidField"]);
        assert_eq!(node["spec"], json!({"podCIDR": "x"}));
        assert_eq!(node["status"], json!({"any": 1}));
    }
}
