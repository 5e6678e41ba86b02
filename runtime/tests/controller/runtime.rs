//! The controller runtime (`ferrokube_runtime::controller::Controller`) against the embedded API server:
//! every kind of source reaches the reconciler, deletions reach it once and in order, requeues and
//! errors come back, informers are shared between controllers (one watch per type), a key is never
//! on two workers at once, and shutdown waits for reconciles in flight, but not forever.

use ferrokube_testkit as common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::PostParams;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_informer::SharedInformerFactory;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::Metrics;
use ferrokube_runtime::controller::Reconciler;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{Notify, mpsc, oneshot};

async fn server() -> (RunningServer, Client) {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    (server, client)
}

/// What the recording reconciler saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Reconciled { key: String, uid: String },
    Deleted { key: String, uid: String },
}

/// Reports every call; fails `e` twice, asks `r` to be requeued once.
struct Recorder {
    seen: mpsc::UnboundedSender<Seen>,
    failures_left: AtomicUsize,
    requeues_left: AtomicUsize,
}

impl Recorder {
    fn new() -> (Recorder, mpsc::UnboundedReceiver<Seen>) {
        let (seen, rx) = mpsc::unbounded_channel();
        let recorder = Recorder {
            seen,
            failures_left: AtomicUsize::new(2),
            requeues_left: AtomicUsize::new(1),
        };
        (recorder, rx)
    }
}

fn key_uid(cm: &ConfigMap) -> (String, String) {
    (
        ObjectKey::of(cm).to_string(),
        cm.metadata.uid.clone().unwrap_or_default(),
    )
}

fn take_one(left: &AtomicUsize) -> bool {
    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl Reconciler<ConfigMap> for Recorder {
    type Error = String;

    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: Context) -> Result<Action, String> {
        let (key, uid) = key_uid(&cm);
        let _ = self.seen.send(Seen::Reconciled {
            key: key.clone(),
            uid,
        });
        match cm.metadata.name.as_deref() {
            Some("e") if take_one(&self.failures_left) => Err("injected failure".into()),
            Some("r") if take_one(&self.requeues_left) => {
                Ok(Action::requeue(Duration::from_millis(20)))
            }
            _ => Ok(Action::await_change()),
        }
    }

    async fn deleted(&self, cm: Arc<ConfigMap>, _ctx: Context) -> Result<(), String> {
        let (key, uid) = key_uid(&cm);
        let _ = self.seen.send(Seen::Deleted { key, uid });
        Ok(())
    }
}

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn owned_secret(name: &str, owner: &ConfigMap, kind: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: kind.into(),
                name: owner.metadata.name.clone().unwrap_or_default(),
                uid: owner.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    }
}

/// Waits (bounded) for the next call the reconciler reports.
async fn next(seen: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("a reconcile within 20 s")
        .expect("the reconciler is alive")
}

/// Waits until `wanted` is reported; returns everything reported before it.
async fn until(seen: &mut mpsc::UnboundedReceiver<Seen>, wanted: &Seen) -> Vec<Seen> {
    let mut before = Vec::new();
    loop {
        let got = next(seen).await;
        if &got == wanted {
            return before;
        }
        before.push(got);
    }
}

