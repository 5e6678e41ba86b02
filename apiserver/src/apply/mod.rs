//! Server-side apply and field ownership: `PATCH` with `Content-Type: application/apply-patch+yaml`,
//! and the `managedFields` every write keeps up to date.
//!
//! # Why
//!
//! With client-side patches, the last writer wins and nobody knows who set what. Server-side apply
//! makes the server remember, per field, which *field manager* set it (`managedFields`). A manager
//! applies its whole intent (a partial object); the server merges it into the live object, takes
//! ownership of the fields the intent sets, refuses (409) to change a field another manager owns
//! with another value unless told to `force`, and removes the fields the manager set last time
//! and no longer does — unless someone else owns them too. Ordinary writes (create, update, merge
//! patches) are recorded as `Update` operations: their manager takes the fields it changed.
//!
//! # How data flows
//!
//! ```text
//!  PATCH ?fieldManager=alice&force=… (YAML or JSON)        PUT / POST / other PATCH
//!          │                                                        │
//!   options: fieldManager required (422), force only               manager: ?fieldManager=,
//!   for apply (422), apiVersion/kind/name checks (400)             or the User-Agent's product
//!          │                                                        │
//!   Api::apply (verb.rs)                                          Api::create/update/patch
//!          │  live object (or the kind's empty one: create)         │ strategy has run
//!          ▼                                                        ▼
//!   apply():  merge config into live ─ walk::merge               record_update():
//!             applier's fields = walk::fields_of(config)           compare old/new ─ walk::compare
//!             prune what it gave up and no one owns ─ walk::remove  changed fields move to the
//!             compare live/result: others' changed fields           updater, removed ones leave
//!             = conflicts → 409, or moved to the applier (force)    every owner
//!          │                                                        │
//!          └───────────► managed::ManagedFields written into metadata ◄──┘
//! ```
//!
//! Fields are paths in a [`fieldset::FieldSet`], typed by a [`shape::Shape`] (which lists are keyed
//! by what, which objects are maps or atomic). Some fields are never owned: `apiVersion`, `kind`,
//! and the metadata the server sets (`name`, `namespace`, `uid`, `resourceVersion`, `generation`,
//! `creationTimestamp`, `selfLink`, `clusterName`, `managedFields`).
//!
//! # Differences from kube-apiserver
//!
//! Measured by the `server_side_apply_*` cases of `tests/apiserver/conformance.rs`; see also the
//! crate docs.
//!
//! - The types of built-in fields come from a table of field names ([`shape`]), not from the Go
//!   types: a list not in the table is atomic, as are unknown objects' values. kube-apiserver 1.20
//!   knows every field.
//! - YAML bodies are read as YAML 1.2: `yes`, `on`, `y` are strings. kube-apiserver reads YAML 1.1,
//!   where they are booleans (and a label `x: y` is refused as not a string).
//! - A body nested deeper than 128 levels is refused (400 `error decoding YAML: recursion limit
//!   exceeded…`), one with more open `[`/`{` than that by a linear pre-scan ([`nesting`]) before
//!   the YAML library's quadratic scan of it. kube-apiserver reads up to 10,000 levels and
//!   answers the same 400 past them.
//! - Applying with another kind than the URL's is a 400 here; kube-apiserver 1.20 answers 500
//!   with an internal message.
//! - When several conflicts lie under one list item, kube-apiserver 1.20 may print some of their
//!   paths wrongly (a structured-merge-diff bug, fixed later); they are printed as they are here.
//! - Update managers of built-in kinds own the fields the server defaulted on their write; the
//!   defaults here are fewer (see the crate docs), so those entries list fewer fields.
//! - There are no caps on Update managers (kube-apiserver merges the oldest into
//!   `ancient-changes` past 10) and no `kubectl.kubernetes.io/last-applied-configuration`
//!   upgrade between client- and server-side apply (kubectl's own migration of its
//!   `kubectl-client-side-apply` entries works: it is a JSON patch of `managedFields`).
//! - The server's own writes: the built-in namespaces are created by `kube-apiserver` and the
//!   garbage collector's patches are `kube-controller-manager`'s, as there; CRD status and the
//!   kubelet stand-in's writes are not recorded. In-process writes through [`crate::api::Api`]'s
//!   `create`/`update`/`patch` are [`crate::api::IN_PROCESS`]'s unless their options name
//!   another manager.
//! - An Update's owned fields are compared against the kind's Go zero value, which here is a
//!   table ([`empty_object`]): a kind missing from it may show `".": {}` on `spec` or `status`
//!   where kube-apiserver does not.
//! - Apply of `/status` takes the configuration's `status` only (kube-apiserver merges all of it
//!   and then resets what the status strategy resets, which for most kinds is everything else);
//!   apply of `/scale` takes an autoscaling/v1 Scale's `spec.replicas` and applies it to the
//!   object's replicas field. Both record their entry with its `subresource`; Updates through
//!   `/status` are recorded without one (kube-apiserver names it there too).

