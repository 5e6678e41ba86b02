//! Reading what a client asked for: the `Accept` header (`application/json;as=Table;v=v1;
//! g=meta.k8s.io, ...`) and the `includeObject` query parameter.
//!
//! kube-apiserver walks the Accept clauses best first (by `q`, then specific before `*`) and takes
//! the first one it can serve. A clause with `as=Table` can be served by an endpoint with a table
//! convertor (a resource's main endpoint, not `/status` or `/scale`), in JSON, for Table versions
//! `meta.k8s.io/v1` and `v1beta1`. When no clause can be served the answer is 406 NotAcceptable.
//!
//! This server writes only JSON, whatever the clause's media type; so a clause without a conversion
//! always means "the object", as before Tables existed. A clause asking for `PartialObjectMetadata`
//! (or `PartialObjectMetadataList`) of `meta.k8s.io/v1` or `v1beta1`, in any media type, is served
//! as JSON: the object's `metadata` alone under that kind (client-go's metadata-only client and
//! controller-runtime's metadata informers ask for it). Whether the shape fits the answer (an
//! object or a list) is only known once it is made, as on kube-apiserver (406 then, see
//! [`PartialMetadata::mismatch`]).
//!
//! The discovery endpoints `/api` and `/apis` read the same clauses for another conversion:
//! `as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2` asks for aggregated discovery
//! ([`wants_aggregated_discovery`]).

use crate::status::StatusError;

/// Which Table version a client asked for; the Table and the row objects are of that version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableVersion {
    V1,
    V1Beta1,
}

impl TableVersion {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
    pub fn api_version(self) -> &'static str {
        match self {
            TableVersion::V1 => "meta.k8s.io/v1",
            TableVersion::V1Beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// What to put in each row's `object` (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// `None`: no object (`null`).
    Nothing,
    /// `Metadata`, the default: a `PartialObjectMetadata` with the object's metadata.
    Metadata,
    /// `Object`: the whole object (kubectl asks for it to `--sort-by` a field).
    Object,
}

impl IncludeObject {
    /// The `includeObject` query parameter; a value kube-apiserver does not know is a 400.
    pub fn parse(value: Option<&str>) -> Result<IncludeObject, StatusError> {
        match value {
            None | Some("" | "Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::Nothing),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(StatusError::bad_request(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: {other:?}: must be 'Metadata', 'Object', 'None', or empty"
            ))),
        }
    }
}

/// The representation a request will be answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// The object (or list) itself, as JSON.
    Object,
    /// A Table of it.
    Table(TableVersion),
    /// Its metadata alone (`PartialObjectMetadata` or `PartialObjectMetadataList`).
    Metadata(PartialMetadata),
}

/// Which of the two metadata-only kinds a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataShape {
    /// `PartialObjectMetadata`: for one object (a get, a write, each watch event).
    Object,
    /// `PartialObjectMetadataList`: for a list.
    List,
}

/// A metadata-only answer: its shape and its `meta.k8s.io` version (the same two versions as a
/// Table's, hence [`TableVersion`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialMetadata {
    pub shape: MetadataShape,
    pub version: TableVersion,
}

impl PartialMetadata {
    /// The 406 kube-apiserver answers when the shape asked for is not the answer's (`list`: the
    /// answer is a list), naming the Go type it would have converted; `None` when they fit.
    pub fn mismatch(self, list: bool, go_type: impl FnOnce() -> String) -> Option<StatusError> {
        let message = match (self.shape, list) {
            (MetadataShape::Object, true) => format!(
                "you requested PartialObjectMetadata, but the requested object is a list ({})",
                go_type()
            ),
            (MetadataShape::List, false) => format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
                go_type()
            ),
            _ => return None,
        };
        Some(StatusError {
            code: 406,
            reason: "NotAcceptable",
            message,
            details: None,
        })
    }
}

/// What an endpoint can produce besides the object itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// Has a table convertor: a resource's main endpoint or its `/status` (not `/scale`).
    pub tables: bool,
}

/// One clause of an Accept header.
#[derive(Debug, Clone, PartialEq)]
struct Clause<'a> {
    kind: &'a str,
    subtype: &'a str,
    quality: f32,
    /// `as`, `g`, `v`: a conversion of the response, when any is present.
    conversion: Option<Conversion<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Conversion<'a> {
    kind: &'a str,
    group: &'a str,
    version: &'a str,
}

