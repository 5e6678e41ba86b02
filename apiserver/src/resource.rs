//! What the server serves: one [`ResourceType`] per REST resource, and the [`Registry`] of them.
//!
//! A resource type is everything the server needs to know about a kind that is not in the stored JSON:
//! where it lives in the URL space (`/apis/apps/v1/namespaces/{ns}/replicasets`), whether it is
//! namespaced, which subresources it has, how its names are validated, whether `metadata.generation`
//! tracks its spec, and which fields can be used in a field selector. Discovery (`/api/v1`, `/apis/...`)
//! is generated from the registry, so kubectl sees exactly what the server can do.
//!
//! The built-in types are the ones a controller author meets first, with their strategies; the
//! rest of kube-apiserver 1.37's stable groups are served too, as stored objects without a strategy
//! (so that discovery, and clients that walk it, see what they would see on 1.37).
//! [`Registry::register`] adds any other (untyped JSON) at any time, and every
//! CustomResourceDefinition the server stores adds the types it defines (see [`crate::crd`]).
//!
//! # Changing what is served while serving
//!
//! Every request looks types up (routing, discovery), and the set changes only when someone creates,
//! changes or deletes a CRD. So the registry is a *copy-on-write snapshot*: a [`Catalog`] is an
//! immutable list of types; the [`Registry`] holds the current one behind an `Arc`. A request takes
//! the current catalog (a read lock held for one `Arc` clone) and then works on it without any lock;
//! a change builds a new catalog and swaps it in. A request that started before the swap finishes
//! with the catalog it took, as a request to kube-apiserver finishes with the handler it was routed to.

use std::cmp::Ordering;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};

use serde_json::{Map, Value, json};

use crate::schema::Schema;
use crate::status::{Cause, StatusError};

/// The Kubernetes version the server reports on `/version`: the release it imitates (1.37, streaming
/// lists included; the crate docs list what differs), and its stand-in kubelet on its Node objects.
pub const VERSION: (&str, &str) = ("1", "37");

/// The API group of CustomResourceDefinitions (see [`crate::crd`]).
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The version of CustomResourceDefinitions served.
pub const CRD_VERSION: &str = "v1";
/// The resource name of CustomResourceDefinitions.
pub const CRD_PLURAL: &str = "customresourcedefinitions";

/// How `metadata.name` is validated for a resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain: at most 253 characters of `[a-z0-9.-]` (most kinds).
    Subdomain,
    /// A DNS-1123 label: at most 63 characters of `[a-z0-9-]` (namespaces).
    Label,
    /// A DNS-1035 label: a label that starts with a letter (services).
    Label1035,
    /// Anything usable as one URL path segment: not `.` or `..`, no `/` or `%` (RBAC kinds,
    /// whose names are often `system:...`).
    PathSegment,
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
    /// Groups the type belongs to for kubectl (`kubectl get all`, `api-extensions`).
    pub categories: Vec<String>,
    /// The structural schema objects are pruned and validated with (custom resources only).
    pub schema: Option<Arc<Schema>>,
    /// The CustomResourceDefinition (by name) this type is served for; `None` for built-in and
    /// [`Registry::register`]ed types. Custom resources follow the CRD rules: status is dropped on
    /// create when there is a status subresource, an update must carry a resourceVersion.
    pub definition: Option<String>,
    /// A review (`SelfSubjectAccessReview`): create-only, answered without being stored, and
    /// without object metadata, so it has no Table form (an `as=Table` request is 406).
    pub review: bool,
    /// The defining CRD is being deleted: the type is still served (so finalizers can be removed)
    /// but creates are refused. Only ever true when `definition` is set.
    pub terminating: bool,
    /// Where a custom resource's `/scale` reads and writes (its CRD's `subresources.scale`);
    /// `None` for the built-in workloads, whose Scale is `spec.replicas`, `status.replicas` and
    /// `spec.selector`. Only meaningful when `scale` is set.
    pub scale_paths: Option<ScalePaths>,
    /// The subresources besides `status`, `scale` and `finalize` (`pods/binding`,
    /// `serviceaccounts/token`, ...), answered by [`crate::subresource`] and listed in discovery.
    pub extras: Vec<Extra>,
    /// Only `get` and `list` are served (ComponentStatuses: a report the server makes, never
    /// stored); every other verb is a 405.
    pub read_only: bool,
}

