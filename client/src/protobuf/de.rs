//! The serde `Deserializer` over protobuf bytes, driven by core's schema table.
//!
//! Why a `Deserializer` and not a decoder into some tree: the targets (k8s-openapi's types,
//! `Compact<K>`, a user's derived struct) already know how to build themselves from the JSON
//! *shape* of an object through serde. So the bytes are presented in that shape, one call at a
//! time, and the target builds itself directly: no `serde_json::Value`, no JSON text, no second
//! pass. Strings are handed out borrowed from the body.
//!
//! How a message is presented (see [`MessageAccess`]):
//!
//! ```text
//!  bytes of PodSpec ──▶ key 1 (volumes, repeated) ──▶ "volumes": seq of every field-1 occurrence
//!                       key 2 (containers)        ──▶ "containers": seq …
//!                       key 4 (restartPolicy "")  ──▶ skipped: omitempty and zero (Go's JSON omits it)
//!                       key 9 (nodeSelector, map) ──▶ "nodeSelector": map of entries {1 key, 2 value}
//!  Volume key 2 (VolumeSource, inline) ──▶ its fields become keys of the Volume itself
//! ```
//!
//! The invariants the JSON-decoded object and this one share (the tests check equality on every
//! top-level kind's vectors and on real servers' objects):
//!
//! - a key appears once per message: a repeated or map field is gathered from all its
//!   occurrences when its first one is met (Go writes them together; the gathering scans on to
//!   the end of the message, so interleaved ones are found too), and later occurrences are
//!   skipped; a singular field that occurs twice is an error ([`Error::Repeated`]) rather than
//!   protobuf's "last wins", which Kubernetes never relies on;
//! - a zero scalar of an `omitempty` field is not presented (Go's JSON leaves it out); a zero
//!   `Time` is not presented either (it is JSON `null`);
//! - a field number the table does not know is skipped (a newer server's field), as Go does.

use std::fmt;

use base64::Engine;
use ferrokube_core::protobuf::{Field, Fold, Label, Schema, Ty};
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

use super::Error;
use ferrokube_core::protobuf::wire::{Raw, Reader, WireType};

/// How deeply messages may nest: core's bound, the same for every decoder and the encoder.
pub use ferrokube_core::protobuf::MAX_DEPTH;

/// The error for a message nested deeper than [`MAX_DEPTH`].
fn too_deep(message: &'static str) -> Error {
    Error::TooDeep {
        message,
        limit: MAX_DEPTH,
    }
}

/// How many inlined Go structs may nest inside one message (`Volume` ─ `VolumeSource`): one in
/// Kubernetes 1.37; a few more are allowed.
const MAX_INLINE: usize = 4;

/// Per-value options that travel down the tree.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walk {
    /// Nesting of the message this value is in (the top-level object is 1).
    pub(crate) depth: usize,
    /// This value is the top-level object's `metadata`, and its `managedFields` are to be skipped
    /// unread.
    pub(crate) drop_managed_fields: bool,
    /// This value is the top-level object, whose `metadata` gets `drop_managed_fields`.
    pub(crate) top_drops_managed_fields: bool,
}

impl Walk {
    fn child(self) -> Walk {
        Walk {
            depth: self.depth + 1,
            drop_managed_fields: false,
            top_drops_managed_fields: false,
        }
    }
}

/// One value of type `ty` (a singular field, one element of a repeated field, a map's value).
pub(crate) struct ValueDe<'de> {
    pub(crate) ty: Ty,
    pub(crate) raw: Raw<'de>,
    /// The message and field the value belongs to, for errors.
    pub(crate) message: &'static str,
    pub(crate) field: u32,
    pub(crate) walk: Walk,
    /// For the top-level object only: the `apiVersion` and `kind` of its envelope, presented as
    /// its first two keys (the message itself does not carry them).
    pub(crate) type_meta: Option<(&'de str, &'de str)>,
}

impl<'de> ValueDe<'de> {
    fn wire_error(&self) -> Error {
        Error::WrongType {
            message: self.message,
            field: self.field,
        }
    }

