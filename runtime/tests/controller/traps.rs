//! No silent traps: what a controller author can get wrong is either made to work or refused
//! with an error that says why, never left to fail quietly.
//!
//! - an informer taken from the factory given to the controller only for its lister is started
//!   and synced by `run` (it used to stay empty and unsynced);
//! - filters are per kind: the primary's do not silence its children;
//! - a filter that cannot work, and a filter for a kind the controller does not hear, make `run`
//!   refuse, naming the problem;
//! - the builder only records, so the order of its calls does not matter (a name or metrics
//!   given after the rest used to be refused as too late).

use ferrokube_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::PostParams;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_runtime::controller::Action;
use ferrokube_runtime::controller::Controller;
use ferrokube_runtime::controller::ControllerError;
use ferrokube_runtime::controller::Filter;
use ferrokube_runtime::controller::Metrics;
use ferrokube_runtime::controller::from_fn;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use tokio::sync::{mpsc, oneshot};

const NS: &str = "default";

/// A reconciler that reports each key it reconciles, and whether the lister of Secrets held the
/// Secret `s` then.
fn reporting(
    secrets: Option<ferrokube_informer::Lister<Secret>>,
) -> (
    impl ferrokube_runtime::controller::Reconciler<ConfigMap>,
    mpsc::UnboundedReceiver<(String, bool)>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |_: Arc<ConfigMap>, ctx| {
        let held = secrets
            .as_ref()
            .is_some_and(|lister| lister.get(Some(NS), "s").is_some());
        let _ = tx.send((ctx.key().to_string(), held));
        async { Ok::<_, String>(Action::await_change()) }
    });
    (reconciler, rx)
}

async fn next(seen: &mut mpsc::UnboundedReceiver<(String, bool)>) -> (String, bool) {
    tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("a reconcile within 20 s")
        .expect("the reconciler is alive")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_traps_an_informer_taken_only_for_a_lister_is_started_and_synced() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "s"}, "stringData": {"k": "v"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &common::config_map("web", "v"))
        .await
        .expect("cm");
    // The author's factory, shared with the controller; an informer taken from it only for its
    // lister (no source of Secrets).
    let factory = Arc::new(ferrokube_informer::SharedInformerFactory::new(
        client.clone(),
    ));
    let secrets = factory.informer::<Secret>(&Scope::namespace(NS)).lister();
    let controller =
        Controller::<ConfigMap>::new(client, Scope::namespace(NS)).with_factory(factory.clone());
    let (reconciler, mut seen) = reporting(Some(secrets));
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let (key, held) = next(&mut seen).await;
    assert_eq!(key, "default/web");
    assert!(
        held,
        "the lister's informer was started and synced before the reconcile"
    );
    let _ = stop.send(());
    running.await.expect("task").expect("ran");
    factory.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_traps_the_primary_filter_does_not_silence_children() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    // A filter for the primary (only label changes of ReplicaSets) must not apply to its Secrets,
    // whose data-only update it would drop.
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &common::replica_set("web", 0, 0))
        .await
        .expect("rs");
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |rs: Arc<ReplicaSet>, _ctx| {
        let _ = tx.send(ObjectKey::of(rs.as_ref()).to_string());
        async { Ok::<_, String>(Action::await_change()) }
    });
    let controller = Controller::<ReplicaSet>::new(client.clone(), Scope::namespace(NS))
        .owns::<Secret>(Scope::namespace(NS))
        .filter(Filter::labels_changed());
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let first = tokio::time::timeout(Duration::from_secs(20), seen.recv()).await;
    assert_eq!(first.expect("initial").as_deref(), Some("default/web"));
    // A child Secret, then an update of it (Secrets have no generation): each reconciles its owner.
    let mut secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "child"}, "stringData": {"k": "v1"}
    }))
    .expect("secret");
    secret.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web".into(),
        uid: rs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let secrets = Api::<Secret>::namespaced(client.clone(), NS);
    let mut created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("child");
    let again = tokio::time::timeout(Duration::from_secs(20), seen.recv()).await;
    assert_eq!(
        again.expect("the child's creation").as_deref(),
        Some("default/web")
    );
    created.string_data = Some([("k".to_string(), "v2".to_string())].into());
    secrets
        .replace("child", &PostParams::default(), &created)
        .await
        .expect("child updated");
    let updated = tokio::time::timeout(Duration::from_secs(20), seen.recv()).await;
    assert_eq!(
        updated
            .expect("the child's update reaches its owner")
            .as_deref(),
        Some("default/web")
    );
    let _ = stop.send(());
    running.await.expect("task").expect("ran");
}

/// `run` with `controller`, expecting a refusal; its problems.
async fn refused(controller: Controller<ConfigMap>) -> Vec<String> {
    let (reconciler, _seen) = reporting(None);
    match controller.run(reconciler, std::future::pending()).await {
        Err(ControllerError::Misconfigured { problems, .. }) => problems,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn unreachable_client() -> Client {
    let config = ferrokube_client::Config::new("http://127.0.0.1:9".parse().expect("url"));
    Client::new(config).expect("client")
}

#[tokio::test]
async fn controller_traps_filters_that_cannot_work_are_refused() {
    let client = unreachable_client();
    // generation_changed() on ConfigMaps, the primary here: they have no generation.
    let problems = refused(
        Controller::<ConfigMap>::new(client.clone(), Scope::all())
            .filter(Filter::generation_changed()),
    )
    .await;
    assert!(
        problems
            .iter()
            .any(|p| p.contains("ConfigMaps have no metadata.generation")),
        "{problems:?}"
    );
    // Combined with a filter that can pass, it is fine: labels still tell changes apart.
    // A filter for a kind the controller has no source of.
    let problems = refused(
        Controller::<ConfigMap>::new(client.clone(), Scope::all())
            .filter_for::<Secret>(Filter::labels_changed()),
    )
    .await;
    assert!(
        problems.iter().any(|p| p.contains("no source of Secrets")),
        "{problems:?}"
    );
}

/// The builder only records, so no call can come too late: the name and the metrics given last
/// are the ones the queue, the informers and the reconcile metrics carry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_traps_the_order_of_the_calls_does_not_matter() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &common::config_map("web", "v"))
        .await
        .expect("cm");
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let controller = Controller::<ConfigMap>::new(client, Scope::namespace(NS))
        .workers(2)
        .metrics(&metrics)
        .name("late");
    let (reconciler, mut seen) = reporting(None);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));
    let (key, _) = next(&mut seen).await;
    assert_eq!(key, "default/web");
    let _ = stop.send(());
    running.await.expect("task").expect("ran");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    let has = |prefix: &str, label: &str| {
        text.lines()
            .any(|line| line.starts_with(prefix) && line.contains(label))
    };
    assert!(
        has("controller_runtime_reconcile_total{", "controller=\"late\""),
        "reconciles counted under the name given last: {text}"
    );
    assert!(
        has("workqueue_adds_total{", "name=\"late\""),
        "the queue named as given last: {text}"
    );
    assert!(
        !text.contains("\"configmap\""),
        "nothing carries the default name: {text}"
    );
}
