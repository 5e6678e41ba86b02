//! Deterministic runs (issue 29, item 1): a small controller with a finalizer, run on the
//! explorer, gives the identical trace for the same seed and scenario, every time.
//!
//! The controller: every ConfigMap labelled `role=source` gets a mirror, `<name>-mirror`
//! (labelled `role=mirror`, owned by its source, with the same data). A finalizer on the source
//! deletes the mirror before the source may go. The scenario creates two sources, edits one, has
//! an intruder tamper with a mirror behind the controller's back, and deletes both sources.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use ferrokube_client::api::{DeleteParams, PostParams};
use ferrokube_client::{Api, Client};
use ferrokube_core::Scope;
use ferrokube_explore::{BoxError, ControllerStart, Explorer, Scenario, Step, Trace, TraceEntry};
use ferrokube_runtime::controller::finalizer::finalize;
use ferrokube_runtime::controller::owner::set_controller_reference;
use ferrokube_runtime::controller::{Action, Context, Controller, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const NAMESPACE: &str = "default";
const FINALIZER: &str = "explore.ferrokube.dev/mirror";

struct Mirror;

fn mirror_name(source: &ConfigMap) -> String {
    format!(
        "{}-mirror",
        source.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Creates the mirror of `source`, or puts its data back if it differs.
async fn ensure_mirror(api: &Api<ConfigMap>, source: &ConfigMap) -> Result<(), BoxError> {
    let name = mirror_name(source);
    match api.get_opt(&name).await? {
        None => {
            let mut metadata = ObjectMeta {
                name: Some(name),
                namespace: Some(NAMESPACE.into()),
                labels: Some(BTreeMap::from([("role".into(), "mirror".into())])),
                ..ObjectMeta::default()
            };
            set_controller_reference(source, &mut metadata)?;
            let mirror = ConfigMap {
                metadata,
                data: source.data.clone(),
                ..ConfigMap::default()
            };
            api.create(&PostParams::default(), &mirror).await?;
        }
        Some(mut mirror) if mirror.data != source.data => {
            mirror.data = source.data.clone();
            api.replace(&name, &PostParams::default(), &mirror).await?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// Deletes the mirror of `source`, if it is there.
async fn delete_mirror(api: &Api<ConfigMap>, source: &ConfigMap) -> Result<(), BoxError> {
    match api
        .delete(&mirror_name(source), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(error) if error.is_not_found() => Ok(()),
        Err(error) => Err(error.into()),
    }
}

impl Reconciler<ConfigMap> for Mirror {
    type Error = BoxError;

    async fn reconcile(&self, source: Arc<ConfigMap>, ctx: Context) -> Result<Action, BoxError> {
        let api = ctx.api_in_primary_namespace::<ConfigMap>();
        finalize(
            &api,
            FINALIZER,
            source,
            |source| {
                let api = api.clone();
                async move { ensure_mirror(&api, &source).await }
            },
            |source| {
                let api = api.clone();
                async move { delete_mirror(&api, &source).await }
            },
        )
        .await
        .map_err(|error| -> BoxError { error.to_string().into() })?;
        Ok(Action::await_change())
    }
}

/// Runs the mirror controller until the run is over.
async fn run_controller(start: ControllerStart) {
    let ControllerStart {
        client, shutdown, ..
    } = start;
    let sources = Scope::namespace(NAMESPACE).labels("role=source");
    let mirrors = Scope::namespace(NAMESPACE).labels("role=mirror");
    let ran = Controller::<ConfigMap>::new(client, sources)
        .owns::<ConfigMap>(mirrors)
        .run(Mirror, shutdown)
        .await;
    if let Err(error) = ran {
        tracing::warn!(%error, "the mirror controller stopped with an error");
    }
}

fn source(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("role".into(), "source".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("key".into(), value.into())])),
        ..ConfigMap::default()
    }
}

fn api(client: Client) -> Api<ConfigMap> {
    Api::namespaced(client, NAMESPACE)
}

fn create(name: &'static str, value: &'static str) -> Step {
    Step::new(format!("create source {name}"), move |client| async move {
        api(client)
            .create(&PostParams::default(), &source(name, value))
            .await?;
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
    Step::new(format!("delete source {name}"), move |client| async move {
        api(client).delete(name, &DeleteParams::default()).await?;
        Ok(())
    })
}

/// The scenario of these tests; `tamper`: with the intruder's edit of a mirror.
fn scenario(tamper: bool) -> Scenario {
    let scenario = Scenario::new()
        .step(create("a", "1"))
        .step(create("b", "1"))
        .step(edit("a", "2"));
    let scenario = if tamper {
        scenario.step(edit("a-mirror", "tampered").by("intruder"))
    } else {
        scenario
    };
    scenario.step(delete("a")).step(delete("b"))
}

fn run(seed: u64, tamper: bool) -> Trace {
    match Explorer::new(seed).run(scenario(tamper), run_controller) {
        Ok(trace) => trace,
        Err(error) => panic!("run with seed {seed} failed: {error}"),
    }
}

fn has(trace: &Trace, actor: &str, method: &str, path_end: &str) -> bool {
    trace.entries.iter().any(|entry| {
        matches!(entry, TraceEntry::Request { actor: a, method: m, path, status, .. }
            if a.starts_with(actor) && m == method && path.ends_with(path_end) && *status < 300)
    })
}

#[test]
fn explore_the_mirror_controller_does_its_job_in_a_run() {
    let trace = run(1, true);
    println!("{trace}");
    // The controller created both mirrors, repaired the tampered one, and deleted both.
    assert!(has(&trace, "controller", "POST", "/configmaps"), "{trace}");
    assert!(
        has(&trace, "intruder", "PUT", "/configmaps/a-mirror"),
        "{trace}"
    );
    assert!(
        has(&trace, "controller", "PUT", "/configmaps/a-mirror"),
        "{trace}"
    );
    assert!(
        has(&trace, "controller", "DELETE", "/configmaps/a-mirror"),
        "{trace}"
    );
    assert!(
        has(&trace, "controller", "DELETE", "/configmaps/b-mirror"),
        "{trace}"
    );
    assert!(trace.events() > 0, "no watch event recorded:\n{trace}");
}

#[test]
fn explore_the_same_seed_gives_the_same_trace_100_times() {
    const RUNS: usize = 100;
    let started = Instant::now();
    let first = run(42, true);
    for attempt in 1..RUNS {
        let again = run(42, true);
        if let Some(difference) = first.first_difference(&again) {
            panic!(
                "run {attempt} of seed 42 differs from run 0 (fingerprints {:016x} and {:016x}) at {difference}\n\nrun 0:\n{first}\nrun {attempt}:\n{again}",
                first.fingerprint(),
                again.fingerprint()
            );
        }
    }
    let elapsed = started.elapsed();
    let per_second = RUNS as f64 / elapsed.as_secs_f64();
    println!(
        "{RUNS} runs of seed 42 in {elapsed:?} ({per_second:.1} runs per second), each {} requests and {} watch events, fingerprint {:016x}",
        first.requests(),
        first.events(),
        first.fingerprint()
    );
    // CI's budget is 90 minutes for everything; this test must stay a small part of it.
    assert!(
        elapsed.as_secs() < 120,
        "{RUNS} runs took {elapsed:?}: too slow for CI"
    );
}

#[test]
fn explore_a_different_scenario_gives_a_different_trace() {
    let with_intruder = run(42, true);
    let without = run(42, false);
    assert_ne!(with_intruder.fingerprint(), without.fingerprint());
    assert!(with_intruder.first_difference(&without).is_some());
}

#[test]
fn explore_a_different_seed_gives_a_different_trace() {
    // The seed reaches every layer: here it shows in the watches' random `timeoutSeconds`.
    let one = run(42, true);
    let other = run(43, true);
    let difference = one.first_difference(&other);
    assert!(
        difference.is_some(),
        "seeds 42 and 43 gave the same trace:\n{one}"
    );
    println!("seeds 42 and 43 part at {difference:?}");
}

#[test]
fn explore_an_in_memory_client_needs_no_socket() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = Arc::new(ferrokube_apiserver::ApiServer::new().start().await.unwrap());
        let client = ferrokube_explore::in_memory_client(server, "test").unwrap();
        let api = api(client);
        api.create(&PostParams::default(), &source("direct", "1"))
            .await
            .unwrap();
        let got = api.get("direct").await.unwrap();
        assert_eq!(got.metadata.name.as_deref(), Some("direct"));
    });
}

/// The scenario with the server's watches ended and its history compacted midway: the informers
/// resume (and, finding their resourceVersion gone, relist).
fn scenario_with_lost_watches() -> Scenario {
    Scenario::new()
        .step(create("a", "1"))
        .step(Step::on_server("compact and close every watch", |server| {
            server.compact();
            server.close_watches();
            Ok(())
        }))
        .step(create("b", "1"))
        .step(delete("a"))
}

#[test]
fn explore_lost_watches_and_compaction_replay_identically() {
    const RUNS: usize = 20;
    let explorer = Explorer::new(7);
    let first = match explorer.run(scenario_with_lost_watches(), run_controller) {
        Ok(trace) => trace,
        Err(error) => panic!("{error}"),
    };
    // The informers opened new watches after the server closed theirs.
    let watches = first
        .entries
        .iter()
        .filter(|entry| matches!(entry, TraceEntry::Request { watch: Some(_), .. }))
        .count();
    assert!(watches > 2, "no watch was reopened:\n{first}");
    assert!(
        has(&first, "controller", "DELETE", "/configmaps/a-mirror"),
        "{first}"
    );
    for attempt in 1..RUNS {
        let again = match explorer.run(scenario_with_lost_watches(), run_controller) {
            Ok(trace) => trace,
            Err(error) => panic!("{error}"),
        };
        if let Some(difference) = first.first_difference(&again) {
            panic!(
                "run {attempt} differs from run 0 at {difference}\n\nrun 0:\n{first}\nrun {attempt}:\n{again}"
            );
        }
    }
    println!("{first}");
}