    /// The bytes of a length-delimited value; empty for an absent one.
    fn len(&self) -> Result<&'de [u8], Error> {
        match self.raw {
            Raw::Len(bytes) => Ok(bytes),
            Raw::Absent => Ok(&[]),
            _ => Err(self.wire_error()),
        }
    }

    fn varint(&self) -> Result<u64, Error> {
        match self.raw {
            Raw::Varint(v) => Ok(v),
            Raw::Absent => Ok(0),
            _ => Err(self.wire_error()),
        }
    }

    fn str(&self) -> Result<&'de str, Error> {
        utf8(self.len()?, self.message, self.field)
    }

    /// Whether this value reads as JSON `null`: a zero time, an empty JSON carrier, an "or"
    /// message with nothing set, a Go named slice that is nil.
    fn is_null(&self) -> Result<bool, Error> {
        Ok(match self.ty {
            Ty::Time | Ty::MicroTime => self.len()?.is_empty(),
            Ty::Json => json_bytes(self.len()?)?.is_empty(),
            Ty::Fold(schema, fold) => {
                matches!(fold_choice(schema, fold, self.len()?)?, Choice::Null)
            }
            Ty::Wrapped(_) => self.len()?.is_empty(),
            _ => false,
        })
    }

    fn message_access(&self, schema: &'static Schema) -> Result<MessageAccess<'de>, Error> {
        let walk = self.walk.child();
        if walk.depth > MAX_DEPTH {
            return Err(too_deep(schema.name));
        }
        Ok(MessageAccess::new(
            schema,
            self.len()?,
            Walk {
                drop_managed_fields: self.walk.drop_managed_fields,
                top_drops_managed_fields: self.walk.top_drops_managed_fields,
                ..walk
            },
            self.type_meta,
        ))
    }
}

