//! The fault explorer (`ferrokube::explore`, issue 29) against the Bucket sample: each of its five
//! mutants (`ferrokube_examples::bucket::mutant`) is found within a fixed run budget, and the
//! correct controller passes the same searches with nothing found (no false alarm).
//!
//! ```text
//!  Exploration ── per run: embedded server (the Bucket type registered), one thread, virtual clock
//!     │  controller: bucket::controller::run(start.client, BucketController<OutsideStore>)
//!     │                 └─ OutsideStore: the BucketStore seam over start.outside, so every store
//!     │                    call is a point the explorer can crash at, and every stored bucket is
//!     │                    a record its oracles see
//!     │  scenario "deletion": create Bucket a ─▶ delete it      (nothing may be left behind;
//!     │                                                         at most one child per Bucket)
//!     │  scenario "status":   create Bucket a ─▶ another operator adds a condition ─▶ the
//!     │                       namespace gets a region label     (end state as the fault-free run's)
//!     ▼
//!  Searched::Found { plan, violation, runs, elapsed }, or a Report with nothing found
//! ```
//!
//! Every search has a budget counted in runs and a fixed seed, so what it finds is the same on every machine;
//! the time it takes is printed (`--nocapture`), in release and debug builds alike:
//!
//! ```sh
//! cargo test --release -p ferrokube-examples --test explore_mutants_bucket -- --nocapture
//! ```

use std::time::Duration;

use ferrokube::Api;
use ferrokube::api::{DeleteParams, Patch, PatchParams, PostParams};
use ferrokube::apiserver::ApiServer;
use ferrokube::apiserver::crd::served_types;
use ferrokube::controller::conditions::{ConditionBuilder, set_condition, update_status};
use ferrokube::explore::{
    Budget, ControllerStart, Exploration, Explorer, Fault, Found, Normalizer, OutsideClient, Point,
    Scenario, Searched, Step, Violation, World,
};
use ferrokube::k8s_openapi::api::core::v1::Namespace;
use ferrokube_examples::bucket::controller::{self, BucketController, REGION_LABEL};
use ferrokube_examples::bucket::mutant::Mutant;
use ferrokube_examples::bucket::resource::{Bucket, BucketSpec};
use ferrokube_examples::bucket::store::{BucketStore, StoreError, StoredBucket};
use ferrokube_examples::mutants::bench;
use serde_json::{Value, json};

/// The seed of every search here.
const SEED: u64 = 29;
/// The random plans after every single-fault candidate when the correct controller is searched:
/// twice the default budget's. A mutant is searched under the default budget.
const CLEAN_RANDOM_PLANS: usize = 2 * ferrokube::explore::search::DEFAULT_RANDOM_PLANS;
/// The sample's name in the benchmark lines.
const SAMPLE: &str = "bucket";
/// The namespace of the Buckets (the server makes it at start).
const NS: &str = "default";
/// The controller never polls the store within a run: whatever it does, an event made it.
const NO_POLL: Duration = Duration::from_secs(3600);
/// How the world's objects of the Bucket kind are named.
const BUCKETS: &str = "buckets.storage.ferrokube.dev";

/// The Bucket store as the explorer's outside system: one record per stored bucket, named as
/// the store names it, holding the [`StoredBucket`] as JSON. A call of a crashed incarnation
/// fails, as a dead process's would.
struct OutsideStore(OutsideClient);

fn store_error(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError(Box::new(error))
}

impl BucketStore for OutsideStore {
    async fn get(&self, name: &str) -> Result<Option<StoredBucket>, StoreError> {
        match self.0.get(name).await.map_err(store_error)? {
            Some(json) => serde_json::from_str(&json).map(Some).map_err(store_error),
            None => Ok(None),
        }
    }

    async fn put(&self, name: &str, bucket: StoredBucket) -> Result<(), StoreError> {
        let json = serde_json::to_string(&bucket).map_err(store_error)?;
        self.0.put(name, &json).await.map_err(store_error)
    }

    /// Only the owner's: a look, then the delete.
    async fn delete(&self, name: &str, owner_uid: &str) -> Result<bool, StoreError> {
        match self.get(name).await? {
            Some(stored) if stored.owner_uid == owner_uid => {
                self.0.delete(name).await.map_err(store_error)
            }
            _ => Ok(false),
        }
    }
}

