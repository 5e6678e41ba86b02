//! The sample controller: Kubernetes' ReplicaSet controller, built on ferrokube, and the project's
//! main demo.
//!
//! ```text
//! cargo run -p ferrokube-examples                     # the demo: embedded API server, a scripted story
//! cargo run -p ferrokube-examples -- --keep-running   # ... and stay up afterwards (Ctrl-C stops)
//! cargo run -p ferrokube-examples -- --kubeconfig ~/.kube/config   # be that cluster's RS controller
//! ```
//!
//! **The live view in a browser** (`ferrokube::view`): the demo serves it by default on loopback and
//! prints its address (`live view: http://127.0.0.1:PORT/`): every stage of the machinery live, the
//! queue's sets, reconciles per key, requests and the rate limiter, with buttons that inject the
//! embedded server's faults. `--view-addr HOST:PORT` picks the address (and turns the view on
//! against a cluster too), `--no-view` turns it off. When stdout is a terminal the demo keeps the
//! view up after the story until Ctrl-C, so it can still be explored.
//!
//! **The demo** (no `--kubeconfig`, no `KUBECONFIG`, not in a pod; or `--embedded`) starts ferrokube's
//! embedded API server with its pod simulator (pods get a node, then Running and Ready after 500 ms,
//! and take 300 ms to terminate), runs the controller against it over HTTP, and plays a story: create
//! two ReplicaSets, scale one up, kill some of its pods, scale it down, drop every watch, and force a
//! relist by compacting the server's history while changing things behind the informers' backs. A
//! live view shows each ReplicaSet's desired/current/ready pods, the queue, reconciles per second,
//! retries and informer events (plain log lines when stdout is not a terminal). At the end one line
//! says whether the world converged, checked against a fresh list from the server; the exit code is 0
//! only if it did.
//!
//! **Against a cluster** (`--kubeconfig PATH`, `$KUBECONFIG`, or in-cluster credentials) it runs as
//! that cluster's ReplicaSet controller until Ctrl-C — do not run it beside kube-controller-manager's.
//!
//! Options: `--workers N` (5), `--qps Q` / `--burst B` (20 / 30, kube-controller-manager's
//! `--kube-api-qps` / `--kube-api-burst`), `--http2` (HTTP/2 instead of HTTP/1.1), `--http-addr HOST:PORT` (`/healthz`, `/readyz`, and
//! Prometheus text at `/metrics`), `--resync SECONDS` (43200), `--scale-down-window S` (1; 0 deletes at once, as upstream), `--scale-down-window-max S` (10: a ReplicaSet that keeps changing gets twice the interval of its changes, up to this; 0 keeps the window fixed), `--no-stale-protection` (sync even
//! when a cache has not caught up with the controller's own last write for the key: only to see
//! what the protection prevents; see `ferrokube::controller::consistency`). Logs go to stderr through `tracing`;
//! set `RUST_LOG` (default `warn`, `error` under the live view). `--help` lists every option; bad
//! usage exits with 2.
//!
//! **Several replicas** (`--leader-elect`): only the replica holding the Lease `--lease-name`
//! (`ferrokube-replicaset`) in `--lease-namespace` (the kubeconfig context's namespace, or the pod's)
//! acts; the others keep warm caches and take over when it goes. `--identity ID` (host name and a
//! random suffix) names the replica in the Lease and in its requests' User-Agent
//! (`ferrokube-replicaset/<ID>`), so an audit log tells the replicas' writes apart.
//! `--lease-duration`, `--renew-deadline`, `--retry-period` (seconds: 15, 10, 2, client-go's).
//! SIGTERM or SIGINT stops gracefully: no new syncs, the ones in flight finish, the Lease is
//! released, exit 0. A replica that loses its Lease exits 1.
//!
//! **Sharded** (`--shard-ring NAME`, see `ferrokube::shard`): each replica takes a share of the
//! ReplicaSets instead of all of them. It holds its own Lease `NAME-shard-<ID>` in
//! `--lease-namespace`. When the server filters lists and watches by `shardSelector`
//! (kube-apiserver 1.37 with `ShardedListAndWatch`, the embedded server) the members split the
//! namespaces by hash ranges and each caches and syncs only its namespaces' ReplicaSets and pods,
//! which the server alone sends it; otherwise (or with `--shard-labels`) one replica assigns
//! ReplicaSets to members by labelling them, and each caches and syncs only the ReplicaSets and
//! pods with its label. A replica that loses its Lease exits 1; SIGTERM stops its syncs, then
//! releases its Lease, and its share moves at once. `--reconcile-log PATH` appends
//! one JSON line per sync (the drills use it to check that no two replicas sync one ReplicaSet at
//! once).
//!
//! The controller itself is in [`controller`]; this file wires it up, [`story`] plays the demo,
//! [`view`] draws it; `ferrokube::manager` runs it (leader election, health, metrics, signals).

