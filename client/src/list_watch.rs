//! The client side of the informer seam: `Api<K>` as a [`ListerWatcher`], and `Client` as the
//! [`ListerWatcherSource`] a [`SharedInformerFactory`](ferrokube_informer::SharedInformerFactory) uses.
//!
//! The informer crate knows nothing of HTTP; this module translates. A list request becomes
//! [`ListParams`] (`resourceVersion`, `resourceVersionMatch`, `limit`, `continue`), a watch request
//! becomes [`WatchParams`], each [`WatchEvent`] becomes an informer [`Event`], and each client
//! [`Error`] becomes the [`ListWatchError`] that tells the reflector how to recover:
//!
//! | client error | reflector sees | recovery |
//! |---|---|---|
//! | 410 Gone / Expired (HTTP or in-stream) | `Gone` | relist |
//! | 429, 5xx, server timeout, transport, our timeout, a malformed event | `Unavailable` | back off, resume |
//! | any other status (400, 403, 422, …), a bad request | `Rejected` | back off, relist |

use ferrokube_core::{Kind, Object, Scope};
use ferrokube_informer::{
    Event, EventStream, ListPage, ListRequest, ListVersion, ListWatchError, ListerWatcher,
    ListerWatcherSource, Prepare, WatchRequest,
};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use std::sync::Arc;

use crate::api::{Api, ListParams, ObjectList, VersionMatch, WatchParams};
use crate::client::Client;
use crate::error::Error;
use crate::watch::WatchEvent;

/// An [`Api`] with the selectors an informer filters by: the client's form of a [`Scope`] (the
/// namespace is the `Api`'s). `ListWatch::new(api)` covers everything the `Api` can see (its
/// namespace, or all); [`ListWatch::scoped`] exactly a scope's objects.
#[derive(Debug, Clone)]
#[must_use]
pub struct ListWatch<K> {
    api: Api<K>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    shard_selector: Option<String>,
}

impl<K: Kind> ListWatch<K> {
    /// The objects of `scope`, through `client`: [`Api::all_with`] (of the kind `dynamic` names:
    /// `&()` for a typed kind) narrowed to the scope's namespace (ignored for a cluster-scoped
    /// kind), with its label, field and shard selectors. The one translation of a [`Scope`] into a list
    /// and watch.
    pub fn scoped(client: Client, dynamic: &K::DynamicType, scope: &Scope) -> ListWatch<K> {
        let mut api = Api::<K>::all_with(client, dynamic);
        if let Some(namespace) = &scope.namespace {
            api = api.in_namespace(namespace);
        }
        let mut list_watch = ListWatch::new(api);
        if let Some(selector) = &scope.label_selector {
            list_watch = list_watch.labels(selector);
        }
        if let Some(selector) = &scope.field_selector {
            list_watch = list_watch.fields(selector);
        }
        if let Some(selector) = &scope.shard {
            list_watch = list_watch.shard_selector(&selector.to_string());
        }
        list_watch
    }
}

impl<K: Object> ListWatch<K> {
    pub fn new(api: Api<K>) -> ListWatch<K> {
        ListWatch {
            api,
            label_selector: None,
            field_selector: None,
            shard_selector: None,
        }
    }
    /// Only objects whose labels match, e.g. `app=web`.
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }
    /// Only objects whose fields match, e.g. `spec.nodeName=node-1`.
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }
    /// Only one shard, as the server applies it (`shardSelector`; see [`ListParams::shard_selector`]).
    pub fn shard_selector(mut self, selector: &str) -> Self {
        self.shard_selector = Some(selector.to_string());
        self
    }
}

impl<K: Object> ListWatch<K> {
    /// One page, each object prepared as it is decoded; `tell` hears the page's metadata as soon
    /// as it has arrived.
    async fn prepared_page(
        &self,
        request: ListRequest,
        prepare: &Prepare<K>,
        tell: impl FnOnce(&ListMeta),
    ) -> Result<ListPage<Arc<K>>, ListWatchError> {
        let list = self
            .api
            .list_mapped_with_metadata(&self.list_params(request), prepare, tell)
            .await
            .map_err(classify)?;
        Ok(page_of(list))
    }

    fn list_params(&self, request: ListRequest) -> ListParams {
        let (version, matching) = match request.version {
            ListVersion::Latest => (None, None),
            ListVersion::Any => (Some("0".to_string()), None),
            ListVersion::NotOlderThan(v) => (Some(v), Some(VersionMatch::NotOlderThan)),
        };
        ListParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            shard_selector: self.shard_selector.clone(),
            limit: request.limit,
            continue_token: request.continue_token,
            resource_version: version,
            version_match: matching,
            managed_fields: request.managed_fields,
        }
    }
}

