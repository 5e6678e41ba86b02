//! Response bodies the API server compressed (`Content-Encoding: gzip`), inflated as they stream.
//!
//! # Why
//!
//! client-go's transport asks every request for `Accept-Encoding: gzip` (Go's `http.Transport`
//! does it unless `rest.Config.DisableCompression`), and kube-apiserver answers with gzip where
//! it pays (`k8s.io/apiserver`, `responsewriters` and `handlers/watch.go`, 1.37):
//!
//! - a get or a list whose body is larger than 128 KiB (feature `APIResponseCompression`, on by
//!   default): the first write decides, or, for a list encoded as a stream (first write of at
//!   most 4 bytes), the writes buffered until they pass 128 KiB; at gzip level 1;
//! - a streaming list (`watch` with `sendInitialEvents=true`; feature `WatchListCompression`, beta
//!   and on in 1.37): the whole response, **one gzip member per flush**: the server closes its
//!   gzip writer every time its event queue runs dry, so the body is a series of complete gzip
//!   members, one after another;
//! - never a plain watch, never a small answer.
//!
//! A page of 500 Pods is about 1.2 MB as protobuf and a few tens of KB gzipped: on a real
//! network (not a localhost) the list is bound by bytes. This module gives `Client` the same
//! (on by default, off with [`Config::disable_compression`](crate::Config::disable_compression)).
//!
//! # How data flows
//!
//! ```text
//!  hyper Incoming ── frame (compressed bytes) ──▶ pending ──▶ MultiGzDecoder<Vec<u8>> ──▶ frame of
//!                                                 fed at most FEED bytes at a time      inflated bytes
//!  end of body ─────────────────────────────────────────────▶ try_finish: the last member's
//!                                                            length and CRC checked, or an error
//! ```
//!
//! The inflater is flate2's push-style `write::MultiGzDecoder` (flate2 over miniz_oxide, pure
//! Rust): it takes compressed bytes as they come, any number of members, and so needs neither
//! a reader over the body nor a task of its own. Each member's CRC-32 and length are checked when
//! the member ends; a corrupt or truncated stream is a [`BodyError::Gzip`], which the client
//! reports as `Error::Decompress`, never a panic and never silently short data.
//!
//! The list and watch decoders above see only the inflated bytes, in pieces, exactly as they
//! see an uncompressed body: they decode while the rest is still on the wire.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use flate2::write::MultiGzDecoder;
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// How many compressed bytes are inflated at a time. Deflate expands at most about 1,032 to one,
/// so one frame handed on holds at most about 8 MiB whatever the server sends (the decoders
/// above bound what they buffer), and usually some 50 to 100 KiB.
const FEED: usize = 8 * 1024;

/// What went wrong reading a response body.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The connection broke or the HTTP framing was wrong.
    #[error(transparent)]
    Transport(#[from] hyper::Error),
    /// The body said `Content-Encoding: gzip` but is not a valid gzip stream (a corrupt deflate
    /// block, a wrong CRC or length, a truncated member).
    #[error("the gzip-compressed body is corrupt: {0}")]
    Gzip(#[source] std::io::Error),
}

/// A 2xx response's body as [`Client::send`](crate::Client::send) hands it out: hyper's, inflated
/// on the fly when the server compressed it. Read it like any `http_body::Body`
/// (`http_body_util::BodyExt::frame`, `collect`).
#[derive(Debug)]
pub struct ResponseBody {
    inner: Incoming,
    /// `Some` when the body is gzip-compressed. Boxed: the inflater's state is some 40 KB.
    gunzip: Option<Box<Gunzip>>,
}

/// The inflater of one compressed body.
struct Gunzip {
    decoder: MultiGzDecoder<Vec<u8>>,
    /// Compressed bytes received but not yet given to the decoder.
    pending: Bytes,
    /// Whether any compressed byte arrived (an empty body is empty, not a truncated gzip stream:
    /// Go's transport reads it the same way).
    any_input: bool,
    /// Invariant: once true, the inner body has ended and the stream was checked complete;
    /// nothing more is read or inflated.
    finished: bool,
}

impl std::fmt::Debug for Gunzip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gunzip")
            .field("pending", &self.pending.len())
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl Gunzip {
    fn new() -> Gunzip {
        Gunzip {
            decoder: MultiGzDecoder::new(Vec::new()),
            pending: Bytes::new(),
            any_input: false,
            finished: false,
        }
    }

    /// Inflates pending input until some output is ready or the input is used up; returns the
    /// output (empty: the input is used up and gave nothing yet).
    fn inflate(&mut self) -> Result<Bytes, BodyError> {
        while !self.pending.is_empty() {
            let take = self.pending.len().min(FEED);
            let used = self
                .decoder
                .write(self.pending.get(..take).unwrap_or_default())
                .map_err(BodyError::Gzip)?;
            if used == 0 {
                // A decoder that takes nothing from a non-empty input would loop forever.
                return Err(BodyError::Gzip(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the gzip decoder accepted no input",
                )));
            }
            self.pending.advance(used);
            let out = self.take_output()?;
            if !out.is_empty() {
                return Ok(out);
            }
        }
        Ok(Bytes::new())
    }

    /// What the decoder has inflated so far (its own buffer flushed into the `Vec` first).
    fn take_output(&mut self) -> Result<Bytes, BodyError> {
        self.decoder.flush().map_err(BodyError::Gzip)?;
        Ok(Bytes::from(std::mem::take(self.decoder.get_mut())))
    }

    /// The body has ended: checks the last member complete and returns what it still held.
    fn finish(&mut self) -> Result<Bytes, BodyError> {
        self.finished = true;
        if !self.any_input {
            return Ok(Bytes::new());
        }
        self.decoder.try_finish().map_err(BodyError::Gzip)?;
        Ok(Bytes::from(std::mem::take(self.decoder.get_mut())))
    }
}

