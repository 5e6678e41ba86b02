//! The controller's retry bucket counts virtual time, not real time.
//!
//! The default controller rate limiter is the longer of a per-key backoff (5 ms doubling) and an
//! overall token bucket: 10 retries a second, 100 at once (client-go's
//! `DefaultControllerRateLimiter`). The bucket is a clock reading: it refills as time passes. On
//! the explorer, time is the runtime's virtual clock, so the bucket must read that clock: if it
//! read real time (`std::time::Instant`), a minute of virtual settle, which passes in
//! microseconds of real time, would refill nothing, and when the retries come would depend on
//! how fast the machine ran the run.
//!
//! The scenario: two waves of 150 ConfigMaps, a minute of virtual time apart. The reconciler fails
//! the first time it sees each object and succeeds the second time. In each wave, the first 100
//! failures take the bucket's burst (they come back after their own 5 ms backoff) and the other
//! 50 wait for the bucket's refill, 100 ms apart, up to 5 s. A minute later the bucket is full
//! again *in virtual time*, so the second wave is retried exactly as the first was. On real time
//! the bucket would still be owed the first wave's tokens (well under a second of real time has
//! passed), and every retry of the second wave would wait seconds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokube_client::api::PostParams;
use ferrokube_client::{Api, Client};
use ferrokube_core::Scope;
use ferrokube_explore::{BoxError, Explorer, Scenario, Step, Trace};
use ferrokube_runtime::controller::{Action, Context, Controller, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Objects per wave: more than the bucket's burst of 100.
const WAVE: usize = 150;
/// The bucket's burst (the default controller rate limiter's).
const BURST: usize = 100;

/// When each object was reconciled, on the runtime's (virtual) clock, in the order it happened.
type Attempts = Arc<Mutex<BTreeMap<String, Vec<tokio::time::Instant>>>>;

/// Fails the first reconcile of each object, succeeds after; notes the time of each attempt.
/// One GET per attempt, so that the order of the attempts shows in the trace.
struct FailFirst {
    attempts: Attempts,
}

impl Reconciler<ConfigMap> for FailFirst {
    type Error = BoxError;

    async fn reconcile(&self, object: Arc<ConfigMap>, ctx: Context) -> Result<Action, BoxError> {
        let name = object.metadata.name.clone().unwrap_or_default();
        ctx.api_in_primary_namespace::<ConfigMap>()
            .get_opt(&name)
            .await?;
        let first = {
            let mut attempts = self.attempts.lock().map_err(|_| "attempts poisoned")?;
            let times = attempts.entry(name.clone()).or_default();
            times.push(tokio::time::Instant::now());
            times.len() == 1
        };
        if first {
            return Err(format!("{name}: failing the first attempt").into());
        }
        Ok(Action::await_change())
    }
}

/// One run: its trace, and per object the delay from its failed attempt to its retry.
struct Run {
    trace: Trace,
    retried_after: BTreeMap<String, Duration>,
}

fn run() -> Run {
    let attempts: Attempts = Arc::default();
    let in_controller = attempts.clone();
    let trace = Explorer::new(11)
        .settle(Duration::from_secs(60))
        .run(scenario(), move |start| {
            // One reconciler per incarnation (the explorer may restart the controller).
            let reconciler = FailFirst {
                attempts: in_controller.clone(),
            };
            async move {
                let _ = Controller::<ConfigMap>::new(start.client, Scope::namespace("default"))
                    .run(reconciler, start.shutdown)
                    .await;
            }
        });
    let trace = match trace {
        Ok(trace) => trace,
        Err(error) => panic!("{error}"),
    };
    let attempts = attempts.lock().expect("attempts");
    let mut retried_after = BTreeMap::new();
    for (name, times) in attempts.iter() {
        assert_eq!(
            times.len(),
            2,
            "{name}: one failed attempt, one retry that succeeds"
        );
        retried_after.insert(name.clone(), times[1] - times[0]);
    }
    assert_eq!(retried_after.len(), 2 * WAVE, "every object was reconciled");
    Run {
        trace,
        retried_after,
    }
}

fn scenario() -> Scenario {
    Scenario::new()
        .step(Step::new("wave 1", |client| create_wave(client, "w1")))
        .step(Step::new("wave 2, a virtual minute later", |client| {
            create_wave(client, "w2")
        }))
}

async fn create_wave(client: Client, prefix: &'static str) -> Result<(), BoxError> {
    let api = Api::<ConfigMap>::namespaced(client, "default");
    for index in 0..WAVE {
        let object = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{prefix}-{index:03}")),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        api.create(&PostParams::default(), &object).await?;
    }
    Ok(())
}

/// The retry delays of one wave, shortest first.
fn wave(run: &Run, prefix: &str) -> Vec<Duration> {
    let mut delays: Vec<Duration> = run
        .retried_after
        .iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, delay)| *delay)
        .collect();
    delays.sort();
    delays
}

