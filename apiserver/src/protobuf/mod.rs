//! Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), decoded
//! into the JSON form the rest of the server works on; and answers in it ([`answer`]), written by
//! core's encoder.
//!
//! # Why
//!
//! Go clients send built-in kinds as protobuf, not JSON: kubectl (1.32) for what its generators
//! build (`kubectl create deployment`, `create configmap`, ...), and client-go and
//! controller-runtime for every built-in kind by default (Nodes, ServiceAccounts, Leases, Pods,
//! ReplicaSets, a Scale, an Eviction...). None of them retries with JSON when a server answers 415.
//! Kubernetes' own conformance suite (e2e.test 1.37) sends CustomResourceDefinitions the same way.
//! Clients ask for `protobuf, json` and take either; answers are protobuf for built-in kinds when
//! the client prefers it ([`answer`]).
//!
//! # How data flows
//!
//! ```text
//!  body ── "k8s\0" ── runtime.Unknown {1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType}
//!                                 │                                  │
//!                                 │ picks the top-level schema       │ the object's own message
//!                                 ▼                                  ▼
//!        ferrokube_core::protobuf::top_level(apiVersion, kind) ──► wire::Reader walks raw's fields,
//!        (the table generated from Kubernetes' .proto files       each looked up by number in the
//!         and Go types: scripts/protobuf-schema.sh)               message's Schema ──► serde_json::Value
//! ```
//!
//! The object's message carries no apiVersion/kind (in Go they live in `TypeMeta`, outside the
//! message); the decoder copies them from the envelope into the JSON object.
//!
//! # Mapping rules
//!
//! The output is the JSON Go's `encoding/json` writes for the object Go's unmarshaller builds
//! (but for `null` members, which are left out). Per field, from core's table:
//!
//! - Go's marshallers write every non-pointer field, zero or not: an empty `generateName`,
//!   `stdin: false`, a `nodePort` of 0. The decoder drops a zero scalar (`""`, 0, `false`) exactly
//!   where Go's JSON does: when the field is `omitempty` and not a Go pointer
//!   (`Presence::OmitEmpty`). A pointer's zero (`replicas: 0`, `immutable: false`) is a value a
//!   client chose, and a field without `omitempty` (`ContainerStatus.ready`, a CRD version's
//!   `served`) is written by Go whatever its value: both are kept.
//! - `map<string, V>` becomes a JSON object; `repeated` becomes an array; `bytes` (Secret `data`)
//!   becomes base64 text, as in the JSON form. An embedded Go struct that JSON inlines
//!   (`Volume`'s `VolumeSource`, `Probe`'s `ProbeHandler`) is a message on the wire whose fields
//!   go into the parent object. A Go named slice that protobuf wraps in a message (`ExtraValue
//!   {1 items}`) becomes the bare array.
//! - `IntOrString {1 type, 2 intVal, 3 strVal}` becomes a number (type 0) or a string (type 1);
//!   `Quantity {1 string}` its string; `Time {1 seconds, 2 nanos}` an RFC 3339 string with whole
//!   seconds and `MicroTime` one with six fractional digits (a zero time, which Go writes as an
//!   empty message, is left out).
//! - `double` (the only fixed-width type read, wire type 1) becomes a JSON number, an integer when
//!   it has no fraction (Go writes `1`, not `1.0`); NaN and the infinities are refused.
//! - `RawExtension {1 raw}`, meta's `FieldsV1 {1 Raw}` and apiextensions' `JSON {1 raw}` carry JSON
//!   text: they become the value it holds (`default: 1`, a `fieldsV1` object, a ControllerRevision's
//!   `data`).
//! - The "or" messages of a CRD schema become the shape Go's `MarshalJSON` gives them:
//!   `JSONSchemaPropsOrBool` a schema or a boolean (`additionalProperties: false`),
//!   `JSONSchemaPropsOrArray` a schema or a list of them (`items`), `JSONSchemaPropsOrStringArray`
//!   a schema or a list of property names (`dependencies`).
//!
//! # What is and is not supported
//!
//! Every built-in kind of Kubernetes 1.37: every kind of every GA group version of k8s.io/api
//! v0.37.2 (core/v1, apps/v1, batch/v1, autoscaling/v1 and v2, policy/v1, rbac/v1, networking/v1,
//! storage/v1, coordination/v1, certificates/v1, discovery/v1, events/v1, scheduling/v1, node/v1,
//! admissionregistration/v1, flowcontrol/v1, resource/v1, authentication/v1, authorization/v1,
//! storagemigration/v1, ...), their lists, autoscaling/v1 `Scale`, policy/v1 `Eviction`,
//! authentication/v1 `TokenRequest`, apiextensions.k8s.io/v1 (CustomResourceDefinition, its
//! recursive OpenAPI schema included), apiregistration.k8s.io/v1 and meta.k8s.io/v1
//! (`DeleteOptions`, `PartialObjectMetadata`, the options kinds). `DeleteOptions`, the body of a
//! DELETE, is read under any apiVersion (Go registers it in every group version, a custom
//! resource's included). Alpha and beta group versions are not in the table (their bodies are
//! refused with 415), nor are custom resources, which Go clients send as JSON.
//!
//! Two fields are exceptions. `DeleteOptions`' `ignoreStoreReadErrorWithClusterBreakingPotential`
//! asks for an unsafe deletion, which this server does not do: a body with it is refused (415)
//! rather than obeyed in part. ObjectMeta's `clusterName` (15), which client-go wrote empty until
//! 1.25 removed it, is read and dropped.
//!
//! A field the table does not know is never dropped silently (kube-apiserver skips it): the
//! request is refused with 415 naming the message and field number, and asking for JSON
//! (`kubectl create ... --dry-run=client -o json | kubectl create -f -` works). Malformed input
//! (truncated varints and fixed fields, bad lengths, wrong wire types, bad UTF-8, JSON fields that
//! are not JSON, non-finite doubles) is a 400, and so is a schema nested deeper than
//! [`MAX_DEPTH`] messages; nothing input-dependent panics or recurses without bound.
//!
//! The table (`ferrokube_core::protobuf`, generated by `scripts/protobuf-schema.sh` from the
//! `generated.proto` files and Go types of k8s.io/api, apimachinery, apiextensions-apiserver and
//! kube-aggregator v0.37.2) is checked against Go itself: `tests/fixtures/protobuf/vectors.jsonl`
//! holds, for every top-level kind, objects with every field set as client-go encodes them and as
//! Go's JSON writes them, and the tests decode each and compare; `tests/fixtures/crd-protobuf/`
//! holds a CRD that client-go 1.37 encoded.

