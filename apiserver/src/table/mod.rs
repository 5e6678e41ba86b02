//! Tables: what `kubectl get` prints, computed on the server as kube-apiserver computes it.
//!
//! # Why
//!
//! `kubectl get pods` does not know what a Pod is. It asks the server for a *Table*
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ..., application/json`), and prints the
//! columns and cells it gets back. A server that ignores the request and returns a plain list makes
//! kubectl fall back to `NAME AGE` for every kind; so to look like a cluster to kubectl users, the
//! server must build the same Table kube-apiserver builds: the same columns, and cells spelled the
//! same way (`0/1`, `CrashLoopBackOff`, `5m3s`, `app=web`).
//!
//! # How a request becomes a Table
//!
//! ```text
//!  GET .../pods  Accept: ...;as=Table;v=v1;g=meta.k8s.io   ?includeObject=Object
//!    │
//!    ├─ negotiate: the first Accept clause this endpoint can serve → Wanted::Table(V1)   (none: 406;
//!    │     an object's `/status` converts as the object does, `/scale` not at all)
//!    ├─ Convertor::for_resource: which rows this type has
//!    │     a built-in kind ............ printers: Pod, ReplicaSet, Event, ... (Kubernetes' printers;
//!    │                                  CustomResourceDefinition: apiextensions' own convertor)
//!    │     a custom resource .......... custom: its CRD's additionalPrinterColumns for this version
//!    │     anything else .............. Name + Created At (kube-apiserver's default convertor)
//!    ├─ list, get or watch as usual (selectors, pages, resourceVersions: nothing changes)
//!    └─ TableWriter: one row per object, cells computed *now* (ages), plus the row's `object`:
//!          Metadata (default) → PartialObjectMetadata  |  Object → the object  |  None → null
//!
//!  {"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"42","continue":…},
//!   "columnDefinitions":[{"name":"Name","type":"string","format":"name","description":…,"priority":0},…],
//!   "rows":[{"cells":["web-1","0/1","Pending",0,"5s","<none>",…],"object":{"kind":"PartialObjectMetadata",…}}]}
//! ```
//!
//! A watch asked for as a Table sends each object as a one-row Table; only the first carries
//! `columnDefinitions` (later ones have `null`), so kubectl prints the header once. A bookmark is
//! converted too, as kube-apiserver does: its object (the kind with only a resourceVersion) becomes
//! a row of empty cells. Error events are sent as they are.
//!
//! # How close it is
//!
//! `tests/apiserver/tables.rs` runs kubectl 1.32 (`get` and `get -o wide` for every kind above, a
//! custom resource's columns, `get all`, `-A`, `--show-labels`, `--sort-by`, `-w`) and raw Table
//! requests (column definitions with their descriptions, typed cells, row objects, pages, 406s,
//! watches, writes) against this server and, with `--features e2e`, against kube-apiserver (1.37,
//! the release imitated, or 1.20, whose documented differences it accepts), and requires the same
//! output from both. What remains different is listed in the crate docs.
//!
//! # Invariants
//!
//! - Every row has exactly one cell per column definition, wide columns included (kubectl hides
//!   priority > 0 columns unless `-o wide`).
//! - Cells are JSON strings, integers, floats, booleans or `null`; `null` prints as `<none>`.
//! - Ages are computed when the response is written, against the server's clock, as kube-apiserver
//!   does.

pub mod custom;
pub mod descriptions;
pub mod format;
pub mod jsonpath;
pub mod negotiate;
pub mod printers;

use serde_json::{Map, Value, json};

pub use custom::CustomColumns;
pub use format::Instant;
pub use negotiate::{
    Encoding, Endpoint, IncludeObject, MetadataShape, PartialMetadata, TableVersion, Wanted,
    encoding, negotiate, not_acceptable, wants_aggregated_discovery,
};
pub use printers::{Column, Printer, Row, printer_for};

use crate::api::Api;
use crate::crd;
use crate::resource::ResourceType;

