//! The custom resource: `DnsRecord` (`dns.ferrokube.dev/v1`), its Rust type and, from the same
//! source, its CustomResourceDefinition (`DnsRecord::crd()`, from `#[derive(CustomResource)]`).
//!
//! ```yaml
//! apiVersion: dns.ferrokube.dev/v1
//! kind: DnsRecord
//! metadata: {name: web, namespace: dns-demo}
//! spec: {fqdn: web.example.test, type: A, value: 192.0.2.10, ttl: 300}
//! status:
//!   observedGeneration: 2
//!   fqdn: web.example.test          # the name this object holds at the provider
//!   conditions: [{type: Ready, status: "True", reason: Synced, observedGeneration: 2, ...}]
//! ```
//!
//! The schema the server validates and prunes with is generated from these structs (schemars,
//! through `ferrokube::schemars`); the markers on the fields are what it enforces.

// Three printer columns of `type = "string"` trip clippy's duplicated_attributes, a false positive
// on a derive's helper attribute (rust-clippy#12923).
#![allow(clippy::duplicated_attributes)]

use ferrokube::CustomResource;
use ferrokube::schemars::JsonSchema;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::{Deserialize, Serialize};

/// The finalizer that holds a DnsRecord until its provider entry is gone.
pub const FINALIZER: &str = "dns.ferrokube.dev/provider-cleanup";
/// The condition the controller reports.
pub const READY: &str = "Ready";

/// A DNS record at the (simulated) provider, as Kubernetes asks for it.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[resource(
    group = "dns.ferrokube.dev",
    version = "v1",
    kind = "DnsRecord",
    namespaced,
    status = "DnsRecordStatus",
    shortname = "dnsr",
    printcolumn(name = "FQDN", type = "string", json_path = ".spec.fqdn"),
    printcolumn(name = "Type", type = "string", json_path = ".spec.type"),
    printcolumn(name = "Value", type = "string", json_path = ".spec.value"),
    printcolumn(
        name = "Ready",
        type = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[schemars(crate = "ferrokube::schemars")]
#[serde(rename_all = "camelCase")]
pub struct DnsRecordSpec {
    /// The fully qualified name, e.g. `web.example.test`.
    #[schemars(length(min = 1, max = 253))]
    pub fqdn: String,
    /// `A`, `CNAME` or `TXT`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["A", "CNAME", "TXT"]))]
    pub type_: String,
    #[schemars(length(min = 1))]
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30))]
    pub ttl: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(crate = "ferrokube::schemars")]
#[serde(rename_all = "camelCase")]
pub struct DnsRecordStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The name this object holds at the provider (so a change of `spec.fqdn` can release it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fqdn: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
