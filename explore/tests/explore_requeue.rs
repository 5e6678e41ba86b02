//! A requeue after a delay fires in virtual time, and replays identically.
//!
//! The workqueue parks delayed keys (`Action::requeue(d)`, and every rate-limited retry after a
//! failed reconcile) on an OS timer thread that sleeps in real time (workqueue/src/delay.rs,
//! chosen for its precision). In an explorer run virtual time runs ahead of real time: five
//! minutes of settle pass in microseconds, so such a thread would wake long after the run, and
//! a retry after an injected fault would come at a real-time moment outside the seed's control.
//! So a controller built on a thread with a virtual clock (`ferrokube_core::time::set_thread_clock`,
//! which the explorer sets) builds its queue with `WorkQueueBuilder::virtual_time`: the delays
//! wait in a task on the runtime's clock.

use std::sync::Arc;
use std::time::Duration;

use ferrokube_client::Api;
use ferrokube_client::api::PostParams;
use ferrokube_core::Scope;
use ferrokube_explore::{BoxError, Explorer, Scenario, Step, TraceEntry};
use ferrokube_runtime::controller::{Action, Context, Controller, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;

/// Looks for a ConfigMap `probe` (one GET in the trace per reconcile) and asks to be called
/// again in a minute.
struct Poll;

impl Reconciler<ConfigMap> for Poll {
    type Error = BoxError;

    async fn reconcile(&self, _object: Arc<ConfigMap>, ctx: Context) -> Result<Action, BoxError> {
        ctx.api_in_primary_namespace::<ConfigMap>()
            .get_opt("probe")
            .await?;
        Ok(Action::requeue(Duration::from_secs(60)))
    }
}

#[test]
fn explore_a_requeue_fires_in_virtual_time() {
    let trace = run(scenario());
    let probes = trace
        .entries
        .iter()
        .filter(|entry| matches!(entry, TraceEntry::Request { path, .. } if path.ends_with("/configmaps/probe")))
        .count();
    // Five minutes after the create: a reconcile at once and one per minute after it.
    assert!(
        probes >= 5,
        "{probes} reconciles in 5 virtual minutes:\n{trace}"
    );
    for attempt in 1..20 {
        let again = run(scenario());
        if let Some(difference) = trace.first_difference(&again) {
            panic!("run {attempt} differs from run 0 at {difference}");
        }
    }
}

fn run(scenario: Scenario) -> ferrokube_explore::Trace {
    let trace =
        Explorer::new(1)
            .settle(Duration::from_secs(300))
            .run(scenario, |start| async move {
                let _ = Controller::<ConfigMap>::new(start.client, Scope::namespace("default"))
                    .run(Poll, start.shutdown)
                    .await;
            });
    match trace {
        Ok(trace) => trace,
        Err(error) => panic!("{error}"),
    }
}

fn scenario() -> Scenario {
    Scenario::new().step(Step::new("create a", |client| async move {
        let object = ConfigMap {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("a".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<ConfigMap>::namespaced(client, "default")
            .create(&PostParams::default(), &object)
            .await?;
        Ok(())
    }))
}
