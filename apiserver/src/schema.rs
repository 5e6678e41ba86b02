//! Structural schemas: how a CustomResourceDefinition's `openAPIV3Schema` shapes and checks the
//! custom objects stored under it.
//!
//! kube-apiserver knows nothing about a custom kind but its schema, and applies it in two steps on
//! every write, in this order:
//!
//! 1. **Pruning.** A field the schema does not declare is dropped, silently, unless the enclosing
//!    object says `x-kubernetes-preserve-unknown-fields: true`. A `null` where the schema does not
//!    say `nullable: true` is dropped too. At the root, `apiVersion`, `kind` and `metadata` are
//!    always kept (metadata is pruned to the fields of an ObjectMeta). This is why a typo in a
//!    field name of a custom object "does nothing" rather than failing.
//! 2. **Validation.** What is left is checked against `type`, `required`, `enum`, `minimum`,
//!    `maximum` (and their `exclusive…` forms), `minLength` and `maxLength`. Every problem becomes
//!    one cause of a 422 Invalid, in kube-apiserver's words:
//!
//! 3. **Defaulting.** A declared field that is missing gets its schema's `default`
//!    ([`Schema::default_object`]): on every create and update (after pruning), and on every object
//!    read back (a GET or a list), so objects stored before a default was added read with it.
//!
//! ```text
//! spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"
//! spec.size: Required value
//! spec.color: Unsupported value: "green": supported values: "red", "blue"
//! spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10
//! spec.name: Too long: may not be more than 3 bytes
//! ```
//!
//! (1.37's words, and its reasons: a wrong type is `FieldValueTypeInvalid`, a string over
//! `maxLength` `FieldValueTooLong`; 1.20 said `FieldValueInvalid` for both, and worded the second
//! `Invalid value: "ABCD": spec.name in body should be at most 3 chars long`.) A write to `/status`
//! checks the status alone, and its messages name the path from `status` ([`Schema::validate_status`]).
//!
//! An empty string is a string, as in 1.37 (kube-openapi's type check compares with `nil`; 1.20's
//! go-openapi took every zero value, `""` included, for `null` and refused `""` where a string was
//! required, which custom resources with `field: ""` met as a 422). A quirk of kube-apiserver 1.20
//! kept on purpose, since clients see it: problems inside an array's items are reported at the
//! array's path (`spec.tags`, not `spec.tags[0]`). Properties are checked
//! in alphabetical order; kube-apiserver checks them in an order that varies from request to request.
//!
//! `x-kubernetes-validations` (CEL rules) are read here; [`crate::cel`] compiles, explains and runs
//! them.
//!
//! Not supported (accepted and ignored): `pattern`, `format`, `multipleOf`, `minItems`/`maxItems`,
//! `uniqueItems`, `minProperties`/`maxProperties` (`maxItems`, `maxProperties` and `maxLength` also bound the
//! cost of CEL rules), `allOf`/`anyOf`/`oneOf`/`not`,
//! `x-kubernetes-embedded-resource`, list and map types.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::status::Cause;

// The rules of `x-kubernetes-validations`, as read and as compiled by [`crate::cel`] (which
// compiles and runs them; they live here so that a schema can hold them).

/// One entry of `x-kubernetes-validations`, as written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleSpec {
    /// `rule`: the CEL expression, true when the value is valid.
    pub rule: String,
    /// `message`: what a failure says instead of `failed rule: <rule>`.
    pub message: Option<String>,
    /// `messageExpression`: a CEL expression giving the message (a string).
    pub message_expression: Option<String>,
    /// `reason`: the cause's reason (`FieldValueInvalid` when unset).
    pub reason: Option<String>,
    /// `fieldPath`: where below the node a failure is reported (`.spec.replicas`, `['a.b']`).
    pub field_path: Option<String>,
    /// `optionalOldSelf` (not supported: refused when the CRD is written).
    pub optional_old_self: Option<bool>,
}

/// A rule and what compiling it gave.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule as written.
    pub spec: RuleSpec,
    /// The programs, once compiled without problems.
    pub(crate) compiled: Option<std::sync::Arc<Compiled>>,
    /// Why the rule cannot be used (empty once compiled).
    pub(crate) problems: Vec<Problem>,
    /// The rule's estimated worst-case cost times how often it can run in one object (what
    /// kube-apiserver compares with its per-rule limit and adds to the CRD's total).
    pub(crate) cost: f64,
    /// The messageExpression's estimated cost, once (kube-apiserver does not multiply it).
    pub(crate) message_cost: f64,
}

