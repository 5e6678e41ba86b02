//! The commonest join bug, a missing watch (issue 46), found under the default budget.
//!
//! A controller labels each Pod with the colour of the Group it belongs to (`group=<name>`). It
//! reads Groups from an informer's cache. The correct one also *watches* Groups: a recolour
//! reconciles every Pod. The mutant reads the cache but never reconciles on a Group change, so
//! a Pod follows its Group only when something else touches the Pod.
//!
//! The scenario is written the natural way: create a Group and two Pods; recolour the Group;
//! touch the Pods in the next step. Without a fault the mutant ends right (the touch reconciles
//! the Pods, and by then the Group cache has the new colour), and every fault that leaves the
//! controller's view stale for a moment only (a delayed event, a coalesced one, a restart from
//! a replica that catches up 10 s later) is over before the touch. What exposes it is staleness
//! that lasts as it does in production: the Group watch partitioned from the recolour on, across
//! resumes, until the touch has settled (`partition(1)@event:N`). The Pods are labelled from the
//! stale cache, the recolour arrives later, and the mutant never looks again.
//!
//! A second mutant labels a Pod once and never again (a field change never propagated): its
//! fault-free run already ends wrong, which only the liveness oracle can say (the end-state
//! comparison is relative to that run).
//!
//! A third keeps a count in each Group's status (`status.labelled`, Pods wearing a colour) and
//! bumps it after it labels a Pod, instead of counting: a crash between the label and the bump
//! (`crash-after@request:N`) loses the bump for good (the counter-then-create). The
//! counting colourer and its oracle are separate from the first two searches: each write it adds
//! is one more point, where one-moment faults (a restart from a replica one revision behind)
//! can find the missing watch too.
//!
//! A fourth writes the label with a full update of its cached Pod and, on any failure, sends
//! the same update again at once, forever: after an update that took effect but timed out
//! (`fail(timeout)`), every retry is a 409 Conflict, and the run stops as a runaway.
//!
//! A fifth writes the label with a full update of its cached Pod, resourceVersion cleared so
//! that it never meets a 409 ("last write wins"). Without a fault its cache is fresh when it
//! writes. After a failover whose new leader lists from a replica one revision behind
//! (`restart-lagging(1)@request:N`) it writes its stale copy over the user's touch: a stale read
//! after failover, caught by the end-state comparison (the `touched` annotation is gone).
//!
//! Each search declares both the Group kind (served from the start of every run, from the
//! derive's CRD) and a liveness oracle: once the world is quiet, every Pod carries its Group's
//! colour. That property cannot be an invariant (it is false for a moment after every recolour,
//! in every correct run).

use std::sync::Arc;

use ferrokube::Api;
use ferrokube::CustomResource;
use ferrokube::api::{Patch, PatchParams, PostParams};
use ferrokube::controller::{Action, Context, Controller, Reconciler};
use ferrokube::explore::{
    Budget, ControllerStart, Exploration, Fault, Found, Scenario, Searched, Step, Violation, World,
};
use ferrokube::informer::Scope;
use ferrokube::informer::{Lister, SharedInformerFactory};
use ferrokube::k8s_openapi::api::core::v1::Pod;
use ferrokube_examples::mutants::bench;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

type Error = Box<dyn std::error::Error + Send + Sync>;

const NS: &str = "default";

/// A group of Pods with a colour.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[resource(
    group = "example.ferrokube.dev",
    version = "v1",
    kind = "Group",
    namespaced,
    status = "GroupStatus"
)]
pub struct GroupSpec {
    /// The colour every Pod of the group wears as its `colour` label.
    pub colour: String,
}

/// What the colourer reports about a Group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupStatus {
    /// How many of its Pods wear a colour.
    #[serde(default)]
    pub labelled: i64,
}

/// The bugs planted in the colourer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutant {
    /// Reads Groups from a cache but never reconciles on a Group change.
    MissingWatch,
    /// Labels a Pod once and never again: a change of the Group's colour is never propagated.
    NeverPropagates,
    /// Keeps `status.labelled` as a counter bumped after each first label (read fresh, so no
    /// lost update without a fault), rather than counting: a crash between the label and the
    /// bump loses the bump for good.
    CounterAfterWrite,
    /// Writes the label with a full update of the cached Pod, and on a failure sends the same
    /// update again at once, forever: a stale cache (409 Conflict) never ends.
    UnboundedRetry,
    /// Writes the label with a full update of the cached Pod with its resourceVersion cleared
    /// ("last write wins", to be rid of 409s): a copy read from a cache that trails the server
    /// (a new leader listing from a lagging replica) overwrites whatever changed since.
    LastWriteWins,
}

