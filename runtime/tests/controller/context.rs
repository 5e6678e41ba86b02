//! The reconcile context records every write made through it, and through each toolkit helper
//! given one of its `Api`s, in the controller's consistency store, before the write returns.
//!
//! Each test makes one kind of write through a [`Context`] for its own key, with the server's
//! watches delayed by 30 s so that no cache can show the write during the test, and checks that
//! the store now holds the key back (`ensure_fresh` is `Err`). A helper whose write bypassed the
//! context's client would leave the key fresh and fail its test. The control: the same write
//! through a plain `Api` leaves the key fresh.
//!
//! Every test name contains `context` (`cargo test --workspace context`).

use ferrokube_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::PostParams;
use ferrokube_core::LabelSelector;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_informer::SharedInformerFactory;
use ferrokube_runtime::controller::ConsistencyStore;
use ferrokube_runtime::controller::Context;
use ferrokube_runtime::controller::EventRecorder;
use ferrokube_runtime::controller::EventType;
use ferrokube_runtime::controller::claim::Claimer;
use ferrokube_runtime::controller::conditions::update_status;
use ferrokube_runtime::controller::finalizer::add_finalizer;
use ferrokube_runtime::controller::finalizer::finalize;
use ferrokube_runtime::controller::finalizer::remove_finalizer;
use ferrokube_runtime::controller::owner::create_or_update;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use serde_json::json;

const NS: &str = "default";

/// A server, a client, and a consistency store tracking synced informers of ConfigMaps, Pods and
/// ReplicaSets and Events in [`NS`], whose caches hold the ConfigMaps named `cached`. Watches are delayed
/// afterwards, so the caches stay where they are.
struct Setup {
    _server: RunningServer,
    client: Client,
    store: ConsistencyStore,
    _factory: SharedInformerFactory<Client>,
}

async fn setup(cached: &[&str]) -> Setup {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, false);
    for name in cached {
        Api::<ConfigMap>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &common::config_map(name, "v"))
            .await
            .expect("created");
    }
    let scope = Scope::namespace(NS);
    let factory = SharedInformerFactory::new(client.clone());
    let store = ConsistencyStore::new("context");
    store.track(&factory.informer::<ConfigMap>(&scope), &scope);
    store.track(&factory.informer::<Pod>(&scope), &scope);
    store.track(&factory.informer::<ReplicaSet>(&scope), &scope);
    store.track(&factory.informer::<Event>(&scope), &scope);
    factory.start().expect("informers start");
    factory.wait_for_cache_sync().await;
    server.faults().delay_watches(Duration::from_secs(30));
    Setup {
        _server: server,
        client,
        store,
        _factory: factory,
    }
}

impl Setup {
    /// The context of a reconcile of `name` in [`NS`].
    fn context(&self, name: &str) -> Context {
        let key = ObjectKey::new(Some(NS), name);
        Context::for_key(&self.client, self.store.writes(key), 0)
    }

    /// Whether the key `name` is held back until the caches show its writes.
    fn held_back(&self, name: &str) -> bool {
        self.store
            .ensure_fresh(&ObjectKey::new(Some(NS), name))
            .is_err()
    }