mod story;
mod view;

use ferrokube_examples::replicaset::{controller, world};

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ferrokube::manager::{ManagerBuilder, shutdown_signal};
use ferrokube::view::LiveView;
use ferrokube::{Client, Config};

use controller::{ControllerOptions, ReconcileLog, Running};
use ferrokube::leader::Timings;
use ferrokube::shard::{ShardMember, ShardMetrics};

/// What the command line says, as clap reads it; [`Args`] is what the program uses.
#[derive(clap::Parser, Debug)]
#[command(
    name = "replicaset",
    about = "The sample controller: Kubernetes' ReplicaSet controller built on ferrokube. Without a \
             cluster (no --kubeconfig, no $KUBECONFIG, not in a pod) or with --embedded it plays the \
             demo on the embedded API server; otherwise it is that cluster's ReplicaSet controller \
             until SIGTERM or Ctrl-C.",
    args_override_self = true
)]
struct Cli {
    /// Play the demo on the embedded API server even when a cluster is configured.
    #[arg(long)]
    embedded: bool,
    /// Be the ReplicaSet controller of this kubeconfig's cluster.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// After the demo's story, stay up until Ctrl-C.
    #[arg(long)]
    keep_running: bool,
    /// Workers syncing ReplicaSets concurrently.
    #[arg(long, value_name = "N", default_value_t = 5)]
    workers: usize,
    /// Client rate limit, requests per second (kube-controller-manager's --kube-api-qps).
    #[arg(long, value_name = "Q", default_value_t = 20.0)]
    qps: f32,
    /// Client burst (kube-controller-manager's --kube-api-burst).
    #[arg(long, value_name = "B", default_value_t = 30)]
    burst: u32,
    /// Talk HTTP/2 to the cluster (one connection, health-checked with pings), as client-go and
    /// kube-controller-manager do; default HTTP/1.1 (`ferrokube::Config::http2`). Needs TLS.
    #[arg(long)]
    http2: bool,
    /// Informer resync period, in seconds [default: 43200]
    #[arg(long, value_name = "SECONDS")]
    resync: Option<u64>,
    /// Sync even when a cache has not caught up with the controller's own last write for the key
    /// (only to see what the protection prevents).
    #[arg(long)]
    no_stale_protection: bool,
    /// Scale-down stabilization window, in seconds: delete pods only down to the highest
    /// replicas seen within it (0: at once, as kube-controller-manager).
    #[arg(long, value_name = "S", default_value = "1", value_parser = seconds)]
    scale_down_window: Duration,
    /// Longest adaptive scale-down window, in seconds: a ReplicaSet whose replicas keep changing
    /// gets twice the interval between its last two changes, up to this (0: a fixed window).
    #[arg(long, value_name = "S", default_value = "10", value_parser = seconds)]
    scale_down_window_max: Duration,
    /// Serve /healthz, /readyz and Prometheus text at /metrics here.
    #[arg(long, value_name = "HOST:PORT")]
    http_addr: Option<SocketAddr>,
    /// Act only while holding the Lease --lease-name; otherwise keep warm caches and wait.
    #[arg(long, conflicts_with = "shard_ring")]
    leader_elect: bool,
    /// Take a share of the ReplicaSets instead of all of them: join the ring NAME, whose member
    /// and assigner Leases live in --lease-namespace (see ferrokube::shard). Uses --identity and
    /// the --lease-* durations.
    #[arg(long, value_name = "NAME")]
    shard_ring: Option<String>,
    /// With --shard-ring: shard by the assigner's labels even when the server has shardSelector.
    #[arg(long, requires = "shard_ring")]
    shard_labels: bool,
    /// Append one JSON line per sync (replica, key, start and end in Unix nanoseconds, ok) to
    /// this file.
    #[arg(long, value_name = "PATH")]
    reconcile_log: Option<PathBuf>,
    /// This replica's name in the Lease and in its requests' User-Agent [default: host name and a
    /// random suffix]
    #[arg(long, value_name = "ID")]
    identity: Option<String>,
    /// The Lease's namespace [default: the kubeconfig context's, or the pod's]
    #[arg(long, value_name = "NS")]
    lease_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long, value_name = "NAME", default_value = "ferrokube-replicaset")]
    lease_name: String,
    /// Lease duration, in seconds.
    #[arg(long, value_name = "S", default_value = "15", value_parser = seconds)]
    lease_duration: Duration,
    /// How long the leader tries to renew before it gives up, in seconds.
    #[arg(long, value_name = "S", default_value = "10", value_parser = seconds)]
    renew_deadline: Duration,
    /// How often to try to acquire or renew the Lease, in seconds.
    #[arg(long, value_name = "S", default_value = "2", value_parser = seconds)]
    retry_period: Duration,
    /// Do not serve the live view (served by default for the demo).
    #[arg(long, overrides_with = "view_addr")]
    no_view: bool,
    /// Serve the live view here (also against a cluster) [default for the demo: 127.0.0.1, a free
    /// port]
    #[arg(long, value_name = "HOST:PORT", overrides_with = "no_view")]
    view_addr: Option<SocketAddr>,
}

