//! Which objects a list or watch returns: a label selector and a field selector together.
//!
//! Both grammars are the object model's (`ferrokube-core`): [`LabelSelector`] is the very parser the
//! informers' listers match with, so client and server agree on it by construction, and
//! [`FieldSelector`] is `field=value`, `field==value` and `field!=value` joined by commas. What is the
//! server's own is the field set: `metadata.name`, `metadata.namespace` and the few fields each
//! resource type allows ([`ResourceType::selectable_fields`]), any other field being a 400 as on the
//! real server, and how a field's value is read from a stored object (`field_value`).
//!
//! A third, optional part is a shard selector (`shardSelector`, see [`crate::shard`]): the hash of
//! the object's uid or namespace must fall in its ranges. It rides here so that every reader of a
//! selection (list, the watch's backlog and live events, deletecollection) applies it too.

use ferrokube_core::fields::{FieldSelector, FieldSelectorError};
use ferrokube_core::labels::LabelSelector;
use ferrokube_core::shard::{ShardField, ShardSelector};
use serde_json::Value;

use crate::meta;
use crate::resource::ResourceType;
use crate::status::StatusError;

/// A parsed label selector plus field selector.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    labels: LabelSelector,
    fields: FieldSelector,
    /// `None`: every shard.
    shard: Option<ShardSelector>,
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
        let known = |field: &str| {
            field == "metadata.name"
                || field == "metadata.namespace"
                || resource.selectable_fields.iter().any(|f| f == field)
        };
        let fields = FieldSelector::parse_with(fields.unwrap_or(""), known).map_err(|error| {
            StatusError::bad_request(match error {
                FieldSelectorError::Syntax { requirement: part } => {
                    format!("invalid selector: '{part}'; can't understand '{part}'")
                }
                FieldSelectorError::UnsupportedField { field } => {
                    format!("field label not supported: {field}")
                }
            })
        })?;
        Ok(Selection {
            labels,
            fields,
            shard: None,
        })
    }

    /// This selection narrowed to a shard (or widened to every shard with `None`).
    pub fn with_shard(mut self, shard: Option<ShardSelector>) -> Selection {
        self.shard = shard;
        self
    }

    /// The shard selector, echoed in a list's `metadata.shardInfo`.
    pub fn shard(&self) -> Option<&ShardSelector> {
        self.shard.as_ref()
    }

    /// True when the selection matches every object.
    pub fn is_everything(&self) -> bool {
        self.labels.is_everything() && self.fields.is_everything() && self.shard.is_none()
    }

    /// True if `object` is selected.
    pub fn matches(&self, object: &Value) -> bool {
        if let Some(shard) = &self.shard {
            let value = match shard.field() {
                ShardField::Uid => meta::uid(object),
                ShardField::Namespace => meta::namespace(object),
            };
            if !shard.matches_value(value.unwrap_or("")) {
                return false;
            }
        }
        if !self.labels.is_everything() && !self.labels.matches(Some(&meta::labels(object))) {
            return false;
        }
        self.fields.matches(|field| field_value(object, field))
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
