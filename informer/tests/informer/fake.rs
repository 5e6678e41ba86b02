//! Informer behaviour over the in-memory FakeListerWatcher: no HTTP, every fault on demand.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferrokube_core::{Backoff, LabelSelector, ObjectKey};
use ferrokube_informer::fake::FakeListerWatcher;
use ferrokube_informer::{
    DeletedObject, EventHandler, EventStream, HandlerFns, HandlerOptions, ListMode, ListPage,
    ListRequest, ListVersion, ListWatchError, ListerWatcher, Prepare, ReflectorOptions,
    SharedIndexInformer, WatchRequest,
};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

fn cm(name: &str, value: &str) -> ConfigMap {
    let mut object = ConfigMap::default();
    object.metadata.namespace = Some("default".into());
    object.metadata.name = Some(name.into());
    object.data = Some(BTreeMap::from([("v".into(), value.into())]));
    object
}

fn rv(object: &ConfigMap) -> u64 {
    object
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What a handler saw, in order.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Add {
        key: String,
        rv: u64,
        initial: bool,
    },
    Update {
        key: String,
        old: u64,
        new: u64,
        same: bool,
    },
    Delete {
        key: String,
        rv: u64,
        tombstone: bool,
    },
}

#[derive(Default, Clone)]
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recorder {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }
    fn count(&self, f: impl Fn(&Seen) -> bool) -> usize {
        self.seen.lock().iter().filter(|s| f(s)).count()
    }
}

impl EventHandler<ConfigMap> for Recorder {
    fn on_add(&self, object: &Arc<ConfigMap>, initial: bool) {
        self.seen.lock().push(Seen::Add {
            key: ObjectKey::of(&**object).to_string(),
            rv: rv(object),
            initial,
        });
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.seen.lock().push(Seen::Update {
            key: ObjectKey::of(&**new).to_string(),
            old: rv(old),
            new: rv(new),
            same: Arc::ptr_eq(old, new),
        });
    }
    fn on_delete(&self, object: &DeletedObject<ConfigMap>) {
        self.seen.lock().push(Seen::Delete {
            key: object.key().to_string(),
            rv: rv(object.object()),
            tombstone: matches!(object, DeletedObject::FinalStateUnknown { .. }),
        });
    }
}

async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn quick_backoff() -> ReflectorOptions {
    ReflectorOptions {
        backoff: Backoff::new(
            Duration::from_millis(300),
            Duration::from_secs(1),
            Duration::from_secs(120),
        ),
        ..ReflectorOptions::default()
    }
}

fn informer(fake: &FakeListerWatcher<ConfigMap>) -> SharedIndexInformer<ConfigMap> {
    SharedIndexInformer::builder(fake.clone())
        .reflector(quick_backoff())
        .build()
}

