//! What a watch stream yields, in either encoding: the event type both decoders (JSON lines in
//! `decoder.rs`, protobuf frames in `crate::protobuf`) produce.
//!
//! A module of its own, importing neither decoder, so that both can name it without the watch
//! module and the protobuf module importing each other.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

use crate::error::ApiError;

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

/// An ERROR event's `Status` as the event, in either encoding: its `code`, else 500.
pub(crate) fn error_event<K>(status: Status) -> WatchEvent<K> {
    let code = status
        .code
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(500);
    WatchEvent::Error(Box::new(ApiError::from_status(status, code)))
}
