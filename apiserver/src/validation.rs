//! Refusing bad objects the way kube-apiserver does: 422 Invalid with one cause per field.
//!
//! Only the checks a controller author runs into are here: names (DNS subdomain, DNS label, DNS-1035
//! label, at most 253 or 63 characters), required fields of Pods and workload specs, and a workload's
//! template labels matching its selector. Everything else is accepted, which is a known difference
//! listed in the crate docs.

use serde_json::Value;

use crate::resource::{NameRule, ResourceType};
use crate::status::Cause;

const SUBDOMAIN_HELP: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_HELP: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035_HELP: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// Checks `name` against `rule`, as `metadata.name` (or the field named `field`).
pub fn name(rule: NameRule, field: &str, name: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                causes.push(Cause::invalid(
                    field,
                    name,
                    "must be no more than 253 characters",
                ));
            }
            // Like the real validation, a name that is too long gets only that cause.
            if name.len() <= 253 && (!name.split('.').all(is_label) || name.is_empty()) {
                causes.push(Cause::invalid(field, name, SUBDOMAIN_HELP));
            }
        }
        NameRule::Label | NameRule::Label1035 => {
            if name.len() > 63 {
                causes.push(Cause::invalid(
                    field,
                    name,
                    "must be no more than 63 characters",
                ));
            }
            let shape_ok = name.len() > 63
                || match rule {
                    NameRule::Label1035 => {
                        is_label(name) && name.as_bytes()[0].is_ascii_lowercase()
                    }
                    _ => is_label(name),
                };
            if !shape_ok {
                let help = if rule == NameRule::Label {
                    LABEL_HELP
                } else {
                    LABEL_1035_HELP
                };
                causes.push(Cause::invalid(field, name, help));
            }
        }
        NameRule::PathSegment => {
            let problem = match name {
                "." => Some("may not be '.'"),
                ".." => Some("may not be '..'"),
                _ if name.contains('/') => Some("may not contain '/'"),
                _ if name.contains('%') => Some("may not contain '%'"),
                _ => None,
            };
            if let Some(problem) = problem {
                causes.push(Cause::invalid(field, name, problem));
            }
        }
    }
    causes
}

/// True if `namespace` is a valid namespace name (a DNS label).
pub fn is_namespace_name(namespace: &str) -> bool {
    is_label(namespace)
}

