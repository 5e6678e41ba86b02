//! `#[derive(CustomResource)]` as a user's crate sees it: the generated type, its serde form, its
//! trait impls, and the CRD with its structural schema. Every test name contains `derive` (`cargo
//! test --workspace derive` runs them). The embedded-server and real-server tests are beside it,
//! in `story.rs` and `e2e.rs`.

use std::collections::{BTreeMap, BTreeSet};

use ferrokube::CustomResource;
use ferrokube::crd::{CustomResourceExt, SchemaError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A queue of work: the spec of `Widget`.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// clippy takes two columns' identical `type = "integer"` for a repeated attribute
// (rust-clippy#12923, a false positive on helper attributes).
#[allow(clippy::duplicated_attributes)]
#[resource(
    group = "derive.ferrokube.dev",
    version = "v1alpha1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd",
    shortname = "wdg",
    category = "ferrokube",
    printcolumn(name = "Size", type = "integer", json_path = ".spec.size"),
    printcolumn(
        name = "Color",
        type = "string",
        jsonPath = ".spec.color",
        description = "the paint",
        priority = 1,
        format = "byte"
    ),
    scale(
        spec_replicas_path = ".spec.size",
        status_replicas_path = ".status.size",
        label_selector_path = ".status.selector"
    ),
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    /// How many.
    #[schemars(range(min = 1, max = 10))]
    pub size: i32,
    #[schemars(length(min = 1, max = 12), regex(pattern = r"^[a-z]+$"))]
    pub name: String,
    pub color: Color,
    pub nickname: Option<String>,
    pub shade: Option<Color>,
    pub tier: Option<Tier>,
    pub part: Option<Part>,
    pub labels: BTreeMap<String, String>,
    pub extra: BTreeMap<String, Value>,
    pub anything: Option<Value>,
    pub tags: BTreeSet<String>,
    pub shape: Shape,
    pub port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString,
    #[serde(default)]
    pub paused: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub enum Color {
    /// Like the sky.
    Blue,
    Red,
}

/// Without doc comments on the variants (schemars writes one enum, with null for `Option`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub enum Tier {
    Free,
    Paid,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub id: u16,
}

/// An internally tagged enum: one object whose `kind` says which fields it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
pub enum Shape {
    Circle { radius: f64 },
    Square { side: f64 },
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WidgetStatus {
    pub size: Option<i32>,
    pub selector: Option<String>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A cluster-scoped kind with defaults for everything optional.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[resource(group = "derive.ferrokube.dev", version = "v1", kind = "Gadget")]
pub struct GadgetSpec {
    pub on: bool,
}

/// A recursive spec: no structural schema exists for it.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[resource(group = "derive.ferrokube.dev", version = "v1", kind = "Tree")]
pub struct TreeSpec {
    pub children: Vec<TreeSpec>,
}

/// An enum mixing a unit variant and variants with data (externally tagged): "C" or {"A": 1}.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[resource(group = "derive.ferrokube.dev", version = "v1", kind = "Mixed")]
pub struct MixedSpec {
    pub choice: Choice,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub enum Choice {
    A(i32),
    C,
}

fn widget_spec() -> WidgetSpec {
    WidgetSpec {
        size: 3,
        name: "gear".into(),
        color: Color::Blue,
        nickname: None,
        shade: Some(Color::Red),
        tier: None,
        part: Some(Part { id: 7 }),
        labels: BTreeMap::from([("a".into(), "b".into())]),
        extra: BTreeMap::from([("free".into(), json!({"nested": [1, 2]}))]),
        anything: Some(json!(42)),
        tags: BTreeSet::from(["x".to_string()]),
        shape: Shape::Circle { radius: 1.5 },
        port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80),
        paused: false,
    }
}

/// The CRD's root schema as JSON.
fn root_schema<K: CustomResourceExt>() -> Value {
    let crd = K::crd();
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("a schema");
    serde_json::to_value(schema).expect("schema serializes")
}

/// Every violation of kube-apiserver's structural rules in `schema` (path: problem).
fn structural_violations(schema: &Value, path: &str, in_branch: bool, out: &mut Vec<String>) {
    let Some(node) = schema.as_object() else {
        out.push(format!("{path}: not an object"));
        return;
    };
    if node.contains_key("$ref") {
        out.push(format!("{path}: $ref"));
    }
    for forbidden in ["uniqueItems", "const", "$schema", "definitions", "title"] {
        if node.contains_key(forbidden) {
            out.push(format!("{path}: {forbidden}"));
        }
    }
    if node.get("additionalProperties") == Some(&json!(false)) {
        out.push(format!("{path}: additionalProperties false"));
    }
    if node.contains_key("additionalProperties") && node.contains_key("properties") {
        out.push(format!("{path}: additionalProperties beside properties"));
    }
    let typed = node.contains_key("type")
        || node.get("x-kubernetes-int-or-string") == Some(&json!(true))
        || node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if in_branch {
        // Inside anyOf/oneOf/allOf only value validations may appear.
        for key in ["type", "description", "default", "nullable", "properties"] {
            if node.contains_key(key) {
                out.push(format!("{path}: {key} inside a branch"));
            }
        }
    } else if !typed {
        out.push(format!("{path}: no type"));
    }
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            structural_violations(child, &format!("{path}.{name}"), in_branch, out);
        }
    }
    if let Some(items) = node.get("items") {
        structural_violations(items, &format!("{path}[*]"), in_branch, out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        structural_violations(values, &format!("{path}.*"), in_branch, out);
    }
    for keyword in ["anyOf", "oneOf", "allOf"] {
        for (i, branch) in node
            .get(keyword)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            structural_violations(branch, &format!("{path}({keyword} {i})"), true, out);
        }
    }
}

