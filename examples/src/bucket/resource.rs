//! The custom resource: `Bucket` (`storage.ferrokube.dev/v1`), written as its spec and status
//! structs; `#[derive(CustomResource)]` makes the `Bucket` type, its trait impls and its
//! CustomResourceDefinition (`Bucket::crd()`) from them.
//!
//! ```yaml
//! apiVersion: storage.ferrokube.dev/v1
//! kind: Bucket
//! metadata: {name: assets, namespace: shop}
//! spec: {retentionDays: 30, versioned: true}
//! status:
//!   region: eu-west                     # from the namespace's storage.ferrokube.dev/region label
//!   endpoint: https://eu-west.store.example/shop.assets
//!   observedGeneration: 2
//!   conditions: [{type: Ready, status: "True", reason: Provisioned, observedGeneration: 2, ...}]
//! ```
//!
//! `kubectl get buckets` (or `bkt`) shows the printer columns: NAME, RETENTION, REGION, READY.

use ferrokube::CustomResource;
use ferrokube::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A bucket in the object store, as a namespace asks for it.
// Two printer columns of `type = "string"` look like a repeated attribute to clippy
// (rust-clippy#12923, a false positive on helper attributes).
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[resource(
    group = "storage.ferrokube.dev",
    version = "v1",
    kind = "Bucket",
    namespaced,
    status = "BucketStatus",
    shortname = "bkt",
    derive = "PartialEq",
    printcolumn(
        name = "Retention",
        type = "integer",
        json_path = ".spec.retentionDays"
    ),
    printcolumn(name = "Region", type = "string", json_path = ".status.region"),
    printcolumn(
        name = "Ready",
        type = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BucketSpec {
    /// Days the store keeps an object before it expires it.
    #[schemars(range(min = 1, max = 3650))]
    pub retention_days: i32,
    /// Keep every version of an object, not only the latest.
    #[serde(default)]
    pub versioned: bool,
}

/// What the controller last did for a Bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketStatus {
    /// The generation of the spec this status answers.
    pub observed_generation: Option<i64>,
    /// Where the bucket lives: its namespace's region label, or the default region.
    pub region: Option<String>,
    /// Where applications reach it (also in the child ConfigMap `<name>-bucket`).
    pub endpoint: Option<String>,
    /// `Ready`, with the generation it was decided for.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
