//! The read-your-own-writes client (`ferrokube_runtime::controller::ReadYourWrites`) against the embedded
//! API server, with watch delivery delayed or held back so that the cache is provably behind the
//! client's writes: every read through the client shows the client's completed writes (and the
//! same read through the plain lister does not, which is what proves each test can fail), deletes
//! included; a read never waits for a write that started after it, nor for one still in flight;
//! the wait is bounded; writes outside the informer's scope do not hold reads up.
//!
//! Deterministic: no test sleeps. Where an order matters, watch events are held at a gate (a
//! `ListerWatcher` wrapper that lets an event through only once the test opens its gate) instead
//! of raced against a timer.

use ferrokube_testkit as common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::ListWatch;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::Deleted;
use ferrokube_client::api::Patch;
use ferrokube_client::api::PatchParams;
use ferrokube_client::api::PostParams;
use ferrokube_core::LabelSelector;
use ferrokube_core::Object;
use ferrokube_core::ObjectKey;
use ferrokube_core::Scope;
use ferrokube_informer::Event;
use ferrokube_informer::EventStream;
use ferrokube_informer::ListPage;
use ferrokube_informer::ListRequest;
use ferrokube_informer::ListWatchError;
use ferrokube_informer::ListerWatcher;
use ferrokube_informer::SharedIndexInformer;
use ferrokube_informer::WatchRequest;
use ferrokube_runtime::controller::ReadError;
use ferrokube_runtime::controller::ReadYourWrites;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde_json::json;
use tokio::sync::watch;

const NS: &str = "default";

async fn server() -> (RunningServer, Client) {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    (server, client)
}

/// A started, synced informer over `lister_watcher`.
async fn started<K: Object, L: ListerWatcher<K>>(lister_watcher: L) -> SharedIndexInformer<K> {
    let informer = SharedIndexInformer::builder(lister_watcher).build();
    informer.start().expect("informer starts");
    assert!(informer.wait_for_cache_sync().await, "informer synced");
    informer
}

/// A ConfigMap named `name` in [`NS`] with `data.k = value` and labels `app=<app>`.
fn config_map(name: &str, value: &str, app: &str) -> ConfigMap {
    let mut object = common::config_map(name, value);
    object.metadata.namespace = Some(NS.into());
    object.metadata.labels = Some(BTreeMap::from([("app".into(), app.into())]));
    object
}

fn value(cm: &ConfigMap) -> &str {
    cm.data
        .as_ref()
        .and_then(|d| d.get("k"))
        .map_or("", String::as_str)
}

fn everything() -> LabelSelector {
    LabelSelector::everything()
}

fn names<K: Object>(objects: &[Arc<K>]) -> Vec<String> {
    let mut names: Vec<String> = objects
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .collect();
    names.sort();
    names
}

/// Every kind of write, each followed at once by reads through the client (which see it) and
/// through the plain lister (which, with watch events 200 ms late, does not yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_own_writes_sees_each_write_at_once_under_a_delayed_watch() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let informer = started(ListWatch::new(api.clone())).await;
    let rw = ReadYourWrites::new(api, informer.clone(), &Scope::namespace(NS));
    let lister = rw.lister();
    server.faults().delay_watches(Duration::from_millis(200));

    // create
    let created = rw
        .api()
        .create(&PostParams::default(), &config_map("web", "v1", "web"))
        .await
        .expect("create");
    assert!(
        lister.get(Some(NS), "web").is_none(),
        "the plain cache is behind"
    );
    let seen = rw
        .get(Some(NS), "web")
        .await
        .expect("read")
        .expect("created");
    assert_eq!(seen.resource_version(), created.resource_version());
    let listed = rw.list(Some(NS), &"app=web".parse().expect("selector"));
    assert_eq!(names(&listed.await.expect("list")), ["web"]);

    // replace
    let mut changed = created.clone();
    changed.data = Some(BTreeMap::from([("k".into(), "v2".into())]));
    let replaced = rw
        .api()
        .replace("web", &PostParams::default(), &changed)
        .await
        .expect("replace");
    let stale = lister.get(Some(NS), "web").expect("cached");
    assert_eq!(value(&stale), "v1", "the plain cache is behind");
    let seen = rw
        .get(Some(NS), "web")
        .await
        .expect("read")
        .expect("cached");
    assert_eq!(
        (value(&seen), seen.resource_version()),
        ("v2", replaced.resource_version())
    );

    // patch, then a list in every namespace
    rw.api()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v3"}})),
        )
        .await
        .expect("patch");
    assert_eq!(value(&lister.get(Some(NS), "web").expect("cached")), "v2");
    let listed = rw.list(None, &everything()).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(value(&listed[0]), "v3");
}