/// Labels each Pod `colour=<its Group's colour>`, reading Groups from `groups`.
struct Colourer {
    groups: Lister<Group>,
    pods: Lister<Pod>,
    /// Whether it keeps `status.labelled` of each Group (the colourer does not: each
    /// write it adds is one more point, where other faults may find the missing watch).
    counts: bool,
    mutant: Option<Mutant>,
}

impl Colourer {
    /// Brings `status.labelled` of `group` up to date after a Pod of it was labelled (`first`:
    /// it wore no colour before).
    async fn count(&self, group: &Group, first: bool, ctx: &Context) -> Result<(), Error> {
        let name = group.metadata.name.clone().unwrap_or_default();
        let api = Api::<Group>::namespaced(ctx.client().clone(), NS);
        let labelled = match self.mutant {
            Some(Mutant::CounterAfterWrite) if !first => return Ok(()),
            Some(Mutant::CounterAfterWrite) => {
                let fresh = api.get(&name).await?;
                fresh.status.unwrap_or_default().labelled + 1
            }
            _ => {
                let colourful = self
                    .pods
                    .list(&Default::default())
                    .into_iter()
                    .filter(|pod| {
                        let labels = pod.metadata.labels.clone().unwrap_or_default();
                        labels.get("group") == Some(&name) && labels.contains_key("colour")
                    });
                i64::try_from(colourful.count()).unwrap_or(i64::MAX)
            }
        };
        if first || group.status.as_ref().map(|status| status.labelled) != Some(labelled) {
            let status = Patch::Merge(json!({"status": {"labelled": labelled}}));
            api.patch_status(&name, &PatchParams::default(), &status)
                .await?;
        }
        Ok(())
    }
}

impl Reconciler<Pod> for Colourer {
    type Error = Error;

    async fn reconcile(&self, pod: Arc<Pod>, ctx: Context) -> Result<Action, Error> {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let Some(group) = labels.get("group") else {
            return Ok(Action::await_change());
        };
        let Some(group) = self.groups.get(Some(NS), group) else {
            return Ok(Action::await_change());
        };
        let colour = &group.spec.colour;
        let labelled = labels.contains_key("colour");
        if self.mutant == Some(Mutant::NeverPropagates) && labelled {
            return Ok(Action::await_change());
        }
        if labels.get("colour") != Some(colour) && self.mutant == Some(Mutant::UnboundedRetry) {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let mut labelled = (*pod).clone();
            labelled
                .metadata
                .labels
                .get_or_insert_default()
                .insert("colour".into(), colour.clone());
            let api = ctx.api_in_primary_namespace::<Pod>();
            while let Err(error) = api.replace(&name, &PostParams::default(), &labelled).await {
                tracing::debug!(%error, "the update failed: again");
            }
        } else if labels.get("colour") != Some(colour) && self.mutant == Some(Mutant::LastWriteWins)
        {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let mut labelled = (*pod).clone();
            labelled.metadata.resource_version = None;
            labelled
                .metadata
                .labels
                .get_or_insert_default()
                .insert("colour".into(), colour.clone());
            ctx.api_in_primary_namespace::<Pod>()
                .replace(&name, &PostParams::default(), &labelled)
                .await?;
        } else if labels.get("colour") != Some(colour) {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let patch = Patch::Merge(json!({"metadata": {"labels": {"colour": colour}}}));
            ctx.api_in_primary_namespace::<Pod>()
                .patch(&name, &PatchParams::default(), &patch)
                .await?;
            if self.counts {
                self.count(&group, !labelled, &ctx).await?;
            }
        } else if self.counts && self.mutant != Some(Mutant::CounterAfterWrite) {
            self.count(&group, false, &ctx).await?;
        }
        Ok(Action::await_change())
    }
}

/// The controller, keeping counts in the Groups' status if `counts`, with `mutant` planted if
/// any.
async fn colourer(start: ControllerStart, counts: bool, mutant: Option<Mutant>) {
    let scope = Scope::namespace(NS);
    let primary = scope.clone().labels("group");
    // The colourer's own factory: the listers it reads and the controller's informers in one.
    let factory = Arc::new(SharedInformerFactory::new(start.client.clone()));
    let groups = factory
        .informer_for::<Group>(&(), &scope, |builder| builder)
        .lister();
    let pods = factory.informer::<Pod>(&primary).lister();
    let mut controller =
        Controller::<Pod>::new(start.client, primary).with_factory(factory.clone());
    if mutant != Some(Mutant::MissingWatch) {
        controller = controller.reconcile_all_on::<Group>(scope);
    }
    let colourer = Colourer {
        groups,
        pods,
        counts,
        mutant,
    };
    if let Err(error) = controller.run(colourer, start.shutdown).await {
        tracing::warn!(%error, "the colourer stopped with an error");
    }
    factory.shutdown();
}

