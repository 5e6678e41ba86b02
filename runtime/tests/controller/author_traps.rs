//! Author traps, third round (issue 44): what an author configured is never dropped without a
//! word. Each test here failed on the code before its fix.
//!
//! - indexers given (through the factory) for an informer that already exists are added to it,
//!   whether it has started or not, and the objects it holds are indexed at once;
//! - a key a mapper returns that cannot name a primary (no namespace for a namespaced primary) is
//!   refused where it is made: counted in `controller_mapper_keys_refused_total` and never queued.

use ferrokube_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::PostParams;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_informer::Indexers;
use ferrokube_informer::index;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::Metrics;
use ferrokube_runtime::controller::controller_queue;
use ferrokube_runtime::controller::from_fn;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use tokio::sync::{mpsc, oneshot};

const NS: &str = "default";

fn labelled(name: &str, app: &str) -> ConfigMap {
    let mut cm = common::config_map(name, "v");
    cm.metadata.labels = Some([("app".to_string(), app.to_string())].into());
    cm
}

async fn create_cm(client: &Client, cm: &ConfigMap) {
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), cm)
        .await
        .expect("config map created");
}

fn by_app() -> Indexers<ConfigMap> {
    Indexers::default().with("app", index::label("app"))
}

fn sorted(mut keys: Vec<ObjectKey>) -> Vec<String> {
    keys.sort();
    keys.iter().map(ToString::to_string).collect()
}

/// The primary informer taken first from the author's factory (for its lister), its indexers
/// given afterwards through `informer_with`: they are on the informer the controller runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_indexers_for_an_informer_that_exists_are_added_before_start() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    create_cm(&client, &labelled("a", "web")).await;
    let factory = Arc::new(ferrokube_informer::SharedInformerFactory::new(
        client.clone(),
    ));
    let primary = factory.informer::<ConfigMap>(&Scope::namespace(NS));
    let again = factory.informer_with::<ConfigMap>(&Scope::namespace(NS), |b| b.indexers(by_app()));
    let controller =
        Controller::<ConfigMap>::new(client, Scope::namespace(NS)).with_factory(factory.clone());
    assert!(
        again.store().index_values("app").is_ok(),
        "the index given for the existing informer was added to it"
    );
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |_: Arc<ConfigMap>, _ctx| {
        let _ = tx.send(());
        async { Ok::<_, String>(Action::await_change()) }
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("a reconcile within 20 s");
    assert_eq!(
        sorted(primary.store().index_keys("app", "web").expect("index app")),
        vec!["default/a"]
    );
    let _ = stop.send(());
    running.await.expect("joins").expect("runs");
    factory.shutdown();
}

/// After start: the index is built from what the cache holds, and follows later writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_indexers_for_a_running_informer_are_added_with_a_reindex() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    create_cm(&client, &labelled("a", "web")).await;
    create_cm(&client, &labelled("b", "db")).await;
    let factory = Arc::new(ferrokube_informer::SharedInformerFactory::new(
        client.clone(),
    ));
    let informer = factory.informer::<ConfigMap>(&Scope::namespace(NS));
    factory.start().expect("starts");
    assert!(factory.wait_for_cache_sync().await, "synced");
    factory.informer_with::<ConfigMap>(&Scope::namespace(NS), |b| b.indexers(by_app()));
    assert_eq!(
        sorted(
            informer
                .store()
                .index_keys("app", "web")
                .expect("index app")
        ),
        vec!["default/a"],
        "the objects already cached were indexed"
    );
    create_cm(&client, &labelled("c", "web")).await;
    let mut version = informer.watch_store_resource_version();
    tokio::time::timeout(Duration::from_secs(20), async {
        while informer.store().get_by_key("default/c").is_none() {
            let _ = version.changed().await;
        }
    })
    .await
    .expect("c cached within 20 s");
    assert_eq!(
        sorted(
            informer
                .store()
                .index_keys("app", "web")
                .expect("index app")
        ),
        vec!["default/a", "default/c"]
    );
    factory.shutdown();
}

/// A mapper's key without a namespace, for a namespaced primary, names no ConfigMap: it is
/// refused where the mapper made it (counted, logged once) and never reaches the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_a_mapper_key_that_names_no_primary_is_refused_and_counted() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    // The author's own queue, made as the controller would, to look at its depth.
    let queue = controller_queue("configmap", Some(&metrics));
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace(NS))
        .metrics(&metrics)
        .with_queue(queue.clone())
        .watches::<Secret>(Scope::namespace(NS), |secret: &Secret| {
            // The author forgot the namespace: "web" alone names no ConfigMap.
            vec![
                ObjectKey::new(None, secret.metadata.name.as_deref().unwrap_or_default()),
                ObjectKey::new(Some(NS), "right"),
            ]
        });
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |_: Arc<ConfigMap>, ctx| {
        let _ = tx.send(ctx.key().to_string());
        async { Ok::<_, String>(Action::await_change()) }
    });
    create_cm(&client, &labelled("right", "web")).await;
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let first = tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("the first list's reconcile within 20 s")
        .expect("alive");
    assert_eq!(first, "default/right");
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"}, "stringData": {"k": "v"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    let key = tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("a reconcile within 20 s")
        .expect("alive");
    // The mapper made both keys in one call: by this reconcile, the other one was handled.
    assert_eq!(key, "default/right", "the well-formed key is reconciled");
    assert_eq!(
        queue.len(),
        0,
        "the key without a namespace was never queued"
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    let refused: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("controller_mapper_keys_refused_total{"))
        .collect();
    assert_eq!(refused.len(), 1, "one series: {text}");
    assert!(
        refused[0].contains("controller=\"configmap\"")
            && refused[0].contains("watches::<Secret>")
            && refused[0].ends_with(" 1"),
        "{}",
        refused[0]
    );
    let _ = stop.send(());
    running.await.expect("joins").expect("runs");
}