impl Rule {
    /// Reads one entry of `x-kubernetes-validations`; `None` if it is not an object.
    pub fn parse(value: &Value) -> Option<Rule> {
        let map = value.as_object()?;
        let text = |name: &str| map.get(name).and_then(Value::as_str).map(str::to_string);
        let spec = RuleSpec {
            rule: text("rule").unwrap_or_default(),
            message: text("message"),
            message_expression: text("messageExpression"),
            reason: text("reason"),
            field_path: text("fieldPath"),
            optional_old_self: map.get("optionalOldSelf").and_then(Value::as_bool),
        };
        Some(Rule {
            spec,
            compiled: None,
            problems: Vec::new(),
            cost: 0.0,
            message_cost: 0.0,
        })
    }
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

/// A compiled rule.
pub(crate) struct Compiled {
    /// The rule as evaluated: its expression instrumented by `cel::meter`.
    pub(crate) metered: cel::IdedExpr,
    /// The messageExpression as evaluated, instrumented.
    pub(crate) message_metered: Option<cel::IdedExpr>,
    pub(crate) uses_old_self: bool,
    /// `fieldPath`, normalized (`spec.replicas`, `[a.b]`), appended to the node's path.
    pub(crate) field_path: Option<String>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("uses_old_self", &self.uses_old_self)
            .field("field_path", &self.field_path)
            .finish_non_exhaustive()
    }
}

/// Why a rule cannot be used, as one cause of the CRD's 422 (see [`Rule`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Problem {
    /// The field of the rule it is about: `rule`, `message`, `messageExpression`, `reason`,
    /// `fieldPath`.
    pub(crate) field: &'static str,
    pub(crate) reason: &'static str,
    /// The message of the cause (after `Invalid value: …: ` and the like).
    pub(crate) message: String,
}

/// The JSON types a schema's `type` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl JsonType {
    fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::String => "string",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::Boolean => "boolean",
        }
    }

    /// True if `value` (not null) is of this type. An integer is also a number.
    fn admits(self, value: &Value) -> bool {
        match self {
            JsonType::Object => value.is_object(),
            JsonType::Array => value.is_array(),
            JsonType::String => value.is_string(),
            JsonType::Integer => value.is_i64() || value.is_u64(),
            JsonType::Number => value.is_number(),
            JsonType::Boolean => value.is_boolean(),
        }
    }
}

/// The type name kube-apiserver reports for a value (`""` is a string: see the module docs).
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A schema that cannot be used, with the path inside `openAPIV3Schema` where it went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// `type` names no JSON type.
    #[error(
        "{path}.type: Unsupported value: {found:?}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
    )]
    UnknownType { path: String, found: String },
    /// A keyword has a value of the wrong shape (e.g. `required` that is not a list of strings).
    #[error("{path}.{keyword}: Invalid value: must be {expected}")]
    Malformed {
        path: String,
        keyword: &'static str,
        expected: &'static str,
    },
    /// The root must say `type: object`.
    #[error("{path}.type: Required value: must be object at the root")]
    RootNotObject { path: String },
}