/// A custom resource's `subresources.scale`: JSON paths (`.spec.replicas`) of the replicas it
/// wants, the replicas it has, and the label selector (a string) of what it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`: read by GET `/scale`, written by its writes.
    pub spec_replicas: String,
    /// `statusReplicasPath`: read only.
    pub status_replicas: String,
    /// `labelSelectorPath`: read only; `None` leaves `status.selector` empty.
    pub label_selector: Option<String>,
}

/// A subresource with its own verbs and kind, beyond `status`, `scale` and `finalize`: what
/// kube-apiserver 1.37 serves on pods, services, nodes, service accounts and CSRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// `pods/binding`: POST a `Binding` to set `spec.nodeName`.
    Binding,
    /// `pods/eviction`: POST a policy/v1 `Eviction` to delete the pod, PodDisruptionBudgets allowing.
    Eviction,
    /// `pods/ephemeralcontainers`: GET, PUT, PATCH the Pod, changing only its ephemeral containers.
    EphemeralContainers,
    /// `pods/log`: GET the text of a container's log.
    Log,
    /// `pods/exec`, `pods/attach`, `pods/portforward`: streams to a kubelet.
    Exec,
    Attach,
    PortForward,
    /// `pods/proxy`, `services/proxy`, `nodes/proxy`: HTTP proxied to the object.
    Proxy,
    /// `pods/resize`: GET, PUT, PATCH the Pod, changing only container resources.
    Resize,
    /// `serviceaccounts/token`: POST an authentication.k8s.io/v1 `TokenRequest`.
    Token,
    /// `certificatesigningrequests/approval`: GET, PUT, PATCH the CSR's approval conditions.
    Approval,
}

impl Extra {
    /// Every extra subresource, for lookups by name.
    pub const ALL: [Extra; 11] = [
        Extra::Binding,
        Extra::Eviction,
        Extra::EphemeralContainers,
        Extra::Log,
        Extra::Exec,
        Extra::Attach,
        Extra::PortForward,
        Extra::Proxy,
        Extra::Resize,
        Extra::Token,
        Extra::Approval,
    ];

