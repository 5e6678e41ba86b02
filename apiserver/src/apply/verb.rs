//! The apply verb on [`Api`], and the glue every other write uses to record its manager.
//!
//! An apply is one read-modify-write (`Api::write`) of the live object, or a create when there
//! is none (the configuration applied to the kind's empty object), each followed by the same
//! strategy (defaults, generation, validation) as any write.

use std::sync::Arc;

use serde_json::{Value, json};

use super::nesting;
use super::shape::Shape;
use super::{Applied, Typed};
use crate::api::Api;
use crate::meta;
use crate::resource::ResourceType;
use crate::status::StatusError;
use crate::store::Stored;
use crate::strategy::{self, Endpoint};

/// One apply request, its options checked.
#[derive(Debug, Clone)]
pub struct ApplyRequest {
    /// The applied configuration (a partial object).
    pub config: Value,
    /// `?fieldManager=`.
    pub manager: String,
    /// `?force=true`: take fields from other managers instead of failing.
    pub force: bool,
}

/// What an apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The object did not exist: created (201).
    Created,
    /// The object existed: updated, or left as it was (200).
    Updated,
}

/// Checks a PATCH's `fieldManager` and `force` as kube-apiserver does (a 422 about `PatchOptions`):
/// apply needs a manager; only apply may force.
pub fn check_patch_options(
    apply: bool,
    field_manager: Option<&str>,
    force: Option<&str>,
) -> Result<(), StatusError> {
    let mut causes: Vec<(&str, &str, String)> = Vec::new();
    if apply && field_manager.is_none_or(str::is_empty) {
        causes.push((
            "FieldValueRequired",
            "fieldManager",
            "Required value: is required for apply patch".into(),
        ));
    }
    if !apply && force.is_some() {
        causes.push((
            "FieldValueForbidden",
            "force",
            "Forbidden: may not be specified for non-apply patch".into(),
        ));
    }
    causes.extend(field_manager_causes(field_manager));
    invalid_options("PatchOptions", causes)
}

/// Checks the `fieldManager` of a create (`kind` `CreateOptions`) or update (`UpdateOptions`) as
/// kube-apiserver does: at most 128 bytes, else a 422 about the options (a PATCH's is checked by
/// [`check_patch_options`]). A manager taken from the User-Agent instead is cut to size, never
/// refused ([`super::manager_name`]).
pub fn check_write_options(kind: &str, field_manager: Option<&str>) -> Result<(), StatusError> {
    invalid_options(kind, field_manager_causes(field_manager))
}

/// What is wrong with a `fieldManager`, as apimachinery's `ValidateFieldManager` says it: longer
/// than [`super::MAX_MANAGER`] bytes. (It also refuses unprintable characters; that check is not
/// made here.)
fn field_manager_causes(field_manager: Option<&str>) -> Vec<(&'static str, &'static str, String)> {
    match field_manager {
        Some(manager) if manager.len() > super::MAX_MANAGER => vec![(
            "FieldValueTooLong",
            "fieldManager",
            format!(
                "Too long: may not be more than {} bytes",
                super::MAX_MANAGER
            ),
        )],
        _ => Vec::new(),
    }
}

/// The 422 of request options with these `causes` (reason, field, message), `Ok` without any:
/// `<kind>.meta.k8s.io "" is invalid: <field>: <message>` (several in brackets, comma-separated).
fn invalid_options(
    kind: &str,
    causes: Vec<(&'static str, &'static str, String)>,
) -> Result<(), StatusError> {
    if causes.is_empty() {
        return Ok(());
    }
    let rendered: Vec<String> = causes
        .iter()
        .map(|(_, field, message)| format!("{field}: {message}"))
        .collect();
    let summary = match rendered.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let details = causes
        .iter()
        .map(|(reason, field, message)| json!({"reason": reason, "message": message, "field": field}))
        .collect::<Vec<_>>();
    Err(StatusError {
        code: 422,
        reason: "Invalid",
        message: format!("{kind}.meta.k8s.io \"\" is invalid: {summary}"),
        details: Some(json!({"group": "meta.k8s.io", "kind": kind, "causes": details})),
    })
}

