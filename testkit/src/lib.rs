//! # ferrokube-testkit
//!
//! What ferrokube's own tests share, in one place instead of a `tests/common` folder compiled
//! into every test binary: a client for a kubeconfig context (the real kube-apiserver of
//! `scripts/e2e.sh`) or for the embedded server, a namespace per test, object builders, etcd
//! compaction, a TCP proxy that makes the network fail silently ([`fault_proxy`]), the informer
//! convergence checks ([`informer`]), the lease-window drill ([`lease_window`]) and the Mirror
//! controller that a runtime test and an explorer search share ([`mirror`]).
//!
//! It stands on the layer crates (client, informer, runtime, the embedded API server), not on the
//! front crate `ferrokube`: each crate's integration tests (`<crate>/tests/`) use it as a
//! dev-dependency and see their own crate's API, so `cargo test -p ferrokube-runtime` builds the
//! runtime's tests without the re-export layer above it. Not published. It is test code: a helper
//! that cannot do its job panics with a message, as an assertion in the test would.
//!
//! ## Real-server tests
//!
//! One way to mark a test that needs a real kube-apiserver: the `e2e` feature of the crate that
//! owns it, on the module holding it (`#[cfg(feature = "e2e")] mod e2e;` in that crate's test
//! binary). Without the feature the test is not compiled; with it the test takes its cluster from
//! the kubeconfig ([`client`], `KUBECONFIG`, its current context) and fails when there is none.
//! `scripts/e2e.sh` starts kube-apiserver and runs `cargo test -p <crate> --features e2e --test
//! <binary> -- <module>::` for each suite.

pub mod fault_proxy;
pub mod informer;
pub mod lease_window;
pub mod mirror;
pub mod protobuf;

use std::collections::BTreeMap;

use ferrokube_apiserver::RunningServer;
use ferrokube_client::api::PostParams;
use ferrokube_client::client::RetryPolicy;
use ferrokube_client::config::{Kubeconfig, kubeconfig_paths};
use ferrokube_client::{Api, Client, Config};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

pub fn config(context: Option<&str>) -> Config {
    let paths = kubeconfig_paths();
    let mut config = Config::from_kubeconfig(
        &Kubeconfig::read_merged(&paths).expect("kubeconfig readable"),
        context,
    )
    .expect("kubeconfig usable");
    // Tests create objects in bursts; the client's defaults (5 QPS) would make them slow, not wrong.
    config.qps = Some(200.0);
    config.burst = 400;
    config
}

pub fn client(context: Option<&str>) -> Client {
    Client::new(config(context)).expect("client builds")
}

/// Whether the kubeconfig has context `name`. Missing extra users fail the tests that need them,
/// unless `FERROKUBE_E2E_SINGLE_USER=1` says the cluster has only the current context's user.
pub fn has_context(name: &str) -> bool {
    let found = Kubeconfig::read_merged(&kubeconfig_paths())
        .map(|k| k.contexts.iter().any(|c| c.name == name))
        .unwrap_or(false);
    let single_user = std::env::var("FERROKUBE_E2E_SINGLE_USER").is_ok_and(|v| v == "1");
    assert!(
        found || single_user,
        "the kubeconfig has no context {name:?}; add one or set FERROKUBE_E2E_SINGLE_USER=1"
    );
    found
}

/// A fresh namespace for one test.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created = namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    generate_name: Some(format!("e2e-{prefix}-")),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .expect("namespace created");
    created.metadata.name.expect("generated name")
}

pub fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), value.to_string())])),
        ..ConfigMap::default()
    }
}

/// Compacts etcd up to `revision` (`FERROKUBE_E2E_ETCD`, set by `scripts/kube-apiserver.sh env`).
pub fn compact_etcd(revision: &str) {
    etcdctl(&["compact", revision]);
}

/// Writes `value` at `key` in etcd, behind kube-apiserver's back (`FERROKUBE_E2E_ETCD`): how a
/// test puts an object the server cannot decode where the server will read it.
pub fn etcd_put(key: &str, value: &str) {
    etcdctl(&["put", key, value]);
}

/// Deletes `key` from etcd, behind kube-apiserver's back (`FERROKUBE_E2E_ETCD`).
pub fn etcd_delete(key: &str) {
    etcdctl(&["del", key]);
}

fn etcdctl(args: &[&str]) {
    let endpoint = std::env::var("FERROKUBE_E2E_ETCD")
        .expect("FERROKUBE_E2E_ETCD names the server's etcd (scripts/kube-apiserver.sh env)");
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &endpoint])
        .args(args)
        .status()
        .expect("etcdctl runs");
    assert!(status.success(), "etcdctl {args:?}");
}

pub fn pod_template(name: &str) -> PodTemplate {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "template": {"spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]}}
    }))
    .expect("pod template json")
}

/// The config of an embedded server's own kubeconfig (context `ferrokube`, namespace `default`),
/// with no client-side rate limit: what the front crate's `ferrokube::testing::ServerClient`
/// gives a user, rebuilt here from the two crates it joins (the server and the client).
pub fn embedded_config(server: &RunningServer) -> Config {
    let kubeconfig = Kubeconfig::parse(&server.kubeconfig()).expect("the server's own kubeconfig");
    let mut config = Config::from_kubeconfig(&kubeconfig, None).expect("kubeconfig usable");
    config.qps = None;
    config
}

/// A client for an embedded server ([`embedded_config`]: no client-side rate limit); retries
/// only if `retries`.
pub fn embedded_client(server: &RunningServer, retries: bool) -> Client {
    let mut config = embedded_config(server);
    if !retries {
        config.retry = RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        };
    }
    Client::new(config).expect("client")
}

/// A ReplicaSet of `replicas` pods labelled `app=<name>` (selector `app=<name>`).
pub fn replica_set(
    name: &str,
    replicas: i32,
    min_ready_seconds: i32,
) -> k8s_openapi::api::apps::v1::ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": min_ready_seconds,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]},
            },
        },
    }))
    .expect("replica set json")
}
