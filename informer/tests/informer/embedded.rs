//! The informer against the embedded API server, under its injected faults: watches closed again and
//! again, delivery delayed, history compacted while the informer is cut off, writes failing. After
//! every fault sequence the informer's store equals a fresh list of the server, object for object
//! (resourceVersion included), and the handlers' replay agrees.
//!
//! The same properties are checked on a real kube-apiserver by `informer/tests/informer/e2e.rs`.

use ferrokube_testkit as common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::informer::{Replay, assert_converges, quick_reflector, start_synced};
use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_apiserver::WriteFailure;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::ListWatch;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::PostParams;
use ferrokube_core::LabelSelector;
use ferrokube_core::Object;
use ferrokube_informer::Compact;
use ferrokube_informer::ListMode;
use ferrokube_informer::ReflectorOptions;
use ferrokube_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

async fn server() -> (RunningServer, Client) {
    let server = ApiServer::new()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .expect("server starts");
    let client = common::embedded_client(&server, true);
    (server, client)
}

/// Creates the named ConfigMaps, then starts a synced informer on them with a replaying handler.
async fn synced_informer(
    api: &Api<ConfigMap>,
    names: &[String],
    options: ReflectorOptions,
) -> (SharedIndexInformer<ConfigMap>, Replay) {
    for name in names {
        let cm = common::config_map(name, "0");
        api.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    start_synced(ListWatch::new(api.clone()), options).await
}

fn numbered(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_watches_and_delayed_delivery_resume_without_a_relist() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (informer, replay) = synced_informer(&api, &numbered("pre-", 60), quick_reflector()).await;
    server.faults().delay_watches(Duration::from_millis(50));

    let writer = {
        let api = api.clone();
        tokio::spawn(async move {
            for step in 0..150 {
                let name = format!("w-{}", step % 20);
                match step % 3 {
                    0 => {
                        let _ = api
                            .create(&PostParams::default(), &common::config_map(&name, "new"))
                            .await;
                    }
                    1 => {
                        if let Ok(mut current) = api.get(&name).await {
                            current.data = Some(BTreeMap::from([("k".into(), step.to_string())]));
                            let _ = api.replace(&name, &PostParams::default(), &current).await;
                        }
                    }
                    _ => {
                        let _ = api.delete(&name, &DeleteParams::default()).await;
                    }
                }
                let _ = api
                    .delete(&format!("pre-{}", step % 60), &DeleteParams::default())
                    .await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut closed = 0;
    while !writer.is_finished() {
        closed += server.close_watches();
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    writer.await.expect("writer");
    server.faults().delay_watches(Duration::ZERO);
    assert_converges(&api, &informer, &replay).await;
    let status = informer.reflector_status();
    assert!(closed >= 2, "the server closed watches ({closed})");
    assert!(
        status.watches() >= 3,
        "the reflector resumed ({} watches)",
        status.watches()
    );
    assert_eq!(status.lists(), 1, "a resumed watch needs no relist");
    assert!(replay.tombstones.lock().is_empty());
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_gap_relists_into_tombstones_and_adds() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut names = numbered("kept-", 2);
    names.extend(numbered("doomed-", 3));
    let (informer, replay) = synced_informer(&api, &names, quick_reflector()).await;

    // A partition: requests wait; the open watch ends; meanwhile the world changes (in-process, past
    // the paused HTTP front) and history is compacted, so the resumed watch gets 410.
    server.faults().pause();
    server.close_watches();
    let cms = server
        .api()
        .registry
        .find("", "v1", "configmaps")
        .expect("configmaps");
    let in_process = server.api();
    for name in ["doomed-0", "doomed-1", "doomed-2"] {
        in_process
            .delete(&cms, Some("default"), name, &Default::default(), false)
            .expect("delete");
    }
    for name in ["born-0", "born-1"] {
        let cm = json!({"metadata": {"name": name}, "data": {"k": "1"}});
        in_process
            .create(&cms, Some("default"), cm, &Default::default())
            .expect("create");
    }
    server.compact();
    let lists_before = informer.reflector_status().lists();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.faults().resume();

    assert_converges(&api, &informer, &replay).await;
    assert!(
        informer.reflector_status().lists() > lists_before,
        "the 410 forced a relist"
    );
    let mut tombstones = replay.tombstones.lock().clone();
    tombstones.sort();
    assert_eq!(
        tombstones,
        ["default/doomed-0", "default/doomed-1", "default/doomed-2"]
    );
    let mut born = replay.adds_after_sync.lock().clone();
    born.sort();
    assert_eq!(born, ["default/born-0", "default/born-1"]);
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_writes_and_a_streaming_list_still_converge() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let streaming = ReflectorOptions {
        list_mode: ListMode::Streaming,
        ..quick_reflector()
    };
    let (informer, replay) = synced_informer(&api, &numbered("c-", 20), streaming).await;
    let status = informer.reflector_status();
    assert!(
        !status.streaming_unsupported(),
        "the embedded server serves streaming lists"
    );
    assert_eq!(
        status.lists(),
        1,
        "the initial events count as the one list"
    );

    // A fifth of writes fail with 500 (deterministically under the seed); a client without retries
    // sees them; the informer still ends equal to the server.
    server.faults().seed(7);
    server
        .faults()
        .fail_writes(0.2, WriteFailure::InternalError);
    let flaky: Api<ConfigMap> = Api::namespaced(common::embedded_client(&server, false), "default");
    let mut failed = 0;
    for i in 0..60 {
        let name = format!("c-{}", i % 25);
        let result = match i % 2 {
            0 => flaky
                .create(&PostParams::default(), &common::config_map(&name, "x"))
                .await
                .map(|_| ()),
            _ => flaky
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
        };
        if result.as_ref().is_err_and(|e| e.is_server_error()) {
            failed += 1;
        }
        server.close_watches();
    }
    server
        .faults()
        .fail_writes(0.0, WriteFailure::InternalError);
    assert!(failed > 0, "some writes failed");
    assert_converges(&api, &informer, &replay).await;
    informer.stop();
}

/// `Compact<K>` goes through the same list, watch, resume and store as `K`: the compact informer
/// converges to the server under closed watches, and every stored object decodes to what a typed
/// GET returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_informer_converges_and_decodes_to_the_typed_objects() {
    let (server, client) = server().await;
    let typed: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let compact: Api<Compact<ConfigMap>> = Api::namespaced(client.clone(), "default");
    for name in numbered("k-", 30) {
        let cm = common::config_map(&name, "0");
        typed
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let (informer, replay) = start_synced(ListWatch::new(compact.clone()), quick_reflector()).await;

    for i in 0..40 {
        let name = format!("k-{}", i % 35);
        match typed.get(&name).await {
            Ok(mut current) => {
                current.data = Some(BTreeMap::from([("k".into(), i.to_string())]));
                typed
                    .replace(&name, &PostParams::default(), &current)
                    .await
                    .expect("replace");
            }
            Err(_) => {
                typed
                    .create(&PostParams::default(), &common::config_map(&name, "new"))
                    .await
                    .expect("create");
            }
        }
        if i % 10 == 0 {
            server.close_watches();
        }
    }
    typed
        .delete("k-3", &DeleteParams::default())
        .await
        .expect("delete");
    assert_converges(&compact, &informer, &replay).await;

    let lister = informer.lister();
    let listed = lister.list(&LabelSelector::everything());
    assert_eq!(listed.len(), 34);
    for stored in listed {
        let name = stored.meta().name.clone().unwrap_or_default();
        let mut from_server = typed.get(&name).await.expect("get");
        // Informers do not cache managedFields (ReflectorOptions::managed_fields).
        from_server.metadata.managed_fields = None;
        assert_eq!(stored.decode().expect("decodes"), from_server, "{name}");
    }
    informer.stop();
}

/// Informers drop `metadata.managedFields` by default (list and watch), keep them when told, and
/// a cached object written back leaves the server's as they were (the same check runs on
/// kube-apiserver in `informer/tests/informer/e2e.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_fields_not_cached_by_default_and_a_put_keeps_the_servers() {
    let (_server, client) = server().await;
    common::informer::check_managed_fields_not_cached(&client, "default").await;
}

/// Four informers over the four uid shards of one collection (a [`Scope`] with a shard
/// selector, sent as `shardSelector`): each caches exactly the objects its range holds, before
/// and after live writes, and together they hold the collection once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selector_informers_partition_the_collection() {
    use ferrokube_core::Scope;
    use ferrokube_core::shard::ShardSelector;
    use std::collections::BTreeSet;

    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in numbered("pre-", 20) {
        api.create(&PostParams::default(), &common::config_map(&name, "0"))
            .await
            .expect("create");
    }
    let mut informers = Vec::new();
    for i in 0..4 {
        let selector = ShardSelector::member(i, 4).expect("member");
        let scope = Scope::namespace("default").shard(selector.clone());
        let (informer, _) = start_synced(
            ListWatch::<ConfigMap>::scoped(client.clone(), &(), &scope),
            quick_reflector(),
        )
        .await;
        informers.push((selector, informer));
    }
    for name in numbered("live-", 20) {
        api.create(&PostParams::default(), &common::config_map(&name, "0"))
            .await
            .expect("create");
    }
    api.delete("pre-0", &DeleteParams::default())
        .await
        .expect("delete");
    let all: BTreeSet<(String, String)> = api
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|cm| {
            (
                cm.meta().name.clone().unwrap_or_default(),
                cm.meta().uid.clone().unwrap_or_default(),
            )
        })
        .collect();
    for (selector, informer) in &informers {
        let want: BTreeSet<String> = all
            .iter()
            .filter(|(_, uid)| selector.matches_value(uid))
            .map(|(name, _)| name.clone())
            .collect();
        let store = informer.store().clone();
        let cached = move || -> BTreeSet<String> {
            store
                .list()
                .iter()
                .filter_map(|cm| cm.meta().name.clone())
                .collect()
        };
        common::lease_window::wait_until(Duration::from_secs(10), || cached() == want).await;
        assert_eq!(cached(), want, "{selector}");
    }
    let total: usize = informers.iter().map(|(_, i)| i.store().list().len()).sum();
    assert_eq!(total, all.len(), "every object cached once");
}

/// Reads of built-in kinds ask for protobuf by default and the embedded server answers protobuf,
/// as kube-apiserver does: gets, lists, an informer and a watch equal to JSON-only reads, the
/// objects written with protobuf bodies (the same check runs on kube-apiserver in
/// `informer/tests/informer/e2e.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_reads_and_writes_equal_json_ones() {
    let (_server, client) = server().await;
    common::protobuf::check_protobuf_reads_equal_json(&client, "default", true).await;
}