impl<'de> Deserializer<'de> for ValueDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.ty {
            Ty::String => visitor.visit_borrowed_str(self.str()?),
            Ty::Bytes => {
                visitor.visit_string(base64::engine::general_purpose::STANDARD.encode(self.len()?))
            }
            // int32 travels sign-extended to 64 bits: its low 32 bits are the value.
            Ty::Int32 => visitor.visit_i64(i64::from(self.varint()? as i32)),
            Ty::Int64 => visitor.visit_i64(self.varint()? as i64),
            Ty::Bool => visitor.visit_bool(self.varint()? != 0),
            Ty::Double => {
                let bits = match self.raw {
                    Raw::Fixed64(bits) => bits,
                    Raw::Absent => 0,
                    _ => return Err(self.wire_error()),
                };
                visit_double(f64::from_bits(bits), self.message, self.field, visitor)
            }
            Ty::Message(schema) => visitor.visit_map(self.message_access(schema)?),
            Ty::IntOrString => match int_or_string(self.len()?)? {
                IntOrStr::Int(int) => visitor.visit_i64(i64::from(int)),
                IntOrStr::Str(text) => visitor.visit_borrowed_str(text),
            },
            Ty::Quantity => match self.raw {
                // Go's zero Quantity writes as "0".
                Raw::Absent => visitor.visit_borrowed_str("0"),
                _ => visitor.visit_borrowed_str(quantity(self.len()?)?),
            },
            Ty::Time | Ty::MicroTime => {
                let bytes = self.len()?;
                if bytes.is_empty() {
                    return visitor.visit_unit();
                }
                let micros = matches!(self.ty, Ty::MicroTime);
                let mut text = [0u8; TIME_LEN];
                visitor.visit_str(time(bytes, micros, &mut text)?)
            }
            Ty::Json => {
                let raw = json_bytes(self.len()?)?;
                if raw.is_empty() {
                    return visitor.visit_unit();
                }
                let mut json = serde_json::Deserializer::from_slice(raw);
                let value = de::Deserializer::deserialize_any(&mut json, visitor).map_err(|e| {
                    Error::Json {
                        message: self.message,
                        field: self.field,
                        reason: e.to_string(),
                    }
                })?;
                json.end().map_err(|e| Error::Json {
                    message: self.message,
                    field: self.field,
                    reason: e.to_string(),
                })?;
                Ok(value)
            }
            Ty::Fold(schema, fold) => {
                let bytes = self.len()?;
                let walk = self.walk.child();
                if walk.depth > MAX_DEPTH {
                    return Err(too_deep(schema.name));
                }
                match fold_choice(schema, fold, bytes)? {
                    Choice::Null => visitor.visit_unit(),
                    Choice::Bool(b) => visitor.visit_bool(b),
                    Choice::Field(field) => {
                        let reader = Reader::new(bytes, schema.name);
                        GatherDe {
                            field,
                            reader,
                            walk,
                        }
                        .deserialize_any(visitor)
                    }
                }
            }
            Ty::Wrapped(schema) => {
                let bytes = self.len()?;
                if bytes.is_empty() {
                    return visitor.visit_unit();
                }
                let walk = self.walk.child();
                match schema.field(1) {
                    Some(field) if walk.depth <= MAX_DEPTH => {
                        visitor.visit_seq(Gather::new(field, Reader::new(bytes, schema.name), walk))
                    }
                    Some(_) => Err(too_deep(schema.name)),
                    None => visitor.visit_seq(de::value::SeqDeserializer::<
                        std::iter::Empty<()>,
                        Error,
                    >::new(std::iter::empty())),
                }
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.is_null()? {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.ty {
            Ty::Bytes => visitor.visit_borrowed_bytes(self.len()?),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.ty {
            // A string names a unit variant, as in JSON.
            Ty::String => {
                let text: BorrowedStrDeserializer<'de, Error> =
                    BorrowedStrDeserializer::new(self.str()?);
                text.deserialize_enum(name, variants, visitor)
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // The wire already framed the value: nothing to walk.
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// A double as Go's JSON writes it: an integer when it has no fraction (`5`, not `5.0`, so a
/// `serde_json::Value` target sees the same number as from JSON); NaN and the infinities, which
/// JSON cannot hold, are refused.
fn visit_double<'de, V: Visitor<'de>>(
    value: f64,
    message: &'static str,
    field: u32,
    visitor: V,
) -> Result<V::Value, Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if !value.is_finite() {
        return Err(Error::NotFinite { message, field });
    }
    if value.fract() == 0.0 && value.abs() <= EXACT {
        visitor.visit_i64(value as i64)
    } else {
        visitor.visit_f64(value)
    }
}

/// The value of a repeated or map field: every occurrence of `field` in the message, from the
/// reader's position to the end.
struct GatherDe<'de> {
    field: &'static Field,
    reader: Reader<'de>,
    walk: Walk,
}

impl<'de> Deserializer<'de> for GatherDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.field.label {
            Label::Map => visitor.visit_map(Entries {
                field: self.field,
                reader: self.reader,
                walk: self.walk,
                value: None,
                remaining: occurrences(self.reader, self.field.number).ok(),
            }),
            Label::One => {
                // An "or" message's chosen singular field: its last occurrence.
                let mut reader = self.reader;
                let mut last = Raw::Absent;
                while let Some((number, wire)) = reader.key()? {
                    let raw = reader.value(wire)?;
                    if number == self.field.number {
                        last = raw;
                    }
                }
                ValueDe {
                    ty: self.field.ty,
                    raw: last,
                    message: reader.message(),
                    field: self.field.number,
                    walk: self.walk,
                    type_meta: None,
                }
                .deserialize_any(visitor)
            }
            Label::Repeated | Label::Inline => {
                visitor.visit_seq(Gather::new(self.field, self.reader, self.walk))
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct enum identifier
    }
}

/// The elements of a repeated field: each occurrence one element, and a length-delimited
/// occurrence of a scalar type a packed run of them.
///
/// Why it counts them first: serde's `Vec` visitor allocates what [`SeqAccess::size_hint`]
/// promises and grows by doubling without one (0, 4, 8, …: three `EnvVar`s hold four slots, one
/// `Toleration` four). A cache keeps every decoded object for its lifetime, so that slack is paid
/// per object for as long as the informer runs. Counting is one more skim over the rest of the
/// message (keys and lengths, no value is decoded), which the gathering does anyway.
struct Gather<'de> {
    field: &'static Field,
    reader: Reader<'de>,
    /// Inside a packed run: its remaining bytes.
    packed: Option<Reader<'de>>,
    walk: Walk,
    /// How many elements are still to come. Invariant: exact while the bytes are well formed
    /// (each `next_element_seed` that returns one takes one off); `None` when the count met
    /// malformed bytes, which the gathering then reports as an error of its own.
    remaining: Option<usize>,
}

impl<'de> Gather<'de> {
    fn new(field: &'static Field, reader: Reader<'de>, walk: Walk) -> Gather<'de> {
        let mut gather = Gather {
            field,
            reader,
            packed: None,
            walk,
            remaining: None,
        };
        gather.remaining = gather.count().ok();
        gather
    }

    /// How many elements the field's occurrences from the reader's position hold: one per
    /// occurrence, and every value of a packed run (a varint ends at each byte below 0x80, a
    /// fixed64 is 8 bytes).
    fn count(&self) -> Result<usize, Error> {
        let mut reader = self.reader;
        let mut count = 0usize;
        while let Some((number, wire)) = reader.key()? {
            let raw = reader.value(wire)?;
            if number != self.field.number {
                continue;
            }
            count += match (raw, self.packable()) {
                (Raw::Len(bytes), Some(WireType::Varint)) => {
                    bytes.iter().filter(|b| **b < 0x80).count()
                }
                (Raw::Len(bytes), Some(_)) => bytes.len() / 8,
                _ => 1,
            };
        }
        Ok(count)
    }

    /// Whether the field's type travels as a varint or fixed64, so that a length-delimited
    /// occurrence of it is a packed run.
    fn packable(&self) -> Option<WireType> {
        match self.field.ty {
            Ty::Int32 | Ty::Int64 | Ty::Bool => Some(WireType::Varint),
            Ty::Double => Some(WireType::Fixed64),
            _ => None,
        }
    }

    fn next_raw(&mut self) -> Result<Option<Raw<'de>>, Error> {
        let packed_wire = self.packable().unwrap_or(WireType::Varint);
        loop {
            if let Some(packed) = &mut self.packed {
                if !packed.at_end() {
                    return Ok(Some(packed.value(packed_wire)?));
                }
                self.packed = None;
            }
            let Some((number, wire)) = self.reader.key()? else {
                return Ok(None);
            };
            let raw = self.reader.value(wire)?;
            if number != self.field.number {
                continue;
            }
            match (raw, self.packable()) {
                (Raw::Len(bytes), Some(_)) => {
                    self.packed = Some(Reader::new(bytes, self.reader.message()));
                }
                (raw, _) => return Ok(Some(raw)),
            }
        }
    }
}

impl<'de> SeqAccess<'de> for Gather<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(raw) = self.next_raw()? else {
            return Ok(None);
        };
        self.remaining = self.remaining.map(|n| n.saturating_sub(1));
        seed.deserialize(ValueDe {
            ty: self.field.ty,
            raw,
            message: self.reader.message(),
            field: self.field.number,
            walk: self.walk,
            type_meta: None,
        })
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        self.remaining
    }
}

