//! The API verbs on one kind of resource: `Api<Pod>`, `Api<ReplicaSet>`, or `Api<DynamicObject>` for
//! any group/version/resource (CRDs).
//!
//! An `Api` is a [`Client`] plus *where* the resource lives:
//!
//! ```text
//!   /api/v1/namespaces/{ns}/pods/{name}/status
//!   └─ prefix ─┘└── namespace ──┘└plural┘└name┘└subresource┘
//!   /apis/apps/v1/replicasets                      (all namespaces, or a cluster-scoped kind)
//! ```
//!
//! Typed APIs take that from k8s-openapi's [`Resource`](k8s_openapi::Resource) constants; dynamic ones
//! from an [`ApiResource`] given at run time. Both share every verb, so there is one implementation of
//! each. Objects are plain serde types; all the client needs from one is its `metadata` ([`Object`]).
//!
//! Each write verb, once the server has committed it, tells the client handle's
//! [write observers](crate::write_observer) (if it has any) what the server answered, before it
//! returns: the one place a layer above learns of a controller's writes.

pub mod decode;
mod dynamic;
pub(crate) mod list;
pub(crate) mod object_list;
mod params;
mod query;

use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, Status};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use dynamic::DynamicObject;
pub use list::ListDecoder;
pub use object_list::ObjectList;
pub use params::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
    VersionMatch, WatchParams,
};
use query::Query;

use ferrokube_core::Object;

use crate::client::{Call, Client, ProtobufUse};
use crate::error::Error;
use crate::watch::WatchStream;
use crate::write_observer::{DeleteNote, DeleteOutcome, WriteObserver};
use ferrokube_core::ObjectKey;
use ferrokube_core::{ApiResource, Kind};

/// What a delete answered: the object itself while it waits on finalizers or a grace period, or a
/// `Status` once it is gone.
#[derive(Debug, Clone)]
pub enum Deleted<K> {
    Pending(K),
    Gone(Box<Status>),
}

/// The verbs on one resource, in one namespace or all of them. See the [module docs](self).
#[derive(Clone)]
pub struct Api<K> {
    client: Client,
    resource: ApiResource,
    /// `None`: all namespaces, or a cluster-scoped resource.
    namespace: Option<String>,
    /// Reads ask for protobuf and creates and updates send it: a built-in kind (in core's
    /// protobuf schema), through its typed API, with a client that prefers protobuf
    /// ([`Config::content_type`]). Never for [`DynamicObject`] or a custom resource, nor patches.
    ///
    /// [`Config::content_type`]: crate::Config::content_type
    protobuf: bool,
    kind: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for Api<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<K: k8s_openapi::Resource<Scope = NamespaceResourceScope>> Api<K> {
    /// A namespaced resource in `namespace`.
    pub fn namespaced(client: Client, namespace: &str) -> Api<K> {
        let resource = ApiResource::of::<K>();
        Api {
            protobuf: speaks_protobuf(&client, &resource),
            client,
            resource,
            namespace: Some(namespace.to_string()),
            kind: PhantomData,
        }
    }

    /// A namespaced resource in the config's default namespace.
    pub fn default_namespaced(client: Client) -> Api<K> {
        let namespace = client.default_namespace().to_string();
        Api::namespaced(client, &namespace)
    }
}

impl<K: k8s_openapi::Resource> Api<K> {
    /// A namespaced resource across all namespaces (list and watch), or a cluster-scoped one.
    pub fn all(client: Client) -> Api<K> {
        let resource = ApiResource::of::<K>();
        Api {
            protobuf: speaks_protobuf(&client, &resource),
            client,
            resource,
            namespace: None,
            kind: PhantomData,
        }
    }
}

impl<K: k8s_openapi::Resource<Scope = ClusterResourceScope>> Api<K> {
    /// A cluster-scoped resource (same as [`Api::all`]).
    pub fn cluster(client: Client) -> Api<K> {
        Api::all(client)
    }
}

impl Api<DynamicObject> {
    /// Any resource, described at run time; `namespace` is ignored for cluster-scoped ones.
    pub fn dynamic(
        client: Client,
        resource: ApiResource,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        let namespace = namespace
            .filter(|_| resource.namespaced)
            .map(str::to_string);
        Api {
            client,
            resource,
            namespace,
            protobuf: false,
            kind: PhantomData,
        }
    }
}

impl<K: Kind> Api<K> {
    /// [`Api::all`] for code generic over the kind, typed or not: the kind is named by `dynamic`
    /// (`&()` for a typed kind, the [`ApiResource`] for a [`DynamicObject`]).
    pub fn all_with(client: Client, dynamic: &K::DynamicType) -> Api<K> {
        let resource = K::api_resource(dynamic);
        // A typed kind names itself (`DynamicType = ()`); a `DynamicObject` stays JSON.
        let typed = std::any::TypeId::of::<K::DynamicType>() == std::any::TypeId::of::<()>();
        Api {
            protobuf: typed && speaks_protobuf(&client, &resource),
            client,
            resource,
            namespace: None,
            kind: PhantomData,
        }
    }
}

impl<K: Object> Api<K> {
    /// The same resource in `namespace`, ignored for a cluster-scoped kind: for code generic over
    /// the kind's scope (an informer's list and watch, a controller's children), where
    /// [`namespaced`](Self::namespaced) would not compile for every `K`.
    pub fn in_namespace(mut self, namespace: &str) -> Api<K> {
        if self.resource.namespaced {
            self.namespace = Some(namespace.to_string());
        }
        self
    }

    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Whether reads (get, list, watch) ask for protobuf (see [`crate::protobuf`]): a built-in
    /// kind through its typed API with a client that prefers protobuf, unless the server refused
    /// to answer a read of the resource in protobuf (406, or 415) before, after which they ask
    /// for JSON only. Remembered by the client, for every `Api` of the resource.
    pub fn reads_protobuf(&self) -> bool {
        self.protobuf && !self.refused(ProtobufUse::Answers)
    }

