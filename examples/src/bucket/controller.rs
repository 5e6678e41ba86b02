//! The Bucket controller: keeps a bucket in the [object store](super::store) and a ConfigMap
//! that says where to reach it equal to each Bucket's spec and its namespace's region label.
//!
//! ```text
//!  Bucket (primary)    ── generation changed (spec, deletion) ─┐
//!  ConfigMap (owned)   ── any real change (the default) ──────┼─▶ queue ─▶ reconcile(bucket, ctx)
//!  Namespace (cluster) ── labels changed ─▶ its Buckets' keys ┘       ▲         │
//!                                                                     │         ▼
//!  requeue after `poll` (the store cannot be watched) ────────────────┘   finalize:
//!     alive:    (finalizer added first) region from the cached Namespace ─▶ store.put if it
//!               differs ─▶ ConfigMap `<name>-bucket` (create_or_update) ─▶ status Ready
//!     deleting: store.delete ─▶ finalizer removed ─▶ the server deletes the object; its
//!               ConfigMap goes with it (garbage collection, by its owner reference)
//! ```
//!
//! The reconciler keeps no `Client`: it writes only through the reconcile's [`Context`]
//! (`ctx.api_for_object`, `ctx.api_in_primary_namespace`, and the finalizer, status and `create_or_update` helpers
//! given those `Api`s), so every write is recorded and the next reconcile of the key waits until
//! the caches show it. It reads its namespace through `ctx.cache`: no request to the server.
//!
//! Every step compares before it writes, so a reconcile of an unchanged world writes nothing:
//! that is what makes polling the store every few seconds cheap.
//!
//! The store is any [`BucketStore`] (the in-memory [`ObjectStore`] by default; a test's adapter
//! over the fault explorer's outside system). [`BucketController::mutant`] switches on one of the
//! deliberate bugs of [`super::mutant`]; each bug's site below is marked with its name.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferrokube::Client;
use ferrokube::api::{Patch, PatchParams, PostParams};
use ferrokube::controller::conditions::{ConditionBuilder, set_condition, update_status};
use ferrokube::controller::finalizer::{FinalizerError, finalize, has_finalizer, remove_finalizer};
use ferrokube::controller::owner::{self, CreateOrUpdateError, OwnerError};
use ferrokube::controller::{
    Action, Context, Controller, ControllerError, Filter, ReadError, Reconciler,
};
use ferrokube::core::Scope;
use ferrokube::informer::NAMESPACE_INDEX;
use ferrokube::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use serde_json::json;

use super::mutant::{CHILD_ANNOTATION, Mutant};
use super::resource::{Bucket, BucketStatus};
use super::store::{BucketStore, ObjectStore, StoreError, StoredBucket};

/// The finalizer that holds a Bucket until its stored bucket is gone.
pub const FINALIZER: &str = "storage.ferrokube.dev/bucket";
/// The namespace label that says where its buckets live.
pub const REGION_LABEL: &str = "storage.ferrokube.dev/region";
/// The region of a namespace without the label.
pub const DEFAULT_REGION: &str = "us-east";

