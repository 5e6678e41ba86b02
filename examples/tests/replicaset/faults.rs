//! The sample ReplicaSet controller (examples/src/replicaset) under faults, on the embedded API
//! server.
//!
//! Faults for the whole run: 5% of writes fail with 500, 5% of updates and patches are answered 409,
//! watch delivery is delayed 200 ms, every watch is dropped every 2 s and the history is compacted
//! every 4 s (so informers relist). Meanwhile a watcher of its own (list + watch, relisting on 410)
//! counts the live pods of each ReplicaSet at every event. The story: create 5 ReplicaSets of 4 pods;
//! wait for the first convergence; kill a random pod every 250 ms for 15 s; wait for convergence again.
//!
//! The claims: the watcher never sees more live pods than `replicas` for any ReplicaSet (a stale cache
//! never leads to over-creation), and both convergences happen within a bound (printed; asserted
//! under 90 s each).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube::api::{DeleteParams, ListParams, PostParams, WatchParams};
use ferrokube::apiserver::{ApiServer, KubeletSettings, RunningServer, WriteFailure};
use ferrokube::watch::WatchEvent;
use ferrokube::{Api, Client, Config};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use parking_lot::Mutex;
use serde_json::json;

// The controller is the example's own code, compiled into this test (each test uses a part of it).
use ferrokube_examples::replicaset::{controller, world};

use ferrokube_testkit as common;

use controller::{ControllerOptions, Running};
use world::World;

const NAMESPACE: &str = "faults";
const REPLICASETS: usize = 5;
const REPLICAS: i32 = 4;

/// What the watcher saw: live pods per owner uid now, and the worst excess over `replicas` ever.
#[derive(Default)]
struct Census {
    /// pod name → controller uid, for active pods.
    live: HashMap<String, String>,
    worst: i32,
    worst_at: String,
    events: u64,
    relists: u64,
}

impl Census {
    fn apply(&mut self, pod: &Pod, gone: bool) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        match ferrokube::controller::owner::controller_of(&pod.metadata) {
            Some(owner) if !gone && controller::pod::is_active(pod) => {
                self.live.insert(name, owner.uid.clone());
            }
            _ => {
                self.live.remove(&name);
            }
        }
        self.events += 1;
    }

    fn check(&mut self, resource_version: &str) {
        let mut per_owner: HashMap<&str, i32> = HashMap::new();
        for owner in self.live.values() {
            *per_owner.entry(owner).or_default() += 1;
        }
        let excess = per_owner.values().map(|n| n - REPLICAS).max().unwrap_or(0);
        if excess > self.worst {
            self.worst = excess;
            self.worst_at = format!("resourceVersion {resource_version}: {per_owner:?}");
        }
    }
}

/// Lists, then watches from the list's resourceVersion; resumes after a dropped watch, relists after
/// 410. Checks the census after the list and after every event.
async fn watch_census(pods: Api<Pod>, census: Arc<Mutex<Census>>) {
    loop {
        let Ok(list) = pods.list(&ListParams::default()).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut version = list.resource_version().to_string();
        {
            let mut census = census.lock();
            census.live.clear();
            census.relists += 1;
            for pod in &list.items {
                census.apply(pod, false);
            }
            census.check(&version);
        }
        'watch: loop {
            let mut stream = match pods.watch(&WatchParams::default(), &version).await {
                Ok(stream) => stream,
                Err(error) if error.is_gone() => break 'watch,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            while let Some(event) = stream.next().await {
                let (pod, gone) = match event {
                    Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod)) => (pod, false),
                    Ok(WatchEvent::Deleted(pod)) => (pod, true),
                    Ok(WatchEvent::Bookmark(bookmark)) => {
                        version = bookmark.resource_version;
                        continue;
                    }
                    Ok(WatchEvent::Error(_)) => break 'watch, // 410: relist
                    Err(_) => break,
                };
                version = pod.metadata.resource_version.clone().unwrap_or_default();
                let mut census = census.lock();
                census.apply(&pod, gone);
                census.check(&version);
            }
        }
    }
}

