//! What the server does to an object on its way in: the rules kube-apiserver's registry "strategies"
//! apply before anything is stored.
//!
//! - **create**: check the kind and namespace against the URL, turn `generateName` into a name, validate,
//!   stamp `uid` and `creationTimestamp`, start `generation` at 1 for kinds that track it
//!   (`managedFields` are [`crate::apply`]'s), reset the status of kinds with a status subresource, and fill the defaults a client
//!   reads back (a Pod's `restartPolicy`, a ReplicaSet's `replicas`, ...).
//! - **update** (main endpoint): keep what a client may not change (uid, creationTimestamp,
//!   deletionTimestamp, and the status of kinds with a status subresource), bump `generation` when the
//!   spec changed, check `resourceVersion` for optimistic concurrency.
//! - **update** (`/status`): take only the status from the request, everything else from the stored
//!   object. Namespaces differ, as in kube-apiserver 1.37: their `/status` keeps only the stored
//!   `spec` and takes metadata (labels, annotations...) from the request too, and checks the phase
//!   against `deletionTimestamp`.
//! - **update** (a Namespace's `/finalize`): take the spec (`spec.finalizers`) and metadata from
//!   the request, the status from the stored object. The main endpoint of a Namespace, in turn,
//!   keeps the stored `spec.finalizers`: only `/finalize` changes them.
//! - **custom resources** (kinds a CRD defines, [`crate::crd`]): prune unknown fields with the
//!   version's schema before anything compares or validates the object, then validate against it
//!   ([`crate::schema`]); `generation` tracks every change outside `metadata` (and outside `status`
//!   when there is a status subresource).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use crate::crd;
use crate::meta;
use crate::resource::ResourceType;
use crate::services;
use crate::status::{Cause, StatusError};
use crate::store::Stored;
use crate::validation;

/// Which endpoint an update came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/namespaces/{ns}/{plural}/{name}`.
    Main,
    /// `/namespaces/{ns}/{plural}/{name}/status`.
    Status,
    /// `/api/v1/namespaces/{name}/finalize` (Namespaces only).
    Finalize,
    /// `pods/{name}/ephemeralcontainers`: only `spec.ephemeralContainers` is written.
    EphemeralContainers,
    /// `pods/{name}/resize`: only the containers' `resources` are written.
    Resize,
    /// `certificatesigningrequests/{name}/approval`: only `status.conditions` is written.
    Approval,
}

impl Endpoint {
    /// The subresource's name as a managedFields entry records it (`"subresource": "status"`);
    /// `""` for the object itself.
    pub fn subresource(self) -> &'static str {
        match self {
            Endpoint::Main => "",
            Endpoint::Status => "status",
            Endpoint::Finalize => "finalize",
            Endpoint::EphemeralContainers => "ephemeralcontainers",
            Endpoint::Resize => "resize",
            Endpoint::Approval => "approval",
        }
    }
}

/// Checks `object.apiVersion` and `object.kind` against the URL's resource (missing ones are filled).
pub fn check_type(resource: &ResourceType, object: &mut Value) -> Result<(), StatusError> {
    let Some(map) = object.as_object_mut() else {
        return Err(StatusError::bad_request(format!(
            "the object provided is unrecognized (must be of type {})",
            resource.kind
        )));
    };
    let api_version = resource.api_version();
    // A custom object must name its kind and apiVersion (kube-apiserver has no default for them;
    // the HTTP layer refuses a missing kind first, quoting the body as sent).
    if resource.is_custom() {
        if map
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            let body = Value::Object(map.clone()).to_string();
            return Err(missing_kind(&resource.kind, body.as_bytes()));
        }
        if map
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(StatusError::bad_request(format!(
                "the API version in the data () does not match the expected API version ({api_version})"
            )));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), resource.kind.clone().into());
        }
        Some(kind) if kind == resource.kind => {}
        Some(kind) => {
            return Err(StatusError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): {kind} in version {:?} cannot be handled as a {}",
                resource.kind,
                map.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
                resource.kind
            )));
        }
    }
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), api_version.into());
        }
        Some(v) if v == api_version => {}
        Some(v) => {
            return Err(StatusError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )));
        }
    }
    Ok(())
}

/// 400 for a custom object without `kind`, in kube-apiserver's words (the body quoted whole, then
/// its first 30 bytes).
pub fn missing_kind(kind: &str, body: &[u8]) -> StatusError {
    let text = String::from_utf8_lossy(body);
    let summary = match body {
        [] => "<empty>".to_string(),
        [b'{', ..] if body.len() > 30 => format!("{} ...", String::from_utf8_lossy(&body[..30])),
        [b'{', ..] => text.to_string(),
        _ => {
            let shown = &body[..body.len().min(30)];
            let hex: String = shown.iter().map(|b| format!("{b:02x}")).collect();
            if body.len() > 30 {
                format!("{hex} ...")
            } else {
                hex
            }
        }
    };
    StatusError::bad_request(format!(
        "the object provided is unrecognized (must be of type {kind}): Object 'Kind' is missing in '{text}' ({summary})"
    ))
}

