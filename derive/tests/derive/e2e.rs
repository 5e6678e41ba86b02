//! `#[derive(CustomResource)]` against the real kube-apiserver (1.20): the generated CRD is
//! accepted as structural and Established, the derived type goes through the story of
//! `derive/tests/derive/story.rs` (with `pattern` and `/scale`, which the embedded server lacks), and
//! `apply_and_wait` reports names the server refuses and a wait that runs out, as typed errors.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrokube::Api;
use ferrokube::api::DeleteParams;
use ferrokube::crd::{
    CustomResourceExt, Definition, EstablishError, apply_and_wait, structural_schema,
};
use ferrokube_testkit as common;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::story::{self, Gear, GearSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derive_story_on_kube_apiserver() {
    let client = common::client(None);
    let namespace = common::namespace(&client, "derive").await;
    story::story(&story::Cluster {
        client,
        kubeconfig: None,
        namespace,
        enforces_pattern: true,
        serves_scale: true,
    })
    .await;
}

/// A definition beside `Gear`'s, in the same group, under another plural.
fn other(
    plural: &'static str,
    kind: &'static str,
    group: &'static str,
) -> CustomResourceDefinition {
    let definition = Definition {
        group,
        plural,
        singular: plural,
        kind,
        ..Gear::DEFINITION
    };
    let spec = structural_schema::<GearSpec>().expect("schema");
    definition
        .custom_resource_definition(spec, None)
        .expect("crd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derive_apply_and_wait_reports_names_not_accepted() {
    let client = common::client(None);
    apply_and_wait(&client, &Gear::crd(), Duration::from_secs(30))
        .await
        .expect("Gear's CRD");
    // Another plural, the same kind in the same group: kube-apiserver refuses the names.
    let clash = other("gearclones", "Gear", Gear::DEFINITION.group);
    let result = apply_and_wait(&client, &clash, Duration::from_secs(30)).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds
        .delete("gearclones.derive.ferrokube.dev", &DeleteParams::default())
        .await;
    match result {
        Err(EstablishError::NamesNotAccepted {
            name,
            reason,
            message,
        }) => {
            assert_eq!(name, "gearclones.derive.ferrokube.dev");
            // kube-apiserver 1.20 checks the list kind first: ListKindConflict.
            assert!(reason.ends_with("KindConflict"), "{reason}");
            assert!(message.contains("Gear"), "{message}");
        }
        other => panic!("expected NamesNotAccepted, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derive_apply_and_wait_times_out_with_the_conditions_seen() {
    let client = common::client(None);
    // A group of its own (a new CRD each run): kube-apiserver establishes it a moment after the
    // write, so a wait of zero cannot see it.
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let group: &'static str = Box::leak(format!("t{nanos}.derive.ferrokube.dev").into_boxed_str());
    let fresh = other("timers", "Timer", group);
    let result = apply_and_wait(&client, &fresh, Duration::ZERO).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = apply_and_wait(&client, &fresh, Duration::from_secs(30)).await;
    let _ = crds
        .delete(&format!("timers.{group}"), &DeleteParams::default())
        .await;
    match result {
        Err(EstablishError::Timeout { name, after, .. }) => {
            assert_eq!(name, format!("timers.{group}"));
            assert_eq!(after, Duration::ZERO);
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    established.expect("Established given time");
}