/// One incarnation of the controller, with `mutant` switched on (or none).
async fn run_controller(start: ControllerStart, mutant: Option<Mutant>) {
    let ControllerStart {
        client,
        shutdown,
        outside,
        ..
    } = start;
    let mut reconciler = BucketController::new(OutsideStore(outside), NO_POLL);
    reconciler.mutant = mutant;
    if let Err(error) = controller::run(client, reconciler, shutdown).await {
        tracing::warn!(%error, "the bucket controller stopped with an error");
    }
}

/// The embedded server of every run serves the Bucket kind from the start, as `Bucket::crd()`
/// describes it (schema, status subresource, generation), so the controller's first list finds
/// it and no step has to wait for a CRD to be established.
fn serving_buckets(server: ApiServer) -> ApiServer {
    let crd = serde_json::to_value(Bucket::crd()).expect("the CRD serialises");
    served_types(&crd, false)
        .into_iter()
        .fold(server, ApiServer::register)
}

fn buckets(client: ferrokube::Client) -> Api<Bucket> {
    Api::namespaced(client, NS)
}

fn create(name: &'static str) -> Step {
    Step::new(format!("create Bucket {name}"), move |client| async move {
        let spec = BucketSpec {
            retention_days: 30,
            versioned: false,
        };
        buckets(client)
            .create(&PostParams::default(), &Bucket::new(name, spec))
            .await?;
        Ok(())
    })
}

fn delete(name: &'static str) -> Step {
    Step::new(format!("delete Bucket {name}"), move |client| async move {
        buckets(client)
            .delete(name, &DeleteParams::default())
            .await?;
        Ok(())
    })
}

fn label_namespace(region: &'static str) -> Step {
    Step::new(
        format!("label {NS} {REGION_LABEL}={region}"),
        move |client| async move {
            let label = Patch::Merge(json!({"metadata": {"labels": {REGION_LABEL: region}}}));
            Api::<Namespace>::all(client)
                .patch(NS, &PatchParams::default(), &label)
                .await?;
            Ok(())
        },
    )
}

/// Another operator (a backup system) writes its own condition into the Bucket's status, the
/// way a well-behaved writer does: read fresh, change its own condition, write with the
/// resourceVersion read.
fn backed_up(name: &'static str) -> Step {
    Step::new(
        format!("the backup operator marks {name} BackedUp"),
        move |client| async move {
            let condition = ConditionBuilder::from_bool("BackedUp", true)
                .reason("Snapshot")
                .message("nightly snapshot taken")
                .build();
            update_status(&buckets(client), name, |bucket: &mut Bucket| {
                let status = bucket.status.get_or_insert_default();
                set_condition(&mut status.conditions, condition.clone())
            })
            .await?;
            Ok(())
        },
    )
    .by("backup-operator")
}

/// The runner of every search: the Bucket kind served, and 2 s (virtual) between steps, so that a
/// delayed event (the search delays by 4 s) is still late when the next step acts.
fn explorer() -> Explorer {
    Explorer::new(SEED)
        .server(serving_buckets)
        .settle(Duration::from_secs(2))
}

/// Two rules on top of the default normalisation, for what differs between two good runs:
///
/// - a stored bucket's record holds its owner's uid, which is drawn at random (and moves when a
///   fault moves other random draws);
/// - `status.conditions` is a list keyed by `type` (the API convention for conditions, `listType:
///   map`): its order says which writer came first, not what the status is. A run whose
///   controller started late writes Ready after another operator's condition, not before.
fn normalizer() -> Normalizer {
    Normalizer::default()
        .outside_rule(|_, value| {
            if let Ok(mut stored) = serde_json::from_str::<Value>(value) {
                stored["ownerUid"] = "<uid>".into();
                *value = stored.to_string();
            }
        })
        .rule(|_, object| {
            let conditions = object.pointer_mut("/status/conditions");
            if let Some(conditions) = conditions.and_then(Value::as_array_mut) {
                conditions.sort_by(|a, b| a["type"].to_string().cmp(&b["type"].to_string()));
            }
        })
}