/// How the rows of one resource type are made. See the [module docs](self).
#[derive(Debug, Clone)]
pub enum Convertor {
    /// A built-in kind with a printer of its own.
    Printer(&'static Printer),
    /// A custom resource: its CRD's columns for the served version.
    Custom(CustomColumns),
    /// Any other type: `Name` and `Created At` (an RFC 3339 timestamp, not an age).
    Default,
}

impl Convertor {
    /// The convertor kube-apiserver would use for `resource`. For a custom resource the CRD is read
    /// from `api`'s store now (it is the CRD the type was served from, or a newer one).
    pub fn for_resource(resource: &ResourceType, api: &Api) -> Convertor {
        if let Some(definition) = &resource.definition {
            let crd = api.get(&crd::definitions_type(), None, definition);
            return match crd {
                Ok(stored) => {
                    Convertor::Custom(CustomColumns::of(&stored.object, &resource.version))
                }
                // Served but gone (deleted between routing and now): the CRD default.
                Err(_) => Convertor::Custom(CustomColumns::of(&Value::Null, &resource.version)),
            };
        }
        match printer_for(&resource.group, &resource.kind) {
            Some(printer) => Convertor::Printer(printer),
            None => Convertor::Default,
        }
    }

    /// The column definitions.
    pub fn columns(&self) -> Vec<Column> {
        match self {
            Convertor::Printer(printer) => printer.columns.to_vec(),
            Convertor::Custom(custom) => custom.columns(),
            Convertor::Default => vec![
                Column::name(),
                Column {
                    name: "Created At".into(),
                    kind: "date".into(),
                    format: "".into(),
                    description: descriptions::CREATION_TIMESTAMP.into(),
                    priority: 0,
                },
            ],
        }
    }

    /// The row of one object at `now`.
    pub fn row(&self, object: &Value, now: Instant) -> Row {
        match self {
            Convertor::Printer(printer) => (printer.row)(object, now),
            Convertor::Custom(custom) => custom.row(object, now),
            Convertor::Default => {
                let name = object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Row {
                    cells: vec![name.into(), created_at(object).into()],
                    conditions: Vec::new(),
                }
            }
        }
    }
}

/// `metadata.creationTimestamp` re-written as Go's `Time.UTC().Format(time.RFC3339)`: whole
/// seconds, `Z`; Go's zero time when it is missing.
fn created_at(object: &Value) -> String {
    let parsed = object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(Instant::parse_rfc3339);
    match parsed.and_then(|at| u64::try_from(at.unix_seconds()).ok()) {
        Some(seconds) => crate::meta::rfc3339(seconds),
        None => "0001-01-01T00:00:00Z".to_string(),
    }
}

/// The `metadata` of a Table made from a list: the list's resourceVersion and paging fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMeta {
    pub resource_version: String,
    /// The continue token when the list was cut by `limit`.
    pub continue_token: Option<String>,
    /// How many items follow this page, when known.
    pub remaining: Option<u64>,
}

impl ListMeta {
    fn to_json(&self) -> Value {
        let mut metadata = Map::new();
        if !self.resource_version.is_empty() {
            metadata.insert(
                "resourceVersion".into(),
                self.resource_version.clone().into(),
            );
        }
        if let Some(token) = &self.continue_token {
            metadata.insert("continue".into(), token.clone().into());
        }
        if let Some(remaining) = self.remaining {
            metadata.insert("remainingItemCount".into(), remaining.into());
        }
        Value::Object(metadata)
    }
}

/// Writes Tables of one resource type for one request: the convertor, the requested version and
/// row objects, and the time ages are computed at.
#[derive(Debug, Clone)]
pub struct TableWriter {
    pub convertor: Convertor,
    pub version: TableVersion,
    pub include: IncludeObject,
    pub now: Instant,
}