    /// The URL segment after the object's name.
    pub fn name(self) -> &'static str {
        match self {
            Extra::Binding => "binding",
            Extra::Eviction => "eviction",
            Extra::EphemeralContainers => "ephemeralcontainers",
            Extra::Log => "log",
            Extra::Exec => "exec",
            Extra::Attach => "attach",
            Extra::PortForward => "portforward",
            Extra::Proxy => "proxy",
            Extra::Resize => "resize",
            Extra::Token => "token",
            Extra::Approval => "approval",
        }
    }

    /// The verbs discovery lists, as kube-apiserver 1.37 lists them.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Extra::Binding | Extra::Eviction | Extra::Token => &["create"],
            Extra::EphemeralContainers | Extra::Resize | Extra::Approval => {
                &["get", "patch", "update"]
            }
            Extra::Log => &["get"],
            Extra::Exec | Extra::Attach | Extra::PortForward => &["create", "get"],
            Extra::Proxy => &["create", "delete", "get", "patch", "update"],
        }
    }

    /// The kind discovery names (`owner` is the kind of the object it belongs to), and the
    /// group and version when they are not the object's.
    pub fn kind(self, owner: &str) -> (String, Option<(&'static str, &'static str)>) {
        let kind = match self {
            Extra::Binding => "Binding".to_string(),
            Extra::Eviction => return ("Eviction".into(), Some(("policy", "v1"))),
            Extra::Token => {
                return ("TokenRequest".into(), Some(("authentication.k8s.io", "v1")));
            }
            Extra::Exec => "PodExecOptions".into(),
            Extra::Attach => "PodAttachOptions".into(),
            Extra::PortForward => "PodPortForwardOptions".into(),
            Extra::Proxy => format!("{owner}ProxyOptions"),
            Extra::EphemeralContainers | Extra::Log | Extra::Resize | Extra::Approval => {
                owner.to_string()
            }
        };
        (kind, None)
    }
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
            categories: Vec::new(),
            schema: None,
            definition: None,
            review: false,
            terminating: false,
            scale_paths: None,
            extras: Vec::new(),
            read_only: false,
        }
    }

    /// Adds subresources beyond status and scale (default: none).
    pub fn with_extras(mut self, extras: &[Extra]) -> ResourceType {
        self.extras = extras.to_vec();
        self
    }

    /// Serves only get and list (default: every verb).
    pub fn as_read_only(mut self) -> ResourceType {
        self.read_only = true;
        self.delete_collection = false;
        self
    }

    /// Makes the type a create-only review (see [`ResourceType::review`]).
    pub fn as_review(mut self) -> ResourceType {
        self.review = true;
        self.delete_collection = false;
        self
    }

    /// Puts the type in kubectl categories (default: none).
    pub fn categories(mut self, categories: &[&str]) -> ResourceType {
        self.categories = categories.iter().map(|c| c.to_string()).collect();
        self
    }

    /// True for the types a CustomResourceDefinition defines.
    pub fn is_custom(&self) -> bool {
        self.definition.is_some()
    }

    /// True for `customresourcedefinitions.apiextensions.k8s.io` itself.
    pub fn is_definitions(&self) -> bool {
        self.group == CRD_GROUP && self.plural == CRD_PLURAL
    }

    /// The `customresourcedefinitions` type itself, served from the start (see [`crate::crd`]).
    pub fn definitions() -> ResourceType {
        ResourceType::new(CRD_GROUP, CRD_VERSION, "CustomResourceDefinition")
            .cluster_scoped()
            .short_names(&["crd", "crds"])
            .categories(&["api-extensions"])
            .with_status()
            .with_generation()
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

/// One immutable set of served types: what a request sees from start to end. See the
/// [module docs](self).
#[derive(Debug, Clone)]
pub struct Catalog {
    /// In registration order; at most one per (group, version, plural).
    types: Vec<Arc<ResourceType>>,
}

impl Default for Catalog {
    /// The built-in types: core/v1 namespaces, pods, configmaps, secrets, events, services, nodes,
    /// serviceaccounts, replicationcontrollers, resourcequotas; apps/v1 replicasets, deployments, daemonsets;
    /// coordination.k8s.io/v1 leases; apiextensions.k8s.io/v1 customresourcedefinitions; the
    /// reviews of authentication.k8s.io/v1 and authorization.k8s.io/v1 ([`crate::review`]); and
    /// the other stable groups of 1.37 as stored objects (see `stored_only`). Pods, services, replication
    /// controllers and the apps workloads are in the `all` category, as on kube-apiserver (`kubectl get all`).
    fn default() -> Catalog {
        // Long: the built-in types as data (each kind with its field selectors, printer columns
        // and categories), not logic.
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
                .categories(&["all"])
                .with_status()
                .selectable_fields(&pod_fields)
                .returning_deleted_object()
                .with_extras(&[
                    Extra::Attach,
                    Extra::Binding,
                    Extra::EphemeralContainers,
                    Extra::Eviction,
                    Extra::Exec,
                    Extra::Log,
                    Extra::PortForward,
                    Extra::Proxy,
                    Extra::Resize,
                ]),
            ResourceType::new("", "v1", "ConfigMap").short_names(&["cm"]),
            ResourceType::new("", "v1", "Secret").selectable_fields(&["type"]),
            ResourceType::new("", "v1", "Event")
                .short_names(&["ev"])
                .selectable_fields(&event_fields),
            ResourceType::new("", "v1", "Service")
                .short_names(&["svc"])
                .categories(&["all"])
                .with_status()
                .names(NameRule::Label1035)
                .returning_deleted_object()
                .with_extras(&[Extra::Proxy]),
            ResourceType::new("apps", "v1", "ReplicaSet")
                .short_names(&["rs"])
                .categories(&["all"])
                .with_status()
                .with_scale()
                .with_generation()
                .selectable_fields(&["status.replicas"]),
            ResourceType::new("apps", "v1", "Deployment")
                .short_names(&["deploy"])
                .categories(&["all"])
                .with_status()
                .with_scale()
                .with_generation(),
            ResourceType::new("", "v1", "Node")
                .cluster_scoped()
                .short_names(&["no"])
                .with_status()
                .selectable_fields(&["spec.unschedulable"])
                .returning_deleted_object()
                .with_extras(&[Extra::Proxy]),
            ResourceType::new("", "v1", "ServiceAccount")
                .short_names(&["sa"])
                .with_extras(&[Extra::Token]),
            ResourceType::new("", "v1", "ReplicationController")
                .short_names(&["rc"])
                .categories(&["all"])
                .with_status()
                .with_scale()
                .with_generation()
                .selectable_fields(&["status.replicas"]),
            ResourceType::new("", "v1", "ResourceQuota")
                .short_names(&["quota"])
                .with_status(),
            ResourceType::new("apps", "v1", "DaemonSet")
                .short_names(&["ds"])
                .categories(&["all"])
                .with_status()
                .with_generation(),
            ResourceType::new("coordination.k8s.io", "v1", "Lease"),
            ResourceType::definitions(),
            // Created through `pods/binding` too; create-only, never stored (see `crate::subresource`).
            ResourceType::new("", "v1", "Binding").as_review(),
            // A report of the server's components, made on each read (see `crate::subresource`).
            ResourceType::new("", "v1", "ComponentStatus")
                .cluster_scoped()
                .short_names(&["cs"])
                .plural("componentstatuses")
                .as_read_only(),
        ];
        Catalog {
            types: types
                .into_iter()
                .chain(reviews())
                .chain(stored_only())
                .map(Arc::new)
                .collect(),
        }
    }
}