/// One node of a structural schema. See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    /// `type`; `None` admits any type.
    kind: Option<JsonType>,
    /// `nullable: true`: a null is kept and valid.
    nullable: bool,
    /// `x-kubernetes-int-or-string: true`: an integer or a string.
    int_or_string: bool,
    /// `properties`: the declared fields of an object, by name.
    properties: BTreeMap<String, Schema>,
    /// `additionalProperties` as a schema: every undeclared field of an object (a map's values).
    additional: Option<Box<Schema>>,
    /// `items`: every element of an array.
    items: Option<Box<Schema>>,
    /// `required`: fields an object must have (and not null).
    required: Vec<String>,
    /// `x-kubernetes-preserve-unknown-fields: true`: undeclared fields are kept, unchecked.
    preserve_unknown: bool,
    /// `enum`: the only values allowed, if not empty.
    allowed: Vec<Value>,
    /// `minimum`, and whether it is exclusive.
    minimum: Option<(f64, bool)>,
    /// `maximum`, and whether it is exclusive.
    maximum: Option<(f64, bool)>,
    /// `minLength`, in characters.
    min_length: Option<u64>,
    /// `maxLength`, in characters.
    max_length: Option<u64>,
    /// `default`: the value a missing field of this schema gets (see [`Schema::default_object`]).
    default: Option<Value>,
    /// `format` (`byte`, `duration`, `date`, `date-time`, ...): only used by the CEL rules, whose
    /// types and size estimates depend on it ([`crate::cel`]).
    pub(crate) format: Option<String>,
    /// `x-kubernetes-embedded-resource: true`: the value is a whole object (its CEL type, like a
    /// root's, has `apiVersion`, `kind` and `metadata`).
    embedded: bool,
    /// `maxItems`: only used to bound the cost of CEL rules ([`crate::cel`]).
    pub(crate) max_items: Option<u64>,
    /// `maxProperties`: only used to bound the cost of CEL rules.
    pub(crate) max_properties: Option<u64>,
    /// `x-kubernetes-list-type` (`atomic`, `set`, `map`).
    pub(crate) list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`: what identifies an item of a `map` list.
    pub(crate) list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type` (`granular`, `atomic`).
    pub(crate) map_type: Option<String>,
    /// `x-kubernetes-validations`: CEL rules, compiled by [`crate::cel::compile_schema`].
    pub(crate) rules: Vec<Rule>,
}

/// The fields of an ObjectMeta: everything else under a custom object's `metadata` is pruned.
const OBJECT_META: [&str; 16] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "clusterName",
    "managedFields",
];

