//! The controller's one interface to sharding, [`Ownership`], with an ownership of the test's
//! own: the run asks it at each of its points (scope, start, ready, claim, mark_child), and the
//! workers do what its claims say.

use ferrokube_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use ferrokube_apiserver::ApiServer;
use ferrokube_client::api::PostParams;
use ferrokube_client::{Api, Client};
use ferrokube_core::{ObjectKey, Scope};
use ferrokube_runtime::controller::ownership::{Claim, Ownership, Start};
use ferrokube_runtime::controller::{Action, Controller, from_fn};
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};

const NS: &str = "default";

/// What the ownership was asked, in order.
#[derive(Default)]
struct Asked {
    /// The owned kinds `start` was given.
    started_with: Mutex<Option<Vec<String>>>,
    /// The names of the objects `claim` was asked about.
    claims: Mutex<Vec<String>>,
    /// Bumped after each of the above changes, for the test to wait on.
    changed: watch::Sender<u64>,
}

impl Asked {
    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Waits (at most 20 s) until `done` holds.
    async fn until(&self, what: &str, done: impl Fn(&Asked) -> bool) {
        let mut changed = self.changed.subscribe();
        tokio::time::timeout(Duration::from_secs(20), changed.wait_for(|_| done(self)))
            .await
            .unwrap_or_else(|_| panic!("{what} within 20 s"))
            .expect("the sender lives in `self`");
    }
}

/// Owns the ConfigMaps labelled `mine=yes`, hands over the one named `handed`, and is ready only
/// once the test says so.
struct Labelled {
    asked: Arc<Asked>,
    ready: watch::Receiver<bool>,
}

impl Ownership<ConfigMap> for Labelled {
    fn scope(&self, scope: Scope) -> Scope {
        scope.labels("mine=yes")
    }

    fn start(&self, start: Start<'_, ConfigMap>) {
        let kinds = start
            .owned
            .iter()
            .map(|owned| owned.resource().kind.clone())
            .collect();
        *self.asked.started_with.lock() = Some(kinds);
        self.asked.bump();
    }

    fn ready(&self) -> BoxFuture<'static, bool> {
        let mut ready = self.ready.clone();
        Box::pin(async move { ready.wait_for(|ready| *ready).await.is_ok() })
    }

    fn claim<'a>(&'a self, _key: &'a ObjectKey, object: &'a ConfigMap) -> BoxFuture<'a, Claim> {
        let name = object.metadata.name.clone().unwrap_or_default();
        self.asked.claims.lock().push(name.clone());
        self.asked.bump();
        Box::pin(async move {
            if name == "handed" {
                Claim::HandedOver
            } else {
                Claim::Mine
            }
        })
    }

    fn mark_child(&self, meta: &mut ObjectMeta) {
        meta.labels
            .get_or_insert_with(Default::default)
            .insert("mine".into(), "yes".into());
    }
}

async fn create(client: &Client, name: &str, mine: &str) {
    let mut cm = common::config_map(name, "v");
    cm.metadata.labels = Some([("mine".to_string(), mine.to_string())].into());
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &cm)
        .await
        .expect("config map created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_is_asked_at_each_point_and_its_claims_are_followed() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    create(&client, "a", "yes").await;
    create(&client, "b", "no").await;
    create(&client, "handed", "yes").await;
    let asked = Arc::new(Asked::default());
    let (ready, ready_rx) = watch::channel(false);
    let (tx, mut seen) = mpsc::unbounded_channel();
    let reconciler = from_fn(move |cm: Arc<ConfigMap>, ctx| {
        let mut child = ObjectMeta::default();
        ctx.mark_child(&mut child);
        let marked = child
            .labels
            .is_some_and(|l| l.get("mine").is_some_and(|v| v == "yes"));
        let _ = tx.send((cm.metadata.name.clone().unwrap_or_default(), marked));
        async { Ok::<_, String>(Action::await_change()) }
    });
    let controller = Controller::<ConfigMap>::new(client.clone(), Scope::namespace(NS))
        .owns::<Secret>(Scope::namespace(NS))
        .ownership(Labelled {
            asked: asked.clone(),
            ready: ready_rx,
        });
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(reconciler, async {
        let _ = stopped.await;
    }));

    // Started with the owned kinds before the caches synced; no worker before `ready`.
    asked
        .until("start", |asked| asked.started_with.lock().is_some())
        .await;
    assert_eq!(
        asked.started_with.lock().clone(),
        Some(vec!["Secret".to_string()])
    );
    assert!(seen.try_recv().is_err(), "no reconcile before ready");
    assert!(asked.claims.lock().is_empty(), "no claim before ready");
    ready.send_replace(true);

    let (name, marked) = tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .expect("a reconcile within 20 s")
        .expect("alive");
    assert_eq!(name, "a", "only the object this replica owns is reconciled");
    assert!(marked, "the context marks children through the ownership");
    asked
        .until("the claim of the object handed over", |asked| {
            asked.claims.lock().iter().any(|name| name == "handed")
        })
        .await;
    let _ = stop.send(());
    running.await.expect("joins").expect("runs");
    assert!(
        seen.try_recv().is_err(),
        "the object handed over was never reconciled"
    );
    let mut claims = asked.claims.lock().clone();
    claims.sort();
    assert_eq!(
        claims,
        ["a", "handed"],
        "b is outside the narrowed scope: never cached, never claimed"
    );
}
