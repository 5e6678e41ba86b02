//! The demo's script, on any API server: install the CRD, run the controller, and make the world
//! misbehave: records created and edited, the provider drifting (announced and silent), the
//! controller stopped and restarted while records are deleted and edited, then everything deleted.
//! After each step it waits until the world has converged, and fails if it does not in time.
//!
//! Converged means: every live DnsRecord's provider entry equals its spec and is owned by it, its
//! `Ready` condition is True for its current generation, no provider record belongs to an object
//! that is gone, and no deleted object is left waiting on the finalizer.

use std::collections::BTreeSet;

use std::time::{Duration, Instant};

use ferrokube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use ferrokube::controller::Controller;
use ferrokube::controller::conditions::is_condition_true;
use ferrokube::core::Scope;
use ferrokube::crd::apply_and_wait;
use ferrokube::{Api, Client};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::controller::DnsController;
use super::provider::Provider;
use super::record::{DnsRecord, DnsRecordSpec, READY};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How the story runs.
#[derive(Debug, Clone)]
pub struct StoryOptions {
    /// Where the records live (created if missing).
    pub namespace: String,
    /// The seed of the provider's drift.
    pub seed: u64,
    /// The controller's polling period (how soon silent drift is found).
    pub poll: Duration,
    /// The longest wait for one step to converge.
    pub step_timeout: Duration,
}

impl Default for StoryOptions {
    fn default() -> Self {
        StoryOptions {
            namespace: "dns-demo".into(),
            seed: 7,
            poll: Duration::from_secs(1),
            step_timeout: Duration::from_secs(60),
        }
    }
}

/// A controller run that can be stopped (a process, in miniature).
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// The DnsRecord controller of `namespace` as the story runs it (not yet running): the records,
/// the ConfigMaps they own, and the provider's change feed; two workers. Run it with a
/// [`DnsController`] of the same `provider`.
pub fn controller(client: &Client, namespace: &str, provider: &Provider) -> Controller<DnsRecord> {
    Controller::<DnsRecord>::new(client.clone(), Scope::namespace(namespace))
        .name("dnsrecord")
        .owns::<ConfigMap>(Scope::namespace(namespace))
        .source(provider.changes())
        .workers(2)
}

fn start_controller(client: &Client, provider: &Provider, options: &StoryOptions) -> Running {
    let (stop, stopped) = oneshot::channel::<()>();
    let controller = controller(client, &options.namespace, provider);
    let reconciler = DnsController::new(provider.clone(), options.poll);
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(error) = controller.run(reconciler, shutdown).await {
            tracing::error!(%error, "the DnsRecord controller could not start");
        }
    });
    Running { stop, task }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Applies the CRD (`DnsRecord::crd()`, from the derive) and waits until it is Established.
pub async fn install_crd(client: &Client) -> Result<(), BoxError> {
    apply_and_wait(client, &DnsRecord::crd(), Duration::from_secs(30)).await?;
    Ok(())
}

/// Polls `check` until it says true, or fails after `timeout`.
async fn wait<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<(), BoxError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, BoxError>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What is not yet as it should be (empty: converged). See the [module docs](self).
pub async fn differences(
    api: &Api<DnsRecord>,
    provider: &Provider,
) -> Result<Vec<String>, BoxError> {
    let records = api.list(&ListParams::default()).await?.items;
    let outside = provider.records();
    let mut problems = Vec::new();
    let mut live_uids = BTreeSet::new();
    for record in &records {
        let name = record.metadata.name.clone().unwrap_or_default();
        if record.metadata.deletion_timestamp.is_some() {
            problems.push(format!(
                "{name}: deleted but still waiting on its finalizer"
            ));
            continue;
        }
        let uid = record.metadata.uid.clone().unwrap_or_default();
        live_uids.insert(uid.clone());
        match outside.get(&record.spec.fqdn) {
            Some(entry)
                if entry.owner_uid == uid
                    && entry.value == record.spec.value
                    && entry.type_ == record.spec.type_ => {}
            other => problems.push(format!(
                "{name}: provider has {other:?}, spec {:?}",
                record.spec
            )),
        }
        let status = record.status.clone().unwrap_or_default();
        let current = status
            .conditions
            .iter()
            .find(|c| c.type_ == READY)
            .is_some_and(|c| c.observed_generation == record.metadata.generation);
        if !is_condition_true(&status.conditions, READY) || !current {
            problems.push(format!(
                "{name}: not Ready for generation {:?}",
                record.metadata.generation
            ));
        }
    }
    for (fqdn, entry) in &outside {
        if !live_uids.contains(&entry.owner_uid) {
            problems.push(format!("{fqdn}: left at the provider by a deleted object"));
        }
    }
    Ok(problems)
}