/// The entries of a `map<string, V>` field: each occurrence a message {1 key, 2 value}.
struct Entries<'de> {
    field: &'static Field,
    reader: Reader<'de>,
    walk: Walk,
    /// The value of the entry whose key was just handed out.
    value: Option<Raw<'de>>,
    /// How many entries are still to come, for maps that allocate up front (a `HashMap`; a
    /// `BTreeMap` does not). Same invariant as [`Gather`]'s.
    remaining: Option<usize>,
}

/// How many times field `number` occurs from the reader's position to the end of its message.
fn occurrences(mut reader: Reader<'_>, number: u32) -> Result<usize, Error> {
    let mut count = 0usize;
    while let Some((found, wire)) = reader.key()? {
        reader.skip(wire)?;
        if found == number {
            count += 1;
        }
    }
    Ok(count)
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let message = self.reader.message();
        loop {
            let Some((number, wire)) = self.reader.key()? else {
                return Ok(None);
            };
            let raw = self.reader.value(wire)?;
            if number != self.field.number {
                continue;
            }
            let Raw::Len(entry) = raw else {
                return Err(Error::WrongType {
                    message,
                    field: number,
                });
            };
            let (mut key, mut value) = (&[][..], Raw::Absent);
            let mut inner = Reader::new(entry, message);
            while let Some((n, wire)) = inner.key()? {
                let raw = inner.value(wire)?;
                match (n, raw) {
                    (1, Raw::Len(bytes)) => key = bytes,
                    (1, _) => {
                        return Err(Error::WrongType {
                            message,
                            field: number,
                        });
                    }
                    (2, raw) => value = raw,
                    _ => {}
                }
            }
            self.value = Some(value);
            self.remaining = self.remaining.map(|n| n.saturating_sub(1));
            let key = utf8(key, message, number)?;
            return seed
                .deserialize(BorrowedStrDeserializer::<Error>::new(key))
                .map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let raw = self.value.take().unwrap_or(Raw::Absent);
        seed.deserialize(ValueDe {
            ty: self.field.ty,
            raw,
            message: self.reader.message(),
            field: self.field.number,
            walk: self.walk,
            type_meta: None,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.remaining
    }
}

/// One message (with the messages Go inlines into it) read as a map from JSON names to values.
/// Invariant: `frames[..depth]` are the message and the inlined messages being read, the
/// innermost last; a frame's `seen` holds the numbers of the repeated, map and singular fields
/// already presented from it.
pub(crate) struct MessageAccess<'de> {
    frames: [Frame<'de>; MAX_INLINE],
    depth: usize,
    walk: Walk,
    type_meta: Option<(&'de str, &'de str)>,
    /// How many of the `type_meta` keys were handed out (0, 1, 2).
    type_meta_sent: u8,
    pending: Pending<'de>,
}

#[derive(Clone, Copy)]
struct Frame<'de> {
    schema: &'static Schema,
    reader: Reader<'de>,
    /// Field numbers below 64 already presented (the table's highest is 37).
    seen: u64,
    /// Where in `schema.fields` the next field probably is: Go writes fields in number order,
    /// so the one after the last found is tried before a search.
    hint: usize,
}

impl<'de> Frame<'de> {
    fn new(schema: &'static Schema, bytes: &'de [u8]) -> Frame<'de> {
        Frame {
            schema,
            reader: Reader::new(bytes, schema.name),
            seen: 0,
            hint: 0,
        }
    }

    /// The schema's field numbered `number`.
    fn field(&mut self, number: u32) -> Option<&'static Field> {
        let fields: &'static [Field] = self.schema.fields;
        let at = match fields.get(self.hint) {
            Some(field) if field.number == number => self.hint,
            _ => fields.binary_search_by_key(&number, |f| f.number).ok()?,
        };
        self.hint = at + 1;
        fields.get(at)
    }

    /// Marks `number` as presented; false when it already was. Numbers of 64 and above (none in
    /// the table) are never tracked: such a field is not in the schema and so never presented.
    fn first_time(&mut self, number: u32) -> bool {
        if number >= 64 {
            return true;
        }
        let bit = 1u64 << number;
        let first = self.seen & bit == 0;
        self.seen |= bit;
        first
    }
}

