//! [`Ownership`]: which primary objects this replica may reconcile, asked by the controller at a
//! few fixed points of its run. The one interface between the controller and sharding.
//!
//! A controller on its own owns every object its informers show ([`AllMine`], the default: every
//! method does nothing). A sharded controller (feature `shard`, `Controller::shard`) owns only
//! the share its ring assigns this replica, and its [`Ownership`] answers accordingly. The
//! controller never names sharding itself: it calls this trait, so the sharded runtime can change
//! inside `crate::shard` without touching the workers.
//!
//! Where the run asks, in order:
//!
//! ```text
//!  run step   asks                                          the default (AllMine)
//!  ───────────────────────────────────────────────────────────────────────────────────────────
//!  make       scope(primary scope), scope(owned scope)      the scope as given
//!             client()                                      None: the controller's client
//!             keeps_stale_protection()                      false: as the author set it
//!  attach     start(Start { factory, owned kinds, .. })     nothing
//!  gate       ready()                                       ready at once
//!  spawn      beside_workers(stop)                          no task
//!  worker     claim(key, object) before each reconcile      Claim::Mine
//!             forget(key) when the cache lost the object    nothing
//!  reconcile  mark_child(meta) through the Context          nothing
//! ```
//!
//! The owned kinds a controller records (`owns`, `owns_with`) reach the ownership as
//! [`OwnedCache`]s: the controller's cache of each kind, type-erased, with what an ownership may
//! need of it (a primary's cached children, how far the cache has caught up, a labelled list from
//! the server).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::watch;

use ferrokube_client::api::{Api, ListParams};
use ferrokube_client::{Client, Error};
use ferrokube_core::{ApiResource, Kind, ObjectKey, Scope};
use ferrokube_informer::{SharedIndexInformer, SharedInformerFactory, Store, StoreRevision};

/// What a worker may do with a cached primary object this turn, as its [`Ownership`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This replica's: reconcile it.
    Mine,
    /// Not (or no longer) this replica's; the cache will drop it. The key is forgotten.
    NotMine(&'static str),
    /// This replica's, but not yet (its children have not reached the caches): the key comes
    /// back after the controller's `stale_requeue`.
    NotYet(String),
    /// Another replica asked for it, and this one handed it over. The key is forgotten.
    HandedOver,
    /// The handover failed: the key is retried with backoff.
    HandOverFailed(String),
}

/// Which of the primary objects this replica reconciles; see the [module docs](self). Every
/// method has the default of a controller that owns all it sees.
pub trait Ownership<K: Kind>: Send + Sync + 'static {
    /// `scope` narrowed to this replica's objects: the scope of the primary's and owned kinds'
    /// informers.
    fn scope(&self, scope: Scope) -> Scope {
        scope
    }

    /// The client reconciles write with instead of the controller's, if any.
    fn client(&self) -> Option<Client> {
        None
    }

    /// Whether the controller must keep stale protection on whatever the author set.
    fn keeps_stale_protection(&self) -> bool {
        false
    }

    /// Called once when the controller runs, after its handlers are on and before its caches
    /// sync: what this replica's ownership is made of.
    fn start(&self, start: Start<'_, K>) {
        let _ = start;
    }

    /// Awaited once the caches synced, before the first reconcile. `false`: never start the
    /// workers (the controller then waits for shutdown).
    fn ready(&self) -> BoxFuture<'static, bool> {
        Box::pin(std::future::ready(true))
    }

    /// Tasks that run beside the workers until `stop` turns true; awaited when the controller
    /// stops, after the workers.
    fn beside_workers(&self, stop: watch::Receiver<bool>) -> Vec<BoxFuture<'static, ()>> {
        let _ = stop;
        Vec::new()
    }

    /// Asked by the worker that holds `key`, just before it would reconcile `object`.
    fn claim<'a>(&'a self, key: &'a ObjectKey, object: &'a K) -> BoxFuture<'a, Claim> {
        let _ = (key, object);
        Box::pin(std::future::ready(Claim::Mine))
    }

    /// The primary cache no longer holds `key`: whatever the ownership kept about it can go.
    fn forget(&self, key: &ObjectKey) {
        let _ = key;
    }

    /// Marks a child a reconcile is about to create as this replica's (see
    /// [`Context::mark_child`](super::Context::mark_child)).
    fn mark_child(&self, meta: &mut ObjectMeta) {
        let _ = meta;
    }
}

/// The default ownership: every object the caches show is this replica's.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllMine;

impl<K: Kind> Ownership<K> for AllMine {}

