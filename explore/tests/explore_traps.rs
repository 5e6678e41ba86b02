//! The traps a new user fell into (issue 46), each closed: settings that combine in any order,
//! custom resources served before the controller starts, error reasons in the trace, re-watches
//! that are not points, a budget that fails loudly when its cap comes before full coverage; and
//! the liveness oracles.
//!
//! The controller of most cases labels every ConfigMap `seen=yes`: small, so each search is a
//! few dozen runs.

use std::sync::Arc;
use std::time::Duration;

use ferrokube_client::Api;
use ferrokube_client::api::{Patch, PatchParams, PostParams};
use ferrokube_core::Scope;
use ferrokube_explore::{
    BoxError, Budget, ControllerStart, Exploration, ExploreError, Explorer, FaultPlan, Point,
    Scenario, Searched, Step, TraceEntry, Violation, World,
};
use ferrokube_runtime::controller::{Action, Context, Controller, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

const NS: &str = "default";

/// Labels each ConfigMap `seen=yes`.
struct Labeller;

impl Reconciler<ConfigMap> for Labeller {
    type Error = BoxError;

    async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: Context) -> Result<Action, BoxError> {
        let seen = cm
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get("seen"));
        if seen.map(String::as_str) != Some("yes") {
            let name = cm.metadata.name.clone().unwrap_or_default();
            let label = Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"}}}));
            ctx.api_in_primary_namespace::<ConfigMap>()
                .patch(&name, &PatchParams::default(), &label)
                .await?;
        }
        Ok(Action::await_change())
    }
}

async fn labeller(start: ControllerStart) {
    let _ = Controller::<ConfigMap>::new(start.client, Scope::namespace(NS))
        .run(Labeller, start.shutdown)
        .await;
}

fn configmap(name: &str) -> Result<ConfigMap, serde_json::Error> {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}}))
}

fn create(name: &'static str) -> Step {
    Step::new(format!("create {name}"), move |client| async move {
        Api::<ConfigMap>::namespaced(client, NS)
            .create(&PostParams::default(), &configmap(name)?)
            .await?;
        Ok(())
    })
}

/// Every ConfigMap is labelled `seen=yes`.
fn all_seen(world: &World) -> Result<(), String> {
    match world
        .objects("configmaps")
        .find(|(_, cm)| cm["metadata"]["labels"]["seen"] != "yes")
    {
        Some((key, cm)) => Err(format!("{key} has labels {}", cm["metadata"]["labels"])),
        None => Ok(()),
    }
}

fn search() -> Exploration {
    Exploration::new(labeller, || Scenario::new().step(create("a")))
}

#[test]
fn explore_oracles_set_before_the_explorer_are_kept() {
    // An invariant that fails at once, set before `.explorer(..)`: it must still be checked.
    let found = match search()
        .seed(5)
        .invariant("never any ConfigMap", |world| {
            match world.count("configmaps") {
                0 => Ok(()),
                n => Err(format!("{n} ConfigMaps")),
            }
        })
        .explorer(Explorer::new(9).settle(Duration::from_secs(3)))
        .explore()
    {
        Err(Searched::Found(found)) => found,
        other => panic!("the invariant set first was dropped: {other:?}"),
    };
    assert!(found.plan.is_empty(), "{found}");
    assert!(
        matches!(&found.violation, Violation::Invariant { name, .. } if name == "never any ConfigMap"),
        "{found}"
    );
    // The seed given to the exploration wins over the explorer's, whatever the order.
    assert_eq!(found.seed, 5, "{found}");

    // And set after it, the same.
    let found = match search()
        .explorer(Explorer::new(9))
        .eventually("never", |_| Err("it never holds".into()))
        .explore()
    {
        Err(Searched::Found(found)) => found,
        other => panic!("{other:?}"),
    };
    assert_eq!(found.seed, 9, "{found}");
    assert!(
        matches!(&found.violation, Violation::Liveness { name, .. } if name == "never"),
        "{found}"
    );
}

/// A cluster-scoped custom resource `widgets.example.com`, as JSON.
fn widget_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    })
}