/// The value due after the key just handed out.
enum Pending<'de> {
    None,
    Str(&'de str),
    One(&'static Field, Raw<'de>, &'static str),
    Gather(&'static Field, Reader<'de>),
}

impl<'de> MessageAccess<'de> {
    pub(crate) fn new(
        schema: &'static Schema,
        bytes: &'de [u8],
        walk: Walk,
        type_meta: Option<(&'de str, &'de str)>,
    ) -> MessageAccess<'de> {
        let frame = Frame::new(schema, bytes);
        MessageAccess {
            frames: [frame; MAX_INLINE],
            depth: 1,
            walk,
            type_meta,
            type_meta_sent: 0,
            pending: Pending::None,
        }
    }

    /// The next field to present: its name, with `pending` set to its value.
    fn next_field(&mut self) -> Result<Option<&'static str>, Error> {
        if let Some((api_version, kind)) = self.type_meta {
            match self.type_meta_sent {
                0 if !api_version.is_empty() => {
                    self.type_meta_sent = 1;
                    self.pending = Pending::Str(api_version);
                    return Ok(Some("apiVersion"));
                }
                0 | 1 => {
                    self.type_meta_sent = 2;
                    if !kind.is_empty() {
                        self.pending = Pending::Str(kind);
                        return Ok(Some("kind"));
                    }
                }
                _ => {}
            }
        }
        loop {
            let Some(frame) = self
                .depth
                .checked_sub(1)
                .and_then(|i| self.frames.get_mut(i))
            else {
                return Ok(None);
            };
            let before = frame.reader.position();
            let Some((number, wire)) = frame.reader.key()? else {
                if self.depth == 1 {
                    return Ok(None);
                }
                self.depth -= 1;
                continue;
            };
            let raw = frame.reader.value(wire)?;
            let schema = frame.schema;
            let Some(field) = frame.field(number) else {
                // A field this release does not know (a newer server's): skipped, as Go does.
                continue;
            };
            let first = frame.first_time(number);
            match field.label {
                Label::Repeated | Label::Map => {
                    if !first {
                        continue;
                    }
                    if self.walk.drop_managed_fields && field.json == "managedFields" {
                        continue;
                    }
                    self.pending = Pending::Gather(field, frame.reader.from(before));
                    return Ok(Some(field.json));
                }
                Label::Inline => {
                    let (Ty::Message(inner), Raw::Len(bytes)) = (field.ty, raw) else {
                        return Err(Error::WrongType {
                            message: schema.name,
                            field: number,
                        });
                    };
                    if !first {
                        return Err(Error::Repeated {
                            message: schema.name,
                            field: number,
                        });
                    }
                    let Some(slot) = self.frames.get_mut(self.depth) else {
                        return Err(too_deep(schema.name));
                    };
                    *slot = Frame::new(inner, bytes);
                    self.depth += 1;
                }
                Label::One => {
                    if !first {
                        return Err(Error::Repeated {
                            message: schema.name,
                            field: number,
                        });
                    }
                    if omitted(field, raw) {
                        continue;
                    }
                    self.pending = Pending::One(field, raw, schema.name);
                    return Ok(Some(field.json));
                }
            }
        }
    }
}

