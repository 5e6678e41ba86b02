//! From bytes to watch events.
//!
//! The API server sends a watch as one long chunked response body of JSON objects, one per line:
//!
//! ```text
//! {"type":"ADDED","object":{"kind":"Pod",...}}\n{"type":"MODIFIED","object":{...}}\n{"type":"BOOKMARK",...
//! ```
//!
//! Chunk boundaries have nothing to do with line boundaries: one chunk may hold many events, and one
//! event (a 10 MiB ConfigMap) may span hundreds of chunks. [`LineDecoder`] keeps only the bytes of
//! the event not finished yet, so memory is bounded by the largest single event, not by the stream,
//! and each byte is scanned for a newline once.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use ferrokube_core::ManagedFields;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::event::{Bookmark, WatchEvent, error_event};
use crate::error::Error;

/// Splits a byte stream into lines. Invariant: `buf[..scanned]` holds no `\n`.
#[derive(Debug, Default)]
pub struct LineDecoder {
    buf: BytesMut,
    scanned: usize,
}

impl LineDecoder {
    pub fn new() -> LineDecoder {
        LineDecoder::default()
    }

    /// Appends the next chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete line (without its `\n`), if one has arrived.
    pub fn next_line(&mut self) -> Option<Bytes> {
        let newline = self.buf[self.scanned..].iter().position(|b| *b == b'\n');
        match newline {
            Some(offset) => {
                let line = self.buf.split_to(self.scanned + offset + 1);
                self.scanned = 0;
                let len = line_len(&line);
                Some(line.freeze().slice(..len))
            }
            None => {
                self.scanned = self.buf.len();
                None
            }
        }
    }

    /// At the end of the body: what is left, if it is more than whitespace (a last line without `\n`).
    pub fn finish(&mut self) -> Option<Bytes> {
        let rest = self.buf.split().freeze();
        self.scanned = 0;
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest)
    }

    /// Bytes held for the line in progress.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// Length of a line without its `\n` (or `\r\n`).
fn line_len(line: &[u8]) -> usize {
    let mut len = line.len();
    if len > 0 && line[len - 1] == b'\n' {
        len -= 1;
    }
    if len > 0 && line[len - 1] == b'\r' {
        len -= 1;
    }
    len
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct BookmarkObject {
    metadata: BookmarkMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Decodes one line of a watch stream.
pub fn decode_event<K: DeserializeOwned>(line: &[u8]) -> Result<WatchEvent<K>, Error> {
    decode_event_with(line, ManagedFields::Keep)
}

/// [`decode_event`], the object keeping or skipping its `metadata.managedFields` as
/// `managed_fields` says (see [`crate::api::decode`]).
pub fn decode_event_with<K: DeserializeOwned>(
    line: &[u8],
    managed_fields: ManagedFields,
) -> Result<WatchEvent<K>, Error> {
    let fail = |what: &str, source| Error::Decode {
        what: what.to_string(),
        source,
    };
    let raw: RawEvent<'_> = serde_json::from_slice(line).map_err(|e| fail("a watch event", e))?;
    let object = raw.object.get();
    let decode = |what| {
        crate::api::decode::from_slice::<K>(object.as_bytes(), managed_fields)
            .map_err(|e| fail(what, e))
    };
    Ok(match raw.kind {
        "ADDED" => WatchEvent::Added(decode("the object of an ADDED event")?),
        "MODIFIED" => WatchEvent::Modified(decode("the object of a MODIFIED event")?),
        "DELETED" => WatchEvent::Deleted(decode("the object of a DELETED event")?),
        "BOOKMARK" => {
            let bookmark: BookmarkObject =
                serde_json::from_str(object).map_err(|e| fail("a BOOKMARK event", e))?;
            WatchEvent::Bookmark(Bookmark {
                resource_version: bookmark.metadata.resource_version,
                annotations: bookmark.metadata.annotations.unwrap_or_default(),
            })
        }
        "ERROR" => {
            let status: Status =
                serde_json::from_str(object).map_err(|e| fail("an ERROR event", e))?;
            error_event(status)
        }
        other => {
            return Err(fail(
                "a watch event",
                serde::de::Error::custom(format!("unknown event type {other:?}")),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn lines_of(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut decoder = LineDecoder::new();
        let mut lines = Vec::new();
        for chunk in chunks {
            decoder.push(chunk);
            while let Some(line) = decoder.next_line() {
                lines.push(line.to_vec());
            }
        }
        lines.extend(decoder.finish().map(|l| l.to_vec()));
        lines
    }

    #[test]
    fn events_split_across_chunks_and_many_in_one() {
        let a = br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#;
        let b = br#"{"type":"DELETED","object":{"metadata":{"name":"b"}}}"#;
        let stream = [&a[..], b"\n", &b[..], b"\n", &a[..], b"\r\n"].concat();
        for cut in [1, 7, 30, 52, 53, 54, 100] {
            let cut = cut.min(stream.len());
            let got = lines_of(&[&stream[..cut], &stream[cut..]]);
            assert_eq!(
                got,
                vec![a.to_vec(), b.to_vec(), a.to_vec()],
                "cut at {cut}"
            );
        }
        let byte_by_byte: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(lines_of(&byte_by_byte).len(), 3);
        assert_eq!(
            lines_of(&[&a[..]]),
            vec![a.to_vec()],
            "last line without newline"
        );
    }

    #[test]
    fn a_10_mib_event_keeps_memory_to_one_event() {
        let big = "x".repeat(10 << 20);
        let line = format!(
            r#"{{"type":"MODIFIED","object":{{"metadata":{{"name":"big","resourceVersion":"9"}},"data":{{"k":"{big}"}}}}}}"#
        );
        let mut decoder = LineDecoder::new();
        let mut seen = None;
        for chunk in line.as_bytes().chunks(16 << 10).chain([&b"\n"[..]]) {
            decoder.push(chunk);
            assert!(decoder.buffered() <= line.len() + 1);
            if let Some(line) = decoder.next_line() {
                seen = Some(decode_event::<ConfigMap>(&line).expect("decodes"));
            }
        }
        let Some(WatchEvent::Modified(cm)) = seen else {
            panic!("no event");
        };
        assert_eq!(cm.data.map(|d| d["k"].len()), Some(10 << 20));
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn bookmarks_errors_and_malformed_lines() {
        let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        let WatchEvent::Bookmark(b) = decode_event::<ConfigMap>(bookmark).expect("bookmark") else {
            panic!("not a bookmark");
        };
        assert_eq!(b.resource_version, "12");
        assert!(b.is_initial_events_end());

        let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (20)","reason":"Expired","code":410}}"#;
        let WatchEvent::Error(error) = decode_event::<ConfigMap>(gone).expect("error event") else {
            panic!("not an error");
        };
        assert_eq!(error.code, 410);

        for bad in [
            &b"{not json"[..],
            br#"{"type":"ADDED"}"#,
            br#"{"type":"SURPRISE","object":{}}"#,
            br#"{"type":"ADDED","object":{"metadata":{"name":7}}}"#,
        ] {
            let error = decode_event::<ConfigMap>(bad).expect_err("malformed");
            assert!(matches!(error, Error::Decode { .. }), "{error}");
        }
    }
}
