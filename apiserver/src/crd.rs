//! CustomResourceDefinitions: how a stored object of one kind makes the server serve another.
//!
//! # Why
//!
//! Most controllers reconcile a kind of their own (`Widget`, `Certificate`, `Database`), declared to
//! the cluster by a CustomResourceDefinition (CRD). To test such a controller against this server, the
//! server must do what kube-apiserver does with a CRD: serve the new kind's REST endpoints and
//! discovery, shape its objects with the CRD's schema, and take it all away again when the CRD is
//! deleted.
//!
//! # How a CRD becomes a served resource
//!
//! ```text
//!  POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions
//!    │  strategy: defaults (singular, listKind, conversion), checks (name = plural.group, one
//!    │            storage version, usable schemas) → 422; status = {acceptedNames: {}, storedVersions}
//!    ▼
//!  store (the CRD object) ──► Api's write hook ──► reconcile(name), under Registry::lock_changes:
//!                                                   │ served_types(crd): one ResourceType per
//!                                                   │   served version, with its Schema
//!                                                   │ Registry::set_definition: swap the catalog
//!                                                   │   → routes and discovery see the kind now
//!                                                   └ status: acceptedNames, NamesAccepted and
//!                                                     Established True (a second write, as the
//!                                                     real server's controllers do)
//!  DELETE the CRD
//!    │  deletion adds the finalizer customresourcecleanup.apiextensions.k8s.io and a Terminating
//!    ▼  condition: the CRD stays, its kind is still served, but creates are refused (403)
//!  reconcile(name): delete every custom object (finalizers on them are respected); when none is
//!    left, remove the finalizer → the CRD is deleted → stop serving the kind.
//! ```
//!
//! kube-apiserver does the same with controllers that run a moment later (clients wait for the
//! `Established` condition); here it happens inside the request that wrote the CRD, so a client never
//! needs to wait — but one that does wait sees the same conditions.
//!
//! This module is the CRD as an object (its defaults, checks, status, and the types it serves); the
//! reconciler that acts on the served catalog and the store runs inside the write path, in
//! `api::establish`, so that the verbs can call it and this module stays below them.
//!
//! All versions of a CRD share one table in the store (named after the CRD, `plural.group`), as they
//! share one etcd prefix. There is no conversion between versions (`strategy: None` rewrites only
//! `apiVersion` on a real server; here an object keeps the apiVersion it was written with).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::meta;
use crate::resource::{ResourceType, ScalePaths, version_priority};
use crate::schema::Schema;
use crate::status::{Cause, StatusError};

pub use crate::resource::{CRD_GROUP as GROUP, CRD_PLURAL as PLURAL, CRD_VERSION as VERSION};

/// Held by a CRD being deleted until its custom objects are gone.
pub const FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The `customresourcedefinitions` resource type itself (see [`ResourceType::definitions`]).
pub fn definitions_type() -> ResourceType {
    ResourceType::definitions()
}

/// A string field of `value` at `pointer`, or `""`.
fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The strings of a list field at `pointer` (missing: empty).
fn strings(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn versions(crd: &Value) -> &[Value] {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The name of the storage version, if exactly one is marked.
fn storage_version(crd: &Value) -> Option<String> {
    let mut storage = versions(crd)
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true));
    let first = storage.next()?;
    storage
        .next()
        .is_none()
        .then(|| text(first, "/name").to_string())
}

/// The defaults kube-apiserver fills in a CRD: `names.singular` (the kind, lowercased),
/// `names.listKind` (`<Kind>List`) and `conversion.strategy: None`.
pub fn apply_defaults(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !kind.is_empty() {
            names
                .entry("singular")
                .or_insert_with(|| kind.to_lowercase().into());
            names
                .entry("listKind")
                .or_insert_with(|| format!("{kind}List").into());
        }
    }
}

/// The status of a new CRD: nothing accepted yet, the storage version recorded.
pub fn initial_status(crd: &Value) -> Value {
    let stored: Vec<String> = storage_version(crd).into_iter().collect();
    json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored})
}

