//! End-to-end tests of the informer against a real kube-apiserver: after watches that the server
//! keeps closing, watches held back while the collection changes, and etcd compaction, the informer's
//! store equals a fresh list of the server, object for object, resourceVersion included.
//!
//! Run by `scripts/e2e.sh` (`cargo test -p ferrokube-informer --features e2e --test informer -- e2e::`); see the
//! client's `client/tests/client/e2e/client.rs` for running them against another cluster.

use ferrokube_testkit as common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::informer::{Replay, assert_converges, quick_reflector, start_synced};
use common::{client, compact_etcd, config_map, namespace, pod_template};
use ferrokube_client::Api;
use ferrokube_client::ListWatch;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::PostParams;
use ferrokube_client::client::Call;
use ferrokube_core::Object;
use ferrokube_core::Scope;
use ferrokube_informer::EventStream;
use ferrokube_informer::ListMode;
use ferrokube_informer::ListPage;
use ferrokube_informer::ListRequest;
use ferrokube_informer::ListWatchError;
use ferrokube_informer::ListerWatcher;
use ferrokube_informer::ReflectorOptions;
use ferrokube_informer::SharedIndexInformer;
use ferrokube_informer::SharedInformerFactory;
use ferrokube_informer::WatchRequest;
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplate};
use parking_lot::Mutex;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_equals_a_fresh_list_after_churn_and_short_watches() {
    let client = client(None);
    let ns = namespace(&client, "informer-churn").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // Some objects before the informer starts: they arrive through the (paginated) list.
    for i in 0..120 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("pre-{i}"), "0"),
        )
        .await
        .expect("create");
    }
    let (informer, replay) = start_synced(ListWatch::new(api.clone()), quick_reflector()).await;
    assert_eq!(informer.store().len(), 120, "the first list has everything");

    // Churn for a few watch lifetimes: creates, updates, deletes from four writers.
    let mut writers = Vec::new();
    for writer in 0..4 {
        let api = api.clone();
        writers.push(tokio::spawn(async move {
            for step in 0..60 {
                let name = format!("w{writer}-{}", step % 15);
                match step % 4 {
                    0 | 1 => {
                        let _ = api
                            .create(&PostParams::default(), &config_map(&name, "new"))
                            .await;
                    }
                    2 => {
                        if let Ok(mut current) = api.get(&name).await {
                            current.data =
                                Some(BTreeMap::from([("k".to_string(), step.to_string())]));
                            let _ = api.replace(&name, &PostParams::default(), &current).await;
                        }
                    }
                    _ => {
                        let _ = api.delete(&name, &DeleteParams::default()).await;
                    }
                }
                let _ = api
                    .delete(
                        &format!("pre-{}", writer * 30 + step / 2),
                        &DeleteParams::default(),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
    assert_converges(&api, &informer, &replay).await;
    let status = informer.reflector_status();
    assert!(
        status.watches() >= 2,
        "the server closed watches and the reflector resumed ({} watches)",
        status.watches()
    );
    assert_eq!(status.lists(), 1, "a resumed watch needs no relist");
    assert!(replay.tombstones.lock().is_empty());
    informer.stop();
}

/// Holds back every watch while closed, as a network partition would.
#[derive(Clone)]
struct Gate<L> {
    inner: L,
    open: watch::Sender<bool>,
}

impl<K: Object, L: ListerWatcher<K>> ListerWatcher<K> for Gate<L> {
    async fn list(&self, request: ListRequest) -> Result<ListPage<K>, ListWatchError> {
        self.inner.list(request).await
    }
    async fn watch(&self, request: WatchRequest) -> Result<EventStream<K>, ListWatchError> {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        self.inner.watch(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_gap_relists_into_tombstones_and_adds() {
    // PodTemplates bypass the watch cache in scripts/kube-apiserver.sh: a watch from a compacted
    // revision gets 410 straight from etcd.
    let client = client(None);
    let ns = namespace(&client, "informer-gap").await;
    let api: Api<PodTemplate> = Api::namespaced(client.clone(), &ns);
    for i in 0..5 {
        api.create(&PostParams::default(), &pod_template(&format!("kept-{i}")))
            .await
            .expect("create");
    }
    for i in 0..3 {
        api.create(
            &PostParams::default(),
            &pod_template(&format!("doomed-{i}")),
        )
        .await
        .expect("create");
    }
    let gate = Gate {
        inner: ListWatch::new(api.clone()),
        open: watch::channel(true).0,
    };
    let (informer, replay) = start_synced(gate.clone(), quick_reflector()).await;
    assert_eq!(informer.store().len(), 8);

    // Partition: once the current watch times out (≤ 2 s), no new one opens.
    gate.open.send_replace(false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    for i in 0..3 {
        api.delete(&format!("doomed-{i}"), &DeleteParams::default())
            .await
            .expect("delete");
    }
    let mut newest = String::new();
    for i in 0..2 {
        newest = api
            .create(&PostParams::default(), &pod_template(&format!("born-{i}")))
            .await
            .expect("create")
            .metadata
            .resource_version
            .expect("rv");
    }
    compact_etcd(&newest);
    let lists_before = informer.reflector_status().lists();
    gate.open.send_replace(true);

    assert_converges(&api, &informer, &replay).await;
    assert!(
        informer.reflector_status().lists() > lists_before,
        "the 410 forced a relist"
    );
    let mut tombstones = replay.tombstones.lock().clone();
    tombstones.sort();
    let expected: Vec<String> = (0..3).map(|i| format!("{ns}/doomed-{i}")).collect();
    assert_eq!(
        tombstones, expected,
        "deletes in the gap arrive as tombstones"
    );
    let mut born = replay.adds_after_sync.lock().clone();
    born.sort();
    let expected: Vec<String> = (0..2).map(|i| format!("{ns}/born-{i}")).collect();
    assert_eq!(born, expected, "creates in the gap arrive as adds");
    informer.stop();
}

/// Counts what a reflector asks of the server: LIST requests, and watches that asked for a
/// streaming list (`sendInitialEvents=true`), split into the ones the server opened and refused.
#[derive(Clone, Default)]
struct Requests {
    lists: Arc<Mutex<u64>>,
    streaming_opened: Arc<Mutex<u64>>,
    streaming_refused: Arc<Mutex<u64>>,
}

#[derive(Clone)]
struct Counting<L> {
    inner: L,
    requests: Requests,
}

impl<K: Object, L: ListerWatcher<K>> ListerWatcher<K> for Counting<L> {
    async fn list(&self, request: ListRequest) -> Result<ListPage<K>, ListWatchError> {
        *self.requests.lists.lock() += 1;
        self.inner.list(request).await
    }
    async fn watch(&self, request: WatchRequest) -> Result<EventStream<K>, ListWatchError> {
        let streaming = request.send_initial_events;
        let result = self.inner.watch(request).await;
        if streaming {
            match &result {
                Ok(_) => *self.requests.streaming_opened.lock() += 1,
                Err(_) => *self.requests.streaming_refused.lock() += 1,
            }
        }
        result
    }
}

/// What a server of this minor release does with a streaming list (a watch with
/// `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`), with its default feature gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamingExpected {
    /// Before 1.27 there is no WatchList feature: the server refuses the watch with 400
    /// ("resourceVersionMatch is forbidden for watch" on 1.20), and the reflector falls back to
    /// one LIST and a watch.
    Refused,
    /// 1.34 and later (and 1.32) serve it by default (feature gate WatchList, beta and on): the
    /// initial objects arrive as ADDED events and a BOOKMARK annotated
    /// `k8s.io/initial-events-end: "true"` ends them; no LIST is sent.
    Streamed,
    /// 1.27–1.31 and 1.33: the gate exists but is off by default (alpha until 1.32; 1.33 turned the
    /// beta off again), so it depends on how the server was started: either outcome, but a
    /// consistent one.
    EitherByGate,
}

fn streaming_expected(minor: u32) -> StreamingExpected {
    match minor {
        0..=26 => StreamingExpected::Refused,
        32 | 34.. => StreamingExpected::Streamed,
        _ => StreamingExpected::EitherByGate,
    }
}

#[test]
fn streaming_expectations_by_release() {
    assert_eq!(streaming_expected(20), StreamingExpected::Refused);
    assert_eq!(streaming_expected(33), StreamingExpected::EitherByGate);
    assert_eq!(streaming_expected(37), StreamingExpected::Streamed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_stream_where_the_server_can_and_fall_back_where_it_cannot() {
    let client = client(None);
    let ns = namespace(&client, "informer-stream").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for i in 0..10 {
        api.create(&PostParams::default(), &config_map(&format!("c{i}"), "0"))
            .await
            .expect("create");
    }
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let requests = Requests::default();
    let lister_watcher = Counting {
        inner: ListWatch::new(api.clone()),
        requests: requests.clone(),
    };
    let informer = SharedIndexInformer::builder(lister_watcher)
        .reflector(ReflectorOptions {
            list_mode: ListMode::Streaming,
            error_handler: Some(Arc::new(move |error: &ListWatchError| {
                seen.lock().push(error.to_string())
            })),
            ..quick_reflector()
        })
        .build();
    let replay = Replay::default();
    informer.add_event_handler(replay.clone()).expect("handler");
    informer.start().expect("start");
    let synced = tokio::time::timeout(Duration::from_secs(30), informer.wait_for_cache_sync())
        .await
        .expect("synced in time");
    assert!(synced);
    assert_eq!(informer.store().len(), 10, "the initial state, complete");
    let status = informer.reflector_status();
    let minor = server_minor(&client).await;
    let lists = *requests.lists.lock();
    let opened = *requests.streaming_opened.lock();
    let refused = *requests.streaming_refused.lock();
    let expected = streaming_expected(minor);
    println!(
        "1.{minor}: expected {expected:?}; LIST requests {lists}, streaming watches opened \
         {opened}, refused {refused}; reflector lists() {}, streaming_unsupported {}",
        status.lists(),
        status.streaming_unsupported()
    );
    // Either way the reflector has exactly one complete initial state: `lists()` counts a streamed
    // one like a listed one.
    assert_eq!(status.lists(), 1, "one initial state");
    let streamed = match expected {
        StreamingExpected::Refused => false,
        StreamingExpected::Streamed => true,
        StreamingExpected::EitherByGate => !status.streaming_unsupported(),
    };
    if streamed {
        assert!(
            !status.streaming_unsupported(),
            "1.{minor} streams lists: {:?}",
            errors.lock()
        );
        assert_eq!(
            (opened, refused, lists),
            (1, 0, 0),
            "one streaming watch, no LIST"
        );
    } else {
        assert!(
            status.streaming_unsupported(),
            "1.{minor} refuses streaming lists"
        );
        assert_eq!(
            (opened, refused, lists),
            (0, 1, 1),
            "one refused streaming watch, then one LIST"
        );
    }
    assert_converges(&api, &informer, &replay).await;
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factory_shares_one_informer_per_type_and_scope_and_listers_read_it() {
    let client = client(None);
    let ns = namespace(&client, "informer-factory").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        let mut object = config_map(name, "0");
        object.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
        api.create(&PostParams::default(), &object)
            .await
            .expect("create");
    }
    let factory = SharedInformerFactory::new(client.clone());
    let first = factory.informer::<ConfigMap>(&Scope::namespace(&ns));
    let second = factory.informer::<ConfigMap>(&Scope::namespace(&ns));
    assert!(
        Arc::ptr_eq(first.store(), second.store()),
        "one informer, one store"
    );
    factory.start().expect("start");
    assert!(factory.wait_for_cache_sync().await);
    assert_eq!(first.reflector_status().lists(), 1, "one list for both");
    let lister = first.lister();
    let web = lister
        .namespace(&ns)
        .list(&"app=web".parse().expect("selector"));
    let mut names: Vec<_> = web.iter().filter_map(|o| o.metadata.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    assert!(lister.get(Some(&ns), "c").is_some());
    assert!(lister.namespace(&ns).get("missing").is_none());
    factory.shutdown();
}

/// One call a reflector made, as [`Timed`] saw it.
#[derive(Debug, Clone)]
struct WatchCall {
    streaming: bool,
    took: Duration,
    /// `None` when the watch opened; else the error, classified.
    error: Option<String>,
    /// The failure's reason was 429 Too Many Requests.
    too_many_requests: bool,
}

/// Records how long each watch call took (the client's own retries happen inside it) and how it
/// ended, and counts LIST calls.
#[derive(Clone)]
struct Timed<L> {
    inner: L,
    watches: Arc<Mutex<Vec<WatchCall>>>,
    lists: Arc<Mutex<u64>>,
}

impl<L> Timed<L> {
    fn new(inner: L) -> Self {
        Timed {
            inner,
            watches: Arc::default(),
            lists: Arc::default(),
        }
    }
    fn throttled(&self) -> Vec<WatchCall> {
        self.watches
            .lock()
            .iter()
            .filter(|c| c.too_many_requests)
            .cloned()
            .collect()
    }
}

impl<K: Object, L: ListerWatcher<K>> ListerWatcher<K> for Timed<L> {
    async fn list(&self, request: ListRequest) -> Result<ListPage<K>, ListWatchError> {
        *self.lists.lock() += 1;
        self.inner.list(request).await
    }
    async fn watch(&self, request: WatchRequest) -> Result<EventStream<K>, ListWatchError> {
        let streaming = request.send_initial_events;
        let started = std::time::Instant::now();
        let result = self.inner.watch(request).await;
        let error = result.as_ref().err();
        let too_many_requests = error.is_some_and(|e| {
            std::error::Error::source(e)
                .and_then(|s| s.downcast_ref::<ferrokube_client::Error>())
                .is_some_and(ferrokube_client::Error::is_too_many_requests)
        });
        self.watches.lock().push(WatchCall {
            streaming,
            took: started.elapsed(),
            error: error.map(ToString::to_string),
            too_many_requests,
        });
        result
    }
}

/// The server's minor release, from `/version`.
async fn server_minor(client: &ferrokube_client::Client) -> u32 {
    let version: serde_json::Value = client
        .request(Call {
            request: http::Request::get("/version")
                .body(bytes::Bytes::new())
                .expect("request"),
            idempotent: true,
            streaming: false,
        })
        .await
        .expect("/version");
    version["minor"]
        .as_str()
        .and_then(|m| m.trim_end_matches('+').parse().ok())
        .expect("a minor version")
}

/// kube-apiserver 1.34+ (KEP-4568, ResilientWatchCacheInitialization, GA) answers a watch, and a
/// list it cannot hand to etcd, of a resource whose watch cache is not initialized with 429 and a
/// `Retry-After` that grows with the outage, where older servers held the watch open until the
/// cache was ready. A fresh server is in that state for its first moments only; this test holds a
/// resource there for as long as it needs: an object kube-apiserver cannot decode, written
/// straight into etcd under the custom resource's prefix in *another* namespace, makes the watch
/// cache's own list fail, so the cache stays uninitialized until the test deletes the object, while
/// paginated lists of the test's namespace (served from etcd, which the bad key is outside of)
/// still work, as during a real warm-up.
///
/// Checked: the raw answers (watch and unpaginated list 429 with `Retry-After` >= 1 s, reason
/// `TooManyRequests`; a paginated list served); the client honours `Retry-After` on each retry
/// (a throttled watch call takes at least the client's retries times 1 s); the informer in both
/// list modes waits it out (list + watch syncs from the paginated list; a 429 never makes the
/// streaming reflector give up streaming, nor send a LIST), and both converge on the server's state,
/// a change made during the warm-up included, once the cache is ready. On releases before 1.34 the
/// watch waits instead of answering 429: the informers must converge all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warming_watch_cache_answers_429_with_retry_after_and_informers_wait_it_out() {
    use ferrokube_client::DynamicObject;
    use ferrokube_client::api::ListParams;
    use ferrokube_client::api::WatchParams;
    use ferrokube_core::ApiResource;
    use serde_json::json;

    let client = client(None);
    let minor = server_minor(&client).await;
    let ns = namespace(&client, "informer-warm").await;
    // A resource of its own: its watch cache starts with its CRD, after the bad key is in place.
    let suffix = ns.rsplit('-').next().unwrap_or("x").to_string();
    let group = format!("warm{suffix}.e2e.ferrokube.dev");
    let plural = "warmups";
    let bad_key = format!("/registry/{group}/{plural}/elsewhere/undecodable");
    common::etcd_put(&bad_key, "not an object");

    let crds = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
        namespaced: false,
    };
    let crd_api = Api::dynamic(client.clone(), crds.clone(), None);
    let crd_name = format!("{plural}.{group}");
    let crd = DynamicObject::new(&crd_name, &crds).with(
        "spec",
        json!({
            "group": group,
            "names": {"plural": plural, "singular": "warmup", "kind": "Warmup"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }),
    );
    crd_api
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let resource = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        kind: "Warmup".into(),
        plural: plural.into(),
        namespaced: true,
    };
    let api = Api::dynamic(client.clone(), resource.clone(), Some(&ns));
    let warmup = |name: &str| DynamicObject::new(name, &resource).with("spec", json!({"n": 1}));
    // Writes go to etcd, cache or not; the CRD takes a moment to be served.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for i in 0..3 {
        loop {
            match api
                .create(&PostParams::default(), &warmup(&format!("w{i}")))
                .await
            {
                Ok(_) => break,
                Err(e) if e.is_not_found() && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("create warmup: {e}"),
            }
        }
    }

    // The raw answers, with a client that does not retry.
    let answers_429 = minor >= 34;
    let mut config = common::config(None);
    config.retry.max_retries = 0;
    let once = Api::dynamic(
        ferrokube_client::Client::new(config).expect("client"),
        resource.clone(),
        Some(&ns),
    );
    let paged = once
        .list(&ListParams {
            limit: Some(10),
            ..ListParams::default()
        })
        .await
        .expect("a paginated list is served from etcd while the cache warms");
    assert_eq!(paged.items.len(), 3);
    if answers_429 {
        for (what, result) in [
            (
                "watch",
                once.watch(
                    &WatchParams::default(),
                    &paged.metadata.resource_version.clone().unwrap_or_default(),
                )
                .await
                .map(|_| ()),
            ),
            (
                "unpaginated list",
                once.list(&ListParams::default()).await.map(|_| ()),
            ),
        ] {
            let error = result.expect_err("429 while the cache warms");
            let api_error = error.api().expect("an API error");
            assert_eq!(api_error.code, 429, "{what}: {error}");
            assert!(error.is_too_many_requests(), "{what}: {error}");
            assert!(
                api_error
                    .retry_after
                    .is_some_and(|d| d >= Duration::from_secs(1)),
                "{what}: Retry-After of at least 1 s: {api_error:?}"
            );
        }
    }

    // Two informers with the default client (it retries 429s, waiting Retry-After each time).
    let list_watch = Timed::new(ListWatch::new(api.clone()));
    let streaming = Timed::new(ListWatch::new(api.clone()));
    let mut informers = Vec::new();
    for (lister_watcher, mode) in [
        (list_watch.clone(), ListMode::ListWatch),
        (streaming.clone(), ListMode::Streaming),
    ] {
        let informer = SharedIndexInformer::builder(lister_watcher)
            .reflector(ReflectorOptions {
                list_mode: mode,
                ..quick_reflector()
            })
            .build();
        let replay = Replay::default();
        informer.add_event_handler(replay.clone()).expect("handler");
        informer.start().expect("start");
        informers.push((informer, replay));
    }
    // List + watch syncs from the paginated list, cache or not.
    let synced = tokio::time::timeout(
        Duration::from_secs(30),
        informers[0].0.wait_for_cache_sync(),
    )
    .await
    .expect("list + watch syncs while the watch cache warms");
    assert!(synced);
    assert_eq!(informers[0].0.store().len(), 3);
    // A change during the warm-up.
    api.create(&PostParams::default(), &warmup("during"))
        .await
        .expect("create during the warm-up");
    if answers_429 {
        // Wait until each reflector has had a watch call end in 429 (after the client's retries).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while list_watch.throttled().is_empty() || streaming.throttled().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "no throttled watch: list+watch {:?}, streaming {:?}",
                list_watch.watches.lock(),
                streaming.watches.lock()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let retries = ferrokube_client::client::RetryPolicy::default().max_retries;
        for call in list_watch.throttled().iter().chain(&streaming.throttled()) {
            assert!(call.error.is_some(), "{call:?}");
            assert!(
                call.took >= Duration::from_secs(u64::from(retries)),
                "each of the {retries} retries waits Retry-After (>= 1 s): {call:?}"
            );
        }
        assert!(streaming.throttled().iter().all(|c| c.streaming));
        assert!(
            !informers[1].0.reflector_status().streaming_unsupported(),
            "a 429 is not a refusal of streaming lists"
        );
    }
    if streaming_expected(minor) == StreamingExpected::Streamed {
        assert_eq!(
            *streaming.lists.lock(),
            0,
            "the streaming reflector sent no LIST"
        );
    }

    // The cache can initialize now.
    common::etcd_delete(&bad_key);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        match once.list(&ListParams::default()).await {
            Ok(_) => break,
            Err(e) if e.is_too_many_requests() && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("the watch cache never became ready: {e}"),
        }
    }
    for (informer, replay) in &informers {
        let synced = tokio::time::timeout(Duration::from_secs(90), informer.wait_for_cache_sync())
            .await
            .expect("synced once the cache is ready");
        assert!(synced);
        assert_converges(&api, informer, replay).await;
        assert_eq!(
            informer.store().len(),
            4,
            "the change made during the warm-up"
        );
    }
    assert!(
        !informers[1].0.reflector_status().streaming_unsupported()
            || streaming_expected(minor) != StreamingExpected::Streamed,
        "streaming where the release streams"
    );
    println!(
        "1.{minor}: list+watch watch calls {:?}\nstreaming watch calls {:?}",
        list_watch.watches.lock(),
        streaming.watches.lock()
    );
    for (informer, _) in &informers {
        informer.stop();
    }
    crd_api
        .delete(&crd_name, &DeleteParams::default())
        .await
        .expect("delete CRD");
}

/// As `informer/tests/informer/embedded.rs`'s test of the same name, on kube-apiserver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_fields_not_cached_by_default_and_a_put_keeps_the_servers() {
    let client = client(None);
    let ns = namespace(&client, "managed-fields").await;
    common::informer::check_managed_fields_not_cached(&client, &ns).await;
}

/// Protobuf on the wire: kube-apiserver answers the client's protobuf reads in protobuf, and
/// Pods with rich specs, a ConfigMap, a Service, a Deployment and a Node decode equal to the same
/// objects read as JSON (gets, lists), as do an informer's cache and a watch's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_reads_equal_json_reads_on_kube_apiserver() {
    let client = client(None);
    let ns = namespace(&client, "protobuf").await;
    common::protobuf::check_protobuf_reads_equal_json(&client, &ns, true).await;
}