/// Splits an Accept header into clauses, best first (goautoneg's order: higher `q` first, then a
/// concrete type before `*`, then a concrete subtype before `*`, else as written).
fn clauses(header: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause<'_>> = header
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.trim().split(';');
            let range = pieces.next()?.trim();
            let (kind, subtype) = match range.split_once('/') {
                Some((kind, subtype)) => (kind.trim(), subtype.trim()),
                None if range == "*" => ("*", "*"),
                None => return None,
            };
            let mut quality = 1.0;
            let mut conversion: Option<Conversion<'_>> = None;
            for parameter in pieces {
                let Some((key, value)) = parameter.split_once('=') else {
                    continue;
                };
                let value = value.trim();
                match key.trim() {
                    "q" => quality = value.parse().unwrap_or(0.0),
                    "as" => conversion.get_or_insert_with(Default::default).kind = value,
                    "g" => conversion.get_or_insert_with(Default::default).group = value,
                    "v" => conversion.get_or_insert_with(Default::default).version = value,
                    _ => {}
                }
            }
            Some(Clause {
                kind,
                subtype,
                quality,
                conversion,
            })
        })
        .collect();
    clauses.sort_by(|a, b| {
        b.quality
            .total_cmp(&a.quality)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    clauses
}

/// The representation to answer with, or 406 when no clause of `accept` can be served.
pub fn negotiate(accept: Option<&str>, endpoint: Endpoint) -> Result<Wanted, StatusError> {
    let header = accept.map(str::trim).unwrap_or("");
    if header.is_empty() {
        return Ok(Wanted::Object);
    }
    for clause in clauses(header) {
        let Some(conversion) = clause.conversion else {
            return Ok(Wanted::Object);
        };
        let version = match (conversion.group, conversion.version) {
            ("meta.k8s.io", "v1") => TableVersion::V1,
            ("meta.k8s.io", "v1beta1") => TableVersion::V1Beta1,
            _ => continue,
        };
        // Tables are written as JSON: `application/json`, `application/*` or `*/*`.
        let json = matches!(
            (clause.kind, clause.subtype),
            ("application", "json" | "*") | ("*", "*")
        );
        let metadata = |shape| Wanted::Metadata(PartialMetadata { shape, version });
        match conversion.kind {
            "Table" if endpoint.tables && json => return Ok(Wanted::Table(version)),
            "PartialObjectMetadata" => return Ok(metadata(MetadataShape::Object)),
            "PartialObjectMetadataList" => return Ok(metadata(MetadataShape::List)),
            _ => continue,
        }
    }
    Err(not_acceptable())
}

/// The 406 of an Accept header no clause of which can be served. kube-apiserver names the media
/// types of its serializer, the same for every resource (custom resources included, though they
/// have no protobuf form: a request for a custom resource in protobuf only gets this too).
pub fn not_acceptable() -> StatusError {
    StatusError {
        code: 406,
        reason: "NotAcceptable",
        message: "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf".to_string(),
        details: None,
    }
}

/// The encoding of an answer: what the chosen Accept clause names (kube-apiserver 1.37.2 answers
/// a built-in kind, a list of one, a watch and any error `Status` in protobuf when the clause it
/// chose is `application/vnd.kubernetes.protobuf`), and whether a later clause takes JSON, which a
/// custom resource (no protobuf form) is then answered in; without one, a custom resource's
/// request is a 406.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Protobuf { json_too: bool },
}

/// The [`Encoding`] `accept` asks for, choosing the clause [`negotiate`] chooses.
pub fn encoding(accept: Option<&str>, endpoint: Endpoint) -> Encoding {
    let header = accept.map(str::trim).unwrap_or("");
    let clauses = clauses(header);
    let takes_json = |clause: &Clause<'_>| {
        clause.conversion.is_none()
            && matches!(
                (clause.kind, clause.subtype),
                ("application", "json" | "*") | ("*", "*")
            )
    };
    let protobuf = |clause: &Clause<'_>| {
        clause.kind.eq_ignore_ascii_case("application")
            && clause
                .subtype
                .eq_ignore_ascii_case("vnd.kubernetes.protobuf")
    };
    for (at, clause) in clauses.iter().enumerate() {
        let chosen = match clause.conversion {
            None => true,
            Some(conversion) => match conversion.kind {
                "Table" => {
                    endpoint.tables
                        && takes_json(&Clause {
                            conversion: None,
                            ..*clause
                        })
                }
                "PartialObjectMetadata" | "PartialObjectMetadataList" => {
                    conversion.group == "meta.k8s.io"
                        && matches!(conversion.version, "v1" | "v1beta1")
                }
                _ => false,
            },
        };
        if !chosen {
            continue;
        }
        if !protobuf(clause) {
            return Encoding::Json;
        }
        let json_too = clauses.iter().skip(at + 1).any(takes_json);
        return Encoding::Protobuf { json_too };
    }
    Encoding::Json
}

