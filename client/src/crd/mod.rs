//! Custom resources: a kind of your own, described to the cluster by a CustomResourceDefinition
//! (CRD), and a Rust type for its objects that works with every part of ferrokube.
//!
//! # Why
//!
//! A controller usually reconciles a kind of its own (`Widget`, `Database`). Two things must agree
//! for that to work: the Rust type the controller decodes objects into, and the CRD the API server
//! validates and prunes them with. Written by hand they drift apart (a field renamed in one, not
//! the other, is silently pruned by the server). Here the CRD is *computed* from the Rust types:
//!
//! ```text
//!  #[derive(CustomResource, JsonSchema)]  ──derive──▶  struct Widget { metadata, spec, status }
//!  #[resource(group, version, kind, …)]                impl k8s_openapi::Resource, Metadata
//!  struct WidgetSpec { … }                             Widget::new(name, spec)
//!                                                      Widget::crd() ─┐
//!                                                                     │ Definition (names, scope,
//!   schemars: JSON schema of WidgetSpec (and WidgetStatus) ──────────▶│ columns, subresources)
//!   schema::structural: rewritten as kube-apiserver requires ────────▶│ + structural schemas
//!                                                                     ▼
//!                                      CustomResourceDefinition (k8s-openapi's type)
//!                                                                     │ apply_and_wait(client, &crd, timeout)
//!                                                                     ▼ server-side apply, then poll
//!                                      the server serves /apis/GROUP/VERSION/…/PLURAL: Established
//! ```
//!
//! | item | what it does |
//! |---|---|
//! | [`Definition`] | everything a CRD says besides the schema: group, version, names, scope, printer columns, subresources; [`Definition::custom_resource_definition`] builds the CRD |
//! | [`schema`] | [`structural_schema::<T>()`](structural_schema): the structural OpenAPI v3 schema of a Rust type, via schemars; the validation markers a field can carry |
//! | [`apply_and_wait`] | applies a CRD (create or replace) and waits until the server serves it (`Established`), or says why not ([`EstablishError`]) |
//! | [`CustomResourceExt`] | what the derive implements beside `Resource`: the [`Definition`], `try_crd()`, `crd()` |
//!
//! The derive itself (`ferrokube::CustomResource`, crate `ferrokube-derive`) only writes the
//! glue: a struct, trait impls, and a [`Definition`] filled from its `#[resource(...)]`
//! attributes. Everything with a decision in it is ordinary Rust here, so it is tested as such,
//! and a CRD can be built without the derive by filling a [`Definition`] by hand.

mod establish;
pub mod schema;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation,
    JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

pub use establish::{EstablishError, FIELD_MANAGER, apply_and_wait};
pub use schema::{SchemaError, structural_schema};
/// The schemars your spec and status types derive `JsonSchema` with (1.x): a crate that depends
/// only on ferrokube can write `#[derive(ferrokube::schemars::JsonSchema)]` with
/// `#[schemars(crate = "ferrokube::schemars")]`.
pub use schemars;

/// What the generated code of `#[derive(CustomResource)]` refers to, under one path that works
/// whether the user's crate names `ferrokube` or `ferrokube-client` (`#[resource(crate = ...)]`).
#[doc(hidden)]
pub mod __private {
    pub use k8s_openapi;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}

/// A CustomResourceDefinition without its schema: the names, the scope and what `kubectl` shows.
/// `#[derive(CustomResource)]` fills one from its `#[resource(...)]` attributes
/// ([`CustomResourceExt::DEFINITION`]); it can be written by hand too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// The API group, e.g. `example.com`.
    pub group: &'static str,
    /// The version, e.g. `v1`; one version per definition (served and stored).
    pub version: &'static str,
    /// The kind, e.g. `Widget`.
    pub kind: &'static str,
    /// The resource's name in URLs, e.g. `widgets`.
    pub plural: &'static str,
    /// The singular name, e.g. `widget` (`kubectl get widget web`).
    pub singular: &'static str,
    /// Namespaced, or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`kubectl get wd`).
    pub short_names: &'static [&'static str],
    /// Categories (`kubectl get all` lists the kinds of category `all`).
    pub categories: &'static [&'static str],
    /// Columns `kubectl get` shows besides NAME and AGE.
    pub printer_columns: &'static [PrinterColumn],
    /// Whether the kind has a status subresource (`/status`): set when a status type is given.
    pub status: bool,
    /// The scale subresource (`/scale`, `kubectl scale`), if any.
    pub scale: Option<Scale>,
}

/// One column of `kubectl get`: `additionalPrinterColumns` in the CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The column's heading.
    pub name: &'static str,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: &'static str,
    /// Where the value is, e.g. `.spec.replicas`.
    pub json_path: &'static str,
    pub description: Option<&'static str>,
    /// 0 shows the column always; higher only with `kubectl get -o wide`.
    pub priority: Option<i32>,
    /// e.g. `int32`, `date-time`.
    pub format: Option<&'static str>,
}

