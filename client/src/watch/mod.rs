//! Watches: a stream of changes to a set of objects, and a watcher that keeps one open.
//!
//! ```text
//!  HTTP body chunks ──▶ LineDecoder ──lines──▶ decode_event ──▶ WatchStream<K>: WatchEvent<K>, …
//!                                                                  │
//!                          ResumingWatcher: reopens from the last resourceVersion when the server
//!                          ends the watch; on 410 Gone tells the caller to relist
//! ```
//!
//! [`WatchStream`] is one HTTP watch: it ends when the server closes the response (its timeout, an
//! apiserver restart) or after yielding a decode error for a malformed line. [`ResumingWatcher`](crate::watcher::ResumingWatcher)
//! strings watches together so that the caller sees one stream with nothing lost between them.
//!
//! ## A watch that goes silent
//!
//! A connection can die without a word (the server's host lost power, a NAT forgot the
//! connection): no FIN, no RST, the body just stops. So each watch has an idle deadline, taken
//! from what the server promised when it was opened ([`WatchParams::idle_timeout`] overrides it):
//!
//! - with bookmarks allowed, kube-apiserver sends one roughly every minute (its watch cache's
//!   `bookmarkFrequency`; the embedded server does the same), so 60 s of silence is already
//!   wrong: the deadline is [`BOOKMARK_PROMISE`] + [`IDLE_GRACE`];
//! - with `timeoutSeconds`, the server ends the watch by then: that time + [`IDLE_GRACE`];
//! - with neither, nothing was promised and there is no deadline (TCP keepalive, and the pings
//!   with HTTP/2, are then all there is).
//!
//! Past the deadline the stream yields [`Error::Idle`] and ends; a [`ResumingWatcher`](crate::watcher::ResumingWatcher), like the
//! informers' reflector, resumes from the last resourceVersion. The informers also give up a
//! watch quiet for much less (`ReflectorOptions::watch_idle_timeout`, 15 s), which finds a dead
//! connection sooner at the cost of one watch request per quiet interval.
//!
//! One event is at most [`MAX_EVENT_BYTES`]: a longer line (a hostile or broken server) yields
//! [`Error::TooLarge`] instead of growing the buffer without end.
//!
//! [`WatchParams::idle_timeout`]: crate::api::WatchParams::idle_timeout

mod decoder;
pub(crate) mod event;

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ferrokube_core::ManagedFields;
use futures_util::Stream;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

pub use decoder::{LineDecoder, decode_event, decode_event_with};
pub use event::{Bookmark, WatchEvent};

use crate::error::Error;

/// How often a server that allows bookmarks sends one at the latest, give or take: kube-apiserver's
/// watch cache aims at every minute (`bookmarkFrequency`), as does the embedded server.
pub const BOOKMARK_PROMISE: Duration = Duration::from_secs(60);
/// How much later than promised a bookmark or the end of a watch may come before the watch is
/// presumed dead (a busy server's dispatch, clock steps).
pub const IDLE_GRACE: Duration = Duration::from_secs(30);
/// The longest watch event the client reads: 32 MiB. kube-apiserver refuses request bodies over
/// 3 MiB and etcd values over 1.5 MiB by default, so a real object's JSON is far below this.
pub const MAX_EVENT_BYTES: usize = 32 << 20;