/// Whether Go's JSON leaves this singular value out: a zero scalar of an `omitempty` field, or a
/// zero time (an empty message, JSON `null`, the same as absent to every target).
fn omitted(field: &Field, raw: Raw<'_>) -> bool {
    match (field.ty, raw) {
        (Ty::Time | Ty::MicroTime, Raw::Len(bytes)) => bytes.is_empty(),
        _ if field.presence.keeps_zero() => false,
        (Ty::String | Ty::Bytes, Raw::Len(bytes)) => bytes.is_empty(),
        // What is presented: an int32's low 32 bits, an int64 whole, a bool `v != 0`.
        (Ty::Int32, Raw::Varint(v)) => v as u32 == 0,
        (Ty::Int64 | Ty::Bool, Raw::Varint(v)) => v == 0,
        (Ty::Double, Raw::Fixed64(bits)) => f64::from_bits(bits) == 0.0,
        _ => false,
    }
}

impl<'de> MapAccess<'de> for MessageAccess<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.next_field()? {
            Some(name) => seed
                .deserialize(BorrowedStrDeserializer::<Error>::new(name))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let child = self.walk.child();
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::None => Err(Error::Custom(
                "a value was asked for before its key".to_string(),
            )),
            Pending::Str(text) => seed.deserialize(text.into_deserializer()),
            Pending::One(field, raw, message) => {
                let walk = match (self.walk.top_drops_managed_fields, field.json) {
                    (true, "metadata") => Walk {
                        depth: self.walk.depth,
                        drop_managed_fields: true,
                        top_drops_managed_fields: false,
                    },
                    _ => Walk {
                        depth: self.walk.depth,
                        drop_managed_fields: false,
                        top_drops_managed_fields: false,
                    },
                };
                seed.deserialize(ValueDe {
                    ty: field.ty,
                    raw,
                    message,
                    field: field.number,
                    walk,
                    type_meta: None,
                })
            }
            Pending::Gather(field, reader) => seed.deserialize(GatherDe {
                field,
                reader,
                walk: Walk {
                    depth: self.walk.depth,
                    ..child
                },
            }),
        }
    }
}