/// Status writes (`replace_status`, `patch_status`) on a kind with a status subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_own_writes_sees_status_writes_under_a_delayed_watch() {
    let (server, client) = server().await;
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let informer = started(ListWatch::new(api.clone())).await;
    let rw = ReadYourWrites::new(api, informer, &Scope::all());
    let lister = rw.lister();
    let created = rw
        .api()
        .create(&PostParams::default(), &common::replica_set("web", 3, 0))
        .await
        .expect("create");
    rw.get(Some(NS), "web")
        .await
        .expect("read")
        .expect("cached");
    server.faults().delay_watches(Duration::from_millis(200));
    let replicas = |rs: &ReplicaSet| rs.status.as_ref().map_or(-1, |s| s.replicas);

    let mut with_status = created.clone();
    with_status.status = Some(ReplicaSetStatus {
        replicas: 2,
        ..ReplicaSetStatus::default()
    });
    rw.api()
        .replace_status("web", &PostParams::default(), &with_status)
        .await
        .expect("replace status");
    assert_ne!(replicas(&lister.get(Some(NS), "web").expect("cached")), 2);
    let seen = rw
        .get(Some(NS), "web")
        .await
        .expect("read")
        .expect("cached");
    assert_eq!(replicas(&seen), 2);

    rw.api()
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 3}})),
        )
        .await
        .expect("patch status");
    assert_eq!(replicas(&lister.get(Some(NS), "web").expect("cached")), 2);
    let listed = rw.list(Some(NS), &everything()).await.expect("list");
    assert_eq!(
        listed.iter().map(|rs| replicas(rs)).collect::<Vec<_>>(),
        [3]
    );
}