/// The idle deadline of a watch opened with `timeout_seconds` and `bookmarks` (see the
/// [module docs](self)).
pub fn promised_idle(timeout_seconds: Option<u32>, bookmarks: bool) -> Option<Duration> {
    let by_timeout =
        timeout_seconds.map(|secs| Duration::from_secs(u64::from(secs)).saturating_add(IDLE_GRACE));
    let by_bookmarks = bookmarks.then(|| BOOKMARK_PROMISE.saturating_add(IDLE_GRACE));
    match (by_timeout, by_bookmarks) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One open watch. Yields events until the server ends the response; a malformed line yields one
/// [`Error::Decode`] and then the stream ends.
pub struct WatchStream<K> {
    inner: Pin<Box<dyn Stream<Item = Result<WatchEvent<K>, Error>> + Send>>,
}

/// How the events are framed: JSON lines, or (`application/vnd.kubernetes.protobuf;stream=watch`)
/// length-prefixed protobuf frames.
enum Framing {
    Lines(LineDecoder),
    Frames(crate::protobuf::FrameDecoder),
}

struct State {
    body: crate::client::ResponseBody,
    decoder: Framing,
    url: String,
    /// The longest the body may stay silent; `None`: forever.
    idle: Option<Duration>,
    /// Whether the events' objects keep `metadata.managedFields`.
    managed_fields: ManagedFields,
    finished: bool,
}

impl<K: DeserializeOwned + Send + 'static> WatchStream<K> {
    /// A watch over `body`, presumed dead after `idle` without a byte.
    pub(crate) fn new(
        body: crate::client::ResponseBody,
        url: String,
        idle: Option<Duration>,
        managed_fields: ManagedFields,
        protobuf: bool,
    ) -> WatchStream<K> {
        let decoder = match protobuf {
            true => Framing::Frames(crate::protobuf::FrameDecoder::new(MAX_EVENT_BYTES)),
            false => Framing::Lines(LineDecoder::new()),
        };
        let state = State {
            body,
            decoder,
            url,
            idle,
            managed_fields,
            finished: false,
        };
        let inner = futures_util::stream::unfold(state, |mut state| async move {
            let item = next_event::<K>(&mut state).await?;
            if item.is_err() {
                state.finished = true;
            }
            Some((item, state))
        });
        WatchStream {
            inner: Box::pin(inner),
        }
    }
}

async fn next_event<K: DeserializeOwned>(
    state: &mut State,
) -> Option<Result<WatchEvent<K>, Error>> {
    if state.finished {
        return None;
    }
    loop {
        match &mut state.decoder {
            Framing::Lines(lines) => {
                if let Some(line) = lines.next_line() {
                    if line.len() > MAX_EVENT_BYTES {
                        return Some(Err(too_large(state)));
                    }
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Some(decoder::decode_event_with(&line, state.managed_fields));
                }
                if lines.buffered() > MAX_EVENT_BYTES {
                    return Some(Err(too_large(state)));
                }
            }
            Framing::Frames(frames) => match frames.next_frame() {
                Ok(Some(frame)) => {
                    return Some(
                        crate::protobuf::decode_event(&frame, state.managed_fields).map_err(
                            |source| Error::DecodeProtobuf {
                                what: "a watch event".to_string(),
                                source,
                            },
                        ),
                    );
                }
                Ok(None) => {}
                Err(crate::protobuf::Error::FrameTooLarge { .. }) => {
                    return Some(Err(too_large(state)));
                }
                Err(source) => {
                    return Some(Err(Error::DecodeProtobuf {
                        what: "a watch event".to_string(),
                        source,
                    }));
                }
            },
        }
        let frame = match state.idle {
            Some(idle) => match tokio::time::timeout(idle, state.body.frame()).await {
                Ok(frame) => frame,
                Err(_) => {
                    tracing::debug!(url = %state.url, ?idle, "watch silent past its deadline; presumed dead");
                    return Some(Err(Error::Idle {
                        url: state.url.clone(),
                        after: idle,
                    }));
                }
            },
            None => state.body.frame().await,
        };
        match frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    match &mut state.decoder {
                        Framing::Lines(lines) => lines.push(data),
                        Framing::Frames(frames) => frames.push(data),
                    }
                }
            }
            Some(Err(source)) => {
                return Some(Err(crate::client::body_error(source, &state.url)));
            }
            None => {
                state.finished = true;
                return match &mut state.decoder {
                    Framing::Lines(lines) => lines.finish().map(|rest| decode_event(&rest)),
                    Framing::Frames(frames) => frames.finish().err().map(|source| {
                        Err(Error::DecodeProtobuf {
                            what: "a watch event".to_string(),
                            source,
                        })
                    }),
                };
            }
        }
    }
}

fn too_large(state: &mut State) -> Error {
    state.finished = true;
    Error::TooLarge {
        what: "a watch event",
        url: state.url.clone(),
        limit: MAX_EVENT_BYTES,
    }
}

impl<K> Stream for WatchStream<K> {
    type Item = Result<WatchEvent<K>, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
