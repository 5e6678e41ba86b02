//! The controller toolkit against the embedded API server: `create_or_update`, `update_status`,
//! finalizers and claiming, each checked by reading the server's state back.
//!
//! Every test name starts with `controller_` so that `cargo test --workspace controller` runs them.

use ferrokube_testkit as common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferrokube_apiserver::ApiServer;
use ferrokube_apiserver::RunningServer;
use ferrokube_client::Api;
use ferrokube_client::Client;
use ferrokube_client::api::DeleteParams;
use ferrokube_client::api::PostParams;
use ferrokube_core::LabelSelector;
use ferrokube_runtime::controller::claim::ClaimError;
use ferrokube_runtime::controller::claim::Claimer;
use ferrokube_runtime::controller::claim::PatchStyle;
use ferrokube_runtime::controller::conditions::update_status;
use ferrokube_runtime::controller::conditions::update_status_from;
use ferrokube_runtime::controller::finalizer::Finalized;
use ferrokube_runtime::controller::finalizer::FinalizerError;
use ferrokube_runtime::controller::finalizer::add_finalizer;
use ferrokube_runtime::controller::finalizer::finalize;
use ferrokube_runtime::controller::finalizer::has_finalizer;
use ferrokube_runtime::controller::finalizer::remove_finalizer;
use ferrokube_runtime::controller::owner::CreateOrUpdateError;
use ferrokube_runtime::controller::owner::Outcome;
use ferrokube_runtime::controller::owner::controller_of;
use ferrokube_runtime::controller::owner::create_or_update;
use ferrokube_runtime::controller::owner::set_controller_reference;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;

const NS: &str = "default";

async fn server() -> (RunningServer, Client) {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, false);
    (server, client)
}

