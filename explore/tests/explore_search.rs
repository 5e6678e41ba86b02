//! The search on a small controller with a finalizer and an outside system: every ConfigMap
//! labelled `role=source` gets an outside record `<name>` holding its `key`, kept equal to it;
//! a finalizer holds the ConfigMap until the record is gone.
//!
//! The correct controller passes the whole search (no false alarm); a controller that removes
//! the finalizer before it deletes the outside record leaks the record when it crashes between
//! the two, and the explorer finds that and shrinks it to one crash.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferrokube_client::api::{DeleteParams, PostParams};
use ferrokube_client::{Api, Client};
use ferrokube_core::Scope;
use ferrokube_explore::{
    BoxError, Budget, ControllerStart, Exploration, Fault, OutsideClient, Point, Scenario,
    Searched, Step, Violation,
};
use ferrokube_runtime::controller::finalizer::{finalize, remove_finalizer};
use ferrokube_runtime::controller::{Action, Context, Controller, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const NAMESPACE: &str = "default";
const FINALIZER: &str = "explore.ferrokube.dev/record";

/// Keeps outside record `<name>` equal to the source's `key`.
struct Records {
    outside: OutsideClient,
    /// The bug: remove the finalizer first, then delete the record.
    finalizer_first: bool,
}

fn value_of(source: &ConfigMap) -> String {
    source
        .data
        .as_ref()
        .and_then(|data| data.get("key"))
        .cloned()
        .unwrap_or_default()
}

fn name_of(source: &ConfigMap) -> String {
    source.metadata.name.clone().unwrap_or_default()
}

impl Reconciler<ConfigMap> for Records {
    type Error = BoxError;

    async fn reconcile(&self, source: Arc<ConfigMap>, ctx: Context) -> Result<Action, BoxError> {
        let api = ctx.api_in_primary_namespace::<ConfigMap>();
        let outside = &self.outside;
        if self.finalizer_first && source.metadata.deletion_timestamp.is_some() {
            remove_finalizer(&api, &source, FINALIZER).await?;
            outside.delete(&name_of(&source)).await?;
            return Ok(Action::await_change());
        }
        finalize(
            &api,
            FINALIZER,
            source,
            |source| async move {
                let (name, value) = (name_of(&source), value_of(&source));
                if outside.get(&name).await?.as_deref() != Some(value.as_str()) {
                    outside.put(&name, &value).await?;
                }
                Ok::<_, BoxError>(())
            },
            |source| async move {
                outside.delete(&name_of(&source)).await?;
                Ok(())
            },
        )
        .await
        .map_err(|error| -> BoxError { error.to_string().into() })?;
        Ok(Action::await_change())
    }
}

async fn run_controller(start: ControllerStart, finalizer_first: bool) {
    let ControllerStart {
        client,
        shutdown,
        outside,
        ..
    } = start;
    let sources = Scope::namespace(NAMESPACE).labels("role=source");
    let reconciler = Records {
        outside,
        finalizer_first,
    };
    if let Err(error) = Controller::<ConfigMap>::new(client, sources)
        .run(reconciler, shutdown)
        .await
    {
        tracing::warn!(%error, "the records controller stopped with an error");
    }
}

fn api(client: Client) -> Api<ConfigMap> {
    Api::namespaced(client, NAMESPACE)
}

fn create(name: &'static str, value: &'static str) -> Step {
    Step::new(format!("create {name}"), move |client| async move {
        let source = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([("role".into(), "source".into())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("key".into(), value.into())])),
            ..ConfigMap::default()
        };
        api(client).create(&PostParams::default(), &source).await?;
        Ok(())
    })
}

fn edit(name: &'static str, value: &'static str) -> Step {
    Step::new(format!("set {name} to {value}"), move |client| async move {
        let api = api(client);
        let mut object = api.get(name).await?;
        object.data = Some(BTreeMap::from([("key".into(), value.into())]));
        api.replace(name, &PostParams::default(), &object).await?;
        Ok(())
    })
}

fn delete(name: &'static str) -> Step {
    Step::new(format!("delete {name}"), move |client| async move {
        api(client).delete(name, &DeleteParams::default()).await?;
        Ok(())
    })
}

fn scenario() -> Scenario {
    Scenario::new()
        .step(create("a", "1"))
        .step(create("b", "1"))
        .step(edit("a", "2"))
        .step(delete("a"))
        .step(delete("b"))
}

fn exploration(finalizer_first: bool) -> Exploration {
    Exploration::new(
        move |start| run_controller(start, finalizer_first),
        scenario,
    )
    .seed(29)
    .leaves_nothing_behind()
    .budget(Budget::runs(400))
}

/// The safety invariant of this controller: an outside record exists only while its source
/// does (the finalizer holds the source until the record is gone).
fn no_orphan_record(world: &ferrokube_explore::World) -> Result<(), String> {
    for name in world.outside().keys() {
        if world
            .get("configmaps", &format!("{NAMESPACE}/{name}"))
            .is_none()
        {
            return Err(format!("record {name} has no source"));
        }
    }
    Ok(())
}

#[test]
fn explore_the_correct_controller_passes_the_search() {
    // Twice the default budget: every single-fault candidate, then twice its random plans.
    let report = exploration(false)
        .invariant("no orphan record", no_orphan_record)
        .budget(Budget::every_candidate(
            2 * ferrokube_explore::search::DEFAULT_RANDOM_PLANS,
        ))
        .check();
    println!(
        "{} runs ({} candidates, {} points) in {:.1} s: {:.1} runs/s",
        report.runs,
        report.candidates,
        report.points,
        report.elapsed.as_secs_f64(),
        report.runs_per_second()
    );
    // Every single-fault candidate was tried.
    assert_eq!(report.covered, report.candidates, "{report:?}");
}

#[test]
fn explore_finds_the_finalizer_removed_before_the_outside_cleanup() {
    let found = match exploration(true).explore() {
        Err(Searched::Found(found)) => found,
        Err(other) => panic!("{other}"),
        Ok(report) => panic!("nothing found in {report:?}"),
    };
    println!("{found}");
    assert!(
        matches!(found.violation, Violation::LeftBehind { .. }),
        "{found}"
    );
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(
            found.plan.faults[0],
            Fault::CrashAfter(Point::Request(_)) | Fault::CrashBefore(Point::Outside(_))
        ),
        "{found}"
    );
    // With the invariant, the fault-free run already breaks it, between the finalizer's removal
    // and the record's deletion: found with no fault at all.
    match exploration(true)
        .invariant("no orphan record", no_orphan_record)
        .explore()
    {
        Err(Searched::Found(found)) => {
            assert!(found.plan.is_empty(), "{found}");
            assert!(
                matches!(&found.violation, Violation::Invariant { name, .. } if name == "no orphan record"),
                "{found}"
            );
        }
        other => panic!("the invariant did not break: {other:?}"),
    }
    // The plan replays: the same violation, from the text the report printed.
    let replayed = exploration(true).replay(&found.plan.to_string());
    match replayed {
        Ok((Some(violation), outcome)) => {
            assert_eq!(violation, found.violation);
            // A run with faults repeats exactly too: the same trace, entry for entry.
            if let Some(difference) = outcome.trace.first_difference(&found.outcome.trace) {
                panic!("the replay differs from the found run at {difference}");
            }
        }
        Ok((None, outcome)) => panic!("the replay passed:\n{}", outcome.trace),
        Err(error) => panic!("{error}"),
    }
}
