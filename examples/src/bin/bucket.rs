//! The Bucket sample on the embedded API server: a custom resource from the derive, kept equal to
//! an object store outside Kubernetes, through a short story.
//!
//! ```sh
//! cargo run -p ferrokube-examples --bin bucket
//! cargo run -p ferrokube-examples --bin bucket -- --keep-running   # then try kubectl, Ctrl-C ends
//! ```
//!
//! The story: apply the CRD (`Bucket::crd()`, server-side apply, wait until Established), start
//! the controller, create the namespace `shop` and a Bucket in it (Ready in `us-east`), label the
//! namespace `storage.ferrokube.dev/region=eu-west` (the bucket moves), delete the Bucket (its
//! finalizer deletes the stored bucket first; nothing is left). Each step waits, at most 20 s, for
//! what it expects; the last line says whether every step got there, and the exit code agrees.
//! The code to read is the module `ferrokube_examples::bucket` (`src/bucket/`); the thorough
//! test is `tests/bucket.rs`. Logs: `RUST_LOG` (default `warn`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use ferrokube::Api;
use ferrokube::api::{DeleteParams, Patch, PatchParams, PostParams};
use ferrokube::apiserver::ApiServer;
use ferrokube::crd::apply_and_wait;
use ferrokube::k8s_openapi::api::core::v1::Namespace;
use ferrokube::testing::ServerClient;
use ferrokube_examples::bucket::controller::{self, BucketController, REGION_LABEL};
use ferrokube_examples::bucket::resource::{Bucket, BucketSpec};
use ferrokube_examples::bucket::store::ObjectStore;
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "bucket",
    about = "The Bucket sample controller (a derived custom resource guarding an outside object \
             store) through a short story on the embedded API server."
)]
struct Cli {
    /// Before the deletion, write ./bucket.kubeconfig and wait for Ctrl-C (try `kubectl get bkt -A`).
    #[arg(long)]
    keep_running: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    ferrokube_examples::shared::logging::to_stderr("warn");
    match story(cli).await {
        Ok(()) => {
            println!("DONE: created, moved and deleted; nothing left in the store");
            ExitCode::SUCCESS
        }
        Err(error) => {
            println!("FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn story(cli: Cli) -> Result<(), BoxError> {
    let server = ApiServer::new().start().await?;
    let client = server.client()?;
    apply_and_wait(&client, &Bucket::crd(), Duration::from_secs(30)).await?;
    let store = ObjectStore::default();
    let reconciler = BucketController::new(store.clone(), Duration::from_secs(2));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(controller::run(client.clone(), reconciler, async {
        let _ = stopped.await;
    }));

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "shop"}}))?,
        )
        .await?;
    let buckets: Api<Bucket> = Api::namespaced(client.clone(), "shop");
    let spec = BucketSpec {
        retention_days: 30,
        versioned: true,
    };
    buckets
        .create(&PostParams::default(), &Bucket::new("assets", spec))
        .await?;
    println!("1. created shop/assets");
    wait_for("Ready in us-east", || {
        region_when_ready(&buckets, "us-east")
    })
    .await?;
    println!("   stored: {:?}", store.get("shop.assets"));

    let label = json!({"metadata": {"labels": {REGION_LABEL: "eu-west"}}});
    namespaces
        .patch("shop", &PatchParams::default(), &Patch::Merge(label))
        .await?;
    println!("2. labelled namespace shop {REGION_LABEL}=eu-west");
    wait_for("Ready in eu-west", || {
        region_when_ready(&buckets, "eu-west")
    })
    .await?;
    println!("   stored: {:?}", store.get("shop.assets"));

    if cli.keep_running {
        server.write_kubeconfig(std::path::Path::new("bucket.kubeconfig"))?;
        println!("   kubectl --kubeconfig bucket.kubeconfig get bkt -A   (Ctrl-C to go on)");
        tokio::signal::ctrl_c().await?;
    }
    buckets.delete("assets", &DeleteParams::default()).await?;
    println!("3. deleted shop/assets");
    wait_for("the Bucket gone", || async {
        Ok(buckets.get_opt("assets").await?.is_none())
    })
    .await?;
    if !store.names().is_empty() {
        return Err(format!("left in the store: {:?}", store.names()).into());
    }
    let _ = stop.send(());
    running.await??;
    Ok(())
}

/// True once the Bucket is Ready for its generation and its status names `region`.
async fn region_when_ready(buckets: &Api<Bucket>, region: &str) -> Result<bool, BoxError> {
    let bucket = buckets.get("assets").await?;
    let status = bucket.status.unwrap_or_default();
    let ready = status.conditions.iter().any(|c| {
        c.type_ == "Ready"
            && c.status == "True"
            && c.observed_generation == bucket.metadata.generation
    });
    if ready && status.region.as_deref() == Some(region) {
        println!("   {region}: {}", status.endpoint.unwrap_or_default());
        return Ok(true);
    }
    Ok(false)
}

/// Polls `check` every 50 ms until it says true; an error after 20 s.
async fn wait_for<F, Fut>(what: &str, mut check: F) -> Result<(), BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, BoxError>>,
{
    let start = Instant::now();
    while !check().await? {
        if start.elapsed() > Duration::from_secs(20) {
            return Err(format!("{what}: not within 20 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