/// A ConfigMap `m` whose data says which Secret it follows.
fn following(name: &str, secret: &str) -> ConfigMap {
    let mut cm = common::config_map(name, "v");
    cm.data = Some([("source".to_string(), secret.to_string())].into());
    cm
}

fn secret(name: &str) -> Secret {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}, "stringData": {"k": "v"}
    }))
    .expect("secret")
}

/// An index and a mapping through it, in two calls (controller-runtime's `IndexField` +
/// `EnqueueRequestsFromMapFunc`): a Secret's change reconciles exactly the ConfigMaps that name
/// it, with no informer, indexer or lookup wired by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_an_index_in_one_call_maps_watched_objects_to_their_primaries() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    create_cm(&client, &following("m1", "s1")).await;
    create_cm(&client, &following("m2", "s2")).await;
    let factory = Arc::new(ferrokube_informer::SharedInformerFactory::new(
        client.clone(),
    ));
    let primary = factory.informer::<ConfigMap>(&Scope::namespace(NS));
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace(NS))
        .with_factory(factory.clone())
        .index_field::<ConfigMap>("source", |cm| {
            cm.data
                .as_ref()
                .and_then(|data| data.get("source"))
                .map(|source| vec![format!("{NS}/{source}")])
                .unwrap_or_default()
        })
        .watches_by_index::<Secret>(Scope::namespace(NS), "source", |secret| {
            vec![ObjectKey::of(secret).to_string()]
        });
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |_: Arc<ConfigMap>, ctx| {
        let _ = tx.send(ctx.key().to_string());
        async { Ok::<_, String>(Action::await_change()) }
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let mut first = Vec::new();
    for _ in 0..2 {
        first.push(
            tokio::time::timeout(Duration::from_secs(20), seen.recv())
                .await
                .expect("the first list's reconciles within 20 s")
                .expect("alive"),
        );
    }
    first.sort();
    assert_eq!(first, ["default/m1", "default/m2"]);
    assert_eq!(
        sorted(
            primary
                .store()
                .index_keys("source", "default/s2")
                .expect("index")
        ),
        ["default/m2"],
        "the index is on the primary informer, for the reconciler's own lookups too"
    );
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret("s2"))
        .await
        .expect("secret");
    let key = tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("a reconcile within 20 s")
        .expect("alive");
    assert_eq!(key, "default/m2", "only the ConfigMap that names s2");
    let _ = stop.send(());
    running.await.expect("joins").expect("runs");
    factory.shutdown();
    assert!(seen.try_recv().is_err(), "and nothing else");
}

/// A kind every primary may depend on but none names (a Namespace a selector picks) in one call,
/// with no lister taken from the builder by hand: a Secret's change reconciles every ConfigMap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_reconcile_all_on_reconciles_every_primary_in_one_call() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    create_cm(&client, &labelled("m1", "web")).await;
    create_cm(&client, &labelled("m2", "db")).await;
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace(NS))
        .reconcile_all_on::<Secret>(Scope::namespace(NS));
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |_: Arc<ConfigMap>, ctx| {
        let _ = tx.send(ctx.key().to_string());
        async { Ok::<_, String>(Action::await_change()) }
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(20), seen.recv())
            .await
            .expect("a reconcile within 20 s")
            .expect("alive")
    };
    let mut first = vec![next().await, next().await];
    first.sort();
    assert_eq!(first, ["default/m1", "default/m2"], "the first list");
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret("s1"))
        .await
        .expect("secret");
    let mut again = vec![next().await, next().await];
    again.sort();
    assert_eq!(
        again,
        ["default/m1", "default/m2"],
        "every primary, once more"
    );
    let _ = stop.send(());
    running.await.expect("joins").expect("runs");
    assert!(seen.try_recv().is_err(), "and nothing else");
}

/// An index given twice, and a lookup of an index the primary lacks, are refused by `run`,
/// naming the call: neither is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_index_calls_that_cannot_work_are_refused_by_name() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let controller = Controller::<ConfigMap>::new(client, Scope::namespace(NS))
        .index_field::<ConfigMap>("source", |_| Vec::new())
        .index_field::<ConfigMap>("source", |_| Vec::new())
        .watches_by_index::<Secret>(Scope::namespace(NS), "sourc", |_| Vec::new());
    let reconciler =
        from_fn(|_: Arc<ConfigMap>, _ctx| async { Ok::<_, String>(Action::await_change()) });
    let refused = controller.run(reconciler, async {}).await;
    let Err(ferrokube_runtime::controller::ControllerError::Misconfigured { problems, .. }) =
        refused
    else {
        panic!("run refuses: {refused:?}");
    };
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("index_field::<ConfigMap>(\"source\""),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("watches_by_index::<Secret>(\"sourc\"")
            && problems[1].contains("index_field::<ConfigMap>(\"sourc\""),
        "{problems:?}"
    );
}

/// A cleanup runs once per deletion (the story is in `cleanup_once.rs`; `e2e.rs` runs it on
/// kube-apiserver).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_trap_a_cleanup_runs_once_per_deletion() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    crate::cleanup_once::cleanup_runs_once_per_deletion(client, NS).await;
}