/// The store holds exactly the server's objects, resourceVersions included.
fn store_matches(
    informer: &SharedIndexInformer<ConfigMap>,
    fake: &FakeListerWatcher<ConfigMap>,
) -> bool {
    let server = fake.objects();
    let store = informer.store();
    store.len() == server.len()
        && server
            .iter()
            .all(|(key, object)| store.get_by_key(key).is_some_and(|o| *o == *object))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_reach_handlers_in_order_per_key() {
    let fake = FakeListerWatcher::new();
    for i in 0..5 {
        fake.create(cm(&format!("cm-{i}"), "0"));
    }
    let informer = informer(&fake);
    let recorder = Recorder::default();
    informer.add_event_handler(recorder.clone()).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    for round in 1..=20 {
        for i in 0..5 {
            fake.update(cm(&format!("cm-{i}"), &round.to_string()));
        }
    }
    fake.delete("default/cm-0");
    eventually("store matches", || store_matches(&informer, &fake)).await;
    eventually("all delivered", || recorder.seen().len() == 5 + 100 + 1).await;

    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for seen in recorder.seen() {
        let (key, version) = match &seen {
            Seen::Add { key, rv, initial } => {
                assert!(initial, "the listed objects are the initial list");
                (key.clone(), *rv)
            }
            Seen::Update { key, old, new, .. } => {
                assert_eq!(last.get(key), Some(old), "old is what the handler saw last");
                (key.clone(), *new)
            }
            Seen::Delete { key, rv, tombstone } => {
                assert!(!tombstone);
                (key.clone(), *rv)
            }
        };
        let previous = last.insert(key.clone(), version).unwrap_or(0);
        assert!(version > previous, "{key}: {version} after {previous}");
    }
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_resumes_from_the_last_version_without_relisting() {
    let fake = FakeListerWatcher::new();
    fake.create(cm("a", "1"));
    let informer = informer(&fake);
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    fake.create(cm("b", "1"));
    eventually("b seen", || informer.store().len() == 2).await;
    let seen_version = informer.last_sync_resource_version();

    fake.close_watches();
    fake.create(cm("c", "1"));
    eventually("store matches", || store_matches(&informer, &fake)).await;

    assert_eq!(fake.list_requests().len(), 1, "no relist");
    let watches = fake.watch_requests();
    assert!(watches.len() >= 2, "the watch was reopened");
    assert_eq!(watches[1].resource_version, seen_version);
    assert!(watches.iter().all(|w| w.allow_bookmarks));
    assert!(
        watches
            .iter()
            .all(|w| (300..600).contains(&w.timeout_seconds.unwrap_or(0))),
        "timeouts are randomized in [5 min, 10 min): {watches:?}"
    );
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_relists_and_turns_the_gap_into_tombstones_and_adds() {
    let fake = FakeListerWatcher::new();
    for name in ["a", "b", "c"] {
        fake.create(cm(name, "1"));
    }
    let informer = informer(&fake);
    let recorder = Recorder::default();
    informer.add_event_handler(recorder.clone()).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    let b_before = rv(&fake.objects()[&ObjectKey::from("default/b")]);

    // The watch breaks and the next attempt fails, so the reflector waits 300 ms or more; in that
    // gap b is deleted, d created, c changed, and the history compacted.
    fake.fail_next_watch(ListWatchError::Unavailable("connection refused".into()));
    fake.close_watches();
    fake.delete("default/b");
    fake.create(cm("d", "1"));
    fake.update(cm("c", "2"));
    fake.compact();

    eventually("store matches", || store_matches(&informer, &fake)).await;
    eventually("handler caught up", || {
        recorder.count(|s| matches!(s, Seen::Delete { .. })) == 1
    })
    .await;
    let seen = recorder.seen();
    assert!(seen.contains(&Seen::Delete {
        key: "default/b".into(),
        rv: b_before,
        tombstone: true
    }));
    assert!(
        seen.iter()
            .any(|s| matches!(s, Seen::Add { key, initial: false, .. } if key == "default/d"))
    );
    assert!(
        seen.iter()
            .any(|s| matches!(s, Seen::Update { key, .. } if key == "default/c"))
    );
    let lists = fake.list_requests();
    assert_eq!(lists.len(), 2);
    assert_eq!(
        lists[0].version,
        ListVersion::Latest,
        "the first list is consistent (FirstList::Consistent)"
    );
    assert_eq!(
        lists[1].version,
        ListVersion::Latest,
        "relist after 410 is consistent"
    );
    assert_eq!(informer.reflector_status().lists(), 2);
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_move_the_resume_version_forward() {
    let fake = FakeListerWatcher::new();
    fake.create(cm("a", "1"));
    let informer = informer(&fake);
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    eventually("watching", || fake.open_watches() == 1).await;
    for _ in 0..3 {
        fake.advance_version();
    }
    fake.send_bookmarks();
    let target = fake.resource_version();
    eventually("bookmark applied", || {
        informer.last_sync_resource_version() == target
    })
    .await;
    eventually("the store caught up with the bookmark too", || {
        informer.last_store_sync_resource_version() == target
    })
    .await;
    fake.close_watches();
    eventually("reopened", || fake.watch_requests().len() == 2).await;
    assert_eq!(fake.watch_requests()[1].resource_version, target);
    assert_eq!(informer.store().len(), 1, "a bookmark changes no object");
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_handler_gets_the_cache_first_then_changes() {
    let fake = FakeListerWatcher::new();
    for name in ["a", "b", "c"] {
        fake.create(cm(name, "1"));
    }
    let informer = informer(&fake);
    let early = informer.add_event_handler(Recorder::default()).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    eventually("early handler synced", || early.has_synced()).await;

    let late = Recorder::default();
    let registration = informer.add_event_handler(late.clone()).unwrap();
    eventually("late handler synced", || registration.has_synced()).await;
    fake.create(cm("d", "1"));
    eventually("late handler got d", || late.seen().len() == 4).await;
    let seen = late.seen();
    assert!(
        seen[..3]
            .iter()
            .all(|s| matches!(s, Seen::Add { initial: true, .. }))
    );
    assert!(matches!(&seen[3], Seen::Add { key, initial: false, .. } if key == "default/d"));

    informer.remove_event_handler(&registration);
    fake.create(cm("e", "1"));
    eventually("store has e", || informer.store().len() == 5).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(late.seen().len(), 4, "a removed handler hears nothing more");
    informer.stop();
}

/// (rv the handler was told about, rv the store held for that key at that moment, thread name)
type Observed = (u64, u64, Option<String>);

/// An inline handler is called by the processor itself, before the next change is applied: it
/// sees the store already holding the object it is told about and nothing newer, runs on no
/// thread of its own, gets the same notifications as a threaded one, survives its own panic, and
/// reports synced like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_handler_runs_on_the_processor_before_the_next_change() {
    let fake = FakeListerWatcher::new();
    fake.create(cm("a", "1"));
    let informer = informer(&fake);
    let store = informer.store().clone();
    let inline = Recorder::default();
    // (rv the handler was told about, rv the store held for that key at that moment, thread name)
    let observed: Arc<Mutex<Vec<Observed>>> = Arc::default();
    let (record, log) = (inline.clone(), observed.clone());
    let registration = informer
        .add_event_handler_with(
            HandlerFns::new()
                .on_add({
                    let (record, log, store) = (record.clone(), log.clone(), store.clone());
                    move |object: &Arc<ConfigMap>, initial| {
                        if object.metadata.name.as_deref() == Some("boom") {
                            panic!("a handler bug");
                        }
                        record.on_add(object, initial);
                        let cached = store
                            .get_by_key(&ObjectKey::of(&**object))
                            .map_or(0, |o| rv(&o));
                        let thread = std::thread::current().name().map(str::to_string);
                        log.lock().push((rv(object), cached, thread));
                    }
                })
                .on_update(move |old: &Arc<ConfigMap>, new: &Arc<ConfigMap>| {
                    record.on_update(old, new);
                    let cached = store
                        .get_by_key(&ObjectKey::of(&**new))
                        .map_or(0, |o| rv(&o));
                    let thread = std::thread::current().name().map(str::to_string);
                    log.lock().push((rv(new), cached, thread));
                }),
            HandlerOptions::default().name("inline").inline(),
        )
        .unwrap();
    let threaded = Recorder::default();
    informer.add_event_handler(threaded.clone()).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    eventually("inline handler synced", || registration.has_synced()).await;
    assert_eq!(
        registration.queue_depth(),
        0,
        "an inline handler has no buffer"
    );

    fake.create(cm("boom", "1"));
    for value in 2..=30 {
        fake.update(cm("a", &value.to_string()));
    }
    eventually("threaded handler has every change", || {
        threaded.seen().len() == 31
    })
    .await;
    eventually("inline handler has every change", || {
        inline.seen().len() == 30
    })
    .await;
    let without_boom: Vec<Seen> = threaded
        .seen()
        .into_iter()
        .filter(|s| !matches!(s, Seen::Add { key, .. } if key == "default/boom"))
        .collect();
    assert_eq!(
        inline.seen(),
        without_boom,
        "same notifications, same order"
    );
    for (told, cached, thread) in observed.lock().iter() {
        assert_eq!(
            told, cached,
            "the store held exactly the object the handler was told about"
        );
        assert!(
            !thread.as_deref().unwrap_or("").starts_with("informer-"),
            "called on a handler thread: {thread:?}"
        );
    }
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_stalls_neither_the_store_nor_other_handlers() {
    let fake = FakeListerWatcher::new();
    let informer = informer(&fake);
    let slow_done = Arc::new(AtomicUsize::new(0));
    let counter = slow_done.clone();
    let slow = informer
        .add_event_handler_with(
            HandlerFns::new().on_add(move |_, _| {
                std::thread::sleep(Duration::from_millis(100));
                counter.fetch_add(1, Ordering::SeqCst);
            }),
            HandlerOptions::default().name("slow"),
        )
        .unwrap();
    let fast = Recorder::default();
    informer.add_event_handler(fast.clone()).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    for i in 0..20 {
        fake.create(cm(&format!("cm-{i}"), "1"));
    }
    eventually("fast handler has all", || fast.seen().len() == 20).await;
    assert!(store_matches(&informer, &fake));
    let slow_now = slow_done.load(Ordering::SeqCst);
    assert!(
        slow_now <= 5,
        "the slow handler is behind ({slow_now} done)"
    );
    assert!(slow.queue_depth() >= 10, "its own buffer holds the backlog");
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_redelivers_cached_objects_to_due_handlers_without_relisting() {
    let fake = FakeListerWatcher::new();
    fake.create(cm("a", "1"));
    fake.create(cm("b", "1"));
    let informer = informer(&fake);
    let resyncing = Recorder::default();
    let quiet = Recorder::default();
    informer
        .add_event_handler_with(
            resyncing.clone(),
            HandlerOptions::default().resync(Duration::from_secs(1)),
        )
        .unwrap();
    informer.add_event_handler(quiet.clone()).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    eventually("two resync rounds", || {
        resyncing.count(|s| matches!(s, Seen::Update { same: true, .. })) >= 4
    })
    .await;
    for seen in resyncing.seen() {
        if let Seen::Update { old, new, same, .. } = seen {
            assert!(same && old == new, "a resync update has old == new");
        }
    }
    assert_eq!(
        quiet.count(|s| matches!(s, Seen::Update { .. })),
        0,
        "only due handlers resync"
    );
    assert_eq!(fake.list_requests().len(), 1, "resync does not relist");
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transform_runs_once_per_object_received() {
    let fake = FakeListerWatcher::new();
    for name in ["a", "b", "c"] {
        let mut object = cm(name, "1");
        object.metadata.annotations = Some(BTreeMap::from([(
            "kubectl.kubernetes.io/last-applied-configuration".into(),
            "{…}".into(),
        )]));
        fake.create(object);
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let informer = SharedIndexInformer::builder(fake.clone())
        .transform(move |mut object: ConfigMap| {
            counted.fetch_add(1, Ordering::SeqCst);
            object.metadata.annotations = None;
            object.metadata.managed_fields = None;
            object
        })
        .build();
    informer
        .add_event_handler_with(
            Recorder::default(),
            HandlerOptions::default().resync(Duration::from_secs(1)),
        )
        .unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    fake.create(cm("d", "1"));
    fake.update(cm("d", "2"));
    eventually("d updated", || {
        informer
            .store()
            .get_by_key("default/d")
            .is_some_and(|o| rv(&o) == 6)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // at least one resync round
    assert_eq!(
        calls.load(Ordering::SeqCst),
        5,
        "3 listed + 2 watched; resyncs reuse stored objects"
    );
    assert!(
        informer
            .store()
            .list()
            .iter()
            .all(|o| o.metadata.annotations.is_none())
    );
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_are_used_when_served_and_fall_back_when_refused() {
    for served in [true, false] {
        let fake = FakeListerWatcher::new();
        fake.set_streaming(served);
        fake.create(cm("a", "1"));
        fake.create(cm("b", "1"));
        let informer = SharedIndexInformer::builder(fake.clone())
            .reflector(ReflectorOptions {
                list_mode: ListMode::Streaming,
                ..quick_backoff()
            })
            .build();
        let recorder = Recorder::default();
        informer.add_event_handler(recorder.clone()).unwrap();
        informer.start().unwrap();
        assert!(informer.wait_for_cache_sync().await);
        assert!(store_matches(&informer, &fake));
        fake.create(cm("c", "1"));
        eventually("c arrives", || store_matches(&informer, &fake)).await;
        if served {
            assert!(fake.list_requests().is_empty(), "no list call at all");
            assert!(fake.watch_requests()[0].send_initial_events);
            assert_eq!(
                fake.watch_requests().len(),
                1,
                "the streaming watch goes on"
            );
        } else {
            assert!(informer.reflector_status().streaming_unsupported());
            assert_eq!(fake.list_requests().len(), 1, "fell back to list + watch");
        }
        eventually("3 adds", || recorder.seen().len() == 3).await;
        informer.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_equals_the_server_after_a_random_fault_sequence() {
    let fake = FakeListerWatcher::new();
    // Failures queue up faster than a 300 ms backoff drains them: back off briefly here.
    let informer = SharedIndexInformer::builder(fake.clone())
        .reflector(ReflectorOptions {
            backoff: Backoff::new(
                Duration::from_millis(5),
                Duration::from_millis(50),
                Duration::from_secs(120),
            ),
            ..ReflectorOptions::default()
        })
        .build();
    let recorder = Recorder::default();
    informer.add_event_handler(recorder.clone()).unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    // A small deterministic generator: the same sequence every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    for step in 0..400 {
        let name = format!("cm-{}", next(30));
        match next(20) {
            0 => fake.close_watches(),
            1 => fake.compact(),
            2 => fake.send_bookmarks(),
            3 => fake.fail_next_watch(ListWatchError::Unavailable("reset".into())),
            4 => fake.fail_watches(|| ListWatchError::Gone("too old resource version".into())),
            5..=8 => {
                fake.delete(&format!("default/{name}"));
            }
            9..=13 => {
                fake.update(cm(&name, &step.to_string()));
            }
            _ => {
                fake.create(cm(&name, &step.to_string()));
            }
        }
        if next(10) == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let settled = Instant::now() + Duration::from_secs(10);
    while !store_matches(&informer, &fake) && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if !store_matches(&informer, &fake) {
        let server = fake.objects();
        let store = informer.store();
        for (key, object) in &server {
            match store.get_by_key(key) {
                None => eprintln!("missing {key} rv {}", rv(object)),
                Some(o) if *o != *object => eprintln!("stale {key} {} vs {}", rv(&o), rv(object)),
                _ => {}
            }
        }
        for key in store.list_keys() {
            if !server.contains_key(&key) {
                eprintln!("extra {key}");
            }
        }
        let status = informer.reflector_status();
        eprintln!(
            "server rv {} store rv {} lists {} watches {} open {}",
            fake.resource_version(),
            informer.last_sync_resource_version(),
            status.lists(),
            status.watches(),
            fake.open_watches()
        );
        eprintln!(
            "last watch requests {:?}",
            fake.watch_requests()
                .iter()
                .rev()
                .take(3)
                .collect::<Vec<_>>()
        );
        panic!("store differs from the server");
    }
    // What the handler saw, replayed, is the server's state too.
    eventually("handler caught up", || {
        let mut replay: BTreeMap<String, u64> = BTreeMap::new();
        for seen in recorder.seen() {
            match seen {
                Seen::Add { key, rv, .. } => replay.insert(key, rv),
                Seen::Update { key, new, .. } => replay.insert(key, new),
                Seen::Delete { key, .. } => replay.remove(&key),
            };
        }
        let server: BTreeMap<String, u64> = fake
            .objects()
            .iter()
            .map(|(k, o)| (k.to_string(), rv(o)))
            .collect();
        replay == server
    })
    .await;
    assert!(
        informer.reflector_status().lists() >= 2,
        "the sequence forced relists"
    );
    informer.stop();
}

/// A ListerWatcher whose continue tokens are always expired: the reflector must fall back to one
/// unpaginated consistent list.
struct ExpiringPages {
    inner: FakeListerWatcher<ConfigMap>,
}

impl ListerWatcher<ConfigMap> for ExpiringPages {
    async fn list(&self, request: ListRequest) -> Result<ListPage<ConfigMap>, ListWatchError> {
        if request.continue_token.is_some() {
            return Err(ListWatchError::Gone(
                "the provided continue parameter is too old".into(),
            ));
        }
        self.inner.list(request).await
    }
    async fn watch(&self, request: WatchRequest) -> Result<EventStream<ConfigMap>, ListWatchError> {
        self.inner.watch(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_paginated_and_an_expired_page_falls_back_to_a_full_list() {
    let fake = FakeListerWatcher::new();
    for i in 0..3400 {
        fake.create(cm(&format!("cm-{i:04}"), "1"));
    }
    let paged = informer(&fake);
    paged.start().unwrap();
    assert!(paged.wait_for_cache_sync().await);
    assert!(store_matches(&paged, &fake));
    let lists = fake.list_requests();
    // Each page asks for twice the one before: 500 + 1,000 + 2,000 (1,900 of them there).
    let limits: Vec<_> = lists.iter().map(|l| l.limit).collect();
    assert_eq!(limits, [Some(500), Some(1_000), Some(2_000)]);
    assert!(
        lists[1..]
            .iter()
            .all(|l| l.continue_token.is_some() && l.version == ListVersion::Latest)
    );
    paged.stop();

    let expiring_fake = FakeListerWatcher::new();
    for i in 0..700 {
        expiring_fake.create(cm(&format!("cm-{i:04}"), "1"));
    }
    let expiring = SharedIndexInformer::builder(ExpiringPages {
        inner: expiring_fake.clone(),
    })
    .build();
    expiring.start().unwrap();
    assert!(expiring.wait_for_cache_sync().await);
    assert!(store_matches(&expiring, &expiring_fake));
    let lists = expiring_fake.list_requests();
    assert_eq!(lists.len(), 2, "first page, then one whole list");
    assert_eq!(lists[1].limit, None);
    assert_eq!(lists[1].version, ListVersion::Latest);
    expiring.stop();
}

/// A ListerWatcher that tells each page's continue token at once, then holds the page back until
/// the reflector has asked for the next one: a reflector that waited for a page before asking for
/// the next would never finish its list.
struct EarlyPages {
    inner: FakeListerWatcher<ConfigMap>,
    /// Pages asked for so far.
    asked: tokio::sync::watch::Sender<usize>,
}

impl ListerWatcher<ConfigMap> for EarlyPages {
    async fn list(&self, request: ListRequest) -> Result<ListPage<ConfigMap>, ListWatchError> {
        self.inner.list(request).await
    }
    async fn list_prepared_early(
        &self,
        request: ListRequest,
        prepare: &Prepare<ConfigMap>,
        continue_token: tokio::sync::oneshot::Sender<Option<String>>,
    ) -> Result<ListPage<Arc<ConfigMap>>, ListWatchError> {
        let mut this_page = 0;
        self.asked.send_modify(|asked| {
            *asked += 1;
            this_page = *asked;
        });
        let page = self.inner.list_prepared(request, prepare).await?;
        let more = page.continue_token.as_ref().is_some_and(|t| !t.is_empty());
        let _ = continue_token.send(page.continue_token.clone());
        if more {
            let mut asked = self.asked.subscribe();
            let _ = asked.wait_for(|asked| *asked > this_page).await;
        }
        Ok(page)
    }
    async fn watch(&self, request: WatchRequest) -> Result<EventStream<ConfigMap>, ListWatchError> {
        self.inner.watch(request).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_page_is_asked_for_as_soon_as_its_token_is_known() {
    let fake = FakeListerWatcher::new();
    for i in 0..3400 {
        fake.create(cm(&format!("cm-{i:04}"), "1"));
    }
    let (asked, _) = tokio::sync::watch::channel(0);
    let informer = SharedIndexInformer::builder(EarlyPages {
        inner: fake.clone(),
        asked,
    })
    .build();
    informer.start().unwrap();
    let synced =
        tokio::time::timeout(Duration::from_secs(20), informer.wait_for_cache_sync()).await;
    assert_eq!(synced, Ok(true), "the pages did not overlap");
    assert!(store_matches(&informer, &fake));
    assert_eq!(
        fake.list_requests().len(),
        3,
        "500 + 1,000 + 1,900, in order"
    );
    informer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_handler_hears_every_failure_and_listers_read_the_cache() {
    let fake = FakeListerWatcher::new();
    let mut labelled = cm("web", "1");
    labelled.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
    fake.create(labelled);
    fake.create(cm("other", "1"));
    fake.fail_next_list(ListWatchError::Unavailable("connection refused".into()));
    let errors = Arc::new(AtomicUsize::new(0));
    let counted = errors.clone();
    let informer = SharedIndexInformer::builder(fake.clone())
        .reflector(ReflectorOptions {
            error_handler: Some(Arc::new(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            })),
            ..quick_backoff()
        })
        .build();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    assert_eq!(errors.load(Ordering::SeqCst), 1);

    let lister = informer.lister();
    let selector = LabelSelector::parse("app=web").unwrap();
    assert_eq!(lister.list(&selector).len(), 1);
    assert_eq!(
        lister
            .namespace("default")
            .list(&LabelSelector::everything())
            .len(),
        2
    );
    assert!(lister.namespace("elsewhere").get("web").is_none());
    assert!(lister.get(Some("default"), "web").is_some());
    informer.stop();
    assert!(
        informer.start().is_err(),
        "a stopped informer cannot restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_first_list_counts_as_synced() {
    let fake = FakeListerWatcher::<ConfigMap>::new();
    let informer = informer(&fake);
    let handler = informer.add_event_handler(Recorder::default()).unwrap();
    informer.start().unwrap();
    let synced =
        tokio::time::timeout(Duration::from_secs(10), informer.wait_for_cache_sync()).await;
    assert_eq!(synced, Ok(true), "an empty collection syncs at once");
    eventually("the handler synced too", || handler.has_synced()).await;
    informer.stop();
}

/// The label every object of the atomic-relist test carries: which batch of writes it belongs to.
const MARKER: &str = "generation-marker";

fn marked(name: &str, generation: u32) -> ConfigMap {
    let mut object = cm(name, "x");
    object.metadata.labels = Some(BTreeMap::from([(MARKER.into(), generation.to_string())]));
    object
}

fn marker_of(object: &ConfigMap) -> String {
    object
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(MARKER))
        .cloned()
        .unwrap_or_default()
}

/// A relist reaches the store, and then the handlers, as one batch: while it is applied, no reader
/// sees part of the old list and part of the new one, and a handler told about one object of it
/// already finds every other object of it in the store.
///
/// Each round rewrites every object with a new generation marker while the informer is not
/// watching (the writes arrive only through the relist that follows a compaction). A reader thread
/// lists the cache in a loop and records every list that holds two markers; an inline handler
/// looks at a few probe objects on each notification of the relist. Applied piecewise (one key per
/// pop, as before relists were atomic), both see the mix at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relists_are_atomic_so_no_reader_sees_a_stale_and_fresh_mix() {
    const OBJECTS: usize = 2000;
    const ROUNDS: u32 = 3;
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("obj-{i:05}")).collect();
    let fake = FakeListerWatcher::new();
    for name in &names {
        fake.create(marked(name, 0));
    }
    // A fixed wait after a failed watch: the writes of a round land inside it.
    let informer = SharedIndexInformer::builder(fake.clone())
        .reflector(ReflectorOptions {
            backoff: Backoff::new(
                Duration::from_millis(200),
                Duration::from_millis(200),
                Duration::from_secs(120),
            ),
            ..ReflectorOptions::default()
        })
        .build();
    let lister = informer.lister();

    // An inline handler: on each update, the probes must already carry the new object's marker.
    let probes: Vec<ObjectKey> = [0, OBJECTS / 3, OBJECTS / 2, OBJECTS - 1]
        .iter()
        .map(|&i| ObjectKey::new(Some("default"), &names[i]))
        .collect();
    let mixed_in_handler = Arc::new(AtomicUsize::new(0));
    let store = informer.store().clone();
    let mixed = mixed_in_handler.clone();
    informer
        .add_event_handler_with(
            HandlerFns::new().on_update(move |_old: &Arc<ConfigMap>, new: &Arc<ConfigMap>| {
                let wanted = marker_of(new);
                let behind = probes.iter().any(|probe| {
                    store
                        .get_by_key(probe)
                        .is_some_and(|cached| marker_of(&cached) != wanted)
                });
                if behind {
                    mixed.fetch_add(1, Ordering::Relaxed);
                }
            }),
            HandlerOptions::default().name("probe").inline(),
        )
        .unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);

    // The reader: lists the whole cache in a loop, counting lists with more than one marker.
    // The generations it has seen are shared, so each round can wait until the reader has read
    // the last one (on a loaded machine the thread may not run at all between two rounds).
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = Arc::new(parking_lot::Mutex::new(std::collections::BTreeSet::new()));
    let reader = {
        let (lister, stop, seen) = (lister.clone(), stop.clone(), seen.clone());
        std::thread::spawn(move || {
            let (mut reads, mut mixed_reads) = (0u64, 0u64);
            let everything = LabelSelector::everything();
            while !stop.load(Ordering::Relaxed) {
                let markers: std::collections::BTreeSet<String> = lister
                    .list(&everything)
                    .iter()
                    .map(|o| marker_of(o))
                    .collect();
                reads += 1;
                if markers.len() > 1 {
                    mixed_reads += 1;
                }
                seen.lock().extend(markers);
            }
            (reads, mixed_reads)
        })
    };
    eventually("the reader read generation 0", || seen.lock().contains("0")).await;

    for round in 1..=ROUNDS {
        let lists = informer.reflector_status().lists();
        fake.fail_next_watch(ListWatchError::Unavailable("connection refused".into()));
        fake.close_watches();
        for name in &names {
            fake.update(marked(name, round));
        }
        fake.compact();
        eventually("relisted", || informer.reflector_status().lists() > lists).await;
        eventually("the new generation is cached", || {
            lister
                .list(&LabelSelector::everything())
                .iter()
                .all(|o| marker_of(o) == round.to_string())
        })
        .await;
        eventually("the reader read the new generation", || {
            seen.lock().contains(&round.to_string())
        })
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    let (reads, mixed_reads) = reader.join().unwrap();
    let seen = seen.lock().clone();
    informer.stop();

    println!(
        "atomic relists: {reads} reads of {OBJECTS} objects over {ROUNDS} relists; \
         {mixed_reads} mixed; generations seen {seen:?}"
    );
    assert_eq!(
        seen.len() as u32,
        ROUNDS + 1,
        "the reader read through every relist"
    );
    assert_eq!(mixed_reads, 0, "a lister saw a half-applied relist");
    assert_eq!(
        mixed_in_handler.load(Ordering::Relaxed),
        0,
        "a handler was told of a relist the store had only partly applied"
    );
}

/// The store's resourceVersion is a promise: every change up to it is in the store. A reader thread
/// checks it against the server's objects (only ever created here, so each must stay cached once
/// the store's version reaches the version that created it) while objects are created as fast as
/// possible; a slow inline handler keeps changes waiting in the fifo, where the reflector has
/// received them but the store has not applied them. It also shows up in the
/// `store_resource_version` gauge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_version_never_claims_a_change_a_stale_store_has_not_applied() {
    const OBJECTS: usize = 300;
    let fake = FakeListerWatcher::new();
    fake.create(cm("first", "1"));
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ferrokube_informer::PrometheusInformerMetrics::register(&mut registry);
    let informer = SharedIndexInformer::builder(fake.clone())
        .name("configmaps")
        .metrics(metrics.for_informer("configmaps"))
        .build();
    informer
        .add_event_handler_with(
            HandlerFns::new()
                .on_add(|_: &Arc<ConfigMap>, _| std::thread::sleep(Duration::from_micros(300))),
            HandlerOptions::default().inline(),
        )
        .unwrap();
    informer.start().unwrap();
    assert!(informer.wait_for_cache_sync().await);
    assert_eq!(
        informer.last_store_sync_resource_version(),
        fake.resource_version(),
        "the first list's version, once it is applied"
    );

    // (resourceVersion that created it, key), appended after each create.
    let created: Arc<Mutex<Vec<(u64, ObjectKey)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (informer, created, stop) = (informer.clone(), created.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut checks, mut broken, mut behind) = (0u64, Vec::new(), 0u64);
            while !stop.load(Ordering::Relaxed) {
                let received = informer.last_sync_resource_version();
                let Ok(version) = informer.last_store_sync_resource_version().parse::<u64>() else {
                    continue;
                };
                if received.parse::<u64>().is_ok_and(|r| r > version) {
                    behind += 1;
                }
                let store = informer.store();
                for (rv, key) in created.lock().iter() {
                    if *rv <= version {
                        checks += 1;
                        if store.get_by_key(key).is_none() {
                            broken.push(format!(
                                "{key} (rv {rv}) missing at store version {version}"
                            ));
                        }
                    }
                }
            }
            (checks, broken, behind)
        })
    };
    for i in 0..OBJECTS {
        let object = fake.create(cm(&format!("obj-{i}"), "x"));
        created.lock().push((rv(&object), ObjectKey::of(&object)));
        if i % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let target = fake.resource_version();
    eventually("the store caught up", || {
        informer.last_store_sync_resource_version() == target
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let (checks, broken, behind) = reader.join().unwrap();
    println!(
        "store version: {checks} checks, {} broken; the reflector was ahead of the store in {behind} samples",
        broken.len()
    );
    assert!(
        broken.is_empty(),
        "the store claimed changes it had not applied: {broken:?}"
    );
    assert!(checks > 0, "the reader checked nothing");

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let expected = format!("store_resource_version{{name=\"configmaps\"}} {target}");
    assert!(text.contains(&expected), "no {expected:?} in:\n{text}");
    informer.stop();
}