fn reconciled(cm: &ConfigMap) -> Seen {
    let (key, uid) = key_uid(cm);
    Seen::Reconciled { key, uid }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_every_source_reaches_the_reconciler_and_deletions_come_once_in_order() {
    let (_server, client) = server().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let (recorder, mut seen) = Recorder::new();
    let (external, external_keys) = mpsc::unbounded_channel::<ObjectKey>();
    let mut external_keys = external_keys;
    let keys = futures_util::stream::poll_fn(move |cx| external_keys.poll_recv(cx));
    let (stop, stopped) = oneshot::channel::<()>();
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default"))
        .owns::<Secret>(Scope::namespace("default"))
        .watches::<Pod>(Scope::namespace("default"), |pod| {
            let target = pod.metadata.labels.as_ref().and_then(|l| l.get("for"));
            target
                .map(|name| ObjectKey::new(Some("default"), name))
                .into_iter()
                .collect()
        })
        .source(keys)
        .workers(2)
        .metrics(&metrics);
    let running = tokio::spawn(controller.run(recorder, async {
        let _ = stopped.await;
    }));

    // The primary.
    let a = config_maps
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    until(&mut seen, &reconciled(&a)).await;

    // An owned child: its controller owner is reconciled.
    secrets
        .create(&PostParams::default(), &owned_secret("s", &a, "ConfigMap"))
        .await
        .unwrap();
    until(&mut seen, &reconciled(&a)).await;

    // A watched object, mapped by a label.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"for": "a"}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    until(&mut seen, &reconciled(&a)).await;

    // An external source: a second reconcile of `b` can only come from the stream.
    let b = config_maps
        .create(&PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap();
    until(&mut seen, &reconciled(&b)).await;
    external.send(ObjectKey::from("default/b")).unwrap();
    until(&mut seen, &reconciled(&b)).await;

    // Requeue after a duration, and errors retried with backoff.
    let r = config_maps
        .create(&PostParams::default(), &config_map("r", &[]))
        .await
        .unwrap();
    until(&mut seen, &reconciled(&r)).await;
    until(&mut seen, &reconciled(&r)).await;
    let e = config_maps
        .create(&PostParams::default(), &config_map("e", &[]))
        .await
        .unwrap();
    for _ in 0..3 {
        until(&mut seen, &reconciled(&e)).await;
    }

    // Deleted, then re-created under the same name: the deletion first, with the old uid.
    config_maps
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    let a2 = config_maps
        .create(&PostParams::default(), &config_map("a", &[("new", "yes")]))
        .await
        .unwrap();
    let (key, old_uid) = key_uid(&a);
    let before = until(&mut seen, &reconciled(&a2)).await;
    let deletions: Vec<_> = before
        .iter()
        .filter(|s| matches!(s, Seen::Deleted { .. }))
        .collect();
    assert_eq!(
        deletions,
        [&Seen::Deleted { key, uid: old_uid }],
        "exactly one deletion of the old object, before the new one is reconciled: {before:?}"
    );

    let _ = stop.send(());
    running.await.unwrap().expect("controller ran");

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"controller_runtime_reconcile_total{controller="configmap",result="error"} 2"#,
        r#"controller_runtime_reconcile_total{controller="configmap",result="requeue_after"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="configmap"} 2"#,
        r#"controller_runtime_active_workers{controller="configmap"} 0"#,
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(text.contains(r#"workqueue_adds_total{name="configmap"}"#));
}

/// Counts reconciles per kind; nothing else.
struct Count(Arc<AtomicUsize>);

impl<K: Send + Sync + 'static> Reconciler<K> for Count {
    type Error = String;
    async fn reconcile(&self, _: Arc<K>, _ctx: Context) -> Result<Action, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Action::await_change())
    }
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_informers_are_shared_two_controllers_one_pod_watch() {
    let (server, client) = server().await;
    let factory = Arc::new(SharedInformerFactory::new(client.clone()));
    let (config_map_reconciles, secret_reconciles) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let shutdown = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    // Two controllers of different primaries that both own Pods.
    let first = Controller::<ConfigMap>::new(client.clone(), Scope::all())
        .with_factory(factory.clone())
        .owns::<Pod>(Scope::all())
        .run(
            Count(config_map_reconciles.clone()),
            shutdown(stopped.clone()),
        );
    let second = Controller::<Secret>::new(client.clone(), Scope::all())
        .with_factory(factory.clone())
        .owns::<Pod>(Scope::all())
        .run(Count(secret_reconciles.clone()), shutdown(stopped.clone()));
    let (first, second) = (tokio::spawn(first), tokio::spawn(second));

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    config_maps
        .create(&PostParams::default(), &config_map("x", &[]))
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("y".into()),
                    ..ObjectMeta::default()
                },
                ..Secret::default()
            },
        )
        .await
        .unwrap();
    wait_for("both controllers to reconcile", || {
        config_map_reconciles.load(Ordering::SeqCst) > 0
            && secret_reconciles.load(Ordering::SeqCst) > 0
    })
    .await;
    let pod_informer = factory.informer::<Pod>(&Scope::all());
    wait_for("the informers to watch", || {
        pod_informer.reflector_status().watches() > 0 && server.store().watcher_count() >= 3
    })
    .await;
    assert_eq!(
        server.store().watcher_count(),
        3,
        "ConfigMaps, Secrets and one shared watch of Pods"
    );
    assert_eq!(pod_informer.reflector_status().lists(), 1);

    stop.send_replace(true);
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    factory.shutdown();
}