/// Joins a field path the way causes name fields: `spec` + `size` = `spec.size`.
fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// A value as Go's field errors print it: strings quoted, everything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl Schema {
    /// `type`, as its name (`object`, `string`, ...), or `""` when the schema names none.
    pub(crate) fn type_name(&self) -> &'static str {
        self.kind.map(JsonType::name).unwrap_or("")
    }

    /// True for `type: object` (or no type with declared properties).
    pub(crate) fn is_object(&self) -> bool {
        self.kind == Some(JsonType::Object)
    }

    /// True for `type: array`.
    pub(crate) fn is_array(&self) -> bool {
        self.kind == Some(JsonType::Array)
    }

    /// True for `type: integer`.
    pub(crate) fn is_integer(&self) -> bool {
        self.kind == Some(JsonType::Integer)
    }

    /// True for `type: number`.
    pub(crate) fn is_number(&self) -> bool {
        self.kind == Some(JsonType::Number)
    }

    /// True for `type: string`.
    pub(crate) fn is_string(&self) -> bool {
        self.kind == Some(JsonType::String)
    }

    /// True for `type: boolean`.
    pub(crate) fn is_boolean(&self) -> bool {
        self.kind == Some(JsonType::Boolean)
    }

    /// `x-kubernetes-int-or-string`.
    pub(crate) fn int_or_string(&self) -> bool {
        self.int_or_string
    }

    /// `x-kubernetes-preserve-unknown-fields`.
    pub(crate) fn preserves_unknown(&self) -> bool {
        self.preserve_unknown
    }

    /// `properties`.
    pub(crate) fn properties(&self) -> &BTreeMap<String, Schema> {
        &self.properties
    }

    /// `properties`, to change (the CEL compiler stores its programs in them).
    pub(crate) fn properties_mut(&mut self) -> &mut BTreeMap<String, Schema> {
        &mut self.properties
    }

    /// `additionalProperties` as a schema.
    pub(crate) fn additional(&self) -> Option<&Schema> {
        self.additional.as_deref()
    }

    /// `additionalProperties`, to change.
    pub(crate) fn additional_mut(&mut self) -> Option<&mut Schema> {
        self.additional.as_deref_mut()
    }

    /// `items`.
    pub(crate) fn items(&self) -> Option<&Schema> {
        self.items.as_deref()
    }

    /// `items`, to change.
    pub(crate) fn items_mut(&mut self) -> Option<&mut Schema> {
        self.items.as_deref_mut()
    }

    /// `maxLength`.
    pub(crate) fn max_length(&self) -> Option<u64> {
        self.max_length
    }

    /// `enum`'s values (empty when the schema has none).
    pub(crate) fn allowed(&self) -> &[Value] {
        &self.allowed
    }

    /// `required`.
    pub(crate) fn required(&self) -> &[String] {
        &self.required
    }

    /// `x-kubernetes-embedded-resource`.
    pub(crate) fn embedded_resource(&self) -> bool {
        self.embedded
    }

    /// True when the schema has a `default`.
    pub(crate) fn has_default(&self) -> bool {
        self.default.is_some()
    }

    /// Reads the root `openAPIV3Schema` (which must be `type: object`); `path` names it in errors.
    pub fn root(value: &Value, path: &str) -> Result<Schema, SchemaError> {
        let schema = Schema::parse(value, path)?;
        if schema.kind != Some(JsonType::Object) {
            return Err(SchemaError::RootNotObject {
                path: path.to_string(),
            });
        }
        Ok(schema)
    }

    /// Reads one node and everything below it.
    fn parse(value: &Value, path: &str) -> Result<Schema, SchemaError> {
        // Long: one short step per keyword of the schema language, in one place so that the
        // keywords this server understands can be read (and compared with Kubernetes') at once.
        let malformed = |keyword, expected| SchemaError::Malformed {
            path: path.to_string(),
            keyword,
            expected,
        };
        let Some(map) = value.as_object() else {
            return Err(SchemaError::Malformed {
                path: path.to_string(),
                keyword: "type",
                expected: "a schema object",
            });
        };
        let flag = |name: &str| map.get(name).and_then(Value::as_bool).unwrap_or(false);
        let mut schema = Schema {
            nullable: flag("nullable"),
            int_or_string: flag("x-kubernetes-int-or-string"),
            preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
            format: map
                .get("format")
                .and_then(Value::as_str)
                .map(str::to_string),
            embedded: flag("x-kubernetes-embedded-resource"),
            ..Schema::default()
        };
        match map.get("type") {
            None => {}
            Some(Value::String(name)) if name.is_empty() => {}
            Some(Value::String(name)) => {
                schema.kind =
                    Some(
                        JsonType::parse(name).ok_or_else(|| SchemaError::UnknownType {
                            path: path.to_string(),
                            found: name.clone(),
                        })?,
                    );
            }
            Some(_) => return Err(malformed("type", "a string")),
        }
        if let Some(properties) = map.get("properties") {
            let properties = properties
                .as_object()
                .ok_or_else(|| malformed("properties", "an object"))?;
            for (name, child) in properties {
                let child_path = format!("{path}.properties[{name}]");
                schema
                    .properties
                    .insert(name.clone(), Schema::parse(child, &child_path)?);
            }
        }
        match map.get("additionalProperties") {
            Some(child @ Value::Object(_)) => {
                let child_path = format!("{path}.additionalProperties");
                schema.additional = Some(Box::new(Schema::parse(child, &child_path)?));
            }
            // `true` is the same as `{}` for pruning: keep every undeclared field.
            Some(Value::Bool(true)) => {
                schema.additional = Some(Box::new(Schema {
                    preserve_unknown: true,
                    ..Schema::default()
                }))
            }
            _ => {}
        }
        if let Some(items) = map.get("items") {
            let child_path = format!("{path}.items");
            schema.items = Some(Box::new(Schema::parse(items, &child_path)?));
        }
        if let Some(required) = map.get("required") {
            schema.required = required
                .as_array()
                .and_then(|names| {
                    names
                        .iter()
                        .map(|n| n.as_str().map(str::to_string))
                        .collect::<Option<Vec<String>>>()
                })
                .ok_or_else(|| malformed("required", "a list of strings"))?;
        }
        if let Some(allowed) = map.get("enum") {
            schema.allowed = allowed
                .as_array()
                .cloned()
                .ok_or_else(|| malformed("enum", "a list"))?;
        }
        let number = |name: &'static str| match map.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| malformed(name, "a number")),
        };
        let count = |name: &'static str| match map.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| malformed(name, "a non-negative integer")),
        };
        schema.minimum = number("minimum")?.map(|m| (m, flag("exclusiveMinimum")));
        schema.maximum = number("maximum")?.map(|m| (m, flag("exclusiveMaximum")));
        schema.default = map.get("default").cloned();
        schema.min_length = count("minLength")?;
        schema.max_length = count("maxLength")?;
        schema.max_items = count("maxItems")?;
        schema.max_properties = count("maxProperties")?;
        let word = |name: &str| map.get(name).and_then(Value::as_str).map(str::to_string);
        schema.list_type = word("x-kubernetes-list-type");
        schema.map_type = word("x-kubernetes-map-type");
        schema.list_map_keys = map
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(rules) = map.get("x-kubernetes-validations") {
            schema.rules = rules
                .as_array()
                .and_then(|rules| rules.iter().map(Rule::parse).collect::<Option<Vec<_>>>())
                .ok_or_else(|| malformed("x-kubernetes-validations", "a list of rules"))?;
        }
        Ok(schema)
    }

    /// Prunes a whole custom object in place (see the [module docs](self)).
    pub fn prune_object(&self, object: &mut Value) {
        let Some(map) = object.as_object_mut() else {
            return;
        };
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            metadata.retain(|k, _| OBJECT_META.contains(&k.as_str()));
        }
        self.prune_fields(map, true);
    }

    /// Removes what [`Schema::prune_object`] would, from a write's body, and names each removed
    /// field by its path (`metadata.foo`, `spec.items[0].b`): the unknown fields that
    /// `fieldValidation` judges (see [`crate::field_validation`]). A `null` the schema does not
    /// allow is left to pruning: it is not an unknown field.
    pub fn strip_unknown(&self, object: &mut Value, unknown: &mut Vec<String>) {
        let Some(map) = object.as_object_mut() else {
            return;
        };
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            metadata.retain(|k, _| {
                let known = OBJECT_META.contains(&k.as_str());
                if !known {
                    unknown.push(join("metadata", k));
                }
                known
            });
        }
        self.strip_fields(map, "", unknown);
    }

    fn strip_fields(&self, map: &mut Map<String, Value>, path: &str, unknown: &mut Vec<String>) {
        map.retain(|key, value| {
            if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                return true;
            }
            let child_path = join(path, key);
            match self.properties.get(key).or(self.additional.as_deref()) {
                Some(child) => {
                    child.strip_below(value, &child_path, unknown);
                    true
                }
                None if self.preserve_unknown => true,
                None => {
                    unknown.push(child_path);
                    false
                }
            }
        });
    }

    fn strip_below(&self, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
        match value {
            Value::Object(map) => self.strip_fields(map, path, unknown),
            Value::Array(items) => {
                if let Some(schema) = self.items.as_deref() {
                    for (i, item) in items.iter_mut().enumerate() {
                        schema.strip_below(item, &format!("{path}[{i}]"), unknown);
                    }
                }
            }
            _ => {}
        }
    }

    /// Prunes the fields of one object; at the root, `apiVersion`, `kind` and `metadata` stay.
    fn prune_fields(&self, map: &mut Map<String, Value>, root: bool) {
        map.retain(|key, value| {
            if root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                return true;
            }
            let declared = self.properties.get(key).or(self.additional.as_deref());
            match declared {
                Some(child) if value.is_null() => child.nullable,
                Some(child) => {
                    child.prune(value);
                    true
                }
                None => self.preserve_unknown,
            }
        });
    }

    /// Prunes one value below the root.
    fn prune(&self, value: &mut Value) {
        match value {
            Value::Object(map) => self.prune_fields(map, false),
            Value::Array(items) => {
                if let Some(schema) = self.items.as_deref() {
                    for item in items {
                        schema.prune(item);
                    }
                }
            }
            _ => {}
        }
    }

    /// Fills in the `default` of every declared field missing from `object`, at any depth (in
    /// objects that are present; a default object is itself defaulted below), as kube-apiserver
    /// does to a request's body and to every object it reads from storage. True if anything was
    /// added.
    pub fn default_object(&self, object: &mut Value) -> bool {
        match object.as_object_mut() {
            Some(map) => self.default_fields(map),
            None => false,
        }
    }

    fn default_fields(&self, map: &mut Map<String, Value>) -> bool {
        let mut changed = false;
        for (name, child) in &self.properties {
            if !map.contains_key(name) {
                if let Some(default) = &child.default {
                    map.insert(name.clone(), default.clone());
                    changed = true;
                }
            }
            if let Some(value) = map.get_mut(name) {
                changed |= child.default_value(value);
            }
        }
        if let Some(child) = self.additional.as_deref() {
            for (name, value) in map.iter_mut() {
                if !self.properties.contains_key(name) {
                    changed |= child.default_value(value);
                }
            }
        }
        changed
    }

    fn default_value(&self, value: &mut Value) -> bool {
        match value {
            Value::Object(map) => self.default_fields(map),
            Value::Array(items) => match self.items.as_deref() {
                Some(schema) => items
                    .iter_mut()
                    .fold(false, |changed, item| schema.default_value(item) | changed),
                None => false,
            },
            _ => false,
        }
    }

    /// Checks a whole (pruned) custom object; metadata, apiVersion and kind are checked elsewhere.
    pub fn validate_object(&self, object: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(map) = object.as_object() {
            self.validate_fields(map, "", true, &mut causes);
        }
        causes
    }

    /// Checks the `status` of a custom object on a write to its `/status` subresource, as 1.37 does:
    /// against the schema of `status` alone, so a message names the path from there (`ready in
    /// body must be …`) while the cause's field is the whole path (`status.ready`).
    pub fn validate_status(&self, object: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let (Some(schema), Some(status)) = (self.properties.get("status"), object.get("status"))
        {
            schema.validate(status, "", &mut causes);
        }
        for cause in &mut causes {
            cause.field = join("status", &cause.field)
                .trim_end_matches('.')
                .to_string();
        }
        causes
    }

    /// Checks one value at `path`, appending a cause per problem.
    fn validate(&self, value: &Value, path: &str, causes: &mut Vec<Cause>) {
        self.check_type(value, path, causes);
        match value {
            Value::String(s) => self.check_length(s, path, causes),
            Value::Number(_) => self.check_range(value, path, causes),
            _ => {}
        }
        if !self.allowed.is_empty() && !value.is_null() && !self.allowed.contains(value) {
            let supported: Vec<String> = self
                .allowed
                .iter()
                .map(|v| match v {
                    Value::String(s) => format!("{s:?}"),
                    other => format!("{:?}", other.to_string()),
                })
                .collect();
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: path.to_string(),
                message: format!(
                    "Unsupported value: {}: supported values: {}",
                    shown(value),
                    supported.join(", ")
                ),
            });
        }
        match value {
            Value::Object(map) => self.validate_fields(map, path, false, causes),
            Value::Array(items) => {
                if let Some(schema) = self.items.as_deref() {
                    for item in items {
                        // kube-apiserver 1.20 names the array, not the element (module docs).
                        schema.validate(item, path, causes);
                    }
                }
            }
            _ => {}
        }
    }

    fn check_type(&self, value: &Value, path: &str, causes: &mut Vec<Cause>) {
        let actual = type_of(value);
        let ok = if actual == "null" {
            self.nullable || self.kind.is_none() || self.int_or_string
        } else if self.int_or_string {
            value.is_string() || value.is_i64() || value.is_u64()
        } else {
            self.kind.is_none_or(|kind| kind.admits(value))
        };
        let Some(kind) = self.kind.filter(|_| !ok) else {
            return;
        };
        // A wrong type has a reason of its own since 1.2x (1.20: FieldValueInvalid).
        causes.push(Cause {
            reason: "FieldValueTypeInvalid",
            ..Cause::invalid(
                path,
                actual,
                &format!(
                    "{path} in body must be of type {}: \"{actual}\"",
                    kind.name()
                ),
            )
        });
    }

    fn check_length(&self, s: &str, path: &str, causes: &mut Vec<Cause>) {
        let length = s.chars().count() as u64;
        if let Some(max) = self.max_length.filter(|max| length > *max) {
            // 1.37 words it as field.TooLong does, in bytes, without the value (1.20: "Invalid
            // value: \"ABCD\": spec.name in body should be at most 3 chars long").
            let unit = if max == 1 { "byte" } else { "bytes" };
            causes.push(Cause {
                reason: "FieldValueTooLong",
                field: path.to_string(),
                message: format!("Too long: may not be more than {max} {unit}"),
            });
        }
        if let Some(min) = self.min_length.filter(|min| length < *min) {
            let detail = format!("{path} in body should be at least {min} chars long");
            causes.push(Cause::invalid(path, s, &detail));
        }
    }

    fn check_range(&self, value: &Value, path: &str, causes: &mut Vec<Cause>) {
        let Some(n) = value.as_f64() else {
            return;
        };
        let mut out_of_range = |detail: String| {
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field: path.to_string(),
                message: format!("Invalid value: {value}: {path} in body {detail}"),
            });
        };
        if let Some((max, exclusive)) = self.maximum {
            if exclusive && n >= max {
                out_of_range(format!("should be less than {}", number(max)));
            } else if n > max {
                out_of_range(format!("should be less than or equal to {}", number(max)));
            }
        }
        if let Some((min, exclusive)) = self.minimum {
            if exclusive && n <= min {
                out_of_range(format!("should be greater than {}", number(min)));
            } else if n < min {
                out_of_range(format!(
                    "should be greater than or equal to {}",
                    number(min)
                ));
            }
        }
    }

    /// Checks an object's fields: required ones first, then each field, alphabetically.
    fn validate_fields(
        &self,
        map: &Map<String, Value>,
        path: &str,
        root: bool,
        causes: &mut Vec<Cause>,
    ) {
        for name in &self.required {
            if map.get(name).is_none_or(Value::is_null) {
                causes.push(Cause::required(&join(path, name)));
            }
        }
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for key in keys {
            if root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            let declared = self.properties.get(key).or(self.additional.as_deref());
            if let (Some(schema), Some(value)) = (declared, map.get(key)) {
                schema.validate(value, &join(path, key), causes);
            }
        }
    }
}

