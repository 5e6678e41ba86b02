//! The stale-cache comparison (examples/src/replicaset/churn.rs) on the real kube-apiserver
//! (scripts/e2e.sh): the ReplicaSet sample through the scripted churn with its protection off, then
//! on, each in a fresh namespace, counted from the server's own audit log (`$FERROKUBE_AUDIT_LOG`).
//! A real server's watch delay cannot be injected, so this is the lag it has by itself: with the
//! protection the controller must have no 409, no status going backwards and no pod created or
//! deleted beyond the need; without it, what happened is printed (as JSON lines, like
//! `examples/src/bin/bench_stale.rs`'s).
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
    let on = &outcomes[1];
    assert_eq!(on.conflicts, 0, "{on:?}");
    assert_eq!(on.backwards_status, 0, "{on:?}");
    assert_eq!(on.extra_creates, 0, "{on:?}");
    assert_eq!(on.extra_deletes, 0, "{on:?}");
    assert_eq!(on.worst_excess, 0, "{on:?}");
}