/// Tracks keys in flight; records any key found in flight twice.
struct Exclusive {
    in_flight: Mutex<HashSet<String>>,
    overlaps: AtomicUsize,
    reconciles: AtomicUsize,
    /// While set, the reconcile of `hold` waits for `release`.
    hold: Mutex<Option<String>>,
    held: Notify,
    release: Notify,
}

/// The reconciler of [`Exclusive`] state the test also holds.
struct SharedExclusive(Arc<Exclusive>);

impl Reconciler<ConfigMap> for SharedExclusive {
    type Error = String;
    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: Context) -> Result<Action, String> {
        let this = &self.0;
        let key = ObjectKey::of(cm.as_ref()).to_string();
        if !this.in_flight.lock().insert(key.clone()) {
            this.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        let held = this.hold.lock().as_deref() == Some(key.as_str());
        if held {
            let released = this.release.notified();
            this.held.notify_one();
            released.await;
        }
        this.in_flight.lock().remove(&key);
        this.reconciles.fetch_add(1, Ordering::SeqCst);
        Ok(Action::await_change())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_never_runs_a_key_twice_at_once_and_shutdown_waits_for_reconciles_in_flight() {
    let (_server, client) = server().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..10 {
        config_maps
            .create(&PostParams::default(), &config_map(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let state = Arc::new(Exclusive {
        in_flight: Mutex::default(),
        overlaps: AtomicUsize::new(0),
        reconciles: AtomicUsize::new(0),
        hold: Mutex::new(None),
        held: Notify::new(),
        release: Notify::new(),
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default"))
        .workers(4)
        .run(SharedExclusive(state.clone()), async {
            let _ = stopped.await;
        });
    let running = tokio::spawn(controller);
    // Updates of the same keys while they are being reconciled.
    for round in 0..5 {
        for i in 0..10 {
            let mut cm = config_map(&format!("c{i}"), &[("round", &round.to_string())]);
            cm.metadata.resource_version = None;
            config_maps
                .replace(&format!("c{i}"), &PostParams::default(), &cm)
                .await
                .unwrap();
        }
    }
    wait_for("reconciles of the initial list and updates", || {
        state.reconciles.load(Ordering::SeqCst) >= 10
    })
    .await;

    // One reconcile held in flight when shutdown comes: run must wait for it.
    *state.hold.lock() = Some("default/c0".into());
    let held = state.held.notified();
    let mut cm = config_map("c0", &[("round", "held")]);
    cm.metadata.resource_version = None;
    config_maps
        .replace("c0", &PostParams::default(), &cm)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), held)
        .await
        .expect("the held reconcile started");
    let _ = stop.send(());
    let mut running = running;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut running)
            .await
            .is_err(),
        "run returned while a reconcile was in flight"
    );
    state.release.notify_one();
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("run returns once the reconcile finished")
        .unwrap()
        .unwrap();
    assert_eq!(
        state.overlaps.load(Ordering::SeqCst),
        0,
        "a key was on two workers"
    );
    assert!(state.in_flight.lock().is_empty());
}

/// Never finishes.
struct Stuck(Arc<Notify>);

impl Reconciler<ConfigMap> for Stuck {
    type Error = String;
    async fn reconcile(&self, _: Arc<ConfigMap>, _ctx: Context) -> Result<Action, String> {
        self.0.notify_one();
        std::future::pending::<()>().await;
        Ok(Action::await_change())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_shutdown_gives_up_on_a_stuck_reconcile_after_the_timeout() {
    let (_server, client) = server().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    config_maps
        .create(&PostParams::default(), &config_map("stuck", &[]))
        .await
        .unwrap();
    let started = Arc::new(Notify::new());
    let in_reconcile = started.notified();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(
        Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default"))
            .shutdown_timeout(Duration::from_millis(200))
            .run(Stuck(started.clone()), async {
                let _ = stopped.await;
            }),
    );
    tokio::time::timeout(Duration::from_secs(20), in_reconcile)
        .await
        .expect("the reconcile started");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("run returns after its shutdown timeout")
        .unwrap()
        .unwrap();
}

/// Asks to run again at once, forever, without ever waiting.
struct Spin(Arc<AtomicUsize>);

impl Reconciler<ConfigMap> for Spin {
    type Error = String;
    async fn reconcile(&self, _: Arc<ConfigMap>, _ctx: Context) -> Result<Action, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Action::requeue(Duration::ZERO))
    }
}

/// Workers on a busy queue must leave the runtime to others: on a one-thread runtime, a
/// controller whose reconciles never wait still lets a timer, a write and its watch event through.
/// (The runtime runs on its own thread so that a starved one fails the test instead of hanging it.)
#[test]
fn controller_workers_on_a_busy_queue_do_not_starve_the_runtime() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let (_server, client) = server().await;
            let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
            config_maps
                .create(&PostParams::default(), &config_map("spin", &[]))
                .await
                .unwrap();
            let spins = Arc::new(AtomicUsize::new(0));
            let (stop, stopped) = oneshot::channel::<()>();
            let controller =
                Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default"))
                    .workers(4)
                    .run(Spin(spins.clone()), async {
                        let _ = stopped.await;
                    });
            let running = tokio::spawn(controller);
            wait_for("the spinning reconciles", || {
                spins.load(Ordering::SeqCst) > 1000
            })
            .await;
            // Other work still runs: a timer, a request, and the controller's own watch.
            tokio::time::sleep(Duration::from_millis(10)).await;
            let other = config_maps
                .create(&PostParams::default(), &config_map("other", &[]))
                .await
                .unwrap();
            let _ = other;
            let _ = stop.send(());
            running.await.unwrap().unwrap();
        });
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the runtime kept making progress besides the spinning workers");
}

