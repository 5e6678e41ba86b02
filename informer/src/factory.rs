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

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;

pub use ferrokube_core::scope::{Scope, ScopeMatcher};

use crate::lister_watcher::ListerWatcher;
use crate::metrics::InformerMetrics;
use crate::object::Object;
use crate::shared_informer::{InformerBuilder, SharedIndexInformer, StartError};

/// Makes a [`ListerWatcher`] for any built-in type and a scope.
pub trait ListerWatcherSource: Send + Sync + 'static {
    type ListerWatcher<K: Object + k8s_openapi::Resource>: ListerWatcher<K>;
    fn lister_watcher<K: Object + k8s_openapi::Resource>(
        &self,
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

impl<K: Object> Control for SharedIndexInformer<K> {
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

/// See the [module docs](self).
pub struct SharedInformerFactory<S> {
    source: S,
    informers: Mutex<HashMap<(TypeId, Scope), Arc<dyn Control>>>,
    metrics: Option<MetricsFor>,
}

impl<S: ListerWatcherSource> SharedInformerFactory<S> {
    pub fn new(source: S) -> Self {
        SharedInformerFactory {
            source,
            informers: Mutex::new(HashMap::new()),
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

    /// The informer of `K` over `scope`, created with default options on first use.
    pub fn informer<K: Object + k8s_openapi::Resource>(
        &self,
        scope: &Scope,
    ) -> SharedIndexInformer<K> {
        self.informer_with(scope, |builder| builder)
    }

    /// Like [`informer`](Self::informer); when the informer does not exist yet, `configure` sets
    /// its options (transform, indexers, reflector settings). Later calls get the existing one.
    pub fn informer_with<K: Object + k8s_openapi::Resource>(
        &self,
        scope: &Scope,
        configure: impl FnOnce(
            InformerBuilder<K, S::ListerWatcher<K>>,
        ) -> InformerBuilder<K, S::ListerWatcher<K>>,
    ) -> SharedIndexInformer<K> {
        let id = (TypeId::of::<K>(), scope.clone());
        let mut informers = self.informers.lock();
        if let Some(existing) = informers.get(&id) {
            if let Some(informer) = existing.as_any().downcast_ref::<SharedIndexInformer<K>>() {
                return informer.clone();
            }
        }
        let name = match &scope.namespace {
            Some(ns) => format!("{}/{}", K::URL_PATH_SEGMENT, ns),
            None => K::URL_PATH_SEGMENT.to_string(),
        };
        let mut builder =
            SharedIndexInformer::builder(self.source.lister_watcher::<K>(scope)).name(&name);
        if let Some(metrics) = &self.metrics {
            builder = builder.metrics(metrics(&name));
        }
        let informer = configure(builder).build();
        informers.insert(id, Arc::new(informer.clone()));
        informer
    }

    /// Starts every informer not yet started.
    pub fn start(&self) -> Result<(), StartError> {
        for informer in self.informers.lock().values() {
            informer.start()?;
        }
        Ok(())
    }

    /// Waits until every informer has synced; false if one stopped first.
    pub async fn wait_for_cache_sync(&self) -> bool {
        let waits: Vec<SyncFuture> = self
            .informers
            .lock()
            .values()
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
        for informer in self.informers.lock().values() {
            informer.stop();
        }
    }
}