impl<K: Object> ListerWatcher<K> for ListWatch<K> {
    async fn list(&self, request: ListRequest) -> Result<ListPage<K>, ListWatchError> {
        let list = self
            .api
            .list(&self.list_params(request))
            .await
            .map_err(classify)?;
        Ok(page_of(list))
    }

    /// Decodes the page one object at a time, each prepared (transformed) before the next is read.
    async fn list_prepared(
        &self,
        request: ListRequest,
        prepare: &Prepare<K>,
    ) -> Result<ListPage<Arc<K>>, ListWatchError> {
        self.prepared_page(request, prepare, |_| {}).await
    }

    /// As `list_prepared`, telling the continue token as soon as the page's `metadata` has
    /// arrived (before its items).
    async fn list_prepared_early(
        &self,
        request: ListRequest,
        prepare: &Prepare<K>,
        continue_token: tokio::sync::oneshot::Sender<Option<String>>,
    ) -> Result<ListPage<Arc<K>>, ListWatchError> {
        let tell = |metadata: &ListMeta| {
            // The reflector may have stopped listening; nothing to tell then.
            let _ = continue_token.send(metadata.continue_.clone());
        };
        self.prepared_page(request, prepare, tell).await
    }

    async fn watch(&self, request: WatchRequest) -> Result<EventStream<K>, ListWatchError> {
        let params = WatchParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            shard_selector: self.shard_selector.clone(),
            timeout_seconds: request.timeout_seconds,
            allow_bookmarks: request.allow_bookmarks,
            send_initial_events: request.send_initial_events,
            managed_fields: request.managed_fields,
            ..WatchParams::default()
        };
        let stream = self
            .api
            .watch(&params, &request.resource_version)
            .await
            .map_err(classify)?;
        Ok(stream
            .map(|item| match item {
                Ok(WatchEvent::Added(object)) => Ok(Event::Added(object)),
                Ok(WatchEvent::Modified(object)) => Ok(Event::Modified(object)),
                Ok(WatchEvent::Deleted(object)) => Ok(Event::Deleted(object)),
                Ok(WatchEvent::Bookmark(bookmark)) => Ok(Event::Bookmark {
                    initial_events_end: bookmark.is_initial_events_end(),
                    resource_version: bookmark.resource_version,
                }),
                Ok(WatchEvent::Error(status)) => Err(classify(Error::Api(status))),
                Err(error) => Err(classify(error)),
            })
            .boxed())
    }
}

/// Everything the `Api` sees, no selectors.
impl<K: Object> ListerWatcher<K> for Api<K> {
    async fn list(&self, request: ListRequest) -> Result<ListPage<K>, ListWatchError> {
        ListWatch::new(self.clone()).list(request).await
    }
    async fn list_prepared(
        &self,
        request: ListRequest,
        prepare: &Prepare<K>,
    ) -> Result<ListPage<Arc<K>>, ListWatchError> {
        ListWatch::new(self.clone())
            .list_prepared(request, prepare)
            .await
    }
    async fn list_prepared_early(
        &self,
        request: ListRequest,
        prepare: &Prepare<K>,
        continue_token: tokio::sync::oneshot::Sender<Option<String>>,
    ) -> Result<ListPage<Arc<K>>, ListWatchError> {
        ListWatch::new(self.clone())
            .list_prepared_early(request, prepare, continue_token)
            .await
    }
    async fn watch(&self, request: WatchRequest) -> Result<EventStream<K>, ListWatchError> {
        ListWatch::new(self.clone()).watch(request).await
    }
}

/// A decoded list as the informer's page: its items, resourceVersion and continue token.
fn page_of<T>(list: ObjectList<T>) -> ListPage<T> {
    ListPage {
        resource_version: list.resource_version().to_string(),
        continue_token: list.metadata.continue_.clone(),
        items: list.items,
    }
}

/// Which recovery an error calls for (see the [module docs](self)).
pub fn classify(error: Error) -> ListWatchError {
    let unavailable = error.is_too_many_requests() || error.is_server_error() || error.is_timeout();
    match error {
        error if error.is_gone() => ListWatchError::Gone(Box::new(error)),
        error @ Error::Api(_) if !unavailable => ListWatchError::Rejected(Box::new(error)),
        error @ (Error::InvalidRequest(_) | Error::Config(_)) => {
            ListWatchError::Rejected(Box::new(error))
        }
        error => ListWatchError::Unavailable(Box::new(error)),
    }
}

/// A factory's informers list and watch through this client: `Api::all` for `Scope::all()`
/// (and for cluster-scoped types), `Api::namespaced` otherwise.
impl ListerWatcherSource for Client {
    type ListerWatcher<K: Kind> = ListWatch<K>;

    fn lister_watcher<K: Kind>(&self, dynamic: &K::DynamicType, scope: &Scope) -> ListWatch<K> {
        ListWatch::scoped(self.clone(), dynamic, scope)
    }
}
