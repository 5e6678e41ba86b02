//! SharedInformerFactory: one informer per (type, scope) for the whole process.
//!
//! Several controllers in one process often watch the same types (every workload controller
//! watches Pods). Each asking the factory for `informer::<Pod>(&Scope::all())` gets the *same*
//! informer, so the process opens one watch and keeps one cache per type and scope, however many
//! handlers hang off it. `start` starts every informer created so far (call it again after creating
//! more), `wait_for_cache_sync` waits for all of them, `shutdown` stops them.
//!
//! The factory builds lister-watchers through a [`ListerWatcherSource`]; `ferrokube::Client`
//! is one (each informer lists and watches through the client's `Api<K>`).
//!
//! An informer is found again by its Rust type, its scope and, for a type that holds objects of
//! any kind (`DynamicObject`), the kind it was made for (its [`Kind::DynamicType`]): two
//! `DynamicObject` informers of different custom resources are two informers. For the typed kinds
//! that last part is `()`, and [`informer`](SharedInformerFactory::informer) leaves it out.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;

use ferrokube_core::scope::Scope;

use crate::lister_watcher::ListerWatcher;
use crate::metrics::InformerMetrics;
use crate::shared_informer::{InformerBuilder, SharedIndexInformer, StartError};
use ferrokube_core::Kind;

/// Makes a [`ListerWatcher`] for any built-in type and a scope.
pub trait ListerWatcherSource: Send + Sync + 'static {
    type ListerWatcher<K: Kind>: ListerWatcher<K>;
    /// The lister-watcher of the `K`s in `scope`, of the kind `dynamic` names (`&()` for a typed
    /// kind).
    fn lister_watcher<K: Kind>(
        &self,
        dynamic: &K::DynamicType,
        scope: &Scope,
    ) -> Self::ListerWatcher<K>;
}

type SyncFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// What the factory does with an informer whatever its type.
trait Control: Send + Sync {
    fn start(&self) -> Result<(), StartError>;
    fn stop(&self);
    fn wait_for_cache_sync(&self) -> SyncFuture;
    fn as_any(&self) -> &dyn Any;
}