/// The JSON shape an "or" message of a CRD schema takes (see [`Fold`]).
enum Choice {
    Null,
    Bool(bool),
    /// One of its fields, presented as that field's value.
    Field(&'static Field),
}

/// Which shape an "or" message's bytes take, after Go's `MarshalJSON` of each.
fn fold_choice(schema: &'static Schema, fold: Fold, bytes: &[u8]) -> Result<Choice, Error> {
    let named = |json: &str| schema.fields.iter().find(|f| f.json == json);
    // Which of the message's fields occur, and the last value of a varint one.
    let mut present = 0u64;
    let mut allows = false;
    let mut reader = Reader::new(bytes, schema.name);
    while let Some((number, wire)) = reader.key()? {
        let raw = reader.value(wire)?;
        if number < 64 {
            present |= 1 << number;
        }
        if let (Some(field), Raw::Varint(v)) = (schema.field(number), raw) {
            if field.json == "allows" {
                allows = v != 0;
            }
        }
    }
    let has = |field: Option<&'static Field>| {
        field.filter(|f| f.number < 64 && present & (1 << f.number) != 0)
    };
    Ok(match fold {
        Fold::Array => match has(named("jSONSchemas")).or(has(named("schema"))) {
            Some(field) => Choice::Field(field),
            None => Choice::Null,
        },
        Fold::Bool => match has(named("schema")) {
            Some(field) => Choice::Field(field),
            None => Choice::Bool(allows),
        },
        Fold::StringArray => match has(named("property")).or(has(named("schema"))) {
            Some(field) => Choice::Field(field),
            None => Choice::Null,
        },
    })
}

/// The JSON text inside a `{1 bytes raw}` message (`RawExtension`, `FieldsV1`, `JSON`).
fn json_bytes(bytes: &[u8]) -> Result<&[u8], Error> {
    const NAME: &str = "runtime.RawExtension";
    let mut raw: &[u8] = &[];
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        match (number, reader.value(wire)?) {
            (1, Raw::Len(bytes)) => raw = bytes,
            (1, _) => {
                return Err(Error::WrongType {
                    message: NAME,
                    field: 1,
                });
            }
            _ => {}
        }
    }
    Ok(raw)
}

enum IntOrStr<'de> {
    Int(i32),
    Str(&'de str),
}

/// `intstr.IntOrString {1 type, 2 intVal, 3 strVal}`: the number for type 0, the string for 1.
fn int_or_string(bytes: &[u8]) -> Result<IntOrStr<'_>, Error> {
    const NAME: &str = "intstr.IntOrString";
    let (mut kind, mut int, mut text) = (0u64, 0i32, "");
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        match (number, reader.value(wire)?) {
            (1, Raw::Varint(v)) => kind = v,
            (2, Raw::Varint(v)) => int = v as i32,
            (3, Raw::Len(bytes)) => text = utf8(bytes, NAME, 3)?,
            (1..=3, _) => {
                return Err(Error::WrongType {
                    message: NAME,
                    field: number,
                });
            }
            _ => {}
        }
    }
    Ok(if kind == 1 {
        IntOrStr::Str(text)
    } else {
        IntOrStr::Int(int)
    })
}

/// `resource.Quantity {1 string}`: its text.
fn quantity(bytes: &[u8]) -> Result<&str, Error> {
    const NAME: &str = "resource.Quantity";
    let mut text = "";
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        match (number, reader.value(wire)?) {
            (1, Raw::Len(bytes)) => text = utf8(bytes, NAME, 1)?,
            (1, _) => {
                return Err(Error::WrongType {
                    message: NAME,
                    field: 1,
                });
            }
            _ => {}
        }
    }
    Ok(text)
}

