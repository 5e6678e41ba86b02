//! The controller layer's stale-cache protection (`ferrokube_runtime::controller::consistency`) against the
//! embedded API server with watch delivery delayed: a reconciler that writes its object and asks to
//! be run again at once would, without the protection, read its own object from a cache that has
//! not seen the write yet and send the old resourceVersion (409). With it, the worker waits until
//! the cache shows the write: no 409, exactly one write per step, and the skips are counted in
//! `stale_sync_skips_total`, and the informer's `store_resource_version` is exported beside it.

use ferrokube_testkit as common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::Api;
use ferrokube_client::api::PostParams;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::ConsistencyStore;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::Metrics;
use ferrokube_runtime::controller::Reconciler;
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::oneshot;

/// The count the reconciler drives each ConfigMap to, one write per reconcile.
const TARGET: u64 = 4;

/// Adds one to `data.count` per reconcile, writing through the reconcile's context (so each
/// write is recorded in the consistency store), until [`TARGET`].
struct Counter {
    writes: Arc<AtomicU64>,
    conflicts: Arc<AtomicU64>,
}

fn count_of(cm: &ConfigMap) -> u64 {
    cm.data
        .as_ref()
        .and_then(|d| d.get("count"))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

impl Reconciler<ConfigMap> for Counter {
    type Error = ferrokube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: Context,
    ) -> Result<Action, ferrokube_client::Error> {
        let count = count_of(&cm);
        if count >= TARGET {
            return Ok(Action::await_change());
        }
        let mut next = (*cm).clone();
        next.data
            .get_or_insert_default()
            .insert("count".into(), (count + 1).to_string());
        let name = cm.metadata.name.as_deref().unwrap_or_default();
        self.writes.fetch_add(1, Ordering::SeqCst);
        match ctx
            .api_for_object(cm.as_ref())
            .replace(name, &PostParams::default(), &next)
            .await
        {
            // Again at once: the next step must start from this write.
            Ok(_) => Ok(Action::requeue(Duration::ZERO)),
            Err(error) => {
                if error.is_conflict() {
                    self.conflicts.fetch_add(1, Ordering::SeqCst);
                }
                Err(error)
            }
        }
    }
}

struct Run {
    writes: u64,
    conflicts: u64,
    metrics: String,
}

/// Runs the counter on one ConfigMap with every watch event `delay` late, until the server holds
/// the target count.
async fn run(server: &RunningServer, protection: bool, delay: Duration) -> Run {
    let client = common::embedded_client(server, true);
    server.faults().delay_watches(delay);
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default"))
        .stale_protection(protection)
        .metrics(&metrics);
    let writes = Arc::new(AtomicU64::new(0));
    let conflicts = Arc::new(AtomicU64::new(0));
    let counter = Counter {
        writes: writes.clone(),
        conflicts: conflicts.clone(),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(counter, async {
        let _ = stopped.await;
    }));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("counted".into());
    api.create(&PostParams::default(), &cm)
        .await
        .expect("created");
    // Wait for the server (not a cache) to hold the target.
    let mut changes = api
        .watch(&Default::default(), "0")
        .await
        .expect("watch opens");
    use futures_util::StreamExt;
    while let Some(event) = changes.next().await {
        if let Ok(
            ferrokube_client::watch::WatchEvent::Added(cm)
            | ferrokube_client::watch::WatchEvent::Modified(cm),
        ) = event
        {
            if count_of(&cm) >= TARGET {
                break;
            }
        }
    }
    let _ = stop.send(());
    running.await.expect("joined").expect("controller ran");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    Run {
        writes: writes.load(Ordering::SeqCst),
        conflicts: conflicts.load(Ordering::SeqCst),
        metrics: text,
    }
}

/// The value of the sample `name` in Prometheus text, if present.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(name))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_protection_a_reconcile_never_runs_on_a_cache_older_than_its_own_write() {
    let server = ApiServer::new().start().await.expect("server starts");
    let run = run(&server, true, Duration::from_millis(300)).await;
    assert_eq!(run.conflicts, 0, "no write from a stale cache");
    assert_eq!(
        run.writes, TARGET,
        "exactly one write per step: {}",
        run.metrics
    );
    let skips = sample(
        &run.metrics,
        r#"stale_sync_skips_total{controller="configmap"}"#,
    );
    assert!(
        skips.is_some_and(|n| n >= 1.0),
        "every step came back before its write was in the cache, and was skipped:\n{}",
        run.metrics
    );
    // The informer's freshness is exported with the controller's metrics.
    let store_version = sample(&run.metrics, "store_resource_version{");
    assert!(
        store_version.is_some_and(|v| v > 0.0),
        "store_resource_version missing:\n{}",
        run.metrics
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_without_the_protection_the_same_reconciler_writes_from_a_stale_cache() {
    // The control experiment: what the test above guards against does happen.
    let server = ApiServer::new().start().await.expect("server starts");
    let run = run(&server, false, Duration::from_millis(300)).await;
    assert!(run.conflicts > 0, "expected 409s from stale reads");
    assert!(run.writes > TARGET);
    assert_eq!(
        sample(
            &run.metrics,
            r#"stale_sync_skips_total{controller="configmap"}"#
        ),
        Some(0.0),
        "{}",
        run.metrics
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_protection_dry_runs_record_nothing_to_wait_for() {
    // A dry run is answered as if written but never committed: no cache will ever show it. A dry
    // delete recorded as a delete would hold the key back until the object is gone: forever.
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("dry".into());
    let cm = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("created");
    let scope = Scope::namespace("default");
    // The cache learns of writes only 2 s after they are made.
    server.faults().delay_watches(Duration::from_secs(2));
    let factory = ferrokube_informer::SharedInformerFactory::new(client.clone());
    let informer = factory.informer::<ConfigMap>(&scope);
    factory.start().expect("informers start");
    factory.wait_for_cache_sync().await;
    let consistency = ConsistencyStore::new("dry-run");
    consistency.track(&informer, &scope);
    let key = ObjectKey::of(&cm);
    let tracked = consistency.writes(key.clone()).api(api.clone());

    let mut changed = cm.clone();
    changed.data = Some([("k".to_string(), "v".to_string())].into());
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    tracked
        .replace("dry", &dry, &changed)
        .await
        .expect("dry replace");
    let dry_delete = ferrokube_client::api::DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    tracked
        .delete("dry", &dry_delete)
        .await
        .expect("dry delete");
    assert_eq!(consistency.pending_keys(), 0, "dry runs recorded a wait");
    assert!(consistency.ensure_fresh(&key).is_ok());

    // The control: a real write is waited for until the delayed watch brings it.
    tracked
        .replace("dry", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(consistency.pending_keys(), 1);
    assert!(consistency.ensure_fresh(&key).is_err());
}