pub mod fieldset;
pub mod managed;
pub mod nesting;
pub mod shape;
pub mod verb;
pub mod walk;

use serde_json::{Value, json};

use crate::status::StatusError;
use fieldset::{FieldSet, Path};
use managed::{Entry, ManagedError, ManagedFields, Operation};
use shape::Shape;
use walk::ItemError;

/// The media type of an apply patch (its body is YAML, of which JSON is a part).
pub const CONTENT_TYPE: &str = "application/apply-patch+yaml";

/// The longest field manager name kube-apiserver accepts.
pub(crate) const MAX_MANAGER: usize = 128;

/// The manager of a write: `?fieldManager=`, or else the User-Agent up to its first `/` (so
/// `kubectl/v1.32.0 (linux/amd64)` is `kubectl`), printable characters only, at most 128 bytes.
pub fn manager_name(field_manager: Option<&str>, user_agent: &str) -> String {
    if let Some(manager) = field_manager.filter(|m| !m.is_empty()) {
        return manager.to_string();
    }
    let product = user_agent.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in product.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_MANAGER {
            break;
        }
        out.push(c);
    }
    out
}

/// The paths no manager owns, relative to the root.
const IGNORED: [&[&str]; 12] = [
    &["f:apiVersion"],
    &["f:kind"],
    &["f:metadata"],
    &["f:metadata", "f:name"],
    &["f:metadata", "f:namespace"],
    &["f:metadata", "f:creationTimestamp"],
    &["f:metadata", "f:selfLink"],
    &["f:metadata", "f:uid"],
    &["f:metadata", "f:clusterName"],
    &["f:metadata", "f:generation"],
    &["f:metadata", "f:managedFields"],
    &["f:metadata", "f:resourceVersion"],
];

fn without_ignored(mut set: FieldSet) -> FieldSet {
    for path in IGNORED {
        let path: Path = path.iter().map(|e| e.to_string()).collect();
        set.remove(&path);
    }
    set
}

/// `object` without `managedFields`, as the walks compare objects.
fn stripped(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    copy
}

/// The empty object of a built-in `kind` as kube-apiserver starts a create from (its Go zero value):
/// what is in it already was not added by the creator. A custom resource's is `{}` (pass `""`).
pub fn empty_object(kind: &str) -> Value {
    let pod_spec = json!({"containers": null});
    let template = json!({"metadata": {}, "spec": pod_spec});
    match kind {
        "ConfigMap" | "Secret" | "Event" | "ServiceAccount" | "Endpoints" => {
            json!({"metadata": {}})
        }
        "Pod" => json!({"metadata": {}, "spec": pod_spec, "status": {}}),
        "Deployment" => {
            json!({"metadata": {}, "spec": {"template": template, "strategy": {}}, "status": {}})
        }
        "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => {
            json!({"metadata": {}, "spec": {"template": template}, "status": {}})
        }
        "PodTemplate" => json!({"metadata": {}, "template": template}),
        "Lease" => json!({"metadata": {}, "spec": {}}),
        "" => json!({}),
        _ => json!({"metadata": {}, "spec": {}, "status": {}}),
    }
}

