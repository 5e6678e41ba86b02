//! The schema of Kubernetes' protobuf encoding for every built-in kind of Kubernetes 1.37: per
//! message, each field's number, JSON name, type, wire shape and presence rule; the wire format
//! both ends share ([`wire`]: reading and writing keys, varints, lengths); and the one encoder
//! ([`encode`], a serde `Serializer` driven by the table) both ends write with. No I/O and no
//! decoder into a target: each decoder (the embedded server's, `ferrokube-apiserver`'s `protobuf` module, into
//! JSON values; the client's, `ferrokube-client`'s `protobuf` module, a serde `Deserializer`
//! straight into k8s-openapi's types) drives itself with it from the bytes to its own target.
//!
//! # Why it exists, and why here
//!
//! Go clients send every built-in kind as `application/vnd.kubernetes.protobuf`. The bytes of a
//! message carry only field numbers and wire types; what a field is called in JSON, whether a zero
//! value in it means "unset", and which messages are really a number-or-string or a timestamp all
//! come from Kubernetes' `generated.proto` files and Go types. This module is that knowledge,
//! generated (`generated.rs`, by `scripts/protobuf-schema.sh`) rather than written by hand, so it
//! covers every kind and cannot silently drift. It lives in the core crate because both ends of
//! the wire need it and the client may not depend on the server.
//!
//! # How data flows
//!
//! ```text
//!  k8s.io/api, apimachinery,        scripts/protobuf-schema.sh         core::protobuf (this module)
//!  apiextensions-apiserver,   ───►  (Go: .proto for numbers/types, ───► generated.rs: KINDS + one
//!  kube-aggregator v0.37.2          reflection for JSON/presence)      static Schema per message
//!                                                                               │
//!  body: "k8s\0" + runtime.Unknown {typeMeta, raw} ── top_level(apiVersion, kind) ─┘
//!        a decoder walks raw's fields, finds each by number in the Schema (Schema::field),
//!        and follows Ty::Message into nested Schemas
//! ```
//!
//! # Reading a field
//!
//! - [`Label`]: one value, a list (`repeated`), a `map<string, V>` (entries {1 key, 2 value}), or an
//!   embedded Go struct whose fields JSON inlines into the parent (`Volume`'s `VolumeSource`).
//! - [`Ty`]: the value's type; besides scalars and messages, the messages whose JSON form is not
//!   the JSON of their fields (each has a `MarshalJSON` in Go): `IntOrString`, `Quantity`, `Time`,
//!   `MicroTime`, the JSON-text carriers (`RawExtension`, `FieldsV1`, apiextensions' `JSON`), the
//!   CRD schema's "or" messages ([`Fold`]), and Go named slices wrapped in a message
//!   (`ExtraValue`: [`Ty::Wrapped`]).
//! - [`Presence`]: what Go's JSON does with the field's zero value. Go's marshaller writes every
//!   non-pointer field, zero or not, so a decoder that wants Go's JSON form drops a zero scalar
//!   exactly when the field is [`Presence::OmitEmpty`].

mod encode;
mod generated;
pub mod wire;

pub use encode::{EncodeError, encode_message};
pub use generated::KINDS;

/// The media type of Kubernetes' protobuf encoding.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes that start every enveloped object.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// How deeply messages may nest, the top-level object being depth 1. Only a CRD's
/// `JSONSchemaProps` recurses; a CRD's own path to its schema takes five levels, and each level
/// of a schema one more (its JSON form two: `properties` then the property). 64 leaves room for
/// any schema a real CRD has while the JSON form stays within serde_json's 128 levels. Every
/// decoder and the encoder refuse deeper input rather than recurse without bound.
pub const MAX_DEPTH: usize = 64;

/// Whether a `Content-Type` names the protobuf encoding (parameters such as `;stream=watch`
/// ignored).
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(CONTENT_TYPE))
}

/// Encodes `value`, which serializes to the JSON shape of an `api_version` `kind` (a k8s-openapi
/// object, a `serde_json::Value`), as a whole protobuf body: `k8s\0` and the `runtime.Unknown`
/// envelope `{1 typeMeta {1 apiVersion, 2 kind}, 2 raw}` around the object's message. What a
/// client sends as a create's or an update's body, and a server answers a get with.
///
/// An [`EncodeError`] (a kind without a schema, a member the message has no field for) means
/// the value has no faithful protobuf form here: send it as JSON.
pub fn encode<T: serde::Serialize + ?Sized>(
    value: &T,
    api_version: &str,
    kind: &str,
) -> Result<Vec<u8>, EncodeError> {
    let schema = top_level(api_version, kind).ok_or_else(|| EncodeError::UnknownKind {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    })?;
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(MAGIC);
    wire::put_key(&mut out, 1, wire::WireType::Len);
    let type_meta = wire::begin_len(&mut out);
    wire::put_bytes(&mut out, 1, api_version.as_bytes());
    wire::put_bytes(&mut out, 2, kind.as_bytes());
    wire::end_len(&mut out, type_meta);
    wire::put_key(&mut out, 2, wire::WireType::Len);
    let raw = wire::begin_len(&mut out);
    encode_message(schema, value, &mut out)?;
    wire::end_len(&mut out, raw);
    Ok(out)
}

