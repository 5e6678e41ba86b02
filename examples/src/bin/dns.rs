//! A controller a controller author would write from scratch: DnsRecords (a CustomResource) kept
//! equal to the records of a DNS provider outside Kubernetes, which drifts on its own.
//!
//! ```sh
//! # on the embedded API server (CRDs included):
//! cargo run -p ferrokube-examples --bin dns
//! # on the cluster of $KUBECONFIG (scripts/e2e.sh does this):
//! cargo run -p ferrokube-examples --bin dns -- --cluster
//! ```
//!
//! What it shows, file by file (the module `ferrokube_examples::dns`; this program only runs it):
//!
//! | file | what |
//! |---|---|
//! | `src/dns/record.rs` | the custom resource's Rust type and its CustomResourceDefinition |
//! | `src/dns/provider.rs` | the simulated provider: records, drift (announced or silent), a change feed |
//! | `src/dns/controller.rs` | the reconciler: finalizer, provider writes, an owned ConfigMap, `Ready` |
//! | `src/dns/story.rs` | the script (drift, edits, a restart, deletions) and the convergence check |
//!
//! The controller uses every part of ferrokube's controller layer a typical one needs: a
//! finalizer (the outside record is deleted before the object goes), a status condition with
//! `observedGeneration`, an owned object, `Action::requeue` polling of the outside world, and the
//! provider's change feed as an external event source. The last line says whether the world
//! converged; the exit code agrees.
//!
//! Options: `--cluster` (use `$KUBECONFIG` or in-cluster credentials instead of an embedded
//! server), `--seed N` (the provider's drift; default 7); `--help`; bad usage exits with 2. Logs:
//! `RUST_LOG` (default `warn`).

use ferrokube_examples::dns::story;

use std::process::ExitCode;

use clap::Parser;
use ferrokube::apiserver::ApiServer;
use ferrokube::{Client, Config};

/// The command line.
#[derive(Parser, Debug)]
#[command(
    name = "dns",
    about = "The DnsRecord sample controller: DnsRecords (a CustomResource) kept equal to a drifting \
             DNS provider's records, on the embedded API server or a cluster.",
    args_override_self = true
)]
struct Cli {
    /// Use $KUBECONFIG or in-cluster credentials instead of an embedded server.
    #[arg(long)]
    cluster: bool,
    /// Seed of the provider's drift [default: 7]
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    ferrokube_examples::shared::logging::to_stderr("warn");
    let mut options = story::StoryOptions::default();
    if let Some(seed) = cli.seed {
        options.seed = seed;
    }
    let result = if cli.cluster {
        match Client::try_default() {
            Ok(client) => story::run(client, options).await,
            Err(error) => Err(error.into()),
        }
    } else {
        embedded(options).await
    };
    match result {
        Ok(()) => {
            println!("CONVERGED: every provider record equals its DnsRecord, none left behind");
            ExitCode::SUCCESS
        }
        Err(error) => {
            println!("NOT CONVERGED: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn embedded(options: story::StoryOptions) -> Result<(), story::BoxError> {
    let server = ApiServer::new().start().await?;
    let mut config = Config::new(server.url().parse()?);
    config.qps = None;
    story::run(Client::new(config)?, options).await
}
