//! # ferrokube-derive
//!
//! `#[derive(CustomResource)]`: write the *spec* of a custom kind as a Rust struct, get the
//! resource type, its trait impls and its CustomResourceDefinition. Use it as
//! `ferrokube::CustomResource`; this crate is the macro alone.
//!
//! ## Why
//!
//! A custom kind lives in two places: the Rust type a controller decodes objects into, and the
//! CRD the API server prunes and validates them with. Kept by hand, they drift (rename a field in
//! one and the server silently drops it), and the type needs `k8s_openapi::Resource` and
//! `Metadata` impls before `Api`, an informer or a controller accept it. The derive writes both
//! from one source: your spec struct.
//!
//! ## How the pieces flow
//!
//! ```text
//!  your code                          this macro writes                 at run time (ferrokube::crd)
//!  ─────────                          ─────────────────                 ────────────────────────────
//!  #[derive(CustomResource,           struct Site { metadata,           Site::crd():
//!           JsonSchema, Serialize,      spec: SiteSpec,                   schemars: schema of SiteSpec,
//!           Deserialize, Clone,         status: Option<SiteStatus> }      SiteStatus ─▶ made structural
//!           Debug)]                   impl Resource, ListableResource,    + Definition (names, scope,
//!  #[resource(group, version,              Metadata (→ ferrokube Object)  columns, subresources)
//!             kind, …)]               impl Serialize (writes apiVersion,  ─▶ CustomResourceDefinition
//!  struct SiteSpec { … }                   kind), Deserialize           apply_and_wait(&client, &crd, t)
//!                                     Site::new(name, spec)               ─▶ the kind is served
//!                                     impl CustomResourceExt (Definition)
//! ```
//!
//! The macro only writes glue; the decisions (how a schemars schema becomes a structural one, how
//! the CRD is laid out) are ordinary, tested Rust in `ferrokube::crd`.
//!
//! ## Example
//!
//! ```
//! use std::time::Duration;
//!
//! use ferrokube::api::PostParams;
//! use ferrokube::crd::{CustomResourceExt, apply_and_wait};
//! use ferrokube::{Api, Client, CustomResource};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! /// A web site: how many copies of which image.
//! #[allow(clippy::duplicated_attributes)] // two `type = "integer"`: see below
//! #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
//! #[resource(group = "example.com", version = "v1", kind = "Site", namespaced,
//!     status = "SiteStatus", shortname = "st", category = "example",
//!     printcolumn(name = "Replicas", type = "integer", json_path = ".spec.replicas"),
//!     printcolumn(name = "Ready", type = "integer", json_path = ".status.readyReplicas"),
//!     scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.readyReplicas"))]
//! #[serde(rename_all = "camelCase")]
//! pub struct SiteSpec {
//!     /// How many copies to run.
//!     #[schemars(range(min = 0, max = 100))]
//!     pub replicas: i32,
//!     #[schemars(length(min = 1, max = 253), regex(pattern = r"^[a-z0-9./:-]+$"))]
//!     pub image: String,
//!     pub tier: Tier,
//!     pub note: Option<String>,
//! }
//!
//! #[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
//! pub enum Tier { Free, Paid }
//!
//! #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
//! #[serde(rename_all = "camelCase")]
//! pub struct SiteStatus {
//!     pub ready_replicas: Option<i32>,
//! }
//!
//! async fn install(client: Client) -> Result<Site, Box<dyn std::error::Error + Send + Sync>> {
//!     apply_and_wait(&client, &Site::crd(), Duration::from_secs(30)).await?;
//!     let sites: Api<Site> = Api::namespaced(client, "default");
//!     let spec = SiteSpec { replicas: 2, image: "nginx:1.27".into(), tier: Tier::Free, note: None };
//!     Ok(sites.create(&PostParams::default(), &Site::new("blog", spec)).await?)
//! }
//!
//! let crd = Site::crd();
//! assert_eq!(Site::crd_name(), "sites.example.com");
//! let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
//! let replicas = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"];
//! assert_eq!((replicas["minimum"].as_f64(), replicas["maximum"].as_f64()), (Some(0.0), Some(100.0)));
//! ```
//!
//! Your crate derives `Serialize`/`Deserialize` (serde, with its `derive` feature) and
//! `JsonSchema` (schemars 1.x; or, with no line of your own, `ferrokube::schemars::JsonSchema`
//! with `#[schemars(crate = "ferrokube::schemars")]`). The spec and status types must be `Clone`
//! and `Debug`; give status fields defaults (`Option`, `#[serde(default)]`): a new object has none.
//!
//! ## `#[resource(...)]`
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `group = "example.com"` | the API group | required |
//! | `version = "v1"` | the version (one, served and stored) | required |
//! | `kind = "Site"` | the kind, and the name of the generated struct | required |
//! | `plural = "sites"` | the resource in URLs and `kubectl get` | kind in lower case + `s` |
//! | `singular = "site"` | | kind in lower case |
//! | `namespaced` | namespaced kind | cluster-scoped |
//! | `status = "SiteStatus"` | the status type: a `status: Option<SiteStatus>` field, its schema, the `/status` subresource | no status |
//! | `shortname = "st"` (repeatable) | `kubectl get st` | none |
//! | `category = "all"` (repeatable) | `kubectl get all` lists the kind | none |
//! | `printcolumn(name = "..", type = "..", json_path = "..", description = "..", priority = N, format = "..")` (repeatable) | a `kubectl get` column; `type` is `string`, `integer`, `number`, `boolean` or `date`; `jsonPath` is accepted too. Columns given **replace** kubectl's defaults (NAME stays, always); an AGE column (`date` of `.metadata.creationTimestamp`) is added last (giving columns would otherwise drop kubectl's AGE), unless `no_age_column` is given or a column of yours shows the creation time | NAME and AGE only |
//! | `no_age_column` | with `printcolumn`s: no AGE column is added | AGE added |
//! | `scale(spec_replicas_path = "..", status_replicas_path = "..", label_selector_path = "..")` | the `/scale` subresource (`kubectl scale`) | none |
//! | `derive = "PartialEq"` (repeatable) | more derives on the generated struct (it always has `Clone`, `Debug`) | none |
//! | `crate = "::ferrokube"` | where the generated code finds ferrokube (`::ferrokube_client` inside this workspace) | `::ferrokube` |
//!
//! Two printer columns with an identical pair (`type = "integer"` twice) trip clippy's
//! `duplicated_attributes`, a false positive on helper attributes (rust-clippy#12923): put
//! `#[allow(clippy::duplicated_attributes)]` on the spec struct.
//!
//! ## Validation markers
//!
//! Put schemars attributes on spec fields; they become schema keywords the server enforces on
//! every write (a violation is a 422): `#[schemars(range(min = 1, max = 10))]` → `minimum`,
//! `maximum`; `#[schemars(length(min = 1, max = 63))]` → `minLength`, `maxLength` (strings) or
//! `minItems`, `maxItems` (lists); `#[schemars(regex(pattern = r"^[a-z]+$"))]` → `pattern`; a
//! doc comment → `description`; `Option<T>` → not required, `nullable: true` (an `Option` of a unit-only enum: a null is pruned instead); a unit-only enum →
//! `type: string` with `enum`. The full table, and the shapes made structural, are in
//! `ferrokube::crd::schema`.

mod attrs;
mod expand;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Generates a Kubernetes resource type and its CustomResourceDefinition from a spec struct; see
/// the [crate docs](crate) for the `#[resource(...)]` keys and an example.
#[proc_macro_derive(CustomResource, attributes(resource))]
pub fn derive_custom_resource(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let result = attrs::parse(&input.attrs, input.ident.span())
        .and_then(|options| expand::expand(&input, options));
    match result {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}