impl<K: Kind> Control for SharedIndexInformer<K> {
    fn start(&self) -> Result<(), StartError> {
        SharedIndexInformer::start(self)
    }
    fn stop(&self) {
        SharedIndexInformer::stop(self)
    }
    fn wait_for_cache_sync(&self) -> SyncFuture {
        let informer = self.clone();
        Box::pin(async move { informer.wait_for_cache_sync().await })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

type MetricsFor = Arc<dyn Fn(&str) -> Arc<dyn InformerMetrics> + Send + Sync>;

/// One informer the factory made, and the kind it was made for (a `K::DynamicType`).
struct Made {
    dynamic: Box<dyn Any + Send + Sync>,
    informer: Arc<dyn Control>,
    /// Its place in the order the factory made its informers (from 0).
    order: usize,
}

/// See the [module docs](self).
pub struct SharedInformerFactory<S> {
    source: S,
    /// Per Rust type and scope, the informers made, one per kind (exactly one for a typed kind:
    /// its kind is `()`). A lookup compares the kinds by `==` after a downcast, so it allocates
    /// nothing.
    informers: Mutex<HashMap<(TypeId, Scope), Vec<Made>>>,
    /// How many informers the factory has made (the next one's [`Made::order`]).
    made: std::sync::atomic::AtomicUsize,
    metrics: Option<MetricsFor>,
}

impl<S: ListerWatcherSource> SharedInformerFactory<S> {
    pub fn new(source: S) -> Self {
        SharedInformerFactory {
            source,
            informers: Mutex::new(HashMap::new()),
            made: std::sync::atomic::AtomicUsize::new(0),
            metrics: None,
        }
    }

    /// What the informers list and watch through (for a factory of `Client`s, the client).
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Gives each informer created from now on the metrics `metrics(name)` returns, e.g.
    /// `move |name| prometheus.for_informer(name)`. Default none.
    pub fn with_metrics(
        mut self,
        metrics: impl Fn(&str) -> Arc<dyn InformerMetrics> + Send + Sync + 'static,
    ) -> Self {
        self.metrics = Some(Arc::new(metrics));
        self
    }

    /// The informer of the typed kind `K` over `scope`, created with default options on first use.
    pub fn informer<K: Kind<DynamicType = ()>>(&self, scope: &Scope) -> SharedIndexInformer<K> {
        // The common case (a reconcile's cached read) finds it: no configuration to look at.
        if let Some(informer) = self.existing::<K>(&(), scope) {
            return informer;
        }
        self.informer_for::<K>(&(), scope, |builder| builder)
    }

    /// The informer made for the `K`s of the kind `dynamic` names over `scope`, if any.
    fn existing<K: Kind>(
        &self,
        dynamic: &K::DynamicType,
        scope: &Scope,
    ) -> Option<SharedIndexInformer<K>> {
        let informers = self.informers.lock();
        informers
            .get(&(TypeId::of::<K>(), scope.clone()))?
            .iter()
            .filter(|made| {
                made.dynamic
                    .downcast_ref::<K::DynamicType>()
                    .is_some_and(|kind| kind == dynamic)
            })
            .find_map(|made| {
                made.informer
                    .as_any()
                    .downcast_ref::<SharedIndexInformer<K>>()
                    .cloned()
            })
    }

    /// Like [`informer`](Self::informer); when the informer does not exist yet, `configure` sets
    /// its options (transform, indexers, reflector settings). When it exists already, it is
    /// returned, and of what `configure` sets only the indexers can still take effect: each index
    /// whose name the informer lacks is added to it (and filled from its cache if it runs); an
    /// index whose name it has is kept as it is; a transform or reflector setting is not applied
    /// (a transform is logged at warn level, naming the informer).
    pub fn informer_with<K: Kind<DynamicType = ()>>(
        &self,
        scope: &Scope,
        configure: impl FnOnce(
            InformerBuilder<K, S::ListerWatcher<K>>,
        ) -> InformerBuilder<K, S::ListerWatcher<K>>,
    ) -> SharedIndexInformer<K> {
        self.informer_for::<K>(&(), scope, configure)
    }

    /// The informer of the `K`s of the kind `dynamic` names over `scope` (for a `DynamicObject`
    /// informer, the custom resource's `ApiResource`), configured by `configure` when it is
    /// created now. [`informer`](Self::informer) and [`informer_with`](Self::informer_with) are
    /// this with `&()`, for typed kinds.
    pub fn informer_for<K: Kind>(
        &self,
        dynamic: &K::DynamicType,
        scope: &Scope,
        configure: impl FnOnce(
            InformerBuilder<K, S::ListerWatcher<K>>,
        ) -> InformerBuilder<K, S::ListerWatcher<K>>,
    ) -> SharedIndexInformer<K> {
        let mut informers = self.informers.lock();
        let made = informers
            .entry((TypeId::of::<K>(), scope.clone()))
            .or_default();
        let existing = made.iter().find_map(|made| {
            let same_kind = made
                .dynamic
                .downcast_ref::<K::DynamicType>()
                .is_some_and(|kind| kind == dynamic);
            if same_kind {
                made.informer
                    .as_any()
                    .downcast_ref::<SharedIndexInformer<K>>()
            } else {
                None
            }
        });
        if let Some(informer) = existing {
            let informer = informer.clone();
            drop(informers);
            let probe =
                SharedIndexInformer::builder(self.source.lister_watcher::<K>(dynamic, scope));
            let (indexers, transform) = configure(probe).late_settings();
            for (name, function) in indexers.list {
                // A name it has is its own index (every store has `namespace`): kept.
                if !informer.store().has_index(&name) {
                    if let Err(conflict) = informer.add_index(&name, function) {
                        // Added meanwhile by another caller under the same name: kept as well.
                        tracing::debug!(informer = %informer.name(), %conflict, "index kept");
                    }
                }
            }
            if transform {
                tracing::warn!(
                    informer = %informer.name(),
                    "informer_with/informer_for: a transform was given for an informer that \
                     already exists; it is not applied (create the informer with it first)"
                );
            }
            return informer;
        }
        let plural = K::api_resource(dynamic).plural;
        let name = match &scope.namespace {
            Some(ns) => format!("{plural}/{ns}"),
            None => plural,
        };
        let mut builder =
            SharedIndexInformer::builder(self.source.lister_watcher::<K>(dynamic, scope))
                .name(&name);
        if let Some(metrics) = &self.metrics {
            builder = builder.metrics(metrics(&name));
        }
        let informer = configure(builder).build();
        made.push(Made {
            dynamic: Box::new(dynamic.clone()),
            informer: Arc::new(informer.clone()),
            order: self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        });
        informer
    }

    /// Every informer made, in the order they were made: starting, waiting and stopping go in
    /// that order, not in the map's (random) one, so that a run on one thread is repeatable
    /// (`ferrokube-explore`).
    fn in_order(&self) -> Vec<Arc<dyn Control>> {
        let informers = self.informers.lock();
        let mut all: Vec<&Made> = informers.values().flatten().collect();
        all.sort_by_key(|made| made.order);
        all.into_iter().map(|made| made.informer.clone()).collect()
    }

    /// Starts every informer not yet started.
    pub fn start(&self) -> Result<(), StartError> {
        for informer in self.in_order() {
            informer.start()?;
        }
        Ok(())
    }

    /// Waits until every informer has synced; false if one stopped first.
    pub async fn wait_for_cache_sync(&self) -> bool {
        let waits: Vec<SyncFuture> = self
            .in_order()
            .iter()
            .map(|informer| informer.wait_for_cache_sync())
            .collect();
        let mut all = true;
        for wait in waits {
            all &= wait.await;
        }
        all
    }

    /// Stops every informer.
    pub fn shutdown(&self) {
        for informer in self.in_order() {
            informer.stop();
        }
    }
}
