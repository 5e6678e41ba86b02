//! Structural OpenAPI v3 schemas from Rust types: schemars writes a JSON schema, this module
//! rewrites it into the dialect kube-apiserver accepts in a CustomResourceDefinition.
//!
//! # Why a rewrite is needed
//!
//! A CRD's `openAPIV3Schema` must be *structural* (kube-apiserver refuses the CRD otherwise, and
//! prunes and validates custom objects with it). JSON Schema as schemars writes it is richer than
//! that, so the same Rust type needs a few of its shapes said differently:
//!
//! | schemars writes (OpenAPI 3 settings, subschemas inlined) | for | structural form written here |
//! |---|---|---|
//! | `{"type": "string", "nullable": true}` | `Option<String>` | kept: `nullable` is how OpenAPI v3 says "may be null" |
//! | `{"anyOf": [T, {"enum": [null], "nullable": true}]}` | `Option<T>`, T a struct | T itself with `"nullable": true` |
//! | `{"type": "string", "nullable": true, "enum": ["A", null]}`, or an `anyOf` as above | `Option<T>`, T a unit-only enum | `{"type": "string", "enum": ["A"]}`, *not* nullable: kube-apiserver (1.20) refuses `null` among the values and checks a null against them even when nullable, so a null is left to pruning (it reads back absent: `None`) |
//! | `{"oneOf": [{"type": "string", "enum": ["A"]}, …]}` | a unit-only enum with doc comments | one `{"type": "string", "enum": ["A", …]}` |
//! | `{"oneOf": [{"type": "object", "properties": {…}}, …]}` | an enum with data (tagged) | every variant's properties declared once at the node, the branches keep only their `required` (in an `anyOf`) |
//! | `{"anyOf": [{"type": "integer"}, {"type": "string"}]}` | an untagged int-or-string | `{"x-kubernetes-int-or-string": true}` |
//! | `{}` or `true` | `serde_json::Value` | `{"x-kubernetes-preserve-unknown-fields": true}` |
//! | `{"type": "object", "additionalProperties": true}` | `BTreeMap<String, Value>` | `{"type": "object", "x-kubernetes-preserve-unknown-fields": true}` |
//! | `"additionalProperties": false` | `#[serde(deny_unknown_fields)]` | dropped: a CRD may not say it (pruning drops unknown fields anyway) |
//! | `"uniqueItems": true` | `BTreeSet`, `HashSet` | dropped: kube-apiserver forbids it |
//! | `"$ref"` | a recursive type | refused ([`SchemaError::Recursive`]): a CRD schema cannot refer to itself |
//!
//! Every node must then say its `type`, unless it is int-or-string or preserves unknown fields;
//! a node that still does not (a mix of unit variants and variants with data, a tuple) is refused
//! with the path to it, so the mistake surfaces when `try_crd` runs, not as a 422 from the server.
//!
//! # Validation markers
//!
//! What schemars derives from `#[schemars(...)]` attributes on a field ends up in the schema and is
//! enforced by the server on every write:
//!
//! | attribute on a field | schema | on which types |
//! |---|---|---|
//! | `#[schemars(range(min = 1, max = 10))]` | `minimum`, `maximum` | numbers |
//! | `#[schemars(length(min = 1, max = 63))]` | `minLength`, `maxLength` (strings), `minItems`, `maxItems` (lists) | strings, lists |
//! | `#[schemars(regex(pattern = r"^[a-z]+$"))]` | `pattern` | strings |
//! | `#[schemars(email)]`, `#[schemars(url)]` | `format: email`, `format: uri` | strings |
//! | `/// doc comment` | `description` (shown by `kubectl explain`) | anything |
//! | `#[serde(default)]`, `#[schemars(default = path)]` | `default` (filled in by the server) | anything |
//! | `#[schemars(extend("x-kubernetes-list-type" = "set"))]` | any keyword you name | anything |
//!
//! kube-apiserver enforces all of them; ferrokube's embedded server enforces `minimum`,
//! `maximum`, `minLength`, `maxLength`, `enum` and `required`, and ignores `pattern` and `format`.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// Why a Rust type's schema cannot be a CRD's structural schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// The type refers to itself (`struct Tree { children: Vec<Tree> }`): a CRD schema is one tree
    /// without references. Use `serde_json::Value` for the recursive part.
    #[error(
        "{path}: the type refers to itself ($ref); a CRD schema cannot, use serde_json::Value there"
    )]
    Recursive { path: String },
    /// A schema kube-apiserver would refuse as not structural: what is wrong, and where.
    #[error("{path}: not structural: {problem}")]
    NotStructural { path: String, problem: String },
    /// The rewritten schema does not fit k8s-openapi's `JSONSchemaProps` (a keyword with a value
    /// of the wrong type, e.g. from `#[schemars(extend(...))]`).
    #[error("the schema does not fit JSONSchemaProps: {0}")]
    Representation(String),
}