/// Reads an apply body: YAML (JSON is YAML). `{}`-less garbage is a 400, as is a body nested
/// deeper than [`nesting::MAX_NESTING`] levels; one with more open `[`/`{` than that is refused by
/// a linear pre-scan before the YAML library, whose scan of it is quadratic, sees it (see
/// [`nesting`]). kube-apiserver answers these 400 `error decoding YAML: …` too.
pub fn parse_body(body: &[u8]) -> Result<Value, StatusError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| StatusError::bad_request("the apply patch is not UTF-8"))?;
    nesting::check(text)
        .map_err(|e| StatusError::bad_request(format!("error decoding YAML: {e}")))?;
    let value: Value = serde_yaml_ng::from_str(text)
        .map_err(|e| StatusError::bad_request(format!("error decoding YAML: {e}")))?;
    if !value.is_object() {
        return Err(StatusError::bad_request(
            "the apply patch must be an object",
        ));
    }
    Ok(value)
}

/// Where the types of a resource's fields come from. Read once before a write's read-compute-commit
/// loop (see [`crate::api`]), not again on each attempt.
pub(crate) enum TypeSource {
    BuiltIn,
    /// A custom resource's `openAPIV3Schema` (from its CRD, read when the request comes).
    Custom(Value),
}

impl TypeSource {
    /// The kind whose [`super::empty_object`] a create starts from (`""` for custom resources).
    fn kind<'r>(&self, resource: &'r ResourceType) -> &'r str {
        match self {
            TypeSource::BuiltIn => &resource.kind,
            TypeSource::Custom(_) => "",
        }
    }
}

impl Api {
    pub(crate) fn type_source(&self, resource: &ResourceType) -> TypeSource {
        let Some(definition) = resource.definition.as_deref() else {
            return TypeSource::BuiltIn;
        };
        let schema = self
            .registry
            .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .and_then(|crds| self.store.get(&crds.qualified(), definition))
            .and_then(|crd| version_schema(&crd, &resource.version));
        TypeSource::Custom(schema.unwrap_or_else(|| json!({"type": "object"})))
    }

    /// Records a create, update or non-apply patch of `new` (over `old`) by `manager`, through
    /// `subresource` (`""` for the object itself), in its managedFields. A failure is logged and
    /// leaves the object without managedFields, as kube-apiserver does: ownership tracking never
    /// fails a write.
    pub(crate) fn record_update(
        &self,
        resource: &ResourceType,
        source: &TypeSource,
        old: Option<&Value>,
        new: &mut Value,
        (manager, subresource): (&str, &str),
    ) {
        let mut typed = typed(resource, source);
        typed.subresource = subresource;
        let result = super::record_update(
            &typed,
            source.kind(resource),
            old,
            new,
            manager,
            &meta::now(),
        );
        if let Err(error) = result {
            tracing::warn!(kind = %resource.kind, %manager, %error, "managedFields not recorded");
            meta::metadata_mut(new).remove("managedFields");
        }
    }

    /// Server-side apply of `request` to `name`: created when missing. See the [module docs](super).
    pub fn apply(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        request: &ApplyRequest,
        dry_run: bool,
    ) -> Result<(Value, ApplyOutcome), StatusError> {
        self.apply_to(
            resource,
            namespace,
            name,
            request,
            dry_run,
            ApplyTarget::Object,
        )
    }

