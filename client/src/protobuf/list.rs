//! A protobuf list body, decoded one item at a time while it is still arriving: the protobuf
//! twin of the JSON `ListDecoder` (`api/list.rs`), with the same bound on memory (the kept items
//! plus one chunk and one item, never the body).
//!
//! The body is `k8s\0` + `runtime.Unknown`, whose `raw` (field 2) is the list message
//! `XList {1 metadata, 2 items…}`. Every field on the way is a key and a length, so the decoder
//! never needs more than one field's bytes at once:
//!
//! ```text
//!  Magic ─▶ Envelope: typeMeta (kept: which list, so which item schema) ─▶ raw's key + length ─▶ List
//!                 ▲                                                                              │
//!                 └──── contentEncoding, contentType ◀── the list's bytes all read ◀─ metadata (kept),
//!                                                                                     each item decoded ─▶ map ─▶ T
//! ```

use std::marker::PhantomData;

use bytes::{Buf, Bytes, BytesMut};
use ferrokube_core::ManagedFields;
use ferrokube_core::protobuf::{Label, Schema, Ty, top_level};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::de::DeserializeOwned;

use super::{Error, MAGIC, UNKNOWN, from_message, read_type_meta};
use crate::api::object_list::ObjectList;
use ferrokube_core::protobuf::wire::{Raw, Reader, WireError, varint_prefix};

/// Where the decoder is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before the four magic bytes.
    Magic,
    /// Between two fields of the envelope.
    Envelope,
    /// Inside the list message, `left` of its bytes not yet read.
    List { left: usize },
}

