//! `--metrics-addr`: the controller's metrics in Prometheus' text format at `/metrics`.
//!
//! The workqueue's and the informers' metrics come from their Prometheus registries; the
//! controller's own counters ([`Stats`]) are appended as `replicaset_controller_*_total`.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::controller::Stats;

/// Answers every request on `listener` with the metrics, until the program ends.
pub async fn serve(listener: TcpListener, registry: Arc<Registry>, stats: Arc<Stats>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "metrics: accept failed");
                continue;
            }
        };
        let (registry, stats) = (registry.clone(), stats.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let reply = if request.uri().path() == "/metrics" {
                    Response::new(Full::new(Bytes::from(render(&registry, &stats))))
                } else {
                    let mut missing = Response::new(Full::new(Bytes::from_static(b"not found\n")));
                    *missing.status_mut() = hyper::StatusCode::NOT_FOUND;
                    missing
                };
                async move { Ok::<_, Infallible>(reply) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "metrics: connection ended");
            }
        });
    }
}

fn render(registry: &Registry, stats: &Stats) -> String {
    let mut text = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode_registry(&mut text, registry) {
        tracing::warn!(%error, "metrics: encoding failed");
    }
    let counters: [(&str, &str, &AtomicU64); 7] = [
        ("syncs", "ReplicaSet syncs run", &stats.syncs),
        (
            "failed_syncs",
            "syncs that failed and were retried",
            &stats.failed_syncs,
        ),
        ("pods_created", "pods created", &stats.pods_created),
        ("pods_deleted", "pods deleted", &stats.pods_deleted),
        (
            "status_writes",
            "status updates written",
            &stats.status_writes,
        ),
        (
            "replicaset_events",
            "ReplicaSet informer events handled",
            &stats.replicaset_events,
        ),
        (
            "pod_events",
            "Pod informer events handled",
            &stats.pod_events,
        ),
    ];
    for (name, help, counter) in counters {
        let name = format!("replicaset_controller_{name}_total");
        text.push_str(&format!(
            "# HELP {name} {help}.\n# TYPE {name} counter\n{name} {}\n",
            Stats::get(counter)
        ));
    }
    text.push_str("# EOF\n");
    text
}
