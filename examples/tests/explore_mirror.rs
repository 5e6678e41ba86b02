//! The Mirror-like controller under the fault explorer (issue 46: "the correct samples and the
//! Mirror-like controller stay clean", "no false alarm on the correct samples with twice the
//! default budget").
//!
//! The controller is the one a new author wrote from the README and the API docs (issue 44,
//! `ferrokube_testkit::mirror`, shared with the runtime's author-trap test, not copied): a
//! `Mirror` copies one ConfigMap of its namespace into every namespace whose labels its selector
//! matches, keeps a finalizer that removes the copies, and reports `Ready` and `status.copies`
//! at the Mirror's generation. It reads two kinds through caches besides its own (ConfigMaps,
//! through an index and a label; Namespaces), so the search tries the lasting faults of a join
//! too (a partitioned watch, a lagging replica) besides every one-moment fault.
//!
//! Two searches, each every single-fault candidate then twice the default budget's random plans,
//! seed fixed, which must find nothing:
//!
//! - **following**: namespaces and the source, the Mirror, an edit of the source, a copy deleted
//!   behind the controller's back, namespaces relabelled (one joins the selector, one leaves).
//!   Once the world is quiet: exactly the selected namespaces hold a copy, each with the
//!   source's data, and the Mirror is Ready at its generation counting them. At every change: the
//!   source itself is never made a copy (a Mirror never targets its own namespace).
//! - **deletion**: the Mirror made, then deleted: nothing the controller created is left, nothing
//!   is stuck terminating (the finalizer ran and went).

use std::collections::BTreeSet;

use ferrokube::Api;
use ferrokube::api::{DeleteParams, PostParams};
use ferrokube::explore::{
    Budget, ControllerStart, Exploration, Report, Scenario, Searched, Step, Violation, World,
    search,
};
use ferrokube::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use ferrokube_examples::mutants::bench;
use ferrokube_testkit::mirror::{self, Mirror, MirrorSpec};
use serde_json::{Value, json};

/// The seed of both searches.
const SEED: u64 = 44;
/// The Mirror's (and its source's) namespace.
const HOME: &str = "default";
/// The source ConfigMap's name, and so every copy's.
const SOURCE: &str = "settings";
/// The world's name of the Mirror kind.
const MIRRORS: &str = "mirrors.example.com";
/// On each copy: the Mirror that made it (the controller's label).
const FROM: &str = "mirror.example.com/from";
/// The sample's name in the benchmark lines.
const SAMPLE: &str = "mirror";

/// The controller as its author runs it.
async fn controller(start: ControllerStart) {
    if let Err(error) = mirror::run(start.client, start.shutdown).await {
        tracing::warn!(%error, "the Mirror controller stopped with an error");
    }
}

fn namespace(name: &str, team: &str) -> Result<Namespace, serde_json::Error> {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"team": team}}}))
}

fn source(value: &str) -> Result<ConfigMap, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": SOURCE, "namespace": HOME},
        "data": {"k": value},
    }))
}

/// Namespaces a1, a2 (team a) and b1 (team b), and the source with k=1.
fn world_step() -> Step {
    Step::new(
        "create namespaces a1, a2 (team a), b1 (team b) and the source (k=1)",
        |client| async move {
            let namespaces = Api::<Namespace>::all(client.clone());
            for (name, team) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
                namespaces
                    .create(&PostParams::default(), &namespace(name, team)?)
                    .await?;
            }
            Api::<ConfigMap>::namespaced(client, HOME)
                .create(&PostParams::default(), &source("1")?)
                .await?;
            Ok(())
        },
    )
}

/// Mirror m: the source into every team-a namespace.
fn mirror_step() -> Step {
    Step::new("create mirror m (team=a)", |client| async move {
        let spec = MirrorSpec {
            source: SOURCE.into(),
            targets: "team=a".into(),
        };
        Api::<Mirror>::namespaced(client, HOME)
            .create(&PostParams::default(), &Mirror::new("m", spec))
            .await?;
        Ok(())
    })
}