/// One field another manager owns with another value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// `"alice"`, or `"curl" using v1`.
    pub manager: String,
    /// The order of managers in the message (appliers first).
    pub sort_key: String,
    /// The field.
    pub path: Path,
}

/// Why an apply or a recorded update failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by others with other values, and no `force`.
    #[error("{} conflict(s)", .0.len())]
    Conflicts(Vec<Conflict>),
    /// A list item that cannot be identified (a missing key, a duplicate).
    #[error(transparent)]
    Item(#[from] ItemError),
    /// The object's managedFields cannot be read.
    #[error(transparent)]
    Managed(#[from] ManagedError),
}

impl From<ApplyError> for StatusError {
    fn from(error: ApplyError) -> StatusError {
        match error {
            ApplyError::Conflicts(conflicts) => conflict_status(conflicts),
            ApplyError::Item(e) => StatusError {
                code: 500,
                reason: "InternalError",
                message: format!("failed to create typed patch object: {e}"),
                details: None,
            },
            ApplyError::Managed(e) => {
                StatusError::bad_request(format!("failed to decode managed fields: {e}"))
            }
        }
    }
}

/// The 409 of conflicts, worded as kube-apiserver words it.
fn conflict_status(mut conflicts: Vec<Conflict>) -> StatusError {
    conflicts.sort_by(|a, b| a.sort_key.cmp(&b.sort_key));
    let summary = match conflicts.as_slice() {
        [one] => format!(
            "conflict with {}: {}",
            one.manager,
            fieldset::display(&one.path)
        ),
        many => {
            let mut lines: Vec<String> = Vec::new();
            let mut current: Option<&str> = None;
            for conflict in many {
                if current != Some(conflict.sort_key.as_str()) {
                    lines.push(format!("conflicts with {}:", conflict.manager));
                    current = Some(&conflict.sort_key);
                }
                lines.push(format!("- {}", fieldset::display(&conflict.path)));
            }
            lines.join("\n")
        }
    };
    let plural = if conflicts.len() == 1 { "" } else { "s" };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.manager),
                   "field": fieldset::display(&c.path)})
        })
        .collect();
    StatusError {
        code: 409,
        reason: "Conflict",
        message: format!(
            "Apply failed with {} conflict{plural}: {summary}",
            conflicts.len()
        ),
        details: Some(json!({"causes": causes})),
    }
}

/// The type of an object and the apiVersion writes to it are recorded with.
#[derive(Debug, Clone)]
pub struct Typed<'s> {
    pub shape: Shape<'s>,
    pub api_version: String,
    /// The subresource the write goes through (`status`, `scale`; `""` for the object): recorded
    /// in the entry it makes, and part of its claim.
    pub subresource: &'s str,
}

/// What an apply wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The object, changed (or its ownership changed).
    Changed(Value),
    /// Nothing changed, not even ownership: nothing to write.
    Unchanged,
}

