//! The stale-cache comparison (examples/src/replicaset/churn.rs) on the real kube-apiserver
//! (scripts/e2e.sh): the ReplicaSet sample through the scripted churn with its protection off, then
//! on, each in a fresh namespace, counted from the server's own audit log (`$FERROKUBE_AUDIT_LOG`).
//! A real server's watch delay cannot be injected, so this is the lag it has by itself: with the
//! protection the controller must have no 409, no status going backwards and no pod created or
//! deleted beyond the need; without it, what happened is printed (as JSON lines, like
//! `examples/src/bin/bench_stale.rs`'s).
//!
//! Then the same script once more with the upstream kube-controller-manager reconciling (its writes
//! told by their User-Agent), to print its numbers beside ours: on 1.36 and later it has a protection
//! of its own, and its `replicaset_controller_stale_sync_skips_total` (read from its `/metrics`, see
//! [`super::kcm`]) is printed beside our `stale_skips`. Its numbers are reported, not asserted (how
//! often a real server's watch lags is not ours to fix), except that its `/metrics` must be readable
//! and show its replicaset workqueue.
//!
//! Nothing else may run a ReplicaSet controller meanwhile, so `scripts/e2e.sh` runs this module on
//! its own (`-- stale_e2e::`), not beside `parity_e2e`.

use ferrokube_testkit as common;

use std::path::PathBuf;
use std::time::Duration;

use ferrokube::Api;
use ferrokube::api::DeleteParams;
use k8s_openapi::api::core::v1::Namespace;

use ferrokube_examples::replicaset::churn;

use super::kcm::{self, Kcm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_protection_on_kube_apiserver_no_409s_and_no_repeated_actions() {
    let audit: PathBuf = std::env::var_os("FERROKUBE_AUDIT_LOG")
        .expect("FERROKUBE_AUDIT_LOG (scripts/kube-apiserver.sh env) names the server's audit log")
        .into();
    let config = common::config(None);
    let script = churn::Script {
        pods_become_ready: false,
        ..churn::Script::default()
    };
    let suffix = std::process::id();
    let mut outcomes = Vec::new();
    for protection in [false, true] {
        let namespace = format!("stale-{}-{suffix}", if protection { "on" } else { "off" });
        let outcome = churn::run(config.clone(), &namespace, protection, &script, || {
            ferrokube::apiserver::audit::read_kube_apiserver_log(&audit).unwrap_or_default()
        })
        .await
        .expect("the churn converges");
        println!("{}", outcome.json("kube-apiserver", Duration::ZERO));
        let namespaces: Api<Namespace> = Api::all(common::client(None));
        namespaces
            .delete(&namespace, &DeleteParams::default())
            .await
            .expect("namespace deleted");
        outcomes.push(outcome);
    }

    // The same script with kube-controller-manager reconciling.
    let namespace = format!("stale-kcm-{suffix}");
    let upstream = Kcm::start("replicaset", 20, 30).await;
    let version = upstream.version;
    let result = churn::run_external(
        config.clone(),
        &namespace,
        &script,
        || ferrokube::apiserver::audit::read_kube_apiserver_log(&audit).unwrap_or_default(),
        "kube-controller-manager/",
        &format!("kube-controller-manager {version}"),
    )
    .await;
    let metrics = upstream.metrics();
    upstream.stop().await;
    let mut theirs = result.expect("the churn converges with kube-controller-manager");
    theirs.protection = version.has_stale_sync_skips();
    let skips = kcm::sum_of(&metrics, kcm::STALE_SKIPS_METRIC);
    theirs.stale_skips = skips.unwrap_or(0);
    println!("{}", theirs.json("kube-apiserver", Duration::ZERO));
    println!(
        "stale skips: ferrokube (protection on) {}, kube-controller-manager {version} {} = {}",
        outcomes[1].stale_skips,
        kcm::STALE_SKIPS_METRIC,
        match (skips, version.has_stale_sync_skips()) {
            (Some(n), _) => n.to_string(),
            (None, true) => "0 (not yet exposed: no skip counted)".to_string(),
            (None, false) => "absent (no such metric before 1.36)".to_string(),
        }
    );
    assert!(
        metrics.contains("workqueue_adds_total{name=\"replicaset\"}"),
        "kube-controller-manager's /metrics has no replicaset workqueue:\n{}",
        &metrics[..metrics.len().min(2000)]
    );
    let namespaces: Api<Namespace> = Api::all(common::client(None));
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .expect("namespace deleted");

    let on = &outcomes[1];
    assert_eq!(on.conflicts, 0, "{on:?}");
    assert_eq!(on.backwards_status, 0, "{on:?}");
    assert_eq!(on.extra_creates, 0, "{on:?}");
    assert_eq!(on.extra_deletes, 0, "{on:?}");
    assert_eq!(on.worst_excess, 0, "{on:?}");
}
