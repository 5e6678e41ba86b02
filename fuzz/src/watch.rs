//! The watch target: a watch response body, cut into chunks, through `LineDecoder` and
//! `decode_event`.

use ferrokube::Error;
use ferrokube::api::DynamicObject;
use ferrokube::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use ferrokube::watch::{LineDecoder, decode_event};

use crate::{chunks, split_control};

/// Feeds the body (the input after its two control bytes) to a [`LineDecoder`] in chunks, and
/// every line to [`decode_event`] as a Pod, a ConfigMap and a `DynamicObject`.
///
/// Properties: the lines are exactly those of the whole body split on `\n` (a trailing `\r`
/// dropped, a last line without `\n` kept unless it is only whitespace), whatever the chunking;
/// the decoder never holds more than the body; a line that does not decode is an
/// [`Error::Decode`].
pub fn watch_stream(data: &[u8]) {
    let (sizes, body) = split_control(data);
    let mut decoder = LineDecoder::new();
    let mut lines = Vec::new();
    for chunk in chunks(body, sizes) {
        decoder.push(chunk);
        while let Some(line) = decoder.next_line() {
            lines.push(line);
        }
        assert!(
            decoder.buffered() <= body.len(),
            "the decoder holds more than it was given"
        );
    }
    lines.extend(decoder.finish());
    assert_eq!(decoder.buffered(), 0, "finish leaves nothing behind");
    let expected = lines_of(body);
    assert_eq!(
        lines.iter().map(|l| &l[..]).collect::<Vec<_>>(),
        expected,
        "lines depend on chunking ({sizes:?})"
    );
    for line in &lines {
        decodes_or_fails_typed::<Pod>(line);
        decodes_or_fails_typed::<ConfigMap>(line);
        decodes_or_fails_typed::<DynamicObject>(line);
    }
}

fn decodes_or_fails_typed<K: serde::de::DeserializeOwned>(line: &[u8]) {
    if let Err(error) = decode_event::<K>(line) {
        assert!(
            matches!(error, Error::Decode { .. }),
            "a bad line must be a decode error, not {error}"
        );
    }
}

/// The oracle: the body's lines, computed on the whole body at once.
fn lines_of(body: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut rest = body;
    while let Some(end) = rest.iter().position(|b| *b == b'\n') {
        let line = &rest[..end];
        lines.push(line.strip_suffix(b"\r").unwrap_or(line));
        rest = &rest[end + 1..];
    }
    if !rest.iter().all(u8::is_ascii_whitespace) {
        lines.push(rest);
    }
    lines
}