/// Deletes: answered with a `Status` (a ConfigMap, gone at once), with the object held by a
/// finalizer (then gone when the finalizer is removed), and with the deleted object (a Pod).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_own_writes_deletes_are_not_visible_after_a_read() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let informer = started(ListWatch::new(api.clone())).await;
    let rw = ReadYourWrites::new(api, informer, &Scope::all());
    let lister = rw.lister();
    rw.api()
        .create(&PostParams::default(), &config_map("plain", "v", "x"))
        .await
        .expect("create");
    let mut held = config_map("held", "v", "x");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    rw.api()
        .create(&PostParams::default(), &held)
        .await
        .expect("create");
    assert_eq!(
        names(&rw.list(Some(NS), &everything()).await.expect("list")),
        ["held", "plain"]
    );
    server.faults().delay_watches(Duration::from_millis(200));

    // A Status answer: the object must be gone.
    let outcome = rw
        .api()
        .delete("plain", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(matches!(outcome, Deleted::Gone(_)), "{outcome:?}");
    assert!(
        lister.get(Some(NS), "plain").is_some(),
        "the plain cache is behind"
    );
    assert_eq!(rw.get(Some(NS), "plain").await, Ok(None));
    let listed = rw.list(Some(NS), &everything()).await.expect("list");
    assert_eq!(names(&listed), ["held"]);

    // A finalizer holds the object: the read shows it marked for deletion.
    let outcome = rw
        .api()
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(matches!(outcome, Deleted::Pending(_)), "{outcome:?}");
    let stale = lister.get(Some(NS), "held").expect("cached");
    assert!(
        stale.metadata.deletion_timestamp.is_none(),
        "the plain cache is behind"
    );
    let seen = rw
        .get(Some(NS), "held")
        .await
        .expect("read")
        .expect("still there");
    assert!(seen.metadata.deletion_timestamp.is_some());
    // Removing the finalizer completes the delete; the patch answers the object at the version
    // it replaced (as kube-apiserver does), and the read still waits for the deletion.
    rw.api()
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("finalizer removed");
    assert!(
        lister.get(Some(NS), "held").is_some(),
        "the plain cache is behind"
    );
    assert_eq!(rw.get(Some(NS), "held").await, Ok(None));

    // A kind whose deletes answer the deleted object (at its deletion's resourceVersion).
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod_informer = started(ListWatch::new(pods.clone())).await;
    let pods = ReadYourWrites::new(pods, pod_informer, &Scope::all());
    server.faults().delay_watches(Duration::ZERO);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}
    }))
    .expect("pod json");
    pods.api()
        .create(&PostParams::default(), &pod)
        .await
        .expect("create");
    pods.get(Some(NS), "p")
        .await
        .expect("read")
        .expect("cached");
    server.faults().delay_watches(Duration::from_millis(200));
    let outcome = pods
        .api()
        .delete("p", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(matches!(outcome, Deleted::Pending(_)), "{outcome:?}");
    assert!(
        pods.lister().get(Some(NS), "p").is_some(),
        "the plain cache is behind"
    );
    assert_eq!(pods.get(Some(NS), "p").await, Ok(None));
}

/// Gates that watch events wait at (see [`Gated`]): which are open, and which have had an event
/// arrive at them (so a test knows the informer's watch is established and carrying that event).
#[derive(Clone)]
struct Gates {
    open: watch::Sender<HashSet<String>>,
    arrived: watch::Sender<HashSet<String>>,
}

impl Gates {
    fn new() -> Gates {
        Gates {
            open: watch::Sender::new(HashSet::new()),
            arrived: watch::Sender::new(HashSet::new()),
        }
    }
    fn open(&self, gate: &str) {
        self.open.send_modify(|open| {
            open.insert(gate.to_string());
        });
    }
    /// Waits until an event has arrived at `gate` (it may still be held there).
    async fn arrived(&self, gate: &str) {
        let mut arrived = self.arrived.subscribe();
        // The sender lives in `self`: an error cannot happen.
        let _ = arrived.wait_for(|arrived| arrived.contains(gate)).await;
    }
}

/// A `ListWatch` whose watch events wait at a gate: an object annotated `gate: <name>` reaches
/// the informer only once gate `<name>` is open, and the events after it wait behind it (a watch
/// is one ordered stream), exactly as a slow watch would hold them.
struct Gated {
    inner: ListWatch<ConfigMap>,
    gates: Gates,
}

fn gate_of(event: &Event<ConfigMap>) -> Option<String> {
    let object = match event {
        Event::Added(o) | Event::Modified(o) | Event::Deleted(o) => o,
        Event::Bookmark { .. } => return None,
    };
    object.metadata.annotations.as_ref()?.get("gate").cloned()
}

impl ListerWatcher<ConfigMap> for Gated {
    async fn list(&self, request: ListRequest) -> Result<ListPage<ConfigMap>, ListWatchError> {
        self.inner.list(request).await
    }

    async fn watch(&self, request: WatchRequest) -> Result<EventStream<ConfigMap>, ListWatchError> {
        let events = self.inner.watch(request).await?;
        let gates = self.gates.clone();
        let held = events.then(move |item| {
            let mut open = gates.open.subscribe();
            let arrived = gates.arrived.clone();
            async move {
                if let Some(gate) = item.as_ref().ok().and_then(gate_of) {
                    arrived.send_modify(|arrived| {
                        arrived.insert(gate.clone());
                    });
                    // The sender lives as long as the test: an error cannot happen.
                    let _ = open.wait_for(|open| open.contains(&gate)).await;
                }
                item
            }
        });
        Ok(held.boxed())
    }
}