/// Applies `config` as `manager` to `live` (an existing object, or [`empty_object`] to create
/// one). See the [module docs](self).
pub fn apply(
    typed: &Typed<'_>,
    live: &Value,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Applied, ApplyError> {
    let shape = &typed.shape;
    let sub = typed.subresource;
    let mut managed = ManagedFields::of(live)?;
    let live = stripped(live);
    let mut result = walk::merge(&live, config, shape)?;
    let wanted = without_ignored(walk::fields_of(config, shape)?);
    let last = managed
        .find(manager, Operation::Apply, &typed.api_version, sub)
        .map(|e| e.fields.clone())
        .unwrap_or_default();

    // Fields the applier gave up, unless another manager owns them (or something in them).
    let others: FieldSet = managed
        .entries
        .iter()
        .filter(|e| !e.same_claim(manager, Operation::Apply, "", sub))
        .fold(FieldSet::new(), |all, e| all.union(&e.fields));
    let mut given_up = FieldSet::new();
    for path in last.difference(&wanted).difference(&others).paths() {
        if !others.has_at_or_below(&path) && !wanted.has_at_or_below(&path) {
            given_up.insert(&path);
        }
    }
    walk::remove_keeping_emptied(&mut result, &given_up, shape)?;
    let comparison = walk::compare(&live, &result, shape)?;
    walk::remove(&mut result, &given_up, shape)?;
    let changed = comparison.changed();
    let mut conflicts = Vec::new();
    for entry in &managed.entries {
        if entry.same_claim(manager, Operation::Apply, "", sub) {
            continue;
        }
        for path in entry.fields.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: entry.describe(),
                sort_key: entry.sort_key(),
                path,
            });
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(ApplyError::Conflicts(conflicts));
    }
    let before = managed.clone();
    for entry in &mut managed.entries {
        if !entry.same_claim(manager, Operation::Apply, "", sub) {
            entry.fields = entry
                .fields
                .difference(&changed)
                .difference(&comparison.removed);
        }
    }
    let time = match managed.find(manager, Operation::Apply, "", sub) {
        Some(previous) if comparison.is_same() => previous.time.clone(),
        _ => Some(now.to_string()),
    };
    managed
        .entries
        .retain(|e| !e.same_claim(manager, Operation::Apply, "", sub));
    managed.entries.push(Entry {
        manager: manager.to_string(),
        operation: Operation::Apply,
        api_version: typed.api_version.clone(),
        subresource: sub.to_string(),
        time,
        fields: wanted,
    });
    managed.drop_empty();
    if comparison.is_same() && same_claims(&before, &managed) {
        return Ok(Applied::Unchanged);
    }
    managed.write_to(&mut result);
    Ok(Applied::Changed(result))
}

/// Whether two sets of entries claim the same fields for the same managers.
fn same_claims(a: &ManagedFields, b: &ManagedFields) -> bool {
    let key = |m: &ManagedFields| {
        let mut entries: Vec<(String, Operation, String, Value)> = m
            .entries
            .iter()
            .map(|e| {
                (
                    e.manager.clone(),
                    e.operation,
                    e.api_version.clone(),
                    e.fields.to_fields_v1(),
                )
            })
            .collect();
        entries.sort_by(|x, y| (&x.0, x.1, &x.2).cmp(&(&y.0, y.1, &y.2)));
        entries
    };
    key(a) == key(b)
}