/// The scale subresource: where `kubectl scale` reads and writes the replica count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    /// e.g. `.spec.replicas`.
    pub spec_replicas_path: &'static str,
    /// e.g. `.status.replicas`.
    pub status_replicas_path: &'static str,
    /// e.g. `.status.selector` (a label selector as a string), for HorizontalPodAutoscalers.
    pub label_selector_path: Option<&'static str>,
}

impl Definition {
    /// The CRD's name: `plural.group`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// The CRD's root schema: `apiVersion`, `kind`, `metadata` (an object the server checks
    /// itself), the required `spec`, and `status` if given (each already structural, e.g. from
    /// [`structural_schema`]).
    pub fn root_schema(&self, spec: Value, status: Option<Value>) -> Value {
        let mut properties = Map::new();
        properties.insert("apiVersion".into(), json!({"type": "string"}));
        properties.insert("kind".into(), json!({"type": "string"}));
        properties.insert("metadata".into(), json!({"type": "object"}));
        properties.insert("spec".into(), spec);
        if let Some(status) = status {
            properties.insert("status".into(), status);
        }
        json!({
            "description": format!("{} ({}/{}), as declared by its Rust type.", self.kind, self.group, self.version),
            "type": "object",
            "required": ["spec"],
            "properties": properties,
        })
    }

    /// The CustomResourceDefinition: this definition with the structural schemas of the spec
    /// and (if [`Definition::status`]) of the status.
    pub fn custom_resource_definition(
        &self,
        spec: Value,
        status: Option<Value>,
    ) -> Result<CustomResourceDefinition, SchemaError> {
        let root = self.root_schema(spec, status);
        let schema: JSONSchemaProps = serde_json::from_value(root)
            .map_err(|error| SchemaError::Representation(error.to_string()))?;
        let strings = |list: &[&str]| -> Option<Vec<String>> {
            (!list.is_empty()).then(|| list.iter().map(|s| s.to_string()).collect())
        };
        let columns: Vec<CustomResourceColumnDefinition> = self
            .printer_columns
            .iter()
            .map(|c| CustomResourceColumnDefinition {
                name: c.name.into(),
                type_: c.type_.into(),
                json_path: c.json_path.into(),
                description: c.description.map(Into::into),
                priority: c.priority,
                format: c.format.map(Into::into),
            })
            .collect();
        let subresources =
            (self.status || self.scale.is_some()).then(|| CustomResourceSubresources {
                status: self
                    .status
                    .then(|| CustomResourceSubresourceStatus(json!({}))),
                scale: self.scale.as_ref().map(|s| CustomResourceSubresourceScale {
                    spec_replicas_path: s.spec_replicas_path.into(),
                    status_replicas_path: s.status_replicas_path.into(),
                    label_selector_path: s.label_selector_path.map(Into::into),
                }),
            });
        Ok(CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(self.name()),
                ..ObjectMeta::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: self.group.into(),
                scope: if self.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }
                .into(),
                names: CustomResourceDefinitionNames {
                    kind: self.kind.into(),
                    list_kind: Some(format!("{}List", self.kind)),
                    plural: self.plural.into(),
                    singular: Some(self.singular.into()),
                    short_names: strings(self.short_names),
                    categories: strings(self.categories),
                },
                versions: vec![CustomResourceDefinitionVersion {
                    name: self.version.into(),
                    served: true,
                    storage: true,
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: Some(schema),
                    }),
                    subresources,
                    additional_printer_columns: (!columns.is_empty()).then_some(columns),
                    ..CustomResourceDefinitionVersion::default()
                }],
                ..CustomResourceDefinitionSpec::default()
            },
            status: None,
        })
    }
}

/// A custom resource type: what `#[derive(CustomResource)]` implements beside k8s-openapi's
/// `Resource` and `Metadata`.
pub trait CustomResourceExt: k8s_openapi::Resource {
    /// The names, scope, columns and subresources from `#[resource(...)]`.
    const DEFINITION: Definition;

    /// The CustomResourceDefinition, or why the Rust types' schema cannot be structural.
    fn try_crd() -> Result<CustomResourceDefinition, SchemaError>;

    /// The CustomResourceDefinition.
    ///
    /// # Panics
    ///
    /// When [`CustomResourceExt::try_crd`] fails: the spec or status type has a shape a CRD
    /// schema cannot express (a recursive type, an enum mixing unit variants and variants with
    /// data). The result depends only on the types, so the first test that calls it finds out.
    fn crd() -> CustomResourceDefinition {
        match Self::try_crd() {
            Ok(crd) => crd,
            Err(error) => panic!("the CustomResourceDefinition of {}: {error}", Self::KIND),
        }
    }

    /// The CRD's name, `plural.group`.
    fn crd_name() -> String {
        Self::DEFINITION.name()
    }
}
