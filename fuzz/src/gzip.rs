//! The gzip target: a `Content-Encoding: gzip` response body, cut into chunks, through the
//! client's inflater (`ferrokube::client::inflate_chunks`, the code `ResponseBody` runs on every
//! compressed list and watch body), then through the streaming list decoder, as `Api::list`
//! reads a compressed list.
//!
//! Properties: the chunking changes nothing (both fail, or both give the same bytes); where
//! flate2's own reader (`read::MultiGzDecoder`, the oracle) inflates the body completely, ours
//! gives the same bytes; whatever fails, fails with a typed error ([`BodyError::Gzip`], then
//! `serde_json::Error` from the list decoder).

use std::io::Read;

use ferrokube::api::ListDecoder;
use ferrokube::client::{BodyError, inflate_chunks};
use serde_json::Value;

use crate::{chunks, split_control};

/// Inflates the body (the input after its two control bytes) pushed in chunks, and whole.
pub fn gzip_body(data: &[u8]) {
    let (sizes, body) = split_control(data);
    let chunked = inflate(&chunks(body, sizes));
    let whole = inflate(&[body]);
    match (&chunked, &whole) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "chunking ({sizes:?}) changed the inflated bytes"),
        (Err(BodyError::Gzip(_)), Err(BodyError::Gzip(_))) => {}
        (a, b) => panic!(
            "chunking ({sizes:?}) changed the outcome: chunked {:?}, whole {:?}",
            a.as_ref().map(Vec::len),
            b.as_ref().map(Vec::len)
        ),
    }
    let mut oracle = Vec::new();
    let read = flate2::read::MultiGzDecoder::new(body).read_to_end(&mut oracle);
    if read.is_ok() && !body.is_empty() {
        assert_eq!(
            whole.as_ref().ok(),
            Some(&oracle),
            "flate2's reader inflates this body and the client's inflater does not agree"
        );
    }
    // What the list decoder makes of it, piece by piece as it arrives: a list or a typed error.
    if let Ok(inflated) = &chunked {
        let mut decoder = ListDecoder::new(|item: Value| item);
        let decoded = chunks(inflated, sizes)
            .into_iter()
            .try_for_each(|piece| decoder.push(piece));
        let _ = decoded.and_then(|()| decoder.finish());
    }
}

fn inflate(pieces: &[&[u8]]) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    inflate_chunks(pieces.iter().copied(), |piece| out.extend_from_slice(piece))?;
    Ok(out)
}