/// The reviews of authentication.k8s.io/v1 and authorization.k8s.io/v1 that kube-apiserver 1.37
/// serves, answered by [`crate::review`].
fn reviews() -> Vec<ResourceType> {
    let review = |group: &str, kind: &str| ResourceType::new(group, "v1", kind).as_review();
    vec![
        review("authentication.k8s.io", "TokenReview").cluster_scoped(),
        review("authentication.k8s.io", "SelfSubjectReview").cluster_scoped(),
        review("authorization.k8s.io", "SelfSubjectAccessReview").cluster_scoped(),
        review("authorization.k8s.io", "SubjectAccessReview").cluster_scoped(),
        review("authorization.k8s.io", "LocalSubjectAccessReview"),
        review("authorization.k8s.io", "SelfSubjectRulesReview").cluster_scoped(),
    ]
}

/// The other stable group versions kube-apiserver 1.37 serves by default, each with the resources
/// it serves there (scope, `/status`, short names and categories as 1.37 lists them), stored as
/// they are written: no defaults, no validation beyond names, no controller acting on them
/// (`metadata.generation` is tracked for the kinds whose 1.37 strategy tracks it). A
/// client can create, read, list, watch, update, patch and delete them, and discovery lists what
/// 1.37 lists (e2e.test's "Discovery should locate the groupVersion and a resource within each
/// APIGroup" reads one resource from each).
///
/// Not imitated: the versions of autoscaling (v1, v2) share one table, as their objects share
/// storage in kube-apiserver, but without its conversion (an object keeps the apiVersion it was
/// written with, as a CRD's do here); events.k8s.io/v1 Events are a table of their own, not a view
/// of core v1 Events; APIServices are only the ones clients create (kube-apiserver lists one per
/// served group version); RBAC objects are stored but authorize nothing (the server's one
/// credential may do everything); StatefulSets, PersistentVolume(Claim)s and the DRA kinds of
/// `resource.k8s.io` get no defaults and no controller.
fn stored_only() -> Vec<ResourceType> {
    // Long: a table, one line per stored-only kind, not logic.
    let cluster = |group: &str, version: &str, kind: &str| {
        ResourceType::new(group, version, kind).cluster_scoped()
    };
    let admission = "admissionregistration.k8s.io";
    let networking = "networking.k8s.io";
    let storage = "storage.k8s.io";
    let flowcontrol = "flowcontrol.apiserver.k8s.io";
    let rbac = "rbac.authorization.k8s.io";
    let dra = "resource.k8s.io";
    let hpa = |version: &str| {
        ResourceType::new("autoscaling", version, "HorizontalPodAutoscaler")
            .short_names(&["hpa"])
            .categories(&["all"])
            .with_status()
            .with_generation()
    };
    vec![
        cluster(admission, "v1", "MutatingWebhookConfiguration")
            .categories(&["api-extensions"])
            .with_generation(),
        cluster(admission, "v1", "ValidatingWebhookConfiguration")
            .categories(&["api-extensions"])
            .with_generation(),
        cluster(admission, "v1", "MutatingAdmissionPolicy")
            .categories(&["api-extensions"])
            .with_generation(),
        cluster(admission, "v1", "MutatingAdmissionPolicyBinding")
            .categories(&["api-extensions"])
            .with_generation(),
        cluster(admission, "v1", "ValidatingAdmissionPolicy")
            .categories(&["api-extensions"])
            .with_status()
            .with_generation(),
        cluster(admission, "v1", "ValidatingAdmissionPolicyBinding")
            .categories(&["api-extensions"])
            .with_generation(),
        cluster("apiregistration.k8s.io", "v1", "APIService")
            .categories(&["api-extensions"])
            .with_status(),
        hpa("v1"),
        hpa("v2"),
        ResourceType::new("batch", "v1", "Job")
            .categories(&["all"])
            .with_status()
            .with_generation(),
        ResourceType::new("batch", "v1", "CronJob")
            .short_names(&["cj"])
            .categories(&["all"])
            .with_status()
            .with_generation(),
        cluster("certificates.k8s.io", "v1", "CertificateSigningRequest")
            .short_names(&["csr"])
            .with_status()
            .with_extras(&[Extra::Approval]),
        cluster("certificates.k8s.io", "v1", "ClusterTrustBundle"),
        ResourceType::new("certificates.k8s.io", "v1", "PodCertificateRequest").with_status(),
        ResourceType::new("discovery.k8s.io", "v1", "EndpointSlice").with_generation(),
        ResourceType::new("events.k8s.io", "v1", "Event").short_names(&["ev"]),
        ResourceType::new(networking, "v1", "Ingress")
            .short_names(&["ing"])
            .with_status()
            .with_generation(),
        cluster(networking, "v1", "IngressClass").with_generation(),
        ResourceType::new(networking, "v1", "NetworkPolicy")
            .short_names(&["netpol"])
            .with_generation(),
        cluster(networking, "v1", "IPAddress").short_names(&["ip"]),
        cluster(networking, "v1", "ServiceCIDR").with_status(),
        cluster("node.k8s.io", "v1", "RuntimeClass"),
        ResourceType::new("policy", "v1", "PodDisruptionBudget")
            .short_names(&["pdb"])
            .with_status()
            .with_generation(),
        cluster("scheduling.k8s.io", "v1", "PriorityClass")
            .short_names(&["pc"])
            .with_generation(),
        cluster(storage, "v1", "CSIDriver"),
        cluster(storage, "v1", "CSINode").with_status(),
        ResourceType::new(storage, "v1", "CSIStorageCapacity"),
        cluster(storage, "v1", "StorageClass").short_names(&["sc"]),
        cluster(storage, "v1", "VolumeAttachment").with_status(),
        cluster(storage, "v1", "VolumeAttributesClass").short_names(&["vac"]),
        cluster("storagemigration.k8s.io", "v1", "StorageVersionMigration").with_status(),
        // core/v1 kinds without a strategy here.
        ResourceType::new("", "v1", "Endpoints")
            .short_names(&["ep"])
            .plural("endpoints"),
        ResourceType::new("", "v1", "LimitRange").short_names(&["limits"]),
        ResourceType::new("", "v1", "PersistentVolumeClaim")
            .short_names(&["pvc"])
            .with_status(),
        cluster("", "v1", "PersistentVolume")
            .short_names(&["pv"])
            .with_status(),
        ResourceType::new("", "v1", "PodTemplate"),
        ResourceType::new("apps", "v1", "StatefulSet")
            .short_names(&["sts"])
            .categories(&["all"])
            .with_status()
            .with_scale()
            .with_generation(),
        ResourceType::new("apps", "v1", "ControllerRevision"),
        cluster(flowcontrol, "v1", "FlowSchema")
            .with_status()
            .with_generation(),
        cluster(flowcontrol, "v1", "PriorityLevelConfiguration")
            .with_status()
            .with_generation(),
        cluster(rbac, "v1", "ClusterRole").names(NameRule::PathSegment),
        cluster(rbac, "v1", "ClusterRoleBinding").names(NameRule::PathSegment),
        ResourceType::new(rbac, "v1", "Role").names(NameRule::PathSegment),
        ResourceType::new(rbac, "v1", "RoleBinding").names(NameRule::PathSegment),
        cluster(dra, "v1", "DeviceClass").with_generation(),
        cluster(dra, "v1", "DeviceTaintRule")
            .with_status()
            .with_generation(),
        ResourceType::new(dra, "v1", "ResourceClaim")
            .with_status()
            .with_generation(),
        ResourceType::new(dra, "v1", "ResourceClaimTemplate"),
        cluster(dra, "v1", "ResourceSlice").with_generation(),
    ]
}