/// Checks the object's namespace against the URL's, filling it in when missing.
pub fn check_namespace(
    resource: &ResourceType,
    object: &mut Value,
    url_namespace: Option<&str>,
) -> Result<(), StatusError> {
    let in_object = meta::namespace(object).map(str::to_string);
    match (resource.namespaced, url_namespace, in_object) {
        (true, Some(url), Some(obj)) if url != obj => Err(StatusError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        (true, Some(url), _) => {
            meta::metadata_mut(object).insert("namespace".into(), url.into());
            Ok(())
        }
        (false, _, _) => {
            meta::metadata_mut(object).remove("namespace");
            Ok(())
        }
        (true, None, _) => Err(StatusError::bad_request(
            "a namespaced resource needs a namespace in the URL",
        )),
    }
}

/// Prepares a new object for storage; returns its name. A `metadata.resourceVersion` sent along is
/// left for the store to refuse ([`refuse_sent_version`]): kube-apiserver validates first, and a dry
/// run, which never reaches its storage, answers with the version as sent.
pub fn prepare_create(resource: &ResourceType, object: &mut Value) -> Result<String, StatusError> {
    let metadata = meta::metadata_mut(object);
    let name = match metadata.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => match metadata.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => {
                let name = meta::generate_name(prefix);
                metadata.insert("name".into(), name.clone().into());
                name
            }
            _ => {
                return Err(StatusError::invalid(
                    resource,
                    "",
                    vec![Cause {
                        reason: "FieldValueRequired",
                        field: "metadata.name".into(),
                        message: "Required value: name or generateName is required".into(),
                    }],
                ));
            }
        },
    };
    metadata.insert("uid".into(), ferrokube_core::id::uuid_v4().into());
    metadata.insert("creationTimestamp".into(), meta::now().into());
    metadata.remove("deletionTimestamp");
    metadata.remove("deletionGracePeriodSeconds");
    metadata.remove("selfLink");
    if resource.generation {
        metadata.insert("generation".into(), 1.into());
    } else {
        metadata.remove("generation");
    }
    apply_defaults(resource, object);
    if is_namespaces(resource) {
        add_kubernetes_finalizer(object);
    }
    if resource.status {
        reset_status(resource, object);
    }
    prune(resource, object);
    validate(resource, &name, object, None)?;
    Ok(name)
}

/// The storage's refusal of a new object that names a resourceVersion: kube-apiserver's etcd layer
/// answers a bare 500 (no reason), after validation and only for writes that are not dry runs.
pub fn refuse_sent_version(object: &Value) -> Result<(), StatusError> {
    match meta::string(object, "resourceVersion") {
        Some(rv) if !rv.is_empty() => Err(StatusError::unknown(
            500,
            "resourceVersion should not be set on objects to be created",
        )),
        _ => Ok(()),
    }
}

/// Prepares `new` to replace `old` through `endpoint`. `new`'s resourceVersion, if set, must be the
/// stored one.
pub fn prepare_update(
    resource: &ResourceType,
    old: &Value,
    new: &mut Value,
    endpoint: Endpoint,
) -> Result<(), StatusError> {
    let name = meta::name(old).unwrap_or_default().to_string();
    let sent_version = meta::string(new, "resourceVersion").unwrap_or_default();
    let stored_version = meta::string(old, "resourceVersion").unwrap_or_default();
    if !sent_version.is_empty() && sent_version != stored_version {
        return Err(StatusError::conflict(
            resource,
            &name,
            StatusError::MODIFIED,
        ));
    }
    if meta::uid(new).is_some_and(|u| Some(u) != meta::uid(old)) {
        return Err(StatusError::conflict(
            resource,
            &name,
            &format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                meta::uid(new).unwrap_or_default(),
                meta::uid(old).unwrap_or_default()
            ),
        ));
    }
    if let Some(result) = prepare_narrow_update(old, new, endpoint) {
        return result;
    }
    let namespace_kind = is_namespaces(resource);
    if endpoint == Endpoint::Status && !namespace_kind && !resource.is_custom() {
        return prepare_builtin_status_update(resource, &name, old, new);
    }
    if endpoint == Endpoint::Status && !namespace_kind {
        let status = new.get("status").cloned();
        *new = old.clone();
        if let Some(map) = new.as_object_mut() {
            match status {
                Some(status) => map.insert("status".into(), status),
                None => map.remove("status"),
            };
        }
        // Built-in kinds' status is not validated here; a custom kind's is, against the schema of
        // its status.
        if let Some(schema) = &resource.schema {
            schema.prune_object(new);
            schema.default_object(new);
            let mut causes = schema.validate_status(new);
            causes.extend(rule_causes(schema, &causes, new, Some(old)));
            if !causes.is_empty() {
                return Err(StatusError::invalid(resource, &name, causes));
            }
        }
        return Ok(());
    }
    keep_metadata(old, new, SYSTEM_METADATA);
    if namespace_kind {
        // kube-apiserver 1.37's namespace strategies: `/status` keeps the stored spec, the main
        // endpoint the stored `spec.finalizers` (and status), `/finalize` the stored status.
        match endpoint {
            Endpoint::Status => keep_field(old, new, "spec"),
            Endpoint::Main => {
                let finalizers = old.pointer("/spec/finalizers").cloned();
                let spec = new
                    .as_object_mut()
                    .map(|map| map.entry("spec").or_insert_with(|| json!({})));
                if let Some(spec) = spec.and_then(Value::as_object_mut) {
                    match finalizers {
                        Some(finalizers) => spec.insert("finalizers".into(), finalizers),
                        None => spec.remove("finalizers"),
                    };
                }
                keep_field(old, new, "status");
            }
            _ => keep_field(old, new, "status"),
        }
    } else if resource.status {
        keep_field(old, new, "status");
    }
    if services::is_services(resource) {
        services::check_update(resource, &name, old, new)?;
    }
    apply_defaults(resource, new);
    prune(resource, new);
    if resource.generation && spec_of(resource, old) != spec_of(resource, new) {
        let generation = meta::metadata(old)
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta::metadata_mut(new).insert("generation".into(), (generation + 1).into());
    }
    if resource.kind == "Pod" && resource.group.is_empty() {
        check_pod_update(resource, &name, old, new)?;
    }
    if namespace_kind && endpoint == Endpoint::Status {
        check_namespace_phase(resource, &name, new)?;
    }
    validate(resource, &name, new, Some(old))
}

