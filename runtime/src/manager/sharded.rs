//! Sharding in the manager (feature `shard`): the only module of the manager that names it.
//!
//! Two things live here. A shard ring's membership is the manager's [`Campaign`]: the manager
//! holds the member's Lease as it would hold a leader's, gates its client on it, and releases it
//! last. And [`Manager::add_sharded_controller`] runs a controller sharded the best way the
//! server allows, found out at run time (nothing to configure):
//!
//! ```text
//!   Manager::builder(client).shard(member)           add_sharded_controller(key, make)
//!                 │                                              │
//!                 ▼                                              ▼
//!   Campaign: the member's Lease          runnable: shard::ranges::run(member, K, key, ..)
//!   (write gate, released last)               │ asks the server: shardSelector?
//!                                              ├─ yes: one epoch per adopted ring, each behind
//!                                              │       the handover fence; per epoch a fresh
//!                                              │       informer factory and make(&parts), whose
//!                                              │       controller the parts narrow to the epoch's
//!                                              │       hash ranges (the server filters)
//!                                              └─ no:  one epoch in the label mode: make(&parts),
//!                                                      its controller sharded by the assigner's
//!                                                      labels (Controller::shard)
//! ```
//!
//! Either way no two members act on one object: the fence of [`crate::shard::ranges`] in the
//! server-side mode, the assigner's handover in the label mode. The controller `make` builds is
//! only ever sharded by [`ShardedParts::controller`], so a `make` cannot forget to shard it.
//!
//! What it costs: an epoch's informers are its own (a ring change relists the member's share),
//! and the controller `make` returns is rebuilt per epoch, so anything it keeps in memory across
//! reconciles starts empty again in the next epoch (the ReplicaSet sample's expectations and
//! scale-down window do; both are safe to lose, as after a restart).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ferrokube_client::Client;
use ferrokube_core::{Kind, Scope};
use ferrokube_informer::SharedInformerFactory;
use tokio::sync::mpsc;

use super::campaign::{Campaign, CampaignRun};
use super::{BoxError, Context, Manager, Runnable};
use crate::controller::{Controller, Metrics, Objects, Reconciler};
use crate::leader::Leadership;
use crate::shard::ShardMember;
use crate::shard::ranges::{self, Epoch, ShardKey};

impl Campaign for ShardMember {
    fn leadership(&self) -> Leadership {
        self.membership()
    }

    fn run<'a>(
        &'a self,
        stopped: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
    ) -> CampaignRun<'a> {
        Box::pin(async move {
            ShardMember::run(self, stopped).await?;
            Ok(())
        })
    }
}

/// Which objects a [`ShardedParts`] hands its controllers.
#[derive(Clone)]
enum Share {
    /// An unsharded manager: every object, once.
    All,
    /// One epoch of a sharded manager: its hash ranges, or the member's label.
    Epoch(Epoch),
}

/// What a sharded controller is built from, once per epoch of [`crate::shard::ranges`]: the
/// epoch's informer factory, the manager's gated client and metrics, and the epoch's share.
/// Build every controller and informer of the epoch from it, never from the [`Manager`]: the
/// manager's factory outlives epochs and is not narrowed.
#[derive(Clone)]
pub struct ShardedParts {
    share: Share,
    /// Invariant: its informers are this epoch's alone; stopped when the epoch ends.
    factory: Arc<SharedInformerFactory<Client>>,
    client: Client,
    metrics: Metrics,
}

impl ShardedParts {
    /// `base` narrowed to this epoch's objects, as [`controller`](Self::controller)'s informers
    /// select them: the epoch's hash ranges (server-side), the member's label (label mode), or
    /// `base` itself (unsharded). For informers and `watches` of your own.
    pub fn scope(&self, base: Scope) -> Scope {
        match &self.share {
            Share::All => base,
            Share::Epoch(epoch) => match epoch.label_member() {
                Some(member) => member.scope(base),
                None => epoch.scope(base),
            },
        }
    }

    /// A controller for `objects` on this epoch's factory, the manager's metrics and gated
    /// client, sharded by the epoch ([`Controller::shard_epoch`]): its primary and owned
    /// informers narrowed to the epoch's share. Return it from `make`.
    pub fn controller<K: Kind>(&self, objects: impl Into<Objects<K>>) -> Controller<K> {
        let controller = Controller::new(self.client.clone(), objects)
            .with_factory(self.factory.clone())
            .metrics(&self.metrics);
        match &self.share {
            Share::All => controller,
            Share::Epoch(epoch) => controller.shard_epoch(epoch),
        }
    }

