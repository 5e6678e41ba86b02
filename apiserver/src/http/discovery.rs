//! Discovery documents, generated from the [`Registry`]: what kubectl reads to map `rs` to
//! `/apis/apps/v1/.../replicasets` and to learn which verbs it may use.

use serde_json::{Value, json};

use crate::resource::{Registry, ResourceType};

/// The Kubernetes version the server reports on `/version` (its API follows 1.32's, including
/// streaming lists).
pub const VERSION: (&str, &str) = ("1", "32");

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": VERSION.0,
        "minor": VERSION.1,
        "gitVersion": format!("v{}.{}.0-ferrokube", VERSION.0, VERSION.1),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-11-23T00:00:00Z",
        "goVersion": "none (ferrokube-apiserver, Rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `/api`.
pub fn core_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

fn group(name: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": versions, "preferredVersion": preferred})
}

/// `/apis`.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(name, versions)| group(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if served.
pub fn group_document(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let (_, versions) = groups.iter().find(|(g, _)| g == name)?;
    let mut document = group(name, versions);
    if let Some(map) = document.as_object_mut() {
        map.insert("kind".into(), "APIGroup".into());
        map.insert("apiVersion".into(), "v1".into());
    }
    Some(document)
}

fn resource_entries(t: &ResourceType) -> Vec<Value> {
    let verbs = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    let mut entries = vec![json!({
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": verbs,
        "shortNames": t.short_names,
    })];
    if t.status {
        entries.push(json!({
            "name": format!("{}/status", t.plural),
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if t.scale {
        entries.push(json!({
            "name": format!("{}/scale", t.plural),
            "singularName": "",
            "namespaced": t.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
    entries
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let entries: Vec<Value> = registry
        .all()
        .filter(|t| t.group == group && t.version == version)
        .flat_map(|t| resource_entries(t))
        .collect();
    if entries.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }))
}
