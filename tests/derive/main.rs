//! `#[derive(CustomResource)]` on ferrokube's embedded API server: the generated CRD installs and
//! the derived type goes through the whole story of [`story`] (also run against kube-apiserver by
//! `tests/e2e/derive.rs`). Test names contain `derive` (`cargo test --workspace derive`).

use ferrokube::apiserver::ApiServer;
use ferrokube_testkit as common;

mod story;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derive_story_on_the_embedded_server() {
    let server = ApiServer::new().start().await.expect("server starts");
    let client = common::embedded_client(&server, true);
    let dir = std::env::temp_dir().join(format!("ferrokube-derive-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let namespace = common::namespace(&client, "derive").await;
    story::story(&story::Cluster {
        client,
        kubeconfig: Some(kubeconfig),
        namespace,
        enforces_pattern: false,
        serves_scale: false,
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}
