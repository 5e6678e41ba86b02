//! Starting and stopping the controller as a whole, through a [`Manager`]: clients, informers,
//! queue, workers, and (when asked) leader election and the health and metrics endpoint.

use std::sync::Arc;

use ferrokube::informer::SharedInformerFactory;
use ferrokube::manager::{Manager, ManagerBuilder, ManagerError, ShardedParts};
use ferrokube::shard::ShardKey;
use ferrokube::{Client, Config};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{ControllerOptions, ReplicaSetController};

/// Everything that can stop the controller from starting.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The controller, its informers and workers, running in a manager.
pub struct Running {
    pub factory: Arc<SharedInformerFactory<Client>>,
    /// The controller; `None` when sharded: each epoch has its own (built again on each ring
    /// change, its informers on a factory of the epoch's, not `factory`).
    pub controller: Option<Arc<ReplicaSetController>>,
    stop: oneshot::Sender<()>,
    manager: JoinHandle<Result<(), ManagerError>>,
}

impl Running {
    /// [`start_with`](Self::start_with) a manager with its defaults: no leader election, no
    /// endpoint.
    pub async fn start(config: Config, options: ControllerOptions) -> Result<Running, BoxError> {
        Running::start_with(config, options, |manager| manager, std::future::pending()).await
    }

    /// Builds two clients from `config` (one for the informers, one for the controller's own
    /// requests, each with `config`'s QPS and burst, as kube-controller-manager does), a manager
    /// set up by `configure`, starts the controller in it, and returns once its caches have
    /// synced (its workers may still wait to be elected). The controller's, the queue's, the
    /// informers' and the sample's own metrics are in the manager's registry. The manager stops
    /// gracefully when `shutdown` resolves or [`stop`](Self::stop) is called.
    ///
    /// A manager `configure` made sharded (`ManagerBuilder::shard`) runs the controller through
    /// `Manager::add_sharded_controller`, keyed by namespace (a ReplicaSet and its pods stay on
    /// one member): by hash ranges when the server filters by `shardSelector`, by the assigner's
    /// labels when not. Then this returns at once, without a controller to show.
    pub async fn start_with(
        config: Config,
        options: ControllerOptions,
        configure: impl FnOnce(ManagerBuilder) -> ManagerBuilder,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Running, BoxError> {
        let mut builder =
            Manager::builder(Client::new(config.clone())?).informer_client(Client::new(config)?);
        let stats = super::Stats::register(builder.registry());
        let mut manager = configure(builder).build()?;
        let factory = manager.factory().clone();
        let controller = if manager.shard_member().is_some() {
            manager.add_sharded_controller(ShardKey::Namespace, move |parts: &ShardedParts| {
                let (controller, builder, post_events) =
                    ReplicaSetController::new(parts, options.clone(), stats.clone());
                // Ends with the epoch: its senders go with the epoch's controller.
                tokio::spawn(post_events);
                (builder, controller.reconciler())
            });
            None
        } else {
            let (controller, builder, post_events) =
                ReplicaSetController::new(&manager, options, stats);
            tokio::spawn(post_events);
            let controller = Arc::new(controller);
            manager.add_controller(builder, controller.reconciler());
            Some(controller)
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let manager = tokio::spawn(manager.run_until(async {
            tokio::select! {
                _ = stopped => {}
                () = shutdown => {}
            }
        }));
        if !factory.wait_for_cache_sync().await {
            return Err("an informer stopped before its cache synced".into());
        }
        Ok(Running {
            factory,
            controller,
            stop,
            manager,
        })
    }

    /// Runs the controller on `client` alone (its informers' lists and watches and its writes),
    /// in a manager with its defaults, until `shutdown` resolves: the whole controller as one
    /// future, as the fault explorer runs each incarnation of it (`ferrokube::explore`, and
    /// `examples/tests/explore_mutants_rs_dns.rs`). One client rather than
    /// [`start_with`](Self::start_with)'s two, so that every request passes the one seam the
    /// explorer taps.
    pub async fn run(
        client: Client,
        options: ControllerOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BoxError> {
        let mut builder = Manager::builder(client);
        let stats = super::Stats::register(builder.registry());
        let mut manager = builder.build()?;
        let (controller, builder, post_events) =
            ReplicaSetController::new(&manager, options, stats);
        tokio::spawn(post_events);
        manager.add_controller(builder, controller.reconciler());
        manager.run_until(shutdown).await?;
        Ok(())
    }

    /// Waits until the manager stops: after the `shutdown` given to
    /// [`start_with`](Self::start_with), or by itself (lost leadership, a failure).
    pub async fn wait(self) -> Result<(), BoxError> {
        match self.manager.await {
            Ok(result) => result.map_err(Into::into),
            Err(error) => Err(error.into()),
        }
    }

    /// Stops the controller (no new keys; syncs in flight finish), releases the lease if it
    /// held one, then stops the informers.
    pub async fn stop(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        match self.manager.await {
            Ok(result) => result.map_err(Into::into),
            Err(error) => Err(error.into()),
        }
    }
}
