//! The encoder: a serde `Serializer` that writes Kubernetes' protobuf encoding straight from any
//! value that serializes to an object's JSON shape (k8s-openapi's types, a `serde_json::Value`),
//! driven by the same schema table the decoders read with.
//!
//! # Why a `Serializer`
//!
//! The values to encode already know how to present themselves field by field through serde (that
//! is how they become JSON). The encoder listens to that presentation with the schema of the
//! message in hand: each JSON member name is looked up among the message's fields, and the value
//! that follows is written as that field's wire form. No JSON text, no `serde_json::Value` tree
//! in between (a typed `Pod` goes from its fields to bytes), and the same code serves the
//! embedded server, whose objects *are* `serde_json::Value`s.
//!
//! # How data flows
//!
//! ```text
//!  Pod::serialize ── serialize_struct("Pod") ──▶ MessageSer(core.v1.Pod) ─ "metadata" ─▶ field 1 (Message)
//!                                                    │                         └─▶ key, 1 reserved length byte,
//!                                                    │                             MessageSer(meta.v1.ObjectMeta) ... end_len
//!                                                    ├─ "spec" ─▶ field 2 ...
//!                                                    └─ "apiVersion", "kind" ─▶ skipped (the envelope carries them)
//!  Volume: "name" ─▶ field 1;  "configMap" ─▶ not Volume's: found in the inline VolumeSource (field 2),
//!          written into a side buffer that becomes field 2 when the Volume ends
//! ```
//!
//! # The JSON shape of each type (the inverse of the decoders' rules, see [`super::Ty`])
//!
//! - `IntOrString`: a number or a string; `Quantity`: a string (or a number); `Time`/`MicroTime`:
//!   an RFC 3339 string (Go's zero time, `0001-01-01T00:00:00Z`, is the empty message); `Bytes`:
//!   base64 text; the JSON carriers (`RawExtension`, `FieldsV1`, apiextensions' `JSON`): any value,
//!   written as its JSON text; the "or" messages: the several shapes their Go `UnmarshalJSON`
//!   reads; a wrapped Go named slice: the bare array.
//! - `null` (a `None`) writes nothing; inside an array or as a map value it writes the type's zero
//!   (Go reads `[null]` as one zero element).
//! - A member the message does not have is an error ([`EncodeError::UnknownField`]) rather than
//!   dropped: a caller that gets one sends JSON instead, which keeps the member. `apiVersion` and
//!   `kind`, which protobuf carries outside the message, are skipped where the message has no such
//!   field.
//!
//! Fields are written in the order the value presents them, not by number; protobuf readers take
//! any order. Repeated scalars are written unpacked, as Go writes Kubernetes' (proto2) messages.

use std::fmt;

use base64::Engine;
use serde::ser::{self, Serialize, SerializeMap, SerializeSeq, SerializeStruct, Serializer};

use super::wire::{
    WireType, begin_len, end_len, put_bytes, put_fixed64_field, put_key, put_varint_field,
};
use super::{Field, Fold, Label, MAX_DEPTH, Schema, Ty};

/// Why a value could not be encoded. The caller can always send the value as JSON instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// No schema for the kind (a custom resource, an alpha or beta version).
    #[error("no protobuf schema for {api_version} {kind}")]
    UnknownKind { api_version: String, kind: String },
    /// A JSON member the message has no field for.
    #[error("{message} has no protobuf field for the member {member:?}")]
    UnknownField {
        message: &'static str,
        member: String,
    },
    /// A value whose JSON shape the field's type cannot take (an object for a string).
    #[error("{message} field {field:?} ({expected}) cannot be written from {found}")]
    Shape {
        message: &'static str,
        field: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    /// A string that is not what its type needs (a time that is not RFC 3339, bad base64).
    #[error("{message} field {field:?}: {reason}")]
    Value {
        message: &'static str,
        field: &'static str,
        reason: String,
    },
    /// Messages nested deeper than [`MAX_DEPTH`].
    #[error("protobuf messages nested deeper than {MAX_DEPTH} levels (in {message})")]
    TooDeep { message: &'static str },
    /// What the value's own `Serialize` refused.
    #[error("{0}")]
    Custom(String),
}

impl ser::Error for EncodeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        EncodeError::Custom(message.to_string())
    }
}