/// The help of a qualified name's (a label key's) name part, as kube-apiserver 1.37 words it.
const LABEL_KEY_HELP: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// The finalizers kube-apiserver knows by a bare name: the namespace controller's, and the garbage
/// collector's two.
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// What is wrong with `value` as a qualified name (a label key: an optional DNS-subdomain prefix
/// and `/`, then 1 to 63 of `[-A-Za-z0-9_.]`, alphanumeric at both ends), in kube-apiserver's
/// words (`content.IsLabelKey`, apimachinery 1.37). Linear in the length of `value`.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    problems.push("prefix part must be no more than 253 bytes".to_string());
                }
                // The subdomain pattern alone: unlike `is_label`, no label is limited to 63 here.
                let label = |part: &str| {
                    let bytes = part.as_bytes();
                    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
                    bytes.first().is_some_and(alnum)
                        && bytes.last().is_some_and(alnum)
                        && bytes.iter().all(|b| alnum(b) || *b == b'-')
                };
                if !prefix.split('.').all(label) {
                    problems.push(format!("prefix part {}", SUBDOMAIN_HELP));
                }
            }
            *name
        }
        _ => {
            problems.push(format!(
                "a valid label key {LABEL_KEY_HELP} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return problems;
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 bytes".to_string());
    }
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    let shape_ok = bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes
            .iter()
            .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'));
    if !shape_ok {
        problems.push(format!("name part {LABEL_KEY_HELP}"));
    }
    problems
}

/// Whether kube-apiserver runs the core group's extra finalizer check on objects of this type:
/// a bare finalizer name (no `/`) must be a standard one. Built-in types validated with the core
/// group's `ValidateObjectMeta` get it; custom resources and the types of a few groups that use
/// apimachinery's generic one do not (checked on 1.37.2: a Lease, RuntimeClass, webhook
/// configuration, APIService or CRD takes `ok` as a finalizer; a ConfigMap, Deployment, Job,
/// Role, EndpointSlice, NetworkPolicy, StorageClass or FlowSchema does not).
fn checks_standard_finalizers(resource: &ResourceType) -> bool {
    const GENERIC_GROUPS: [&str; 6] = [
        "coordination.k8s.io",
        "node.k8s.io",
        "admissionregistration.k8s.io",
        "apiregistration.k8s.io",
        "apiextensions.k8s.io",
        "storagemigration.k8s.io",
    ];
    resource.definition.is_none() && !GENERIC_GROUPS.contains(&resource.group.as_str())
}

/// `metadata.finalizers` as kube-apiserver 1.37.2 validates it, for every kind: each a qualified
/// name (its problems at `metadata.finalizers`, without an index), `orphan` and
/// `foregroundDeletion` not both, then (on most built-in kinds, see `checks_standard_finalizers`)
/// each bare name a standard one (at `metadata.finalizers[i]`). There is no limit on how many:
/// only the 3 MiB request body bounds the list. Linear in the list's total length.
pub fn finalizers(resource: &ResourceType, object: &Value) -> Vec<Cause> {
    let Some(list) = object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    let mut causes = Vec::new();
    for name in &names {
        for problem in qualified_name(name) {
            causes.push(Cause::invalid("metadata.finalizers", name, &problem));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        let listed = serde_json::to_string(&names).unwrap_or_default();
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "metadata.finalizers".into(),
            message: format!(
                "Invalid value: {listed}: finalizer orphan and foregroundDeletion cannot be both set"
            ),
        });
    }
    if checks_standard_finalizers(resource) {
        for (index, name) in names.iter().enumerate() {
            if !name.contains('/') && !STANDARD_FINALIZERS.contains(name) {
                causes.push(Cause::invalid(
                    &format!("metadata.finalizers[{index}]"),
                    name,
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
    }
    causes
}

/// The kind-specific checks for a new or updated object.
pub fn object(resource: &ResourceType, object: &Value) -> Vec<Cause> {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Pod") => pod_spec(object.get("spec"), "spec"),
        ("apps", "ReplicaSet") | ("apps", "Deployment") => workload(object),
        ("", "ConfigMap") => config_keys(object, &["data", "binaryData"]),
        ("", "Secret") => config_keys(object, &["data", "stringData"]),
        _ if resource.is_definitions() => crate::crd::validate(object),
        _ => Vec::new(),
    }
}

/// The checks of an update that compare the new object with the stored one (what is immutable).
pub fn update(resource: &ResourceType, old: &Value, new: &Value) -> Vec<Cause> {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Secret") => {
            let mut causes = Vec::new();
            if let (Some(was), is) = (old.get("type"), new.get("type"))
                && Some(was) != is
            {
                let shown = is.and_then(Value::as_str).unwrap_or("");
                causes.push(Cause::invalid("type", shown, "field is immutable"));
            }
            causes.extend(frozen_when_immutable(old, new, &["data"]));
            causes
        }
        ("", "ConfigMap") => frozen_when_immutable(old, new, &["data", "binaryData"]),
        _ => Vec::new(),
    }
}

/// A ConfigMap or Secret stored with `immutable: true`: neither `immutable` nor the data maps
/// (`fields`) may change, each change a `Forbidden` cause in that order.
fn frozen_when_immutable(old: &Value, new: &Value, fields: &[&str]) -> Vec<Cause> {
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return Vec::new();
    }
    let forbidden = |field: &str| Cause {
        reason: "FieldValueForbidden",
        field: field.to_string(),
        message: "Forbidden: field is immutable when `immutable` is set".to_string(),
    };
    std::iter::once("immutable")
        .chain(fields.iter().copied())
        .filter(|field| old.get(*field) != new.get(*field))
        .map(forbidden)
        .collect()
}

