//! Informer test helpers shared by the embedded-server and real-server informer tests: a handler that
//! replays what it saw, a fresh list of the server, and the convergence check.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube_client::api::ListParams;
use ferrokube_client::{Api, Client, ListWatch};
use ferrokube_core::{Backoff, Object, ObjectKey};
use ferrokube_informer::{
    DeletedObject, EventHandler, ListerWatcher, ReflectorOptions, SharedIndexInformer,
};
use parking_lot::Mutex;

/// What a handler saw, replayed: key → resourceVersion, plus the deletes that were tombstones.
#[derive(Default, Clone)]
pub struct Replay {
    pub state: Arc<Mutex<BTreeMap<String, String>>>,
    pub tombstones: Arc<Mutex<Vec<String>>>,
    pub adds_after_sync: Arc<Mutex<Vec<String>>>,
}

impl<K: Object> EventHandler<K> for Replay {
    fn on_add(&self, object: &Arc<K>, initial: bool) {
        let key = ObjectKey::of(&**object).to_string();
        if !initial {
            self.adds_after_sync.lock().push(key.clone());
        }
        let version = object.resource_version().to_string();
        self.state.lock().insert(key, version);
    }
    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        let version = new.resource_version().to_string();
        self.state
            .lock()
            .insert(ObjectKey::of(&**new).to_string(), version);
    }
    fn on_delete(&self, object: &DeletedObject<K>) {
        if let DeletedObject::FinalStateUnknown { key, .. } = object {
            self.tombstones.lock().push(key.to_string());
        }
        self.state.lock().remove(object.key().as_str());
    }
}

/// An informer over `lister_watcher` with `options` and a [`Replay`] handler, started and synced.
pub async fn start_synced<K: Object, L: ListerWatcher<K>>(
    lister_watcher: L,
    options: ReflectorOptions,
) -> (SharedIndexInformer<K>, Replay) {
    let informer = SharedIndexInformer::builder(lister_watcher)
        .reflector(options)
        .build();
    let replay = Replay::default();
    informer.add_event_handler(replay.clone()).expect("handler");
    informer.start().expect("start");
    assert!(informer.wait_for_cache_sync().await, "synced");
    (informer, replay)
}

/// The server's objects, freshly listed (a consistent read), by key; without
/// `metadata.managedFields`, which informers do not cache by default.
pub async fn fresh_list<K: Object>(api: &Api<K>) -> BTreeMap<String, K> {
    let params = ListParams::default().managed_fields(ferrokube_core::ManagedFields::Drop);
    api.list(&params)
        .await
        .expect("fresh list")
        .items
        .into_iter()
        .map(|o| (ObjectKey::of(&o).to_string(), o))
        .collect()
}

