//! The third sample controller (`examples/src/bucket/`: a derived custom resource guarding an
//! outside object store) on the embedded API server, step by step:
//!
//! 1. with no polling, so that every repair is made by an event: creation, a spec edit, edits
//!    behind its back (its ConfigMap deleted, then edited), a namespace label that moves its
//!    bucket, and deletion with nothing left over;
//! 2. with polling: a change made at the store is put back, and an unchanged world costs no write;
//! 3. the deletion check of 1 can fail: a Bucket deleted without its finalizer's cleanup leaves its
//!    stored bucket behind, and [`leftovers`] reports it.
//!
//! Every wait is on a condition, with a deadline, and says what it last saw when it gives up.

use std::future::Future;
use std::time::{Duration, Instant};

use ferrokube::Api;
use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ferrokube::apiserver::{ApiServer, RunningServer};
use ferrokube::controller::ControllerError;
use ferrokube::controller::conditions::find_condition;
use ferrokube::crd::apply_and_wait;
use ferrokube::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use ferrokube::testing::ServerClient;
use ferrokube_examples::bucket::controller::{
    self, BucketController, DEFAULT_REGION, FINALIZER, REGION_LABEL, stored_name,
};
use ferrokube_examples::bucket::resource::{Bucket, BucketSpec};
use ferrokube_examples::bucket::store::ObjectStore;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long any one step may take to converge (debug build, two shared cores).
const DEADLINE: Duration = Duration::from_secs(20);
const NS: &str = "shop";

/// The controller never polls: whatever it does, an event made it.
const NO_POLL: Duration = Duration::from_secs(3600);

/// The embedded server with the CRD applied and the namespace `shop` (no region label), and the
/// controller running over a fresh store, polling it every `poll`.
struct World {
    _server: RunningServer,
    buckets: Api<Bucket>,
    configmaps: Api<ConfigMap>,
    namespaces: Api<Namespace>,
    store: ObjectStore,
    /// The running controller: how to stop it, and its task.
    controller: Option<(oneshot::Sender<()>, Running)>,
}

/// The controller's task: `run`'s result.
type Running = JoinHandle<Result<(), ControllerError>>;

impl World {
    async fn start(poll: Duration) -> World {
        let server = ApiServer::new().start().await.expect("server starts");
        let client = server.client().expect("client");
        apply_and_wait(&client, &Bucket::crd(), Duration::from_secs(30))
            .await
            .expect("the derived CRD is Established");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("json");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
        let store = ObjectStore::default();
        let reconciler = BucketController::new(store.clone(), poll);
        let (stop, stopped) = oneshot::channel::<()>();
        let running = tokio::spawn(controller::run(client.clone(), reconciler, async {
            let _ = stopped.await;
        }));
        World {
            _server: server,
            buckets: Api::namespaced(client.clone(), NS),
            configmaps: Api::namespaced(client, NS),
            namespaces,
            store,
            controller: Some((stop, running)),
        }
    }

    /// Stops the controller and waits (bounded) until `run` has returned.
    async fn stop_controller(&mut self) {
        let Some((stop, running)) = self.controller.take() else {
            return;
        };
        let _ = stop.send(());
        tokio::time::timeout(DEADLINE, running)
            .await
            .expect("the controller stops within the deadline")
            .expect("controller task")
            .expect("the controller ran and stopped cleanly");
    }

    /// Waits until the Bucket `name` is Ready for its current generation, its ConfigMap and its
    /// stored bucket say `region` and `retention_days`; returns the Bucket's uid.
    async fn converged(&self, name: &str, region: &str, retention_days: i32) -> String {
        let endpoint = format!("https://{region}.store.example/{NS}.{name}");
        eventually(&format!("{name} converged in {region}"), || async {
            let bucket = self.buckets.get(name).await.map_err(|e| e.to_string())?;
            let status = bucket.status.clone().unwrap_or_default();
            let ready = find_condition(&status.conditions, "Ready");
            let generation = bucket.metadata.generation;
            let stored = self.store.get(&stored_name(NS, name));
            let cm = self.configmaps.get_opt(&format!("{name}-bucket")).await;
            let cm_data = cm.map_err(|e| e.to_string())?.and_then(|cm| cm.data);
            let ready =
                ready.is_some_and(|c| c.status == "True" && c.observed_generation == generation);
            let status_says = status.observed_generation == generation
                && status.region.as_deref() == Some(region)
                && status.endpoint.as_deref() == Some(endpoint.as_str());
            let in_store = stored
                .as_ref()
                .is_some_and(|s| s.region == region && s.retention_days == retention_days);
            let child_says = cm_data.as_ref().is_some_and(|data| {
                data.get("endpoint") == Some(&endpoint)
                    && data.get("region").map(String::as_str) == Some(region)
            });
            let guarded = bucket
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER);
            let done = ready && status_says && in_store && child_says && guarded;
            match (done, bucket.metadata.uid) {
                (true, Some(uid)) => Ok(uid),
                _ => Err(format!(
                    "generation {generation:?}, status {status:?}, stored {stored:?}, \
                     ConfigMap {cm_data:?}, finalizers {:?}",
                    bucket.metadata.finalizers
                )),
            }
        })
        .await
    }
}

