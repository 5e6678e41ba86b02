//! What the server knows of a field's type, as far as apply needs it: is an object a struct (its
//! fields owned one by one), a map (each key owned, as `labels`), or atomic (owned whole, as a
//! Deployment's `selector`); is a list a map keyed by some fields, a set, or atomic.
//!
//! kube-apiserver reads this from the OpenAPI schema of each Go type (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, and the strategic-merge `patchMergeKey`
//! where no list type is given). Here the built-in kinds are described by field name (the same
//! fields the strategic merge patch knows), and a CRD by its `openAPIV3Schema`, whose list and map
//! types are read as the real server reads them: a list without `x-kubernetes-list-type` is atomic,
//! and the undeclared values of `x-kubernetes-preserve-unknown-fields` objects are of the *deduced*
//! type ([`Shape::Deduced`]).
//!
//! The deduced type is structured-merge-diff's type for values it has no schema for: it is a
//! scalar, an atomic list and a map with free keys all at once, whichever the value turns out to be.
//! So an object there is owned itself (as a scalar would be: `".": {}`) *and* key by key, and a list
//! there is owned whole. 1.37 applies this to a preserved object's undeclared fields:
//! `extra: {free: {form: [1, 2]}}` is owned as `f:extra: {f:free: {".": {}, f:form: {}}}`. (1.20
//! owned such a value whole: `f:free: {}`.)

use serde_json::Value;

/// How a list's items are owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Items identified by these fields (`containers` by `name`).
    Map(Vec<&'static str>),
    /// Custom-resource items identified by these fields (`x-kubernetes-list-map-keys`).
    CustomMap(Vec<String>),
    /// Scalar items identified by their value (`finalizers`).
    Set,
    /// The list is one value, replaced whole.
    Atomic,
}

/// How an object's fields are owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// Declared fields: each owned on its own, the object itself only when empty.
    Struct,
    /// Free keys (`labels`, `data`): each key is owned, whatever its value.
    Map,
    /// One value, replaced whole.
    Atomic,
}

/// The type of one node of an object, and how to find its children's. See the [module docs](self).
#[derive(Debug, Clone)]
pub enum Shape<'s> {
    /// A node of a built-in kind, known by the field names leading to it (list items add none).
    BuiltIn {
        /// The kind (`Service` has a map `selector`, workloads an atomic one).
        kind: &'s str,
        /// Field names from the root.
        names: Vec<String>,
    },
    /// The root of a custom resource: its `openAPIV3Schema`, but `metadata` is an ObjectMeta.
    CustomRoot(&'s Value),
    /// A node of a custom resource's `openAPIV3Schema`.
    Schema(&'s Value),
    /// A value of unknown type: owned whole.
    Atomic,
    /// An undeclared value inside an object that preserves unknown fields (see the
    /// [module docs](self)).
    Deduced,
}

/// Map fields of the built-in kinds (string to string, or to quantities).
const MAP_FIELDS: [&str; 11] = [
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "nodeSelector",
    "matchLabels",
    "limits",
    "requests",
    "capacity",
    "allocatable",
];

/// Struct fields of the built-in kinds that are atomic (`+structType=atomic`).
const ATOMIC_FIELDS: [&str; 2] = ["labelSelector", "namespaceSelector"];

impl<'s> Shape<'s> {
    /// The root of an object of a built-in `kind`.
    pub fn built_in(kind: &'s str) -> Shape<'s> {
        Shape::BuiltIn {
            kind,
            names: Vec::new(),
        }
    }

    /// The root of a custom resource with this `openAPIV3Schema`.
    pub fn custom(schema: &'s Value) -> Shape<'s> {
        Shape::CustomRoot(schema)
    }

    /// The shape of field (or map key) `name` of this object.
    pub fn field(&self, name: &str) -> Shape<'s> {
        match self {
            Shape::BuiltIn { kind, names } => {
                if self.map_kind() != MapKind::Struct {
                    return Shape::Atomic;
                }
                let mut names = names.clone();
                names.push(name.to_string());
                Shape::BuiltIn { kind, names }
            }
            Shape::CustomRoot(_) if name == "metadata" => Shape::BuiltIn {
                kind: "",
                names: vec!["metadata".to_string()],
            },
            Shape::CustomRoot(schema) | Shape::Schema(schema) => {
                if let Some(property) = schema.get("properties").and_then(|p| p.get(name)) {
                    return Shape::Schema(property);
                }
                match schema.get("additionalProperties") {
                    Some(additional) if additional.is_object() => Shape::Schema(additional),
                    _ if preserves_unknown(schema) => Shape::Deduced,
                    _ => Shape::Atomic,
                }
            }
            Shape::Atomic => Shape::Atomic,
            Shape::Deduced => Shape::Deduced,
        }
    }

    /// The shape of this list's items.
    pub fn item(&self) -> Shape<'s> {
        match self {
            Shape::BuiltIn { kind, names } => Shape::BuiltIn {
                kind,
                names: names.clone(),
            },
            Shape::CustomRoot(_) => Shape::Atomic,
            Shape::Schema(schema) => match schema.get("items") {
                Some(items) if items.is_object() => Shape::Schema(items),
                _ => Shape::Atomic,
            },
            Shape::Atomic | Shape::Deduced => Shape::Atomic,
        }
    }

    /// How this object's fields are owned.
    pub fn map_kind(&self) -> MapKind {
        match self {
            Shape::BuiltIn { kind, names } => match names.last().map(String::as_str) {
                Some(last) if MAP_FIELDS.contains(&last) => MapKind::Map,
                Some(last) if ATOMIC_FIELDS.contains(&last) => MapKind::Atomic,
                Some("selector") if matches!(*kind, "Service" | "ReplicationController") => {
                    MapKind::Map
                }
                Some("selector") => MapKind::Atomic,
                _ => MapKind::Struct,
            },
            Shape::CustomRoot(_) => MapKind::Struct,
            Shape::Schema(schema) => {
                if schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") {
                    return MapKind::Atomic;
                }
                let has_properties = schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty());
                if has_properties {
                    MapKind::Struct
                } else {
                    // `additionalProperties` or preserved unknown fields: free keys.
                    MapKind::Map
                }
            }
            Shape::Atomic => MapKind::Atomic,
            Shape::Deduced => MapKind::Map,
        }
    }

    /// How this list's items are owned.
    pub fn list_kind(&self) -> ListKind {
        match self {
            Shape::BuiltIn { kind, names } => built_in_list(kind, names),
            Shape::Schema(schema) => {
                match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("map") => {
                        let keys = schema
                            .get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|keys| {
                                keys.iter()
                                    .filter_map(|k| k.as_str().map(str::to_string))
                                    .collect()
                            })
                            .unwrap_or_default();
                        ListKind::CustomMap(keys)
                    }
                    Some("set") => ListKind::Set,
                    _ => ListKind::Atomic,
                }
            }
            Shape::CustomRoot(_) | Shape::Atomic | Shape::Deduced => ListKind::Atomic,
        }
    }
}