/// Writes `value`, which serializes to the JSON shape of a message of `schema`, as that message's
/// bytes (no envelope: a list's item, a watch event's object is enveloped separately) onto `out`.
pub fn encode_message<T: Serialize + ?Sized>(
    schema: &'static Schema,
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    value.serialize(Shape {
        out,
        site: Site {
            message: schema.name,
            field: "",
            number: 0,
            ty: Ty::Message(schema),
            depth: 0,
        },
        expect: Expect::TopMessage(schema),
    })
}

/// One place a value is written to: field `number` (JSON name `field`) of `message`, of type `ty`,
/// in a message at nesting `depth` (the top-level object's fields are at depth 1).
#[derive(Debug, Clone, Copy)]
struct Site {
    message: &'static str,
    field: &'static str,
    number: u32,
    ty: Ty,
    depth: usize,
}

impl Site {
    fn of(message: &'static Schema, field: &'static Field, depth: usize) -> Site {
        Site {
            message: message.name,
            field: field.json,
            number: field.number,
            ty: field.ty,
            depth,
        }
    }

    fn shape(&self, found: &'static str) -> EncodeError {
        EncodeError::Shape {
            message: self.message,
            field: self.field,
            expected: ty_name(self.ty),
            found,
        }
    }

    fn value_error(&self, reason: impl fmt::Display) -> EncodeError {
        EncodeError::Value {
            message: self.message,
            field: self.field,
            reason: reason.to_string(),
        }
    }

    /// The same site, one element of it: an element of a repeated "or" message's list, of a
    /// wrapped slice.
    fn element(self, number: u32, ty: Ty) -> Site {
        Site { number, ty, ..self }
    }
}

fn ty_name(ty: Ty) -> &'static str {
    match ty {
        Ty::String => "string",
        Ty::Bytes => "bytes",
        Ty::Int32 => "int32",
        Ty::Int64 => "int64",
        Ty::Bool => "bool",
        Ty::Double => "double",
        Ty::Message(_) => "message",
        Ty::IntOrString => "IntOrString",
        Ty::Quantity => "Quantity",
        Ty::Time => "Time",
        Ty::MicroTime => "MicroTime",
        Ty::Json => "JSON",
        Ty::Fold(..) => "a JSON-schema \"or\" message",
        Ty::Wrapped(_) => "a list",
    }
}

/// Writes one value of `site`; `in_list` for an array element or a map value, where `null` is
/// the type's zero rather than nothing.
fn write_value<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    site: Site,
    value: &T,
    in_list: bool,
) -> Result<(), EncodeError> {
    if let Ty::Json = site.ty {
        // Any JSON value at all: its text, inside the carrier message {1 bytes raw}.
        let text = serde_json::to_vec(value).map_err(|e| site.value_error(e))?;
        if text == b"null" && !in_list {
            return Ok(());
        }
        put_key(out, site.number, WireType::Len);
        let start = begin_len(out);
        put_bytes(out, 1, &text);
        end_len(out, start);
        return Ok(());
    }
    value.serialize(ValueSer { out, site, in_list })
}

/// Refuses every serde data model method listed, as a shape the site cannot take.
macro_rules! refuse {
    ($($method:ident($($arg:ty),*) -> $ok:ty = $found:literal;)*) => {
        $(
            fn $method(self, $(_: $arg),*) -> Result<$ok, EncodeError> {
                Err(self.site.shape($found))
            }
        )*
    };
}

