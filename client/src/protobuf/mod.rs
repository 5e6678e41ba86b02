//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) read straight into the
//! types users already have: k8s-openapi's, `Compact<K>`, any `Deserialize` that reads an
//! object's JSON shape.
//!
//! # Why
//!
//! kube-apiserver sends a built-in kind in protobuf about three times faster than in JSON, and a
//! client decodes it with far less work: no quoting, no escapes, no field names, numbers as
//! varints. client-go asks for it for every built-in kind by default (since v0.31), and an
//! informer's first list of 50,000 Pods is where it shows. Custom resources have no protobuf
//! form; they stay JSON, as do patches and `DynamicObject`. A server that refuses to answer a
//! read in protobuf (406, or 415) is asked again in JSON, and only JSON from then on for that
//! resource; see `Api::reads_protobuf`.
//!
//! Writes go the other way with core's encoder (`ferrokube_core::protobuf::encode`, a serde
//! `Serializer` driven by the same schema table): a create's or an update's body of a built-in
//! kind is protobuf, sent again as JSON if the server answers 415 (and JSON from then on for that
//! resource); see `Api::writes_protobuf`. The wire format itself (keys, varints, lengths) is
//! core's too (`ferrokube_core::protobuf::wire`), shared with the embedded server.
//!
//! # How data flows
//!
//! ```text
//!  body ─ "k8s\0" ─ runtime.Unknown {1 typeMeta {1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType}
//!                                        │                              │
//!            core::protobuf::top_level(apiVersion, kind)                │ the object's message
//!                                        ▼                              ▼
//!                        Schema (field numbers, JSON names,   de::MessageAccess presents raw's
//!                        types, presence; generated from      fields as a map keyed by JSON
//!                        Kubernetes' .proto and Go types) ──▶ names ──▶ K::deserialize (no tree)
//! ```
//!
//! The three shapes a response comes in:
//!
//! - one object (a get, a create's answer, an error's `Status`): the envelope above, [`from_slice`];
//! - a list: the same envelope around `XList {1 metadata, 2 items}`; [`ListDecoder`] decodes each
//!   item as soon as its bytes have arrived, like the JSON list decoder;
//! - a watch (`;stream=watch`): frames of a four-byte big-endian length and a `WatchEvent
//!   {1 type, 2 object {1 raw}}` without envelope, whose `raw` is an enveloped object:
//!   [`FrameDecoder`] and [`decode_event`].
//!
//! See `de.rs` for how a message maps onto its JSON form (and so onto `K`).

mod de;
pub(crate) mod error;
mod list;
mod watch;

use ferrokube_core::ManagedFields;
use ferrokube_core::protobuf::{Schema, Ty, top_level};
use serde::de::{Deserialize, DeserializeOwned};

pub use de::MAX_DEPTH;
pub use error::Error;
pub use list::ListDecoder;
pub use watch::{FrameDecoder, decode_event};

use de::{ValueDe, Walk};
use ferrokube_core::protobuf::wire::{Raw, Reader};

pub use ferrokube_core::protobuf::{CONTENT_TYPE, is_protobuf};

/// What a client that reads protobuf asks for: protobuf, and JSON from a server (or an
/// aggregated API) that has no protobuf for the kind. client-go's generated clientsets send the
/// same.
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

use ferrokube_core::protobuf::MAGIC;

/// An enveloped object: `runtime.Unknown`'s type and the object's own message bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub raw: &'a [u8],
}

