//! A protobuf watch (`Content-Type: application/vnd.kubernetes.protobuf;stream=watch`): frames
//! of a four-byte big-endian length followed by that many bytes of `meta.v1.WatchEvent
//! {1 type, 2 object}` (no envelope), whose `object` is a `RawExtension {1 raw}` holding an
//! enveloped object (`k8s\0` + `runtime.Unknown`).
//!
//! ```text
//!  chunks ─▶ FrameDecoder ─ frame ─▶ decode_event: type + raw ─▶ from_slice::<K>(raw) ─▶ WatchEvent<K>
//! ```
//!
//! Like the JSON line decoder, [`FrameDecoder`] keeps only the bytes of the frame in progress,
//! and refuses a frame longer than the limit it is given before buffering it.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes, BytesMut};
use ferrokube_core::ManagedFields;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::{Error, from_slice};
use crate::watch::event::{Bookmark, WatchEvent, error_event};
use ferrokube_core::protobuf::wire::{Raw, Reader};

/// Splits a byte stream into length-prefixed frames.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    limit: usize,
}

impl FrameDecoder {
    /// A decoder that refuses frames longer than `limit` bytes.
    pub fn new(limit: usize) -> FrameDecoder {
        FrameDecoder {
            buf: BytesMut::new(),
            limit,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole frame, `Ok(None)` until it has arrived, an error for a frame over the
    /// limit.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, Error> {
        let Some(prefix) = self.buf.get(..4) else {
            return Ok(None);
        };
        let mut length = [0u8; 4];
        length.copy_from_slice(prefix);
        let length = u32::from_be_bytes(length) as usize;
        if length > self.limit {
            return Err(Error::FrameTooLarge {
                length,
                limit: self.limit,
            });
        }
        if self.buf.len() < 4 + length {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(length).freeze()))
    }

    /// Bytes held for the frame in progress.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// At the end of the stream: an error if it ended inside a frame.
    pub fn finish(&self) -> Result<(), Error> {
        match self.buf.is_empty() {
            true => Ok(()),
            false => Err(Error::Incomplete("a watch frame")),
        }
    }
}

#[derive(Deserialize)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Decodes one frame's `WatchEvent` into a [`WatchEvent<K>`].
pub fn decode_event<K: DeserializeOwned>(
    frame: &[u8],
    managed_fields: ManagedFields,
) -> Result<WatchEvent<K>, Error> {
    const NAME: &str = "meta.v1.WatchEvent";
    let (mut kind, mut object) = ("", &[][..]);
    let mut reader = Reader::new(frame, NAME);
    while let Some((number, wire)) = reader.key()? {
        match (number, reader.value(wire)?) {
            (1, Raw::Len(text)) => kind = super::utf8(text, NAME, 1)?,
            (2, Raw::Len(extension)) => {
                let mut inner = Reader::new(extension, "runtime.RawExtension");
                while let Some((number, wire)) = inner.key()? {
                    if let (1, Raw::Len(raw)) = (number, inner.value(wire)?) {
                        object = raw;
                    }
                }
            }
            (1 | 2, _) => {
                return Err(Error::WrongType {
                    message: NAME,
                    field: number,
                });
            }
            _ => {}
        }
    }
    Ok(match kind {
        "ADDED" => WatchEvent::Added(from_slice(object, managed_fields)?),
        "MODIFIED" => WatchEvent::Modified(from_slice(object, managed_fields)?),
        "DELETED" => WatchEvent::Deleted(from_slice(object, managed_fields)?),
        "BOOKMARK" => {
            let bookmark: BookmarkObject = from_slice(object, ManagedFields::Drop)?;
            WatchEvent::Bookmark(Bookmark {
                resource_version: bookmark.metadata.resource_version,
                annotations: bookmark.metadata.annotations.unwrap_or_default(),
            })
        }
        "ERROR" => {
            let status: Status = from_slice(object, ManagedFields::Keep)?;
            error_event(status)
        }
        other => {
            return Err(Error::Custom(format!("unknown watch event type {other:?}")));
        }
    })
}