#[test]
fn explore_a_custom_resource_is_served_before_the_controller_starts() {
    let trace = Explorer::new(1)
        .crd(widget_crd())
        .run(Scenario::new(), |start: ControllerStart| async move {
            // The controller's very first request lists the custom resource.
            let listed = start
                .client
                .request_bytes(http_get("/apis/example.com/v1/namespaces/default/widgets"))
                .await;
            assert!(listed.is_ok(), "{listed:?}");
            start.shutdown.await;
        })
        .expect("the run");
    let first = trace.entries.iter().find_map(|entry| match entry {
        TraceEntry::Request { actor, status, .. } if actor.starts_with("controller") => {
            Some(*status)
        }
        _ => None,
    });
    assert_eq!(first, Some(200), "{trace}");

    // A CRD kube-apiserver would refuse fails the run's setup, with the reason.
    let mut invalid = widget_crd();
    invalid["spec"]["group"] = json!("");
    let refused = Explorer::new(1)
        .crd(invalid)
        .run(Scenario::new(), |start: ControllerStart| start.shutdown);
    assert!(
        matches!(&refused, Err(ExploreError::Setup(why)) if why.contains("spec.group")),
        "{refused:?}"
    );
}

fn http_get(path: &str) -> ferrokube_client::client::Call {
    let mut request = http::Request::new(bytes::Bytes::new());
    *request.uri_mut() = path.parse().unwrap_or_default();
    ferrokube_client::client::Call {
        request,
        idempotent: true,
        streaming: false,
    }
}

#[test]
fn explore_the_trace_names_the_reason_of_an_error() {
    let scenario = Scenario::new().step(create("a")).step(Step::new(
        "create a again, then write a stale a",
        |client| async move {
            let api = Api::<ConfigMap>::namespaced(client, NS);
            let again = api.create(&PostParams::default(), &configmap("a")?).await;
            assert!(again.is_err());
            let mut stale = configmap("a")?;
            stale.metadata.resource_version = Some("1".into());
            let stale = api.replace("a", &PostParams::default(), &stale).await;
            assert!(stale.is_err());
            Ok(())
        },
    ));
    let trace = Explorer::new(1).run(scenario, labeller).expect("the run");
    let text = trace.to_string();
    assert!(text.contains("-> 409 AlreadyExists"), "{text}");
    assert!(text.contains("-> 409 Conflict"), "{text}");
}

#[test]
fn explore_re_watches_are_not_points() {
    // Three minutes between two steps: the informer resumes its idle watch many times.
    let scenario = Scenario::new().step(create("a")).step(create("b"));
    let outcome = Explorer::new(1)
        .settle(Duration::from_secs(180))
        .run_plan(&FaultPlan::none(), scenario, labeller)
        .expect("the run");
    let watches_in_trace = outcome
        .trace
        .entries
        .iter()
        .filter(|entry| {
            matches!(entry, TraceEntry::Request { actor, watch: Some(_), .. }
                if actor.starts_with("controller"))
        })
        .count();
    let watch_points: Vec<_> = outcome
        .points
        .iter()
        .filter(|seen| matches!(seen.point, Point::Request(_)) && seen.what.contains("watch=true"))
        .collect();
    assert!(watches_in_trace > 3, "{}", outcome.trace);
    assert_eq!(watch_points.len(), 1, "{watch_points:?}");
}

#[test]
fn explore_a_budget_whose_cap_comes_first_fails_loudly() {
    let searched = search()
        .budget(Budget::default().cap(Duration::ZERO))
        .explore();
    let Err(Searched::Incomplete(report)) = searched else {
        panic!("a search that covered nothing passed: {searched:?}");
    };
    assert!(report.candidates > 0, "{report:?}");
    assert_eq!(report.covered, 0, "{report:?}");
    let text = Searched::Incomplete(report.clone()).to_string();
    assert!(
        text.starts_with(&format!(
            "coverage incomplete: 0 of {} candidates",
            report.candidates
        )),
        "{text}"
    );
}

#[test]
fn explore_the_default_budget_covers_every_candidate() {
    let report = search()
        .eventually("every ConfigMap is seen", all_seen)
        .always_eventually("every ConfigMap is seen after each step", all_seen)
        .check();
    assert_eq!(report.covered, report.candidates, "{report}");
    assert!(report.runs > report.candidates, "{report}");
}