/// The metadata a client cannot change by an update: kept from the stored object.
const SYSTEM_METADATA: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

/// Sets `new`'s metadata fields named in `fields` to `old`'s (removing those `old` lacks).
fn keep_metadata(old: &Value, new: &mut Value, fields: &[&str]) {
    for kept in fields {
        let old_value = meta::metadata(old).and_then(|m| m.get(*kept)).cloned();
        let new_meta = meta::metadata_mut(new);
        match old_value {
            Some(v) => new_meta.insert((*kept).into(), v),
            None => new_meta.remove(*kept),
        };
    }
}

/// An update of a built-in kind through `/status`, as kube-apiserver 1.37's status strategies
/// make it: everything but `metadata` and `status` (the spec, a Node's, a Service's ...) is the
/// stored one; the metadata is the client's (labels, annotations, finalizers, owners), but for
/// the system fields and what a kind's strategy resets: a Deployment's labels, a Pod's owner
/// references. (A custom kind's `/status` keeps all of its stored metadata; see the caller.)
fn prepare_builtin_status_update(
    resource: &ResourceType,
    name: &str,
    old: &Value,
    new: &mut Value,
) -> Result<(), StatusError> {
    let metadata = new.get("metadata").cloned();
    let status = new.get("status").cloned();
    *new = old.clone();
    if let Some(map) = new.as_object_mut() {
        if let Some(metadata) = metadata.filter(Value::is_object) {
            map.insert("metadata".into(), metadata);
        }
        match status {
            Some(status) => map.insert("status".into(), status),
            None => map.remove("status"),
        };
    }
    keep_metadata(old, new, SYSTEM_METADATA);
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("apps", "Deployment") => keep_metadata(old, new, &["labels"]),
        ("", "Pod") => keep_metadata(old, new, &["ownerReferences"]),
        _ => {}
    }
    prune(resource, new);
    validate(resource, name, new, Some(old))
}

/// The updates through a subresource that writes one part of the object (ephemeral containers,
/// container resources, approval conditions): the stored object with that part taken from `new`.
/// `None` for the other endpoints.
fn prepare_narrow_update(
    old: &Value,
    new: &mut Value,
    endpoint: Endpoint,
) -> Option<Result<(), StatusError>> {
    match endpoint {
        Endpoint::EphemeralContainers => {
            let mut sent = new.pointer("/spec/ephemeralContainers").cloned();
            if let Some(containers) = sent.as_mut().and_then(Value::as_array_mut) {
                containers.iter_mut().for_each(default_ephemeral_container);
            }
            *new = old.clone();
            put_at(new, "spec", "ephemeralContainers", sent);
        }
        Endpoint::Approval => {
            let sent = new.pointer("/status/conditions").cloned();
            *new = old.clone();
            put_at(new, "status", "conditions", sent);
        }
        Endpoint::Resize => {
            let sent: Vec<(Value, Value)> = new
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .map(|c| (c["name"].clone(), c["resources"].clone()))
                        .collect()
                })
                .unwrap_or_default();
            *new = old.clone();
            if let Some(list) = new
                .pointer_mut("/spec/containers")
                .and_then(Value::as_array_mut)
            {
                for container in list.iter_mut() {
                    let resources = sent.iter().find(|(n, _)| *n == container["name"]);
                    if let (Some((_, r)), Some(map)) = (resources, container.as_object_mut()) {
                        map.insert("resources".into(), r.clone());
                    }
                }
            }
        }
        Endpoint::Main | Endpoint::Status | Endpoint::Finalize => return None,
    }
    Some(Ok(()))
}