/// The serde data model methods that mean nothing of their own here, written once for the
/// serializers that take them (each names the ones it does):
/// - `some`, `newtype_struct`: the wrapper is invisible, the value inside is serialized;
/// - `unit_variant`: an enum's unit variant is its name, a string (`"Always"`);
/// - `tuple`: an array; `struct`: an object, member by member as a map's entries;
/// - `compound_variants`: refuses the tuple struct and the tuple and struct variants, which no
///   object's JSON shape has.
macro_rules! transparent {
    ($($what:ident),* $(,)?) => { $( transparent!(@ $what); )* };
    (@ some) => {
        fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), EncodeError> {
            value.serialize(self)
        }
    };
    (@ newtype_struct) => {
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            value: &T,
        ) -> Result<(), EncodeError> {
            value.serialize(self)
        }
    };
    (@ unit_variant) => {
        fn serialize_unit_variant(
            self,
            _: &'static str,
            _: u32,
            variant: &'static str,
        ) -> Result<(), EncodeError> {
            self.serialize_str(variant)
        }
    };
    (@ tuple) => {
        fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, EncodeError> {
            self.serialize_seq(Some(len))
        }
    };
    (@ struct) => {
        fn serialize_struct(
            self,
            _: &'static str,
            len: usize,
        ) -> Result<Self::SerializeStruct, EncodeError> {
            self.serialize_map(Some(len))
        }
    };
    (@ compound_variants) => {
        refuse! {
            serialize_tuple_struct(&'static str, usize) -> ser::Impossible<(), EncodeError> = "a tuple struct";
            serialize_tuple_variant(&'static str, u32, &'static str, usize) -> ser::Impossible<(), EncodeError> = "a tuple variant";
            serialize_struct_variant(&'static str, u32, &'static str, usize) -> ser::Impossible<(), EncodeError> = "a struct variant";
        }
    };
}

/// `SerializeStruct` for an object writer with an inherent `member(key, value)` and a
/// `SerializeMap::end`: a struct's fields are its members, its end the object's end. (A struct's
/// field names are already strings, so they go to `member` without the map path's key capture.)
macro_rules! struct_as_members {
    ($ty:ty) => {
        impl SerializeStruct for $ty {
            type Ok = ();
            type Error = EncodeError;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), EncodeError> {
                self.member(key, value)
            }

            fn end(self) -> Result<(), EncodeError> {
                SerializeMap::end(self)
            }
        }
    };
}

/// Serde's integer methods that fit an `i128` losslessly, each handed to `ValueSer::integer`.
macro_rules! widen_integers {
    ($($method:ident($int:ty)),* $(,)?) => {
        $(
            fn $method(self, v: $int) -> Result<(), EncodeError> {
                self.integer(i128::from(v))
            }
        )*
    };
}

// ---- one value of a field ----

/// Writes one occurrence of a field: its key and its value, by the field's type.
struct ValueSer<'o> {
    out: &'o mut Vec<u8>,
    site: Site,
    in_list: bool,
}

impl<'o> ValueSer<'o> {
    fn integer(self, value: i128) -> Result<(), EncodeError> {
        let Site { number, ty, .. } = self.site;
        let out = self.out;
        match ty {
            Ty::Int32 => {
                let value =
                    i32::try_from(value).map_err(|_| self.site.value_error("out of range"))?;
                // Negative int32s are sign-extended to 64 bits on the wire, as Go writes them.
                put_varint_field(out, number, i64::from(value) as u64);
            }
            Ty::Int64 => {
                let value =
                    i64::try_from(value).map_err(|_| self.site.value_error("out of range"))?;
                put_varint_field(out, number, value as u64);
            }
            Ty::Double => put_fixed64_field(out, number, (value as f64).to_bits()),
            Ty::IntOrString => {
                let value =
                    i32::try_from(value).map_err(|_| self.site.value_error("out of range"))?;
                put_key(out, number, WireType::Len);
                let start = begin_len(out);
                put_varint_field(out, 1, 0);
                put_varint_field(out, 2, i64::from(value) as u64);
                end_len(out, start);
            }
            Ty::Quantity => quantity(out, number, &value.to_string()),
            _ => return Err(self.site.shape("a number")),
        }
        Ok(())
    }

