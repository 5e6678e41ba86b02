//! The second sample controller (`examples/src/dns/`, a CustomResource managing records outside
//! Kubernetes) runs its whole story on the embedded API server: drift announced and silent, spec
//! edits, a restart with deletions and edits in between, an owned object deleted by hand, and
//! every record deleted. Each step must converge; the same story runs on a real kube-apiserver
//! in `scripts/e2e.sh` (`cargo run -p ferrokube-examples --bin dns -- --cluster`).

use ferrokube_examples::dns::story;

use ferrokube_testkit as common;

use ferrokube::apiserver::ApiServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_dns_sample_converges_through_drift_edits_restart_and_deletion() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    for seed in [1, 2] {
        let options = story::StoryOptions {
            namespace: format!("dns-{seed}"),
            seed,
            ..story::StoryOptions::default()
        };
        if let Err(error) = story::run(client.clone(), options).await {
            panic!("seed {seed}: {error}");
        }
    }
}
