//! Lists, decoded one item at a time while the body is still arriving.
//!
//! A list response is one JSON object, `{"kind", "apiVersion", "metadata", "items": [...]}`, and an
//! informer's first list can be the whole collection in one response (kube-apiserver serves a
//! `resourceVersion=0` list from its watch cache and ignores `limit` there). Reading that body
//! whole and then decoding it keeps the body and every decoded object in memory at once; for 10,000
//! Pods the body alone is ~34 MB, and the process's peak memory is what it keeps.
//!
//! So the body is split as it streams in. [`ListSplitter`] follows the list object's structure
//! byte by byte (nesting depth, strings, escapes) and hands out each element of `items` the moment
//! its last byte arrives; [`ListDecoder`] decodes that element, passes it through the caller's
//! `map` (e.g. an informer's transform that drops `managedFields`) and forgets its bytes:
//!
//! ```text
//! chunk ─▶ ListSplitter ─▶ one item's bytes ─▶ decode (managedFields kept or skipped) ─▶ K ─▶ map ─▶ T (kept)
//!              │
//!              └─▶ `metadata` bytes (kept, decoded at the end: resourceVersion, continue)
//! ```
//!
//! Memory is bounded by the kept `T`s plus one chunk and one item, never by the body.

use std::marker::PhantomData;

use bytes::{Buf, Bytes, BytesMut};
use ferrokube_core::ManagedFields;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::de::{DeserializeOwned, Error as _};

use super::object_list::ObjectList;

/// Decodes a whole list body held in memory, passing each item through `map` as it is decoded.
#[cfg(test)]
pub(crate) fn decode_mapped<K, T>(
    body: &[u8],
    map: impl FnMut(K) -> T,
) -> Result<ObjectList<T>, serde_json::Error>
where
    K: DeserializeOwned,
{
    let mut decoder = ListDecoder::new(map);
    decoder.push(body)?;
    decoder.finish()
}