    /// Whether creates and updates send protobuf bodies: a built-in kind through its typed API
    /// with a client that prefers protobuf, unless the server refused a protobuf body for the
    /// resource (415) before, after which they go as JSON. Remembered by the client, for every
    /// `Api` of the resource.
    pub fn writes_protobuf(&self) -> bool {
        self.protobuf && !self.refused(ProtobufUse::Bodies)
    }

    /// Whether the client remembers the server refusing protobuf `what` for this resource.
    fn refused(&self, what: ProtobufUse) -> bool {
        self.client.protobuf_refused(what, &self.refusal_key())
    }

    /// A read of this resource was refused in protobuf: remembered, so that later reads (any
    /// `Api` of the client's) ask for JSON at once rather than be refused again first.
    fn note_read_refused(&self, error: &Error) {
        let resource = self.refusal_key();
        tracing::debug!(
            %resource,
            %error,
            "the server will not answer in protobuf: reading JSON from now on"
        );
        self.client.refuse_protobuf(ProtobufUse::Answers, &resource);
    }

    /// The key under which the client remembers a refused protobuf body or answer:
    /// `apiVersion/plural`.
    fn refusal_key(&self) -> String {
        format!("{}/{}", self.resource.api_version(), self.resource.plural)
    }

    /// The same `Api`, reading and writing JSON only (`false`) or, for a built-in kind through
    /// its typed API with a client that prefers it, protobuf (`true`).
    pub fn with_protobuf(mut self, on: bool) -> Api<K> {
        self.protobuf = on && speaks_protobuf(&self.client, &self.resource);
        self
    }

    /// The same `Api`, whose committed writes are also reported to `observer`: see
    /// [`Client::with_write_observer`].
    pub fn with_write_observer(mut self, observer: Arc<dyn WriteObserver>) -> Api<K> {
        self.client = self.client.with_write_observer(observer);
        self
    }

    fn collection_path(&self) -> String {
        match &self.namespace {
            Some(ns) => format!(
                "{}/namespaces/{}/{}",
                self.resource.path_prefix(),
                ns,
                self.resource.plural
            ),
            None => format!("{}/{}", self.resource.path_prefix(), self.resource.plural),
        }
    }