#[test]
fn derive_writes_resource_constants_and_scope() {
    assert_eq!(Widget::API_VERSION, "derive.ferrokube.dev/v1alpha1");
    assert_eq!(Widget::GROUP, "derive.ferrokube.dev");
    assert_eq!(Widget::VERSION, "v1alpha1");
    assert_eq!(Widget::KIND, "Widget");
    assert_eq!(Widget::URL_PATH_SEGMENT, "widgets");
    assert_eq!(
        <Widget as k8s_openapi::ListableResource>::LIST_KIND,
        "WidgetList"
    );
    fn namespaced<K: Resource<Scope = NamespaceResourceScope>>() {}
    fn cluster<K: Resource<Scope = ClusterResourceScope>>() {}
    namespaced::<Widget>();
    cluster::<Gadget>();
    assert_eq!(Gadget::URL_PATH_SEGMENT, "gadgets");
    assert_eq!(Widget::crd_name(), "widgets.derive.ferrokube.dev");
}

#[test]
fn derive_serde_writes_api_version_and_kind_and_round_trips() {
    let mut widget = Widget::new("w1", widget_spec());
    assert_eq!(widget.metadata.name.as_deref(), Some("w1"));
    assert!(widget.status.is_none());
    let json = serde_json::to_value(&widget).expect("serializes");
    assert_eq!(json["apiVersion"], "derive.ferrokube.dev/v1alpha1");
    assert_eq!(json["kind"], "Widget");
    assert_eq!(json["spec"]["size"], 3);
    assert!(json.get("status").is_none(), "no status written: {json}");
    let back: Widget = serde_json::from_value(json).expect("deserializes");
    assert_eq!(back, widget);

    widget.status = Some(WidgetStatus {
        size: Some(3),
        ..WidgetStatus::default()
    });
    let json = serde_json::to_value(&widget).expect("serializes");
    assert_eq!(json["status"]["size"], 3);
    let back: Widget = serde_json::from_value(json).expect("deserializes");
    assert_eq!(back, widget);

    // What a server sends: extra fields, no status, metadata filled in.
    let from_server: Gadget = serde_json::from_value(json!({
        "apiVersion": "derive.ferrokube.dev/v1", "kind": "Gadget",
        "metadata": {"name": "g", "resourceVersion": "5", "uid": "u"},
        "spec": {"on": true},
    }))
    .expect("decodes");
    assert!(from_server.spec.on);
    assert_eq!(from_server.metadata.resource_version.as_deref(), Some("5"));
    // A spec is required: the CRD says so too.
    assert!(serde_json::from_value::<Gadget>(json!({"metadata": {"name": "g"}})).is_err());
}

#[test]
fn derive_generated_type_is_a_ferrokube_object() {
    fn object<K: ferrokube::Object + Resource>() {}
    object::<Widget>();
    object::<Gadget>();
    let mut gadget = Gadget::new("g", GadgetSpec { on: false });
    ferrokube::Object::meta_mut(&mut gadget).namespace = Some("ns".into());
    assert_eq!(ferrokube::core::ObjectKey::of(&gadget).as_str(), "ns/g");
}

