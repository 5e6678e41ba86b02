//! What the server serves: one [`ResourceType`] per REST resource, and the [`Registry`] of them.
//!
//! A resource type is everything the server needs to know about a kind that is not in the stored JSON:
//! where it lives in the URL space (`/apis/apps/v1/namespaces/{ns}/replicasets`), whether it is
//! namespaced, which subresources it has, how its names are validated, whether `metadata.generation`
//! tracks its spec, and which fields can be used in a field selector. Discovery (`/api/v1`, `/apis/...`)
//! is generated from the registry, so kubectl sees exactly what the server can do.
//!
//! The built-in types are the ones a controller author meets first; [`Registry::register`] adds any
//! other (untyped JSON, like a CRD) before the server starts.

use std::sync::Arc;

/// How `metadata.name` is validated for a resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain: at most 253 characters of `[a-z0-9.-]` (most kinds).
    Subdomain,
    /// A DNS-1123 label: at most 63 characters of `[a-z0-9-]` (namespaces).
    Label,
    /// A DNS-1035 label: a label that starts with a letter (services).
    Label1035,
}

/// One REST resource: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct ResourceType {
    /// API group, `""` for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// The URL segment, e.g. `replicasets`.
    pub plural: String,
    /// The singular name, e.g. `replicaset`.
    pub singular: String,
    /// The kind, e.g. `ReplicaSet`.
    pub kind: String,
    /// Namespaced (`/namespaces/{ns}/...`) or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names, e.g. `rs`.
    pub short_names: Vec<String>,
    /// Has a `/status` subresource; the main endpoint then ignores status changes.
    pub status: bool,
    /// Has a `/scale` subresource (`spec.replicas`, `status.replicas`, `spec.selector`).
    pub scale: bool,
    /// `metadata.generation` starts at 1 and is bumped by every spec change.
    pub generation: bool,
    /// How names are validated.
    pub names: NameRule,
    /// Fields usable in a field selector besides `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<String>,
    /// Serves DELETE on the collection (default: yes; not for namespaces).
    pub delete_collection: bool,
    /// A delete answers with the deleted object (pods, services, namespaces) rather than a
    /// `Status` of `Success`.
    pub returns_deleted_object: bool,
}

impl ResourceType {
    /// A namespaced resource type with no subresources and the default rules; adjust with the
    /// builder methods. `plural` and `singular` are derived from `kind` (`Widget` → `widgets`).
    pub fn new(group: &str, version: &str, kind: &str) -> ResourceType {
        let singular = kind.to_lowercase();
        let plural = if singular.ends_with('s') {
            format!("{singular}es")
        } else if let Some(stem) = singular.strip_suffix('y') {
            format!("{stem}ies")
        } else {
            format!("{singular}s")
        };
        ResourceType {
            group: group.to_string(),
            version: version.to_string(),
            plural,
            singular,
            kind: kind.to_string(),
            namespaced: true,
            short_names: Vec::new(),
            status: false,
            scale: false,
            generation: false,
            names: NameRule::Subdomain,
            selectable_fields: Vec::new(),
            returns_deleted_object: false,
            delete_collection: true,
        }
    }

    /// Refuses DELETE on the collection with 405 (default: served).
    pub fn without_delete_collection(mut self) -> ResourceType {
        self.delete_collection = false;
        self
    }

    /// Answers a delete with the deleted object (default: a `Status`).
    pub fn returning_deleted_object(mut self) -> ResourceType {
        self.returns_deleted_object = true;
        self
    }

    /// Overrides the URL segment (default: derived from the kind).
    pub fn plural(mut self, plural: &str) -> ResourceType {
        self.plural = plural.to_string();
        self
    }

    /// Makes the type cluster-scoped (default: namespaced).
    pub fn cluster_scoped(mut self) -> ResourceType {
        self.namespaced = false;
        self
    }