/// Why a reconcile failed; the key is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    #[error(transparent)]
    Api(#[from] ferrokube::Error),
    #[error("child ConfigMap: {0}")]
    Child(#[from] CreateOrUpdateError<OwnerError>),
    #[error("namespace cache: {0}")]
    Cache(#[from] ReadError),
    #[error("finalizer: {0}")]
    Finalizer(#[from] Box<FinalizerError<BucketError>>),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the Bucket has no namespace, name or uid")]
    Incomplete,
}

/// The reconciler: the store it keeps in step, and how often it looks at it.
pub struct BucketController<S = ObjectStore> {
    pub store: S,
    /// A change made at the store is repaired within this long.
    pub poll: Duration,
    /// A deliberate bug to switch on ([`super::mutant`]); `None`, the correct controller, unless
    /// a test of the fault explorer asks for one.
    pub mutant: Option<Mutant>,
}

impl<S: BucketStore> BucketController<S> {
    /// The correct controller over `store`, looking at it every `poll`.
    pub fn new(store: S, poll: Duration) -> BucketController<S> {
        BucketController {
            store,
            poll,
            mutant: None,
        }
    }

    /// The same controller with the bug `mutant` (see [`super::mutant`]).
    pub fn with_mutant(mut self, mutant: Mutant) -> BucketController<S> {
        self.mutant = Some(mutant);
        self
    }

    fn is(&self, mutant: Mutant) -> bool {
        self.mutant == Some(mutant)
    }
}

/// Runs the controller over every namespace until `shutdown` resolves.
pub async fn run<S: BucketStore>(
    client: Client,
    reconciler: BucketController<S>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ControllerError> {
    // The primary's filter drops our own status and finalizer writes (no new generation), but
    // not the start of a deletion: the server bumps the generation then, so the finalizer's
    // cleanup runs. A Namespace maps to its Buckets through the primary's namespace index (every
    // informer has it; another one would be added with `index_field::<Bucket>(name, ..)`).
    Controller::<Bucket>::new(client, Scope::all())
        .owns::<ConfigMap>(Scope::all())
        .watches_by_index::<Namespace>(Scope::all(), NAMESPACE_INDEX, |namespace| {
            namespace.metadata.name.clone().into_iter().collect()
        })
        .filter(Filter::generation_changed())
        .filter_for::<Namespace>(Filter::labels_changed())
        .run(reconciler, shutdown)
        .await
}

impl<S: BucketStore> Reconciler<Bucket> for BucketController<S> {
    type Error = BucketError;

    async fn reconcile(&self, bucket: Arc<Bucket>, ctx: Context) -> Result<Action, BucketError> {
        let (api, ctx) = (ctx.api_for_object(bucket.as_ref()), &ctx);
        // Mutant CleanupOnDeleteEvent: no finalizer at all; the stored bucket is deleted in
        // `deleted` below, if the informer ever sees the Bucket go.
        if self.is(Mutant::CleanupOnDeleteEvent) {
            return self.apply(bucket, ctx).await;
        }
        // Mutant FinalizerRemovedBeforeCleanup: on deletion, the finalizer goes first (and with
        // it the Bucket), then the stored bucket: a crash in between leaks it.
        if self.is(Mutant::FinalizerRemovedBeforeCleanup)
            && bucket.metadata.deletion_timestamp.is_some()
            && has_finalizer(&bucket.metadata, FINALIZER)
        {
            remove_finalizer(&api, bucket.as_ref(), FINALIZER)
                .await
                .map_err(|error| Box::new(FinalizerError::RemoveFinalizer(error)))?;
            return self.cleanup(&bucket).await;
        }
        let done = finalize(
            &api,
            FINALIZER,
            bucket,
            |bucket| self.apply(bucket, ctx),
            |bucket| async move { self.cleanup(&bucket).await },
        )
        .await
        .map_err(Box::new)?;
        Ok(done.unwrap_or(Action::await_change()))
    }

    /// The correct controller does nothing here: its finalizer's cleanup has run before the
    /// Bucket could go.
    async fn deleted(&self, last_known: Arc<Bucket>, _ctx: Context) -> Result<(), BucketError> {
        // Mutant CleanupOnDeleteEvent: the only cleanup there is, and it runs only if this
        // incarnation's informer saw the Bucket before it went.
        if self.is(Mutant::CleanupOnDeleteEvent) {
            self.cleanup(&last_known).await?;
        }
        Ok(())
    }
}

impl<S: BucketStore> BucketController<S> {
    async fn apply(&self, bucket: Arc<Bucket>, ctx: &Context) -> Result<Action, BucketError> {
        let (namespace, name, uid) = identity(&bucket)?;
        // 1. Where it lives: the namespace's label, read from the cache the Namespace source
        //    fills. Not cached yet: its add event will bring this key back.
        let cached = ctx.cache::<Namespace>(&Scope::all())?;
        let Some(ns) = cached.get(None, namespace).await? else {
            return Ok(Action::await_change());
        };
        let labels = ns.metadata.labels.as_ref();
        let region = labels.and_then(|l| l.get(REGION_LABEL)).map(String::as_str);
        let region = region.unwrap_or(DEFAULT_REGION).to_string();

        // 2. The outside system: written only when it differs from what is wanted.
        let wanted = StoredBucket {
            region: region.clone(),
            retention_days: bucket.spec.retention_days,
            versioned: bucket.spec.versioned,
            owner_uid: uid.to_string(),
        };
        let stored_name = stored_name(namespace, name);
        if self.store.get(&stored_name).await?.as_ref() != Some(&wanted) {
            tracing::info!(bucket = stored_name, region, "writing the stored bucket");
            self.store.put(&stored_name, wanted).await?;
        }

        // 3. The child: where applications find it. Deleted or edited by hand, it comes back.
        let endpoint = format!("https://{region}.store.example/{stored_name}");
        let configmaps = ctx.api_in_primary_namespace::<ConfigMap>();
        let child = |cm: &mut ConfigMap| {
            // Mutant NoOwnerReference: the child is made without its owner reference, so the
            // garbage collector never deletes it.
            if !self.is(Mutant::NoOwnerReference) {
                owner::set_controller_reference(bucket.as_ref(), &mut cm.metadata)?;
            }
            let data = [("endpoint", &endpoint), ("region", &region)];
            cm.data = Some(data.map(|(k, v)| (k.to_string(), v.clone())).into());
            Ok(())
        };
        if self.is(Mutant::GeneratedChildName) {
            self.generated_child(&bucket, ctx, child).await?;
        } else {
            owner::create_or_update(&configmaps, &format!("{name}-bucket"), child).await?;
        }

        // 4. Status: Ready for this generation, written only when it changes.
        let generation = bucket.metadata.generation;
        let ready = ConditionBuilder::from_bool("Ready", true)
            .reason("Provisioned")
            .message(format!("{stored_name} in {region}"))
            .observed_generation(generation)
            .build();
        let status_of = |status: &mut BucketStatus| {
            let mut changed = set_condition(&mut status.conditions, ready.clone());
            changed |= status.observed_generation != generation;
            changed |= status.region.as_ref() != Some(&region);
            changed |= status.endpoint.as_ref() != Some(&endpoint);
            status.observed_generation = generation;
            status.region = Some(region.clone());
            status.endpoint = Some(endpoint.clone());
            changed
        };
        let mut cached = bucket.status.clone().unwrap_or_default();
        if status_of(&mut cached) {
            if self.is(Mutant::StatusFromStaleRead) {
                // Mutant StatusFromStaleRead: the cached status, changed, written back whole by
                // a merge patch (no resourceVersion): it replaces whatever the server has,
                // conditions of other writers the cache has not seen yet included.
                let whole = Patch::Merge(json!({ "status": cached }));
                let api = ctx.api_for_object(bucket.as_ref());
                api.patch_status(name, &PatchParams::default(), &whole)
                    .await?;
            } else {
                update_status(
                    &ctx.api_for_object(bucket.as_ref()),
                    name,
                    |fresh: &mut Bucket| status_of(fresh.status.get_or_insert_default()),
                )
                .await?;
            }
        }
        Ok(Action::requeue(self.poll))
    }

    /// The Bucket is being deleted: remove its stored bucket (idempotent: gone already is fine).
    async fn cleanup(&self, bucket: &Bucket) -> Result<Action, BucketError> {
        let (namespace, name, uid) = identity(bucket)?;
        let deleted = self
            .store
            .delete(&stored_name(namespace, name), uid)
            .await?;
        tracing::info!(namespace, name, deleted, "stored bucket deleted");
        Ok(Action::await_change())
    }

    /// Mutant GeneratedChildName: the child is created with a name the server generates, and
    /// the name it got is recorded on the Bucket only afterwards. A crash between the two loses
    /// the record: the next reconcile creates a second child. (Given `child`, the correct
    /// path's mutation of the ConfigMap.)
    async fn generated_child(
        &self,
        bucket: &Bucket,
        ctx: &Context,
        mut child: impl FnMut(&mut ConfigMap) -> Result<(), OwnerError>,
    ) -> Result<(), BucketError> {
        let (namespace, name, _) = identity(bucket)?;
        let configmaps = ctx.api_in_primary_namespace::<ConfigMap>();
        let annotations = bucket.metadata.annotations.as_ref();
        if let Some(known) = annotations.and_then(|a| a.get(CHILD_ANNOTATION)) {
            owner::create_or_update(&configmaps, known, child).await?;
            return Ok(());
        }
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some(namespace.to_string());
        cm.metadata.generate_name = Some(format!("{name}-bucket-"));
        child(&mut cm).map_err(CreateOrUpdateError::Mutate)?;
        let created = configmaps.create(&PostParams::default(), &cm).await?;
        let generated = created.metadata.name.unwrap_or_default();
        let record =
            Patch::Merge(json!({"metadata": {"annotations": {CHILD_ANNOTATION: generated}}}));
        ctx.api_for_object(bucket)
            .patch(name, &PatchParams::default(), &record)
            .await?;
        Ok(())
    }
}

/// The bucket's name in the store, which is one namespace for the whole cluster.
pub fn stored_name(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

fn identity(bucket: &Bucket) -> Result<(&str, &str, &str), BucketError> {
    let meta = &bucket.metadata;
    match (&meta.namespace, &meta.name, &meta.uid) {
        (Some(namespace), Some(name), Some(uid)) => Ok((namespace, name, uid)),
        _ => Err(BucketError::Incomplete),
    }
}