impl Catalog {
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

    /// The API groups other than core, in registration order, each with its versions, most
    /// preferred first (Kubernetes version priority: `v2` > `v1` > `v1beta1` > `v1alpha1`).
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
        for (_, versions) in &mut groups {
            versions.sort_by(|a, b| version_priority(a, b));
        }
        groups
    }

    /// This catalog with the types of CRD `definition` replaced by `types`.
    fn with_definition(&self, definition: &str, types: Vec<ResourceType>) -> Catalog {
        let mut next = Catalog {
            types: self
                .types
                .iter()
                .filter(|t| t.definition.as_deref() != Some(definition))
                .cloned()
                .collect(),
        };
        for t in types {
            next.register(t);
        }
        next
    }
}

/// Orders Kubernetes API versions most preferred first: GA before beta before alpha, higher numbers
/// first, and anything not shaped like `v<N>[alpha|beta<M>]` last, alphabetically.
pub fn version_priority(a: &str, b: &str) -> Ordering {
    /// (stability: 3 GA, 2 beta, 1 alpha, major, minor), or None for other shapes.
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let (stability, minor) = match &rest[digits..] {
            "" => (3, "0"),
            tail => match (tail.strip_prefix("beta"), tail.strip_prefix("alpha")) {
                (Some(n), _) => (2, n),
                (_, Some(n)) => (1, n),
                _ => return None,
            },
        };
        Some((stability, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The live set of served types, shared by every part of a running server; cloning shares it.
/// See the [module docs](self) for why reads are a snapshot.
#[derive(Debug, Clone)]
pub struct Registry {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The current catalog. Readers clone the `Arc` and let go of the lock at once; writers replace
    /// it while holding `changes`, so no change is lost to a concurrent one.
    current: RwLock<Arc<Catalog>>,
    /// Serializes changes (register, CRD reconciliation): read-modify-swap of `current`.
    changes: Mutex<()>,
}

impl Default for Registry {
    /// A registry of the built-in types ([`Catalog::default`]).
    fn default() -> Registry {
        Registry::new(Catalog::default())
    }
}

impl Registry {
    /// A registry serving `catalog`.
    pub fn new(catalog: Catalog) -> Registry {
        Registry {
            shared: Arc::new(Shared {
                current: RwLock::new(Arc::new(catalog)),
                changes: Mutex::new(()),
            }),
        }
    }

    /// The catalog as of now; later changes do not affect it.
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.shared.current.read().clone()
    }

    /// Serves one more resource type from now on (replacing one with the same group, version and
    /// plural).
    pub fn register(&self, resource: ResourceType) {
        let _change = self.shared.changes.lock();
        let mut next = (*self.snapshot()).clone();
        next.register(resource);
        *self.shared.current.write() = Arc::new(next);
    }

    /// Holds off every other change until the guard is dropped: CRD reconciliation reads the stored
    /// CRD and swaps the catalog under it, so two reconciliations cannot interleave.
    pub(crate) fn lock_changes(&self) -> MutexGuard<'_, ()> {
        self.shared.changes.lock()
    }

    /// Replaces the types CRD `definition` serves; the caller holds [`Registry::lock_changes`].
    pub(crate) fn set_definition(&self, definition: &str, types: Vec<ResourceType>) {
        let next = self.snapshot().with_definition(definition, types);
        *self.shared.current.write() = Arc::new(next);
    }

    /// The type served at `group/version/plural`, now.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.snapshot().find(group, version, plural)
    }

    /// The type of a kind (`apps/v1`, `ReplicaSet`), now.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.snapshot().by_kind(api_version, kind)
    }

    /// Every type served now, in registration order.
    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.snapshot().all().cloned().collect()
    }

    /// The API groups other than core, now (see [`Catalog::groups`]).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        self.snapshot().groups()
    }
}