/// Sets (or, for `None`, removes) `object[outer][field]`.
fn put_at(object: &mut Value, outer: &str, field: &str, value: Option<Value>) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let outer = map.entry(outer).or_insert_with(|| json!({}));
    if let Some(outer) = outer.as_object_mut() {
        match value {
            Some(v) => outer.insert(field.into(), v),
            None => outer.remove(field),
        };
    }
}

/// kube-apiserver 1.37's defaults of an ephemeral container (those of any container).
fn default_ephemeral_container(container: &mut Value) {
    let image = container["image"].as_str().unwrap_or("").to_string();
    let Some(map) = container.as_object_mut() else {
        return;
    };
    map.entry("terminationMessagePath")
        .or_insert_with(|| json!("/dev/termination-log"));
    map.entry("terminationMessagePolicy")
        .or_insert_with(|| json!("File"));
    map.entry("resources").or_insert_with(|| json!({}));
    let tag = image.rsplit('/').next().unwrap_or("");
    let latest = !image.contains('@') && (!tag.contains(':') || tag.ends_with(":latest"));
    map.entry("imagePullPolicy")
        .or_insert_with(|| json!(if latest { "Always" } else { "IfNotPresent" }));
}

/// Whether `resource` is the core group's Namespaces.
pub fn is_namespaces(resource: &ResourceType) -> bool {
    resource.group.is_empty() && resource.kind == "Namespace"
}

/// A new Namespace always has the `kubernetes` finalizer in `spec.finalizers`, after any the client
/// asked for (kube-apiserver 1.37 adds it on create only, not as a default: `/finalize` may remove it).
fn add_kubernetes_finalizer(namespace: &mut Value) {
    let Some(map) = namespace.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    // A `finalizers` that is not a list is left for validation to refuse.
    if let Some(list) = spec
        .entry("finalizers")
        .or_insert_with(|| json!([]))
        .as_array_mut()
    {
        if !list.iter().any(|f| f == "kubernetes") {
            list.push("kubernetes".into());
        }
    }
}

/// Sets `new[field]` to `old[field]` (removes it when `old` has none).
fn keep_field(old: &Value, new: &mut Value, field: &str) {
    let kept = old.get(field).cloned();
    if let Some(map) = new.as_object_mut() {
        match kept {
            Some(value) => map.insert(field.into(), value),
            None => map.remove(field),
        };
    }
}

/// A Namespace's status written through `/status`: its phase must be `Active` while it has no
/// `deletionTimestamp` and `Terminating` once it has one (kube-apiserver 1.37's
/// `ValidateNamespaceStatusUpdate`, which names the field `status.Phase`).
fn check_namespace_phase(
    resource: &ResourceType,
    name: &str,
    namespace: &Value,
) -> Result<(), StatusError> {
    let deleting = meta::metadata(namespace)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null());
    let phase = namespace
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (wanted, detail) = if deleting {
        (
            "Terminating",
            "may only be 'Terminating' if `deletionTimestamp` is not empty",
        )
    } else {
        (
            "Active",
            "may only be 'Active' if `deletionTimestamp` is empty",
        )
    };
    if phase == wanted {
        Ok(())
    } else {
        Err(StatusError::invalid(
            resource,
            name,
            vec![Cause::invalid("status.Phase", phase, detail)],
        ))
    }
}

/// Drops the fields a custom kind's schema does not declare, then fills in its defaults (see
/// [`crate::schema`]).
fn prune(resource: &ResourceType, object: &mut Value) {
    if let Some(schema) = &resource.schema {
        schema.prune_object(object);
        schema.default_object(object);
    }
}

/// An object read back from the store, with the defaults of its custom kind's schema as it is now
/// (a default added since the object was written shows); the stored object itself is unchanged.
pub fn read_defaults(resource: &ResourceType, stored: Stored) -> Stored {
    let Some(schema) = &resource.schema else {
        return stored;
    };
    let mut object = (*stored.object).clone();
    if !schema.default_object(&mut object) {
        return stored;
    }
    stored.with_object(object)
}

fn validate(
    resource: &ResourceType,
    name: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), StatusError> {
    let mut causes = validation::name(resource.names, "metadata.name", name);
    causes.extend(validation::finalizers(resource, object));
    causes.extend(validation::object(resource, object));
    if let Some(old) = old {
        causes.extend(validation::update(resource, old, object));
    }
    if let Some(schema) = &resource.schema {
        causes.extend(schema.validate_object(object));
        causes.extend(rule_causes(schema, &causes, object, old));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(StatusError::invalid(resource, name, causes))
    }
}

