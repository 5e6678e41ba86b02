//! Discovery documents, generated from the [`Registry`]: what kubectl reads to map `rs` to
//! `/apis/apps/v1/.../replicasets` and to learn which verbs it may use.
//!
//! Two forms, as on kube-apiserver:
//! - legacy: `/api` (APIVersions), `/apis` (APIGroupList), then one `APIResourceList` per
//!   group-version (`/api/v1`, `/apis/apps/v1`): a client makes one request per group-version;
//! - aggregated (`apidiscovery.k8s.io/v2`, asked for with `Accept: application/json;
//!   g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, which client-go sends first): `/api` and
//!   `/apis` each answer one `APIGroupDiscoveryList` holding every version's resources, so one
//!   request discovers everything. It is made from the legacy resource lists ([`resources`]):
//!   `deployments/scale` becomes a `subresources` entry of `deployments`, so both forms always
//!   agree.
//!
//! Every client asks for discovery, and many ask often: controller-runtime's `client.New` reads
//! `/api` and `/apis` each time it is called (its envtest suites call it a dozen times per spec,
//! thousands of times per suite). A document depends on nothing but the [`Catalog`], which is
//! immutable and replaced as a whole when the served types change, so [`DiscoveryCache`] renders
//! each document once per catalog and answers later requests with the same bytes:
//!
//! ```text
//!  request ──► Registry::snapshot() = Arc<Catalog> ──► DiscoveryCache::document(catalog, doc)
//!                                                       │ same Arc as the memo's? its bytes
//!                                                       └ otherwise: render, serialize, remember
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::resource::{Catalog, ResourceType};

