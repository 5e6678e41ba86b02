//! The guide's explorer chapter (`docs/src/explorer.md`), as a test: the code between the
//! `README` markers is the chapter's block, character for character (the second test checks).
//!
//! The block explores a controller with a finalizer and an outside system and finds nothing; the
//! third test runs the same search on a controller that removes its finalizer before it deletes
//! the outside record, and checks that the explorer finds the leaked record and shrinks the
//! failing run to a single crash.

// README:begin
use std::sync::Arc;

use ferrokube::Api;
use ferrokube::api::{DeleteParams, Patch, PatchParams, PostParams};
use ferrokube::controller::finalizer::{finalize, remove_finalizer};
use ferrokube::controller::{Action, Context, Controller, Reconciler};
use ferrokube::explore::{Budget, ControllerStart, Exploration, OutsideClient, Scenario, Step};
use ferrokube::informer::Scope;
use k8s_openapi::api::core::v1::ConfigMap;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Keeps an outside DNS record `<name>` = the ConfigMap's `ip`; a finalizer holds the ConfigMap
/// until the record is gone. (`buggy`: drop the finalizer first, then the record.)
struct Records {
    dns: OutsideClient,
    buggy: bool,
}

impl Reconciler<ConfigMap> for Records {
    type Error = Error;
    async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: Context) -> Result<Action, Error> {
        let (api, dns) = (ctx.api_in_primary_namespace::<ConfigMap>(), &self.dns);
        let name = cm.metadata.name.clone().unwrap_or_default();
        let ip = cm.data.as_ref().and_then(|d| d.get("ip").cloned());
        if self.buggy && cm.metadata.deletion_timestamp.is_some() {
            remove_finalizer(&api, &cm, "example.com/dns").await?;
            dns.delete(&name).await?; // a crash before this line leaks the record
            return Ok(Action::await_change());
        }
        let apply = |_| async { dns.put(&name, &ip.unwrap_or_default()).await };
        let cleanup = |_| async { dns.delete(&name).await.map(|_| ()) };
        finalize(&api, "example.com/dns", cm, apply, cleanup).await?;
        Ok(Action::await_change())
    }
}

/// Create a ConfigMap, change its ip, delete it.
fn scenario() -> Scenario {
    let api = |client| Api::<ConfigMap>::namespaced(client, "default");
    let web: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": "web",
        "namespace": "default", "labels": {"app": "dns"}}, "data": {"ip": "10.0.0.1"}}))
    .unwrap_or_default();
    Scenario::new()
        .step(Step::new("create web", move |c| async move {
            api(c).create(&PostParams::default(), &web).await?;
            Ok(())
        }))
        .step(Step::new("move web", move |c| async move {
            let ip = Patch::Merge(serde_json::json!({"data": {"ip": "10.0.0.2"}}));
            api(c).patch("web", &PatchParams::default(), &ip).await?;
            Ok(())
        }))
        .step(Step::new("delete web", move |c| async move {
            api(c).delete("web", &DeleteParams::default()).await?;
            Ok(())
        }))
}

fn explore(buggy: bool) -> Exploration {
    Exploration::new(
        move |start: ControllerStart| async move {
            let scope = Scope::namespace("default").labels("app=dns");
            let records = Records {
                dns: start.outside,
                buggy,
            };
            let _ = Controller::<ConfigMap>::new(start.client, scope)
                .run(records, start.shutdown)
                .await;
        },
        scenario,
    )
    .invariant("a DNS record only for a ConfigMap", |world| {
        match world.outside().keys().find(|name| {
            world
                .get("configmaps", &format!("default/{name}"))
                .is_none()
        }) {
            Some(name) => Err(format!("record {name} outlived its ConfigMap")),
            None => Ok(()),
        }
    })
    .leaves_nothing_behind() // the scenario deletes every primary: nothing may remain
    .budget(Budget::runs(300))
}

#[test]
fn readme_explore_the_dns_records_controller() {
    // Every fault class at every point, then random plans: panics with the minimal plan.
    let report = explore(false).check();
    println!(
        "{} runs, {:.0} runs/s",
        report.runs,
        report.runs_per_second()
    );
}
// README:end

use ferrokube::explore::{Fault, Point, Searched, Violation};

#[test]
fn readme_explore_the_readme_shows_this_code() {
    let this = include_str!("explore_readme.rs");
    let code = this
        .split("// README:begin\n")
        .nth(1)
        .and_then(|rest| rest.split("// README:end").next())
        .expect("markers");
    let readme = include_str!("../../docs/src/explorer.md");
    assert!(
        readme.contains(code),
        "docs/src/explorer.md's block differs from tests/front/explore_readme.rs"
    );
}

#[test]
fn readme_explore_finds_the_finalizer_dropped_before_the_record() {
    let found = match explore(true).explore() {
        Err(Searched::Found(found)) => found,
        Err(other) => panic!("{other}"),
        Ok(report) => panic!("nothing found: {report:?}"),
    };
    println!("{found}");
    // The invariant breaks at once, between the finalizer's removal and the record's deletion:
    // no fault needed.
    assert!(found.plan.is_empty(), "{found}");
    assert!(
        matches!(&found.violation, Violation::Invariant { name, .. }
            if name == "a DNS record only for a ConfigMap"),
        "{found}"
    );
    // Without the invariant, the record leaks only when the controller crashes between the two
    // writes: the search finds that crash and shrinks the plan to it.
    let without_invariant = Exploration::new(
        |start: ControllerStart| async move {
            let scope = Scope::namespace("default").labels("app=dns");
            let records = Records {
                dns: start.outside,
                buggy: true,
            };
            let _ = Controller::<ConfigMap>::new(start.client, scope)
                .run(records, start.shutdown)
                .await;
        },
        scenario,
    )
    .leaves_nothing_behind()
    .budget(Budget::runs(300));
    let found = match without_invariant.explore() {
        Err(Searched::Found(found)) => found,
        other => panic!("nothing found: {other:?}"),
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
}

/// The correct controller of the guide's block at twice the default budget (every single-fault
/// candidate, then twice its random plans): no false alarm, every candidate covered.
#[test]
fn readme_explore_the_correct_controller_is_clean_at_twice_the_default_budget() {
    let report = explore(false)
        .budget(Budget::every_candidate(
            2 * ferrokube::explore::search::DEFAULT_RANDOM_PLANS,
        ))
        .check();
    println!("{report}");
    assert_eq!(report.covered, report.candidates, "{report:?}");
}
