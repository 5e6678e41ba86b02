//! The custom resource: `DnsRecord` (`dns.ferrokube.dev/v1`), its Rust type and its
//! CustomResourceDefinition.
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
//! A custom type becomes usable with every part of ferrokube (`Api`, informers, the controller) by
//! implementing k8s-openapi's `Resource`, `ListableResource` and `Metadata` traits, as below.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub const GROUP: &str = "dns.ferrokube.dev";
pub const CRD_NAME: &str = "dnsrecords.dns.ferrokube.dev";
/// The finalizer that holds a DnsRecord until its provider entry is gone.
pub const FINALIZER: &str = "dns.ferrokube.dev/provider-cleanup";
/// The condition the controller reports.
pub const READY: &str = "Ready";

/// A DNS record at the (simulated) provider, as Kubernetes asks for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecord {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DnsRecordSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DnsRecordStatus>,
}

fn api_version() -> String {
    <DnsRecord as k8s_openapi::Resource>::API_VERSION.to_string()
}

fn kind() -> String {
    <DnsRecord as k8s_openapi::Resource>::KIND.to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecordSpec {
    /// The fully qualified name, e.g. `web.example.test`.
    pub fqdn: String,
    /// `A`, `CNAME` or `TXT`.
    #[serde(rename = "type")]
    pub type_: String,
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

impl DnsRecord {
    pub fn new(name: &str, spec: DnsRecordSpec) -> DnsRecord {
        DnsRecord {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl k8s_openapi::Resource for DnsRecord {
    const API_VERSION: &'static str = "dns.ferrokube.dev/v1";
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "DnsRecord";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "dnsrecords";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for DnsRecord {
    const LIST_KIND: &'static str = "DnsRecordList";
}

impl k8s_openapi::Metadata for DnsRecord {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The CustomResourceDefinition of `DnsRecord`: a structural schema (unknown fields are pruned,
/// types and required fields validated by the server), the status subresource, and the columns
/// `kubectl get dnsrecords` shows.
pub fn definition() -> Value {
    let condition = json!({
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "observedGeneration": {"type": "integer"},
            "lastTransitionTime": {"type": "string"},
        },
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": "dnsrecords",
                "singular": "dnsrecord",
                "kind": "DnsRecord",
                "listKind": "DnsRecordList",
                "shortNames": ["dnsr"],
            },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "FQDN", "type": "string", "jsonPath": ".spec.fqdn"},
                    {"name": "Type", "type": "string", "jsonPath": ".spec.type"},
                    {"name": "Value", "type": "string", "jsonPath": ".spec.value"},
                    {"name": "Ready", "type": "string",
                     "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["fqdn", "type", "value"],
                            "properties": {
                                "fqdn": {"type": "string", "minLength": 1, "maxLength": 253},
                                "type": {"type": "string", "enum": ["A", "CNAME", "TXT"]},
                                "value": {"type": "string", "minLength": 1},
                                "ttl": {"type": "integer", "minimum": 30},
                            },
                        },
                        "status": {
                            "type": "object",
                            "properties": {
                                "observedGeneration": {"type": "integer"},
                                "fqdn": {"type": "string"},
                                "conditions": {"type": "array", "items": condition},
                            },
                        },
                    },
                }},
            }],
        },
    })
}
