//! Dependents: the objects a sharded controller owns (a ReplicaSet's Pods). They carry their
//! owner's label, so that each member caches only its own, and they move with their owner.
//!
//! [`DependentKind`] is what sharding needs of one such kind, whatever its Rust type: the
//! member's cache of it (to find an object's children when handing it over, and to know how far
//! that cache has caught up), and the server (to find a dead member's children, and to relabel).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::ShardError;
use super::marks::{Marks, format_handover};
use ferrokube_client::api::{ListParams, Patch, PatchParams};
use ferrokube_client::{Api, Client, Error};
use ferrokube_core::ObjectKey;
use ferrokube_core::{ApiResource, Kind, Object};
use ferrokube_informer::SharedIndexInformer;
use ferrokube_informer::StoreRevision;

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

    /// How far the member's cache has caught up (the informer's
    /// [`store_revision`](ferrokube_informer::SharedIndexInformer::store_revision)).
    fn store_revision(&self) -> StoreRevision;

    /// From the server: every dependent labelled as `member`'s (in `namespace`, or in all), with
    /// the list's resourceVersion.
    fn list_marked<'a>(
        &'a self,
        client: &'a Client,
        marks: &'a Marks,
        member: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(u64, Vec<ChildRef>), Error>>;
}

/// The children relabelled so far for each object on the move, per kind the resourceVersion of
/// the last one, kept across retries of the move: a retry that finds no child left to relabel
/// (they left the cache, or the sweep, when relabelled) still writes the versions the new owner
/// must wait for into the handover annotation. One move per object at a time (the key's worker).
#[derive(Debug, Default)]
pub struct MovedChildren(Mutex<HashMap<ObjectKey, BTreeMap<String, u64>>>);

impl MovedChildren {
    /// Relabels `child` (of `dependents`' kind) as `to`'s for the move of `key`, and records the
    /// write's resourceVersion. A child already gone counts as moved.
    pub(crate) async fn relabel(
        &self,
        key: &ObjectKey,
        client: &Client,
        marks: &Marks,
        dependents: &dyn DependentKind,
        child: &ChildRef,
        to: &str,
    ) -> Result<(), ShardError> {
        let resource = dependents.resource();
        let written = relabel(client, resource, marks, child, to)
            .await
            .map_err(|source| ShardError::Write {
                what: format!("relabel {} {}", resource.kind, child.name),
                source,
            })?;
        if let Some(version) = written {
            self.note(key, &resource.kind, version);
        }
        Ok(())
    }

    /// Records that the move of `key` must wait for `kind` at `version` at least.
    pub(crate) fn note(&self, key: &ObjectKey, kind: &str, version: u64) {
        let mut moved = self.0.lock();
        let versions = moved.entry(key.clone()).or_default();
        let at = versions.entry(kind.to_string()).or_insert(version);
        *at = (*at).max(version);
    }

    /// The handover annotation for `key`'s move: null when no child moved.
    pub(crate) fn annotation(&self, key: &ObjectKey) -> Value {
        match self.0.lock().get(key) {
            Some(versions) if !versions.is_empty() => Value::String(format_handover(versions)),
            _ => Value::Null,
        }
    }

    /// Whether any child was recorded for `key`'s move.
    pub(crate) fn any(&self, key: &ObjectKey) -> bool {
        self.0.lock().get(key).is_some_and(|v| !v.is_empty())
    }

    /// The move of `key` is done (its object was written).
    pub(crate) fn finish(&self, key: &ObjectKey) {
        self.0.lock().remove(key);
    }
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
pub struct Dependents<C: Kind> {
    dynamic: C::DynamicType,
    resource: ApiResource,
    informer: SharedIndexInformer<C>,
    owner_uid: OwnerUid<C>,
}

/// Reads a child's controller owner's uid, if that owner is of the sharded kind.
pub type OwnerUid<C> = Box<dyn Fn(&C) -> Option<String> + Send + Sync>;

impl<C: Kind> Dependents<C> {
    /// The dependents of the kind `dynamic` names (`()` for a typed kind) cached by `informer`,
    /// as sharding uses them.
    pub fn kind(
        informer: SharedIndexInformer<C>,
        dynamic: C::DynamicType,
        owner_uid: OwnerUid<C>,
    ) -> Arc<dyn DependentKind> {
        Arc::new(Dependents {
            resource: C::api_resource(&dynamic),
            dynamic,
            informer,
            owner_uid,
        })
    }
}

impl<C: Kind> DependentKind for Dependents<C> {
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

    fn store_revision(&self) -> StoreRevision {
        self.informer.store_revision()
    }

    fn list_marked<'a>(
        &'a self,
        client: &'a Client,
        marks: &'a Marks,
        member: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(u64, Vec<ChildRef>), Error>> {
        Box::pin(async move {
            let mut api = Api::<C>::all_with(client.clone(), &self.dynamic);
            if let Some(namespace) = namespace {
                api = api.in_namespace(namespace);
            }
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