fn gated(name: &str, value: &str, gate: &str) -> ConfigMap {
    let mut object = config_map(name, value, "web");
    object.metadata.annotations = Some(BTreeMap::from([("gate".into(), gate.into())]));
    object
}

/// A read started after write A waits for A, and not for write B, which started after the read
/// and completed while it waited: B's event is held at its gate the whole time, so a read that
/// waited for B would time out. A read starts when it is called, not when first polled. A read
/// started after B waits for B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_own_writes_a_read_never_waits_for_a_write_that_started_after_it() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let gates = Gates::new();
    let informer = started(Gated {
        inner: ListWatch::new(api.clone()),
        gates: gates.clone(),
    })
    .await;
    let rw =
        ReadYourWrites::new(api, informer, &Scope::namespace(NS)).max_wait(Duration::from_secs(10));

    let a = rw
        .api()
        .create(&PostParams::default(), &gated("web", "A", "a"))
        .await
        .expect("write A");
    let first = tokio::spawn(rw.get(Some(NS), "web")); // starts now: waits for A
    let unpolled = rw.list(Some(NS), &everything()); // starts now too, first polled after B
    let mut next = a.clone();
    next.metadata.annotations = Some(BTreeMap::from([("gate".into(), "b".into())]));
    next.data = Some(BTreeMap::from([("k".into(), "B".into())]));
    let b = rw
        .api()
        .replace("web", &PostParams::default(), &next)
        .await
        .expect("write B");
    assert!(!first.is_finished(), "A is held at its gate");

    gates.open("a");
    let seen = first
        .await
        .expect("read task")
        .expect("the read did not wait for B")
        .expect("A is cached");
    assert_eq!(
        (value(&seen), seen.resource_version()),
        ("A", a.resource_version())
    );
    let listed = unpolled.await.expect("the read did not wait for B");
    assert_eq!(listed.iter().map(|cm| value(cm)).collect::<Vec<_>>(), ["A"]);

    // A read that starts now waits for B, which is still held.
    let impatient = rw.clone().max_wait(Duration::from_millis(100));
    match impatient.get(Some(NS), "web").await {
        Err(ReadError::Stale(stale)) => {
            assert_eq!(
                stale.wanted_version,
                Some(b.resource_version().parse().expect("integer"))
            );
            assert_eq!(
                stale.needs(),
                format!("resourceVersion >= {}", b.resource_version())
            );
        }
        other => panic!("expected a timeout waiting for B, got {other:?}"),
    }
    gates.open("b");
    let seen = rw
        .get(Some(NS), "web")
        .await
        .expect("read")
        .expect("cached");
    assert_eq!(value(&seen), "B");
}

/// A write in flight when the read starts (held by the paused server, so it cannot complete) is
/// not waited for; once it completes, later reads wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_own_writes_a_read_does_not_wait_for_a_write_in_flight() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let gates = Gates::new();
    let informer = started(Gated {
        inner: ListWatch::new(api.clone()),
        gates: gates.clone(),
    })
    .await;
    let rw =
        ReadYourWrites::new(api, informer, &Scope::namespace(NS)).max_wait(Duration::from_secs(10));
    rw.api()
        .create(&PostParams::default(), &gated("a", "A", "a"))
        .await
        .expect("write A");
    // The informer's watch must be up before the server pauses (a watch request that reached
    // the paused server would be held too, and A with it): wait until A's event is at its gate.
    gates.arrived("a").await;

    server.faults().pause();
    let writer = rw.clone();
    let in_flight = tokio::spawn(async move {
        writer
            .api()
            .create(&PostParams::default(), &gated("b", "B", "b"))
            .await
    });
    let read = tokio::spawn(rw.list(Some(NS), &everything())); // waits for A only
    gates.open("a");
    let listed = read.await.expect("read task").expect("no timeout");
    assert_eq!(names(&listed), ["a"]);
    assert!(
        !in_flight.is_finished(),
        "the server is paused: B is still in flight"
    );

    server.faults().resume();
    gates.open("b");
    in_flight.await.expect("write task").expect("write B");
    let listed = rw.list(Some(NS), &everything()).await.expect("list");
    assert_eq!(names(&listed), ["a", "b"]);
}