/// A bound as Go prints a float64 with `%v`: `10`, not `10.0`.
fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget_schema() -> Schema {
        let raw = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 0, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "name": {"type": "string", "maxLength": 3, "minLength": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}});
        Schema::root(&raw, "openAPIV3Schema").expect("valid schema")
    }

    fn messages(object: &Value) -> Vec<String> {
        widget_schema()
            .validate_object(object)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn unknown_fields_and_nulls_are_pruned_unless_preserved() {
        let mut object = json!({"apiVersion": "x/v1", "kind": "Widget",
            "metadata": {"name": "w", "bogus": 1, "labels": {"a": "b"}},
            "spec": {"size": 3, "unknown": 1, "color": null, "free": {"x": {"y": 1}},
                     "labels": {"k": "v"}},
            "extra": true});
        widget_schema().prune_object(&mut object);
        assert_eq!(
            object,
            json!({"apiVersion": "x/v1", "kind": "Widget",
                "metadata": {"name": "w", "labels": {"a": "b"}},
                "spec": {"size": 3, "free": {"x": {"y": 1}}, "labels": {"k": "v"}}})
        );
    }

    #[test]
    fn type_required_enum_range_and_length_read_like_kube_apiserver() {
        assert_eq!(
            messages(&json!({"spec": {"size": "big"}})),
            [
                "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
            ]
        );
        assert_eq!(
            messages(&json!({"spec": {"color": "red"}})),
            ["spec.size: Required value"]
        );
        assert_eq!(
            messages(&json!({"spec": {"size": 11, "color": "green", "name": "ABCD"}})),
            [
                "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"",
                "spec.name: Too long: may not be more than 3 bytes",
                "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
            ]
        );
        assert_eq!(
            messages(&json!({"spec": {"size": -1, "name": "", "tags": [1]}})),
            [
                "spec.name: Invalid value: \"\": spec.name in body should be at least 1 chars long",
                "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0",
                "spec.tags: Invalid value: \"integer\": spec.tags in body must be of type string: \"integer\"",
            ]
        );
        assert!(messages(&json!({"spec": {"size": 0, "tags": [], "labels": {}}})).is_empty());
    }

    #[test]
    fn missing_fields_get_their_defaults_at_any_depth() {
        let schema = Schema::root(
            &json!({"type": "object", "properties": {
                "a": {"type": "string", "default": "A"},
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer", "default": 3},
                    "ports": {"type": "array", "items": {"type": "object", "properties": {
                        "protocol": {"type": "string", "default": "TCP"}}}}}}}}),
            "schema",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut object = json!({"spec": {"ports": [{"port": 80}, {"protocol": "UDP"}]}});
        assert!(schema.default_object(&mut object));
        assert_eq!(
            object,
            json!({"a": "A", "spec": {"size": 3, "ports": [{"port": 80, "protocol": "TCP"}, {"protocol": "UDP"}]}})
        );
        assert!(
            !schema.default_object(&mut object),
            "nothing left to default"
        );
    }

    #[test]
    fn unusable_schemas_are_refused() {
        let unknown = json!({"type": "object", "properties": {"a": {"type": "text"}}});
        assert!(matches!(
            Schema::root(&unknown, "s"),
            Err(SchemaError::UnknownType { .. })
        ));
        let not_object = json!({"type": "string"});
        assert!(matches!(
            Schema::root(&not_object, "s"),
            Err(SchemaError::RootNotObject { .. })
        ));
    }
}