    /// Opens a message value of schema `schema` (or, for an "or" message, the message around it).
    fn message(self, schema: &'static Schema) -> Result<MessageSer<'o>, EncodeError> {
        let depth = self.site.depth + 1;
        if depth > MAX_DEPTH {
            return Err(EncodeError::TooDeep {
                message: schema.name,
            });
        }
        put_key(self.out, self.site.number, WireType::Len);
        let start = begin_len(self.out);
        Ok(MessageSer::new(self.out, schema, depth, Some(start)))
    }

    /// The schema of field `number` of an "or" or wrapper message, and its site.
    fn inner(&self, schema: &'static Schema, number: u32) -> Result<&'static Field, EncodeError> {
        schema
            .field(number)
            .ok_or_else(|| self.site.shape("a value"))
    }
}

impl<'o> Serializer for ValueSer<'o> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = SeqSer<'o>;
    type SerializeTuple = SeqSer<'o>;
    type SerializeTupleStruct = ser::Impossible<(), EncodeError>;
    type SerializeTupleVariant = ser::Impossible<(), EncodeError>;
    type SerializeMap = MessageSer<'o>;
    type SerializeStruct = MessageSer<'o>;
    type SerializeStructVariant = ser::Impossible<(), EncodeError>;

    fn serialize_bool(self, value: bool) -> Result<(), EncodeError> {
        match self.site.ty {
            Ty::Bool => put_varint_field(self.out, self.site.number, u64::from(value)),
            Ty::Fold(_, Fold::Bool) => {
                put_key(self.out, self.site.number, WireType::Len);
                let start = begin_len(self.out);
                put_varint_field(self.out, 1, u64::from(value));
                end_len(self.out, start);
            }
            _ => return Err(self.site.shape("a boolean")),
        }
        Ok(())
    }

    widen_integers! {
        serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64),
        serialize_i128(i128), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64),
    }
    fn serialize_u128(self, v: u128) -> Result<(), EncodeError> {
        let value = i128::try_from(v).map_err(|_| self.site.value_error("out of range"))?;
        self.integer(value)
    }

    fn serialize_f32(self, v: f32) -> Result<(), EncodeError> {
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(self, value: f64) -> Result<(), EncodeError> {
        if !value.is_finite() {
            return Err(self.site.value_error("not a finite number"));
        }
        match self.site.ty {
            Ty::Double => put_fixed64_field(self.out, self.site.number, value.to_bits()),
            Ty::Quantity => quantity(self.out, self.site.number, &value.to_string()),
            // A whole number that came as a float (JSON `3.0`): Go's JSON reads it into an int.
            Ty::Int32 | Ty::Int64 | Ty::IntOrString
                if value.fract() == 0.0 && value.abs() < 9.3e18 =>
            {
                return self.integer(value as i128);
            }
            _ => return Err(self.site.shape("a number")),
        }
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.serialize_str(v.encode_utf8(&mut [0u8; 4]))
    }

    fn serialize_str(self, text: &str) -> Result<(), EncodeError> {
        let Site { number, ty, .. } = self.site;
        match ty {
            Ty::String => put_bytes(self.out, number, text.as_bytes()),
            Ty::Bytes => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|e| self.site.value_error(format_args!("not base64: {e}")))?;
                put_bytes(self.out, number, &bytes);
            }
            Ty::Quantity => quantity(self.out, number, text),
            Ty::IntOrString => {
                put_key(self.out, number, WireType::Len);
                let start = begin_len(self.out);
                put_varint_field(self.out, 1, 1);
                put_bytes(self.out, 3, text.as_bytes());
                end_len(self.out, start);
            }
            Ty::Time | Ty::MicroTime => {
                let instant: k8s_openapi::jiff::Timestamp = text.parse().map_err(|e| {
                    self.site
                        .value_error(format_args!("not an RFC 3339 time: {e}"))
                })?;
                put_key(self.out, number, WireType::Len);
                let start = begin_len(self.out);
                let (seconds, nanos) = (instant.as_second(), instant.subsec_nanosecond());
                // Go's zero time (year 1) is the empty message; any other time writes its
                // seconds even when 0 (the epoch), so that the message is not empty.
                if (seconds, nanos) != (GO_ZERO_TIME, 0) {
                    put_varint_field(self.out, 1, seconds as u64);
                    if nanos != 0 {
                        put_varint_field(self.out, 2, i64::from(nanos) as u64);
                    }
                }
                end_len(self.out, start);
            }
            _ => return Err(self.site.shape("a string")),
        }
        Ok(())
    }

    fn serialize_bytes(self, bytes: &[u8]) -> Result<(), EncodeError> {
        match self.site.ty {
            Ty::Bytes => put_bytes(self.out, self.site.number, bytes),
            _ => return Err(self.site.shape("bytes")),
        }
        Ok(())
    }

    fn serialize_none(self) -> Result<(), EncodeError> {
        self.serialize_unit()
    }

    fn serialize_unit(self) -> Result<(), EncodeError> {
        if !self.in_list {
            return Ok(());
        }
        // An array element or map value that is `null`: the type's zero, as Go reads it.
        let Site { number, ty, .. } = self.site;
        match ty {
            Ty::Int32 | Ty::Int64 | Ty::Bool => put_varint_field(self.out, number, 0),
            Ty::Double => put_fixed64_field(self.out, number, 0),
            _ => put_bytes(self.out, number, &[]),
        }
        Ok(())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), EncodeError> {
        self.serialize_unit()
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        value.serialize(self)
    }

    transparent!(
        some,
        newtype_struct,
        unit_variant,
        tuple,
        struct,
        compound_variants
    );

    fn serialize_seq(self, _: Option<usize>) -> Result<SeqSer<'o>, EncodeError> {
        let (schema, number) = match self.site.ty {
            // `JSONSchemaPropsOrArray`: a list of schemas is field 2; `...OrStringArray`: a
            // list of property names is field 2.
            Ty::Fold(schema, Fold::Array | Fold::StringArray) => (schema, 2),
            // A Go named slice: its elements are the wrapper's field 1.
            Ty::Wrapped(schema) => (schema, 1),
            _ => return Err(self.site.shape("an array")),
        };
        let element = self.inner(schema, number)?;
        let depth = self.site.depth + 1;
        put_key(self.out, self.site.number, WireType::Len);
        let start = begin_len(self.out);
        Ok(SeqSer {
            out: self.out,
            site: Site {
                message: schema.name,
                depth,
                ..self.site.element(number, element.ty)
            },
            close: Some(start),
        })
    }

    fn serialize_map(self, _: Option<usize>) -> Result<MessageSer<'o>, EncodeError> {
        match self.site.ty {
            Ty::Message(schema) => self.message(schema),
            // An "or" message given a schema: the schema is field 1 of the `...OrArray` and
            // `...OrStringArray` messages; `...OrBool` holds it in field 2 with `allows: true`,
            // as Go's `UnmarshalJSON` sets it.
            Ty::Fold(schema, fold) => {
                let number = if fold == Fold::Bool { 2 } else { 1 };
                let Ty::Message(inner) = self.inner(schema, number)?.ty else {
                    return Err(self.site.shape("an object"));
                };
                let site = self.site;
                let outer = self.message(schema)?;
                if fold == Fold::Bool {
                    put_varint_field(outer.out, 1, 1);
                }
                let depth = outer.depth;
                outer.open_inner(Site {
                    message: schema.name,
                    number,
                    ty: Ty::Message(inner),
                    depth,
                    ..site
                })
            }
            _ => Err(self.site.shape("an object")),
        }
    }
}