/// Runs `future` to completion from inside a synchronous closure (a mutate function), as a second
/// writer racing the one under test. Needs the multi-threaded runtime.
fn block_on<F: Future>(future: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

fn set_data(cm: &mut ConfigMap, value: &str) {
    cm.data = Some(BTreeMap::from([("k".to_string(), value.to_string())]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_create_or_update_creates_updates_and_skips_no_op_writes() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let mutate = |value: &'static str| {
        move |cm: &mut ConfigMap| -> Result<(), std::convert::Infallible> {
            set_data(cm, value);
            Ok(())
        }
    };

    let (created, outcome) = create_or_update(&api, "cfg", mutate("1"))
        .await
        .expect("create");
    assert_eq!(outcome, Outcome::Created);
    assert_eq!(created.metadata.namespace.as_deref(), Some(NS));
    let stored = api.get("cfg").await.expect("get");
    assert_eq!(stored.data, created.data);
    let version = stored.metadata.resource_version.clone();

    let (same, outcome) = create_or_update(&api, "cfg", mutate("1"))
        .await
        .expect("no-op");
    assert_eq!(outcome, Outcome::Unchanged);
    assert_eq!(same.metadata.resource_version, version);
    let after_no_op = api.get("cfg").await.expect("get");
    assert_eq!(
        after_no_op.metadata.resource_version, version,
        "an unchanged object is not written"
    );

    let (updated, outcome) = create_or_update(&api, "cfg", mutate("2"))
        .await
        .expect("update");
    assert_eq!(outcome, Outcome::Updated);
    assert_ne!(updated.metadata.resource_version, version);
    let stored = api.get("cfg").await.expect("get");
    assert_eq!(
        stored
            .data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("2")
    );

    // A mutate function may not rename the object; nothing is written.
    let renamed = create_or_update(&api, "cfg", |cm: &mut ConfigMap| {
        cm.metadata.name = Some("other".into());
        set_data(cm, "3");
        Ok::<(), std::convert::Infallible>(())
    })
    .await;
    assert!(matches!(
        renamed,
        Err(CreateOrUpdateError::IdentityChanged { field: "name", .. })
    ));
    assert_eq!(
        api.get("cfg").await.expect("get").metadata.resource_version,
        stored.metadata.resource_version
    );

    // A write between the GET and the PUT: the conflict is returned, not retried.
    let racer = api.clone();
    let raced = create_or_update(&api, "cfg", |cm: &mut ConfigMap| {
        block_on(async {
            let mut current = racer.get("cfg").await.expect("get");
            set_data(&mut current, "racer");
            racer
                .replace("cfg", &PostParams::default(), &current)
                .await
                .expect("racing write");
        });
        set_data(cm, "mine");
        Ok::<(), std::convert::Infallible>(())
    })
    .await;
    let error = raced.expect_err("conflict");
    assert!(error.is_conflict(), "{error}");
    let stored = api.get("cfg").await.expect("get");
    assert_eq!(
        stored
            .data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("racer")
    );

    // A mutate error is passed through; nothing is created.
    let failed = create_or_update(&api, "never", |_: &mut ConfigMap| Err("no"))
        .await
        .expect_err("mutate failed");
    assert!(matches!(failed, CreateOrUpdateError::Mutate("no")));
    assert!(api.get_opt("never").await.expect("get").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_create_or_update_sets_a_controller_reference() {
    let (_server, client) = server().await;
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let owner = replicasets
        .create(&PostParams::default(), &common::replica_set("web", 0, 0))
        .await
        .expect("owner");
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let (cm, outcome) = create_or_update(&api, "web-config", |cm: &mut ConfigMap| {
        set_data(cm, "x");
        set_controller_reference(&owner, &mut cm.metadata)
    })
    .await
    .expect("create");
    assert_eq!(outcome, Outcome::Created);
    assert_eq!(
        controller_of(&cm.metadata).map(|r| r.uid.clone()),
        owner.metadata.uid
    );
    // Setting the same reference again is a no-op.
    let (_, outcome) = create_or_update(&api, "web-config", |cm: &mut ConfigMap| {
        set_data(cm, "x");
        set_controller_reference(&owner, &mut cm.metadata)
    })
    .await
    .expect("again");
    assert_eq!(outcome, Outcome::Unchanged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_update_status_retries_a_conflict_from_a_fresh_read() {
    let (_server, client) = server().await;
    let api: Api<ReplicaSet> = Api::namespaced(client, NS);
    api.create(&PostParams::default(), &common::replica_set("web", 2, 0))
        .await
        .expect("create");

    let calls = AtomicUsize::new(0);
    let racer = api.clone();
    let written = update_status(&api, "web", |rs: &mut ReplicaSet| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            // Someone else writes the object after our read: our status write must conflict.
            block_on(async {
                let mut current = racer.get("web").await.expect("get");
                current
                    .metadata
                    .labels
                    .get_or_insert_default()
                    .insert("touched".into(), "yes".into());
                racer
                    .replace("web", &PostParams::default(), &current)
                    .await
                    .expect("racing write");
            });
        }
        let status = rs.status.get_or_insert_default();
        status.replicas = 2;
        status.observed_generation = rs.metadata.generation;
        true
    })
    .await
    .expect("status written after a retry")
    .expect("something changed");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one conflict, one retry");
    let stored = api.get("web").await.expect("get");
    assert_eq!(stored.status.as_ref().map(|s| s.replicas), Some(2));
    assert_eq!(
        stored.metadata.resource_version,
        written.metadata.resource_version
    );
    assert_eq!(
        stored
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("touched"))
            .map(String::as_str),
        Some("yes"),
        "the other writer's change survives"
    );

    // Nothing to change: nothing is written.
    let unchanged = update_status(&api, "web", |_: &mut ReplicaSet| false)
        .await
        .expect("no write");
    assert!(unchanged.is_none());
    assert_eq!(
        api.get("web").await.expect("get").metadata.resource_version,
        stored.metadata.resource_version
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_update_status_gives_up_after_five_conflicts() {
    let (_server, client) = server().await;
    let api: Api<ReplicaSet> = Api::namespaced(client, NS);
    api.create(&PostParams::default(), &common::replica_set("web", 2, 0))
        .await
        .expect("create");
    let calls = AtomicUsize::new(0);
    let racer = api.clone();
    let result = update_status(&api, "web", |rs: &mut ReplicaSet| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        block_on(async {
            let mut current = racer.get("web").await.expect("get");
            current
                .metadata
                .labels
                .get_or_insert_default()
                .insert("race".into(), call.to_string());
            racer
                .replace("web", &PostParams::default(), &current)
                .await
                .expect("racing write");
        });
        rs.status.get_or_insert_default().replicas = 2;
        true
    })
    .await;
    let error = result.expect_err("every attempt conflicts");
    assert!(error.is_conflict(), "{error}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        5,
        "client-go's DefaultRetry: 5 attempts"
    );
    let stored = api.get("web").await.expect("get");
    assert_eq!(
        stored.status.map(|s| s.replicas).unwrap_or(0),
        0,
        "never written"
    );
}

fn config_map(name: &str, finalizers: &[&str]) -> ConfigMap {
    let mut cm = common::config_map(name, "0");
    if !finalizers.is_empty() {
        cm.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
    cm
}

const MINE: &str = "toolkit.example.com/cleanup";
const OTHER: &str = "other.example.com/keep";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_finalizers_keep_others_and_refuse_stale_objects() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, NS);

    // With another controller's finalizer already there.
    let original = api
        .create(&PostParams::default(), &config_map("shared", &[OTHER]))
        .await
        .expect("create");
    let added = add_finalizer(&api, &original, MINE).await.expect("add");
    assert_eq!(
        added.metadata.finalizers,
        Some(vec![OTHER.into(), MINE.into()])
    );
    // The list changed since `original` was read: a patch based on it is refused.
    let stale = add_finalizer(&api, &original, "third.example.com/x")
        .await
        .expect_err("stale list");
    assert!(stale.is_stale(), "{stale}");
    let removed = remove_finalizer(&api, &added, MINE).await.expect("remove");
    assert_eq!(removed.metadata.finalizers, Some(vec![OTHER.to_string()]));
    let stale = remove_finalizer(&api, &added, MINE)
        .await
        .expect_err("stale list");
    assert!(stale.is_stale(), "{stale}");
    assert_eq!(
        api.get("shared").await.expect("get").metadata.finalizers,
        Some(vec![OTHER.to_string()])
    );

    // Without any finalizers: guarded by the resourceVersion.
    let bare = api
        .create(&PostParams::default(), &config_map("bare", &[]))
        .await
        .expect("create");
    let mut changed = bare.clone();
    set_data(&mut changed, "changed");
    api.replace("bare", &PostParams::default(), &changed)
        .await
        .expect("someone else writes");
    let stale = add_finalizer(&api, &bare, MINE)
        .await
        .expect_err("stale resourceVersion");
    assert!(stale.is_stale(), "{stale}");
    let fresh = api.get("bare").await.expect("get");
    let added = add_finalizer(&api, &fresh, MINE).await.expect("add");
    assert!(has_finalizer(&added.metadata, MINE));
    assert_eq!(added.metadata.finalizers.as_ref().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_finalize_adds_applies_cleans_up_and_lets_go() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let created = api
        .create(&PostParams::default(), &config_map("guarded", &[]))
        .await
        .expect("create");
    let applies = AtomicUsize::new(0);
    let cleanups = AtomicUsize::new(0);
    let apply = |cm: Arc<ConfigMap>| {
        let applies = &applies;
        async move {
            assert!(
                has_finalizer(&cm.metadata, MINE),
                "apply runs after the add"
            );
            applies.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>("applied")
        }
    };

    // Alive, without the finalizer: added first, then apply.
    let outcome = finalize(&api, MINE, Arc::new(created), apply, |_| async {
        Ok::<_, String>("unused")
    })
    .await
    .expect("first reconcile");
    assert_eq!(outcome, Finalized::Applied("applied"));
    assert_eq!(applies.load(Ordering::SeqCst), 1);
    let stored = api.get("guarded").await.expect("get");
    assert!(has_finalizer(&stored.metadata, MINE));

    // Deleted: the object stays, waiting for us.
    api.delete("guarded", &DeleteParams::default())
        .await
        .expect("delete");
    let deleting = Arc::new(api.get("guarded").await.expect("still there"));
    assert!(deleting.metadata.deletion_timestamp.is_some());

    // A failing cleanup keeps the finalizer.
    let failed = finalize(&api, MINE, deleting.clone(), apply, |_| async {
        Err::<&str, _>("provider down".to_string())
    })
    .await;
    assert!(matches!(failed, Err(FinalizerError::Cleanup(ref e)) if e == "provider down"));
    assert!(has_finalizer(
        &api.get("guarded").await.expect("get").metadata,
        MINE
    ));

    // A successful one removes it, and the object goes.
    let outcome = finalize(&api, MINE, deleting.clone(), apply, |cm: Arc<ConfigMap>| {
        let cleanups = &cleanups;
        async move {
            assert!(cm.metadata.deletion_timestamp.is_some());
            cleanups.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>("cleaned")
        }
    })
    .await
    .expect("cleanup");
    assert_eq!(outcome, Finalized::CleanedUp("cleaned"));
    assert_eq!(cleanups.load(Ordering::SeqCst), 1);
    assert!(api.get_opt("guarded").await.expect("get").is_none());
    assert_eq!(
        applies.load(Ordering::SeqCst),
        1,
        "apply never ran for the deletion"
    );

    // Being deleted without our finalizer: nothing runs.
    let held = api
        .create(&PostParams::default(), &config_map("held", &[OTHER]))
        .await
        .expect("create");
    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let held_deleting = Arc::new(
        api.get(held.metadata.name.as_deref().unwrap_or("held"))
            .await
            .expect("get"),
    );
    let outcome = finalize(&api, MINE, held_deleting, apply, |_| async {
        Err::<&str, _>("must not run".to_string())
    })
    .await
    .expect("nothing to do");
    assert_eq!(outcome, Finalized::NothingToDo);
}

fn pod(name: &str, app: &str, owner: Option<OwnerReference>) -> Pod {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]},
    }))
    .expect("pod json");
    pod.metadata.owner_references = owner.map(|o| vec![o]);
    pod
}