/// Safety: at any moment, no Bucket has two child ConfigMaps (its controller owner reference
/// names it).
fn at_most_one_child(world: &World) -> Result<(), String> {
    let mut children: Vec<(&str, &str)> = Vec::new();
    for (key, object) in world.objects("configmaps") {
        let owners = object["metadata"]["ownerReferences"].as_array();
        for owner in owners.into_iter().flatten() {
            if owner["kind"] == "Bucket" && owner["controller"] == true {
                let uid = owner["uid"].as_str().unwrap_or_default();
                if let Some((_, first)) = children.iter().find(|(owner, _)| *owner == uid) {
                    return Err(format!(
                        "Bucket {} has two ConfigMaps: {first} and {key}",
                        owner["name"]
                    ));
                }
                children.push((uid, key));
            }
        }
    }
    Ok(())
}

/// The deletion search: a Bucket is made and deleted; nothing may be left behind (the
/// ConfigMap, a finalizer, the stored bucket), and no Bucket may ever have two children.
fn deletion(mutant: Option<Mutant>) -> Exploration {
    Exploration::new(
        move |start| run_controller(start, mutant),
        || Scenario::new().step(create("a")).step(delete("a")),
    )
    .explorer(explorer())
    .seed(SEED)
    .normalizer(normalizer())
    .invariant("at most one child ConfigMap per Bucket", at_most_one_child)
    .leaves_nothing_behind()
    .budget(budget(mutant))
}

/// The status search: a Bucket is made, another operator adds its condition, the namespace gets
/// a region; the end state must be the fault-free run's (the Bucket Ready in eu-west, with both
/// conditions).
fn status(mutant: Option<Mutant>) -> Exploration {
    Exploration::new(
        move |start| run_controller(start, mutant),
        || {
            Scenario::new()
                .step(create("a"))
                .step(backed_up("a"))
                .step(label_namespace("eu-west"))
        },
    )
    .explorer(explorer())
    .seed(SEED)
    .normalizer(normalizer())
    .invariant("at most one child ConfigMap per Bucket", at_most_one_child)
    .budget(budget(mutant))
}

/// A mutant is searched under the default budget, the correct controller under every candidate
/// and twice the default's random plans.
fn budget(mutant: Option<Mutant>) -> Budget {
    match mutant {
        Some(_) => Budget::default(),
        None => Budget::every_candidate(CLEAN_RANDOM_PLANS),
    }
}

/// Runs `search`, which must find something; prints what, how fast, and the plan.
fn found(what: &str, search: Exploration) -> Box<Found> {
    let found = match search.explore() {
        Err(Searched::Found(found)) => found,
        Err(other) => panic!("{what}: {other}"),
        Ok(report) => panic!("{what}: nothing found in {report:?}"),
    };
    println!(
        "{what}: found in {:.2} s, {} runs ({:.1} runs/s); {} violated; plan: {}",
        found.elapsed.as_secs_f64(),
        found.runs,
        found.runs_per_second(),
        found.violation.class(),
        found.plan
    );
    println!("{found}");
    bench::print(&bench::found_line(
        SAMPLE,
        what,
        bench::DEFAULT_BUDGET,
        &found,
    ));
    // The plan replays from its text to the same violation, word for word: a run is a function of
    // its inputs (generated names included: the embedded server draws them from the run's seed).
    match search.replay(&found.plan.to_string()) {
        Ok((Some(again), _)) => assert_eq!(
            again.to_string(),
            found.violation.to_string(),
            "{what}: the replay differs"
        ),
        Ok((None, outcome)) => panic!("{what}: the replay passed:\n{}", outcome.trace),
        Err(error) => panic!("{what}: the replay could not run: {error}"),
    }
    found
}