/// Waits until the informer's store holds exactly the fresh list (each object equal, so the same
/// resourceVersion), and the handler's replay agrees. Panics with the difference after 60 s.
pub async fn assert_converges<K: Object + PartialEq + std::fmt::Debug>(
    api: &Api<K>,
    informer: &SharedIndexInformer<K>,
    replay: &Replay,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let server = fresh_list(api).await;
        let store = informer.store();
        let store_equal = store.len() == server.len()
            && server.iter().all(|(key, object)| {
                // An informer that keeps managedFields holds them; the fresh list has none.
                store.get_by_key(key).is_some_and(|stored| {
                    let mut stored = (*stored).clone();
                    stored.clear_managed_fields();
                    stored == *object
                })
            });
        let replayed: BTreeMap<String, String> = server
            .iter()
            .map(|(key, object)| (key.clone(), object.resource_version().to_string()))
            .collect();
        if store_equal && *replay.state.lock() == replayed {
            return;
        }
        if Instant::now() > deadline {
            let stored: BTreeMap<String, String> = store
                .list()
                .iter()
                .map(|o| {
                    (
                        ObjectKey::of(&**o).to_string(),
                        o.resource_version().to_string(),
                    )
                })
                .collect();
            panic!(
                "store never matched the server\nserver: {replayed:?}\nstore:  {stored:?}\nhandler: {:?}",
                replay.state.lock()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn quick_reflector() -> ReflectorOptions {
    ReflectorOptions {
        // The server ends every watch after 1–2 s: the reflector resumes over and over.
        min_watch_timeout: Duration::from_secs(1),
        backoff: Backoff::new(
            Duration::from_millis(100),
            Duration::from_secs(2),
            Duration::from_secs(120),
        ),
        page_size: 50,
        ..ReflectorOptions::default()
    }
}

/// Informers cache objects without `metadata.managedFields` by default (and with them when told
/// to keep them), on the list and on the watch; and a cached object written back with a PUT
/// leaves the server's managedFields as they were (an update that carries none keeps them).
/// Run on the embedded server (`informer/tests/informer/embedded.rs`) and on kube-apiserver
/// (`informer/tests/informer/e2e.rs`): the server's half is the server's behaviour, so both must agree.
pub async fn check_managed_fields_not_cached(client: &Client, namespace: &str) {
    use ferrokube_client::api::{Patch, PatchParams, PostParams};
    use ferrokube_core::ManagedFields;
    use k8s_openapi::api::core::v1::ConfigMap;

    const MANAGER: &str = "managed-fields-check";
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let apply = |value: &str| {
        Patch::Apply(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied", "labels": {"owner": MANAGER}},
            "data": {"k": value}
        }))
    };
    let managers = |cm: &ConfigMap| -> Vec<String> {
        let mut names: Vec<String> = cm
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|entry| entry.manager.clone())
            .collect();
        names.sort();
        names
    };
    let applied = api
        .patch("applied", &PatchParams::apply(MANAGER), &apply("1"))
        .await
        .expect("server-side apply");
    assert_eq!(
        managers(&applied),
        [MANAGER],
        "the server keeps books on the apply"
    );

    let keep = ReflectorOptions {
        managed_fields: ManagedFields::Keep,
        ..ReflectorOptions::default()
    };
    let (dropped, _) = start_synced(ListWatch::new(api.clone()), ReflectorOptions::default()).await;
    let (kept, _) = start_synced(ListWatch::new(api.clone()), keep).await;
    let key = format!("{namespace}/applied");
    let cached = |informer: &SharedIndexInformer<ConfigMap>| {
        informer.store().get_by_key(&key).expect("listed")
    };
    assert_eq!(
        cached(&dropped).metadata.managed_fields,
        None,
        "listed: dropped by default"
    );
    assert_eq!(
        managers(&cached(&kept)),
        [MANAGER],
        "listed: kept when asked"
    );

    // The watch path: a second apply arrives as a MODIFIED event.
    api.patch("applied", &PatchParams::apply(MANAGER), &apply("2"))
        .await
        .expect("second apply");
    let data = |cm: &ConfigMap| cm.data.as_ref().and_then(|d| d.get("k").cloned());
    let deadline = Instant::now() + Duration::from_secs(60);
    while data(&cached(&dropped)).as_deref() != Some("2")
        || data(&cached(&kept)).as_deref() != Some("2")
    {
        assert!(
            Instant::now() < deadline,
            "the update reaches both informers in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        cached(&dropped).metadata.managed_fields,
        None,
        "watched: dropped by default"
    );
    assert_eq!(
        managers(&cached(&kept)),
        [MANAGER],
        "watched: kept when asked"
    );

    // Written back from the cache, without managedFields: the server's stay, plus this update's.
    let mut edited = (*cached(&dropped)).clone();
    edited
        .metadata
        .labels
        .get_or_insert_default()
        .insert("edited".into(), "yes".into());
    let params = PostParams {
        field_manager: Some("cache-writer".into()),
        ..PostParams::default()
    };
    let written = api.replace("applied", &params, &edited).await.expect("PUT");
    assert_eq!(
        managers(&written),
        ["cache-writer", MANAGER],
        "the apply's entry survives a PUT without managedFields"
    );
    let read = api.get("applied").await.expect("get");
    assert_eq!(managers(&read), ["cache-writer", MANAGER]);
    dropped.stop();
    kept.stop();
}