fn pod(name: &str) -> Result<Pod, serde_json::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"group": "g"}},
        "spec": {"containers": [{"name": "app", "image": "example.com/app:1"}]},
    }))
}

/// Create, recolour, touch: no gap tuned to the explorer.
fn scenario() -> Scenario {
    Scenario::new()
        .step(Step::new(
            "create group g (red) and pods a, b",
            |client| async move {
                let group = Group::new(
                    "g",
                    GroupSpec {
                        colour: "red".into(),
                    },
                );
                Api::<Group>::namespaced(client.clone(), NS)
                    .create(&PostParams::default(), &group)
                    .await?;
                for name in ["a", "b"] {
                    Api::<Pod>::namespaced(client.clone(), NS)
                        .create(&PostParams::default(), &pod(name)?)
                        .await?;
                }
                Ok(())
            },
        ))
        .step(Step::new("recolour g blue", |client| async move {
            let blue = Patch::Merge(json!({"spec": {"colour": "blue"}}));
            Api::<Group>::namespaced(client, NS)
                .patch("g", &PatchParams::default(), &blue)
                .await?;
            Ok(())
        }))
        .step(Step::new("touch pods a, b", |client| async move {
            for name in ["a", "b"] {
                let touch = Patch::Merge(json!({"metadata": {"annotations": {"touched": "yes"}}}));
                Api::<Pod>::namespaced(client.clone(), NS)
                    .patch(name, &PatchParams::default(), &touch)
                    .await?;
            }
            Ok(())
        }))
}

/// Every Pod of a Group carries its colour.
fn pods_wear_their_colour(world: &World) -> Result<(), String> {
    for (key, pod) in world.objects("pods") {
        let labels = &pod["metadata"]["labels"];
        let Some(group) = labels["group"].as_str() else {
            continue;
        };
        let colour = world
            .get("groups.example.ferrokube.dev", &format!("{NS}/{group}"))
            .and_then(|group| group["spec"]["colour"].as_str());
        if labels["colour"].as_str() != colour {
            return Err(format!(
                "pod {key} wears {} but group {group} is {}",
                labels["colour"],
                colour.unwrap_or("<gone>")
            ));
        }
    }
    Ok(())
}

/// Every Group counts the Pods that wear a colour.
fn groups_count_their_pods(world: &World) -> Result<(), String> {
    for (key, group) in world.objects("groups.example.ferrokube.dev") {
        let name = group["metadata"]["name"].as_str().unwrap_or_default();
        let colourful = world
            .objects("pods")
            .filter(|(_, pod)| {
                let labels = &pod["metadata"]["labels"];
                labels["group"] == name && labels.get("colour").is_some()
            })
            .count();
        let counted = group["status"]["labelled"].as_i64().unwrap_or(0);
        if usize::try_from(counted).ok() != Some(colourful) {
            return Err(format!(
                "group {key} counts {counted} labelled pods, {colourful} wear a colour"
            ));
        }
    }
    Ok(())
}

fn search(counts: bool, mutant: Option<Mutant>, budget: Budget) -> Exploration {
    Exploration::new(
        move |start: ControllerStart| colourer(start, counts, mutant),
        scenario,
    )
    .eventually("every pod wears its group's colour", pods_wear_their_colour)
    .eventually(
        "every group counts its labelled pods",
        move |world| match counts {
            true => groups_count_their_pods(world),
            false => Ok(()),
        },
    )
    .custom_resource::<Group>()
    .budget(budget)
}

/// The sample's name in the benchmark lines.
const SAMPLE: &str = "colourer (join)";