/// The errors about one object of a served type, worded as kube-apiserver words them (`pods "web-1"
/// not found`). They live here, next to [`ResourceType`], rather than in [`crate::status`]: the error
/// type is at the bottom of the crate and knows no resource type.
impl StatusError {
    fn about(mut self, resource: &ResourceType, name: &str) -> StatusError {
        let mut details = Map::new();
        details.insert("name".into(), name.into());
        if !resource.group.is_empty() {
            details.insert("group".into(), resource.group.clone().into());
        }
        details.insert("kind".into(), resource.plural.clone().into());
        self.details = Some(Value::Object(details));
        self
    }

    /// 404 `NotFound`: `pods "web-1" not found`.
    pub fn not_found(resource: &ResourceType, name: &str) -> StatusError {
        let message = format!("{} {name:?} not found", resource.qualified());
        StatusError::new(404, "NotFound", message).about(resource, name)
    }

    /// 409 `AlreadyExists`: `pods "web-1" already exists`.
    pub fn already_exists(resource: &ResourceType, name: &str) -> StatusError {
        let message = format!("{} {name:?} already exists", resource.qualified());
        StatusError::new(409, "AlreadyExists", message).about(resource, name)
    }

    /// 409 `Conflict`: the object changed since the client read it, or a precondition failed.
    pub fn conflict(resource: &ResourceType, name: &str, why: &str) -> StatusError {
        let message = format!(
            "Operation cannot be fulfilled on {} {name:?}: {why}",
            resource.qualified()
        );
        StatusError::new(409, "Conflict", message).about(resource, name)
    }