/// `0001-01-01T00:00:00Z`, Go's zero `time.Time`, in seconds from 1970.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// `resource.Quantity {1 string}`.
fn quantity(out: &mut Vec<u8>, number: u32, text: &str) {
    put_key(out, number, WireType::Len);
    let start = begin_len(out);
    put_bytes(out, 1, text.as_bytes());
    end_len(out, start);
}

// ---- arrays ----

/// The elements of a repeated field (each one occurrence of the field), or of the list inside an
/// "or" message or a wrapped slice (then `close` is that message's length to write at the end).
struct SeqSer<'o> {
    out: &'o mut Vec<u8>,
    site: Site,
    close: Option<usize>,
}

impl SerializeSeq for SeqSer<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        write_value(self.out, self.site, value, true)
    }

    fn end(self) -> Result<(), EncodeError> {
        if let Some(start) = self.close {
            end_len(self.out, start);
        }
        Ok(())
    }
}

impl ser::SerializeTuple for SeqSer<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<(), EncodeError> {
        SerializeSeq::end(self)
    }
}

// ---- a field's value by its label: one, a list, a map ----

/// What a [`Shape`] accepts.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// The top-level object (or a list's item): a message of this schema, no key before it.
    TopMessage(&'static Schema),
    /// A repeated field: an array, each element an occurrence.
    List,
    /// A `map<string, V>` field: an object, each member an entry.
    Map,
}