/// The following scenario: see the module docs.
fn following() -> Scenario {
    Scenario::new()
        .step(world_step())
        .step(mirror_step())
        .step(Step::new("edit the source (k=2)", |client| async move {
            Api::<ConfigMap>::namespaced(client, HOME)
                .replace(SOURCE, &PostParams::default(), &source("2")?)
                .await?;
            Ok(())
        }))
        .step(
            Step::new("delete the copy in a1", |client| async move {
                // The copy may not be there yet under a fault (the controller is late): then
                // there is nothing to delete, which is no failure of the step.
                Api::<ConfigMap>::namespaced(client, "a1")
                    .delete_opt(SOURCE, &DeleteParams::default())
                    .await?;
                Ok(())
            })
            .by("someone-else"),
        )
        .step(Step::new(
            "relabel: b1 joins team a, a2 leaves it",
            |client| async move {
                let namespaces = Api::<Namespace>::all(client);
                for (name, team) in [("b1", "a"), ("a2", "b")] {
                    namespaces
                        .replace(name, &PostParams::default(), &namespace(name, team)?)
                        .await?;
                }
                Ok(())
            },
        ))
}

/// The deletion scenario: see the module docs.
fn deletion() -> Scenario {
    Scenario::new()
        .step(world_step())
        .step(mirror_step())
        .step(Step::new("delete mirror m", |client| async move {
            Api::<Mirror>::namespaced(client, HOME)
                .delete("m", &DeleteParams::default())
                .await?;
            Ok(())
        }))
}

/// Safety, at every change: the source never becomes a copy (no Mirror targets its own
/// namespace).
fn source_is_never_a_copy(world: &World) -> Result<(), String> {
    match world.get("configmaps", &format!("{HOME}/{SOURCE}")) {
        Some(source) if source["metadata"]["labels"].get(FROM).is_some() => Err(format!(
            "the source {HOME}/{SOURCE} carries {FROM}={}",
            source["metadata"]["labels"][FROM]
        )),
        _ => Ok(()),
    }
}

/// Liveness, once the world is quiet: every Mirror's copies are exactly in the namespaces its
/// selector picks (its own excluded), each with the source's data, and its status counts them.
fn copies_follow(world: &World) -> Result<(), String> {
    for (key, mirror) in world.objects(MIRRORS) {
        let from = key.replace('/', ".");
        let (selector_key, selector_value) = mirror["spec"]["targets"]
            .as_str()
            .and_then(|targets| targets.split_once('='))
            .ok_or_else(|| format!("mirror {key} has no key=value selector"))?;
        let wanted: BTreeSet<&str> = world
            .objects("namespaces")
            .filter(|(_, ns)| ns["metadata"]["labels"][selector_key] == selector_value)
            .map(|(name, _)| name)
            .filter(|name| *name != HOME)
            .collect();
        let copies: BTreeSet<&str> = world
            .objects("configmaps")
            .filter(|(_, cm)| cm["metadata"]["labels"][FROM] == from.as_str())
            .filter_map(|(key, _)| key.split_once('/').map(|(ns, _)| ns))
            .collect();
        if copies != wanted {
            return Err(format!(
                "mirror {key}: copies in {copies:?}, the selector picks {wanted:?}"
            ));
        }
        let data = world
            .get("configmaps", &format!("{HOME}/{SOURCE}"))
            .map(|source| source["data"].clone())
            .unwrap_or(Value::Null);
        for ns in &copies {
            let copy = world.get("configmaps", &format!("{ns}/{SOURCE}"));
            if copy.map(|copy| &copy["data"]) != Some(&data) {
                return Err(format!(
                    "the copy in {ns} holds {}, the source {data}",
                    copy.map_or(Value::Null, |copy| copy["data"].clone())
                ));
            }
        }
        let counted = mirror["status"]["copies"].as_u64();
        if counted != u64::try_from(wanted.len()).ok() {
            return Err(format!(
                "mirror {key} counts {counted:?} copies, {} are wanted",
                wanted.len()
            ));
        }
    }
    Ok(())
}

