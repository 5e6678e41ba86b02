//! Clients for the suites: one for an embedded server, and (with `--features e2e`) one for the
//! kubeconfig's cluster, with etcd compaction for the real server's `410 Gone` cases.

use ferrokube_apiserver::RunningServer;
use ferrokube_client::Client;
use ferrokube_client::Config;
use ferrokube_client::client::RetryPolicy;

/// A client for an embedded server: no client-side rate limit; retries only if `retries`.
pub fn embedded_client(server: &RunningServer, retries: bool) -> Client {
    let mut config = embedded_config(server);
    if retries {
        config.retry = RetryPolicy::default();
    }
    Client::new(config).expect("client")
}

/// The configuration of [`embedded_client`] without retries.
pub fn embedded_config(server: &RunningServer) -> Config {
    let mut config = Config::new(server.url().parse().expect("server url"));
    config.qps = None;
    config.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    config
}

/// The configuration of the kubeconfig's `context` (its current one for `None`).
#[cfg(feature = "e2e")]
pub fn config(context: Option<&str>) -> Config {
    use ferrokube_client::config::{Kubeconfig, kubeconfig_paths};
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

/// A client for the kubeconfig's `context`.
#[cfg(feature = "e2e")]
pub fn client(context: Option<&str>) -> Client {
    Client::new(config(context)).expect("client builds")
}

/// Compacts etcd up to `revision` (`FERROKUBE_E2E_ETCD`, set by `scripts/kube-apiserver.sh env`).
#[cfg(feature = "e2e")]
pub fn compact_etcd(revision: &str) {
    let endpoint = std::env::var("FERROKUBE_E2E_ETCD")
        .expect("FERROKUBE_E2E_ETCD names the etcd to compact (scripts/kube-apiserver.sh env)");
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &endpoint, "compact", revision])
        .status()
        .expect("etcdctl runs");
    assert!(status.success(), "etcdctl compact {revision}");
}