/// The checks kube-apiserver makes of a CRD that controllers' CRDs commonly hit. Not checked:
/// name conflicts between CRDs, immutability of scope and names, webhook conversion settings,
/// printer column JSON paths.
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    for (pointer, field) in [
        ("/spec/group", "spec.group"),
        ("/spec/names/plural", "spec.names.plural"),
        ("/spec/names/kind", "spec.names.kind"),
    ] {
        if text(crd, pointer).is_empty() {
            causes.push(Cause::required(field));
        }
    }
    let name = meta::name(crd).unwrap_or("");
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match text(crd, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        "" => causes.push(Cause::required("spec.scope")),
        other => causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "spec.scope".into(),
            message: format!(
                "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ),
        }),
    }
    let all = versions(crd);
    if all.is_empty() {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "spec.versions".into(),
            message:
                "Invalid value: \"null\": must have exactly one version marked as storage version"
                    .into(),
        });
    } else if storage_version(crd).is_none() {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "spec.versions".into(),
            message: "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version".into(),
        });
    }
    // kube-apiserver reports a schema shared by every version at `spec.validation` (its internal
    // form keeps one copy); the CEL rules' causes use that path too.
    let shared_schema = !all.is_empty()
        && all.iter().all(|v| {
            v.pointer("/schema/openAPIV3Schema") == all[0].pointer("/schema/openAPIV3Schema")
        });
    for (i, version) in all.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        if text(version, "/name").is_empty() {
            causes.push(Cause::required(&format!("{at}.name")));
        }
        let schema_at = format!("{at}.schema.openAPIV3Schema");
        match version.pointer("/schema/openAPIV3Schema") {
            None => causes.push(Cause {
                reason: "FieldValueRequired",
                field: schema_at,
                message: "Required value: schemas are required".into(),
            }),
            Some(raw) => match Schema::root(raw, &schema_at).map(crate::cel::compiled) {
                Err(e) => causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field: schema_at,
                    message: e.to_string(),
                }),
                // The rules: a shared schema's once (at the first version), as kube-apiserver does.
                Ok(schema) if shared_schema => {
                    if i == 0 {
                        causes.extend(crate::cel::check_schema(
                            &schema,
                            "spec.validation.openAPIV3Schema",
                        ));
                    }
                }
                Ok(schema) => causes.extend(crate::cel::check_schema(&schema, &schema_at)),
            },
        }
    }
    causes
}

/// The resource types a (valid) CRD serves: one per version with `served: true`, most preferred
/// version first. A version whose schema cannot be read is not served (validation refused such a
/// CRD already; this only guards against objects stored by other means).
pub fn served_types(crd: &Value, terminating: bool) -> Vec<ResourceType> {
    let name = meta::name(crd).unwrap_or("");
    let group = text(crd, "/spec/group");
    let kind = text(crd, "/spec/names/kind");
    let plural = text(crd, "/spec/names/plural");
    let singular = match text(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        s => s.to_string(),
    };
    let namespaced = text(crd, "/spec/scope") == "Namespaced";
    let mut types = Vec::new();
    for version in versions(crd) {
        if version.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let version_name = text(version, "/name");
        let schema = match version.pointer("/schema/openAPIV3Schema") {
            Some(raw) => match Schema::root(raw, "openAPIV3Schema").map(crate::cel::compiled) {
                Ok(schema) => schema,
                Err(e) => {
                    tracing::warn!(crd = name, version = version_name, error = %e, "not serving a version with an unusable schema");
                    continue;
                }
            },
            None => continue,
        };
        let mut t = ResourceType::new(group, version_name, kind)
            .plural(plural)
            .with_generation();
        t.singular = singular.clone();
        t.namespaced = namespaced;
        t.short_names = strings(crd, "/spec/names/shortNames");
        t.categories = strings(crd, "/spec/names/categories");
        t.status = version.pointer("/subresources/status").is_some();
        if let Some(scale) = version.pointer("/subresources/scale") {
            let text = |field: &str| scale.get(field).and_then(Value::as_str).map(str::to_string);
            t.scale = true;
            t.scale_paths = Some(ScalePaths {
                spec_replicas: text("specReplicasPath").unwrap_or_default(),
                status_replicas: text("statusReplicasPath").unwrap_or_default(),
                label_selector: text("labelSelectorPath"),
            });
        }
        t.schema = Some(Arc::new(schema));
        t.definition = Some(name.to_string());
        t.terminating = terminating;
        types.push(t);
    }
    types.sort_by(|a, b| version_priority(&a.version, &b.version));
    types
}

/// A condition as the CRD's status lists it, keeping `lastTransitionTime` from `previous` when the
/// status did not change.
fn condition(previous: &[Value], kind: &str, reason: &str, message: &str) -> Value {
    let since = previous
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| meta::now().into());
    json!({"type": kind, "status": "True", "lastTransitionTime": since,
           "reason": reason, "message": message})
}

