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
//! apiserver restart) or after yielding a decode error for a malformed line. [`ResumingWatcher`]
//! strings watches together so that the caller sees one stream with nothing lost between them.

mod decoder;
mod resuming;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::de::DeserializeOwned;

pub use decoder::{LineDecoder, decode_event};
pub use resuming::{ResumingWatcher, WatchError};

use crate::error::{ApiError, Error};

/// One change, as the API server reports it.
#[derive(Debug, Clone)]
pub enum WatchEvent<K> {
    Added(K),
    Modified(K),
    /// The object's last state.
    Deleted(K),
    /// Nothing changed, but the stream has reached this resourceVersion.
    Bookmark(Bookmark),
    /// The server's `Status` (decoded; e.g. 410 "too old resource version").
    Error(Box<ApiError>),
}

/// A BOOKMARK event's content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bookmark {
    pub resource_version: String,
    pub annotations: BTreeMap<String, String>,
}

impl Bookmark {
    /// True for the bookmark that ends the initial events of a streaming list.
    pub fn is_initial_events_end(&self) -> bool {
        self.annotations
            .get("k8s.io/initial-events-end")
            .is_some_and(|v| v == "true")
    }
}

/// One open watch. Yields events until the server ends the response; a malformed line yields one
/// [`Error::Decode`] and then the stream ends.
pub struct WatchStream<K> {
    inner: Pin<Box<dyn Stream<Item = Result<WatchEvent<K>, Error>> + Send>>,
}

struct State {
    body: Incoming,
    decoder: LineDecoder,
    url: String,
    finished: bool,
}

impl<K: DeserializeOwned + Send + 'static> WatchStream<K> {
    pub(crate) fn new(body: Incoming, url: String) -> WatchStream<K> {
        let state = State {
            body,
            decoder: LineDecoder::new(),
            url,
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
        if let Some(line) = state.decoder.next_line() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(decode_event(&line));
        }
        match state.body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    state.decoder.push(data);
                }
            }
            Some(Err(source)) => {
                return Some(Err(Error::Transport {
                    url: state.url.clone(),
                    source: Box::new(source),
                }));
            }
            None => {
                state.finished = true;
                return state.decoder.finish().map(|rest| decode_event(&rest));
            }
        }
    }
}

impl<K> Stream for WatchStream<K> {
    type Item = Result<WatchEvent<K>, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