/// What a deleted Bucket `name` (uid `uid`) left behind: the object itself, a child ConfigMap,
/// its stored bucket. Empty when nothing is.
async fn leftovers(world: &World, name: &str, uid: &str) -> Vec<String> {
    let mut left = Vec::new();
    match world.buckets.get_opt(name).await {
        Ok(None) => {}
        Ok(Some(bucket)) => left.push(format!(
            "the Bucket, finalizers {:?}",
            bucket.metadata.finalizers
        )),
        Err(error) => left.push(format!("the Bucket could not be read: {error}")),
    }
    match world.configmaps.list(&ListParams::default()).await {
        Ok(list) => left.extend(
            list.items
                .iter()
                .filter(|cm| {
                    let owners = cm.metadata.owner_references.iter().flatten();
                    owners.clone().any(|o| o.uid == uid)
                })
                .map(|cm| format!("ConfigMap {:?}", cm.metadata.name)),
        ),
        Err(error) => left.push(format!("ConfigMaps could not be listed: {error}")),
    }
    if let Some(stored) = world.store.get(&stored_name(NS, name)) {
        left.push(format!("the stored bucket {stored:?}"));
    }
    left
}

/// Polls `check` (every 20 ms) until it returns `Ok`, and returns that; panics after
/// [`DEADLINE`] with `what` and the last `Err` (what it saw instead).
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        let last = match check().await {
            Ok(value) => return value,
            Err(last) => last,
        };
        if start.elapsed() > DEADLINE {
            panic!("{what}: not within {DEADLINE:?}; last seen: {last}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn spec(retention_days: i32) -> BucketSpec {
    BucketSpec {
        retention_days,
        versioned: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_bucket_sample_creation_edits_repairs_namespace_label_and_deletion() {
    // No polling: every repair below is made by an event of the kind changed (the Bucket, its
    // ConfigMap, its Namespace), through that kind's source and filter.
    let mut world = World::start(NO_POLL).await;

    // Creation: finalizer, stored bucket, ConfigMap, status Ready for generation 1.
    world
        .buckets
        .create(&PostParams::default(), &Bucket::new("assets", spec(30)))
        .await
        .expect("created");
    let uid = world.converged("assets", DEFAULT_REGION, 30).await;
    let owner = world.configmaps.get("assets-bucket").await.expect("child");
    let owners = owner.metadata.owner_references.unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true)),
        "the ConfigMap is controlled by its Bucket: {owners:?}"
    );

    // An edit of the spec reaches the store, and the status answers the new generation.
    let edit = Patch::Merge(json!({"spec": {"retentionDays": 90}}));
    let edited = world
        .buckets
        .patch("assets", &PatchParams::default(), &edit)
        .await
        .expect("spec edited");
    assert_eq!(edited.metadata.generation, Some(2));
    world.converged("assets", DEFAULT_REGION, 90).await;

    // Behind its back (1): the child ConfigMap is deleted; a new one appears.
    let before = world.configmaps.get("assets-bucket").await.expect("child");
    world
        .configmaps
        .delete("assets-bucket", &DeleteParams::default())
        .await
        .expect("child deleted");
    eventually("the ConfigMap re-created", || async {
        match world.configmaps.get_opt("assets-bucket").await {
            Ok(Some(cm)) if cm.metadata.uid != before.metadata.uid => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    world.converged("assets", DEFAULT_REGION, 90).await;

    // Behind its back (2): the ConfigMap's endpoint is edited; it is put back.
    let wrong = Patch::Merge(json!({"data": {"endpoint": "https://elsewhere.example/"}}));
    world
        .configmaps
        .patch("assets-bucket", &PatchParams::default(), &wrong)
        .await
        .expect("child edited");
    world.converged("assets", DEFAULT_REGION, 90).await;

    // The cluster-scoped kind: labelling the namespace moves its buckets to that region.
    let label = Patch::Merge(json!({"metadata": {"labels": {REGION_LABEL: "eu-west"}}}));
    world
        .namespaces
        .patch(NS, &PatchParams::default(), &label)
        .await
        .expect("namespace labelled");
    world.converged("assets", "eu-west", 90).await;

    // Deletion: the stored bucket goes first, then the finalizer, then the object; the
    // ConfigMap is garbage collected. Nothing is left.
    world
        .buckets
        .delete("assets", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("nothing left of the Bucket", || async {
        let left = leftovers(&world, "assets", &uid).await;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
    assert!(world.store.names().is_empty(), "{:?}", world.store.names());
    world.stop_controller().await;
}

/// The store cannot be watched: the poll finds a change made there and puts it back, and polling
/// an unchanged world writes nothing, neither to the store nor to the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_bucket_sample_repairs_store_drift_by_polling_and_idles_without_writes() {
    let mut world = World::start(Duration::from_millis(100)).await;
    let stored = stored_name(NS, "assets");
    world
        .buckets
        .create(&PostParams::default(), &Bucket::new("assets", spec(90)))
        .await
        .expect("created");
    world.converged("assets", DEFAULT_REGION, 90).await;

    // Behind its back, outside: the stored bucket is changed at the store (no event anywhere);
    // the poll finds it and puts it back.
    assert!(world.store.tamper(&stored, |b| b.retention_days = 1));
    world.converged("assets", DEFAULT_REGION, 90).await;

    // An unchanged world costs no write, at the store or the API server, however often the
    // controller polls: wait for three more lookups (only the controller looks meanwhile).
    let before = world.store.counts();
    let bucket_version = world
        .buckets
        .get("assets")
        .await
        .expect("get")
        .metadata
        .resource_version;
    let child_version = world
        .configmaps
        .get("assets-bucket")
        .await
        .expect("get")
        .metadata
        .resource_version;
    eventually("three more polls", || async {
        let now = world.store.counts();
        if now.lookups >= before.lookups + 3 {
            Ok(())
        } else {
            Err(format!("{now:?}, before {before:?}"))
        }
    })
    .await;
    assert_eq!(
        world.store.counts().writes,
        before.writes,
        "no store write without a change"
    );
    let bucket = world.buckets.get("assets").await.expect("get");
    assert_eq!(
        bucket.metadata.resource_version, bucket_version,
        "no Bucket write without a change"
    );
    let child = world.configmaps.get("assets-bucket").await.expect("get");
    assert_eq!(
        child.metadata.resource_version, child_version,
        "no ConfigMap write without a change"
    );

    world.stop_controller().await;
}

/// The first test's last check can fail: a Bucket whose finalizer is taken off by hand while the
/// controller is stopped (so its cleanup never runs) leaves its stored bucket behind, and
/// `leftovers` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_bucket_sample_without_its_finalizer_cleanup_the_stored_bucket_is_left() {
    let mut world = World::start(NO_POLL).await;
    world
        .buckets
        .create(&PostParams::default(), &Bucket::new("logs", spec(7)))
        .await
        .expect("created");
    let uid = world.converged("logs", DEFAULT_REGION, 7).await;
    world.stop_controller().await;

    let unguarded = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    world
        .buckets
        .patch("logs", &PatchParams::default(), &unguarded)
        .await
        .expect("finalizer removed by hand");
    world
        .buckets
        .delete("logs", &DeleteParams::default())
        .await
        .expect("deleted");
    let left = eventually("the Bucket and its ConfigMap gone", || async {
        let left = leftovers(&world, "logs", &uid).await;
        match left.as_slice() {
            [only] if only.starts_with("the stored bucket") => Ok(left),
            _ => Err(format!("{left:?}")),
        }
    })
    .await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(world.store.get(&stored_name(NS, "logs")).is_some());
}
