//! The seam between the informer and the API server: list a collection, watch it from a version.
//!
//! The [`Reflector`](crate::Reflector) needs exactly two calls, so that is the whole trait. The
//! client's `Api<K>` implements it (in the `ferrokube` crate) and so does the in-memory
//! [`FakeListerWatcher`](crate::fake::FakeListerWatcher), which is how every informer behaviour is
//! tested without HTTP. Selectors and the namespace are not parameters here: they belong to the
//! implementation (one `ListerWatcher` is one filtered view of one resource), as with client-go's
//! `ListWatch` built by `NewFilteredListWatchFromClient`.

use std::future::Future;
use std::sync::Arc;

use ferrokube_core::ManagedFields;
use futures_util::stream::BoxStream;

/// Any error, boxed, as the cause of a [`ListWatchError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the reflector has to tell apart in a failure, because each asks for a different recovery.
#[derive(Debug, thiserror::Error)]
pub enum ListWatchError {
    /// 410: the resourceVersion (or continue token) is older than the server keeps. Relist from the
    /// latest version.
    #[error("resource version too old (410): {0}")]
    Gone(#[source] BoxError),
    /// The server refused the request as such (400, 403, 422, …): retrying it unchanged will fail
    /// again. A streaming-list request refused this way means the server does not support it.
    #[error("request refused: {0}")]
    Rejected(#[source] BoxError),
    /// The server could not be reached or answered 429/5xx/timeout: try again after a backoff.
    #[error("server unavailable: {0}")]
    Unavailable(#[source] BoxError),
}

/// Which version a list should reflect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListVersion {
    /// `resourceVersion=""`: the latest, read from etcd (a consistent read).
    Latest,
    /// `resourceVersion="0"`: whatever the server has at hand (the watch cache), possibly old.
    Any,
    /// `resourceVersion=v&resourceVersionMatch=NotOlderThan`: at least as new as `v`.
    NotOlderThan(String),
}

/// One list call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    pub version: ListVersion,
    /// Page size; `None` for everything at once.
    pub limit: Option<u32>,
    /// The previous page's continue token.
    pub continue_token: Option<String>,
    /// Whether the objects keep `metadata.managedFields`; with [`ManagedFields::Drop`] an
    /// implementation that decodes should skip them unbuilt (the client's `ListWatch` does). The
    /// reflector drops whatever still arrives.
    pub managed_fields: ManagedFields,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage<K> {
    pub items: Vec<K>,
    /// The collection's resourceVersion: the snapshot all pages come from.
    pub resource_version: String,
    /// Present when more pages follow.
    pub continue_token: Option<String>,
}

/// One watch call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRequest {
    /// Start after this version (`""`: the server picks; with `send_initial_events`, the latest).
    pub resource_version: String,
    /// Ask the server to end the watch after this many seconds.
    pub timeout_seconds: Option<u32>,
    /// Ask for BOOKMARK events.
    pub allow_bookmarks: bool,
    /// Streaming list: an ADDED per existing object first, then a bookmark marking the end of them.
    pub send_initial_events: bool,
    /// As [`ListRequest::managed_fields`].
    pub managed_fields: ManagedFields,
}

/// One change on a watch stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<K> {
    Added(K),
    Modified(K),
    /// The object's last state.
    Deleted(K),
    /// No change; the stream has reached `resource_version`. `initial_events_end` marks the end of
    /// a streaming list's initial events (annotation `k8s.io/initial-events-end`).
    Bookmark {
        resource_version: String,
        initial_events_end: bool,
    },
}

/// The events of one open watch. The stream ends when the server ends the watch; an error item
/// (e.g. an in-stream 410) is the last item.
pub type EventStream<K> = BoxStream<'static, Result<Event<K>, ListWatchError>>;

/// Turns a decoded object into the shared, transformed copy the informer keeps.
pub type Prepare<K> = dyn Fn(K) -> Arc<K> + Send + Sync;

/// Rewrites each object as it arrives from the server, before anything keeps it, e.g. to drop
/// `managedFields`.
pub type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Lists and watches one resource (one namespace or all, one set of selectors).
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// One page of the collection.
    fn list(
        &self,
        request: ListRequest,
    ) -> impl Future<Output = Result<ListPage<K>, ListWatchError>> + Send;

    /// One page, each object turned into what the store keeps (`prepare`: the informer's transform,
    /// then an `Arc`) as soon as it is decoded. The default lists the page, then prepares each
    /// object; an implementation that decodes objects one by one (the client's `ListWatch`)
    /// overrides it, so that a transform that drops fields keeps the full-size page from ever
    /// existing in memory at once.
    fn list_prepared(
        &self,
        request: ListRequest,
        prepare: &Prepare<K>,
    ) -> impl Future<Output = Result<ListPage<Arc<K>>, ListWatchError>> + Send {
        async move {
            let page = self.list(request).await?;
            Ok(ListPage {
                items: page.items.into_iter().map(prepare).collect(),
                resource_version: page.resource_version,
                continue_token: page.continue_token,
            })
        }
    }

    /// [`list_prepared`](Self::list_prepared), and the page's continue token (`None` on the last
    /// page) sent to `continue_token` as soon as it is known, so that the reflector can ask for
    /// the next page while this one is still arriving. A list body carries its `metadata` (and
    /// the token) before its items; an implementation that decodes the body as it streams in (the
    /// client's `ListWatch`) sends the token from there. The default sends it once the page is
    /// complete, which makes the pages sequential.
    fn list_prepared_early(
        &self,
        request: ListRequest,
        prepare: &Prepare<K>,
        continue_token: tokio::sync::oneshot::Sender<Option<String>>,
    ) -> impl Future<Output = Result<ListPage<Arc<K>>, ListWatchError>> + Send {
        async move {
            let page = self.list_prepared(request, prepare).await?;
            // The reflector may have stopped listening (an error elsewhere); nothing to tell.
            let _ = continue_token.send(page.continue_token.clone());
            Ok(page)
        }
    }

    /// Opens a watch.
    fn watch(
        &self,
        request: WatchRequest,
    ) -> impl Future<Output = Result<EventStream<K>, ListWatchError>> + Send;
}