#[test]
fn derive_crd_names_scope_columns_and_subresources() {
    let crd = Widget::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("widgets.derive.ferrokube.dev")
    );
    let spec = &crd.spec;
    assert_eq!(spec.group, "derive.ferrokube.dev");
    assert_eq!(spec.scope, "Namespaced");
    assert_eq!(spec.names.kind, "Widget");
    assert_eq!(spec.names.plural, "widgets");
    assert_eq!(spec.names.singular.as_deref(), Some("widget"));
    assert_eq!(spec.names.list_kind.as_deref(), Some("WidgetList"));
    assert_eq!(
        spec.names.short_names,
        Some(vec!["wd".to_string(), "wdg".to_string()])
    );
    assert_eq!(spec.names.categories, Some(vec!["ferrokube".to_string()]));
    let version = &spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.served && version.storage);
    let columns = serde_json::to_value(&version.additional_printer_columns).expect("json");
    assert_eq!(
        columns,
        json!([
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color",
             "description": "the paint", "priority": 1, "format": "byte"},
            // Added by the derive: columns given replace kubectl's AGE.
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ])
    );
    let subresources = serde_json::to_value(&version.subresources).expect("json");
    assert_eq!(
        subresources,
        json!({
            "status": {},
            "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size",
                      "labelSelectorPath": ".status.selector"},
        })
    );

    let gadget = Gadget::crd();
    assert_eq!(gadget.spec.scope, "Cluster");
    assert_eq!(gadget.spec.versions[0].subresources, None);
    assert_eq!(gadget.spec.versions[0].additional_printer_columns, None);
    assert_eq!(gadget.spec.names.short_names, None);
}

#[test]
fn derive_schema_is_structural() {
    for (kind, schema) in [
        ("Widget", root_schema::<Widget>()),
        ("Gadget", root_schema::<Gadget>()),
    ] {
        let mut violations = Vec::new();
        structural_violations(&schema, "", false, &mut violations);
        assert!(violations.is_empty(), "{kind}: {violations:#?}\n{schema:#}");
        let root = &schema["properties"];
        assert_eq!(root["metadata"], json!({"type": "object"}));
        assert_eq!(root["apiVersion"], json!({"type": "string"}));
        assert_eq!(schema["required"], json!(["spec"]));
    }
    let root = root_schema::<Widget>();
    assert_eq!(root["properties"]["status"]["type"], "object");
    assert!(
        root_schema::<Gadget>()["properties"]
            .get("status")
            .is_none()
    );
}