    fn object_path(&self, name: &str, subresource: Option<&str>) -> Result<String, Error> {
        check_segment(name)?;
        if let Some(ns) = &self.namespace {
            check_segment(ns)?;
        }
        let mut path = format!("{}/{}", self.collection_path(), name);
        if let Some(sub) = subresource {
            path.push('/');
            path.push_str(sub);
        }
        Ok(path)
    }

    fn call(&self, method: Method, path_and_query: String, body: Bytes) -> Result<Call, Error> {
        let request = Request::builder()
            .method(method.clone())
            .uri(path_and_query)
            .body(body)
            .map_err(|e| Error::InvalidRequest(e.to_string()))?;
        Ok(Call {
            request,
            idempotent: method == Method::GET,
            streaming: false,
        })
    }

    /// The object named `name`.
    pub async fn get(&self, name: &str) -> Result<K, Error> {
        self.get_subresource(name, None).await
    }

    /// The object named `name`, or `None` if it does not exist.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, Error> {
        match self.get(name).await {
            Ok(object) => Ok(Some(object)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The object with its status (`/status`; same body as `get` for built-in kinds).
    pub async fn get_status(&self, name: &str) -> Result<K, Error> {
        self.get_subresource(name, Some("status")).await
    }

    async fn get_subresource(&self, name: &str, sub: Option<&str>) -> Result<K, Error> {
        let path = self.object_path(name, sub)?;
        let protobuf = self.reads_protobuf();
        let first = self.read(path.clone(), protobuf).await;
        let (content_type, body) = match first {
            Err(error) if protobuf && refused_protobuf(&error) => {
                self.note_read_refused(&error);
                self.read(path.clone(), false).await?
            }
            other => other?,
        };
        decode_object(&path, content_type.as_deref(), &body)
    }

    /// A GET of `path`, asking for protobuf when `protobuf`; the answer's body and type.
    async fn read(&self, path: String, protobuf: bool) -> Result<(Option<String>, Bytes), Error> {
        let mut call = self.call(Method::GET, path, Bytes::new())?;
        if protobuf {
            accept_protobuf(&mut call);
        }
        self.client.request_typed_bytes(call).await
    }

    /// One page (or, without a limit, all) of the objects `params` selects.
    pub async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        self.list_mapped(params, |object| object).await
    }

    /// Whether the server applies shard selectors to this resource (server-side sharded list and
    /// watch, Kubernetes 1.36+ with the `ShardedListAndWatch` feature gate): found out, not
    /// configured, by one list of at most one object over the whole hash space, which such a
    /// server answers with `metadata.shardInfo` and any other without (it ignores the parameter).
    pub async fn supports_shard_selector(&self) -> Result<bool, Error> {
        let everything = ferrokube_core::shard::ShardSelector::uid(
            ferrokube_core::shard::ShardRange::everything(),
        );
        let params = ListParams::default().limit(1).shard(&everything);
        let list = self.list_mapped(&params, |_| ()).await?;
        Ok(list.shard_selector().is_some())
    }

    /// Lists, passing each object through `map` as soon as it is decoded, while the rest of the
    /// body is still arriving: only what `map` returns is kept, so a list never holds the whole
    /// response body or every full-size object at once (e.g. `map` drops `managedFields`, or keeps
    /// just the names).
    pub async fn list_mapped<T>(
        &self,
        params: &ListParams,
        map: impl FnMut(K) -> T,
    ) -> Result<ObjectList<T>, Error> {
        self.list_mapped_with_metadata(params, map, |_| {}).await
    }

    /// [`list_mapped`](Self::list_mapped), calling `on_metadata` with the list's metadata
    /// (resourceVersion, continue token) the moment it has arrived: kube-apiserver sends it before
    /// the items, so a caller that pages can ask for the next page while this one is still
    /// arriving (an informer's list does). Called once, at the latest when the body ends.
    pub async fn list_mapped_with_metadata<T>(
        &self,
        params: &ListParams,
        map: impl FnMut(K) -> T,
        on_metadata: impl FnOnce(&ListMeta),
    ) -> Result<ObjectList<T>, Error> {
        let mut query = Query::default();
        params.write(&mut query);
        let path = self.collection_path() + &query.finish();
        let mut on_metadata = Some(on_metadata);
        let mut map = Some(map);
        let mut protobuf = self.reads_protobuf();
        loop {
            let mut call = self.call(Method::GET, path.clone(), Bytes::new())?;
            if protobuf {
                accept_protobuf(&mut call);
            }
            // Decided by the answer's Content-Type, at the first piece of the body.
            let mut decoder = None;
            let listed = self
                .client
                .request_chunks_typed(call, |content_type, chunk| {
                    if decoder.is_none() {
                        decoder = map
                            .take()
                            .map(|map| ListBody::new(content_type, map, params.managed_fields));
                    }
                    match &mut decoder {
                        Some(decoder) => decoder.push(chunk, &mut on_metadata, &path),
                        None => Ok(()),
                    }
                })
                .await;
            let content_type = match listed {
                // A server (or an aggregated API) that will not send protobuf: once more in JSON.
                Err(error) if protobuf && refused_protobuf(&error) && map.is_some() => {
                    self.note_read_refused(&error);
                    protobuf = false;
                    continue;
                }
                Err(error) => return Err(error),
                Ok(content_type) => content_type,
            };
            let decoder = match (decoder, map.take()) {
                (Some(decoder), _) => decoder,
                // An empty body: decoded (and refused) as what it claims to be.
                (None, Some(map)) => {
                    ListBody::new(content_type.as_deref(), map, params.managed_fields)
                }
                (None, None) => {
                    return Err(Error::InvalidRequest(
                        "a list body without a decoder".into(),
                    ));
                }
            };
            let list = decoder.finish(&path)?;
            if let Some(tell) = on_metadata.take() {
                tell(&list.metadata);
            }
            return Ok(list);
        }
    }

    /// Every page of the list, following `continue` tokens; the result carries the resourceVersion
    /// of the snapshot all pages came from. With no `limit` set, pages of 500 are asked for.
    pub async fn list_all(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let mut params = params.clone();
        params.limit = params.limit.or(Some(500));
        let mut all = self.list(&params).await?;
        while let Some(token) = all.metadata.continue_.take().filter(|t| !t.is_empty()) {
            params.continue_token = Some(token);
            // Later pages come from the first page's snapshot; a resourceVersion must not be resent.
            params.resource_version = None;
            params.version_match = None;
            let page = self.list(&params).await?;
            all.items.extend(page.items);
            all.metadata.continue_ = page.metadata.continue_;
            all.metadata.remaining_item_count = page.metadata.remaining_item_count;
        }
        Ok(all)
    }

    /// Creates `object` (set `metadata.generateName` instead of a name to let the server pick one).
    pub async fn create(&self, params: &PostParams, object: &K) -> Result<K, Error> {
        let mut query = Query::default();
        params.write(&mut query);
        let path = self.collection_path() + &query.finish();
        let created = self.write(Method::POST, path, object).await?;
        self.committed(&created, params.dry_run);
        Ok(created)
    }

    /// Replaces the object named `name` (optimistic concurrency: a stale
    /// `metadata.resourceVersion` is a 409 Conflict).
    pub async fn replace(&self, name: &str, params: &PostParams, object: &K) -> Result<K, Error> {
        self.replace_subresource(name, None, params, object).await
    }

    /// Replaces the status of the object named `name`; the rest of `object` is ignored.
    pub async fn replace_status(
        &self,
        name: &str,
        params: &PostParams,
        object: &K,
    ) -> Result<K, Error> {
        self.replace_subresource(name, Some("status"), params, object)
            .await
    }

    async fn replace_subresource(
        &self,
        name: &str,
        sub: Option<&str>,
        params: &PostParams,
        object: &K,
    ) -> Result<K, Error> {
        let mut query = Query::default();
        params.write(&mut query);
        let path = self.object_path(name, sub)? + &query.finish();
        let replaced = self.write(Method::PUT, path, object).await?;
        self.committed(&replaced, params.dry_run);
        Ok(replaced)
    }

    /// Sends `object` as the body of a create (POST) or an update (PUT) of `path`: as protobuf
    /// when this `Api` speaks it, the encoder can write the object, and the server has not
    /// refused a protobuf body for the resource before; else, or when the server answers 415 to
    /// the protobuf body (remembered for the resource), as JSON. The answer is asked for in
    /// protobuf as a read's is ([`reads_protobuf`](Self::reads_protobuf)). What client-go's
    /// clientsets do for built-in kinds, but for the fallbacks, which client-go does not have.
    async fn write(&self, method: Method, path: String, object: &K) -> Result<K, Error> {
        let resource = self.refusal_key();
        if self.writes_protobuf() {
            let encoded = ferrokube_core::protobuf::encode(
                object,
                &self.resource.api_version(),
                &self.resource.kind,
            );
            match encoded {
                Ok(body) => {
                    let mut call = self.call(method.clone(), path.clone(), Bytes::from(body))?;
                    if self.reads_protobuf() {
                        accept_protobuf(&mut call);
                    }
                    call.request.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static(crate::protobuf::CONTENT_TYPE),
                    );
                    match self.client.request_typed_bytes(call).await {
                        Ok((content_type, body)) => {
                            return decode_object(&path, content_type.as_deref(), &body);
                        }
                        Err(Error::Api(status)) if status.code == 415 => {
                            tracing::debug!(
                                %resource,
                                "the server refused a protobuf body (415): sending JSON from now on"
                            );
                            self.client.refuse_protobuf(ProtobufUse::Bodies, &resource);
                        }
                        Err(error) => return Err(error),
                    }
                }
                Err(error) => {
                    tracing::debug!(%resource, %error, "no protobuf form for this object: sending JSON");
                }
            }
        }
        let call = self.call(method, path, to_json(object)?)?;
        self.client.request(call).await
    }