/// Whether a schema node keeps undeclared fields (`x-kubernetes-preserve-unknown-fields: true`).
fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

/// The list fields of the built-in kinds that are not atomic, by name (and, for `ports`, by where
/// they are: a Service's are keyed by `port`, a container's by `containerPort`).
fn built_in_list(kind: &str, names: &[String]) -> ListKind {
    let Some(last) = names.last() else {
        return ListKind::Atomic;
    };
    match last.as_str() {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => ListKind::Map(vec!["name"]),
        "volumeMounts" => ListKind::Map(vec!["mountPath"]),
        "volumeDevices" => ListKind::Map(vec!["devicePath"]),
        "ownerReferences" => ListKind::Map(vec!["uid"]),
        "conditions" => ListKind::Map(vec!["type"]),
        "hostAliases" => ListKind::Map(vec!["ip"]),
        "topologySpreadConstraints" => ListKind::Map(vec!["topologyKey", "whenUnsatisfiable"]),
        "ports" if kind == "Service" && names.len() == 2 => ListKind::Map(vec!["port", "protocol"]),
        "ports" => ListKind::Map(vec!["containerPort", "protocol"]),
        "finalizers" => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

/// The value a missing key field of a built-in list item is defaulted to before the item is
/// keyed (kube-apiserver defaults the applied object first): a port's `protocol` is `TCP`.
pub fn key_default(field: &str) -> Option<Value> {
    (field == "protocol").then(|| Value::String("TCP".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn built_in_fields_by_name() {
        let root = Shape::built_in("Deployment");
        let spec = root.field("spec");
        assert_eq!(spec.field("selector").map_kind(), MapKind::Atomic);
        let containers = spec.field("template").field("spec").field("containers");
        assert_eq!(containers.list_kind(), ListKind::Map(vec!["name"]));
        assert_eq!(
            containers.item().field("ports").list_kind(),
            ListKind::Map(vec!["containerPort", "protocol"])
        );
        assert_eq!(
            containers.item().field("args").list_kind(),
            ListKind::Atomic
        );
        let service = Shape::built_in("Service").field("spec");
        assert_eq!(service.field("selector").map_kind(), MapKind::Map);
        assert_eq!(
            service.field("ports").list_kind(),
            ListKind::Map(vec!["port", "protocol"])
        );
        assert_eq!(
            root.field("metadata").field("finalizers").list_kind(),
            ListKind::Set
        );
    }

    #[test]
    fn custom_schemas_by_their_extensions() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "slots": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["row"],
                      "items": {"type": "object", "properties": {"row": {"type": "integer"}}}},
            "notes": {"type": "array", "items": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let spec = Shape::custom(&schema).field("spec");
        assert_eq!(
            spec.field("slots").list_kind(),
            ListKind::CustomMap(vec!["row".into()])
        );
        assert_eq!(spec.field("notes").list_kind(), ListKind::Atomic);
        assert_eq!(spec.field("free").map_kind(), MapKind::Map);
        // Inside a preserved object: the deduced type, a map with free keys whose lists are atomic.
        assert_eq!(spec.field("free").field("x").map_kind(), MapKind::Map);
        assert_eq!(spec.field("free").field("x").list_kind(), ListKind::Atomic);
        assert_eq!(
            Shape::custom(&schema)
                .field("metadata")
                .field("labels")
                .map_kind(),
            MapKind::Map
        );
    }
}