#[test]
fn explore_the_retry_bucket_refills_in_virtual_time() {
    let first = run();
    let quick = Duration::from_millis(50);
    for prefix in ["w1", "w2"] {
        let delays = wave(&first, prefix);
        let within_burst = delays.iter().filter(|delay| **delay <= quick).count();
        assert_eq!(
            within_burst, BURST,
            "wave {prefix}: the bucket's burst retries at once, the rest waits for its refill: \
             {delays:?}"
        );
        let longest = delays.last().copied().unwrap_or_default();
        assert!(
            longest > Duration::from_secs(4) && longest <= Duration::from_secs(5),
            "wave {prefix}: the last of {} retries over the burst waits about {} s at 10 a \
             second, not {longest:?}: {delays:?}",
            WAVE - BURST,
            (WAVE - BURST) / 10
        );
    }
    // A virtual minute refilled the bucket: the second wave meets it exactly as the first did.
    assert_eq!(wave(&first, "w1"), wave(&first, "w2"));

    // And the run is a function of its seed: the same trace, the same retry times.
    let second = run();
    if let Some(difference) = first.trace.first_difference(&second.trace) {
        panic!("the second run differs from the first at {difference}");
    }
    assert_eq!(first.retried_after, second.retried_after);
}

/// Notes when each ConfigMap was first reconciled, on the runtime's clock.
struct NoteFirstReconcile {
    reconciled: Attempts,
}

impl Reconciler<ConfigMap> for NoteFirstReconcile {
    type Error = BoxError;

    async fn reconcile(&self, object: Arc<ConfigMap>, _ctx: Context) -> Result<Action, BoxError> {
        let name = object.metadata.name.clone().unwrap_or_default();
        let mut reconciled = self.reconciled.lock().map_err(|_| "poisoned")?;
        reconciled
            .entry(name)
            .or_default()
            .push(tokio::time::Instant::now());
        Ok(Action::await_change())
    }
}

/// The embedded server's watch-delay fault holds each event back until a delay after its write;
/// the write's time is read on the runtime's clock, so the delay is virtual time too. (Counted
/// from a real-time write instead, the due time would already be past on the run's clock, which
/// has run ahead by the start grace, and the event would come at once.)
#[test]
fn explore_a_watch_delay_fault_delays_by_virtual_time() {
    let delay = Duration::from_secs(30);
    let reconciled: Attempts = Arc::default();
    let created: Arc<Mutex<Option<tokio::time::Instant>>> = Arc::default();
    let created_in_step = created.clone();
    let in_controller = reconciled.clone();
    let scenario = Scenario::new()
        .step(Step::on_server("delay every watch event", move |server| {
            server.faults().delay_watches(delay);
            Ok(())
        }))
        .step(Step::new("create late", move |client| async move {
            let object = ConfigMap {
                metadata: ObjectMeta {
                    name: Some("late".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            Api::<ConfigMap>::namespaced(client, "default")
                .create(&PostParams::default(), &object)
                .await?;
            *created_in_step.lock().map_err(|_| "poisoned")? = Some(tokio::time::Instant::now());
            Ok(())
        }));
    let trace = Explorer::new(3)
        .settle(Duration::from_secs(60))
        .run(scenario, move |start| {
            let reconciler = NoteFirstReconcile {
                reconciled: in_controller.clone(),
            };
            async move {
                let _ = Controller::<ConfigMap>::new(start.client, Scope::namespace("default"))
                    .run(reconciler, start.shutdown)
                    .await;
            }
        });
    if let Err(error) = trace {
        panic!("{error}");
    }
    let created = created.lock().expect("created").expect("the step ran");
    let reconciled = reconciled.lock().expect("reconciled");
    let first = reconciled.get("late").and_then(|times| times.first());
    let waited = first.map(|at| at.saturating_duration_since(created));
    assert!(
        waited.is_some_and(|waited| waited >= delay && waited < delay + Duration::from_secs(1)),
        "reconciled {waited:?} after the create; the watch event was to come {delay:?} after it"
    );
}
