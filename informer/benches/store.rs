//! Criterion benchmarks of the informer's store and of a first list through the whole informer:
//! what atomic relists (a list built beside the current tables and swapped in) cost next to
//! applying a list key by key. Run at two commits to compare (the API used here is the same).
//!
//! ```text
//! cargo bench -p ferrokube-informer --bench store
//! ```

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ferrokube_informer::fake::FakeListerWatcher;
use ferrokube_informer::{Indexers, SharedIndexInformer, Store};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const OBJECTS: usize = 10_000;

fn config_map(i: usize, version: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(format!("ns-{}", i % 10)),
            name: Some(format!("cm-{i}")),
            resource_version: Some(version.to_string()),
            labels: Some([("app".to_string(), format!("app-{}", i % 100))].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn objects(version: u64) -> Vec<Arc<ConfigMap>> {
    (0..OBJECTS)
        .map(|i| Arc::new(config_map(i, version)))
        .collect()
}

/// The namespace index (the store's only one, as most controllers have).
fn store() -> Store<ConfigMap> {
    Store::new(Indexers::default())
}

fn replace(c: &mut Criterion) {
    let listed = objects(1);
    c.bench_function("store_replace_10k_into_empty", |b| {
        b.iter_batched(
            store,
            |store| {
                store.replace(listed.clone());
                store
            },
            BatchSize::LargeInput,
        )
    });
    // A relist where 1% of the objects changed and 1% are gone.
    let mut relisted = objects(1);
    for (i, object) in relisted.iter_mut().enumerate().take(OBJECTS / 100) {
        *object = Arc::new(config_map(i, 2));
    }
    relisted.truncate(OBJECTS - OBJECTS / 100);
    c.bench_function("store_relist_10k_1pct_changed", |b| {
        b.iter_batched(
            || {
                let store = store();
                store.replace(listed.clone());
                store
            },
            |store| {
                black_box(store.replace(relisted.clone()));
                store
            },
            BatchSize::LargeInput,
        )
    });
}

fn reads(c: &mut Criterion) {
    let store = store();
    store.replace(objects(1));
    let keys: Vec<String> = (0..OBJECTS)
        .map(|i| format!("ns-{}/cm-{i}", i % 10))
        .collect();
    c.bench_function("store_get_by_key_10k", |b| {
        b.iter(|| {
            for key in &keys {
                black_box(store.get_by_key(key));
            }
        })
    });
    c.bench_function("store_insert_10k", |b| {
        let updated = objects(3);
        b.iter(|| {
            for object in &updated {
                black_box(store.insert(object.clone()));
            }
        })
    });
}

/// The runtime the informer benchmarks run on: two worker threads, as the machine has cores.
fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("tokio runtime: {error}"),
    }
}

fn first_list(c: &mut Criterion) {
    let runtime = runtime();
    c.bench_function("informer_first_list_10k", |b| {
        b.iter_batched(
            || {
                let fake = FakeListerWatcher::new();
                for i in 0..OBJECTS {
                    fake.create(config_map(i, 0));
                }
                fake
            },
            |fake| {
                runtime.block_on(async {
                    let informer = SharedIndexInformer::builder(fake).build();
                    if informer.start().is_err() {
                        panic!("informer starts");
                    }
                    assert!(informer.wait_for_cache_sync().await);
                    informer.stop();
                })
            },
            BatchSize::LargeInput,
        )
    });
}

/// 10k watch events (updates of 1,000 objects) through reflector, fifo, store and one handler:
/// the per-event path of a running informer.
fn watch_events(c: &mut Criterion) {
    let runtime = runtime();
    const WATCHED: usize = 1_000;
    const EVENTS: usize = 10_000;
    c.bench_function("informer_watch_events_10k", |b| {
        b.iter_batched(
            || {
                let fake = FakeListerWatcher::new();
                for i in 0..WATCHED {
                    fake.create(config_map(i, 0));
                }
                let informer = SharedIndexInformer::builder(fake.clone()).build();
                let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
                let (done, finished) = std::sync::mpsc::channel::<()>();
                let counter = seen.clone();
                let handler = ferrokube_informer::HandlerFns::new().on_update(move |_, _| {
                    if counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == EVENTS {
                        let _ = done.send(());
                    }
                });
                let registered = informer.add_event_handler_with(
                    handler,
                    ferrokube_informer::HandlerOptions::default().inline(),
                );
                if registered.is_err() {
                    panic!("handler registers");
                }
                runtime.block_on(async {
                    if informer.start().is_err() {
                        panic!("informer starts");
                    }
                    assert!(informer.wait_for_cache_sync().await);
                    while fake.open_watches() == 0 {
                        tokio::task::yield_now().await;
                    }
                });
                (fake, informer, finished)
            },
            |(fake, informer, finished)| {
                for i in 0..EVENTS {
                    fake.update(config_map(i % WATCHED, 1 + (i / WATCHED) as u64));
                }
                if finished.recv().is_err() {
                    panic!("every event reaches the handler");
                }
                informer.stop();
            },
            BatchSize::PerIteration,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = replace, reads, first_list, watch_events
}
criterion_main!(benches);