async fn converge(
    step: &str,
    api: &Api<DnsRecord>,
    provider: &Provider,
    options: &StoryOptions,
) -> Result<(), BoxError> {
    let started = Instant::now();
    let last = parking_lot::Mutex::new(Vec::new());
    let outcome = wait(step, options.step_timeout, || async {
        let found = differences(api, provider).await?;
        let done = found.is_empty();
        *last.lock() = found;
        Ok(done)
    })
    .await;
    let last = last.into_inner();
    match outcome {
        Ok(()) => {
            println!(
                "{step:<58} converged in {:>5.1} s · {} provider records",
                started.elapsed().as_secs_f64(),
                provider.records().len()
            );
            Ok(())
        }
        Err(error) => Err(format!("{error}; still different: {last:#?}").into()),
    }
}

fn spec(fqdn: &str, value: &str) -> DnsRecordSpec {
    DnsRecordSpec {
        fqdn: fqdn.into(),
        type_: "A".into(),
        value: value.into(),
        ttl: Some(300),
    }
}

async fn patch_spec(
    api: &Api<DnsRecord>,
    name: &str,
    spec: serde_json::Value,
) -> Result<(), BoxError> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec})),
    )
    .await?;
    Ok(())
}

/// The whole story; `Ok` when every step converged.
pub async fn run(client: Client, options: StoryOptions) -> Result<(), BoxError> {
    install_crd(&client).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": options.namespace}}))?;
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(error) if error.is_already_exists() => {}
        Err(error) => return Err(error.into()),
    }
    let api: Api<DnsRecord> = Api::namespaced(client.clone(), &options.namespace);
    let provider = Provider::new(options.seed);
    let mut controller = start_controller(&client, &provider, &options);

    for i in 0..5 {
        let record = DnsRecord::new(
            &format!("r{i}"),
            spec(&format!("r{i}.example.test"), &format!("192.0.2.{i}")),
        );
        api.create(&PostParams::default(), &record).await?;
    }
    converge("1. five records created", &api, &provider, &options).await?;

    provider.drift(true);
    converge(
        "2. the provider changes a record and says so",
        &api,
        &provider,
        &options,
    )
    .await?;
    provider.drift(false);
    provider.drift(false);
    converge(
        "3. the provider drifts silently (found by polling)",
        &api,
        &provider,
        &options,
    )
    .await?;

    patch_spec(&api, "r1", json!({"value": "198.51.100.1"})).await?;
    patch_spec(&api, "r2", json!({"fqdn": "renamed.example.test"})).await?;
    converge(
        "4. a value and a name changed in the specs",
        &api,
        &provider,
        &options,
    )
    .await?;

    controller.stop().await;
    api.delete("r0", &DeleteParams::default()).await?;
    patch_spec(&api, "r3", json!({"value": "203.0.113.3"})).await?;
    provider.drift(false);
    println!("5. controller stopped; meanwhile r0 deleted, r3 edited, the provider drifted");
    controller = start_controller(&client, &provider, &options);
    converge("6. controller restarted", &api, &provider, &options).await?;

    // Someone deletes an owned ConfigMap: the owner is reconciled and it comes back.
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &options.namespace);
    maps.delete("r4-dns", &DeleteParams::default()).await?;
    wait(
        "the owned ConfigMap to come back",
        options.step_timeout,
        || async { Ok(maps.get_opt("r4-dns").await?.is_some()) },
    )
    .await?;
    println!("7. an owned ConfigMap deleted by hand was re-created");

    for name in ["r1", "r2", "r3", "r4"] {
        api.delete(name, &DeleteParams::default()).await?;
    }
    converge("8. every record deleted", &api, &provider, &options).await?;
    let left = api.list(&ListParams::default()).await?.items.len();
    controller.stop().await;
    if left != 0 || !provider.records().is_empty() {
        return Err(format!(
            "{left} DnsRecords and {} provider records left",
            provider.records().len()
        )
        .into());
    }
    println!("provider writes in all: {}", provider.writes());
    Ok(())
}