/// A value whose shape (array, object) decides how it is written, before any element is.
struct Shape<'o> {
    out: &'o mut Vec<u8>,
    site: Site,
    expect: Expect,
}

impl<'o> Serializer for Shape<'o> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = SeqSer<'o>;
    type SerializeTuple = SeqSer<'o>;
    type SerializeTupleStruct = ser::Impossible<(), EncodeError>;
    type SerializeTupleVariant = ser::Impossible<(), EncodeError>;
    type SerializeMap = MapOrMessage<'o>;
    type SerializeStruct = MapOrMessage<'o>;
    type SerializeStructVariant = ser::Impossible<(), EncodeError>;

    fn serialize_none(self) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit(self) -> Result<(), EncodeError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), EncodeError> {
        Ok(())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<SeqSer<'o>, EncodeError> {
        match self.expect {
            Expect::List => Ok(SeqSer {
                out: self.out,
                site: self.site,
                close: None,
            }),
            _ => Err(self.site.shape("an array")),
        }
    }

    fn serialize_map(self, _: Option<usize>) -> Result<MapOrMessage<'o>, EncodeError> {
        match self.expect {
            Expect::Map => Ok(MapOrMessage::Map(MapSer {
                out: self.out,
                site: self.site,
                entry: None,
            })),
            Expect::TopMessage(schema) => Ok(MapOrMessage::Message(MessageSer::new(
                self.out, schema, 1, None,
            ))),
            Expect::List => Err(self.site.shape("an object")),
        }
    }

    transparent!(some, newtype_struct, tuple, struct, compound_variants);

    refuse! {
        serialize_bool(bool) -> () = "a boolean";
        serialize_i8(i8) -> () = "a number";
        serialize_i16(i16) -> () = "a number";
        serialize_i32(i32) -> () = "a number";
        serialize_i64(i64) -> () = "a number";
        serialize_u8(u8) -> () = "a number";
        serialize_u16(u16) -> () = "a number";
        serialize_u32(u32) -> () = "a number";
        serialize_u64(u64) -> () = "a number";
        serialize_f32(f32) -> () = "a number";
        serialize_f64(f64) -> () = "a number";
        serialize_char(char) -> () = "a string";
        serialize_str(&str) -> () = "a string";
        serialize_bytes(&[u8]) -> () = "bytes";
        serialize_unit_variant(&'static str, u32, &'static str) -> () = "a string";
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), EncodeError> {
        Err(self.site.shape("an enum"))
    }
}

/// An object: a map field's entries, or the top-level message.
enum MapOrMessage<'o> {
    Map(MapSer<'o>),
    Message(MessageSer<'o>),
}

impl SerializeMap for MapOrMessage<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), EncodeError> {
        match self {
            MapOrMessage::Map(map) => map.serialize_key(key),
            MapOrMessage::Message(message) => message.serialize_key(key),
        }
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        match self {
            MapOrMessage::Map(map) => map.serialize_value(value),
            MapOrMessage::Message(message) => message.serialize_value(value),
        }
    }

    fn end(self) -> Result<(), EncodeError> {
        match self {
            MapOrMessage::Map(map) => SerializeMap::end(map),
            MapOrMessage::Message(message) => SerializeMap::end(message),
        }
    }
}

impl MapOrMessage<'_> {
    /// One member named by a string: a map's entry, or a message's field.
    fn member<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), EncodeError> {
        match self {
            MapOrMessage::Map(map) => map.serialize_entry(key, value),
            MapOrMessage::Message(message) => message.member(key, value),
        }
    }
}

struct_as_members!(MapOrMessage<'_>);

/// The entries of a `map<string, V>` field: each member one occurrence of the field, a message
/// `{1 key, 2 value}`. `entry` is the open entry's start between its key and its value.
struct MapSer<'o> {
    out: &'o mut Vec<u8>,
    site: Site,
    entry: Option<usize>,
}