/// Keeps trying a write until the fault injector lets it through.
async fn persist<T, F: Future<Output = Result<T, ferrokube::Error>>>(call: impl Fn() -> F) -> T {
    for _ in 0..100 {
        match call().await {
            Ok(value) => return value,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("a write failed 100 times in a row");
}

async fn converge(driver: &Client, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let world = World::observe(driver, NAMESPACE).await;
        if let Ok(world) = &world {
            if world.replicasets.len() == REPLICASETS && world.converged() {
                return started.elapsed();
            }
        }
        assert!(
            started.elapsed() < within,
            "not converged within {within:?}: {world:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Drops every watch every 2 s; every other time, compacts the history first. Just before compacting
/// it writes a ConfigMap in another namespace, so every pod watcher's last resourceVersion is older
/// than the compaction (the test's bookmarks come every 60 s, too rarely to catch up) and each of
/// them must relist, whatever the pods were doing at that moment.
async fn chaos(server: Arc<RunningServer>, client: Client) {
    let markers: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut tick = 0u64;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        tick += 1;
        if tick % 2 == 0 {
            let marker = common::config_map(&format!("compaction-{tick}"), "marker");
            let params = PostParams::default();
            persist(|| markers.create(&params, &marker)).await;
            server.compact();
        }
        server.close_watches();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_over_creation_and_bounded_convergence_under_faults() {
    let server = ApiServer::new()
        .kubelet(KubeletSettings {
            ready_after: Duration::from_millis(200),
            ..KubeletSettings::default()
        })
        .start()
        .await
        .expect("server");
    let server = Arc::new(server);
    let driver = common::embedded_client(&server, true);
    Api::<Namespace>::all(driver.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("ns"),
        )
        .await
        .expect("namespace");

    let faults = server.faults();
    faults.seed(7);
    faults.fail_writes(0.05, WriteFailure::InternalError);
    faults.conflict_updates(0.05);
    faults.delay_watches(Duration::from_millis(200));
    let chaos = tokio::spawn(chaos(server.clone(), driver.clone()));

    let census = Arc::new(Mutex::new(Census::default()));
    let watcher = tokio::spawn(watch_census(
        Api::namespaced(driver.clone(), NAMESPACE),
        census.clone(),
    ));

    // The controller, with kube-controller-manager's client limits (20 QPS, burst 30).
    let mut config = Config::new(server.url().parse().expect("url"));
    config.qps = Some(20.0);
    config.burst = 30;
    let running = Running::start(config, ControllerOptions::default())
        .await
        .expect("controller starts");

    let replicasets: Api<ReplicaSet> = Api::namespaced(driver.clone(), NAMESPACE);
    for i in 0..REPLICASETS {
        let rs = common::replica_set(&format!("rs-{i}"), REPLICAS, 0);
        let params = PostParams::default();
        persist(|| replicasets.create(&params, &rs)).await;
    }
    let first = converge(&driver, Duration::from_secs(90)).await;

    // Kill a random live pod every 250 ms for 15 s.
    let pods: Api<Pod> = Api::namespaced(driver.clone(), NAMESPACE);
    let kill_until = Instant::now() + Duration::from_secs(15);
    let mut killed = 0;
    let mut pick = 0usize;
    while Instant::now() < kill_until {
        let live: Vec<String> = census.lock().live.keys().cloned().collect();
        if !live.is_empty() {
            pick = pick.wrapping_mul(31).wrapping_add(17);
            let victim = &live[pick % live.len()];
            if pods
                .delete(victim, &DeleteParams::default().grace_period(0))
                .await
                .is_ok()
            {
                killed += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let second = converge(&driver, Duration::from_secs(90)).await;
    let controller_lists = running
        .controller
        .as_ref()
        .expect("an unsharded controller")
        .pods()
        .reflector_status()
        .lists();
    chaos.abort();
    running.stop().await.expect("stop the controller");
    watcher.abort();

    let census = census.lock();
    println!(
        "replicaset under faults: first convergence {:.1} s, after {killed} kills {:.1} s; \
         the watcher saw {} events and listed {} times; the controller's pod informer listed {} times",
        first.as_secs_f64(),
        second.as_secs_f64(),
        census.events,
        census.relists,
        controller_lists
    );
    assert_eq!(
        census.worst, 0,
        "a ReplicaSet had more live pods than replicas at {}",
        census.worst_at
    );
    assert!(killed > 20, "the kill phase killed only {killed} pods");
    // Compactions come at 4, 8, 12, … s and the kill phase alone lasts 15 s: at least three relists.
    assert!(
        controller_lists > 3,
        "the controller's pod informer should have relisted after each compaction"
    );
    assert!(
        census.relists > 3,
        "the watcher should have relisted after each compaction"
    );
}
