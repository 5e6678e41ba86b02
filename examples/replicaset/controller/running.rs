//! Starting and stopping the controller as a whole: clients, informers, queue, workers.

use std::sync::Arc;

use ferrokube::informer::{PrometheusInformerMetrics, SharedInformerFactory, StartError};
use ferrokube::workqueue::{PrometheusMetrics, WorkQueue, default_controller_rate_limiter};
use ferrokube::{Client, Config};
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{ControllerOptions, ReplicaSetController};

/// Everything that can stop the controller from starting.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The controller, its informers and workers, running.
pub struct Running {
    pub factory: SharedInformerFactory<Client>,
    pub controller: Arc<ReplicaSetController>,
    stop: oneshot::Sender<()>,
    workers: JoinHandle<()>,
}

impl Running {
    /// Builds two clients from `config` (one for the informers, one for the controller's own
    /// requests, each with `config`'s QPS and burst, as kube-controller-manager does), starts the
    /// informers, waits for their caches, and starts the workers. With a `registry`, the informers'
    /// and the queue's metrics are registered in it.
    pub async fn start(
        config: Config,
        options: ControllerOptions,
        registry: Option<&mut Registry>,
    ) -> Result<Running, BoxError> {
        let mut factory = SharedInformerFactory::new(Client::new(config.clone())?);
        let mut queue = WorkQueue::builder()
            .name("replicaset")
            .rate_limiter(default_controller_rate_limiter());
        if let Some(registry) = registry {
            let informer_metrics = PrometheusInformerMetrics::register(registry);
            factory = factory.with_metrics(move |name| informer_metrics.for_informer(name));
            queue = queue.metrics(PrometheusMetrics::register(registry).for_queue("replicaset"));
        }
        let (controller, post_events) =
            ReplicaSetController::new(&factory, Client::new(config)?, queue.build(), options)?;
        tokio::spawn(post_events);
        factory.start()?;
        if !factory.wait_for_cache_sync().await {
            return Err(Box::new(StartError::Stopped));
        }
        let controller = Arc::new(controller);
        let (stop, stopped) = oneshot::channel::<()>();
        let workers = tokio::spawn({
            let controller = controller.clone();
            async move {
                controller
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await
            }
        });
        Ok(Running {
            factory,
            controller,
            stop,
            workers,
        })
    }

    /// Stops the informers, then drains the queue (ShutDownWithDrain) and waits for the workers.
    pub async fn stop(self) {
        self.factory.shutdown();
        let _ = self.stop.send(());
        if let Err(error) = self.workers.await {
            tracing::error!(%error, "controller task failed");
        }
    }
}