const CONFIG_KEY_HELP: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// The keys of a ConfigMap's or Secret's data maps (`fields`): each a config key, as files in a
/// volume are named after them: `[-._a-zA-Z0-9]+`, at most 253 characters, not `.`, `..` nor
/// starting with `..`.
fn config_keys(object: &Value, fields: &[&str]) -> Vec<Cause> {
    let mut causes = Vec::new();
    for field in fields {
        let Some(map) = object.get(*field).and_then(Value::as_object) else {
            continue;
        };
        for key in map.keys() {
            let at = format!("{field}[{key}]");
            if key.len() > 253 {
                causes.push(Cause::invalid(
                    &at,
                    key,
                    "must be no more than 253 characters",
                ));
            }
            let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if key.is_empty() || !key.chars().all(allowed) {
                causes.push(Cause::invalid(&at, key, CONFIG_KEY_HELP));
            }
            if key == "." {
                causes.push(Cause::invalid(&at, key, "must not be '.'"));
            } else if key == ".." {
                causes.push(Cause::invalid(&at, key, "must not be '..'"));
            } else if key.starts_with("..") {
                causes.push(Cause::invalid(&at, key, "must not start with '..'"));
            }
        }
    }
    causes
}

fn pod_spec(spec: Option<&Value>, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers {
        None => causes.push(Cause::required(&format!("{path}.containers"))),
        Some(list) if list.is_empty() => {
            causes.push(Cause::required(&format!("{path}.containers")))
        }
        Some(list) => {
            for (i, container) in list.iter().enumerate() {
                let at = format!("{path}.containers[{i}]");
                match container.get("name").and_then(Value::as_str) {
                    None | Some("") => causes.push(Cause::required(&format!("{at}.name"))),
                    Some(n) if !is_label(n) => {
                        causes.push(Cause::invalid(&format!("{at}.name"), n, LABEL_HELP))
                    }
                    Some(_) => {}
                }
                if container
                    .get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    causes.push(Cause::required(&format!("{at}.image")));
                }
            }
        }
    }
    causes
}

fn workload(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = object.get("spec");
    if let Some(replicas) = spec.and_then(|s| s.get("replicas")).and_then(Value::as_i64) {
        if replicas < 0 {
            // One cause, as 1.37 reports it (1.20 listed this one twice: see the conformance case).
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field: "spec.replicas".into(),
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            });
        }
    }
    let selector = spec.and_then(|s| s.get("selector"));
    let match_labels = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object);
    let has_expressions = selector
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty());
    if match_labels.is_none_or(|m| m.is_empty()) && !has_expressions {
        causes.push(Cause::required("spec.selector"));
    }
    let template_labels = spec
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object);
    if let Some(wanted) = match_labels {
        let matches = wanted
            .iter()
            .all(|(k, v)| template_labels.and_then(|t| t.get(k)) == Some(v));
        if !wanted.is_empty() && !matches {
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field: "spec.template.metadata.labels".into(),
                message: "Invalid value: map[string]string{...}: `selector` does not match template `labels`".into(),
            });
        }
    }
    let template_spec = spec
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("spec"));
    causes.extend(pod_spec(template_spec, "spec.template.spec"));
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_the_dns_rules() {
        assert!(name(NameRule::Subdomain, "metadata.name", "web-1.example").is_empty());
        assert_eq!(name(NameRule::Subdomain, "metadata.name", "Web").len(), 1);
        let long = "a".repeat(254);
        let causes = name(NameRule::Subdomain, "metadata.name", &long);
        assert!(causes[0].message.contains("no more than 253"));
        assert!(!name(NameRule::Label, "metadata.name", "a.b").is_empty());
        assert!(!name(NameRule::Label1035, "metadata.name", "1abc").is_empty());
        assert!(name(NameRule::Label1035, "metadata.name", "abc-1").is_empty());
        assert!(name(NameRule::PathSegment, "metadata.name", "system:Admin_1").is_empty());
        assert_eq!(name(NameRule::PathSegment, "metadata.name", "a/b").len(), 1);
        assert_eq!(name(NameRule::PathSegment, "metadata.name", "..").len(), 1);
    }

    #[test]
    fn pods_need_containers_with_images() {
        let causes = pod_spec(Some(&json!({"containers": [{"name": "c"}]})), "spec");
        assert_eq!(causes, vec![Cause::required("spec.containers[0].image")]);
        assert_eq!(pod_spec(None, "spec").len(), 1);
    }

    #[test]
    fn a_template_must_match_its_selector() {
        let rs = json!({"spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let causes = workload(&rs);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
    }
}