pub mod answer;

use base64::Engine;
use ferrokube_core::protobuf::wire::{Reader, WireError, WireType};
use ferrokube_core::protobuf::{Fold, Label, MAGIC, Schema, Ty, top_level};
use serde_json::{Map, Value};

/// The media type, the nesting bound (the top-level object being depth 1; see core) and the
/// media-type test: core's, shared with the client and the encoder.
pub use ferrokube_core::protobuf::{CONTENT_TYPE, MAX_DEPTH, is_protobuf};

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body does not start with `k8s\0`.
    #[error("the body does not start with the Kubernetes protobuf magic bytes \"k8s\\0\"")]
    Magic,
    /// Bytes that are not a well-formed message: truncated, a bad varint or field number, a
    /// wire type Kubernetes never uses or the wrong one for the field's type (core's reader).
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A string field that is not UTF-8.
    #[error("{message} field {field} is not valid UTF-8")]
    Utf8 { message: &'static str, field: u32 },
    /// The envelope has no `typeMeta` kind or apiVersion.
    #[error("the protobuf envelope has no apiVersion/kind")]
    NoTypeMeta,
    /// The envelope names an encoding (e.g. gzip) this decoder does not undo.
    #[error("unsupported protobuf contentEncoding {0:?}")]
    ContentEncoding(String),
    /// A kind outside the schema table.
    #[error(
        "protobuf bodies of {api_version} {kind} are not supported by this server; send JSON instead (kubectl create ... --dry-run=client -o json | kubectl create -f -)"
    )]
    UnknownKind { api_version: String, kind: String },
    /// Messages nested deeper than [`MAX_DEPTH`].
    #[error("protobuf messages nested deeper than {MAX_DEPTH} levels (in {message})")]
    TooDeep { message: &'static str },
    /// A `JSON` (or `FieldsV1`) message whose bytes are not JSON text.
    #[error("{message} field {field} does not hold valid JSON: {reason}")]
    Json {
        message: &'static str,
        field: u32,
        reason: String,
    },
    /// A `double` that is NaN or infinite, which JSON cannot carry.
    #[error("{message} field {field} is not a finite number")]
    NotFinite { message: &'static str, field: u32 },
    /// A field number outside the schema table.
    #[error(
        "protobuf field {field} of message {message} is not supported by this server; send JSON instead (kubectl create ... --dry-run=client -o json | kubectl create -f -)"
    )]
    UnknownField { message: &'static str, field: u32 },
}