/// Whether a discovery request (`/api`, `/apis`) asks for aggregated discovery: its best clause
/// that this server can serve converts to `APIGroupDiscoveryList` of `apidiscovery.k8s.io/v2`
/// (kube-apiserver 1.37 serves no other version: a `v2beta1` clause is passed over, and a plain
/// clause means the legacy `APIVersions` / `APIGroupList`). Protobuf clauses are answered as JSON,
/// like every other answer of this server.
pub fn wants_aggregated_discovery(accept: Option<&str>) -> bool {
    let header = accept.map(str::trim).unwrap_or("");
    for clause in clauses(header) {
        let Some(conversion) = clause.conversion else {
            return false;
        };
        if (conversion.kind, conversion.group, conversion.version)
            == ("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2")
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_answers_follow_the_chosen_accept_clause() {
        let e = |accept| encoding(Some(accept), MAIN);
        let client_go = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(e(client_go), Encoding::Protobuf { json_too: true });
        assert_eq!(
            e("application/vnd.kubernetes.protobuf"),
            Encoding::Protobuf { json_too: false }
        );
        assert_eq!(
            e("application/json, application/vnd.kubernetes.protobuf"),
            Encoding::Json
        );
        assert_eq!(
            e("application/vnd.kubernetes.protobuf;q=0.5, application/json"),
            Encoding::Json
        );
        assert_eq!(encoding(None, MAIN), Encoding::Json);
        assert_eq!(e("*/*"), Encoding::Json);
        // A Table is JSON whatever comes after it.
        assert_eq!(
            e("application/json;as=Table;v=v1;g=meta.k8s.io, application/vnd.kubernetes.protobuf"),
            Encoding::Json
        );
        let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(e(metadata), Encoding::Protobuf { json_too: true });
    }

    const MAIN: Endpoint = Endpoint { tables: true };

    #[test]
    fn kubectl_get_gets_a_v1_table() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(kubectl), MAIN),
            Ok(Wanted::Table(TableVersion::V1))
        );
        let without = Endpoint { tables: false };
        assert_eq!(negotiate(Some(kubectl), without), Ok(Wanted::Object));
    }

    #[test]
    fn clauses_are_taken_best_first() {
        let header = "application/json;q=0.5, application/json;as=Table;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            negotiate(Some(header), MAIN),
            Ok(Wanted::Table(TableVersion::V1Beta1))
        );
        let header = "*/*;as=Table;g=meta.k8s.io;v=v1, application/json";
        assert_eq!(negotiate(Some(header), MAIN), Ok(Wanted::Object));
        assert_eq!(negotiate(None, MAIN), Ok(Wanted::Object));
        assert_eq!(negotiate(Some(""), MAIN), Ok(Wanted::Object));
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf, */*"), MAIN),
            Ok(Wanted::Object)
        );
    }

    #[test]
    fn tables_nobody_can_serve_are_406() {
        for header in [
            "application/json;as=Table;v=v2;g=meta.k8s.io",
            "application/json;as=Table;v=v1;g=example.com",
            "application/yaml;as=Table;v=v1;g=meta.k8s.io",
            "application/json;as=Chart;v=v1;g=meta.k8s.io",
        ] {
            let error = negotiate(Some(header), MAIN).err();
            assert_eq!(
                error.as_ref().map(|e| (e.code, e.reason)),
                Some((406, "NotAcceptable")),
                "{header}"
            );
        }
        let subresource = Endpoint { tables: false };
        let error = negotiate(
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            subresource,
        )
        .err();
        assert_eq!(
            error.map(|e| e.message),
            Some(
                "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
                    .to_string()
            )
        );
    }

    #[test]
    fn metadata_only_clauses_are_served_in_any_media_type() {
        let client_go = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        let wanted = PartialMetadata {
            shape: MetadataShape::Object,
            version: TableVersion::V1,
        };
        assert_eq!(
            negotiate(Some(client_go), MAIN),
            Ok(Wanted::Metadata(wanted))
        );
        assert!(wanted.mismatch(false, String::new).is_none());
        let refused = wanted.mismatch(true, || "*core.ConfigMapList".into());
        assert_eq!(refused.map(|e| e.code), Some(406));
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1";
        assert_eq!(
            negotiate(Some(list), MAIN),
            Ok(Wanted::Metadata(PartialMetadata {
                shape: MetadataShape::List,
                version: TableVersion::V1Beta1
            }))
        );
    }

    #[test]
    fn aggregated_discovery_is_v2_only() {
        let client_go = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert!(wants_aggregated_discovery(Some(client_go)));
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert!(!wants_aggregated_discovery(Some(beta)));
        assert!(!wants_aggregated_discovery(Some(
            "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5"
        )));
        assert!(!wants_aggregated_discovery(None));
    }

    #[test]
    fn include_object_values() {
        assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse(Some("None")),
            Ok(IncludeObject::Nothing)
        );
        assert_eq!(
            IncludeObject::parse(Some("Object")),
            Ok(IncludeObject::Object)
        );
        let error = IncludeObject::parse(Some("All")).err();
        assert_eq!(error.map(|e| e.code), Some(400));
    }
}