#[test]
fn derive_schema_carries_validation_markers() {
    let root = root_schema::<Widget>();
    let spec = &root["properties"]["spec"];
    let size = &spec["properties"]["size"];
    assert_eq!(size["type"], "integer");
    assert_eq!(size["minimum"], json!(1.0));
    assert_eq!(size["maximum"], json!(10.0));
    assert_eq!(size["description"], "How many.");
    let name = &spec["properties"]["name"];
    assert_eq!(name["minLength"], 1);
    assert_eq!(name["maxLength"], 12);
    assert_eq!(name["pattern"], "^[a-z]+$");
    let required: Vec<&str> = spec["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(required.contains(&"size") && required.contains(&"name"));
    assert!(!required.contains(&"nickname"), "Option is not required");
    assert_eq!(spec["properties"]["paused"]["default"], json!(false));
    // u16: the type's own range.
    let id = &spec["properties"]["part"]["properties"]["id"];
    assert_eq!(
        (id["minimum"].as_f64(), id["maximum"].as_f64()),
        (Some(0.0), Some(65535.0))
    );
}

#[test]
fn derive_schema_option_is_nullable() {
    let root = root_schema::<Widget>();
    let properties = &root["properties"]["spec"]["properties"];
    assert_eq!(
        properties["nickname"],
        json!({"type": "string", "nullable": true})
    );
    // Option of an enum (schemars: anyOf [enum, null]): not nullable, a null is pruned (see
    // derive_schema_enums_become_string_enums_and_tagged_objects); of a struct: nullable.
    assert!(properties["shade"].get("nullable").is_none());
    assert_eq!(properties["shade"]["type"], "string");
    assert_eq!(properties["part"]["nullable"], true);
    assert_eq!(properties["part"]["type"], "object");
    assert!(properties["part"].get("additionalProperties").is_none());
    assert!(properties["size"].get("nullable").is_none());
}

/// The strings of a JSON array, sorted (an enum's values have no order that matters).
fn sorted(values: &Value) -> Vec<&str> {
    let mut strings: Vec<&str> = values
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    strings.sort_unstable();
    strings
}

#[test]
fn derive_schema_enums_become_string_enums_and_tagged_objects() {
    let root = root_schema::<Widget>();
    let properties = &root["properties"]["spec"]["properties"];
    // Doc comments on variants made schemars write a oneOf; it is one string enum again.
    assert_eq!(properties["color"]["type"], "string");
    assert_eq!(sorted(&properties["color"]["enum"]), ["Blue", "Red"]);
    assert!(properties["color"].get("oneOf").is_none());
    assert_eq!(sorted(&properties["shade"]["enum"]), ["Blue", "Red"]);
    // No null among an enum's values and not nullable (kube-apiserver refuses the first and
    // checks a null against the values despite the second): a null is pruned, reads as None.
    assert_eq!(properties["tier"]["enum"], json!(["Free", "Paid"]));
    assert_eq!(properties["tier"]["type"], "string");
    assert!(properties["tier"].get("nullable").is_none());
    // Internally tagged: every variant's fields at the node, the tag an enum of the variants.
    let shape = &properties["shape"];
    assert_eq!(shape["type"], "object");
    assert_eq!(
        sorted(&shape["properties"]["kind"]["enum"]),
        ["Circle", "Square"]
    );
    assert_eq!(shape["properties"]["radius"]["type"], "number");
    assert_eq!(shape["properties"]["side"]["type"], "number");
    assert_eq!(
        shape["anyOf"],
        json!([{"required": ["kind", "radius"]}, {"required": ["kind", "side"]}])
    );
}

#[test]
fn derive_schema_maps_values_sets_and_int_or_string() {
    let root = root_schema::<Widget>();
    let properties = &root["properties"]["spec"]["properties"];
    assert_eq!(
        properties["labels"],
        json!({"type": "object", "additionalProperties": {"type": "string"}})
    );
    assert_eq!(
        properties["extra"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(
        properties["anything"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    assert_eq!(
        properties["tags"],
        json!({"type": "array", "items": {"type": "string"}})
    );
    assert_eq!(properties["port"]["x-kubernetes-int-or-string"], true);
    // k8s-openapi's own types (here Condition, in the status) come with their schemas.
    let conditions = &root["properties"]["status"]["properties"]["conditions"];
    assert_eq!(
        conditions["items"]["properties"]["lastTransitionTime"]["format"],
        "date-time"
    );
}

#[test]
fn derive_refuses_shapes_a_crd_cannot_express() {
    match Tree::try_crd() {
        Err(SchemaError::Recursive { path }) => assert_eq!(path, ".children[*]"),
        other => panic!("expected Recursive, got {other:?}"),
    }
    match Mixed::try_crd() {
        Err(SchemaError::NotStructural { path, problem }) => {
            assert_eq!(path, ".choice");
            assert!(problem.contains("string, object"), "{problem}");
        }
        other => panic!("expected NotStructural, got {other:?}"),
    }
    let panicked = std::panic::catch_unwind(Tree::crd).expect_err("crd() panics");
    let message = panicked
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("Tree"), "{message}");
}

/// The same derive with nothing but ferrokube: schemars through `ferrokube::schemars`.
mod only_ferrokube {
    use ferrokube::CustomResource;
    use ferrokube::crd::CustomResourceExt;

    #[derive(
        CustomResource,
        Clone,
        Debug,
        serde::Serialize,
        serde::Deserialize,
        ferrokube::schemars::JsonSchema,
    )]
    #[schemars(crate = "ferrokube::schemars")]
    #[resource(
        group = "derive.ferrokube.dev",
        version = "v1",
        kind = "Plain",
        plural = "plainthings",
        singular = "plainthing"
    )]
    pub struct PlainSpec {
        pub value: String,
    }

    #[test]
    fn derive_with_schemars_from_ferrokube() {
        assert_eq!(Plain::crd_name(), "plainthings.derive.ferrokube.dev");
        let crd = Plain::crd();
        assert_eq!(crd.spec.names.singular.as_deref(), Some("plainthing"));
    }
}