impl DecodeError {
    /// Whether the body is well-formed but uses what this decoder does not support (415), rather
    /// than malformed (400).
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            DecodeError::UnknownKind { .. }
                | DecodeError::UnknownField { .. }
                | DecodeError::ContentEncoding(_)
        )
    }
}

/// Decodes a whole request body (`k8s\0` + `runtime.Unknown`) into the object's JSON form, with
/// `apiVersion` and `kind` from the envelope.
pub fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    decode_with(body, REFUSED)
}

/// [`decode`], refusing the fields in `refused` (the server's [`REFUSED`]; none to read exactly
/// what Go wrote, as the tests against Go's own encodings do).
fn decode_with(body: &[u8], refused: &'static [(&'static str, u32)]) -> Result<Value, DecodeError> {
    let rest = body.strip_prefix(MAGIC).ok_or(DecodeError::Magic)?;
    let envelope = Envelope::parse(rest)?;
    if !envelope.content_encoding.is_empty() {
        return Err(DecodeError::ContentEncoding(envelope.content_encoding));
    }
    if envelope.kind.is_empty() || envelope.api_version.is_empty() {
        return Err(DecodeError::NoTypeMeta);
    }
    let schema = top_level(&envelope.api_version, &envelope.kind).ok_or_else(|| {
        DecodeError::UnknownKind {
            api_version: envelope.api_version.clone(),
            kind: envelope.kind.clone(),
        }
    })?;
    let mut object = decode_message(schema, envelope.raw, Walk { depth: 1, refused })?;
    object.insert("apiVersion".into(), Value::String(envelope.api_version));
    object.insert("kind".into(), Value::String(envelope.kind));
    tracing::debug!(kind = %schema.name, bytes = body.len(), "decoded a protobuf body");
    Ok(Value::Object(object))
}

/// `runtime.Unknown`, with its `typeMeta` flattened.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

impl<'a> Envelope<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Envelope<'a>, DecodeError> {
        const UNKNOWN: &str = "runtime.Unknown";
        const TYPE_META: &str = "runtime.TypeMeta";
        let mut envelope = Envelope {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
            content_encoding: String::new(),
        };
        let mut reader = Reader::new(bytes, UNKNOWN);
        while let Some((field, wire)) = reader.key()? {
            let value = reader.len_field(field, wire)?;
            match field {
                1 => {
                    let mut type_meta = Reader::new(value, TYPE_META);
                    while let Some((field, wire)) = type_meta.key()? {
                        let text = type_meta.len_field(field, wire)?;
                        let text = utf8(text, TYPE_META, field)?;
                        match field {
                            1 => envelope.api_version = text,
                            2 => envelope.kind = text,
                            _ => {
                                return Err(DecodeError::UnknownField {
                                    message: TYPE_META,
                                    field,
                                });
                            }
                        }
                    }
                }
                2 => envelope.raw = value,
                3 => envelope.content_encoding = utf8(value, UNKNOWN, field)?,
                // contentType: empty or protobuf; the raw bytes are read as protobuf either way.
                4 => {
                    utf8(value, UNKNOWN, field)?;
                }
                _ => {
                    return Err(DecodeError::UnknownField {
                        message: UNKNOWN,
                        field,
                    });
                }
            }
        }
        Ok(envelope)
    }
}

fn utf8(bytes: &[u8], message: &'static str, field: u32) -> Result<String, DecodeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Utf8 { message, field })
}

/// Where the decoder is: how deep in nested messages (the top-level object is depth 1), and which
/// fields it refuses.
#[derive(Debug, Clone, Copy)]
struct Walk {
    depth: usize,
    refused: &'static [(&'static str, u32)],
}