/// Searches `mutant` under the default budget: what it found, with one raw benchmark line
/// printed (runs and seconds, as `benches/explore/` keeps them; see
/// `ferrokube_examples::mutants::bench`).
fn found(case: &str, mutant: Mutant) -> Box<Found> {
    let counts = mutant == Mutant::CounterAfterWrite;
    let found = match search(counts, Some(mutant), Budget::default()).explore() {
        Err(Searched::Found(found)) => found,
        Ok(report) => panic!("{case} was not found: {report}"),
        Err(other) => panic!("{other}"),
    };
    println!("{found}");
    bench::print(&bench::found_line(
        SAMPLE,
        case,
        bench::DEFAULT_BUDGET,
        &found,
    ));
    // The plan replays word for word.
    let replayed = search(counts, Some(mutant), Budget::default())
        .replay(&found.plan.to_string())
        .map(|(violation, _)| violation.map(|violation| violation.class()));
    assert!(
        matches!(replayed, Ok(Some(class)) if class == found.violation.class()),
        "{replayed:?}"
    );
    found
}

#[test]
fn explore_mutant_join_missing_watch_is_found_under_the_default_budget() {
    let found = found("missing watch in a join", Mutant::MissingWatch);
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(
            found.plan.faults[0],
            Fault::Partition { .. } | Fault::LaggingReplica { .. }
        ),
        "{found}"
    );
    assert!(
        matches!(&found.violation, Violation::Liveness { last, .. } if last.contains("red")),
        "{found}"
    );
}

/// The search's timed windows (`partition(Ts)`, seconds chosen so that the window straddles the
/// next step and heals halfway through its settle) find the missing watch as the step windows
/// do: replayed alone, in the search's order, one of them fails the same way.
#[test]
fn explore_mutant_join_missing_watch_is_found_by_a_timed_window_too() {
    let search = search(false, Some(Mutant::MissingWatch), Budget::default());
    let candidates = match search.candidates() {
        Ok(candidates) => candidates,
        Err(error) => panic!("{error}"),
    };
    let timed: Vec<&Fault> = candidates
        .iter()
        .filter(|fault| matches!(fault, Fault::PartitionFor { .. }))
        .collect();
    assert!(!timed.is_empty(), "no timed partition among {candidates:?}");
    let finds = timed.iter().find(|fault| {
        matches!(
            search.replay(&fault.to_string()),
            Ok((Some(Violation::Liveness { last, .. }), _)) if last.contains("red")
        )
    });
    println!("the timed window that finds the missing watch: {finds:?}");
    assert!(finds.is_some(), "no timed window finds it among {timed:?}");
}

#[test]
fn explore_mutant_join_a_change_never_propagated_is_found() {
    // No fault needed: the liveness oracle fails the fault-free run (which the end-state
    // comparison, being relative to it, never could).
    let found = found("a field change never propagated", Mutant::NeverPropagates);
    assert!(found.plan.is_empty(), "{found}");
    assert!(
        matches!(&found.violation, Violation::Liveness { last, .. } if last.contains("red")),
        "{found}"
    );
}

#[test]
fn explore_mutant_counter_after_write_across_a_crash_is_found() {
    let found = found(
        "counter bumped after the write (crash between)",
        Mutant::CounterAfterWrite,
    );
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(found.plan.faults[0].restarts(), "{found}");
    assert!(
        matches!(&found.violation, Violation::Liveness { name, .. } if name.contains("counts")),
        "{found}"
    );
}

#[test]
fn explore_mutant_unbounded_retry_is_found() {
    let found = found("unbounded retry of a stale update", Mutant::UnboundedRetry);
    assert!(
        matches!(
            &found.violation,
            Violation::Runaway { .. } | Violation::NeverSettles { .. }
        ),
        "{found}"
    );
}

#[test]
fn explore_mutant_stale_read_after_failover_is_found() {
    let found = found(
        "last write wins from a stale cache (stale read after failover)",
        Mutant::LastWriteWins,
    );
    // One failover: the new leader lists from a replica that trails the server.
    assert_eq!(found.plan.faults.len(), 1, "{found}");
    assert!(
        matches!(found.plan.faults[0], Fault::RestartLagging { .. }),
        "{found}"
    );
    let Violation::EndState { differences } = &found.violation else {
        panic!("not an end-state difference: {found}");
    };
    assert!(
        differences.iter().any(|line| line.contains("touched")),
        "the user's touch is lost: {found}"
    );
}

#[test]
fn explore_mutant_join_the_correct_controller_stays_clean() {
    // Twice the default budget's random plans after every candidate, without and with counts.
    for counts in [false, true] {
        let report = search(counts, None, Budget::every_candidate(200)).check();
        println!("{report}");
        let case = if counts {
            "correct, counting"
        } else {
            "correct"
        };
        bench::print(&bench::clean_line(
            SAMPLE,
            case,
            bench::TWICE_THE_DEFAULT,
            &report,
        ));
        assert_eq!(report.covered, report.candidates, "{report}");
    }
}