impl SerializeMap for MapSer<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), EncodeError> {
        put_key(self.out, self.site.number, WireType::Len);
        let start = begin_len(self.out);
        let mut text = String::new();
        key.serialize(KeySer {
            text: &mut text,
            site: self.site,
        })?;
        put_bytes(self.out, 1, text.as_bytes());
        self.entry = Some(start);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        let Some(start) = self.entry.take() else {
            return Err(EncodeError::Custom("a map value without its key".into()));
        };
        let site = Site {
            number: 2,
            depth: self.site.depth,
            ..self.site
        };
        write_value(self.out, site, value, true)?;
        end_len(self.out, start);
        Ok(())
    }

    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

// ---- messages ----

/// An inline (embedded Go struct) field whose members have begun to arrive: its bytes so far,
/// and its own inline fields. Written as one occurrence of field `number` when the message ends.
#[derive(Debug)]
struct Pending {
    number: u32,
    schema: &'static Schema,
    bytes: Vec<u8>,
    inner: Vec<Pending>,
}

/// Writes a message's members as its fields. Invariant: `opens` holds the starts of the
/// length-delimited values this message (and an "or" message around it) is written in, outermost
/// first; `end` closes them innermost first.
struct MessageSer<'o> {
    out: &'o mut Vec<u8>,
    schema: &'static Schema,
    depth: usize,
    opens: [usize; 2],
    open: usize,
    inline: Vec<Pending>,
    /// The member name between `serialize_key` and `serialize_value`.
    key: String,
}

impl<'o> MessageSer<'o> {
    fn new(
        out: &'o mut Vec<u8>,
        schema: &'static Schema,
        depth: usize,
        start: Option<usize>,
    ) -> MessageSer<'o> {
        let mut opens = [0; 2];
        let open = match start {
            Some(start) => {
                opens[0] = start;
                1
            }
            None => 0,
        };
        MessageSer {
            out,
            schema,
            depth,
            opens,
            open,
            inline: Vec::new(),
            key: String::new(),
        }
    }

    /// Turns this (an "or" message) into the writer of the message it holds at `site`.
    fn open_inner(mut self, site: Site) -> Result<MessageSer<'o>, EncodeError> {
        let Ty::Message(inner) = site.ty else {
            return Err(site.shape("an object"));
        };
        let depth = self.depth + 1;
        if depth > MAX_DEPTH || self.open >= self.opens.len() {
            return Err(EncodeError::TooDeep {
                message: inner.name,
            });
        }
        put_key(self.out, site.number, WireType::Len);
        self.opens[self.open] = begin_len(self.out);
        self.open += 1;
        self.schema = inner;
        self.depth = depth;
        Ok(self)
    }

    fn member<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), EncodeError> {
        let Some((out, schema, field)) = route(self.schema, self.out, &mut self.inline, key) else {
            if key == "apiVersion" || key == "kind" {
                return Ok(());
            }
            return Err(EncodeError::UnknownField {
                message: self.schema.name,
                member: key.to_string(),
            });
        };
        let site = Site::of(schema, field, self.depth);
        match field.label {
            Label::One | Label::Inline => write_value(out, site, value, false),
            Label::Repeated => value.serialize(Shape {
                out,
                site,
                expect: Expect::List,
            }),
            Label::Map => value.serialize(Shape {
                out,
                site,
                expect: Expect::Map,
            }),
        }
    }

    fn finish(self) {
        flush(self.out, self.inline);
        for start in self.opens[..self.open].iter().rev() {
            end_len(self.out, *start);
        }
    }
}

/// Where member `key` of a message of `schema` goes: the buffer to write to, the message that
/// owns the field, and the field. A member that is not the message's own may belong to one of its
/// inline fields (at any depth): its pending buffer is made on first use.
fn route<'a>(
    schema: &'static Schema,
    out: &'a mut Vec<u8>,
    inline: &'a mut Vec<Pending>,
    key: &str,
) -> Option<(&'a mut Vec<u8>, &'static Schema, &'static Field)> {
    if let Some(field) = schema
        .fields
        .iter()
        .find(|f| f.label != Label::Inline && f.json == key)
    {
        return Some((out, schema, field));
    }
    let (number, inner) = schema.fields.iter().find_map(|f| match (f.label, f.ty) {
        (Label::Inline, Ty::Message(inner)) if has_member(inner, key, 0) => Some((f.number, inner)),
        _ => None,
    })?;
    let at = match inline.iter().position(|p| p.number == number) {
        Some(at) => at,
        None => {
            inline.push(Pending {
                number,
                schema: inner,
                bytes: Vec::new(),
                inner: Vec::new(),
            });
            inline.len() - 1
        }
    };
    let pending = inline.get_mut(at)?;
    route(pending.schema, &mut pending.bytes, &mut pending.inner, key)
}