impl Walk {
    /// One message further in.
    fn deeper(self) -> Walk {
        Walk {
            depth: self.depth + 1,
            ..self
        }
    }
}

/// Fields no longer in Kubernetes 1.37's messages that older Go clients still write, read and
/// dropped rather than refused: ObjectMeta's `clusterName` (15), which client-go wrote (empty)
/// until 1.25 removed it.
const RETIRED: &[(&str, u32)] = &[("meta.v1.ObjectMeta", 15)];

/// Fields of the table this server refuses (415) rather than obeys: `DeleteOptions`'
/// `ignoreStoreReadErrorWithClusterBreakingPotential` (6) asks for an unsafe deletion, which this
/// server does not implement; a body asking for it is refused, not obeyed in part.
const REFUSED: &[(&str, u32)] = &[("meta.v1.DeleteOptions", 6)];

/// Decodes one message by its schema, at nesting `depth` (1 for the top-level object). One schema
/// is recursive (`JSONSchemaProps`), so the input could nest as deep as its length allows; the
/// depth is bounded by [`MAX_DEPTH`] instead.
fn decode_message(
    schema: &'static Schema,
    bytes: &[u8],
    walk: Walk,
) -> Result<Map<String, Value>, DecodeError> {
    let mut object = Map::new();
    decode_into(schema, bytes, walk, &mut object)?;
    Ok(object)
}