/// Decodes a list body pushed in chunks, one item at a time while the body is still arriving: each
/// element of `items` is decoded the moment its last byte arrives, passed through `map` (an
/// informer's transform, say) and its bytes forgotten, so memory is bounded by the kept items plus
/// one chunk and one item, never by the body. `metadata` is kept and decoded at the end.
///
/// [`Api::list`](super::Api::list) and [`Api::list_mapped`](super::Api::list_mapped) use it on the
/// response body as it arrives. Public for code that has a list body from elsewhere (a file, a recorded response) and
/// for the fuzz harness (crate `ferrokube-fuzzing`), which cuts bodies into arbitrary chunks:
///
/// ```
/// use ferrokube_client::api::ListDecoder;
/// use serde_json::Value;
///
/// let mut decoder = ListDecoder::new(|item: Value| item["metadata"]["name"].clone());
/// decoder.push(br#"{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[{"meta"#)?;
/// decoder.push(br#"data":{"name":"a"}},{"metadata":{"name":"b"}}]}"#)?;
/// let list = decoder.finish()?;
/// assert_eq!(list.items, ["a", "b"]);
/// assert_eq!(list.resource_version(), "7");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub struct ListDecoder<K, T, F> {
    splitter: ListSplitter,
    /// Whether each item keeps `metadata.managedFields` (see [`super::decode`]).
    managed_fields: ManagedFields,
    map: F,
    items: Vec<T>,
    _item: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned, T, F: FnMut(K) -> T> ListDecoder<K, T, F> {
    /// A decoder that passes each item, decoded as a `K`, through `map` and keeps what it returns.
    pub fn new(map: F) -> Self {
        ListDecoder {
            splitter: ListSplitter::default(),
            managed_fields: ManagedFields::Keep,
            map,
            items: Vec::new(),
            _item: PhantomData,
        }
    }

    /// Whether each item keeps `metadata.managedFields`. Default [`ManagedFields::Keep`];
    /// [`ManagedFields::Drop`] skips them while decoding (see [`decode`](super::decode)).
    pub fn managed_fields(mut self, managed_fields: ManagedFields) -> Self {
        self.managed_fields = managed_fields;
        self
    }

    /// Takes the next chunk of the body and decodes every item it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), serde_json::Error> {
        self.push_telling(chunk, &mut None::<fn(&ListMeta)>)
    }

    /// [`push`](Self::push), and the moment the list's `metadata` is whole (before the next item
    /// is decoded), `tell` is taken and called with it. Leaves `tell` in place while the
    /// metadata has not arrived.
    pub fn push_telling(
        &mut self,
        chunk: &[u8],
        tell: &mut Option<impl FnOnce(&ListMeta)>,
    ) -> Result<(), serde_json::Error> {
        self.splitter.push(chunk);
        loop {
            let next = self.splitter.next_item()?;
            if tell.is_some() {
                if let Some(metadata) = self.metadata() {
                    let metadata = metadata?;
                    if let Some(tell) = tell.take() {
                        tell(&metadata);
                    }
                }
            }
            let Some(bytes) = next else {
                return Ok(());
            };
            let item: K = super::decode::from_slice(&bytes, self.managed_fields)?;
            self.items.push((self.map)(item));
        }
    }

    /// The list's `metadata` once it has arrived whole (kube-apiserver sends it before `items`,
    /// so its continue token is known long before the page is complete); `None` until then.
    pub fn metadata(&self) -> Option<Result<ListMeta, serde_json::Error>> {
        let bytes = self.splitter.metadata.as_ref()?;
        Some(serde_json::from_slice::<Option<ListMeta>>(bytes).map(Option::unwrap_or_default))
    }

    /// At the end of the body: the list, if the body was one whole list object.
    pub fn finish(self) -> Result<ObjectList<T>, serde_json::Error> {
        let metadata = match self.splitter.finish()? {
            Some(bytes) => serde_json::from_slice::<Option<ListMeta>>(&bytes)?.unwrap_or_default(),
            None => ListMeta::default(),
        };
        Ok(ObjectList {
            metadata,
            items: self.items,
        })
    }
}

/// Where the splitter is in `{"kind":…,"metadata":{…},"items":[{…},{…}]}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before the list object's `{`.
    Start,
    /// Right after `{`: a field name or `}`.
    FirstField,
    /// After a `,` between fields: a field name.
    NextField,
    /// Inside a field name (a string value being scanned).
    FieldName(Span),
    /// After a field name: `:`.
    Colon(Field),
    /// After the `:`: the field's value (`[` opens `items`).
    Value(Field),
    /// A field's value being scanned (skipped, or kept for `metadata`).
    FieldValue(Field, Span),
    /// Right after `"items":[`: an element or `]`.
    FirstItem,
    /// After a `,` between elements: an element.
    NextItem,
    /// An element of `items` being scanned.
    Item(Span),
    /// After an element: `,` or `]`.
    AfterItem,
    /// After a field's value: `,` or `}`.
    AfterField,
    /// After the list object's `}`: only whitespace may follow.
    End,
}

/// The fields of a list the splitter treats specially; every other field is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Metadata,
    Items,
    Other,
}

/// Finds where one JSON value ends across pushes. The value starts at the buffer's first byte.
/// Invariant: `buf[..scanned]` has been looked at, and `depth`/`in_string`/`escaped` describe
/// the position right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Span {
    scanned: usize,
    depth: u32,
    in_string: bool,
    escaped: bool,
}

