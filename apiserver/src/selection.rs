//! Which objects a list or watch returns: a label selector and a field selector together.
//!
//! Label selectors reuse the informer's parser ([`LabelSelector`]), so client and server agree on
//! the grammar by construction. Field selectors are the server's own: `field=value`, `field==value` and
//! `field!=value`, joined by commas, over `metadata.name`, `metadata.namespace` and the few fields each
//! resource type allows ([`ResourceType::selectable_fields`]). Any other field is a 400, as on the real
//! server.

use ferrokube_informer::labels::LabelSelector;
use serde_json::Value;

use crate::meta;
use crate::resource::ResourceType;
use crate::status::StatusError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum FieldRequirement {
    Equals(String, String),
    NotEquals(String, String),
}

/// A parsed label selector plus field selector.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    labels: LabelSelector,
    fields: Vec<FieldRequirement>,
}

impl Selection {
    /// Parses the `labelSelector` and `fieldSelector` query parameters for `resource`.
    pub fn parse(
        resource: &ResourceType,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Selection, StatusError> {
        let labels = match labels {
            Some(selector) => LabelSelector::parse(selector).map_err(|e| {
                StatusError::bad_request(format!("unable to parse requirement: {e}"))
            })?,
            None => LabelSelector::everything(),
        };
        let mut parsed = Vec::new();
        for part in fields.unwrap_or("").split(',').map(str::trim) {
            if part.is_empty() {
                continue;
            }
            let requirement = if let Some((f, v)) = part.split_once("!=") {
                FieldRequirement::NotEquals(f.trim().to_string(), v.trim().to_string())
            } else if let Some((f, v)) = part.split_once("==") {
                FieldRequirement::Equals(f.trim().to_string(), v.trim().to_string())
            } else if let Some((f, v)) = part.split_once('=') {
                FieldRequirement::Equals(f.trim().to_string(), v.trim().to_string())
            } else {
                return Err(StatusError::bad_request(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let field = match &requirement {
                FieldRequirement::Equals(f, _) | FieldRequirement::NotEquals(f, _) => f,
            };
            let known = field == "metadata.name"
                || field == "metadata.namespace"
                || resource.selectable_fields.iter().any(|f| f == field);
            if !known {
                return Err(StatusError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            parsed.push(requirement);
        }
        Ok(Selection {
            labels,
            fields: parsed,
        })
    }

    /// True when the selection matches every object.
    pub fn is_everything(&self) -> bool {
        self.labels.is_everything() && self.fields.is_empty()
    }

    /// True if `object` is selected.
    pub fn matches(&self, object: &Value) -> bool {
        if !self.labels.is_everything() && !self.labels.matches(Some(&meta::labels(object))) {
            return false;
        }
        self.fields.iter().all(|requirement| match requirement {
            FieldRequirement::Equals(f, v) => field_value(object, f) == *v,
            FieldRequirement::NotEquals(f, v) => field_value(object, f) != *v,
        })
    }
}

/// The value of a dotted field path as a field selector sees it: missing is the empty string,
/// except for the boolean fields kube-apiserver formats from a Go `bool` (a missing one is `false`).
fn field_value(object: &Value, path: &str) -> String {
    let missing = || match path {
        "spec.unschedulable" => "false".to_string(),
        _ => String::new(),
    };
    let mut at = object;
    for segment in path.split('.') {
        match at.get(segment) {
            Some(next) => at = next,
            None => return missing(),
        }
    }
    match at {
        Value::String(s) => s.clone(),
        Value::Null => missing(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;
    use serde_json::json;

    fn pods() -> std::sync::Arc<ResourceType> {
        Registry::default()
            .find("", "v1", "pods")
            .expect("pods are built in")
    }

    #[test]
    fn labels_and_fields_must_both_hold() {
        let pod = json!({"metadata": {"name": "a", "namespace": "n", "labels": {"app": "web"}},
                         "status": {"phase": "Running"}});
        let s = |l, f| Selection::parse(&pods(), l, f).expect("valid");
        assert!(s(Some("app=web"), Some("status.phase=Running")).matches(&pod));
        assert!(!s(Some("app=db"), None).matches(&pod));
        assert!(!s(None, Some("status.phase!=Running")).matches(&pod));
        assert!(s(None, Some("metadata.name==a,metadata.namespace=n")).matches(&pod));
        assert!(s(None, Some("spec.nodeName=")).matches(&pod));
    }

    #[test]
    fn unknown_fields_and_bad_syntax_are_bad_requests() {
        let error = Selection::parse(&pods(), None, Some("spec.foo=1")).expect_err("unknown");
        assert_eq!((error.code, error.reason), (400, "BadRequest"));
        assert!(Selection::parse(&pods(), None, Some("nonsense")).is_err());
        assert!(Selection::parse(&pods(), Some("a in (b"), None).is_err());
    }
}