/// Whether a message of `schema` or one of its inline fields has a field named `key`. Inline
/// fields nest two deep in Kubernetes 1.37; the bound keeps a malformed table from looping.
fn has_member(schema: &'static Schema, key: &str, depth: usize) -> bool {
    depth < 8
        && schema.fields.iter().any(|f| match (f.label, f.ty) {
            (Label::Inline, Ty::Message(inner)) => has_member(inner, key, depth + 1),
            _ => f.json == key,
        })
}

/// Writes the inline fields gathered for a message, each one occurrence, innermost first.
fn flush(out: &mut Vec<u8>, inline: Vec<Pending>) {
    for mut pending in inline {
        flush(&mut pending.bytes, pending.inner);
        put_bytes(out, pending.number, &pending.bytes);
    }
}

impl SerializeMap for MessageSer<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), EncodeError> {
        self.key.clear();
        let site = Site {
            message: self.schema.name,
            field: "",
            number: 0,
            ty: Ty::String,
            depth: self.depth,
        };
        key.serialize(KeySer {
            text: &mut self.key,
            site,
        })
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        let key = std::mem::take(&mut self.key);
        let outcome = self.member(&key, value);
        self.key = key;
        outcome
    }

    fn end(self) -> Result<(), EncodeError> {
        self.finish();
        Ok(())
    }
}

struct_as_members!(MessageSer<'_>);

// ---- member names ----

/// Captures a member name (or a map key), which must be a string.
struct KeySer<'k> {
    text: &'k mut String,
    site: Site,
}

impl Serializer for KeySer<'_> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = ser::Impossible<(), EncodeError>;
    type SerializeTuple = ser::Impossible<(), EncodeError>;
    type SerializeTupleStruct = ser::Impossible<(), EncodeError>;
    type SerializeTupleVariant = ser::Impossible<(), EncodeError>;
    type SerializeMap = ser::Impossible<(), EncodeError>;
    type SerializeStruct = ser::Impossible<(), EncodeError>;
    type SerializeStructVariant = ser::Impossible<(), EncodeError>;

    fn serialize_str(self, text: &str) -> Result<(), EncodeError> {
        self.text.push_str(text);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.text.push(v);
        Ok(())
    }
    transparent!(some, newtype_struct, unit_variant);

    refuse! {
        serialize_bool(bool) -> () = "a boolean key";
        serialize_i8(i8) -> () = "a number key";
        serialize_i16(i16) -> () = "a number key";
        serialize_i32(i32) -> () = "a number key";
        serialize_i64(i64) -> () = "a number key";
        serialize_u8(u8) -> () = "a number key";
        serialize_u16(u16) -> () = "a number key";
        serialize_u32(u32) -> () = "a number key";
        serialize_u64(u64) -> () = "a number key";
        serialize_f32(f32) -> () = "a number key";
        serialize_f64(f64) -> () = "a number key";
        serialize_bytes(&[u8]) -> () = "a bytes key";
        serialize_none() -> () = "a null key";
        serialize_unit() -> () = "a null key";
        serialize_unit_struct(&'static str) -> () = "a null key";
        serialize_seq(Option<usize>) -> ser::Impossible<(), EncodeError> = "an array key";
        serialize_tuple(usize) -> ser::Impossible<(), EncodeError> = "an array key";
        serialize_tuple_struct(&'static str, usize) -> ser::Impossible<(), EncodeError> = "an array key";
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> ser::Impossible<(), EncodeError> = "an array key";
        serialize_map(Option<usize>) -> ser::Impossible<(), EncodeError> = "an object key";
        serialize_struct(&'static str, usize) -> ser::Impossible<(), EncodeError> = "an object key";
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> ser::Impossible<(), EncodeError> = "an object key";
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), EncodeError> {
        Err(self.site.shape("an enum key"))
    }
}