    /// Server-side apply of `request` to `name` or one of its subresources (see [`ApplyTarget`]).
    /// Only the object itself is created when missing; a subresource's apply to a missing object
    /// is a 404.
    pub fn apply_to(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        request: &ApplyRequest,
        dry_run: bool,
        target: ApplyTarget,
    ) -> Result<(Value, ApplyOutcome), StatusError> {
        // What is merged into the object: the configuration, or what of it the subresource writes.
        let config = match target {
            ApplyTarget::Object => {
                check_config(resource, name, &request.config)?;
                check_declared(resource, name, &request.config)?;
                request.config.clone()
            }
            ApplyTarget::Status => {
                check_config(resource, name, &request.config)?;
                check_declared(resource, name, &request.config)?;
                status_config(resource, name, &request.config)
            }
            ApplyTarget::Scale => scale_config(resource, name, &request.config)?,
        };
        let (subresource, endpoint) = match target {
            ApplyTarget::Object => ("", Endpoint::Main),
            ApplyTarget::Status => ("status", Endpoint::Status),
            ApplyTarget::Scale => ("scale", Endpoint::Main),
        };
        let source = self.type_source(resource);
        let mut typed = typed(resource, &source);
        typed.subresource = subresource;
        let now = meta::now();
        // The request merged over `base` (the live object, or an empty one to create).
        let merge = |base: &Value| {
            super::apply(&typed, base, &config, &request.manager, request.force, &now)
        };
        let key = resource.key(namespace, name);
        let exists: Option<Arc<Value>> = self
            .store
            .get(&resource.qualified(), &key)
            .map(|s: Stored| s.object);
        if exists.is_none() {
            if target != ApplyTarget::Object {
                return Err(StatusError::not_found(resource, name));
            }
            let empty = super::empty_object(source.kind(resource));
            let mut object = match merge(&empty)? {
                Applied::Changed(object) => object,
                Applied::Unchanged => config.clone(),
            };
            meta::metadata_mut(&mut object).insert("name".into(), name.into());
            let created = self.create_recorded(resource, namespace, object, dry_run)?;
            return Ok((created, ApplyOutcome::Created));
        }
        let updated = self.write(resource, namespace, name, dry_run, |current| {
            let mut object = match merge(current)? {
                Applied::Changed(object) => object,
                Applied::Unchanged => return Ok(current.clone()),
            };
            strategy::check_type(resource, &mut object)?;
            strategy::check_namespace(resource, &mut object, namespace)?;
            // The status strategy keeps the stored object but for its status: the entries the
            // apply wrote go along.
            let managed = object.pointer("/metadata/managedFields").cloned();
            // The configuration's resourceVersion, if any, is a precondition (merged over the live one).
            strategy::prepare_update(resource, current, &mut object, endpoint)?;
            if let Some(managed) = managed {
                meta::metadata_mut(&mut object).insert("managedFields".into(), managed);
            }
            Ok(object)
        })?;
        let answer = match target {
            ApplyTarget::Scale => self.scale_view(resource, &updated),
            _ => updated,
        };
        Ok((answer, ApplyOutcome::Updated))
    }
}

/// What an apply writes: the object, its `/status`, or its `/scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyTarget {
    /// The object itself (created when missing).
    Object,
    /// Only `status` of the configuration is applied.
    Status,
    /// The configuration is an autoscaling/v1 Scale: its `spec.replicas` is applied to the
    /// object's replicas field.
    Scale,
}

/// The part of a `/status` apply that is written: the configuration's `status` (and the
/// identifying fields).
fn status_config(resource: &ResourceType, name: &str, config: &Value) -> Value {
    let mut metadata = serde_json::Map::new();
    metadata.insert("name".into(), name.into());
    if let Some(ns) = config.pointer("/metadata/namespace") {
        metadata.insert("namespace".into(), ns.clone());
    }
    if let Some(rv) = config.pointer("/metadata/resourceVersion") {
        metadata.insert("resourceVersion".into(), rv.clone());
    }
    let mut out = json!({"apiVersion": resource.api_version(), "kind": resource.kind,
                         "metadata": metadata});
    if let (Some(status), Some(map)) = (config.get("status"), out.as_object_mut()) {
        map.insert("status".into(), status.clone());
    }
    out
}