impl TableWriter {
    /// A Table of a list page.
    pub fn list<'a>(&self, objects: impl IntoIterator<Item = &'a Value>, meta: &ListMeta) -> Value {
        let rows: Vec<Value> = objects.into_iter().map(|o| self.row(o)).collect();
        // kube-apiserver's default convertor, and apiextensions' for CRDs, leave an empty list's
        // rows unset (`null`); the built-in printers write `[]`.
        let unset_when_empty = match &self.convertor {
            Convertor::Default => true,
            Convertor::Printer(printer) => printer.kind == "CustomResourceDefinition",
            Convertor::Custom(_) => false,
        };
        let rows = if rows.is_empty() && unset_when_empty {
            Value::Null
        } else {
            Value::Array(rows)
        };
        self.table(meta.to_json(), rows, true)
    }

    /// A Table of one object; `headers` false leaves out the column definitions (`null`), as every
    /// watch event but the first.
    pub fn object(&self, object: &Value, headers: bool) -> Value {
        let mut metadata = Map::new();
        if let Some(rv) = object.pointer("/metadata/resourceVersion") {
            metadata.insert("resourceVersion".into(), rv.clone());
        }
        let rows = Value::Array(vec![self.row(object)]);
        self.table(Value::Object(metadata), rows, headers)
    }

    fn table(&self, metadata: Value, rows: Value, headers: bool) -> Value {
        let columns = if headers {
            Value::Array(
                self.convertor
                    .columns()
                    .iter()
                    .map(Column::to_json)
                    .collect(),
            )
        } else {
            Value::Null
        };
        json!({"kind": "Table", "apiVersion": self.version.api_version(), "metadata": metadata,
               "columnDefinitions": columns, "rows": rows})
    }

    fn row(&self, object: &Value) -> Value {
        let row = self.convertor.row(object, self.now);
        let mut out = Map::new();
        out.insert("cells".into(), Value::Array(row.cells));
        if !row.conditions.is_empty() {
            out.insert("conditions".into(), Value::Array(row.conditions));
        }
        let included = match self.include {
            IncludeObject::Nothing => Value::Null,
            IncludeObject::Object => object.clone(),
            IncludeObject::Metadata => json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": self.version.api_version(),
                "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
            }),
        };
        out.insert("object".into(), included);
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(convertor: Convertor, include: IncludeObject) -> TableWriter {
        TableWriter {
            convertor,
            version: TableVersion::V1,
            include,
            now: Instant::from_unix_seconds(1_700_000_000),
        }
    }

    fn config_map(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "d", "resourceVersion": "7",
                            "creationTimestamp": "2023-11-14T22:13:00Z"},
               "data": {"k": "v"}})
    }

    #[test]
    fn a_list_becomes_rows_with_partial_metadata() {
        let printer = printer_for("", "ConfigMap").map(Convertor::Printer);
        let writer = writer(
            printer.unwrap_or(Convertor::Default),
            IncludeObject::Metadata,
        );
        let meta = ListMeta {
            resource_version: "9".into(),
            continue_token: Some("abc".into()),
            remaining: Some(3),
        };
        let table = writer.list([&config_map("a"), &config_map("b")], &meta);
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            table["metadata"],
            json!({"resourceVersion": "9", "continue": "abc", "remainingItemCount": 3})
        );
        let names: Vec<&Value> = table["columnDefinitions"]
            .as_array()
            .map(|c| c.iter().map(|c| &c["name"]).collect())
            .unwrap_or_default();
        assert_eq!(names, [&json!("Name"), &json!("Data"), &json!("Age")]);
        assert_eq!(table["rows"][1]["cells"], json!(["b", 1, "20s"]));
        assert_eq!(
            table["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": config_map("a")["metadata"]})
        );
        assert!(table["rows"][0].get("conditions").is_none());
    }

    #[test]
    fn objects_and_headers() {
        let writer = writer(Convertor::Default, IncludeObject::Object);
        let table = writer.object(&config_map("a"), false);
        assert_eq!(table["columnDefinitions"], Value::Null);
        assert_eq!(table["metadata"], json!({"resourceVersion": "7"}));
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["a", "2023-11-14T22:13:00Z"])
        );
        assert_eq!(table["rows"][0]["object"], config_map("a"));
        let nothing = TableWriter {
            include: IncludeObject::Nothing,
            version: TableVersion::V1Beta1,
            ..writer
        };
        let table = nothing.object(&json!({"metadata": {"name": "x"}}), true);
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(table["rows"][0]["object"], Value::Null);
        assert_eq!(table["rows"][0]["cells"][1], "0001-01-01T00:00:00Z");
        assert_eq!(table["columnDefinitions"][1]["name"], "Created At");
    }

    #[test]
    fn empty_lists() {
        let meta = ListMeta::default();
        let default = writer(Convertor::Default, IncludeObject::Metadata).list([], &meta);
        assert_eq!(default["rows"], Value::Null);
        assert_eq!(default["metadata"], json!({}));
        let pods = printer_for("", "Pod").map(Convertor::Printer);
        let printed =
            writer(pods.unwrap_or(Convertor::Default), IncludeObject::Metadata).list([], &meta);
        assert_eq!(printed["rows"], json!([]));
    }
}