/// The structural schema of `T`, as JSON: schemars's OpenAPI 3 schema of `T` with every
/// subschema inlined, rewritten as the [module docs](self) say.
pub fn structural_schema<T: JsonSchema>() -> Result<Value, SchemaError> {
    let generator = SchemaSettings::openapi3()
        .with(|settings| {
            // One tree, no `#/components/schemas/...` references, no `$schema` line.
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let schema = generator.into_root_schema_for::<T>().to_value();
    structural(schema, "")
}

/// Rewrites one JSON schema (with its subschemas) into its structural form; `path` names the
/// node in errors (`.spec.replicas`).
pub fn structural(schema: Value, path: &str) -> Result<Value, SchemaError> {
    // Long: one short rewrite per JSON-schema keyword, in the order the structural rules of
    // apiextensions list them; split, each piece would need the whole node anyway.
    let mut node = match schema {
        // `true` admits anything; `false` admits nothing and has no structural form.
        Value::Bool(true) => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(SchemaError::NotStructural {
                path: display(path),
                problem: format!("a schema must be an object, found {other}"),
            });
        }
    };
    if node.contains_key("$ref") {
        return Err(SchemaError::Recursive {
            path: display(path),
        });
    }
    for keyword in [
        "$schema",
        "$id",
        "$comment",
        "$defs",
        "definitions",
        "components",
        "title",
        "readOnly",
        "writeOnly",
        "deprecated",
        "examples",
        "uniqueItems",
    ] {
        node.remove(keyword);
    }
    if let Some(value) = node.remove("const") {
        node.insert("enum".into(), Value::Array(vec![value]));
    }
    if node.get("default") == Some(&Value::Null) {
        node.remove("default");
    }

    if let Some(Value::Object(properties)) = node.remove("properties") {
        let mut rewritten = Map::new();
        for (name, property) in properties {
            let child = structural(property, &format!("{path}.{name}"))?;
            rewritten.insert(name, child);
        }
        node.insert("properties".into(), Value::Object(rewritten));
    }
    match node.remove("items") {
        None => {}
        Some(Value::Array(_)) => {
            return Err(SchemaError::NotStructural {
                path: display(path),
                problem: "a tuple (items given per position); use a struct".into(),
            });
        }
        Some(items) => {
            let items = structural(items, &format!("{path}[*]"))?;
            node.insert("items".into(), items);
        }
    }
    match node.remove("additionalProperties") {
        // `false` (deny_unknown_fields): CRDs may not say it; pruning drops unknown fields anyway.
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => preserve_unknown(&mut node),
        Some(values) => {
            let values = structural(values, &format!("{path}.*"))?;
            if is_arbitrary(&values) {
                preserve_unknown(&mut node);
            } else {
                node.insert("additionalProperties".into(), values);
            }
        }
    }
    if let Some(Value::Array(parts)) = node.remove("allOf") {
        for (i, part) in parts.into_iter().enumerate() {
            let part = structural(part, &format!("{path}(allOf {i})"))?;
            merge_into(&mut node, part, path)?;
        }
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.remove(keyword) {
            alternatives(&mut node, branches, path)?;
        }
    }

    // `Option<Enum>`: kube-apiserver 1.20 refuses a CRD with null among an enum's values, and
    // checks a null against the values even when `nullable` is set. Not nullable, a null is
    // pruned instead, before validation: the field reads back absent, which is `None` too.
    if let Some(Value::Array(values)) = node.get_mut("enum") {
        values.retain(|v| !v.is_null());
        node.remove("nullable");
    }
    if !node.contains_key("type")
        && let Some(Value::Array(values)) = node.get("enum")
        && !values.is_empty()
        && values.iter().all(Value::is_string)
    {
        node.insert("type".into(), json!("string"));
    }
    if node
        .keys()
        .all(|k| k == "description" || k == "nullable" || k == "default")
    {
        // `{}`: any JSON value (serde_json::Value).
        node.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    let typed = node.contains_key("type")
        || flag(&node, "x-kubernetes-int-or-string")
        || flag(&node, "x-kubernetes-preserve-unknown-fields");
    if !typed {
        return Err(SchemaError::NotStructural {
            path: display(path),
            problem: format!("no type: {}", Value::Object(node)),
        });
    }
    Ok(Value::Object(node))
}

/// `anyOf`/`oneOf` of `branches` at `node`, rewritten into a form with one type (see the module
/// docs' table).
fn alternatives(
    node: &mut Map<String, Value>,
    branches: Vec<Value>,
    path: &str,
) -> Result<(), SchemaError> {
    let mut kept = Vec::new();
    for (i, branch) in branches.into_iter().enumerate() {
        let branch = structural_branch(branch, &format!("{path}(variant {i})"))?;
        if is_null_only(&branch) {
            node.insert("nullable".into(), json!(true));
        } else {
            kept.push(branch);
        }
    }
    let types: Vec<Option<&str>> = kept
        .iter()
        .map(|b| b.get("type").and_then(Value::as_str))
        .collect();
    if kept.len() == 1 {
        if let Some(branch) = kept.pop() {
            merge_into(node, Value::Object(branch), path)?;
        }
        return Ok(());
    }
    if kept.is_empty() {
        return Ok(());
    }
    if types.iter().all(|t| *t == Some("string")) && kept.iter().all(|b| b.contains_key("enum")) {
        // Unit variants, each a `{"type": "string", "enum": [name]}` with its doc comment.
        let mut values = Vec::new();
        for branch in &kept {
            if let Some(Value::Array(names)) = branch.get("enum") {
                values.extend(names.iter().cloned());
            }
        }
        node.insert("type".into(), json!("string"));
        node.insert("enum".into(), Value::Array(values));
        return Ok(());
    }
    let mut sorted: Vec<&str> = types.iter().flatten().copied().collect();
    sorted.sort_unstable();
    if kept.len() == 2 && sorted == ["integer", "string"] && kept.iter().all(|b| b.len() <= 3) {
        node.insert("x-kubernetes-int-or-string".into(), json!(true));
        return Ok(());
    }
    if types.iter().all(|t| *t == Some("object")) {
        // Variants with data: every property declared at the node, each branch keeps its
        // `required` only (the one thing a branch may say in a structural schema). `anyOf`, not
        // `oneOf`: two variants whose required fields nest would both match a valid object.
        node.insert("type".into(), json!("object"));
        let mut requirements = Vec::new();
        for mut branch in kept {
            let required = branch.remove("required");
            if let Some(Value::Object(properties)) = branch.remove("properties") {
                for (name, property) in properties {
                    add_property(node, name, property, path)?;
                }
            }
            match required {
                Some(Value::Array(names)) if !names.is_empty() => {
                    requirements.push(json!({"required": names}));
                }
                // A variant without required fields matches every object: no constraint at all.
                _ => return Ok(()),
            }
        }
        node.insert("anyOf".into(), Value::Array(requirements));
        return Ok(());
    }
    Err(SchemaError::NotStructural {
        path: display(path),
        problem: format!(
            "alternatives of different types ({}); an enum must have only unit variants or only \
             variants with data (or use #[serde(tag = \"...\")])",
            types
                .iter()
                .map(|t| t.unwrap_or("untyped"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// A branch of `anyOf`/`oneOf`, rewritten; a branch that is `{"enum": [null], "nullable": true}`
/// is returned as it is (it has no type of its own, and says only "null").
fn structural_branch(branch: Value, path: &str) -> Result<Map<String, Value>, SchemaError> {
    if let Value::Object(map) = &branch
        && is_null_only(map)
    {
        return Ok(map.clone());
    }
    match structural(branch, path)? {
        Value::Object(map) => Ok(map),
        _ => Ok(Map::new()),
    }
}

fn is_null_only(branch: &Map<String, Value>) -> bool {
    branch.get("type") == Some(&json!("null"))
        || (branch.get("enum") == Some(&json!([null])) && !branch.contains_key("type"))
}

/// Declares `property` under `name` at `node`; a property declared by two variants must agree,
/// except string enums (an internally tagged enum's tag), whose values are joined.
fn add_property(
    node: &mut Map<String, Value>,
    name: String,
    property: Value,
    path: &str,
) -> Result<(), SchemaError> {
    let properties = node
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(properties) = properties else {
        return Err(SchemaError::NotStructural {
            path: display(path),
            problem: "properties is not an object".into(),
        });
    };
    match properties.get_mut(&name) {
        None => {
            properties.insert(name, property);
        }
        Some(existing) if *existing == property => {}
        Some(existing) => {
            let both_enums = existing.get("type") == Some(&json!("string"))
                && property.get("type") == Some(&json!("string"));
            match (existing.get_mut("enum"), property.get("enum")) {
                (Some(Value::Array(values)), Some(Value::Array(more))) if both_enums => {
                    for value in more {
                        if !values.contains(value) {
                            values.push(value.clone());
                        }
                    }
                }
                _ => {
                    return Err(SchemaError::NotStructural {
                        path: format!("{}.{name}", display(path)),
                        problem: "two variants declare this field with different schemas".into(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Merges `part` (an `allOf` part, or the one branch left of an `anyOf`) into `node`: properties
/// and required fields are joined, other keywords taken where `node` does not say them.
fn merge_into(node: &mut Map<String, Value>, part: Value, path: &str) -> Result<(), SchemaError> {
    let Value::Object(part) = part else {
        return Ok(());
    };
    for (key, value) in part {
        match key.as_str() {
            "properties" => {
                if let Value::Object(properties) = value {
                    for (name, property) in properties {
                        add_property(node, name, property, path)?;
                    }
                }
            }
            "required" => {
                let required = node
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let (Value::Array(required), Value::Array(more)) = (required, value) {
                    for name in more {
                        if !required.contains(&name) {
                            required.push(name);
                        }
                    }
                }
            }
            // An `Option<T>`'s branch T cannot make the node not nullable.
            "nullable" if flag(node, "nullable") => {}
            _ => {
                node.entry(key).or_insert(value);
            }
        }
    }
    // `{}` merged in (an arbitrary value) left the marker; a typed part wins over it.
    if node.contains_key("type") {
        node.remove("x-kubernetes-preserve-unknown-fields");
    }
    Ok(())
}

/// Whether a rewritten schema admits any JSON value (it is only the preserve-unknown marker).
fn is_arbitrary(schema: &Value) -> bool {
    schema.as_object().is_some_and(|map| {
        flag(map, "x-kubernetes-preserve-unknown-fields")
            && !map.contains_key("type")
            && !map.contains_key("properties")
    })
}

/// Makes `node` an object whose fields are kept as they come.
fn preserve_unknown(node: &mut Map<String, Value>) {
    node.insert("type".into(), json!("object"));
    node.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
}

fn flag(node: &Map<String, Value>, key: &str) -> bool {
    node.get(key) == Some(&Value::Bool(true))
}

fn display(path: &str) -> String {
    if path.is_empty() {
        ".".into()
    } else {
        path.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derive_schema_refs_and_tuples_are_refused_with_their_path() {
        let recursive = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
        assert_eq!(
            structural(recursive, ""),
            Err(SchemaError::Recursive {
                path: ".next".into()
            })
        );
        let tuple = json!({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]});
        assert!(matches!(
            structural(tuple, ".pair"),
            Err(SchemaError::NotStructural { path, .. }) if path == ".pair"
        ));
    }

    #[test]
    fn derive_schema_all_of_parts_merge_into_one_node() {
        let schema = json!({
            "description": "outer",
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"],
                 "description": "inner"},
            ],
        });
        assert_eq!(
            structural(schema, ""),
            Ok(json!({
                "description": "outer",
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            }))
        );
    }

    #[test]
    fn derive_schema_arbitrary_values_preserve_unknown_fields() {
        assert_eq!(
            structural(json!(true), ""),
            Ok(json!({"x-kubernetes-preserve-unknown-fields": true}))
        );
        let map = json!({"type": "object", "additionalProperties": {}});
        assert_eq!(
            structural(map, ""),
            Ok(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}))
        );
        let closed = json!({"type": "object", "properties": {}, "additionalProperties": false});
        assert_eq!(
            structural(closed, ""),
            Ok(json!({"type": "object", "properties": {}}))
        );
    }

    #[test]
    fn derive_schema_const_becomes_an_enum_and_untyped_nodes_are_refused() {
        assert_eq!(
            structural(json!({"const": "v1"}), ""),
            Ok(json!({"enum": ["v1"], "type": "string"}))
        );
        assert!(matches!(
            structural(json!({"minimum": 1}), ".n"),
            Err(SchemaError::NotStructural { path, .. }) if path == ".n"
        ));
    }
}