    /// Adds kubectl short names (default: none).
    pub fn short_names(mut self, names: &[&str]) -> ResourceType {
        self.short_names = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Adds a `/status` subresource (default: none).
    pub fn with_status(mut self) -> ResourceType {
        self.status = true;
        self
    }

    /// Adds a `/scale` subresource (default: none).
    pub fn with_scale(mut self) -> ResourceType {
        self.scale = true;
        self
    }

    /// Tracks spec changes in `metadata.generation` (default: off).
    pub fn with_generation(mut self) -> ResourceType {
        self.generation = true;
        self
    }

    /// Sets the name rule (default: [`NameRule::Subdomain`]).
    pub fn names(mut self, rule: NameRule) -> ResourceType {
        self.names = rule;
        self
    }

    /// Allows more fields in field selectors (default: only name and namespace).
    pub fn selectable_fields(mut self, fields: &[&str]) -> ResourceType {
        self.selectable_fields = fields.iter().map(|f| f.to_string()).collect();
        self
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `replicasets.apps`, as messages name a resource.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The key of an object in the store: `namespace/name`, or `name` when cluster-scoped.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{ns}/{name}"),
            _ => name.to_string(),
        }
    }
}

/// The resource types the server serves; cheap to clone.
#[derive(Debug, Clone)]
pub struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Default for Registry {
    /// The built-in types: core/v1 namespaces, pods, configmaps, secrets, events, services;
    /// apps/v1 replicasets, deployments; coordination.k8s.io/v1 leases.
    fn default() -> Registry {
        let pod_fields = [
            "status.phase",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.podIP",
            "status.nominatedNodeName",
        ];
        let event_fields = [
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "source",
            "type",
        ];
        let types = vec![
            ResourceType::new("", "v1", "Namespace")
                .cluster_scoped()
                .short_names(&["ns"])
                .with_status()
                .names(NameRule::Label)
                .selectable_fields(&["status.phase"])
                .returning_deleted_object()
                .without_delete_collection(),
            ResourceType::new("", "v1", "Pod")
                .short_names(&["po"])
                .with_status()
                .selectable_fields(&pod_fields)
                .returning_deleted_object(),
            ResourceType::new("", "v1", "ConfigMap").short_names(&["cm"]),
            ResourceType::new("", "v1", "Secret").selectable_fields(&["type"]),
            ResourceType::new("", "v1", "Event")
                .short_names(&["ev"])
                .selectable_fields(&event_fields),
            ResourceType::new("", "v1", "Service")
                .short_names(&["svc"])
                .with_status()
                .names(NameRule::Label1035)
                .returning_deleted_object(),
            ResourceType::new("apps", "v1", "ReplicaSet")
                .short_names(&["rs"])
                .with_status()
                .with_scale()
                .with_generation()
                .selectable_fields(&["status.replicas"]),
            ResourceType::new("apps", "v1", "Deployment")
                .short_names(&["deploy"])
                .with_status()
                .with_scale()
                .with_generation(),
            ResourceType::new("coordination.k8s.io", "v1", "Lease"),
        ];
        Registry {
            types: types.into_iter().map(Arc::new).collect(),
        }
    }
}

impl Registry {
    /// Adds a resource type (replacing one with the same group, version and plural).
    pub fn register(&mut self, resource: ResourceType) {
        self.types.retain(|t| {
            !(t.group == resource.group
                && t.version == resource.version
                && t.plural == resource.plural)
        });
        self.types.push(Arc::new(resource));
    }

    /// The type served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// The type of a kind (`apps/v1`, `ReplicaSet`), e.g. for an ownerReference.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.api_version() == api_version && t.kind == kind)
            .cloned()
    }

    /// Every type, in registration order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.iter()
    }

    /// The API groups other than core, each with its versions, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            match groups.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) if !versions.contains(&t.version) => {
                    versions.push(t.version.clone())
                }
                Some(_) => {}
                None => groups.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_follow_the_usual_english_rules() {
        assert_eq!(ResourceType::new("x", "v1", "Widget").plural, "widgets");
        assert_eq!(ResourceType::new("x", "v1", "Policy").plural, "policies");
        assert_eq!(ResourceType::new("x", "v1", "Ingress").plural, "ingresses");
    }

    #[test]
    fn the_builtins_are_found_by_url_and_by_kind() {
        let registry = Registry::default();
        let rs = registry
            .find("apps", "v1", "replicasets")
            .map(|t| t.kind.clone());
        assert_eq!(rs.as_deref(), Some("ReplicaSet"));
        assert!(registry.by_kind("v1", "Pod").is_some_and(|t| t.status));
        assert!(registry.find("", "v1", "replicasets").is_none());
        assert_eq!(registry.groups()[0].0, "apps");
    }
}