    /// Patches the object named `name`.
    pub async fn patch<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        self.patch_subresource(name, None, params, patch).await
    }

    /// Patches the status of the object named `name`.
    pub async fn patch_status<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        self.patch_subresource(name, Some("status"), params, patch)
            .await
    }

    async fn patch_subresource<P: Serialize>(
        &self,
        name: &str,
        sub: Option<&str>,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        if patch.is_apply() && params.field_manager.is_none() {
            return Err(Error::InvalidRequest(
                "server-side apply needs PatchParams::field_manager".into(),
            ));
        }
        let mut query = Query::default();
        params.write(&mut query);
        let path = self.object_path(name, sub)? + &query.finish();
        let mut call = self.call(Method::PATCH, path, to_json(patch.body())?)?;
        call.request.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(patch.content_type()),
        );
        let patched = self.client.request(call).await?;
        self.committed(&patched, params.dry_run);
        Ok(patched)
    }

    /// Deletes the object named `name`.
    pub async fn delete(&self, name: &str, params: &DeleteParams) -> Result<Deleted<K>, Error> {
        let mut call = self.call(
            Method::DELETE,
            self.object_path(name, None)?,
            to_json(params)?,
        )?;
        call.idempotent = params.idempotent();
        let observers = match params.dry_run {
            true => &[],
            false => self.client.write_observers(),
        };
        if observers.is_empty() {
            let body = self.client.request_bytes(call).await?;
            return decode_deleted(&body);
        }
        let object = ObjectKey::new(self.namespace(), name);
        let notes: Vec<DeleteNote> = observers
            .iter()
            .map(|observer| observer.deleting(&self.resource, &object))
            .collect();
        let body = self.client.request_bytes(call).await?;
        let deleted: Deleted<K> = decode_deleted(&body)?;
        for (observer, note) in observers.iter().zip(notes) {
            let outcome = match &deleted {
                Deleted::Pending(still_there) => DeleteOutcome::Pending(still_there.meta()),
                Deleted::Gone(status) => DeleteOutcome::Gone {
                    uid: status.details.as_ref().and_then(|d| d.uid.as_deref()),
                },
            };
            observer.deleted(&self.resource, &object, note, outcome);
        }
        Ok(deleted)
    }

    /// Deletes the object named `name`, or answers `None` if it does not exist (404): for
    /// cleanups that must tolerate "already gone", which a cache that trails the server makes
    /// common (controller-runtime's `client.IgnoreNotFound`). Every other error is returned.
    pub async fn delete_opt(
        &self,
        name: &str,
        params: &DeleteParams,
    ) -> Result<Option<Deleted<K>>, Error> {
        match self.delete(name, params).await {
            Ok(deleted) => Ok(Some(deleted)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Tells this handle's write observers (if any) that the server committed `written`, unless
    /// the write was a dry run. See [`write_observer`](crate::write_observer).
    fn committed(&self, written: &K, dry_run: bool) {
        if dry_run {
            return;
        }
        for observer in self.client.write_observers() {
            observer.committed(&self.resource, written.meta());
        }
    }

    /// Deletes every object `list` selects; answers the deleted objects, or a `Status`.
    pub async fn delete_collection(
        &self,
        params: &DeleteParams,
        list: &ListParams,
    ) -> Result<Deleted<ObjectList<K>>, Error> {
        let mut query = Query::default();
        list.write(&mut query);
        let path = self.collection_path() + &query.finish();
        let call = self.call(Method::DELETE, path, to_json(params)?)?;
        let body = self.client.request_bytes(call).await?;
        decode_deleted(&body)
    }

    /// Watches the objects `params` selects, from `resource_version` (`""`: from now, after a
    /// synthetic ADDED for each existing object; `"0"`: from any point the server likes).
    pub async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, Error> {
        let mut query = Query::default();
        params.write(&mut query, resource_version);
        let path = self.collection_path() + &query.finish();
        let open = |protobuf: bool| {
            let mut call = self.call(Method::GET, path.clone(), Bytes::new())?;
            call.streaming = true;
            if protobuf {
                accept_protobuf(&mut call);
            }
            Ok::<_, Error>(call)
        };
        let protobuf = self.reads_protobuf();
        let call = open(protobuf)?;
        let url = call.request.uri().to_string();
        let response = match self.client.send(call).await {
            Err(error) if protobuf && refused_protobuf(&error) => {
                self.note_read_refused(&error);
                self.client.send(open(false)?).await?
            }
            other => other?,
        };
        let idle = params.idle_timeout.or_else(|| {
            crate::watch::promised_idle(params.timeout_seconds, params.allow_bookmarks)
        });
        let protobuf = crate::client::content_type(response.headers())
            .is_some_and(crate::protobuf::is_protobuf);
        Ok(WatchStream::new(
            response.into_body(),
            url,
            idle,
            params.managed_fields,
            protobuf,
        ))
    }
}

/// Whether the kind has a protobuf form (core's schema knows it) and the client prefers it.
fn speaks_protobuf(client: &Client, resource: &ApiResource) -> bool {
    client.prefers_protobuf()
        && ferrokube_core::protobuf::top_level(&resource.api_version(), &resource.kind).is_some()
}

/// Asks for protobuf, JSON accepted (what client-go's clientsets send for built-in kinds).
fn accept_protobuf(call: &mut Call) {
    call.request.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(crate::protobuf::ACCEPT),
    );
}

/// A server that will not answer in any encoding offered (406), or that refuses the request's
/// media type (415): asked again in JSON only.
fn refused_protobuf(error: &Error) -> bool {
    matches!(error, Error::Api(api) if api.code == 406 || api.code == 415)
}

/// One object's body, decoded by its Content-Type.
fn decode_object<K: DeserializeOwned>(
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<K, Error> {
    if content_type.is_some_and(crate::protobuf::is_protobuf) {
        return crate::protobuf::from_slice(body, ferrokube_core::ManagedFields::Keep).map_err(
            |source| Error::DecodeProtobuf {
                what: format!("the response of {path}"),
                source,
            },
        );
    }
    serde_json::from_slice(body).map_err(|source| Error::Decode {
        what: format!("the response of {path}"),
        source,
    })
}

/// A list body being decoded, in the encoding the server chose.
enum ListBody<K, T, F> {
    Json(list::ListDecoder<K, T, F>),
    Protobuf(crate::protobuf::ListDecoder<K, T, F>),
}

impl<K: DeserializeOwned, T, F: FnMut(K) -> T> ListBody<K, T, F> {
    fn new(
        content_type: Option<&str>,
        map: F,
        managed_fields: ferrokube_core::ManagedFields,
    ) -> Self {
        if content_type.is_some_and(crate::protobuf::is_protobuf) {
            ListBody::Protobuf(
                crate::protobuf::ListDecoder::new(map).managed_fields(managed_fields),
            )
        } else {
            ListBody::Json(list::ListDecoder::new(map).managed_fields(managed_fields))
        }
    }

    fn push(
        &mut self,
        chunk: &[u8],
        tell: &mut Option<impl FnOnce(&ListMeta)>,
        path: &str,
    ) -> Result<(), Error> {
        match self {
            ListBody::Json(decoder) => decoder
                .push_telling(chunk, tell)
                .map_err(|source| list_json_error(path, source)),
            ListBody::Protobuf(decoder) => decoder
                .push_telling(chunk, tell)
                .map_err(|source| list_protobuf_error(path, source)),
        }
    }

    fn finish(self, path: &str) -> Result<ObjectList<T>, Error> {
        match self {
            ListBody::Json(decoder) => decoder
                .finish()
                .map_err(|source| list_json_error(path, source)),
            ListBody::Protobuf(decoder) => decoder
                .finish()
                .map_err(|source| list_protobuf_error(path, source)),
        }
    }
}

fn list_json_error(path: &str, source: serde_json::Error) -> Error {
    Error::Decode {
        what: format!("the response of {path}"),
        source,
    }
}

fn list_protobuf_error(path: &str, source: crate::protobuf::Error) -> Error {
    Error::DecodeProtobuf {
        what: format!("the response of {path}"),
        source,
    }
}

/// A delete answers either the object (still there, being finalized) or a `Status`.
fn decode_deleted<T: DeserializeOwned>(body: &[u8]) -> Result<Deleted<T>, Error> {
    #[derive(Deserialize)]
    struct KindOnly {
        kind: Option<String>,
    }
    let decode_error = |source| Error::Decode {
        what: "a delete response".into(),
        source,
    };
    let probe: KindOnly = serde_json::from_slice(body).map_err(decode_error)?;
    if probe.kind.as_deref() == Some("Status") {
        return serde_json::from_slice(body)
            .map(|status| Deleted::Gone(Box::new(status)))
            .map_err(decode_error);
    }
    serde_json::from_slice(body)
        .map(Deleted::Pending)
        .map_err(decode_error)
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<Bytes, Error> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| Error::InvalidRequest(format!("could not encode the body: {e}")))
}

/// A name or namespace must be one URL path segment.
fn check_segment(segment: &str) -> Result<(), Error> {
    let bad = segment.is_empty()
        || segment == "."
        || segment == ".."
        || segment
            .bytes()
            .any(|b| matches!(b, b'/' | b'%' | b'?' | b'#') || b.is_ascii_control() || b == b' ');
    if bad {
        return Err(Error::InvalidRequest(format!(
            "{segment:?} is not a valid object name or namespace"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{Namespace, Pod};

    #[test]
    fn resources_of_typed_kinds() {
        let pods = ApiResource::of::<Pod>();
        assert_eq!(
            (pods.path_prefix(), pods.plural.as_str(), pods.namespaced),
            ("/api/v1".to_string(), "pods", true)
        );
        let rs = ApiResource::of::<ReplicaSet>();
        assert_eq!(rs.path_prefix(), "/apis/apps/v1");
        assert_eq!(rs.api_version(), "apps/v1");
        assert!(!ApiResource::of::<Namespace>().namespaced);
    }

    #[test]
    fn bad_names_are_refused_before_sending() {
        for bad in ["", "..", "a/b", "a b", "x?y"] {
            assert!(check_segment(bad).is_err(), "{bad:?}");
        }
        assert!(check_segment("web-0.example").is_ok());
    }

    #[test]
    fn delete_answers_an_object_or_a_status() {
        let gone: Deleted<Pod> = decode_deleted(
            br#"{"kind":"Status","apiVersion":"v1","status":"Success","details":{"name":"p"}}"#,
        )
        .expect("decodes");
        assert!(matches!(gone, Deleted::Gone(_)));
        let pending: Deleted<Pod> = decode_deleted(
            br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","deletionTimestamp":"2026-01-01T00:00:00Z"}}"#,
        )
        .expect("decodes");
        assert!(matches!(pending, Deleted::Pending(p) if p.metadata.name.as_deref() == Some("p")));
        assert!(decode_deleted::<Pod>(b"not json").is_err());
    }
}
