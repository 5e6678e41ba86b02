//! Starting and stopping the controller as a whole: clients, informers, queue, workers.

use std::sync::Arc;

use ferrokube::controller::Metrics;
use ferrokube::informer::SharedInformerFactory;
use ferrokube::{Client, Config};
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{ControllerOptions, ReplicaSetController};

/// Everything that can stop the controller from starting.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The controller, its informers and workers, running.
pub struct Running {
    pub factory: Arc<SharedInformerFactory<Client>>,
    pub controller: Arc<ReplicaSetController>,
    stop: oneshot::Sender<()>,
    workers: JoinHandle<()>,
}

impl Running {
    /// Builds two clients from `config` (one for the informers, one for the controller's own
    /// requests, each with `config`'s QPS and burst, as kube-controller-manager does), starts the
    /// controller and returns once its caches have synced. With a `registry`, the controller's,
    /// the queue's and the informers' metrics are registered in it.
    pub async fn start(
        config: Config,
        options: ControllerOptions,
        registry: Option<&mut Registry>,
    ) -> Result<Running, BoxError> {
        let metrics = registry.map(Metrics::register);
        let mut factory = SharedInformerFactory::new(Client::new(config.clone())?);
        if let Some(metrics) = &metrics {
            factory = factory.with_metrics(metrics.informers());
        }
        let factory = Arc::new(factory);
        let (controller, builder, post_events) =
            ReplicaSetController::new(&factory, Client::new(config)?, options, metrics.as_ref());
        tokio::spawn(post_events);
        let controller = Arc::new(controller);
        let (stop, stopped) = oneshot::channel::<()>();
        let workers = tokio::spawn({
            let (controller, factory) = (controller.clone(), factory.clone());
            async move {
                let shutdown = async {
                    let _ = stopped.await;
                };
                if let Err(error) = controller.run(builder, shutdown).await {
                    tracing::error!(%error, "the ReplicaSet controller could not start");
                    factory.shutdown(); // so that a wait for the caches ends
                }
            }
        });
        if !factory.wait_for_cache_sync().await {
            return Err("an informer stopped before its cache synced".into());
        }
        Ok(Running {
            factory,
            controller,
            stop,
            workers,
        })
    }

    /// Stops the controller (no new keys; syncs in flight finish), then the informers.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(error) = self.workers.await {
            tracing::error!(%error, "controller task failed");
        }
        self.factory.shutdown();
    }
}