/// Runs `search` on the correct controller: it must find nothing, and must have used its whole
/// budget (every single fault of the systematic phase, then twice the default's random plans).
fn passes(what: &str, search: Exploration) {
    let report = search.check();
    println!(
        "{what}: nothing found in {} runs ({} candidates, {} points) in {:.2} s: {:.1} runs/s",
        report.runs,
        report.candidates,
        report.points,
        report.elapsed.as_secs_f64(),
        report.runs_per_second()
    );
    bench::print(&bench::clean_line(
        SAMPLE,
        what,
        bench::TWICE_THE_DEFAULT,
        &report,
    ));
    assert_eq!(report.covered, report.candidates, "{report:?}");
    assert_eq!(
        report.runs,
        1 + report.candidates + CLEAN_RANDOM_PLANS,
        "{report:?}"
    );
}

/// What was left behind, as the oracle listed it.
fn left_behind(found: &Found) -> &[String] {
    match &found.violation {
        Violation::LeftBehind { what } => what,
        other => panic!("not a leftover: {other}\n{found}"),
    }
}

#[test]
fn explore_bucket_correct_controller_passes_the_deletion_search() {
    passes("correct controller, deletion search", deletion(None));
}

#[test]
fn explore_bucket_correct_controller_passes_the_status_search() {
    passes("correct controller, status search", status(None));
}

#[test]
fn explore_bucket_finds_the_finalizer_removed_before_the_cleanup() {
    let found = found(
        "FinalizerRemovedBeforeCleanup",
        deletion(Some(Mutant::FinalizerRemovedBeforeCleanup)),
    );
    let left = left_behind(&found);
    assert!(
        left.len() == 1 && left[0].starts_with("outside record default.a="),
        "the stored bucket leaks, and only it: {found}"
    );
    // One crash between the two writes: after the finalizer's removal took effect, or just
    // before the store's delete.
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(
            found.plan.faults[0],
            Fault::CrashAfter(Point::Request(_))
                | Fault::CrashBefore(Point::Outside(_))
                | Fault::CrashAfter(Point::Outside(_))
        ),
        "{found}"
    );
}

#[test]
fn explore_bucket_finds_a_generated_child_created_twice() {
    let found = found(
        "GeneratedChildName",
        deletion(Some(Mutant::GeneratedChildName)),
    );
    assert!(
        matches!(&found.violation, Violation::Invariant { name, .. } if name == "at most one child ConfigMap per Bucket"),
        "{found}"
    );
    // One crash, after the create took effect and before the name was recorded.
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(found.plan.faults[0], Fault::CrashAfter(Point::Request(_))),
        "{found}"
    );
}

#[test]
fn explore_bucket_finds_a_cleanup_only_on_the_delete_event() {
    let found = found(
        "CleanupOnDeleteEvent",
        deletion(Some(Mutant::CleanupOnDeleteEvent)),
    );
    let left = left_behind(&found);
    assert!(
        left.len() == 1 && left[0].starts_with("outside record default.a="),
        "the stored bucket leaks, and only it: {found}"
    );
    // One crash that makes the incarnation that would have seen the deletion miss it.
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(found.plan.faults[0].restarts(), "{found}");
}

#[test]
fn explore_bucket_finds_a_missing_owner_reference() {
    let found = found("NoOwnerReference", deletion(Some(Mutant::NoOwnerReference)));
    let left = left_behind(&found);
    assert_eq!(
        left,
        ["configmaps default/a-bucket: created by the controller, still there"],
        "{found}"
    );
    // No fault needed: the oracle looks at what is left when the scenario is over.
    assert!(found.plan.is_empty(), "{found}");
    assert_eq!(found.runs, 1, "{found}");
}

#[test]
fn explore_bucket_finds_a_status_written_from_a_stale_read() {
    let found = found(
        "StatusFromStaleRead",
        status(Some(Mutant::StatusFromStaleRead)),
    );
    let Violation::EndState { differences } = &found.violation else {
        panic!("not an end-state difference: {found}");
    };
    assert!(
        differences.iter().any(|line| line.starts_with(BUCKETS)
            && line.contains("only in the fault-free run")
            && line.contains("BackedUp")),
        "the other operator's condition is lost: {found}"
    );
    // One fault that keeps the other operator's write from the controller's Bucket cache while
    // the namespace's label makes it reconcile.
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(
            found.plan.faults[0],
            Fault::Coalesce(Point::Event(_)) | Fault::Delay { .. }
        ),
        "{found}"
    );
}