/// The causes of a custom object's CEL rules ([`crate::cel`]), after the schema's `causes`: as in
/// kube-apiserver, the rules are not run on an object that already has a blocking problem (a
/// missing, unsupported, too long or mistyped value), which gets one cause saying so instead.
fn rule_causes(
    schema: &crate::schema::Schema,
    causes: &[Cause],
    object: &Value,
    old: Option<&Value>,
) -> Vec<Cause> {
    if !crate::cel::has_rules(schema) {
        return Vec::new();
    }
    let blocking = causes.iter().any(|c| {
        matches!(
            c.reason,
            "FieldValueNotSupported"
                | "FieldValueRequired"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
                | "FieldValueTypeInvalid"
        )
    });
    if blocking {
        return vec![Cause {
            reason: "FieldValueInvalid",
            field: "<nil>".into(),
            message: "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        }];
    }
    crate::cel::validate(schema, object, old)
}

/// What `generation` tracks: everything but `metadata` (and `status`, for kinds with a status
/// subresource; a custom kind without one bumps its generation on status changes too).
fn spec_of(resource: &ResourceType, object: &Value) -> Map<String, Value> {
    object
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| match k.as_str() {
                    "metadata" | "kind" | "apiVersion" => false,
                    "status" => !resource.status,
                    _ => true,
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A Pod's spec is immutable apart from container images (and a few fields we do not model).
fn check_pod_update(
    resource: &ResourceType,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), StatusError> {
    let without_images = |spec: Option<&Value>| {
        let mut spec = spec.cloned().unwrap_or(Value::Null);
        for list in ["containers", "initContainers"] {
            if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for c in containers {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
        if let Some(s) = spec.as_object_mut() {
            s.remove("activeDeadlineSeconds");
            s.remove("tolerations");
        }
        spec
    };
    if without_images(old.get("spec")) == without_images(new.get("spec")) {
        return Ok(());
    }
    Err(StatusError::invalid(
        resource,
        name,
        vec![Cause {
            reason: "FieldValueForbidden",
            field: "spec".into(),
            message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` (only additions to existing tolerations)".into(),
        }],
    ))
}

/// The status a new object starts with.
fn reset_status(resource: &ResourceType, object: &mut Value) {
    let status = match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => new_pod_status(object),
        ("", "Namespace") => json!({"phase": "Active"}),
        ("", "Service") => json!({"loadBalancer": {}}),
        ("apps", "DaemonSet") => json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                        "desiredNumberScheduled": 0, "numberReady": 0}),
        // Go's zero status as kube-apiserver 1.37 stores it: a Deployment's counts are all
        // `omitempty` (`{}`), a StatefulSet writes `replicas` and `availableReplicas`, a
        // ReplicaSet's and a ReplicationController's `replicas`.
        ("apps", "Deployment") => json!({}),
        ("apps", "StatefulSet") => json!({"replicas": 0, "availableReplicas": 0}),
        ("apps", _) | ("", "ReplicationController") => json!({"replicas": 0}),
        ("", "ResourceQuota") | ("", "Node") => match object.get("status") {
            // Nodes report their own status (the kubelet creates them with it); a quota's status is
            // the quota controller's, so a client's is kept here for both, as kube-apiserver does
            // for nodes and overwrites for quotas.
            Some(s) if resource.kind == "Node" => s.clone(),
            _ => json!({}),
        },
        _ if resource.is_definitions() => crd::initial_status(object),
        // A custom kind with a status subresource: status is written through /status only.
        _ if resource.is_custom() => {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
            return;
        }
        _ => match object.get("status") {
            Some(s) => s.clone(),
            None => return,
        },
    };
    if let Some(map) = object.as_object_mut() {
        map.insert("status".into(), status);
    }
}

/// A new Pod's status: `Pending`, its QoS class, and, when it has scheduling gates, the
/// `PodScheduled=False` condition with reason `SchedulingGated` that tells the scheduler (and
/// `kubectl get`) why it waits (kube-apiserver 1.37's `applySchedulingGatedCondition`).
fn new_pod_status(pod: &Value) -> Value {
    let mut status = json!({"phase": "Pending", "qosClass": qos_class(pod)});
    let gated = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| !gates.is_empty());
    if gated {
        status["conditions"] = json!([{
            "type": "PodScheduled", "status": "False", "lastProbeTime": null,
            "lastTransitionTime": meta::now(), "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }]);
    }
    status
}

/// BestEffort, Burstable or Guaranteed, from the containers' requests and limits.
fn qos_class(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        any |= requests.is_some_and(|r| !r.is_empty()) || limits.is_some_and(|l| !l.is_empty());
        let full = |m: Option<&Map<String, Value>>| {
            m.is_some_and(|m| m.contains_key("cpu") && m.contains_key("memory"))
        };
        let equal = match (requests, limits) {
            (Some(r), Some(l)) => r.iter().all(|(k, v)| l.get(k) == Some(v)),
            (None, Some(_)) => true,
            _ => false,
        };
        guaranteed &= full(limits) && equal;
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// Fills a field if it is missing.
fn default(map: &mut Map<String, Value>, field: &str, value: Value) {
    map.entry(field).or_insert(value);
}

/// The defaults a client reads back that controllers commonly depend on.
fn apply_defaults(resource: &ResourceType, object: &mut Value) {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => {
            if let Some(spec) = object.get_mut("spec") {
                pod_spec_defaults(spec);
            }
        }
        ("apps", "ReplicaSet") | ("apps", "Deployment") => {
            let deployment = resource.kind == "Deployment";
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                default(spec, "replicas", 1.into());
                if deployment {
                    default(spec, "revisionHistoryLimit", 10.into());
                    default(spec, "progressDeadlineSeconds", 600.into());
                    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
                    if let Some(strategy) = strategy.as_object_mut() {
                        default(strategy, "type", "RollingUpdate".into());
                        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                            let rolling =
                                strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
                            if let Some(rolling) = rolling.as_object_mut() {
                                default(rolling, "maxUnavailable", "25%".into());
                                default(rolling, "maxSurge", "25%".into());
                            }
                        }
                    }
                }
                if let Some(pod) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
                    pod_spec_defaults(pod);
                }
            }
        }
        ("", "ReplicationController") => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                default(spec, "replicas", 1.into());
                let template_labels = spec
                    .get("template")
                    .and_then(|t| t.pointer("/metadata/labels"))
                    .cloned();
                if let Some(labels) = template_labels {
                    if spec
                        .get("selector")
                        .is_none_or(|s| s.as_object().is_none_or(Map::is_empty))
                    {
                        spec.insert("selector".into(), labels);
                    }
                }
                if let Some(pod) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
                    pod_spec_defaults(pod);
                }
            }
            let selector = object.pointer("/spec/selector").cloned();
            let metadata = meta::metadata_mut(object);
            if metadata
                .get("labels")
                .is_none_or(|l| l.as_object().is_none_or(Map::is_empty))
            {
                if let Some(selector) = selector.filter(|s| s.is_object()) {
                    metadata.insert("labels".into(), selector);
                }
            }
        }
        ("apps", "DaemonSet") => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                default(spec, "revisionHistoryLimit", 10.into());
                if let Some(pod) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
                    pod_spec_defaults(pod);
                }
            }
        }
        ("", "Service") => services::apply_defaults(object),
        ("", "Secret") => {
            if let Some(map) = object.as_object_mut() {
                default(map, "type", "Opaque".into());
                merge_string_data(map);
            }
        }
        _ if resource.is_definitions() => crd::apply_defaults(object),
        _ => {}
    }
    zero_condition_times_as_null(resource, object);
}

/// The time fields of a built-in kind's `status.conditions` that kube-apiserver always writes.
///
/// In the Go types these are `metav1.Time` values, not pointers, so `omitempty` never drops them:
/// a condition sent without one is read back with the field `null`. A client comparing conditions
/// (or a conformance case) sees that `null`, so the embedded server stores it too.
fn condition_time_fields(resource: &ResourceType) -> &'static [&'static str] {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") | ("", "Node") => &["lastProbeTime", "lastTransitionTime"][..],
        ("apps", "Deployment") => &["lastUpdateTime", "lastTransitionTime"][..],
        ("", "Namespace")
        | ("", "ReplicationController")
        | ("apps", "ReplicaSet")
        | ("apps", "DaemonSet")
        | ("apps", "StatefulSet") => &["lastTransitionTime"][..],
        _ => &[],
    }
}

/// Writes `null` for each of [`condition_time_fields`] a condition lacks.
fn zero_condition_times_as_null(resource: &ResourceType, object: &mut Value) {
    let fields = condition_time_fields(resource);
    if fields.is_empty() {
        return;
    }
    let Some(conditions) = object
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
        for field in fields {
            condition.entry(*field).or_insert(Value::Null);
        }
    }
}

/// A Secret's `stringData` is write-only: each key is written into `data`, base64-encoded, over
/// any value `data` has for it, and `stringData` itself is never stored (kube-apiserver does this
/// when it converts the object it received). A value that is not a string is dropped.
fn merge_string_data(secret: &mut Map<String, Value>) {
    let Some(Value::Object(strings)) = secret.remove("stringData") else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    let data = secret.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in strings {
            if let Value::String(text) = value {
                data.insert(key, STANDARD.encode(text).into());
            }
        }
    }
}

fn pod_spec_defaults(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    default(spec, "restartPolicy", "Always".into());
    default(spec, "terminationGracePeriodSeconds", 30.into());
    default(spec, "dnsPolicy", "ClusterFirst".into());
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", "default-scheduler".into());
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            default(c, "terminationMessagePath", "/dev/termination-log".into());
            default(c, "terminationMessagePolicy", "File".into());
            default(c, "resources", json!({}));
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let tag = image
                .rsplit('/')
                .next()
                .and_then(|last| last.split_once(':'));
            let policy = match tag {
                Some((_, "latest")) | None if !image.contains('@') => "Always",
                _ => "IfNotPresent",
            };
            default(c, "imagePullPolicy", policy.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;

    fn rs_type() -> std::sync::Arc<ResourceType> {
        Registry::default()
            .find("apps", "v1", "replicasets")
            .expect("built in")
    }

    #[test]
    fn a_gated_pod_is_created_with_its_scheduling_gated_condition() {
        let pods = Registry::default()
            .find("", "v1", "pods")
            .expect("built in");
        let pod = |gates: Value| {
            let mut pod = json!({"metadata": {"name": "p", "namespace": "n"},
                "spec": {"schedulingGates": gates, "containers": [{"name": "c", "image": "i:1"}]},
                "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}});
            prepare_create(&pods, &mut pod).expect("valid");
            pod
        };
        let gated = pod(json!([{"name": "example.com/wait"}]));
        let condition = &gated["status"]["conditions"][0];
        assert_eq!(
            (
                &condition["type"],
                &condition["status"],
                &condition["reason"]
            ),
            (
                &json!("PodScheduled"),
                &json!("False"),
                &json!("SchedulingGated")
            ),
            "the client's status is replaced, then the gate's condition added"
        );
        assert!(condition["lastTransitionTime"].is_string());
        assert_eq!(condition.get("lastProbeTime"), Some(&Value::Null));
        assert!(pod(json!([]))["status"].get("conditions").is_none());
    }

    #[test]
    fn secret_string_data_is_merged_into_data_and_not_kept() {
        let secrets = Registry::default()
            .find("", "v1", "secrets")
            .expect("built in");
        let mut secret = json!({"metadata": {"name": "s", "namespace": "n"},
                                "data": {"a": "MQ==", "keep": "aw=="},
                                "stringData": {"a": "2", "b": "3"}});
        prepare_create(&secrets, &mut secret).expect("valid");
        assert_eq!(
            secret["data"],
            json!({"a": "Mg==", "b": "Mw==", "keep": "aw=="})
        );
        assert!(secret.get("stringData").is_none());
    }

    fn namespaces() -> std::sync::Arc<ResourceType> {
        Registry::default()
            .find("", "v1", "namespaces")
            .expect("built in")
    }

    /// A stored Namespace as the server keeps it.
    fn stored_namespace() -> Value {
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": "team", "labels": {"a": "1"}}});
        prepare_create(&namespaces(), &mut ns).expect("valid");
        meta::metadata_mut(&mut ns).insert("resourceVersion".into(), "5".into());
        ns
    }

    #[test]
    fn a_new_namespace_gets_the_kubernetes_finalizer_after_its_own() {
        assert_eq!(
            stored_namespace()["spec"],
            json!({"finalizers": ["kubernetes"]})
        );
        assert_eq!(stored_namespace()["status"], json!({"phase": "Active"}));
        let mut ns =
            json!({"metadata": {"name": "x"}, "spec": {"finalizers": ["e2e.example.com/f"]}});
        prepare_create(&namespaces(), &mut ns).expect("valid");
        assert_eq!(
            ns["spec"]["finalizers"],
            json!(["e2e.example.com/f", "kubernetes"])
        );
    }

    #[test]
    fn a_namespace_status_write_takes_metadata_and_status_but_not_spec() {
        let old = stored_namespace();
        let mut new = old.clone();
        new["metadata"]["annotations"] = json!({"e2e-patched-ns-status": "team"});
        new["spec"]["finalizers"] = json!([]);
        new["status"]["conditions"] = json!([{"type": "StatusUpdate", "status": "True"}]);
        prepare_update(&namespaces(), &old, &mut new, Endpoint::Status).expect("valid");
        assert_eq!(
            new["metadata"]["annotations"],
            json!({"e2e-patched-ns-status": "team"})
        );
        assert_eq!(new["spec"], old["spec"]);
        assert_eq!(new["status"]["conditions"][0]["type"], "StatusUpdate");
        // kube-apiserver reads a condition's zero time back as `null` (a Go `metav1.Time` value).
        assert_eq!(
            new["status"]["conditions"][0].get("lastTransitionTime"),
            Some(&Value::Null)
        );
        assert_eq!(new["metadata"]["uid"], old["metadata"]["uid"]);
        // Other built-in kinds' status writes take the metadata too (a Deployment's strategy
        // keeps its labels), and never the spec.
        let t = rs_type();
        let old_rs = rs(2);
        let mut labelled = old_rs.clone();
        labelled["metadata"]["labels"] = json!({"x": "y"});
        labelled["spec"]["replicas"] = json!(9);
        prepare_update(&t, &old_rs, &mut labelled, Endpoint::Status).expect("valid");
        assert_eq!(labelled["metadata"]["labels"], json!({"x": "y"}));
        assert_eq!(labelled["spec"], old_rs["spec"]);
        let deployments = ResourceType::new("apps", "v1", "Deployment");
        let mut old_dep = rs(2);
        old_dep["metadata"]["labels"] = json!({"app": "web"});
        let mut relabelled = old_dep.clone();
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        relabelled["metadata"]["annotations"] = json!({"note": "kept"});
        prepare_update(&deployments, &old_dep, &mut relabelled, Endpoint::Status).expect("valid");
        assert_eq!(relabelled["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(
            relabelled["metadata"]["annotations"],
            json!({"note": "kept"})
        );
    }

    #[test]
    fn a_namespace_status_phase_must_agree_with_its_deletion() {
        let old = stored_namespace();
        let mut terminating = old.clone();
        terminating["status"]["phase"] = json!("Terminating");
        let error = prepare_update(&namespaces(), &old, &mut terminating, Endpoint::Status)
            .expect_err("not being deleted");
        assert_eq!(error.code, 422);
        let text = error.to_status().to_string();
        assert!(text.contains("status.Phase"), "{text}");
        assert!(text.contains("may only be 'Active'"), "{text}");
    }

    #[test]
    fn only_finalize_changes_a_namespace_finalizers() {
        let old = stored_namespace();
        let mut new = old.clone();
        new["spec"]["finalizers"] = json!(["kubernetes", "e2e.example.com/f"]);
        new["status"]["phase"] = json!("Terminating");
        new["metadata"]["labels"]["b"] = json!("2");
        let mut main = new.clone();
        prepare_update(&namespaces(), &old, &mut main, Endpoint::Main).expect("valid");
        assert_eq!(main["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(main["status"], old["status"]);
        assert_eq!(main["metadata"]["labels"]["b"], "2");
        let mut finalized = new.clone();
        prepare_update(&namespaces(), &old, &mut finalized, Endpoint::Finalize).expect("valid");
        assert_eq!(
            finalized["spec"]["finalizers"],
            json!(["kubernetes", "e2e.example.com/f"])
        );
        assert_eq!(finalized["status"], old["status"]);
        assert_eq!(finalized["metadata"]["labels"]["b"], "2");
        // Removing every finalizer through /finalize leaves none (no default puts one back).
        let mut emptied = old.clone();
        emptied["spec"]["finalizers"] = json!([]);
        prepare_update(&namespaces(), &old, &mut emptied, Endpoint::Finalize).expect("valid");
        assert_eq!(emptied["spec"]["finalizers"], json!([]));
    }

    fn rs(replicas: i64) -> Value {
        json!({"metadata": {"name": "web", "namespace": "n"},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}},
               "status": {"replicas": 7}})
    }

    #[test]
    fn create_stamps_identity_and_resets_status() {
        let mut object = rs(3);
        let name = prepare_create(&rs_type(), &mut object).expect("valid");
        assert_eq!(name, "web");
        assert_eq!(object["metadata"]["generation"], 1);
        assert_eq!(object["status"], json!({"replicas": 0}));
        assert!(meta::uid(&object).is_some());
        let pull = &object["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"];
        assert_eq!(pull, "IfNotPresent");
    }

    #[test]
    fn generation_moves_with_the_spec_only_and_status_needs_its_endpoint() {
        let t = rs_type();
        let mut old = rs(3);
        prepare_create(&t, &mut old).expect("valid");
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"x": "y"});
        labelled["status"] = json!({"replicas": 3});
        prepare_update(&t, &old, &mut labelled, Endpoint::Main).expect("valid");
        assert_eq!(labelled["metadata"]["generation"], 1);
        assert_eq!(labelled["status"], json!({"replicas": 0}), "status is kept");
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = 5.into();
        prepare_update(&t, &old, &mut scaled, Endpoint::Main).expect("valid");
        assert_eq!(scaled["metadata"]["generation"], 2);
        let mut status = old.clone();
        status["status"] = json!({"replicas": 3});
        status["spec"]["replicas"] = 9.into();
        prepare_update(&t, &old, &mut status, Endpoint::Status).expect("valid");
        assert_eq!(
            (
                status["status"]["replicas"].clone(),
                status["spec"]["replicas"].clone()
            ),
            (json!(3), json!(3))
        );
    }

    #[test]
    fn a_stale_resource_version_conflicts() {
        let t = rs_type();
        let mut old = rs(3);
        prepare_create(&t, &mut old).expect("valid");
        old["metadata"]["resourceVersion"] = "10".into();
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = "9".into();
        let error = prepare_update(&t, &old, &mut new, Endpoint::Main).expect_err("stale");
        assert_eq!((error.code, error.reason), (409, "Conflict"));
        assert!(
            error
                .message
                .starts_with("Operation cannot be fulfilled on replicasets.apps \"web\"")
        );
    }

    #[test]
    fn qos_classes() {
        let pod = |resources: Value| json!({"spec": {"containers": [{"resources": resources}]}});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        let limits = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
        assert_eq!(qos_class(&pod(limits)), "Guaranteed");
    }
}