/// A field's value type.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    String,
    /// Base64 text in JSON.
    Bytes,
    Int32,
    Int64,
    Bool,
    /// `double` (wire type 1, eight little-endian bytes).
    Double,
    Message(&'static Schema),
    /// `intstr.IntOrString {1 type, 2 intVal, 3 strVal}`: a JSON number (type 0) or string (type 1).
    IntOrString,
    /// `resource.Quantity {1 string}`: a JSON string.
    Quantity,
    /// `meta.v1.Time {1 seconds, 2 nanos}`: RFC 3339 with whole seconds; the zero time (an empty
    /// message) is JSON `null`.
    Time,
    /// `meta.v1.MicroTime {1 seconds, 2 nanos}`: RFC 3339 with six fractional digits.
    MicroTime,
    /// A message `{1 bytes raw}` whose bytes are JSON text (`runtime.RawExtension`, `meta.v1.FieldsV1`,
    /// apiextensions' `JSON`): the JSON value itself; empty bytes are `null`.
    Json,
    /// A message Go writes in JSON as one of several shapes: decoded by its schema, then folded.
    Fold(&'static Schema, Fold),
    /// A Go named slice (`type ExtraValue []string`) that protobuf wraps in a message whose only
    /// field is `repeated items = 1`: the JSON form is the bare array.
    Wrapped(&'static Schema),
}

/// The JSON shapes of apiextensions' "or" messages, after their Go `MarshalJSON` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// `JSONSchemaPropsOrArray {1 schema, 2 jSONSchemas}`: the array when it is not empty, else
    /// the schema (`null` without one).
    Array,
    /// `JSONSchemaPropsOrBool {1 allows, 2 schema}`: the schema when there is one, else `allows`.
    Bool,
    /// `JSONSchemaPropsOrStringArray {1 schema, 2 property}`: the strings when there are any, else
    /// the schema (`null` without one).
    StringArray,
}

/// How many values a field holds on the wire and where they go in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// One value under the field's JSON name; a repeated occurrence replaces the last.
    One,
    /// Each occurrence one element of a JSON array.
    Repeated,
    /// `map<string, V>`: each occurrence an entry message {1 key, 2 value}, V being the field's
    /// [`Ty`]; a JSON object.
    Map,
    /// An embedded Go struct without a JSON name (`json:""` or `json:",inline"`): a message on the
    /// wire whose fields JSON writes into the parent object. Its JSON name is empty.
    Inline,
}

/// What Go's `encoding/json` does with the field's zero value (`""`, `0`, `false`), which decides
/// whether a zero on the wire is a value or Go's "unset".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// A Go pointer: written on the wire only when set, so a zero there is a value a client chose.
    Pointer,
    /// A non-pointer field tagged `omitempty`: Go writes its zero on the wire, JSON leaves it out.
    OmitEmpty,
    /// A non-pointer field without `omitempty` (or a struct, which `omitempty` never omits): JSON
    /// writes it, zero or not.
    Always,
}

impl Presence {
    /// Whether a zero value read from the wire belongs in the JSON form.
    pub const fn keeps_zero(self) -> bool {
        !matches!(self, Presence::OmitEmpty)
    }
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    /// The protobuf field number (1 to 2^29 - 1).
    pub number: u32,
    /// The JSON name; empty for [`Label::Inline`].
    pub json: &'static str,
    /// The value type (a map's value type for [`Label::Map`]).
    pub ty: Ty,
    pub label: Label,
    pub presence: Presence,
}

impl Field {
    pub const fn new(
        number: u32,
        json: &'static str,
        ty: Ty,
        label: Label,
        presence: Presence,
    ) -> Field {
        Field {
            number,
            json,
            ty,
            label,
            presence,
        }
    }
}

/// One message: its name for errors (`core.v1.PodSpec`: the proto package's last two parts and the
/// message) and its fields.
#[derive(Debug)]
pub struct Schema {
    pub name: &'static str,
    /// Sorted by number, no number twice (the generator writes them so; [`Schema::field`]
    /// searches by halves).
    pub fields: &'static [Field],
}

impl Schema {
    pub const fn new(name: &'static str, fields: &'static [Field]) -> Schema {
        Schema { name, fields }
    }

    /// The field with this number, if the message has one.
    pub fn field(&self, number: u32) -> Option<&'static Field> {
        let fields: &'static [Field] = self.fields;
        fields
            .binary_search_by_key(&number, |f| f.number)
            .ok()
            .and_then(|at| fields.get(at))
    }
}

/// A top-level kind: what a `runtime.Unknown` envelope's `typeMeta` names, and its message.
#[derive(Debug)]
pub struct TopLevel {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub schema: &'static Schema,
}

impl TopLevel {
    pub const fn new(
        api_version: &'static str,
        kind: &'static str,
        schema: &'static Schema,
    ) -> TopLevel {
        TopLevel {
            api_version,
            kind,
            schema,
        }
    }
}

/// The message of a top-level kind, by its envelope's `apiVersion` and `kind`: every kind of every
/// GA group version of Kubernetes 1.37 (lists and the options kinds included), of
/// apiextensions.k8s.io/v1, apiregistration.k8s.io/v1 and meta.k8s.io/v1.
///
/// `DeleteOptions` is found under any apiVersion, as Go registers it in every group version: a
/// typed client deleting a custom resource sends it under the resource's own group version, which
/// no built-in table can list.
pub fn top_level(api_version: &str, kind: &str) -> Option<&'static Schema> {
    let found = KINDS
        .binary_search_by(|k| (k.api_version, k.kind).cmp(&(api_version, kind)))
        .ok()
        .and_then(|at| KINDS.get(at))
        .map(|k| k.schema);
    match found {
        Some(schema) => Some(schema),
        None if kind == "DeleteOptions" => Some(&generated::META_V1_DELETE_OPTIONS),
        None => None,
    }
}

#[cfg(test)]
mod tests;