pub use crate::resource::VERSION;

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
pub fn groups(registry: &Catalog) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(name, versions)| group(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if served.
pub fn group_document(registry: &Catalog, name: &str) -> Option<Value> {
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
    let verbs: Vec<&str> = verbs
        .into_iter()
        .filter(|v| *v != "deletecollection" || t.delete_collection)
        .filter(|v| *v == "create" || !t.review)
        .filter(|v| matches!(*v, "get" | "list") || !t.read_only)
        .collect();
    let mut entries = vec![json!({
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": verbs,
        "shortNames": t.short_names,
    })];
    if let (false, Some(entry)) = (t.categories.is_empty(), entries[0].as_object_mut()) {
        entry.insert("categories".into(), json!(t.categories));
    }
    if t.status {
        entries.push(json!({
            "name": format!("{}/status", t.plural),
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if crate::strategy::is_namespaces(t) {
        entries.push(json!({
            "name": format!("{}/finalize", t.plural),
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": ["update"],
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
    for extra in &t.extras {
        let (kind, group_version) = extra.kind(&t.kind);
        let mut entry = json!({
            "name": format!("{}/{}", t.plural, extra.name()),
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": kind,
            "verbs": extra.verbs(),
        });
        if let (Some((group, version)), Some(map)) = (group_version, entry.as_object_mut()) {
            map.insert("group".into(), group.into());
            map.insert("version".into(), version.into());
        }
        entries.push(entry);
    }
    entries
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn resources(registry: &Catalog, group: &str, version: &str) -> Option<Value> {
    let mut entries: Vec<Value> = registry
        .all()
        .filter(|t| t.group == group && t.version == version)
        .flat_map(|t| resource_entries(t))
        .collect();
    // kube-apiserver lists resources by path (`deployments`, `deployments/scale`, ...,
    // `replicasets`); kubectl expands categories in this order (`kubectl get all`).
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
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

/// The `Content-Type` of an aggregated discovery answer, as kube-apiserver sends it.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Aggregated discovery of `/api` (`core`: the core group, whose item has no name) or `/apis`.
pub fn aggregated(registry: &Catalog, core: bool) -> Value {
    let items: Vec<Value> = if core {
        aggregated_group(registry, "", &["v1".to_string()])
            .into_iter()
            .collect()
    } else {
        registry
            .groups()
            .iter()
            .filter_map(|(name, versions)| aggregated_group(registry, name, versions))
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
           "metadata": {}, "items": items})
}

/// One `APIGroupDiscovery`: its versions, preferred first (the order `versions` is in).
fn aggregated_group(registry: &Catalog, name: &str, versions: &[String]) -> Option<Value> {
    let versions: Vec<Value> = versions
        .iter()
        .filter_map(|version| {
            let list = resources(registry, name, version)?;
            let resources = aggregated_resources(list["resources"].as_array()?);
            Some(json!({"version": version, "resources": resources, "freshness": "Current"}))
        })
        .collect();
    if versions.is_empty() {
        return None;
    }
    let metadata = if name.is_empty() {
        json!({})
    } else {
        json!({"name": name})
    };
    Some(json!({"metadata": metadata, "versions": versions}))
}

/// The `APIResourceDiscovery` entries of one legacy `APIResourceList`'s resources (sorted by
/// name, so a resource comes before its `name/subresource` entries, which become its
/// `subresources`). A response kind of the resource's own group-version has empty `group` and
/// `version`, as kube-apiserver writes it; empty short names and categories are left out.
fn aggregated_resources(entries: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for entry in entries {
        let Some(name) = entry["name"].as_str() else {
            continue;
        };
        let response_kind = json!({
            "group": entry.get("group").cloned().unwrap_or_else(|| "".into()),
            "version": entry.get("version").cloned().unwrap_or_else(|| "".into()),
            "kind": entry["kind"],
        });
        if let Some((parent, subresource)) = name.split_once('/') {
            let owner = out
                .iter_mut()
                .find(|r| r["resource"] == parent)
                .and_then(Value::as_object_mut);
            if let Some(owner) = owner {
                let sub = json!({"subresource": subresource, "responseKind": response_kind,
                                 "verbs": entry["verbs"]});
                match owner.get_mut("subresources").and_then(Value::as_array_mut) {
                    Some(list) => list.push(sub),
                    None => {
                        owner.insert("subresources".into(), json!([sub]));
                    }
                }
            }
            continue;
        }
        let scope = if entry["namespaced"] == true {
            "Namespaced"
        } else {
            "Cluster"
        };
        let mut resource = json!({"resource": name, "responseKind": response_kind, "scope": scope,
            "singularResource": entry["singularName"], "verbs": entry["verbs"]});
        if let Some(map) = resource.as_object_mut() {
            for key in ["shortNames", "categories"] {
                if entry[key].as_array().is_some_and(|v| !v.is_empty()) {
                    map.insert(key.into(), entry[key].clone());
                }
            }
        }
        out.push(resource);
    }
    out
}

fn path_prefix(t: &ResourceType) -> String {
    if t.group.is_empty() {
        format!("api/{}", t.version)
    } else {
        format!("apis/{}/{}", t.group, t.version)
    }
}

/// `/openapi/v3`: one entry per group-version, pointing at its document.
pub fn openapi_v3_root(registry: &Catalog) -> Value {
    let mut paths = serde_json::Map::new();
    for t in registry.all() {
        let prefix = path_prefix(t);
        let url = format!("/openapi/v3/{prefix}?hash=ferrokube");
        paths.insert(prefix, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<api/v1 | apis/group/version>`: a skeleton document that tells kubectl, for each kind,
/// that writes accept the `fieldValidation` parameter (so it validates server-side instead of
/// downloading full schemas), with open schemas for the kinds.
pub fn openapi_v3_group(registry: &Catalog, prefix: &str) -> Option<Value> {
    let types: Vec<_> = registry
        .all()
        .filter(|t| path_prefix(t) == prefix)
        .collect();
    if types.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for t in types {
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let parameters = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}}
        ]);
        let operation = |action: &str| {
            json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                   "parameters": parameters, "responses": {"200": {"description": "OK"}}})
        };
        let collection = if t.namespaced {
            format!("/{prefix}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("/{prefix}/{}", t.plural)
        };
        paths.insert(collection.clone(), json!({"post": operation("post")}));
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({"put": operation("put"), "patch": operation("patch")}),
        );
        let name = format!(
            "io.ferrokube.{}.{}.{}",
            if t.group.is_empty() { "core" } else { &t.group },
            t.version,
            t.kind
        );
        schemas.insert(
            name,
            json!({"type": "object", "x-kubernetes-group-version-kind": [gvk],
                   "x-kubernetes-preserve-unknown-fields": true}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (ferrokube-apiserver)", "version": format!("v{}.{}.0", VERSION.0, VERSION.1)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A discovery document that depends only on the catalog (so [`DiscoveryCache`] may keep it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Document {
    /// Aggregated discovery of `/api`: the core group.
    AggregatedCore,
    /// Aggregated discovery of `/apis`: every other group.
    AggregatedGroups,
    /// Legacy `/apis` (APIGroupList).
    Groups,
    /// Legacy `/apis/{group}` (APIGroup).
    Group(String),
    /// Legacy `/api/v1` or `/apis/{group}/{version}` (APIResourceList).
    Resources { group: String, version: String },
}

impl Document {
    /// The document for `catalog`; `None`: not served (a 404).
    fn render(&self, catalog: &Catalog) -> Option<Value> {
        match self {
            Document::AggregatedCore => Some(aggregated(catalog, true)),
            Document::AggregatedGroups => Some(aggregated(catalog, false)),
            Document::Groups => Some(groups(catalog)),
            Document::Group(name) => group_document(catalog, name),
            Document::Resources { group, version } => resources(catalog, group, version),
        }
    }
}

/// The serialized discovery documents of the catalog last asked about (see the [module docs](self)).
#[derive(Debug, Default)]
pub struct DiscoveryCache {
    memo: Mutex<Option<Memo>>,
    /// How many documents were rendered (cache misses), for tests and metrics.
    renders: AtomicU64,
}

#[derive(Debug)]
struct Memo {
    /// The catalog the documents were made from. Held, so its address cannot be reused by a newer
    /// catalog: `Arc::ptr_eq` with it is identity.
    catalog: Arc<Catalog>,
    /// Invariant: each entry is `document.render(&catalog)`, serialized. Only served documents are
    /// kept (a 404 is rendered again), so the map holds at most one entry per served group-version
    /// plus the four fixed documents, whatever paths clients ask for.
    documents: HashMap<Document, Bytes>,
}

impl DiscoveryCache {
    /// `document` of `catalog`, serialized; `None` if it is not served.
    pub fn document(&self, catalog: &Arc<Catalog>, document: Document) -> Option<Bytes> {
        {
            let memo = self.memo.lock();
            if let Some(memo) = memo.as_ref().filter(|m| Arc::ptr_eq(&m.catalog, catalog)) {
                if let Some(bytes) = memo.documents.get(&document) {
                    return Some(bytes.clone());
                }
            }
        }
        // Rendered without the lock: two requests that miss together both render (the same
        // bytes); neither waits for the other.
        self.renders.fetch_add(1, Ordering::Relaxed);
        let bytes = Bytes::from(document.render(catalog)?.to_string());
        let mut memo = self.memo.lock();
        match memo.as_mut() {
            Some(m) if Arc::ptr_eq(&m.catalog, catalog) => {
                m.documents.insert(document, bytes.clone());
            }
            // Another catalog (a newer one; or, for a request that began before a swap, an older
            // one, which the next request with the newer catalog replaces in turn): start over.
            _ => {
                *memo = Some(Memo {
                    catalog: catalog.clone(),
                    documents: HashMap::from([(document, bytes.clone())]),
                });
            }
        }
        Some(bytes)
    }

    /// How many documents were rendered since the server started (each cache miss counts one).
    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }
}