/// Panics in its deletion hook the first `panics_left` times, then records the deletion.
struct PanicsOnDelete {
    panics_left: AtomicUsize,
    reconciled: mpsc::UnboundedSender<String>,
    deleted: mpsc::UnboundedSender<String>,
}

impl Reconciler<ConfigMap> for PanicsOnDelete {
    type Error = String;

    async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: Context) -> Result<Action, String> {
        let _ = self.reconciled.send(ObjectKey::of(cm.as_ref()).to_string());
        Ok(Action::await_change())
    }

    async fn deleted(&self, cm: Arc<ConfigMap>, _ctx: Context) -> Result<(), String> {
        if take_one(&self.panics_left) {
            panic!("injected panic in the deletion hook");
        }
        let _ = self.deleted.send(ObjectKey::of(cm.as_ref()).to_string());
        Ok(())
    }
}

/// A deletion hook that panics does not lose the deletion: the panic is caught, the key comes back
/// with backoff, and the hook runs again for the same object until it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_a_panicking_deletion_hook_runs_again() {
    let (_server, client) = server().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (deleted, mut deletions) = mpsc::unbounded_channel();
    let (reconciled, mut reconciles) = mpsc::unbounded_channel();
    let reconciler = PanicsOnDelete {
        panics_left: AtomicUsize::new(2),
        reconciled,
        deleted,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace("default"));
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    config_maps
        .create(&PostParams::default(), &config_map("doomed", &[]))
        .await
        .unwrap();
    // Seen by the controller first, so that its deletion is one the informer observes.
    let first = tokio::time::timeout(Duration::from_secs(20), reconciles.recv())
        .await
        .expect("reconciled within 20 s");
    assert_eq!(first.as_deref(), Some("default/doomed"));
    config_maps
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let key = tokio::time::timeout(Duration::from_secs(20), deletions.recv())
        .await
        .expect("the hook runs again after its panics, within 20 s")
        .expect("the reconciler is alive");
    assert_eq!(key, "default/doomed");
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}