/// The command line.
#[derive(Debug, Clone)]
pub struct Args {
    embedded: bool,
    kubeconfig: Option<PathBuf>,
    keep_running: bool,
    workers: usize,
    qps: f32,
    burst: u32,
    http2: bool,
    resync: Duration,
    http_addr: Option<SocketAddr>,
    leader_election: Option<LeaderElection>,
    /// `--shard-ring`: the ring to join, with the same Lease settings leader election would use.
    shard: Option<(String, LeaderElection)>,
    /// `--shard-labels`: the label mode whatever the server has.
    shard_labels: bool,
    reconcile_log: Option<PathBuf>,
    identity: Option<String>,
    stale_protection: bool,
    scale_down_window: Duration,
    scale_down_window_max: Duration,
    /// `--no-view` clears it; `--view-addr` sets it.
    view: ViewChoice,
}

/// Whether to serve the live view, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ViewChoice {
    /// On for the demo (at 127.0.0.1, a port the OS picks), off against a cluster.
    Default,
    Off,
    At(SocketAddr),
}

/// `--leader-elect` and its settings.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    namespace: Option<String>,
    lease_name: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
}

impl Args {
    fn from_cli(cli: Cli) -> Args {
        let view = match (cli.no_view, cli.view_addr) {
            (true, _) => ViewChoice::Off,
            (false, Some(addr)) => ViewChoice::At(addr),
            (false, None) => ViewChoice::Default,
        };
        let lease = LeaderElection {
            namespace: cli.lease_namespace,
            lease_name: cli.lease_name,
            lease_duration: cli.lease_duration,
            renew_deadline: cli.renew_deadline,
            retry_period: cli.retry_period,
        };
        let shard = cli.shard_ring.map(|ring| (ring, lease.clone()));
        let leader_election = cli.leader_elect.then_some(lease);
        Args {
            embedded: cli.embedded,
            kubeconfig: cli.kubeconfig,
            keep_running: cli.keep_running,
            workers: cli.workers,
            qps: cli.qps,
            burst: cli.burst,
            http2: cli.http2,
            resync: cli
                .resync
                .map_or(ControllerOptions::default().resync, Duration::from_secs),
            http_addr: cli.http_addr,
            leader_election,
            shard,
            shard_labels: cli.shard_labels,
            reconcile_log: cli.reconcile_log,
            identity: cli.identity,
            stale_protection: !cli.no_stale_protection,
            scale_down_window: cli.scale_down_window,
            scale_down_window_max: cli.scale_down_window_max,
            view,
        }
    }

