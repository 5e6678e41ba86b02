//! # The manager: running controllers for real
//!
//! A controller in production runs as a Deployment with two or three replicas, and exactly one of
//! them may act. Around the controllers themselves ([`crate::controller`]) that takes a few more
//! parts, and the manager puts them together in one place:
//!
//! ```text
//!   Manager::builder(client)                      one process
//!   ┌───────────────────────────────────────────────────────────────────────────────────┐
//!   │ LeaderElector ── Lease ◀──▶ API server      leadership: Follower → Leading → (lost) │
//!   │      │ Leadership (gate)                                                           │
//!   │      ▼                                                                             │
//!   │ gated Client ──▶ controllers' writes        refused once this replica may have lost │
//!   │                                                                                   │
//!   │ SharedInformerFactory ──▶ caches            started at once on every replica (warm) │
//!   │ controllers: informers + handlers at once; workers only when elected               │
//!   │                                                                                   │
//!   │ HTTP: /healthz /readyz /metrics             kubelet probes, Prometheus             │
//!   │ SIGTERM / SIGINT ──▶ graceful shutdown      stop keys, drain, release the lease     │
//!   └───────────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! ## A manager in one screen
//!
//! ```no_run
//! use std::sync::Arc;
//! use ferrokube_runtime::controller::{Action, Context, Reconciler};
//! use ferrokube_core::Scope;
//! use ferrokube_runtime::manager::Manager;
//! use ferrokube_client::Client;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Audit;
//!
//! impl Reconciler<ConfigMap> for Audit {
//!     type Error = ferrokube_client::Error;
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: Context) -> Result<Action, ferrokube_client::Error> {
//!         // ... writes through ctx (the manager's gated client): refused unless this replica
//!         // surely leads, and recorded for the key
//!         Ok(Action::await_change())
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut manager = Manager::builder(Client::try_default()?)
//!     .leader_election("my-namespace", "audit-controller")
//!     .serve("0.0.0.0:8081".parse()?)
//!     .build()?;
//! let controller = manager.controller::<ConfigMap>(Scope::all());
//! manager.add_controller(controller, Audit);
//! manager.run().await?; // until SIGTERM or SIGINT; Err(LeadershipLost) if the lease was lost
//! # Ok(())
//! # }
//! ```
//!
//! ## What `run` does, in order
//!
//! 1. Binds the HTTP endpoint, if one was asked for ([`ManagerBuilder::serve`]): `/healthz`,
//!    `/readyz` and `/metrics` answer from then on, within limits that keep slow, idle or too
//!    many clients from taking it or the process's file descriptors ([`EndpointOptions`]).
//! 2. Starts the leader elector, if leader election is on ([`ManagerBuilder::leader_election`]).
//! 3. Starts every controller ([`Manager::add_controller`]). With **warm followers** (the
//!    default), each starts its informers and handlers at once, on every replica, and waits for
//!    its caches; only its workers wait for this replica to be elected
//!    ([`Controller::start_workers_after`]). So a replica that takes over already has full
//!    caches and a queue holding every key: its first reconcile starts as soon as it is elected,
//!    not after a list of everything. The cost: every follower holds the same caches as the leader
//!    (its memory is the leader's, minus what reconciles allocate) and keeps one watch per cached
//!    type open on the API server. Without warm followers, a follower starts nothing until elected.
//! 4. `/readyz` turns ready once every controller's caches have synced.
//! 5. Waits for one of: the shutdown signal (SIGTERM or SIGINT by default, [`shutdown_signal`]),
//!    the loss of leadership, or a controller failing.
//! 6. Stops: every controller stops taking keys and finishes the reconciles in flight (each
//!    within its own shutdown timeout, all within [`ManagerBuilder::graceful_shutdown_timeout`]),
//!    *then* the lease is released (so that the next leader never overlaps with our last
//!    reconciles), then the informers stop. A follower stops campaigning as soon as the stop
//!    begins: a replica on its way out never takes the lease (it would lead with its controllers
//!    stopped, then hand the lease over a second time).
//!
//! `run` returns `Ok(())` after a signal, and [`ManagerError::LeadershipLost`] when this replica
//! lost its lease: like kube-controller-manager and controller-runtime, a replica that lost
//! leadership exits (the process restarts and campaigns again with fresh caches) rather than
//! trying to forget what it was doing.
//!
//! ## Never acting without leadership
//!
//! client-go documents that two replicas may briefly both act. Here every write a controller makes
//! goes through [`Manager::client`], a [`Client`] gated by the elector's
//! [`Leadership`]: a write is refused, before it is sent, with [`Error::NotLeader`] once this
//! replica's own clock says its lease may have run out (see [`crate::leader`] for the exact rule).
//! A replica frozen past its lease (SIGSTOP, a long GC-like pause, a stalled VM) therefore makes no
//! write when it wakes, before or after it learns that it lost. Reads (get, list, watch) are never
//! gated. The elector's own requests use the ungated client.
//!
//! [`Error::NotLeader`]: ferrokube_client::Error::NotLeader
//! [`Controller::start_workers_after`]: crate::controller::Controller::start_workers_after

mod campaign;
mod endpoints;
#[cfg(feature = "shard")]
mod sharded;
mod signal;

#[cfg(feature = "shard")]
pub use sharded::ShardedParts;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrokube_informer::SharedInformerFactory;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::controller::{Controller, Metrics, Objects, Reconciler};
use crate::leader::{LeaderElector, LeaderElectorBuilder, LeaderMetrics, LeaderState, Leadership};
use campaign::Campaign;
pub use endpoints::{
    DEFAULT_ACCEPT_BACKOFF_INITIAL, DEFAULT_ACCEPT_BACKOFF_MAX, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, EndpointOptions,
};
use endpoints::{Endpoints, Health};
use ferrokube_client::Client;
use ferrokube_core::Kind;
pub use signal::shutdown_signal;

/// controller-runtime's default for the whole graceful shutdown: 30 s.
pub const DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Any error a runnable may end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Why [`Manager::run`] could not start, or ended other than by a signal.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The HTTP endpoint could not listen on its address.
    #[error("cannot serve health and metrics on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// This replica led and lost its lease; its controllers were stopped. Exit and restart.
    #[error("leader election lost")]
    LeadershipLost,
    /// The leader elector's settings are invalid.
    #[error("leader election: {0}")]
    LeaderElectionConfig(#[source] crate::leader::LeaderElectionError),
    /// Leader election stopped with an error before this replica led.
    #[error("leader election failed: {0}")]
    LeaderElection(#[source] BoxError),
    /// A controller (or other runnable) failed.
    #[error("{name} failed: {source}")]
    Runnable {
        name: String,
        #[source]
        source: BoxError,
    },
    /// Leader election and sharding (feature `shard`) were both asked for: a replica either
    /// leads alone or takes a share.
    #[error("leader election and sharding cannot both be on")]
    ElectionAndSharding,
    /// The graceful shutdown did not finish within its timeout; what was still running was
    /// abandoned.
    #[error("graceful shutdown did not finish within {0:?}")]
    ShutdownTimeout(Duration),
}

/// The settings of a [`Manager`]. Every option has a default, documented on its setter.
#[must_use = "a manager builder does nothing until build()"]
pub struct ManagerBuilder {
    client: Client,
    informer_client: Option<Client>,
    leader_election: Option<LeaderElectorBuilder>,
    /// A Lease campaign other than leader election: a shard ring's membership
    /// ([`shard`](Self::shard), feature `shard`). At most one of it and `leader_election`.
    membership: Option<Box<dyn Campaign>>,
    http_addr: Option<SocketAddr>,
    endpoint_options: EndpointOptions,
    warm_followers: bool,
    graceful_shutdown_timeout: Duration,
    registry: Registry,
}

impl ManagerBuilder {
    /// Turns leader election on, on the Lease `namespace/name`, with the elector's defaults
    /// (client-go's: lease 15 s, renew deadline 10 s, retry period 2 s; identity = host name and a
    /// random suffix). Default: off, every replica acts (controller-runtime's default too).
    pub fn leader_election(self, namespace: &str, lease_name: &str) -> Self {
        self.leader_election_with(namespace, lease_name, |elector| elector)
    }

    /// [`leader_election`](Self::leader_election) with the elector's options set by `configure`
    /// (identity, durations, release on cancel).
    pub fn leader_election_with(
        mut self,
        namespace: &str,
        lease_name: &str,
        configure: impl FnOnce(LeaderElectorBuilder) -> LeaderElectorBuilder,
    ) -> Self {
        let builder = LeaderElector::builder(self.client.clone(), namespace, lease_name);
        self.leader_election = Some(configure(builder));
        self
    }

    /// Makes this replica a member of `member`'s ring instead of a leader candidate (see
    /// `crate::shard`): the manager holds the membership Lease as it would hold a leader's, its
    /// client's writes are gated by membership, controllers' workers start once this replica has
    /// joined, a lost membership ends [`Manager::run`] with
    /// [`ManagerError::LeadershipLost`], and shutdown stops the controllers before it releases the
    /// Lease. Add each sharded controller with
    /// [`Manager::add_sharded_controller`]: it shards by hash ranges the server filters when the
    /// server has `shardSelector` (each member then caches only its share), by the assigner's
    /// labels when not. (A controller built by hand with
    /// `Controller::shard(manager.shard_member())` and [`Manager::add_controller`] always uses
    /// the labels.) Default: off. Needs the `shard` feature.
    #[cfg(feature = "shard")]
    pub fn shard(mut self, member: crate::shard::ShardMember) -> Self {
        self.membership = Some(Box::new(member));
        self
    }

    /// A client of its own for the informers' lists and watches, so that they do not share a rate
    /// limiter with the controllers' writes (kube-controller-manager gives its shared informers a
    /// client of their own). Default: the manager's client.
    pub fn informer_client(mut self, client: Client) -> Self {
        self.informer_client = Some(client);
        self
    }

    /// Serves `/healthz`, `/readyz` and `/metrics` on `addr` (e.g. `0.0.0.0:8081` in a pod; port
    /// 0 picks a free port, see [`Manager::http_addr`]). [`build`](Self::build) binds it.
    /// Default: no endpoint.
    pub fn serve(mut self, addr: SocketAddr) -> Self {
        self.http_addr = Some(addr);
        self
    }

    /// The endpoint's limits against slow, idle and too many clients: header-read and idle
    /// timeouts, a cap on connections, the pause after failed `accept`s. Default
    /// [`EndpointOptions::new`]: controller-runtime's timeouts (32 s, 90 s), at most 512
    /// connections, Go's `accept` back-off (5 ms doubling to 1 s). See [`EndpointOptions`] for
    /// why each.
    pub fn endpoint_options(mut self, options: EndpointOptions) -> Self {
        self.endpoint_options = options;
        self
    }

    /// Whether followers start their informers before they are elected (see the
    /// [module docs](self) for what it costs). Default: true.
    pub fn warm_followers(mut self, warm: bool) -> Self {
        self.warm_followers = warm;
        self
    }

    /// The most a graceful shutdown may take, from the signal to the lease's release. Default
    /// [`DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT`] (30 s).
    pub fn graceful_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.graceful_shutdown_timeout = timeout;
        self
    }

    /// The Prometheus registry `/metrics` serves, to register metrics of your own before
    /// [`build`](Self::build). The controllers', workqueues', informers' and leader election's
    /// families are added to it by `build`.
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Builds the manager: binds its HTTP endpoint (if asked for), makes its informer factory,
    /// its metrics, and its elector (if on).
    pub fn build(mut self) -> Result<Manager, ManagerError> {
        let listener = match self.http_addr {
            Some(addr) => Some(
                std::net::TcpListener::bind(addr)
                    .and_then(|listener| {
                        listener.set_nonblocking(true)?;
                        Ok(listener)
                    })
                    .map_err(|source| ManagerError::Bind { addr, source })?,
            ),
            None => None,
        };
        let metrics = Metrics::register(&mut self.registry);
        let informer_client = self.informer_client.unwrap_or_else(|| self.client.clone());
        let factory = Arc::new(
            SharedInformerFactory::new(informer_client.clone()).with_metrics(metrics.informers()),
        );
        let elector: Option<Box<dyn Campaign>> = match (self.leader_election, self.membership) {
            (Some(_), Some(_)) => return Err(ManagerError::ElectionAndSharding),
            (Some(builder), None) => Some(Box::new(
                builder
                    .metrics(&LeaderMetrics::register(&mut self.registry))
                    .build()
                    .map_err(ManagerError::LeaderElectionConfig)?,
            )),
            (None, membership) => membership,
        };
        let leadership = elector.as_ref().map(|campaign| campaign.leadership());
        let gated = match &leadership {
            Some(leadership) => self.client.with_write_gate(leadership.clone()),
            None => self.client.clone(),
        };
        Ok(Manager {
            gated,
            informer_client,
            factory,
            metrics,
            registry: self.registry,
            elector,
            leadership,
            runnables: Vec::new(),
            listener,
            endpoint_options: self.endpoint_options,
            warm_followers: self.warm_followers,
            graceful_shutdown_timeout: self.graceful_shutdown_timeout,
        })
    }
}

/// Runs controllers with leader election, health and metrics endpoints, and graceful shutdown.
/// See the [module docs](self).
pub struct Manager {
    /// The client controllers write with: gated by `leadership` when leader election is on.
    gated: Client,
    /// The informers' client (the manager's own unless [`ManagerBuilder::informer_client`]):
    /// sharded controllers make one factory per epoch on it.
    #[cfg_attr(not(feature = "shard"), allow(dead_code))]
    informer_client: Client,
    factory: Arc<SharedInformerFactory<Client>>,
    metrics: Metrics,
    registry: Registry,
    elector: Option<Box<dyn Campaign>>,
    /// `Some` exactly when `elector` is.
    leadership: Option<Leadership>,
    runnables: Vec<Runnable>,
    /// The endpoint's socket, bound by `build`; served by `run`.
    listener: Option<std::net::TcpListener>,
    endpoint_options: EndpointOptions,
    warm_followers: bool,
    graceful_shutdown_timeout: Duration,
}

/// Something the manager runs until shutdown: a controller, or any task added with
/// [`Manager::add`].
struct Runnable {
    name: String,
    /// A controller counts towards `/readyz` (its caches must sync); other runnables do not.
    is_controller: bool,
    run: Box<dyn FnOnce(Context) -> BoxFuture<Result<(), BoxError>> + Send>,
}

/// What a runnable gets from the manager: when it may act, and when to stop.
#[derive(Clone)]
pub struct Context {
    leadership: Option<Leadership>,
    stop: watch::Receiver<bool>,
    synced: Arc<AtomicUsize>,
}

impl Context {
    /// Resolves when this replica leads (at once without leader election). Never resolves if
    /// the elector stops before this replica was elected.
    pub fn elected(&self) -> impl Future<Output = ()> + Send + 'static {
        let leadership = self.leadership.clone();
        async move {
            if let Some(leadership) = leadership
                && leadership.acquired().await.is_err()
            {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Resolves when the manager shuts down (a signal, lost leadership, another runnable's
    /// failure).
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stop = self.stop.clone();
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        }
    }

    /// Tells `/readyz` that one more controller's caches have synced.
    fn mark_synced(&self) {
        self.synced.fetch_add(1, Ordering::SeqCst);
    }
}

impl Manager {
    /// A manager using `client` for everything (informers, the elector, the controllers' writes,
    /// the latter gated by leadership). Set its options on the returned builder.
    pub fn builder(client: Client) -> ManagerBuilder {
        ManagerBuilder {
            client,
            informer_client: None,
            leader_election: None,
            membership: None,
            http_addr: None,
            endpoint_options: EndpointOptions::new(),
            warm_followers: true,
            graceful_shutdown_timeout: DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT,
            registry: Registry::default(),
        }
    }

    /// The client for controllers' requests: with leader election on, its writes are refused
    /// ([`Error::NotLeader`](ferrokube_client::Error::NotLeader)) unless this replica surely leads.
    /// The controllers made by [`controller`](Self::controller) hand it to each reconcile through
    /// its [`Context`](crate::controller::Context).
    pub fn client(&self) -> Client {
        self.gated.clone()
    }

    /// The informer factory every controller of this manager shares.
    pub fn factory(&self) -> &Arc<SharedInformerFactory<Client>> {
        &self.factory
    }

    /// The metric families controllers report to (registered in the manager's registry).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Where `/healthz`, `/readyz` and `/metrics` are served (the bound address: with port 0 in
    /// [`ManagerBuilder::serve`], the port the system chose).
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// This replica's leadership, when leader election is on (its membership when sharded).
    pub fn leadership(&self) -> Option<&Leadership> {
        self.leadership.as_ref()
    }

    /// This replica's ring membership, when sharded ([`ManagerBuilder::shard`]).
    #[cfg(feature = "shard")]
    pub fn shard_member(&self) -> Option<&crate::shard::ShardMember> {
        let campaign: &dyn std::any::Any = self.elector.as_deref()?;
        campaign.downcast_ref()
    }

    /// A controller for the `objects` (a [`Scope`](ferrokube_core::Scope) for a typed kind, [`Objects::dynamic`] for
    /// a kind known only at run time), on the manager's factory and metrics, writing with the
    /// manager's gated [`client`](Self::client): the one way to start a controller that
    /// [`add_controller`](Self::add_controller) will run.
    pub fn controller<K: Kind>(&self, objects: impl Into<Objects<K>>) -> Controller<K> {
        Controller::new(self.gated.clone(), objects)
            .with_factory(self.factory.clone())
            .metrics(&self.metrics)
    }

    /// Runs `controller` with `reconciler` from [`run`](Self::run) until shutdown; its workers
    /// start only when this replica is elected.
    pub fn add_controller<K, R>(&mut self, controller: Controller<K>, reconciler: R)
    where
        K: Kind,
        R: Reconciler<K>,
    {
        let name = format!("controller {}", controller.controller_name());
        self.runnables.push(Runnable {
            name,
            is_controller: true,
            run: Box::new(move |context: Context| {
                Box::pin(async move {
                    let gate = {
                        let (context, elected) = (context.clone(), context.elected());
                        async move {
                            // Polled for the first time once the caches have synced.
                            context.mark_synced();
                            elected.await;
                        }
                    };
                    controller
                        .start_workers_after(gate)
                        .run(reconciler, context.stopped())
                        .await
                        .map_err(|e| Box::new(e) as BoxError)
                })
            }),
        });
    }

    /// Runs `task` from [`run`](Self::run): it gets a [`Context`] (await `elected()` before
    /// acting; return once `stopped()` resolves). With cold followers it is started only once
    /// elected.
    pub fn add<F, Fut>(&mut self, name: &str, task: F)
    where
        F: FnOnce(Context) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.runnables.push(Runnable {
            name: name.to_string(),
            is_controller: false,
            run: Box::new(move |context| Box::pin(task(context))),
        });
    }

    /// [`run_until`](Self::run_until) SIGTERM or SIGINT ([`shutdown_signal`]).
    pub async fn run(self) -> Result<(), ManagerError> {
        self.run_until(shutdown_signal()).await
    }

    /// Runs everything until `shutdown` resolves, this replica loses its lease, or a runnable
    /// fails; then shuts down gracefully. See the [module docs](self) for the order of things;
    /// each step is a function below: the endpoints (`serve_endpoints`), the elector
    /// (`spawn_elector`), the runnables (`spawn_runnables`), the wait for a reason to stop
    /// (`wait_for_stop`), then the stop in order: runnables (`drain_runnables`), the lease
    /// (`stop_elector`), the factory, the endpoints.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ManagerError> {
        let controllers = self.runnables.iter().filter(|r| r.is_controller).count();
        let synced = Arc::new(AtomicUsize::new(0));
        let health = Health::new(self.leadership.clone(), synced.clone(), controllers);
        let (stop_endpoints, endpoints_stopped) = watch::channel(false);
        let endpoints = serve_endpoints(
            self.listener,
            health,
            self.registry,
            self.endpoint_options,
            endpoints_stopped,
        )?;
        let (stop_elector_tx, elector_stopped) = watch::channel(false);
        let (stop_runnables, runnables_stopped) = watch::channel(false);
        let elector = spawn_elector(self.elector, runnables_stopped.clone(), elector_stopped);
        let context = Context {
            leadership: self.leadership.clone(),
            stop: runnables_stopped,
            synced,
        };
        let mut tasks = spawn_runnables(self.runnables, &context, self.warm_followers);
        let mut outcome = wait_for_stop(shutdown, self.leadership.clone(), &mut tasks).await;

        // Stop: controllers first (no new keys, reconciles in flight finish), then the lease.
        let _ = stop_runnables.send(true);
        let deadline = crate::deadline::saturating_deadline(
            tokio::time::Instant::now(),
            self.graceful_shutdown_timeout,
        );
        let drained = drain_runnables(tasks, deadline, self.graceful_shutdown_timeout).await;
        outcome = outcome.and(drained);
        let _ = stop_elector_tx.send(true);
        outcome = outcome.and(stop_elector(elector, deadline).await);
        self.factory.shutdown();
        let _ = stop_endpoints.send(true);
        if let Some(endpoints) = endpoints {
            let _ = endpoints.await;
        }
        tracing::info!("manager stopped");
        outcome
    }
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `listener`, if there is one, until
/// `stopped` turns true.
fn serve_endpoints(
    listener: Option<std::net::TcpListener>,
    health: Health,
    registry: Registry,
    options: EndpointOptions,
    stopped: watch::Receiver<bool>,
) -> Result<Option<tokio::task::JoinHandle<()>>, ManagerError> {
    let Some(listener) = listener else {
        return Ok(None);
    };
    let addr = listener.local_addr().ok();
    let server =
        Endpoints::from_std(listener, health, Arc::new(registry), options).map_err(|source| {
            ManagerError::Bind {
                addr: addr.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
                source,
            }
        })?;
    tracing::info!(?addr, "serving /healthz, /readyz and /metrics");
    Ok(Some(tokio::spawn(server.serve(stopped))))
}

/// The elector's task. It runs until told to stop (`stop`), or until leadership is lost; a
/// follower stops campaigning as soon as the manager starts stopping (`stopping`; see
/// [`elector_shutdown`]).
fn spawn_elector(
    elector: Option<Box<dyn Campaign>>,
    stopping: watch::Receiver<bool>,
    stop: watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<Result<(), BoxError>>> {
    elector.map(|elector| {
        let shutdown = elector_shutdown(elector.leadership(), stopping, stop);
        tokio::spawn(async move { elector.run(Box::pin(shutdown)).await })
    })
}

/// Each runnable in a task of its own; with cold followers (`warm` false), started only once
/// elected, and never once the manager is stopping.
fn spawn_runnables(
    runnables: Vec<Runnable>,
    context: &Context,
    warm: bool,
) -> JoinSet<(String, Result<(), BoxError>)> {
    let mut tasks = JoinSet::new();
    for runnable in runnables {
        let context = context.clone();
        tasks.spawn(async move {
            if !warm {
                tokio::select! {
                    // Stopped first: a runnable never starts once the manager is stopping.
                    biased;
                    () = context.stopped() => return (runnable.name, Ok(())),
                    () = context.elected() => {}
                }
            }
            let result = (runnable.run)(context).await;
            (runnable.name, result)
        });
    }
    tasks
}

/// Waits for the reason to stop: `shutdown`, the loss of the lease, or a runnable's end. `Ok`
/// for the asked-for shutdown; the loss or the runnable's end is the manager's error.
async fn wait_for_stop(
    shutdown: impl Future<Output = ()> + Send,
    leadership: Option<Leadership>,
    tasks: &mut JoinSet<(String, Result<(), BoxError>)>,
) -> Result<(), ManagerError> {
    let lost = async move {
        match leadership {
            Some(leadership) => {
                if leadership.acquired().await.is_ok() {
                    leadership.lost().await;
                } else {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        // The asked-for shutdown first, then the loss, then a runnable's end: only a
        // coincidence in one poll is decided by the order (each branch ends the wait, so
        // none can starve another), and then the stop that was asked for is what happened.
        biased;
        () = shutdown => {
            tracing::info!("shutdown signal: stopping the controllers");
            Ok(())
        }
        () = lost => {
            tracing::error!("leader election lost: stopping the controllers");
            Err(ManagerError::LeadershipLost)
        }
        Some(joined) = tasks.join_next(), if !tasks.is_empty() => Err(runnable_failure(joined)),
    }
}

/// Waits until `deadline` for the runnables to end (they were told to stop); past it, aborts
/// them and reports the timeout (`timeout`, the graceful shutdown's).
async fn drain_runnables(
    mut tasks: JoinSet<(String, Result<(), BoxError>)>,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<(), ManagerError> {
    let drained = tokio::time::timeout_at(deadline, async {
        while let Some(joined) = tasks.join_next().await {
            if let Err(error) = runnable_result(joined) {
                tracing::warn!(%error, "stopping");
            }
        }
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
        tracing::warn!(?timeout, "graceful shutdown timed out");
        return Err(ManagerError::ShutdownTimeout(timeout));
    }
    Ok(())
}

/// Waits (5 s past `deadline` at most) for the elector, told to stop, to release the lease; an
/// error it ended with is the manager's.
async fn stop_elector(
    elector: Option<tokio::task::JoinHandle<Result<(), BoxError>>>,
    deadline: tokio::time::Instant,
) -> Result<(), ManagerError> {
    let Some(elector) = elector else {
        return Ok(());
    };
    match tokio::time::timeout_at(deadline + Duration::from_secs(5), elector).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(error))) => {
            tracing::warn!(%error, "leader election ended with an error");
            Err(ManagerError::LeaderElection(error))
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "leader election task failed");
            Ok(())
        }
        Err(_) => {
            tracing::warn!("leader election did not stop in time");
            Ok(())
        }
    }
}

/// When the elector is to stop. A follower: as soon as the manager starts stopping (`stopping`),
/// for a replica on its way out must never take the lease; it would lead with its controllers
/// stopped, and the others would wait for a second hand-over. A leader: only once told to
/// (`stop`), after its controllers have drained, so that it releases the lease last. The elector
/// polls this future between its steps, so "leading" is read from its own state.
async fn elector_shutdown(
    leadership: Leadership,
    mut stopping: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let follower_may_go = async {
        if stopping.wait_for(|stopping| *stopping).await.is_err() {
            return std::future::pending::<()>().await;
        }
        let mut state = leadership.watch();
        // Resolve while not leading; once leading, wait for `stop` alone.
        loop {
            if !matches!(*state.borrow_and_update(), LeaderState::Leading { .. }) {
                return;
            }
            if state.changed().await.is_err() {
                return std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = stop.wait_for(|stop| *stop) => {}
        () = follower_may_go => {}
    }
}

type Joined = Result<(String, Result<(), BoxError>), tokio::task::JoinError>;

fn runnable_result(joined: Joined) -> Result<(), ManagerError> {
    match joined {
        Ok((_, Ok(()))) => Ok(()),
        Ok((name, Err(source))) => Err(ManagerError::Runnable { name, source }),
        Err(error) => Err(ManagerError::Runnable {
            name: "a runnable".into(),
            source: Box::new(error),
        }),
    }
}

/// A runnable that ended before shutdown is a failure, even if it returned `Ok`.
fn runnable_failure(joined: Joined) -> ManagerError {
    match joined {
        Ok((name, Ok(()))) => ManagerError::Runnable {
            name,
            source: "ended before shutdown".into(),
        },
        other => match runnable_result(other) {
            Err(error) => error,
            Ok(()) => ManagerError::Runnable {
                name: "a runnable".into(),
                source: "ended before shutdown".into(),
            },
        },
    }
}