/// Liveness, once the world is quiet: every copy's Mirror exists.
fn no_orphan_copies(world: &World) -> Result<(), String> {
    for (key, cm) in world.objects("configmaps") {
        if let Some(from) = cm["metadata"]["labels"][FROM].as_str() {
            let mirror = from.replacen('.', "/", 1);
            if world.get(MIRRORS, &mirror).is_none() {
                return Err(format!("the copy {key} outlived its mirror {mirror}"));
            }
        }
    }
    Ok(())
}

/// Twice the default budget: every single-fault candidate, then twice its random plans.
fn twice_the_default() -> Budget {
    Budget::every_candidate(2 * search::DEFAULT_RANDOM_PLANS)
}

fn exploration(scenario: fn() -> Scenario) -> Exploration {
    Exploration::new(controller, scenario)
        .custom_resource::<Mirror>()
        .seed(SEED)
        .invariant("the source is never a copy", source_is_never_a_copy)
        .budget(twice_the_default())
}

/// Runs `search`, which must find nothing and use its whole budget; prints a raw benchmark line.
fn passes(case: &str, search: &Exploration) -> Report {
    let report = search.check();
    println!("{case}: {report}");
    bench::print(&bench::clean_line(
        SAMPLE,
        case,
        bench::TWICE_THE_DEFAULT,
        &report,
    ));
    assert_eq!(report.covered, report.candidates, "{report:?}");
    assert_eq!(
        report.runs,
        1 + report.candidates + 2 * search::DEFAULT_RANDOM_PLANS,
        "{report:?}"
    );
    report
}

#[test]
fn explore_mirror_follows_its_source_and_namespaces_under_every_fault() {
    let search = exploration(following)
        .eventually("every mirror's copies follow", copies_follow)
        .ready_at_generation(MIRRORS);
    passes("correct, following", &search);
}

#[test]
fn explore_mirror_deleted_leaves_nothing_behind_under_every_fault() {
    let search = exploration(deletion)
        .eventually("no copy without its mirror", no_orphan_copies)
        .leaves_nothing_behind();
    passes("correct, deletion", &search);
}

/// The oracles are not blind: a controller that does nothing fails them without a fault (the
/// Mirror never gets its copies), where a search of it would otherwise pass.
#[test]
fn explore_mirror_oracles_catch_a_controller_that_does_nothing() {
    let idle = Exploration::new(|start: ControllerStart| start.shutdown, following)
        .custom_resource::<Mirror>()
        .seed(SEED)
        .eventually("every mirror's copies follow", copies_follow)
        .budget(Budget::runs(1));
    match idle.explore() {
        Err(Searched::Found(found)) => {
            assert!(found.plan.is_empty(), "{found}");
            assert!(
                matches!(&found.violation, Violation::Liveness { last, .. }
                    if last.contains("copies in {}")),
                "{found}"
            );
        }
        Ok(report) => panic!("an idle controller passed: {report}"),
        Err(other) => panic!("{other}"),
    }
    let orphan = Exploration::new(
        |start: ControllerStart| start.shutdown,
        || {
            Scenario::new().step(Step::new("a copy nobody owns", |client| async move {
                let mut copy = source("1")?;
                copy.metadata.name = Some("orphan".into());
                copy.metadata.labels = Some([(FROM.to_string(), "default.m".to_string())].into());
                Api::<ConfigMap>::namespaced(client, HOME)
                    .create(&PostParams::default(), &copy)
                    .await?;
                Ok(())
            }))
        },
    )
    .seed(SEED)
    .eventually("no copy without its mirror", no_orphan_copies)
    .budget(Budget::runs(1));
    assert!(
        matches!(orphan.explore(), Err(Searched::Found(found)) if found.plan.is_empty()),
        "an orphan copy passed"
    );
}