/// What the envelope's `typeMeta` said: the list's schema and where its parts are.
#[derive(Debug, Clone, Copy)]
struct ListShape {
    metadata: Option<(u32, &'static Schema)>,
    items: (u32, &'static Schema),
}

impl ListShape {
    fn of(list: &'static Schema, api_version: &str, kind: &str) -> Result<ListShape, Error> {
        let message = |json: &str| {
            list.fields.iter().find_map(|f| match f.ty {
                Ty::Message(schema) if f.json == json => Some((f.number, f.label, schema)),
                _ => None,
            })
        };
        let items = match message("items") {
            Some((number, Label::Repeated, schema)) => (number, schema),
            _ => {
                return Err(Error::Custom(format!(
                    "{api_version} {kind} is not a list kind"
                )));
            }
        };
        Ok(ListShape {
            metadata: message("metadata").map(|(number, _, schema)| (number, schema)),
            items,
        })
    }
}

/// Decodes a protobuf list body pushed in chunks; see the `protobuf::list` module docs. Each item is
/// decoded as a `K` (keeping or skipping `metadata.managedFields`), passed through `map`, and only
/// what `map` returns is kept.
pub struct ListDecoder<K, T, F> {
    /// Invariant: the bytes not yet consumed; `place` says what the first one belongs to.
    buf: BytesMut,
    place: Place,
    shape: Option<ListShape>,
    /// The list message was entered (an envelope without `raw` is an empty list only if it said
    /// it is one; it is an error here).
    entered: bool,
    metadata: Option<Bytes>,
    managed_fields: ManagedFields,
    map: F,
    items: Vec<T>,
    _item: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned, T, F: FnMut(K) -> T> ListDecoder<K, T, F> {
    pub fn new(map: F) -> Self {
        ListDecoder {
            buf: BytesMut::new(),
            place: Place::Magic,
            shape: None,
            entered: false,
            metadata: None,
            managed_fields: ManagedFields::Keep,
            map,
            items: Vec::new(),
            _item: PhantomData,
        }
    }

    /// Whether each item keeps `metadata.managedFields` (default: kept).
    pub fn managed_fields(mut self, managed_fields: ManagedFields) -> Self {
        self.managed_fields = managed_fields;
        self
    }

    /// Takes the next chunk of the body and decodes every item it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), Error> {
        self.push_telling(chunk, &mut None::<fn(&ListMeta)>)
    }

    /// [`push`](Self::push), calling `tell` (once) with the list's metadata as soon as it has
    /// arrived whole, before the next item is decoded.
    pub fn push_telling(
        &mut self,
        chunk: &[u8],
        tell: &mut Option<impl FnOnce(&ListMeta)>,
    ) -> Result<(), Error> {
        self.buf.extend_from_slice(chunk);
        while self.step(tell)? {}
        Ok(())
    }

    /// The list's metadata, once it has arrived whole.
    pub fn metadata(&self) -> Option<Result<ListMeta, Error>> {
        let bytes = self.metadata.as_ref()?;
        let (_, schema) = self.shape?.metadata?;
        Some(from_message(schema, bytes, None, ManagedFields::Keep))
    }

    /// At the end of the body: the list, if the body was one whole list.
    pub fn finish(self) -> Result<ObjectList<T>, Error> {
        if !self.buf.is_empty() || self.place != Place::Envelope {
            return Err(Error::Incomplete("a protobuf list"));
        }
        if !self.entered {
            return Err(Error::Incomplete("a protobuf list (no list message)"));
        }
        let metadata = match self.metadata() {
            Some(metadata) => metadata?,
            None => ListMeta::default(),
        };
        Ok(ObjectList {
            metadata,
            items: self.items,
        })
    }

    /// One step on the buffered bytes: false when more must arrive.
    fn step(&mut self, tell: &mut Option<impl FnOnce(&ListMeta)>) -> Result<bool, Error> {
        match self.place {
            Place::Magic => {
                if self.buf.len() < MAGIC.len() {
                    return Ok(false);
                }
                if &self.buf[..MAGIC.len()] != MAGIC {
                    return Err(Error::Magic);
                }
                self.buf.advance(MAGIC.len());
                self.place = Place::Envelope;
                Ok(true)
            }
            Place::Envelope => self.envelope_field(),
            Place::List { left: 0 } => {
                self.place = Place::Envelope;
                Ok(true)
            }
            Place::List { left } => self.list_field(left, tell),
        }
    }

    /// One field of `runtime.Unknown`; the list's own bytes (`raw`) are entered, not buffered.
    fn envelope_field(&mut self) -> Result<bool, Error> {
        if self.buf.is_empty() {
            return Ok(false);
        }
        let Some((key, key_len)) = varint_prefix(&self.buf, UNKNOWN)? else {
            return Ok(false);
        };
        if key >> 3 == 2 && key & 7 == 2 {
            let Some((length, length_len)) = varint_prefix(&self.buf[key_len..], UNKNOWN)? else {
                return Ok(false);
            };
            if self.shape.is_none() {
                return Err(Error::NoTypeMeta);
            }
            if self.entered {
                return Err(Error::Repeated {
                    message: UNKNOWN,
                    field: 2,
                });
            }
            let left = usize::try_from(length).map_err(|_| Error::Truncated {
                message: UNKNOWN,
                at: 0,
            })?;
            self.buf.advance(key_len + length_len);
            self.entered = true;
            self.place = Place::List { left };
            return Ok(true);
        }
        let Some((number, raw, used)) = whole_field(&self.buf, UNKNOWN, usize::MAX)? else {
            return Ok(false);
        };
        match (number, raw) {
            (1, Raw::Len(type_meta)) => {
                let (api_version, kind) = read_type_meta(type_meta)?;
                let list = top_level(api_version, kind).ok_or_else(|| Error::UnknownKind {
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                })?;
                self.shape = Some(ListShape::of(list, api_version, kind)?);
            }
            (3, Raw::Len(encoding)) if !encoding.is_empty() => {
                return Err(Error::ContentEncoding(
                    String::from_utf8_lossy(encoding).into_owned(),
                ));
            }
            (1..=4, Raw::Len(_)) | (5.., _) => {}
            (_, _) => {
                return Err(Error::WrongType {
                    message: UNKNOWN,
                    field: number,
                });
            }
        }
        self.buf.advance(used);
        Ok(true)
    }

    /// One field of the list message, once all its bytes are here: the metadata is kept, an item
    /// decoded and mapped, anything else skipped.
    fn list_field(
        &mut self,
        left: usize,
        tell: &mut Option<impl FnOnce(&ListMeta)>,
    ) -> Result<bool, Error> {
        let Some(shape) = self.shape else {
            return Err(Error::NoTypeMeta);
        };
        let name = shape.items.1.name;
        let Some((number, raw, used)) = whole_field(&self.buf, name, left)? else {
            return Ok(false);
        };
        match raw {
            Raw::Len(bytes) if number == shape.items.0 => {
                let item: K = from_message(shape.items.1, bytes, None, self.managed_fields)?;
                self.items.push((self.map)(item));
            }
            Raw::Len(bytes) if shape.metadata.is_some_and(|(n, _)| n == number) => {
                self.metadata = Some(Bytes::copy_from_slice(bytes));
                if let Some(tell) = tell.take() {
                    match self.metadata() {
                        Some(metadata) => tell(&metadata?),
                        None => tell(&ListMeta::default()),
                    }
                }
            }
            _ if number == shape.items.0 || shape.metadata.is_some_and(|(n, _)| n == number) => {
                return Err(Error::WrongType {
                    message: name,
                    field: number,
                });
            }
            _ => {}
        }
        self.buf.advance(used);
        self.place = Place::List { left: left - used };
        Ok(true)
    }
}

/// The first field of `buf` (of which at most `limit` bytes belong to the message being read),
/// if all its bytes are here: its number, value and length. `None` while more must arrive; an
/// error when the field cannot fit in `limit` or is malformed.
fn whole_field<'a>(
    buf: &'a [u8],
    message: &'static str,
    limit: usize,
) -> Result<Option<(u32, Raw<'a>, usize)>, Error> {
    let window = &buf[..buf.len().min(limit)];
    let mut reader = Reader::new(window, message);
    let read = reader.key().and_then(|key| match key {
        Some((number, wire)) => reader.value(wire).map(|raw| Some((number, raw))),
        None => Ok(None),
    });
    match read {
        Ok(Some((number, raw))) => Ok(Some((number, raw, reader.position()))),
        Ok(None) => Ok(None),
        // Cut short by the end of what arrived, not by the message's end: wait for more.
        Err(WireError::Truncated { .. }) if window.len() < limit => Ok(None),
        Err(error) => Err(error.into()),
    }
}