impl<'a> Envelope<'a> {
    /// Reads `k8s\0` and the `runtime.Unknown` after it.
    pub fn read(body: &'a [u8]) -> Result<Envelope<'a>, Error> {
        let rest = body.strip_prefix(MAGIC).ok_or(Error::Magic)?;
        let mut envelope = Envelope {
            api_version: "",
            kind: "",
            raw: &[],
        };
        let mut reader = Reader::new(rest, UNKNOWN);
        while let Some((number, wire)) = reader.key()? {
            match (number, reader.value(wire)?) {
                (1, Raw::Len(type_meta)) => {
                    let (api_version, kind) = read_type_meta(type_meta)?;
                    envelope.api_version = api_version;
                    envelope.kind = kind;
                }
                (2, Raw::Len(raw)) => envelope.raw = raw,
                (3, Raw::Len(encoding)) if !encoding.is_empty() => {
                    return Err(Error::ContentEncoding(
                        String::from_utf8_lossy(encoding).into_owned(),
                    ));
                }
                (1..=4, Raw::Len(_)) => {}
                (1..=4, _) => {
                    return Err(Error::WrongType {
                        message: UNKNOWN,
                        field: number,
                    });
                }
                _ => {}
            }
        }
        Ok(envelope)
    }

    /// The schema of the kind the envelope names.
    pub fn schema(&self) -> Result<&'static Schema, Error> {
        if self.kind.is_empty() {
            return Err(Error::NoTypeMeta);
        }
        top_level(self.api_version, self.kind).ok_or_else(|| Error::UnknownKind {
            api_version: self.api_version.to_string(),
            kind: self.kind.to_string(),
        })
    }

    /// The envelope, a `Status` under any group version read as the `v1` `Status` it is: Go
    /// registers meta.k8s.io's `Status` in every group version, and kube-apiserver names it `v1`
    /// (an error's body, a watch's ERROR event), as k8s-openapi's `Status` expects.
    fn normalized(self) -> Envelope<'a> {
        match self.kind {
            "Status" => Envelope {
                api_version: "v1",
                ..self
            },
            _ => self,
        }
    }
}

const UNKNOWN: &str = "runtime.Unknown";

/// `runtime.TypeMeta {1 apiVersion, 2 kind}`.
fn read_type_meta(bytes: &[u8]) -> Result<(&str, &str), Error> {
    const NAME: &str = "runtime.TypeMeta";
    let (mut api_version, mut kind) = ("", "");
    let mut reader = Reader::new(bytes, NAME);
    while let Some((number, wire)) = reader.key()? {
        match (number, reader.value(wire)?) {
            (1, Raw::Len(text)) => api_version = utf8(text, NAME, 1)?,
            (2, Raw::Len(text)) => kind = utf8(text, NAME, 2)?,
            (1 | 2, _) => {
                return Err(Error::WrongType {
                    message: NAME,
                    field: number,
                });
            }
            _ => {}
        }
    }
    Ok((api_version, kind))
}

fn utf8<'a>(bytes: &'a [u8], message: &'static str, field: u32) -> Result<&'a str, Error> {
    std::str::from_utf8(bytes).map_err(|_| Error::Utf8 { message, field })
}

/// Decodes one enveloped object (a get's body, say) as a `K`, keeping or skipping its
/// `metadata.managedFields` as `managed_fields` says (skipped ones are never read past their
/// framing). `K` sees the object's JSON shape, `apiVersion` and `kind` from the envelope first.
pub fn from_slice<K: DeserializeOwned>(
    body: &[u8],
    managed_fields: ManagedFields,
) -> Result<K, Error> {
    let envelope = Envelope::read(body)?.normalized();
    let schema = envelope.schema()?;
    from_message(
        schema,
        envelope.raw,
        Some((envelope.api_version, envelope.kind)),
        managed_fields,
    )
}

/// Decodes a message of `schema` without envelope (a list's item) as a `K`. `type_meta`, when
/// given, is presented as the object's `apiVersion` and `kind`.
pub(crate) fn from_message<'de, K: Deserialize<'de>>(
    schema: &'static Schema,
    bytes: &'de [u8],
    type_meta: Option<(&'de str, &'de str)>,
    managed_fields: ManagedFields,
) -> Result<K, Error> {
    let drop = managed_fields == ManagedFields::Drop;
    K::deserialize(ValueDe {
        ty: Ty::Message(schema),
        raw: Raw::Len(bytes),
        message: schema.name,
        field: 0,
        walk: Walk {
            depth: 0,
            drop_managed_fields: false,
            top_drops_managed_fields: drop,
        },
        type_meta,
    })
}

#[cfg(test)]
mod tests;