/// What [`Ownership::start`] is given: the running controller's parts.
pub struct Start<'a, K: Kind> {
    /// The controller's informer factory.
    pub factory: &'a Arc<SharedInformerFactory<Client>>,
    /// The primary kind, as served.
    pub resource: &'a ApiResource,
    /// What names the primary kind at run time (`()` for a typed kind).
    pub dynamic: &'a K::DynamicType,
    /// The primary scope as recorded, before [`Ownership::scope`] narrowed it.
    pub recorded_scope: &'a Scope,
    /// The primary informer's store (over the narrowed scope).
    pub primary: Arc<Store<K>>,
    /// The controller's cache of each owned kind (over the narrowed scope), in the order of the
    /// `owns` calls.
    pub owned: Vec<Arc<dyn OwnedCache>>,
}

/// One child, as an ownership sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub namespace: Option<String>,
    pub name: String,
    /// The uid of its controller owner, if that owner is of the primary kind.
    pub owner_uid: Option<String>,
}

/// The controller's cache of one owned kind, whatever its Rust type.
pub trait OwnedCache: Send + Sync {
    /// The owned kind, as served.
    fn resource(&self) -> &ApiResource;

    /// The cached children whose controller owner (of the primary kind) has uid `owner_uid`.
    fn cached_children(&self, owner_uid: &str) -> Vec<Child>;

    /// How far the cache has caught up.
    fn store_revision(&self) -> StoreRevision;

    /// From the server: the children `label_selector` selects (in `namespace`, or in all), with
    /// the list's resourceVersion (0 if the server gave none).
    fn list_labelled<'a>(
        &'a self,
        client: &'a Client,
        label_selector: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(u64, Vec<Child>), Error>>;
}

/// Makes the [`OwnedCache`] of one owned kind from the factory and its (narrowed) scope: recorded
/// by `owns`, called at run.
pub(super) type OwnedKind = Box<
    dyn FnOnce(&SharedInformerFactory<Client>, &dyn Fn(Scope) -> Scope) -> Arc<dyn OwnedCache>
        + Send,
>;

/// Records the owned kind `C` (of `dynamic`, in `scope`) whose controller owner is of the kind
/// `owner` names.
pub(super) fn owned_kind<C: Kind>(
    owner: ApiResource,
    dynamic: C::DynamicType,
    scope: Scope,
) -> OwnedKind {
    Box::new(move |factory, narrow| {
        let informer = factory.informer_for::<C>(&dynamic, &narrow(scope), |builder| builder);
        Arc::new(OwnedInformer {
            resource: C::api_resource(&dynamic),
            dynamic,
            informer,
            owner,
        })
    })
}

/// The [`OwnedCache`] of a typed (or dynamic) owned kind `C`.
struct OwnedInformer<C: Kind> {
    resource: ApiResource,
    dynamic: C::DynamicType,
    informer: SharedIndexInformer<C>,
    /// The primary kind: a child's controller reference must name it.
    owner: ApiResource,
}

impl<C: Kind> OwnedInformer<C> {
    /// `child`'s controller owner's uid, if that owner is of the primary kind.
    fn owner_uid(&self, child: &C) -> Option<String> {
        crate::toolkit::owner::controller_of(child.meta())
            .filter(|reference| {
                reference.kind == self.owner.kind
                    && crate::toolkit::owner::group_of(&reference.api_version) == self.owner.group
            })
            .map(|reference| reference.uid.clone())
    }

    fn child(&self, object: &C, owner_uid: Option<String>) -> Child {
        Child {
            namespace: object.meta().namespace.clone(),
            name: object.meta().name.clone().unwrap_or_default(),
            owner_uid,
        }
    }
}

impl<C: Kind> OwnedCache for OwnedInformer<C> {
    fn resource(&self) -> &ApiResource {
        &self.resource
    }

    fn cached_children(&self, owner_uid: &str) -> Vec<Child> {
        self.informer
            .store()
            .list()
            .into_iter()
            .filter(|child| self.owner_uid(child).as_deref() == Some(owner_uid))
            .map(|child| self.child(&child, Some(owner_uid.to_string())))
            .collect()
    }

    fn store_revision(&self) -> StoreRevision {
        self.informer.store_revision()
    }

    fn list_labelled<'a>(
        &'a self,
        client: &'a Client,
        label_selector: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(u64, Vec<Child>), Error>> {
        Box::pin(async move {
            let mut api = Api::<C>::all_with(client.clone(), &self.dynamic);
            if let Some(namespace) = namespace {
                api = api.in_namespace(namespace);
            }
            let list = api
                .list_all(&ListParams::default().labels(label_selector))
                .await?;
            let version = list
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let children = list
                .items
                .iter()
                .map(|child| self.child(child, self.owner_uid(child)))
                .collect();
            Ok((version, children))
        })
    }
}