#[test]
fn explore_liveness_names_the_property_and_the_last_state() {
    // b exists after step 1 and goes in step 2: it held after step 1 began, never after step 2.
    // `always_eventually` names step 2; `eventually` fails at the end.
    let scenario = || {
        Scenario::new()
            .step(create("a"))
            .step(create("b"))
            .step(Step::new("delete b", |client| async move {
                Api::<ConfigMap>::namespaced(client, NS)
                    .delete("b", &Default::default())
                    .await?;
                Ok::<(), BoxError>(())
            }))
    };
    let b_exists = |world: &World| match world.get("configmaps", "default/b") {
        Some(_) => Ok(()),
        None => Err("no ConfigMap b".to_string()),
    };
    let found = match search_of(scenario)
        .always_eventually("b exists", b_exists)
        .explore()
    {
        Err(Searched::Found(found)) => found,
        other => panic!("{other:?}"),
    };
    assert!(found.plan.is_empty(), "{found}");
    let text = found.violation.to_string();
    assert!(
        text.contains("\"b exists\" never held at any moment after step 2 (delete b)")
            && text.contains("no ConfigMap b"),
        "{text}"
    );
    // Without the deletion it holds after every step: no violation, though it did not hold
    // after step 0.
    let without_deletion = || Scenario::new().step(create("a")).step(create("b"));
    search_of(without_deletion)
        .always_eventually("b exists", b_exists)
        .eventually("b exists at the end", b_exists)
        .check();

    // A controller that never labels: the property never holds, and says what it saw last.
    let found = match Exploration::new(
        |start: ControllerStart| start.shutdown,
        || Scenario::new().step(create("a")),
    )
    .eventually("every ConfigMap is seen", all_seen)
    .explore()
    {
        Err(Searched::Found(found)) => found,
        other => panic!("{other:?}"),
    };
    let text = found.violation.to_string();
    assert!(
        text.contains("once the world was quiet after the last step")
            && text.contains("default/a has labels"),
        "{text}"
    );
}

fn search_of(scenario: fn() -> Scenario) -> Exploration {
    Exploration::new(labeller, scenario).budget(Budget::runs(1))
}

#[test]
fn explore_a_lagging_replica_stays_stale_until_its_steps_have_settled() {
    let scenario = || {
        Scenario::new()
            .step(create("a"))
            .step(create("b"))
            .step(create("c"))
    };
    let explorer = Explorer::new(1);
    let reference = explorer
        .run_plan(&FaultPlan::none(), scenario(), labeller)
        .expect("the reference run");
    let step_1 = reference
        .trace
        .entries
        .iter()
        .position(|entry| matches!(entry, TraceEntry::Step { index: 1, .. }))
        .expect("step 1");
    let before = reference
        .points
        .iter()
        .rev()
        .find(|seen| seen.at < step_1)
        .expect("a point before step 1");
    // When (virtual ms) the controller first read the ADDED event of `name`.
    let added = |outcome: &ferrokube_explore::RunOutcome, name: &str| {
        let key = format!("{NS}/{name}");
        outcome
            .trace
            .entries
            .iter()
            .zip(&outcome.trace.times)
            .find_map(|(entry, time)| match entry {
                TraceEntry::Event {
                    kind_of_event,
                    key: seen,
                    ..
                } if kind_of_event == "ADDED" && *seen == key => Some(*time),
                _ => None,
            })
    };
    // Steps at 2 s, 7 s, 12 s; settles of 5 s. Without the fault b is seen at 7 s.
    assert_eq!(added(&reference, "b"), Some(7_000), "{}", reference.trace);
    for (steps, seen_at) in [(1, 12_000), (2, 17_000)] {
        let plan: FaultPlan = format!("lagging-replica(0,{steps})@{}", before.point)
            .parse()
            .expect("a plan");
        let outcome = explorer
            .run_plan(&plan, scenario(), labeller)
            .expect("the run");
        // The replica stopped before step 1: b (and, when it lasts 2 steps, c) stays unseen
        // until the steps have settled, across the informer's resumes.
        assert_eq!(
            added(&outcome, "b"),
            Some(seen_at),
            "{plan}: {}",
            outcome.trace
        );
        assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    } // Timed: 8 s from the point, whatever the steps do; or, when longer than the steps, until
    // the last one has settled (17 s).
    let stopped_at = reference.trace.times[before.at];
    for (lasts, seen_at) in [(8_000, stopped_at + 8_000), (60_000, 17_000)] {
        let plan: FaultPlan = format!("lagging-replica(0,{}s)@{}", lasts / 1000, before.point)
            .parse()
            .expect("a plan");
        let outcome = explorer
            .run_plan(&plan, scenario(), labeller)
            .expect("the run");
        assert_eq!(
            added(&outcome, "b"),
            Some(seen_at),
            "{plan}: {}",
            outcome.trace
        );
        assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    }
}