/// Decodes one message's fields into `object`: its own JSON object, or its parent's for a message
/// Go inlines ([`Label::Inline`]: `Volume`'s `VolumeSource`).
fn decode_into(
    schema: &'static Schema,
    bytes: &[u8],
    walk: Walk,
    object: &mut Map<String, Value>,
) -> Result<(), DecodeError> {
    if walk.depth > MAX_DEPTH {
        return Err(DecodeError::TooDeep {
            message: schema.name,
        });
    }
    let mut reader = Reader::new(bytes, schema.name);
    while let Some((number, wire)) = reader.key()? {
        let unknown = || DecodeError::UnknownField {
            message: schema.name,
            field: number,
        };
        if walk.refused.contains(&(schema.name, number)) {
            return Err(unknown());
        }
        if RETIRED.contains(&(schema.name, number)) {
            reader.skip(wire)?;
            continue;
        }
        let field = schema.field(number).ok_or_else(unknown)?;
        match field.label {
            Label::Map => {
                let entry = reader.len_field(number, wire)?;
                let (key, value) = decode_map_entry(schema.name, number, field.ty, entry, walk)?;
                let map = object
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
            Label::Repeated => {
                let value = decode_value(schema.name, number, field.ty, &mut reader, wire, walk)?;
                let list = object
                    .entry(field.json)
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(list) = list {
                    list.push(value.unwrap_or(Value::Null));
                }
            }
            Label::Inline => {
                let Ty::Message(inner) = field.ty else {
                    // The table inlines plain messages only (core's tests check it).
                    return Err(unknown());
                };
                let bytes = reader.len_field(number, wire)?;
                decode_into(inner, bytes, walk.deeper(), object)?;
            }
            Label::One => {
                let value = decode_value(schema.name, number, field.ty, &mut reader, wire, walk)?;
                match value {
                    Some(value) if field.presence.keeps_zero() || !is_zero(&value) => {
                        object.insert(field.json.into(), value);
                    }
                    // A zero scalar of an `omitempty` field is Go's "unset" (see the module
                    // docs); a zero Time is `null`, the same as absent.
                    _ => {
                        object.remove(field.json);
                    }
                }
            }
        }
    }
    Ok(())
}

/// A Go zero value: empty string, 0, false. Messages (objects) are never zero here: Go writes a
/// non-pointer struct as `{}` in JSON too.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// A `map<string, V>` entry: a message {1 key, 2 value}; either may be absent (its zero value).
fn decode_map_entry(
    message: &'static str,
    field: u32,
    value_ty: Ty,
    entry: &[u8],
    walk: Walk,
) -> Result<(String, Value), DecodeError> {
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(entry, message);
    while let Some((number, wire)) = reader.key()? {
        match number {
            1 => key = utf8(reader.len_field(field, wire)?, message, field)?,
            2 => value = decode_value(message, field, value_ty, &mut reader, wire, walk)?,
            _ => {
                return Err(DecodeError::UnknownField { message, field });
            }
        }
    }
    let value = match value {
        Some(value) => value,
        // Absent: the value type's Go zero value, as Go's JSON writes it.
        None => match value_ty {
            Ty::Int32 | Ty::Int64 | Ty::Double | Ty::IntOrString => Value::from(0),
            Ty::Bool | Ty::Fold(_, Fold::Bool) => Value::Bool(false),
            Ty::Message(_) => Value::Object(Map::new()),
            Ty::Quantity => Value::String("0".into()),
            // An empty `JSON`, an "or" message with nothing set, a zero time, a nil slice: `null`.
            Ty::Json | Ty::Fold(..) | Ty::Time | Ty::MicroTime | Ty::Wrapped(_) => Value::Null,
            Ty::String | Ty::Bytes => Value::String(String::new()),
        },
    };
    Ok((key, value))
}

/// One value of type `ty`, in a message at nesting `depth`; `None` for a Time that is the zero
/// time.
fn decode_value(
    message: &'static str,
    field: u32,
    ty: Ty,
    reader: &mut Reader<'_>,
    wire: WireType,
    walk: Walk,
) -> Result<Option<Value>, DecodeError> {
    let value = match ty {
        Ty::String => {
            let bytes = reader.len_field(field, wire)?;
            Value::String(utf8(bytes, message, field)?)
        }
        Ty::Bytes => {
            let bytes = reader.len_field(field, wire)?;
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        }
        // int32 is sign-extended to 64 bits on the wire: the low 32 bits are the value.
        Ty::Int32 => Value::from(reader.varint_field(field, wire)? as i64 as i32),
        Ty::Int64 => Value::from(reader.varint_field(field, wire)? as i64),
        Ty::Bool => Value::Bool(reader.varint_field(field, wire)? != 0),
        Ty::Message(schema) => {
            let bytes = reader.len_field(field, wire)?;
            Value::Object(decode_message(schema, bytes, walk.deeper())?)
        }
        Ty::Fold(schema, fold) => {
            let bytes = reader.len_field(field, wire)?;
            folded(fold, decode_message(schema, bytes, walk.deeper())?)
        }
        Ty::Double => {
            let value = f64::from_bits(reader.fixed64_field(field, wire)?);
            double(value).ok_or(DecodeError::NotFinite { message, field })?
        }
        Ty::Json => json(message, field, reader.len_field(field, wire)?)?,
        Ty::IntOrString => return int_or_string(reader.len_field(field, wire)?).map(Some),
        Ty::Quantity => {
            let bytes = reader.len_field(field, wire)?;
            let mut text = String::new();
            let mut inner = Reader::new(bytes, "resource.Quantity");
            while let Some((number, wire)) = inner.key()? {
                if number != 1 {
                    return Err(DecodeError::UnknownField {
                        message: "resource.Quantity",
                        field: number,
                    });
                }
                text = utf8(inner.len_field(number, wire)?, "resource.Quantity", 1)?;
            }
            Value::String(text)
        }
        Ty::Time => return time(reader.len_field(field, wire)?, Precision::Seconds),
        Ty::MicroTime => {
            return time(reader.len_field(field, wire)?, Precision::Microseconds);
        }
        Ty::Wrapped(schema) => {
            // A Go named slice: the bare list; `null` for none, as Go writes a nil slice.
            let bytes = reader.len_field(field, wire)?;
            let mut decoded = decode_message(schema, bytes, walk.deeper())?;
            decoded.remove("items").unwrap_or(Value::Null)
        }
    };
    Ok(Some(value))
}

/// A `double` as Go's JSON writes it: an integer when it has no fraction (`5`, not `5.0`), else
/// the shortest decimal; `None` for NaN and the infinities, which JSON has no form for.
fn double(value: f64) -> Option<Value> {
    // 2^53: beyond it a double's integers are no longer all exact, so they stay floats (the same
    // JSON number; Go writes them without a fraction up to 1e21, serde_json with `.0` or an exponent).
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if value.fract() == 0.0 && value.abs() <= EXACT {
        return Some(Value::from(value as i64));
    }
    serde_json::Number::from_f64(value).map(Value::Number)
}

/// A `{1 bytes raw}` message whose bytes are JSON text (apiextensions `JSON`, meta `FieldsV1`):
/// the value they hold, `null` when empty (as Go's `MarshalJSON` of an empty `JSON`).
fn json(message: &'static str, field: u32, bytes: &[u8]) -> Result<Value, DecodeError> {
    const NAME: &str = "apiextensions.v1.JSON";
    let mut raw: &[u8] = &[];
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        if number != 1 {
            return Err(DecodeError::UnknownField {
                message: NAME,
                field: number,
            });
        }
        raw = reader.len_field(number, wire)?;
    }
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| DecodeError::Json {
        message,
        field,
        reason: e.to_string(),
    })
}

