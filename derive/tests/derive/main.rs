//! `#[derive(CustomResource)]`, every test of it in one binary (`cargo test -p ferrokube-derive`):
//! the generated code as a user's crate sees it ([`generated`]: the type, its serde form, its trait
//! impls, the CRD and its structural schema), and on ferrokube's embedded API server the generated
//! CRD installs and the derived type goes through the whole story of [`story`]. With the crate's
//! `e2e` feature, module [`e2e`] runs the story against a real kube-apiserver too (the
//! kubeconfig's; `scripts/e2e.sh`). Test names contain `derive` (`cargo test --workspace derive`).

use ferrokube_apiserver::ApiServer;
use ferrokube_testkit as common;

#[cfg(feature = "e2e")]
mod e2e;
mod generated;
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

/// Printer columns replace kubectl's defaults (NAME stays): the derive puts AGE back, last, as
/// kubebuilder scaffolds it, unless told not to or a column shows the creation time already.
#[test]
fn derive_author_trap_printer_columns_keep_age_unless_told_not_to() {
    let columns = |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| -> Vec<(String, String, String)> {
        crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
            .collect()
    };
    let gear = columns(story::Gear::crd());
    assert_eq!(
        gear.last(),
        Some(&(
            "Age".to_string(),
            "date".to_string(),
            ".metadata.creationTimestamp".to_string()
        )),
        "{gear:?}"
    );
    assert_eq!(gear.len(), 4, "Teeth, Finish, Ready, Age: {gear:?}");
    let bare = columns(Bare::crd());
    assert_eq!(
        bare.len(),
        1,
        "no_age_column: only the column given: {bare:?}"
    );
    let own = columns(OwnAge::crd());
    assert_eq!(
        own.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["Created"],
        "a column of the creation time already: {own:?}"
    );
    assert!(
        columns(NoColumns::crd()).is_empty(),
        "no columns: kubectl's own"
    );
}

#[derive(
    ferrokube::CustomResource,
    Clone,
    Debug,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[resource(
    group = "derive.ferrokube.dev",
    version = "v1",
    kind = "Bare",
    no_age_column,
    printcolumn(name = "Size", type = "integer", json_path = ".spec.size")
)]
pub struct BareSpec {
    size: i32,
}

#[derive(
    ferrokube::CustomResource,
    Clone,
    Debug,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[resource(
    group = "derive.ferrokube.dev",
    version = "v1",
    kind = "OwnAge",
    printcolumn(
        name = "Created",
        type = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct OwnAgeSpec {
    size: i32,
}

#[derive(
    ferrokube::CustomResource,
    Clone,
    Debug,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[resource(group = "derive.ferrokube.dev", version = "v1", kind = "NoColumns")]
pub struct NoColumnsSpec {
    size: i32,
}
