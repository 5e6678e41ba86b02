//! Generated scenarios (`ferrokube::explore::generate`, issue 46 item 3), as a test: the code
//! between the `README` markers is the block of the guide's explorer chapter
//! (`docs/src/explorer.md`), character for character (the second test checks).
//!
//! A Pool keeps a ConfigMap `<name>-pool` holding its spec. The generator draws edits of the
//! Pool from its schema (replicas at 0, 1, 4, 5; tags appended, dropped, reversed, filled to 3,
//! emptied; the note set to "", "a", 8 characters, removed; the Pool deleted and re-created);
//! the exploration searches faults over them with a liveness oracle ("the ConfigMap eventually
//! mirrors the spec") and `ready_at_generation`. The correct controller passes; two mutants, each
//! mishandling one boundary, are found and shrunk to a sequence of one or two edits that replays
//! word for word.

// README:begin
use std::collections::BTreeMap;
use std::sync::Arc;

use ferrokube::CustomResource;
use ferrokube::controller::conditions::{ConditionBuilder, set_condition, update_status};
use ferrokube::controller::owner::create_or_update;
use ferrokube::controller::{Action, Context, Controller, Reconciler};
use ferrokube::explore::{Budget, ControllerStart, Exploration, Generated, Generator};
use ferrokube::informer::Scope;
use ferrokube::k8s_openapi::api::core::v1::ConfigMap;
use ferrokube::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A pool of workers; its controller keeps the ConfigMap `<name>-pool` equal to the spec.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[resource(
    group = "example.ferrokube.dev",
    version = "v1",
    kind = "Pool",
    namespaced,
    status = "PoolStatus"
)]
pub struct PoolSpec {
    #[schemars(range(min = 0, max = 5))]
    pub replicas: i32,
    #[serde(default)]
    #[schemars(length(max = 3))]
    pub tags: Vec<String>,
    #[schemars(length(max = 8))]
    pub note: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PoolStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// The bugs a test plants (`None`: the correct controller).
#[derive(Clone, Copy, PartialEq)]
enum Mutant {
    /// Reads `replicas: 0` as "not set" and leaves the ConfigMap's value as it was.
    ZeroIsUnset,
    /// Writes the note when there is one, and never clears it when it is removed.
    KeepsRemovedNote,
    /// Counts spec changes in the ConfigMap, guarded by the Ready condition written after it: a
    /// crash between the two writes counts one change twice (only the end state shows it).
    CountsTwice,
}

struct Mirror(Option<Mutant>);

impl Reconciler<Pool> for Mirror {
    type Error = Error;
    async fn reconcile(&self, pool: Arc<Pool>, ctx: Context) -> Result<Action, Error> {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let spec = pool.spec.clone();
        let child = format!("{name}-pool");
        let ready_at = |pool: &Pool| {
            let ready = pool.status.iter().flat_map(|s| &s.conditions);
            ready
                .filter(|c| c.type_ == "Ready")
                .find_map(|c| c.observed_generation)
        };
        let new_generation = ready_at(&pool) != pool.metadata.generation;
        create_or_update(
            &ctx.api_in_primary_namespace::<ConfigMap>(),
            &child,
            |cm: &mut ConfigMap| {
                let data = cm.data.get_or_insert_with(BTreeMap::new);
                if !(self.0 == Some(Mutant::ZeroIsUnset) && spec.replicas == 0) {
                    data.insert("replicas".into(), spec.replicas.to_string());
                }
                data.insert("tags".into(), spec.tags.join(","));
                match &spec.note {
                    Some(note) => data.insert("note".into(), note.clone()),
                    None if self.0 == Some(Mutant::KeepsRemovedNote) => None,
                    None => data.remove("note"),
                };
                if self.0 == Some(Mutant::CountsTwice) && new_generation {
                    let count: u32 = data
                        .get("changes")
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    data.insert("changes".into(), (count + 1).to_string());
                }
                Ok::<_, Error>(())
            },
        )
        .await?;
        let ready = ConditionBuilder::from_bool("Ready", true)
            .reason("Mirrored")
            .observed_generation(pool.metadata.generation)
            .build();
        update_status(
            &ctx.api_in_primary_namespace::<Pool>(),
            &name,
            |pool: &mut Pool| {
                set_condition(
                    &mut pool.status.get_or_insert_default().conditions,
                    ready.clone(),
                )
            },
        )
        .await?;
        Ok(Action::await_change())
    }
}

/// The liveness oracle: each Pool's ConfigMap holds its spec, once the world is quiet.
fn mirrors(world: &ferrokube::explore::World) -> Result<(), String> {
    for pool in world.typed::<Pool>("pools.example.ferrokube.dev") {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let cm = world.get("configmaps", &format!("default/{name}-pool"));
        let data = |key: &str| cm?.pointer(&format!("/data/{key}"))?.as_str();
        let spec = &pool.spec;
        if data("replicas") != Some(spec.replicas.to_string().as_str())
            || data("tags") != Some(spec.tags.join(",").as_str())
            || data("note") != spec.note.as_deref()
        {
            return Err(format!(
                "{name}-pool holds {:?}, not {spec:?}",
                cm.map(|cm| &cm["data"])
            ));
        }
    }
    Ok(())
}

/// The controller (or a mutant) with the Pool kind served and the two liveness oracles.
fn exploration(mutant: Option<Mutant>) -> Exploration {
    Exploration::new(
        move |start: ControllerStart| async move {
            let _ = Controller::<Pool>::new(start.client, Scope::namespace("default"))
                .run(Mirror(mutant), start.shutdown)
                .await;
        },
        ferrokube::explore::Scenario::new, // the generated sequence takes its place
    )
    .custom_resource::<Pool>()
    .eventually("the ConfigMap mirrors the spec", mirrors) // judged after every prefix
    .ready_at_generation("pools.example.ferrokube.dev")
    .seed(46)
}

/// 16 edits of the Pool drawn from its schema (seed 46: one sequence), each prefix run without
/// faults, then the whole searched with 40 fault plans; a failing (sequence, plan) is shrunk.
fn generated(mutant: Option<Mutant>) -> Generated {
    let pools = Generator::custom_resource::<Pool>().expect("a schema");
    exploration(mutant)
        .budget(Budget::runs(40))
        .generated(pools, 16)
}

#[test]
fn explore_generated_the_correct_pool_controller_passes() {
    let report = generated(None).check(); // panics with the minimal sequence and plan
    println!("{report}");
}
// README:end

use ferrokube::explore::generate::Edit;
use ferrokube::explore::{Fault, GeneratedFound, GeneratedSearched, Violation};
use serde_json::json;

#[test]
fn explore_generated_the_guide_shows_this_code() {
    let this = include_str!("explore_generated.rs");
    let code = this
        .split("// README:begin\n")
        .nth(1)
        .and_then(|rest| rest.split("// README:end").next())
        .expect("markers");
    let guide = include_str!("../../docs/src/explorer.md");
    assert!(
        guide.contains(code),
        "docs/src/explorer.md's block differs from tests/front/explore_generated.rs"
    );
}

fn found(mutant: Mutant) -> GeneratedFound {
    match generated(Some(mutant)).explore() {
        Err(GeneratedSearched::Found(found)) => *found,
        Err(other) => panic!("{other}"),
        Ok(report) => panic!("nothing found: {report}"),
    }
}

/// The found pair replays word for word: the same violation, the same trace.
fn replays(found: &GeneratedFound, mutant: Mutant) {
    let (violation, outcome) = generated(Some(mutant))
        .replay(&found.sequence.to_string(), &found.plan.to_string())
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(violation.as_ref(), Some(&found.violation));
    assert_eq!(outcome.trace, found.outcome.trace);
}

#[test]
fn explore_generated_finds_replicas_zero_read_as_unset() {
    let found = found(Mutant::ZeroIsUnset);
    println!("{found}");
    assert!(found.plan.is_empty(), "no fault needed: {found}");
    assert!(
        matches!(&found.violation, Violation::Liveness { name, .. } if name == "the ConfigMap mirrors the spec"),
        "{found}"
    );
    // Shrunk from 16 edits to one: a create with replicas 0, every other field simplified away.
    assert_eq!(found.drawn.len(), 16);
    assert_eq!(found.sequence.len(), 1, "{found}");
    assert!(
        matches!(&found.sequence.edits[0], Edit::Create { spec } if spec["replicas"] == json!(0)),
        "{found}"
    );
    replays(&found, Mutant::ZeroIsUnset);
}

#[test]
fn explore_generated_finds_a_removed_note_left_behind() {
    let found = found(Mutant::KeepsRemovedNote);
    println!("{found}");
    assert!(found.plan.is_empty(), "no fault needed: {found}");
    // A create with a note, then its removal: nothing shorter shows the bug.
    assert_eq!(found.sequence.len(), 2, "{found}");
    assert!(
        matches!(&found.sequence.edits[0], Edit::Create { spec } if spec.get("note").is_some())
    );
    assert!(
        matches!(&found.sequence.edits[1], Edit::Remove { path } if path == &["note"]),
        "{found}"
    );
    replays(&found, Mutant::KeepsRemovedNote);
}

#[test]
fn explore_generated_sequences_are_the_seeds() {
    let generator = Generator::custom_resource::<Pool>().expect("a schema");
    let one = generator.sequence(16, 46);
    println!("{one}");
    assert_eq!(one, generator.sequence(16, 46));
    assert_eq!(one.to_string().parse(), Ok(one.clone()));
    // The first edit creates the Pool with every field at a typical value.
    assert_eq!(
        one.edits[0],
        Edit::Create {
            spec: json!({"replicas": 1, "tags": [], "note": "a"})
        }
    );
}

#[test]
fn explore_generated_the_correct_controller_passes_every_single_fault() {
    // A shorter sequence at twice the default budget (every single-fault candidate of it, then
    // twice the default's random plans): no false alarm from any fault class.
    let pools = Generator::custom_resource::<Pool>().expect("a schema");
    let report = exploration(None)
        .budget(Budget::every_candidate(
            2 * ferrokube::explore::search::DEFAULT_RANDOM_PLANS,
        ))
        .generated(pools, 6)
        .check();
    println!("{report}");
    let searched = &report.sequences[0];
    assert_eq!(
        searched.report.covered, searched.report.candidates,
        "{report}"
    );
    assert_eq!(searched.prefix_runs, 6);
}

#[test]
fn explore_generated_steps_the_server_refuses_are_counted_not_failed() {
    // The schema admits level 0; a CEL rule on the spec does not. The generator cannot know,
    // the server refuses the step (422), and the run goes on.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gauges.example.ferrokube.dev"},
        "spec": {
            "group": "example.ferrokube.dev",
            "scope": "Namespaced",
            "names": {"plural": "gauges", "singular": "gauge", "kind": "Gauge", "listKind": "GaugeList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "required": ["level"],
                    "x-kubernetes-validations": [{"rule": "self.level != 0", "message": "0 is reserved"}],
                    "properties": {"level": {"type": "integer", "minimum": 0, "maximum": 3}}
                }}
            }}}]
        }
    });
    let gauges = Generator::from_crd(&crd).expect("a schema");
    let sequence = gauges.sequence(8, 1);
    let zero = sequence
        .edits
        .iter()
        .filter(|edit| matches!(edit, Edit::Set { value, .. } if *value == json!(0)))
        .count();
    assert!(zero > 0, "{sequence}");
    let trace = ferrokube::explore::Explorer::new(1)
        .crd(&crd)
        .run(gauges.scenario(&sequence), |start| start.shutdown)
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(Generator::rejected(&trace), zero, "{trace}");
}

#[test]
fn explore_generated_finds_a_count_that_a_crash_doubles() {
    // No oracle names the count: the differential oracle (end state against the fault-free run
    // of the same sequence) finds it, under a crash after the ConfigMap's write.
    let found = found(Mutant::CountsTwice);
    println!("{found}");
    assert!(
        matches!(found.violation, Violation::EndState { .. }),
        "{found}"
    );
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(found.plan.faults[0], Fault::CrashAfter(_)),
        "{found}"
    );
    assert_eq!(found.sequence.len(), 1, "a create is enough: {found}");
    replays(&found, Mutant::CountsTwice);
}