/// An "or" message, decoded by its schema, in the JSON shape its Go `MarshalJSON` writes (see
/// [`Fold`]). Zero scalars are already gone from `decoded` (an `allows: false` is absent).
fn folded(fold: Fold, mut decoded: Map<String, Value>) -> Value {
    let schema = decoded.remove("schema");
    let non_empty =
        |list: Option<Value>| list.filter(|l| l.as_array().is_some_and(|a| !a.is_empty()));
    match fold {
        Fold::Array => non_empty(decoded.remove("jSONSchemas"))
            .or(schema)
            .unwrap_or(Value::Null),
        Fold::Bool => schema.unwrap_or_else(|| {
            Value::Bool(decoded.get("allows").and_then(Value::as_bool) == Some(true))
        }),
        Fold::StringArray => non_empty(decoded.remove("property"))
            .or(schema)
            .unwrap_or(Value::Null),
    }
}

/// `intstr.IntOrString {1 type, 2 intVal, 3 strVal}`: a number for type 0, a string for type 1.
fn int_or_string(bytes: &[u8]) -> Result<Value, DecodeError> {
    const NAME: &str = "intstr.IntOrString";
    let (mut kind, mut int, mut text) = (0u64, 0i32, String::new());
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        match number {
            1 => kind = reader.varint_field(number, wire)?,
            2 => int = reader.varint_field(number, wire)? as i64 as i32,
            3 => text = utf8(reader.len_field(number, wire)?, NAME, number)?,
            _ => {
                return Err(DecodeError::UnknownField {
                    message: NAME,
                    field: number,
                });
            }
        }
    }
    Ok(if kind == 1 {
        Value::String(text)
    } else {
        Value::from(int)
    })
}

/// How many fractional digits a timestamp's JSON form has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    /// `meta.v1.Time`: `2006-01-02T15:04:05Z`.
    Seconds,
    /// `meta.v1.MicroTime`: `2006-01-02T15:04:05.000000Z`.
    Microseconds,
}

/// `meta.v1.Time` or `MicroTime` `{1 seconds, 2 nanos}` as RFC 3339 in UTC, as Go's JSON writes
/// them; `None` for the zero time, which Go writes as an empty message.
fn time(bytes: &[u8], precision: Precision) -> Result<Option<Value>, DecodeError> {
    const NAME: &str = "meta.v1.Time";
    let mut seconds: i64 = 0;
    let mut nanos: u64 = 0;
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        match number {
            1 => seconds = reader.varint_field(number, wire)? as i64,
            // int32 on the wire; out-of-range values are clamped to a second's worth.
            2 => {
                nanos =
                    (reader.varint_field(number, wire)? as i64 as i32).clamp(0, 999_999_999) as u64
            }
            _ => {
                return Err(DecodeError::UnknownField {
                    message: NAME,
                    field: number,
                });
            }
        }
    }
    // Go's unmarshaller reads an empty message as the zero time and anything else as a Unix time.
    if bytes.is_empty() {
        return Ok(None);
    }
    // Times before 1970 are clamped to the epoch: no client sends them in a create.
    let whole = crate::meta::rfc3339(seconds.max(0) as u64);
    Ok(Some(Value::String(match precision {
        Precision::Seconds => whole,
        Precision::Microseconds => {
            let stem = whole.strip_suffix('Z').unwrap_or(&whole);
            format!("{stem}.{:06}Z", nanos / 1_000)
        }
    })))
}

#[cfg(test)]
mod tests;