/// A `/scale` apply's Scale turned into a configuration of the object: its `spec.replicas` at
/// the object's replicas path. A configuration of another kind is a 400, as kube-apiserver
/// answers it.
fn scale_config(resource: &ResourceType, name: &str, config: &Value) -> Result<Value, StatusError> {
    let version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if version != "autoscaling/v1" || kind != "Scale" {
        let (group, version) = version.rsplit_once('/').unwrap_or(("", version));
        return Err(StatusError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    if let Some(n) = meta::name(config).filter(|n| *n != name) {
        return Err(StatusError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let mut out = json!({"apiVersion": resource.api_version(), "kind": resource.kind,
                         "metadata": {"name": name}});
    if let Some(replicas) = config.pointer("/spec/replicas") {
        let path = crate::api::spec_replicas_path(resource);
        crate::api::set_path(&mut out, &path, replicas.clone());
    }
    Ok(out)
}

fn typed<'s>(resource: &'s ResourceType, source: &'s TypeSource) -> Typed<'s> {
    let shape = match source {
        TypeSource::BuiltIn => Shape::built_in(&resource.kind),
        TypeSource::Custom(schema) => Shape::custom(schema),
    };
    Typed {
        shape,
        api_version: resource.api_version(),
        subresource: "",
    }
}

/// The `openAPIV3Schema` of `version` in a stored CRD.
fn version_schema(crd: &Stored, version: &str) -> Option<Value> {
    crd.object
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .pointer("/schema/openAPIV3Schema")
        .cloned()
}

/// The checks of an applied configuration before anything is read: its apiVersion and kind are
/// the URL's, it names the URL's object, and it carries no managedFields.
///
/// The group, version and kind are compared at once, and a mismatch is named as Go prints a
/// `GroupVersionKind` (`group/version, Kind=kind`, the group empty for the core group): 1.37's
/// wording. (1.20 checked the apiVersion, then the kind, each with a message of its own.)
fn check_config(resource: &ResourceType, name: &str, config: &Value) -> Result<(), StatusError> {
    let version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if version != resource.api_version() || kind != resource.kind {
        let (group, version) = version.rsplit_once('/').unwrap_or(("", version));
        return Err(StatusError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(StatusError::bad_request(
            "metadata.managedFields must be nil",
        ));
    }
    match meta::name(config) {
        Some(n) if n != name => Err(StatusError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

/// An apply configuration of a built-in kind names only fields its type declares: kube-apiserver
/// turns it into a typed value before anything else, whatever the `fieldValidation`, and refuses
/// the first field it does not know (in sorted order) with a bare 500. Its path is written here
/// with list indices (`containers[0]`) where kube-apiserver names a keyed element by its key
/// (`containers[name="c"]`), a known difference.
fn check_declared(resource: &ResourceType, name: &str, config: &Value) -> Result<(), StatusError> {
    if crate::field_validation::builtin_message(resource).is_none() {
        return Ok(());
    }
    let mut copy = config.clone();
    let unknown = crate::field_validation::strip_unknown(resource, &mut copy);
    let Some(first) = unknown.first() else {
        return Ok(());
    };
    let namespace = meta::string(config, "namespace").unwrap_or_default();
    Err(StatusError::unknown(
        500,
        format!(
            "failed to create typed patch object ({namespace}/{name}; {group}/{version}, Kind={kind}): .{first}: field not declared in schema",
            group = resource.group,
            version = resource.version,
            kind = resource.kind,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_options_as_kube_apiserver_checks_them() {
        let missing = check_patch_options(true, None, None).expect_err("422");
        assert_eq!(missing.code, 422);
        assert_eq!(
            missing.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        assert!(check_patch_options(false, None, Some("true")).is_err());
        assert!(check_patch_options(true, Some("a"), Some("true")).is_ok());
    }

    #[test]
    fn bodies_are_yaml_or_json() {
        let yaml = parse_body(b"kind: ConfigMap\ndata:\n  k: \"1\"\n").expect("yaml");
        assert_eq!(yaml["data"]["k"], "1");
        let json = parse_body(br#"{"kind": "ConfigMap"}"#).expect("json");
        assert_eq!(json["kind"], "ConfigMap");
        assert_eq!(parse_body(b"{not: [yaml").expect_err("400").code, 400);
        assert_eq!(parse_body(b"- a").expect_err("400").code, 400);
    }
}