/// With watch events 2 s late, a read allowed 100 ms fails with the typed timeout, promptly and
/// saying what it waited for; one allowed the default (3 s) succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_own_writes_the_wait_is_bounded() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let informer = started(ListWatch::new(api.clone())).await;
    let rw = ReadYourWrites::new(api, informer, &Scope::all());
    server.faults().delay_watches(Duration::from_secs(2));
    let created = rw
        .api()
        .create(&PostParams::default(), &config_map("web", "v1", "web"))
        .await
        .expect("create");

    let started = Instant::now();
    let impatient = rw.clone().max_wait(Duration::from_millis(100));
    let error = impatient
        .get(Some(NS), "web")
        .await
        .expect_err("the cache is 2 s behind");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    assert!(waited < Duration::from_secs(1), "gave up late: {waited:?}");
    let ReadError::Stale(stale) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(stale.waited, Duration::from_millis(100));
    assert_eq!(stale.key, Some(ObjectKey::new(Some(NS), "web")));
    assert_eq!(
        stale.wanted_version,
        Some(created.resource_version().parse().expect("integer"))
    );
    assert!(stale.wanted_gone.is_empty());
    assert!(
        stale.seen_version.parse::<u64>().expect("integer")
            < created.resource_version().parse().expect("integer")
    );
    assert!(
        error
            .to_string()
            .contains("does not show this process's writes for"),
        "{error}"
    );

    let seen = rw.get(Some(NS), "web").await.expect("3 s covers 2 s");
    assert!(seen.is_some());
}

/// Writes the informer will never show (another namespace, outside its label selector) do not
/// hold reads up; a write that moves a cached object out of the selection is waited for, and the
/// read no longer finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_your_own_writes_writes_outside_the_scope_do_not_hold_reads() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let scope = Scope::namespace(NS).labels("app=web");
    let informer = started(ListWatch::new(api.clone()).labels("app=web")).await;
    let rw = ReadYourWrites::new(api, informer, &scope).max_wait(Duration::from_millis(500));
    rw.api()
        .create(&PostParams::default(), &config_map("web", "v", "web"))
        .await
        .expect("create");
    assert!(rw.get(Some(NS), "web").await.expect("read").is_some());

    rw.api()
        .create(&PostParams::default(), &config_map("db", "v", "db"))
        .await
        .expect("create outside the selector");
    let others: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let elsewhere = ReadYourWrites::new(others, rw.informer().clone(), &scope);
    let mut remote = config_map("remote", "v", "web");
    remote.metadata.namespace = Some("kube-system".into());
    elsewhere
        .api()
        .create(&PostParams::default(), &remote)
        .await
        .expect("create in another namespace");
    assert_eq!(rw.get(Some(NS), "db").await, Ok(None), "not waited for");
    assert_eq!(
        elsewhere.get(Some("kube-system"), "remote").await,
        Ok(None),
        "not waited for"
    );

    server.faults().delay_watches(Duration::from_millis(200));
    rw.api()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
        )
        .await
        .expect("relabel");
    assert!(
        rw.lister().get(Some(NS), "web").is_some(),
        "the plain cache is behind"
    );
    let impatient = rw.clone().max_wait(Duration::from_secs(3));
    assert_eq!(impatient.get(Some(NS), "web").await, Ok(None));
}