    /// The epoch's informer factory (the manager's when unsharded).
    pub fn factory(&self) -> &Arc<SharedInformerFactory<Client>> {
        &self.factory
    }

    /// The manager's client, its writes gated by membership.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The manager's controller metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The epoch (`None` when the manager is not sharded).
    pub fn epoch(&self) -> Option<&Epoch> {
        match &self.share {
            Share::All => None,
            Share::Epoch(epoch) => Some(epoch),
        }
    }
}

impl Manager {
    /// Runs a sharded controller from [`run`](Self::run) until shutdown: `make` builds it (and
    /// its reconciler) from the [`ShardedParts`] of each epoch, with
    /// [`ShardedParts::controller`]. With [`ManagerBuilder::shard`](super::ManagerBuilder::shard)
    /// the manager asks the server whether it filters by `shardSelector`; if so, each member
    /// caches and reconciles only the objects whose `key` field hashes into its ranges, one epoch
    /// per ring it adopts behind the handover fence of [`crate::shard::ranges`]; if not, the controller shards by the
    /// assigner's labels. Without `shard`, `make` runs once and the controller is added as by
    /// [`add_controller`](Self::add_controller). A controller that fails ends the manager, as
    /// any runnable's failure does. Typed kinds (`K::DynamicType = ()`) only.
    pub fn add_sharded_controller<K, R, F>(&mut self, key: ShardKey, mut make: F)
    where
        K: Kind<DynamicType = ()>,
        R: Reconciler<K>,
        F: FnMut(&ShardedParts) -> (Controller<K>, R) + Send + 'static,
    {
        let Some(member) = self.shard_member().cloned() else {
            let parts = ShardedParts {
                share: Share::All,
                factory: self.factory.clone(),
                client: self.gated.clone(),
                metrics: self.metrics.clone(),
            };
            let (controller, reconciler) = make(&parts);
            self.add_controller(controller, reconciler);
            return;
        };
        let epochs = Epochs {
            member,
            key,
            informer_client: self.informer_client.clone(),
            client: self.gated.clone(),
            metrics: self.metrics.clone(),
        };
        let name = format!("sharded controller {}", K::api_resource(&()).kind);
        self.runnables.push(Runnable {
            name,
            is_controller: true,
            run: Box::new(move |context: Context| Box::pin(epochs.run(make, context))),
        });
    }
}

/// What a sharded controller's runnable needs to build its epochs.
struct Epochs {
    member: ShardMember,
    key: ShardKey,
    informer_client: Client,
    client: Client,
    metrics: Metrics,
}

impl Epochs {
    /// Drives [`ranges::run`] until the manager stops or an epoch's controller fails (then
    /// stops the epochs and returns the failure).
    async fn run<K, R, F>(self, mut make: F, context: Context) -> Result<(), BoxError>
    where
        K: Kind<DynamicType = ()>,
        R: Reconciler<K>,
        F: FnMut(&ShardedParts) -> (Controller<K>, R) + Send + 'static,
    {
        // `/readyz` counts this controller once, when its first epoch's caches have synced.
        let counted = Arc::new(AtomicBool::new(false));
        let (failed, mut failures) = mpsc::unbounded_channel::<BoxError>();
        let epoch_run = |epoch: Epoch| {
            let factory = Arc::new(
                SharedInformerFactory::new(self.informer_client.clone())
                    .with_metrics(self.metrics.informers()),
            );
            let parts = ShardedParts {
                share: Share::Epoch(epoch.clone()),
                factory: factory.clone(),
                client: self.client.clone(),
                metrics: self.metrics.clone(),
            };
            let (controller, reconciler) = make(&parts);
            let gate = {
                let (context, counted) = (context.clone(), counted.clone());
                async move {
                    // Polled for the first time once the epoch's caches have synced.
                    if !counted.swap(true, Ordering::SeqCst) {
                        context.mark_synced();
                    }
                    context.elected().await;
                }
            };
            let (stopped, failed) = (epoch.stopped(), failed.clone());
            async move {
                let result = controller
                    .start_workers_after(gate)
                    .run(reconciler, stopped)
                    .await;
                factory.shutdown();
                if let Err(error) = result {
                    let _ = failed.send(Box::new(error));
                }
            }
        };
        let mut failure = None;
        let shutdown = async {
            tokio::select! {
                () = context.stopped() => {}
                Some(error) = failures.recv() => failure = Some(error),
            }
        };
        let primary = K::api_resource(&());
        ranges::run(&self.member, &primary, self.key, epoch_run, shutdown).await;
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}