    /// 422 `Invalid`: `Pod "Web" is invalid: metadata.name: Invalid value: ...`.
    pub fn invalid(resource: &ResourceType, name: &str, causes: Vec<Cause>) -> StatusError {
        // The message lists each distinct cause once (the details keep them all), as Go's aggregate does.
        let mut rendered: Vec<String> = Vec::new();
        for c in &causes {
            let line = format!("{}: {}", c.field, c.message);
            if !rendered.contains(&line) {
                rendered.push(line);
            }
        }
        let summary = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let kind = if resource.group.is_empty() {
            resource.kind.clone()
        } else {
            format!("{}.{}", resource.kind, resource.group)
        };
        let message = format!("{kind} {name:?} is invalid: {summary}");
        let mut error = StatusError::new(422, "Invalid", message);
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        let mut details = Map::new();
        details.insert("name".into(), name.into());
        if !resource.group.is_empty() {
            details.insert("group".into(), resource.group.clone().into());
        }
        details.insert("kind".into(), resource.kind.clone().into());
        details.insert("causes".into(), Value::Array(causes));
        error.details = Some(Value::Object(details));
        error
    }

    /// 403 `Forbidden`: `pods "web-1" is forbidden: <why>`.
    pub fn forbidden(resource: &ResourceType, name: &str, why: &str) -> StatusError {
        let message = format!("{} {name:?} is forbidden: {why}", resource.qualified());
        StatusError::new(403, "Forbidden", message).about(resource, name)
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

    /// The group versions e2e.test 1.37's "Discovery should locate the groupVersion and a resource
    /// within each APIGroup" asks for, each with the resource it looks for.
    #[test]
    fn every_stable_group_of_1_37_is_served() {
        let registry = Registry::default();
        let wanted = [
            ("", "v1", "namespaces"),
            (
                "admissionregistration.k8s.io",
                "v1",
                "validatingwebhookconfigurations",
            ),
            ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            ("apiregistration.k8s.io", "v1", "apiservices"),
            ("apps", "v1", "deployments"),
            ("authentication.k8s.io", "v1", "tokenreviews"),
            ("authorization.k8s.io", "v1", "selfsubjectaccessreviews"),
            ("autoscaling", "v1", "horizontalpodautoscalers"),
            ("autoscaling", "v2", "horizontalpodautoscalers"),
            ("batch", "v1", "jobs"),
            ("certificates.k8s.io", "v1", "certificatesigningrequests"),
            ("coordination.k8s.io", "v1", "leases"),
            ("discovery.k8s.io", "v1", "endpointslices"),
            ("events.k8s.io", "v1", "events"),
            ("networking.k8s.io", "v1", "ingresses"),
            ("node.k8s.io", "v1", "runtimeclasses"),
            ("policy", "v1", "poddisruptionbudgets"),
            ("scheduling.k8s.io", "v1", "priorityclasses"),
            ("storage.k8s.io", "v1", "csinodes"),
        ];
        for (group, version, plural) in wanted {
            assert!(
                registry.find(group, version, plural).is_some(),
                "{group}/{version} {plural}"
            );
        }
        // autoscaling prefers v2, and both versions share one table (no conversion).
        let groups = registry.groups();
        let autoscaling = groups.iter().find(|(g, _)| g == "autoscaling");
        assert_eq!(
            autoscaling.map(|(_, v)| v.clone()),
            Some(vec!["v2".to_string(), "v1".to_string()])
        );
        let v1 = registry.find("autoscaling", "v1", "horizontalpodautoscalers");
        let v2 = registry.find("autoscaling", "v2", "horizontalpodautoscalers");
        assert_eq!(v1.map(|t| t.qualified()), v2.map(|t| t.qualified()));
        // Reviews are create-only; stored kinds have their 1.37 scope.
        assert!(
            registry
                .find("authentication.k8s.io", "v1", "tokenreviews")
                .is_some_and(|t| t.review && !t.namespaced)
        );
        assert!(
            registry
                .find("storage.k8s.io", "v1", "csinodes")
                .is_some_and(|t| !t.review && !t.namespaced)
        );
        assert!(
            registry
                .find("batch", "v1", "jobs")
                .is_some_and(|t| t.namespaced && t.status && t.generation)
        );
    }

    #[test]
    fn versions_sort_by_kubernetes_priority() {
        let mut versions = vec![
            "v1alpha1", "v1", "foo", "v2beta1", "v1beta2", "v2", "v1beta1",
        ];
        versions.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            versions,
            [
                "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }

    #[test]
    fn a_snapshot_does_not_see_later_changes() {
        let registry = Registry::default();
        let before = registry.snapshot();
        registry.register(ResourceType::new("example.com", "v1", "Widget"));
        assert!(before.find("example.com", "v1", "widgets").is_none());
        assert!(registry.find("example.com", "v1", "widgets").is_some());
        let mut custom = ResourceType::new("example.com", "v1", "Gadget");
        custom.definition = Some("gadgets.example.com".into());
        let guard = registry.lock_changes();
        registry.set_definition("gadgets.example.com", vec![custom]);
        assert!(registry.find("example.com", "v1", "gadgets").is_some());
        registry.set_definition("gadgets.example.com", Vec::new());
        drop(guard);
        assert!(registry.find("example.com", "v1", "gadgets").is_none());
        assert!(registry.find("example.com", "v1", "widgets").is_some());
    }
}
