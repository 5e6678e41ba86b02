//! Dependents: the objects a sharded controller owns (a ReplicaSet's Pods). They carry their
//! owner's label, so that each member caches only its own, and they move with their owner.
//!
//! [`DependentKind`] is what sharding needs of one such kind, whatever its Rust type: the
//! member's cache of it (to find an object's children when handing it over, and to know how far
//! that cache has caught up), and the server (to find a dead member's children, and to relabel).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::json;

use super::marks::Marks;
use crate::api::{ListParams, Patch, PatchParams};
use crate::informer::SharedIndexInformer;
use crate::{Api, ApiResource, Client, Error, Object};

/// One dependent object, as far as sharding cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRef {
    pub namespace: Option<String>,
    pub name: String,
    /// The uid of its controller owner of the sharded kind, if it has one.
    pub owner_uid: Option<String>,
}

/// What sharding needs of one kind of dependents; see the [module docs](self).
pub trait DependentKind: Send + Sync {
    /// The kind's resource, for logs and requests.
    fn resource(&self) -> &ApiResource;

    /// The member's cached dependents whose controller owner has uid `owner_uid`.
    fn cached_children(&self, owner_uid: &str) -> Vec<ChildRef>;

    /// How far the member's cache has caught up: its store's resourceVersion as an integer
    /// (`None` while it is not one, e.g. before the first list).
    fn cache_version(&self) -> Option<u64>;

    /// From the server: every dependent labelled as `member`'s, with the list's resourceVersion.
    fn list_marked<'a>(
        &'a self,
        client: &'a Client,
        marks: &'a Marks,
        member: &'a str,
    ) -> BoxFuture<'a, Result<(u64, Vec<ChildRef>), Error>>;
}

/// Labels `child` (of `resource`'s kind) as `to`'s; the resourceVersion of the write, or `None`
/// if the child is gone.
pub(crate) async fn relabel(
    client: &Client,
    resource: &ApiResource,
    marks: &Marks,
    child: &ChildRef,
    to: &str,
) -> Result<Option<u64>, Error> {
    let api = Api::dynamic(client.clone(), resource.clone(), child.namespace.as_deref());
    let patch = json!({"metadata": {"labels": {marks.owner_label(): to}}});
    match api
        .patch(&child.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(written) => Ok(written.resource_version().parse().ok()),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

/// The dependents of kind `C`, cached by the member's `informer`; `owner_uid` reads a child's
/// controller owner of the sharded kind.
pub struct Dependents<C> {
    resource: ApiResource,
    informer: SharedIndexInformer<C>,
    owner_uid: fn(&C) -> Option<String>,
}

impl<C: Object + k8s_openapi::Resource> Dependents<C> {
    /// The dependents cached by `informer`, as sharding uses them.
    pub fn kind(
        informer: SharedIndexInformer<C>,
        owner_uid: fn(&C) -> Option<String>,
    ) -> Arc<dyn DependentKind> {
        Arc::new(Dependents {
            resource: ApiResource::of::<C>(),
            informer,
            owner_uid,
        })
    }
}

impl<C: Object + k8s_openapi::Resource> DependentKind for Dependents<C> {
    fn resource(&self) -> &ApiResource {
        &self.resource
    }

    fn cached_children(&self, owner_uid: &str) -> Vec<ChildRef> {
        self.informer
            .store()
            .list()
            .into_iter()
            .filter(|child| (self.owner_uid)(child).as_deref() == Some(owner_uid))
            .map(|child| ChildRef {
                namespace: child.meta().namespace.clone(),
                name: child.meta().name.clone().unwrap_or_default(),
                owner_uid: Some(owner_uid.to_string()),
            })
            .collect()
    }

    fn cache_version(&self) -> Option<u64> {
        self.informer
            .last_store_sync_resource_version()
            .parse()
            .ok()
    }

    fn list_marked<'a>(
        &'a self,
        client: &'a Client,
        marks: &'a Marks,
        member: &'a str,
    ) -> BoxFuture<'a, Result<(u64, Vec<ChildRef>), Error>> {
        Box::pin(async move {
            let api: Api<C> = Api::all(client.clone());
            let params = ListParams::default().labels(&format!("{}={member}", marks.owner_label()));
            let list = api.list_all(&params).await?;
            let version = list
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let children = list
                .items
                .iter()
                .map(|child| ChildRef {
                    namespace: child.meta().namespace.clone(),
                    name: child.meta().name.clone().unwrap_or_default(),
                    owner_uid: (self.owner_uid)(child),
                })
                .collect();
            Ok((version, children))
        })
    }
}
