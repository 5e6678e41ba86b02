//! Informer test helpers shared by the embedded-server and real-server informer tests: a handler that
//! replays what it saw, a fresh list of the server, and the convergence check.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube::api::ListParams;
use ferrokube::core::{Backoff, ObjectKey};
use ferrokube::informer::{
    DeletedObject, EventHandler, ListerWatcher, ReflectorOptions, SharedIndexInformer,
};
use ferrokube::{Api, Object};
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

/// The server's objects, freshly listed (a consistent read), by key.
pub async fn fresh_list<K: Object>(api: &Api<K>) -> BTreeMap<String, K> {
    api.list(&ListParams::default())
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
            && server
                .iter()
                .all(|(key, object)| store.get_by_key(key).is_some_and(|o| *o == *object));
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