impl Span {
    /// Scans on from `scanned`; returns the value's length once its last byte has arrived.
    fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        let scalar = !matches!(buf.first(), Some(b'{' | b'[' | b'"'));
        while self.scanned < buf.len() {
            let byte = buf[self.scanned];
            let at = self.scanned;
            self.scanned += 1;
            if scalar {
                // A number, `true`, `false` or `null` ends where a delimiter begins.
                if matches!(byte, b',' | b'}' | b']') || byte.is_ascii_whitespace() {
                    return Some(at);
                }
            } else if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        return Some(self.scanned);
                    }
                }
            } else {
                match byte {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth = self.depth.saturating_sub(1);
                        if self.depth == 0 {
                            return Some(self.scanned);
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

/// Splits a list body into its items' bytes as chunks arrive; see the [module docs](self).
/// Invariant: `buf` holds exactly the bytes not yet handed out or skipped, and `place` says what
/// its first byte belongs to.
#[derive(Debug)]
pub(crate) struct ListSplitter {
    buf: BytesMut,
    place: Place,
    metadata: Option<Bytes>,
    /// Bytes consumed so far, for error messages.
    offset: usize,
}

impl Default for ListSplitter {
    fn default() -> Self {
        ListSplitter {
            buf: BytesMut::new(),
            place: Place::Start,
            metadata: None,
            offset: 0,
        }
    }
}

impl ListSplitter {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole element of `items`, or `None` until more of the body has arrived.
    pub(crate) fn next_item(&mut self) -> Result<Option<Bytes>, serde_json::Error> {
        loop {
            let span = match &mut self.place {
                Place::FieldName(span) | Place::FieldValue(_, span) | Place::Item(span) => {
                    Some(span)
                }
                _ => None,
            };
            if let Some(span) = span {
                let Some(len) = span.scan(&self.buf) else {
                    return Ok(None);
                };
                if len == 0 {
                    // A delimiter where a value should start, e.g. `"kind":,` or `[1,]`.
                    return Err(self.unexpected(self.place, self.buf[0]));
                }
                let value = self.take(len);
                match self.place {
                    Place::Item(_) => {
                        self.place = Place::AfterItem;
                        return Ok(Some(value));
                    }
                    Place::FieldName(_) => self.place = Place::Colon(field_named(&value)?),
                    Place::FieldValue(field, _) => self.field_value(field, value)?,
                    _ => {}
                }
                continue;
            }
            let Some(byte) = self.next_token() else {
                return Ok(None);
            };
            self.place = match (self.place, byte) {
                (Place::Start, b'{') => self.advance(Place::FirstField),
                (Place::FirstField, b'}') | (Place::AfterField, b'}') => self.advance(Place::End),
                (Place::FirstField | Place::NextField, b'"') => Place::FieldName(Span::default()),
                (Place::Colon(field), b':') => self.advance(Place::Value(field)),
                (Place::Value(Field::Items), b'[') => self.advance(Place::FirstItem),
                (Place::Value(field), _) => Place::FieldValue(field, Span::default()),
                (Place::FirstItem, b']') => self.advance(Place::AfterField),
                (Place::FirstItem | Place::NextItem, _) => Place::Item(Span::default()),
                (Place::AfterItem, b',') => self.advance(Place::NextItem),
                (Place::AfterItem, b']') => self.advance(Place::AfterField),
                (Place::AfterField, b',') => self.advance(Place::NextField),
                (place, byte) => return Err(self.unexpected(place, byte)),
            };
        }
    }

    /// At the end of the body: the bytes of the list's `metadata`, if it had one.
    pub(crate) fn finish(mut self) -> Result<Option<Bytes>, serde_json::Error> {
        if let Some(byte) = self.next_token() {
            return Err(self.unexpected(self.place, byte));
        }
        match self.place {
            Place::End => Ok(self.metadata),
            _ => Err(serde_json::Error::custom(format!(
                "the list body ended early, after {} bytes",
                self.offset
            ))),
        }
    }

    /// Skips whitespace; the next significant byte, left in place.
    fn next_token(&mut self) -> Option<u8> {
        let skip = self
            .buf
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        self.buf.advance(skip);
        self.offset += skip;
        self.buf.first().copied()
    }

    /// Consumes a one-byte token and moves to `next`.
    fn advance(&mut self, next: Place) -> Place {
        self.buf.advance(1);
        self.offset += 1;
        next
    }

    fn take(&mut self, len: usize) -> Bytes {
        self.offset += len;
        self.buf.split_to(len).freeze()
    }

    fn field_value(&mut self, field: Field, value: Bytes) -> Result<(), serde_json::Error> {
        match field {
            Field::Metadata => self.metadata = Some(value),
            // `"items": null` is an empty list; any other non-array is not a list.
            Field::Items if value.as_ref() != b"null" => {
                return Err(serde_json::Error::custom(
                    "a list's items must be an array or null",
                ));
            }
            Field::Items | Field::Other => {}
        }
        self.place = Place::AfterField;
        Ok(())
    }

    fn unexpected(&self, place: Place, byte: u8) -> serde_json::Error {
        serde_json::Error::custom(format!(
            "unexpected {:?} at byte {} of a list body ({place:?})",
            char::from(byte),
            self.offset
        ))
    }
}

/// Which field a scanned field name (a JSON string, quotes included) is.
fn field_named(name: &[u8]) -> Result<Field, serde_json::Error> {
    Ok(match serde_json::from_slice::<String>(name)?.as_str() {
        "metadata" => Field::Metadata,
        "items" => Field::Items,
        _ => Field::Other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn items_are_mapped_in_order_and_other_fields_skipped() {
        let body = br#"{"kind":"ConfigMapList","apiVersion":"v1",
            "metadata":{"resourceVersion":"42","continue":"next"},
            "items":[{"metadata":{"name":"a","managedFields":[{"manager":"m"}]}},
                     {"metadata":{"name":"b"}}],
            "extra":{"nested":[1,2,3]}}"#;
        let list = decode_mapped(body, |mut c: ConfigMap| {
            c.metadata.managed_fields = None;
            c.metadata.name
        })
        .unwrap();
        assert_eq!(list.items, [Some("a".to_string()), Some("b".to_string())]);
        assert_eq!(list.resource_version(), "42");
        assert_eq!(list.metadata.continue_.as_deref(), Some("next"));
    }

    #[test]
    fn the_metadata_is_told_before_the_first_item_is_decoded() {
        use std::cell::Cell;
        let body = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"7","continue":"c2"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
        let decoded = Cell::new(0);
        let told_after = Cell::new(None);
        let mut decoder = ListDecoder::new(|c: ConfigMap| {
            decoded.set(decoded.get() + 1);
            c
        });
        let mut tell = Some(|meta: &ListMeta| {
            told_after.set(Some((decoded.get(), meta.continue_.clone())));
        });
        // The whole body in one chunk: the items are decodable at once, the telling comes first.
        decoder.push_telling(body, &mut tell).unwrap();
        assert!(tell.is_none());
        assert_eq!(told_after.take(), Some((0, Some("c2".to_string()))));
        let list = decoder.finish().unwrap();
        assert_eq!(list.items.len(), 2);

        // Byte by byte: told once, as soon as the metadata's closing brace has arrived.
        let told = Cell::new(0);
        let mut decoder = ListDecoder::new(|c: ConfigMap| c);
        let mut tell = Some(|_: &ListMeta| told.set(told.get() + 1));
        let end_of_metadata = body.windows(2).position(|w| w == b"},").unwrap();
        for (at, byte) in body.iter().enumerate() {
            decoder.push_telling(&[*byte], &mut tell).unwrap();
            assert_eq!(tell.is_none(), at >= end_of_metadata, "at byte {at}");
        }
        assert_eq!(told.get(), 1);
    }

    #[test]
    fn null_or_missing_items_are_an_empty_list_and_bad_items_an_error() {
        let empty = decode_mapped(br#"{"metadata":{},"items":null}"#, |c: ConfigMap| c).unwrap();
        assert!(empty.items.is_empty());
        let missing = decode_mapped(br#"{"metadata":null}"#, |c: ConfigMap| c).unwrap();
        assert!(missing.items.is_empty());
        assert!(decode_mapped(br#"{"items":[{"metadata":7}]}"#, |c: ConfigMap| c).is_err());
        assert!(decode_mapped(br#"{"items":[]} trailing"#, |c: ConfigMap| c).is_err());
        assert!(decode_mapped(br#"[1,2]"#, |c: ConfigMap| c).is_err());
    }

    /// Every way of cutting `body` into two or three chunks gives the same list as the whole.
    #[test]
    fn any_chunking_gives_the_same_list() {
        let body = br#" { "kind" : "ConfigMapList", "items" : [ {"metadata":{"name":"a"},
            "data":{"brace}":"]{\"\\","n":"1"}} , {"metadata":{"name":"b\"}"}} ],
            "metadata" : {"resourceVersion":"7"}, "n": 12, "t": true } "#;
        let names = |list: ObjectList<ConfigMap>| -> Vec<String> {
            list.items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect()
        };
        let whole = decode_mapped(body, |c: ConfigMap| c).unwrap();
        assert_eq!(whole.resource_version(), "7");
        assert_eq!(whole.items[0].data.as_ref().unwrap()["brace}"], "]{\"\\");
        assert_eq!(names(whole), ["a", "b\"}"]);
        for first in 0..body.len() {
            for second in first..body.len() {
                let mut decoder = ListDecoder::new(|c: ConfigMap| c);
                for chunk in [&body[..first], &body[first..second], &body[second..]] {
                    decoder.push(chunk).unwrap();
                }
                let list = decoder.finish().unwrap();
                assert_eq!(list.resource_version(), "7", "cut at {first}, {second}");
                assert_eq!(names(list), ["a", "b\"}"], "cut at {first}, {second}");
            }
        }
    }

    /// Items are handed out as soon as their last byte arrives, and their bytes are let go: what
    /// the splitter holds never grows past one item plus one chunk, however long the list.
    #[test]
    fn items_leave_as_they_arrive_and_memory_stays_at_one_item() {
        let item = br#"{"metadata":{"name":"x"},"data":{"k":"0123456789012345678901234567"}}"#;
        let mut body = br#"{"metadata":{"resourceVersion":"1"},"items":["#.to_vec();
        for i in 0..2000 {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        let mut splitter = ListSplitter::default();
        let mut seen = 0;
        for chunk in body.chunks(37) {
            splitter.push(chunk);
            while let Some(bytes) = splitter.next_item().unwrap() {
                assert_eq!(&bytes[..], item);
                seen += 1;
            }
            assert!(
                splitter.buf.len() <= item.len() + 37,
                "{}",
                splitter.buf.len()
            );
        }
        assert_eq!(seen, 2000);
        let metadata = splitter.finish().unwrap().unwrap();
        assert_eq!(&metadata[..], br#"{"resourceVersion":"1"}"#);
    }

    #[test]
    fn a_truncated_or_malformed_body_is_an_error_not_a_panic() {
        let full = br#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}}]}"#;
        for end in 0..full.len() {
            let mut decoder = ListDecoder::new(|c: ConfigMap| c);
            let pushed = decoder.push(&full[..end]);
            assert!(pushed.is_err() || decoder.finish().is_err(), "cut at {end}");
        }
        for bad in [
            &br#"{"items":{"a":1}}"#[..],
            br#"{"items":[1,]}"#,
            br#"{"items":[{}] "metadata":{}}"#,
            br#"{,"items":[]}"#,
            br#"{"items"[]}"#,
            br#"{"items":[]}}"#,
            br#"{"items":[]]"#,
            br#"{"kind":,"items":[]}"#,
        ] {
            assert!(
                decode_mapped(bad, |c: ConfigMap| c).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