fn reference_to(rs: &ReplicaSet) -> OwnerReference {
    ferrokube_runtime::controller::owner::controller_reference(rs)
}

fn names<K: ferrokube_core::Object>(objects: &[Arc<K>]) -> Vec<String> {
    let mut names: Vec<String> = objects
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect();
    names.sort();
    names
}

async fn owner_and_claimer(
    client: &Client,
    name: &str,
) -> (Api<ReplicaSet>, Arc<ReplicaSet>, Claimer<ReplicaSet>) {
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let owner = Arc::new(
        replicasets
            .create(&PostParams::default(), &common::replica_set(name, 0, 0))
            .await
            .expect("owner"),
    );
    let selector = LabelSelector::parse(&format!("app={name}")).expect("selector");
    let claimer = Claimer::new(replicasets.clone(), owner.clone(), selector).expect("claimer");
    (replicasets, owner, claimer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_claim_adopts_releases_and_ignores() {
    let (_server, client) = server().await;
    let (replicasets, web, claimer) = owner_and_claimer(&client, "web").await;
    let other = replicasets
        .create(&PostParams::default(), &common::replica_set("other", 0, 0))
        .await
        .expect("other owner");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut doomed = pod("orphan-deleting", "web", None);
    doomed.metadata.finalizers = Some(vec![OTHER.into()]);
    for p in [
        pod("orphan-match", "web", None),
        pod("orphan-nomatch", "db", None),
        pod("mine-match", "web", Some(reference_to(&web))),
        pod("mine-nomatch", "db", Some(reference_to(&web))),
        pod("theirs-match", "web", Some(reference_to(&other))),
        doomed,
    ] {
        pods.create(&PostParams::default(), &p).await.expect("pod");
    }
    pods.delete("orphan-deleting", &DeleteParams::default())
        .await
        .expect("delete");
    let candidates: Vec<Arc<Pod>> = pods
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    assert_eq!(candidates.len(), 6);

    let claimed = claimer.claim(candidates).await.expect("claim");
    assert_eq!(names(&claimed), ["mine-match", "orphan-match"]);

    let controller = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await.expect("get");
            controller_of(&pod.metadata).map(|r| r.uid.clone())
        }
    };
    assert_eq!(
        controller("orphan-match").await,
        web.metadata.uid,
        "adopted"
    );
    assert_eq!(controller("mine-nomatch").await, None, "released");
    assert_eq!(controller("mine-match").await, web.metadata.uid);
    assert_eq!(
        controller("theirs-match").await,
        other.metadata.uid,
        "not ours"
    );
    assert_eq!(controller("orphan-nomatch").await, None);
    assert_eq!(
        controller("orphan-deleting").await,
        None,
        "a dying orphan is left alone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_claim_with_json_patches_keeps_other_references() {
    let (_server, client) = server().await;
    let (replicasets, web, claimer) = owner_and_claimer(&client, "web").await;
    let claimer = claimer.patch_style(PatchStyle::Json);
    let other = replicasets
        .create(&PostParams::default(), &common::replica_set("other", 0, 0))
        .await
        .expect("other owner");
    let mut plain = reference_to(&other);
    plain.controller = None;
    plain.block_owner_deletion = None;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let labelled = |name: &str, app: &str, owners: Vec<OwnerReference>| {
        let mut cm = common::config_map(name, "0");
        cm.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
        cm.metadata.owner_references = Some(owners).filter(|o| !o.is_empty());
        cm
    };
    for cm in [
        labelled("orphan", "web", vec![plain.clone()]),
        labelled("stray", "db", vec![plain.clone(), reference_to(&web)]),
        labelled("lonely-stray", "db", vec![reference_to(&web)]),
    ] {
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let read = |name: &'static str| {
        let cms = cms.clone();
        async move { cms.get(name).await.expect("get") }
    };
    let candidates = vec![
        Arc::new(read("orphan").await),
        Arc::new(read("stray").await),
        Arc::new(read("lonely-stray").await),
    ];
    let claimed = claimer.claim(candidates).await.expect("claim");
    assert_eq!(names(&claimed), ["orphan"]);
    assert_eq!(
        read("orphan").await.metadata.owner_references,
        Some(vec![plain.clone(), reference_to(&web)])
    );
    assert_eq!(
        read("stray").await.metadata.owner_references,
        Some(vec![plain.clone()])
    );
    assert_eq!(read("lonely-stray").await.metadata.owner_references, None);

    // A stale copy (the object changed since it was read) is not adopted: the guard refuses it.
    cms.create(&PostParams::default(), &labelled("late", "web", vec![]))
        .await
        .expect("create");
    let stale = Arc::new(read("late").await);
    let mut changed = (*stale).clone();
    set_data(&mut changed, "changed");
    cms.replace("late", &PostParams::default(), &changed)
        .await
        .expect("someone else writes");
    let error = claimer.claim(vec![stale]).await.expect_err("stale adopt");
    assert!(matches!(error, ClaimError::Adopt { .. }), "{error}");
    assert_eq!(read("late").await.metadata.owner_references, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_claim_rechecks_the_owner_before_adopting() {
    let (_server, client) = server().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod("orphan", "web", None))
        .await
        .expect("pod");
    let orphan = || {
        let pods = pods.clone();
        async move { vec![Arc::new(pods.get("orphan").await.expect("get"))] }
    };

    // Replaced: deleted and re-created under the same name (another uid) since it was cached.
    let (replicasets, _, stale_claimer) = owner_and_claimer(&client, "web").await;
    replicasets
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    replicasets
        .create(&PostParams::default(), &common::replica_set("web", 0, 0))
        .await
        .expect("re-create");
    let error = stale_claimer
        .claim(orphan().await)
        .await
        .expect_err("replaced");
    assert!(
        matches!(&error, ClaimError::CannotAdopt { reason, .. } if reason.contains("uid")),
        "{error}"
    );
    assert_eq!(
        controller_of(&pods.get("orphan").await.expect("get").metadata),
        None
    );

    // Being deleted on the server, though the cached copy does not show it yet.
    let mut held = common::replica_set("held", 0, 0);
    held.metadata.finalizers = Some(vec![OTHER.into()]);
    let held = Arc::new(
        replicasets
            .create(&PostParams::default(), &held)
            .await
            .expect("owner"),
    );
    let selector = LabelSelector::parse("app=web").expect("selector");
    let claimer = Claimer::new(replicasets.clone(), held.clone(), selector).expect("claimer");
    replicasets
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let error = claimer
        .claim(orphan().await)
        .await
        .expect_err("being deleted");
    assert!(
        matches!(&error, ClaimError::CannotAdopt { reason, .. } if reason.contains("deleted")),
        "{error}"
    );
    assert_eq!(
        controller_of(&pods.get("orphan").await.expect("get").metadata),
        None
    );

    // The live owner adopts it.
    let fresh = Arc::new(replicasets.get("web").await.expect("get"));
    let claimer = Claimer::new(
        replicasets.clone(),
        fresh.clone(),
        LabelSelector::parse("app=web").expect("selector"),
    )
    .expect("claimer");
    let claimed = claimer.claim(orphan().await).await.expect("adopted");
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        controller_of(&pods.get("orphan").await.expect("get").metadata).map(|r| r.uid.clone()),
        fresh.metadata.uid
    );
}

/// `update_status_from` sends nothing when the cached object's status is already what the
/// reconcile wants, one PUT when the cache is current, and reads afresh after a conflict (the
/// cached copy was behind): the status lands on the current version, other writers' changes
/// survive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_toolkit_update_status_from_the_cached_object() {
    let (server, client) = server().await;
    let api: Api<ReplicaSet> = Api::namespaced(client, NS);
    let cached = api
        .create(&PostParams::default(), &common::replica_set("web", 2, 0))
        .await
        .expect("create");
    let set_replicas = |n: i32| {
        move |rs: &mut ReplicaSet| {
            let status = rs.status.get_or_insert_default();
            let changed = status.replicas != n;
            status.replicas = n;
            changed
        }
    };

    // Unchanged: no request at all, even to a server that fails every write.
    server.faults().fail_writes(
        1.0,
        ferrokube_apiserver::faults::WriteFailure::InternalError,
    );
    let mut already = cached.clone();
    already.status.get_or_insert_default().replicas = 2;
    let none = update_status_from(&api, &already, set_replicas(2))
        .await
        .expect("nothing sent");
    assert!(none.is_none());
    server.faults().fail_writes(
        0.0,
        ferrokube_apiserver::faults::WriteFailure::InternalError,
    );

    // Current cache: one write, at the cached version.
    let written = update_status_from(&api, &cached, set_replicas(2))
        .await
        .expect("written")
        .expect("changed");
    assert_eq!(written.status.as_ref().map(|s| s.replicas), Some(2));

    // A cache that is behind (still `cached`): the write conflicts, and the fallback reads afresh.
    let mut touched = api.get("web").await.expect("get");
    touched
        .metadata
        .labels
        .get_or_insert_default()
        .insert("touched".into(), "yes".into());
    api.replace("web", &PostParams::default(), &touched)
        .await
        .expect("another writer");
    let again = update_status_from(&api, &cached, set_replicas(3))
        .await
        .expect("written after a fresh read")
        .expect("changed");
    assert_eq!(again.status.as_ref().map(|s| s.replicas), Some(3));
    let stored = api.get("web").await.expect("get");
    assert_eq!(stored.status.as_ref().map(|s| s.replicas), Some(3));
    assert_eq!(
        stored
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("touched"))
            .map(String::as_str),
        Some("yes")
    );
}