    /// Where to serve the live view, if at all.
    fn view_addr(&self) -> Option<SocketAddr> {
        match self.view {
            ViewChoice::Off => None,
            ViewChoice::At(addr) => Some(addr),
            ViewChoice::Default if self.wants_embedded() => {
                Some(SocketAddr::from(([127, 0, 0, 1], 0)))
            }
            ViewChoice::Default => None,
        }
    }

    /// Whether to run the demo rather than join a cluster.
    fn wants_embedded(&self) -> bool {
        let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        let kubeconfig_env = std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty());
        self.embedded || (self.kubeconfig.is_none() && !kubeconfig_env && !in_cluster)
    }

    fn options(&self) -> ControllerOptions {
        ControllerOptions {
            workers: self.workers,
            resync: self.resync,
            stale_protection: self.stale_protection,
            scale_down_window: self.scale_down_window,
            scale_down_adaptive: (!self.scale_down_window_max.is_zero()).then_some(
                ferrokube::toolkit::Adaptive {
                    max: self.scale_down_window_max,
                    ..controller::SCALE_DOWN_ADAPTIVE
                },
            ),
            ..ControllerOptions::default()
        }
    }
}

/// A number of seconds, fractions allowed.
fn seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is not a duration"))
}

fn main() -> ExitCode {
    // Bad usage exits with 2, `--help` with 0 (clap's `exit`).
    let args = Args::from_cli(<Cli as clap::Parser>::parse());
    let embedded = args.wants_embedded();
    let live = embedded && std::io::stdout().is_terminal();
    let view = args.view_addr().map(|addr| LiveView::new().addr(addr));
    init_tracing(if live { "error" } else { "warn" }, view.as_ref());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("replicaset: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        if embedded {
            story::run(&args, live, view).await
        } else {
            run_in_cluster(&args, view).await.map(|()| true)
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("replicaset: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr (`RUST_LOG`, default `default`), and, with a live view, its layer beside: the
/// view's layer reads only the pipeline's events, whatever `RUST_LOG` says.
fn init_tracing(default: &str, view: Option<&LiveView>) {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    let subscriber = tracing_subscriber::registry().with(logs);
    match view {
        Some(view) => subscriber.with(view.layer()).init(),
        None => subscriber.init(),
    }
}

pub use controller::running::BoxError;

/// Runs as the replicaset controller of the configured cluster until SIGTERM or SIGINT (or, with
/// leader election, until it loses its lease).
async fn run_in_cluster(args: &Args, view: Option<LiveView>) -> Result<(), BoxError> {
    let config = match &args.kubeconfig {
        Some(path) => Config::from_kubeconfig_files(std::slice::from_ref(path), None)?,
        None => Config::infer()?,
    };
    // No fault buttons here: a real cluster's faults are not ours to inject.
    let _view = match view {
        Some(view) => {
            let served = view.serve().await?;
            eprintln!("live view: http://{}/", served.addr());
            Some(served)
        }
        None => None,
    };
    let running = start(config, args, shutdown_signal()).await?;
    eprintln!(
        "replicaset controller running ({} workers, qps {} burst {}{}); SIGTERM or Ctrl-C stops",
        args.workers,
        args.qps,
        args.burst,
        match (&args.leader_election, &args.shard) {
            (Some(_), _) => ", leader election on".to_string(),
            (None, Some((ring, _))) => format!(", a member of ring {ring}"),
            (None, None) => String::new(),
        },
    );
    running.wait().await?;
    eprintln!("replicaset controller stopped");
    Ok(())
}

/// Starts the controller in a manager with the command line's settings (leader election, the
/// health and metrics endpoint), until `shutdown`.
pub async fn start(
    mut config: Config,
    args: &Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Running, BoxError> {
    config.qps = Some(args.qps);
    config.burst = args.burst;
    // Only ever switched on: the demo's embedded server may have chosen HTTP/2 itself.
    config.http2 |= args.http2;
    if let Some(identity) = &args.identity {
        config.user_agent = Some(format!("ferrokube-replicaset/{identity}"));
    }
    let namespace = Client::new(config.clone())?.default_namespace().to_string();
    let shard_metrics = ShardMetrics::default();
    let member = match &args.shard {
        Some((ring, lease)) => {
            let timings = Timings {
                lease_duration: lease.lease_duration,
                renew_deadline: lease.renew_deadline,
                retry_period: lease.retry_period,
            };
            let mut member = ShardMember::builder(
                Client::new(config.clone())?,
                lease.namespace.as_deref().unwrap_or(&namespace),
                ring,
            )
            .timings(timings)
            .metrics(&shard_metrics)
            .server_side(!args.shard_labels);
            if let Some(identity) = &args.identity {
                member = member.identity(identity);
            }
            Some(member.build()?)
        }
        None => None,
    };
    let mut options = args.options();
    if let Some(path) = &args.reconcile_log {
        let replica = args.identity.as_deref().unwrap_or("replica");
        options.reconcile_log = Some(ReconcileLog::open(path, replica)?);
    }
    let configure = |mut manager: ManagerBuilder| {
        if let Some(member) = member {
            shard_metrics.register_in(manager.registry());
            manager = manager.shard(member);
        }
        if let Some(addr) = args.http_addr {
            manager = manager.serve(addr);
        }
        if let Some(election) = &args.leader_election {
            let namespace = election.namespace.as_deref().unwrap_or(&namespace);
            manager = manager.leader_election_with(namespace, &election.lease_name, |elector| {
                let elector = elector
                    .lease_duration(election.lease_duration)
                    .renew_deadline(election.renew_deadline)
                    .retry_period(election.retry_period);
                match &args.identity {
                    Some(identity) => elector.identity(identity),
                    None => elector,
                }
            });
        }
        manager
    };
    Running::start_with(config, options, configure, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Args {
        Args::from_cli(Cli::parse_from(
            std::iter::once("replicaset").chain(args.iter().copied()),
        ))
    }

    #[test]
    fn http2_and_the_scale_down_window_reach_the_controller() {
        let defaults = parse(&[]);
        assert!(!defaults.http2);
        assert_eq!(
            defaults.options().scale_down_window,
            ControllerOptions::default().scale_down_window
        );
        let set = parse(&["--http2", "--scale-down-window", "0"]);
        assert!(set.http2);
        assert_eq!(set.options().scale_down_window, Duration::ZERO);
        assert!(Cli::try_parse_from(["replicaset", "--scale-down-window", "-1"]).is_err());
    }

    #[test]
    fn the_adaptive_window_is_on_by_default_and_off_at_max_zero() {
        assert_eq!(
            parse(&[]).options().scale_down_adaptive,
            Some(controller::SCALE_DOWN_ADAPTIVE)
        );
        let longer = parse(&["--scale-down-window-max", "30"]).options();
        assert_eq!(
            longer.scale_down_adaptive.map(|adaptive| adaptive.max),
            Some(Duration::from_secs(30))
        );
        let off = parse(&["--scale-down-window-max", "0"]).options();
        assert_eq!(off.scale_down_adaptive, None);
    }
}