    /// Creates `cm` through a plain `Api` (not recorded).
    async fn config_map(&self, name: &str) -> ConfigMap {
        Api::<ConfigMap>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &common::config_map(name, "v"))
            .await
            .expect("created")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_writes_are_recorded_and_plain_writes_are_not() {
    let setup = setup(&["victim"]).await;
    // The control: a plain Api records nothing.
    setup.config_map("plain").await;
    assert!(!setup.held_back("plain"));

    let ctx = setup.context("web");
    assert!(!setup.held_back("web"));
    ctx.api_in_primary_namespace::<ConfigMap>()
        .create(&PostParams::default(), &common::config_map("web", "v"))
        .await
        .expect("created");
    assert!(setup.held_back("web"), "a create through the context");

    // A delete of an object the cache holds: the key waits until the cache has dropped it.
    let ctx = setup.context("other");
    ctx.api_in_namespace::<ConfigMap>(NS)
        .delete("victim", &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(setup.held_back("other"), "a delete through the context");
    // A dry run is never recorded: no cache will show it.
    let ctx = setup.context("dry");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    ctx.api_in_namespace::<ConfigMap>(NS)
        .create(&dry, &common::config_map("dry", "v"))
        .await
        .expect("dry run");
    assert!(!setup.held_back("dry"), "a dry run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_records_the_finalizer_helpers() {
    let setup = setup(&[]).await;
    let added = setup.config_map("add").await;
    let ctx = setup.context("add");
    let with = add_finalizer(&ctx.api_for_object(&added), &added, "example.com/x")
        .await
        .expect("added");
    assert!(setup.held_back("add"), "add_finalizer");

    let ctx = setup.context("remove");
    remove_finalizer(&ctx.api_for_object(&with), &with, "example.com/x")
        .await
        .expect("removed");
    assert!(setup.held_back("remove"), "remove_finalizer");

    let fresh = setup.config_map("finalize").await;
    let ctx = setup.context("finalize");
    finalize(
        &ctx.api_for_object(&fresh),
        "example.com/y",
        Arc::new(fresh.clone()),
        |_| async { Ok::<_, String>(()) },
        |_| async { Ok::<_, String>(()) },
    )
    .await
    .expect("finalize");
    assert!(setup.held_back("finalize"), "finalize");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_records_create_or_update_and_update_status() {
    let setup = setup(&[]).await;
    let ctx = setup.context("owner");
    create_or_update(
        &ctx.api_in_primary_namespace::<ConfigMap>(),
        "child",
        |cm: &mut ConfigMap| {
            cm.data = Some([("k".to_string(), "v".to_string())].into());
            Ok::<_, String>(())
        },
    )
    .await
    .expect("created");
    assert!(setup.held_back("owner"), "create_or_update");

    let rs = Api::<ReplicaSet>::namespaced(setup.client.clone(), NS)
        .create(&PostParams::default(), &common::replica_set("status", 1, 0))
        .await
        .expect("rs");
    let ctx = setup.context("status");
    let written = update_status(&ctx.api_for_object(&rs), "status", |rs: &mut ReplicaSet| {
        rs.status.get_or_insert_default().replicas = 7;
        true
    })
    .await
    .expect("status");
    assert!(written.is_some());
    assert!(setup.held_back("status"), "update_status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_records_claims() {
    let setup = setup(&[]).await;
    let rs = Api::<ReplicaSet>::namespaced(setup.client.clone(), NS)
        .create(&PostParams::default(), &common::replica_set("web", 1, 0))
        .await
        .expect("rs");
    let pods: Api<Pod> = Api::namespaced(setup.client.clone(), NS);
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]},
    }))
    .expect("pod");
    let orphan = pods
        .create(&PostParams::default(), &orphan)
        .await
        .expect("pod");
    let ctx = setup.context("web");
    let selector = LabelSelector::parse("app=web").expect("selector");
    let claimed = Claimer::new(ctx.api_for_object(&rs), Arc::new(rs.clone()), selector)
        .expect("claimer")
        .claim(vec![Arc::new(orphan)])
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1, "adopted");
    assert!(setup.held_back("web"), "an adoption");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_cached_reads_show_the_reconciles_own_writes() {
    use ferrokube_runtime::controller::Action;
    use ferrokube_runtime::controller::Controller;
    use ferrokube_runtime::controller::ReadError;
    use ferrokube_runtime::controller::from_fn;
    use k8s_openapi::api::core::v1::Secret;
    use tokio::sync::{mpsc, oneshot};

    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, false);
    let scope = Scope::namespace(NS);
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &common::config_map("web", "v"))
        .await
        .expect("primary");
    // Every watch event arrives 500 ms late: a plain cache read right after a write misses it.
    server.faults().delay_watches(Duration::from_millis(500));
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |cm: Arc<ConfigMap>, ctx: Context| {
        let tx = tx.clone();
        async move {
            let name = cm.metadata.name.clone().unwrap_or_default();
            if name.ends_with("-child") {
                return Ok::<_, String>(Action::await_change());
            }
            let child = format!("{name}-child");
            let cache = ctx
                .cache::<ConfigMap>(&Scope::namespace(NS))
                .map_err(|e| e.to_string())?;
            if cache
                .get(Some(NS), &child)
                .await
                .map_err(|e| e.to_string())?
                .is_none()
            {
                ctx.api_in_primary_namespace::<ConfigMap>()
                    .create(&PostParams::default(), &common::config_map(&child, "v"))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let key = ctx.key().clone();
            let after = cache
                .get(Some(NS), &child)
                .await
                .map_err(|e| e.to_string())?;
            // An informer the controller does not run is refused, not read empty.
            let not_run = ctx.cache::<Secret>(&Scope::namespace(NS)).err();
            let _ = tx.send((key.to_string(), after.is_some(), not_run));
            Ok(Action::await_change())
        }
    });
    let controller = Controller::<ConfigMap>::new(client, scope);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let (key, child_seen, not_run) = tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("a reconcile within 20 s")
        .expect("reconciler alive");
    assert_eq!(key, "default/web");
    assert!(
        child_seen,
        "the cached read waited for the reconcile's own create"
    );
    assert!(
        matches!(not_run, Some(ReadError::NotRunning { .. })),
        "{not_run:?}"
    );
    let _ = stop.send(());
    running.await.expect("task").expect("ran");
}

/// Waits (at most 10 s, polling every 10 ms) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The event recorder posts from its own task after the reconcile returned; the post is
/// recorded for the reconcile's key when it is written. The control: the same event recorded
/// outside a reconcile holds no key back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_records_the_event_recorders_posts() {
    let setup = setup(&[]).await;
    let (recorder, post) = EventRecorder::new(setup.client.clone(), "context-test");
    tokio::spawn(post);
    let events: Api<Event> = Api::namespaced(setup.client.clone(), NS);
    let posted = |reason: &'static str| {
        let events = events.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            loop {
                let list = events.list(&Default::default()).await.expect("events");
                if list
                    .items
                    .iter()
                    .any(|e| e.reason.as_deref() == Some(reason))
                {
                    return;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no {reason} event posted"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };

    let plain = setup.config_map("plain").await;
    recorder.record_outside_reconcile(&plain, EventType::Normal, "Outside", "not recorded".into());
    posted("Outside").await;

    let owner = setup.config_map("owner").await;
    let ctx = setup.context("owner");
    recorder.record(&ctx, &owner, EventType::Normal, "Inside", "recorded".into());
    posted("Inside").await;
    until("the post is recorded for the key", || {
        setup.held_back("owner")
    })
    .await;
    assert!(
        !setup.held_back("plain"),
        "an event recorded outside a reconcile holds no key back"
    );
}