/// Records a write that is not an apply (`old`: the live object, or `None` for a create) as an
/// `Update` by `manager` in `new`'s managedFields: it takes the fields it added or changed from
/// every other manager, and removed fields leave every owner. The entries come from `new` when it
/// carries some (a client may rewrite them), else from `old`.
pub fn record_update(
    typed: &Typed<'_>,
    kind: &str,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
) -> Result<(), ApplyError> {
    let sent = ManagedFields::of(new)?;
    let mut managed = if sent.entries.is_empty() {
        match old {
            Some(old) => ManagedFields::of(old)?,
            None => ManagedFields::default(),
        }
    } else {
        sent
    };
    let empty = empty_object(kind);
    let old = stripped(old.unwrap_or(&empty));
    let current = stripped(new);
    let comparison = walk::compare(&old, &current, &typed.shape)?;
    let changed = comparison.changed();
    for entry in &mut managed.entries {
        entry.fields = entry
            .fields
            .difference(&changed)
            .difference(&comparison.removed);
    }
    let taken = without_ignored(changed.difference(&comparison.removed));
    if !taken.is_empty() {
        let api_version = typed.api_version.as_str();
        let previous = managed
            .find(manager, Operation::Update, api_version, typed.subresource)
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        managed
            .entries
            .retain(|e| !e.same_claim(manager, Operation::Update, api_version, typed.subresource));
        managed.entries.push(Entry {
            manager: manager.to_string(),
            operation: Operation::Update,
            api_version: api_version.to_string(),
            subresource: typed.subresource.to_string(),
            time: Some(now.to_string()),
            fields: previous.union(&taken),
        });
    }
    managed.drop_empty();
    managed.write_to(new);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": data})
    }

    fn typed() -> Typed<'static> {
        Typed {
            shape: Shape::built_in("ConfigMap"),
            api_version: "v1".into(),
            subresource: "",
        }
    }

    fn changed(applied: Result<Applied, ApplyError>) -> Value {
        match applied {
            Ok(Applied::Changed(object)) => object,
            other => panic!("expected a change: {other:?}"),
        }
    }

    #[test]
    fn manager_names_come_from_the_user_agent() {
        assert_eq!(
            manager_name(None, "kubectl/v1.32.0 (linux/amd64)"),
            "kubectl"
        );
        assert_eq!(manager_name(Some("alice"), "curl/8"), "alice");
        assert_eq!(manager_name(Some(""), "curl/8"), "curl");
    }

    #[test]
    fn conflicts_force_and_giving_up_fields() {
        let t = typed();
        let now = "2026-01-01T00:00:00Z";
        let created = changed(apply(
            &t,
            &empty_object("ConfigMap"),
            &config_map(json!({"k": "1", "j": "2"})),
            "alice",
            false,
            now,
        ));
        let clash = apply(
            &t,
            &created,
            &config_map(json!({"k": "9"})),
            "bob",
            false,
            now,
        );
        let Err(ApplyError::Conflicts(conflicts)) = clash else {
            panic!("expected a conflict: {clash:?}");
        };
        let status = StatusError::from(ApplyError::Conflicts(conflicts));
        assert_eq!(
            status.message,
            "Apply failed with 1 conflict: conflict with \"alice\": .data.k"
        );
        let forced = changed(apply(
            &t,
            &created,
            &config_map(json!({"k": "9"})),
            "bob",
            true,
            now,
        ));
        assert_eq!(forced["data"], json!({"k": "9", "j": "2"}));
        let alice_left = changed(apply(
            &t,
            &forced,
            &config_map(json!({})),
            "alice",
            false,
            now,
        ));
        assert_eq!(alice_left["data"], json!({"k": "9"}));
        let again = apply(&t, &alice_left, &config_map(json!({})), "alice", false, now);
        assert_eq!(again, Ok(Applied::Unchanged));
    }

    #[test]
    fn a_created_pod_owns_its_containers_items_not_the_list() {
        let t = Typed {
            shape: Shape::built_in("Pod"),
            api_version: "v1".into(),
            subresource: "",
        };
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}],
                             "volumes": [{"name": "v"}]}});
        record_update(&t, "Pod", None, &mut pod, "curl", "2026-01-01T00:00:00Z").expect("recorded");
        assert_eq!(
            pod["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}},
                              "f:volumes": {".": {}, "k:{\"name\":\"v\"}": {".": {}, "f:name": {}}}}})
        );
    }

    #[test]
    fn updates_take_changed_fields() {
        let t = typed();
        let now = "2026-01-01T00:00:00Z";
        let mut created = config_map(json!({"k": "1"}));
        record_update(&t, "ConfigMap", None, &mut created, "curl", now).expect("recorded");
        assert_eq!(
            created["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:k": {}}})
        );
        let mut patched = created.clone();
        patched["data"]["k"] = json!("2");
        record_update(&t, "ConfigMap", Some(&created), &mut patched, "other", now)
            .expect("recorded");
        let managers: Vec<&str> = patched["metadata"]["managedFields"]
            .as_array()
            .map(|l| l.iter().filter_map(|e| e["manager"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(managers, ["curl", "other"]);
    }
}