/// The status of an established CRD: its names accepted (no conflict checking here), Established,
/// and the storage version added to `storedVersions`. A Terminating condition is kept.
pub fn established_status(crd: &Value) -> Value {
    let old = crd.get("status").cloned().unwrap_or_else(|| json!({}));
    let previous = old
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut names = Map::new();
    for field in ["plural", "singular", "kind", "listKind"] {
        let value = text(crd, &format!("/spec/names/{field}"));
        if !value.is_empty() || matches!(field, "plural" | "kind") {
            names.insert(field.into(), value.into());
        }
    }
    for list in ["shortNames", "categories"] {
        let values = strings(crd, &format!("/spec/names/{list}"));
        if !values.is_empty() {
            names.insert(list.into(), json!(values));
        }
    }
    let mut conditions = vec![
        condition(
            &previous,
            "NamesAccepted",
            "NoConflicts",
            "no conflicts found",
        ),
        condition(
            &previous,
            "Established",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
    ];
    conditions.extend(
        previous
            .iter()
            .filter(|c| c["type"] == "Terminating")
            .cloned(),
    );
    let mut stored = strings(&old, "/storedVersions");
    if let Some(storage) = storage_version(crd) {
        if !stored.contains(&storage) {
            stored.push(storage);
        }
    }
    json!({"acceptedNames": names, "conditions": conditions, "storedVersions": stored})
}

/// Sets (or replaces) the Terminating condition of a CRD being deleted.
pub fn set_terminating(crd: &mut Value, reason: &str, message: &str) {
    let Some(map) = crd.as_object_mut() else {
        return;
    };
    let status = map.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(list) = conditions.as_array_mut() {
        let since = list
            .iter()
            .find(|c| c["type"] == "Terminating")
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| meta::now().into());
        list.retain(|c| c["type"] != "Terminating");
        list.push(
            json!({"type": "Terminating", "status": "True", "lastTransitionTime": since,
                         "reason": reason, "message": message}),
        );
    }
}

/// 422 for an update of a custom object without a resourceVersion: custom resources, unlike most
/// built-in kinds, allow no unconditional update. The value is printed as the number 0, as 1.37 does
/// (1.20 printed Go's `%#v` of an unsigned integer, `0x0`).
pub fn unconditional_update(resource: &ResourceType, name: &str) -> StatusError {
    let cause = json!({"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                       "message": "Invalid value: 0: must be specified for an update"});
    StatusError {
        code: 422,
        reason: "Invalid",
        message: format!(
            "{} {name:?} is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update",
            resource.qualified()
        ),
        details: Some(
            json!({"name": name, "group": resource.group, "kind": resource.plural,
                             "causes": [cause]}),
        ),
    }
}

/// 403 Forbidden for a create of a custom object `name` while its CRD is being deleted, as 1.37
/// answers (1.20 answered 405 MethodNotAllowed, with the bare message and no name).
pub fn create_while_terminating(resource: &ResourceType, name: &str) -> StatusError {
    StatusError {
        code: 403,
        reason: "Forbidden",
        message: format!(
            "{} {name:?} is forbidden: create not allowed while custom resource definition is terminating",
            resource.qualified()
        ),
        details: Some(json!({"name": name, "group": resource.group, "kind": resource.plural})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget_crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1alpha1", "served": false, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    }

    #[test]
    fn a_crd_serves_each_served_version_preferred_first() {
        let mut crd = widget_crd();
        apply_defaults(&mut crd);
        assert!(validate(&crd).is_empty(), "{:?}", validate(&crd));
        let types = served_types(&crd, false);
        let versions: Vec<&str> = types.iter().map(|t| t.version.as_str()).collect();
        assert_eq!(versions, ["v1", "v1beta1"]);
        assert!(types[0].status && !types[1].status);
        assert_eq!(types[0].singular, "widget");
        assert_eq!(types[0].qualified(), "widgets.example.com");
        assert_eq!(types[0].definition.as_deref(), Some("widgets.example.com"));
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
    }

    #[test]
    fn bad_crds_get_causes() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = "gadgets.example.com".into();
        crd["spec"]["scope"] = "Global".into();
        crd["spec"]["versions"][0]["storage"] = true.into();
        let fields: Vec<String> = validate(&crd).into_iter().map(|c| c.field).collect();
        assert_eq!(fields, ["metadata.name", "spec.scope", "spec.versions"]);
    }

    #[test]
    fn established_status_accepts_the_names_and_keeps_transition_times() {
        let crd = widget_crd();
        let status = established_status(&crd);
        assert_eq!(status["acceptedNames"]["shortNames"], json!(["wd"]));
        assert_eq!(status["conditions"][1]["type"], "Established");
        assert_eq!(status["storedVersions"], json!(["v1"]));
        let mut again = crd.clone();
        again["status"] = status.clone();
        assert_eq!(established_status(&again), status);
    }
}