/// `meta.v1.Time` / `MicroTime` `{1 seconds, 2 nanos}` (not empty) as Go's JSON writes them, in
/// UTC: `2006-01-02T15:04:05Z`, with six fractional digits for a `MicroTime`. Go normalizes nanos
/// outside a second into the seconds (`time.Unix`), and so does this; a year outside 0..=9999,
/// which Go refuses to write, is an error.
fn time<'a>(bytes: &[u8], micros: bool, out: &'a mut [u8; TIME_LEN]) -> Result<&'a str, Error> {
    const NAME: &str = "meta.v1.Time";
    let (mut seconds, mut nanos) = (0i64, 0i64);
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        match (number, reader.value(wire)?) {
            (1, Raw::Varint(v)) => seconds = v as i64,
            (2, Raw::Varint(v)) => nanos = i64::from(v as i32),
            (1 | 2, _) => {
                return Err(Error::WrongType {
                    message: NAME,
                    field: number,
                });
            }
            _ => {}
        }
    }
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    let (secs, nanos) = (
        total.div_euclid(1_000_000_000),
        total.rem_euclid(1_000_000_000),
    );
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400) as u32;
    let (year, month, day) = civil(days);
    if !(0..=9999).contains(&year) {
        return Err(Error::TimeRange { seconds });
    }
    // Written digit by digit into `out` (no allocation: a Pod has a dozen timestamps).
    let mut at = 0;
    let mut digits = |value: u32, width: u32, then: u8| {
        for place in (0..width).rev() {
            out[at] = b'0' + (value / 10u32.pow(place) % 10) as u8;
            at += 1;
        }
        out[at] = then;
        at += 1;
    };
    digits(year as u32, 4, b'-');
    digits(month, 2, b'-');
    digits(day, 2, b'T');
    digits(of_day / 3600, 2, b':');
    digits(of_day / 60 % 60, 2, b':');
    if micros {
        digits(of_day % 60, 2, b'.');
        digits((nanos / 1_000) as u32, 6, b'Z');
    } else {
        digits(of_day % 60, 2, b'Z');
    }
    std::str::from_utf8(&out[..at]).map_err(|_| Error::TimeRange { seconds })
}

/// The longest timestamp text: `2006-01-02T15:04:05.000000Z`.
const TIME_LEN: usize = 27;

/// The proleptic Gregorian date `days` after 1970-01-01: (year, month 1-12, day 1-31). The
/// calendar repeats every 400 years (146,097 days); counting eras from 0000-03-01 puts the leap
/// day last in each year, so a year's day maps to its month by a linear formula.
fn civil(days: i128) -> (i128, u32, u32) {
    let z = days + 719_468; // days from 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365], from March 1st
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i128::from(month <= 2);
    (year, month, day)
}

fn utf8<'de>(bytes: &'de [u8], message: &'static str, field: u32) -> Result<&'de str, Error> {
    std::str::from_utf8(bytes).map_err(|_| Error::Utf8 { message, field })
}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error::Custom(msg.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_times_format_as_go_writes_them() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(-1), (1969, 12, 31));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(2_932_896), (9999, 12, 31));
        let encode = |seconds: i64, nanos: i32| {
            let mut bytes = vec![0x08];
            let mut v = seconds as u64;
            while v >= 0x80 {
                bytes.push((v as u8) | 0x80);
                v >>= 7;
            }
            bytes.push(v as u8);
            bytes.push(0x10);
            let mut v = nanos as i64 as u64;
            while v >= 0x80 {
                bytes.push((v as u8) | 0x80);
                v >>= 7;
            }
            bytes.push(v as u8);
            bytes
        };
        let time = |bytes: Vec<u8>, micros: bool| {
            let mut out = [0u8; TIME_LEN];
            time(&bytes, micros, &mut out).map(str::to_string)
        };
        assert_eq!(
            time(encode(1_700_000_000, 123_456_789), false).unwrap(),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            time(encode(1_700_000_000, 123_456_789), true).unwrap(),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(time(encode(-1, 0), false).unwrap(), "1969-12-31T23:59:59Z");
        assert_eq!(
            time(encode(0, -1), true).unwrap(),
            "1969-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            time(encode(-62_135_596_800, 0), false).unwrap(),
            "0001-01-01T00:00:00Z"
        );
        assert!(matches!(
            time(encode(300_000_000_000, 0), false),
            Err(Error::TimeRange { .. })
        ));
        assert!(time(encode(i64::MIN, i32::MIN), false).is_err());
    }
}