impl ResponseBody {
    /// `inner` as it came off the wire; `gzip`: whether the response said
    /// `Content-Encoding: gzip`.
    pub(crate) fn new(inner: Incoming, gzip: bool) -> ResponseBody {
        ResponseBody {
            inner,
            gunzip: gzip.then(|| Box::new(Gunzip::new())),
        }
    }

    /// Whether the body arrives compressed (and is inflated here).
    pub fn is_gzip(&self) -> bool {
        self.gunzip.is_some()
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let Some(gunzip) = this.gunzip.as_deref_mut() else {
            return Pin::new(&mut this.inner)
                .poll_frame(cx)
                .map_err(BodyError::Transport);
        };
        loop {
            if gunzip.finished {
                return Poll::Ready(None);
            }
            let out = gunzip.inflate()?;
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        gunzip.any_input |= !data.is_empty();
                        gunzip.pending = data;
                    }
                    // Trailers are not compressed.
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(BodyError::Transport(error)))),
                None => {
                    let out = gunzip.finish()?;
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.gunzip {
            None => self.inner.is_end_stream(),
            Some(gunzip) => gunzip.finished,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.gunzip {
            None => self.inner.size_hint(),
            // The inflated length is not known before the end.
            Some(_) => SizeHint::default(),
        }
    }
}

/// Inflates a whole gzip stream held in memory, piece by piece exactly as [`ResponseBody`] does
/// (for the fuzz harnesses and tests: the same code path without a connection).
pub fn inflate_chunks<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    mut each: impl FnMut(&[u8]),
) -> Result<(), BodyError> {
    let mut gunzip = Gunzip::new();
    for chunk in chunks {
        gunzip.any_input |= !chunk.is_empty();
        gunzip.pending = Bytes::copy_from_slice(chunk);
        loop {
            let out = gunzip.inflate()?;
            if out.is_empty() {
                break;
            }
            each(&out);
        }
    }
    let out = gunzip.finish()?;
    if !out.is_empty() {
        each(&out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(data).expect("to a Vec");
        encoder.finish().expect("to a Vec")
    }

    fn inflate_in(body: &[u8], piece: usize) -> Result<Vec<u8>, BodyError> {
        let mut out = Vec::new();
        inflate_chunks(body.chunks(piece.max(1)), |o| out.extend_from_slice(o))?;
        Ok(out)
    }

    fn sample(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| format!("{{\"name\":\"pod-{i:05}\",\"phase\":\"Pending\"}}\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn gzip_body_inflates_the_same_under_any_chunking() {
        let data = sample(20_000);
        let body = gzip(&data);
        for piece in [1, 7, 512, 8 * 1024, 100_000, body.len()] {
            assert_eq!(
                inflate_in(&body, piece).expect("valid"),
                data,
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn gzip_members_one_per_flush_read_as_one_stream() {
        // kube-apiserver's streaming list: a complete member per flush, back to back.
        let parts = [sample(10), sample(3_000), b"x".to_vec(), sample(1)];
        let mut body = Vec::new();
        for part in &parts {
            body.extend(gzip(part));
        }
        let whole: Vec<u8> = parts.concat();
        for piece in [1, 13, 4096, body.len()] {
            assert_eq!(
                inflate_in(&body, piece).expect("valid"),
                whole,
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn gzip_corrupt_or_truncated_streams_are_errors() {
        let data = sample(2_000);
        let body = gzip(&data);
        // Truncated anywhere: inside the header, the deflate data or the trailer.
        for end in [1, 5, 10, body.len() / 2, body.len() - 4, body.len() - 1] {
            assert!(
                matches!(inflate_in(&body[..end], 97), Err(BodyError::Gzip(_))),
                "truncated at {end}"
            );
        }
        // A wrong CRC.
        let mut bad_crc = body.clone();
        let at = bad_crc.len() - 8;
        bad_crc[at] ^= 0xff;
        assert!(matches!(inflate_in(&bad_crc, 100), Err(BodyError::Gzip(_))));
        // Not gzip at all.
        assert!(matches!(
            inflate_in(b"{\"kind\":\"PodList\"}", 5),
            Err(BodyError::Gzip(_))
        ));
        // A second member cut short.
        let mut two = body.clone();
        two.extend_from_slice(&body[..body.len() / 3]);
        assert!(matches!(inflate_in(&two, 1000), Err(BodyError::Gzip(_))));
        // An empty body is empty.
        assert_eq!(inflate_in(b"", 1).expect("empty"), Vec::<u8>::new());
    }
}
