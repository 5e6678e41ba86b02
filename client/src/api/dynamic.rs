//! Objects of kinds known only at run time (CRDs, or anything without a Rust type).
//!
//! A `DynamicObject` is any JSON object whose `metadata` is typed (the client, the informers and the
//! controllers all need names, namespaces and resourceVersions) and whose other fields (`spec`, `status`,
//! `data`, …) stay plain [`serde_json::Value`]s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::{ApiResource, Kind, Object};

/// An object of any kind: typed metadata, untyped everything else.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicObject {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field.
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl DynamicObject {
    /// A new object of `resource`'s kind named `name`, with no other fields yet.
    pub fn new(name: &str, resource: &ApiResource) -> DynamicObject {
        DynamicObject {
            api_version: resource.api_version(),
            kind: resource.kind.clone(),
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            data: serde_json::Map::new(),
        }
    }

    /// Sets a top-level field (`spec`, `data`, …).
    pub fn with(mut self, field: &str, value: serde_json::Value) -> DynamicObject {
        self.data.insert(field.to_string(), value);
        self
    }
}

impl Object for DynamicObject {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Which kind a `DynamicObject` is depends on where it came from: the [`ApiResource`] given to
/// its `Api`, informer or controller.
impl Kind for DynamicObject {
    type DynamicType = ApiResource;

    fn api_resource(resource: &ApiResource) -> ApiResource {
        resource.clone()
    }

    fn api_version_and_kind(&self) -> (&str, &str) {
        (&self.api_version, &self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_unknown_fields() {
        let text = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"7"},"spec":{"size":3}}"#;
        let object: DynamicObject = serde_json::from_str(text).expect("decodes");
        assert_eq!(object.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(object.data["spec"]["size"], 3);
        let back = serde_json::to_value(&object).expect("encodes");
        assert_eq!(
            back,
            serde_json::from_str::<serde_json::Value>(text).expect("json")
        );
    }
}
