//! The manager's HTTP endpoint: `/healthz` and `/readyz` for the kubelet's probes, `/metrics` for
//! Prometheus. HTTP/1.1 only (probes and scrapers speak it), plain text, one task per connection.
//!
//! | path | 200 when | body |
//! |---|---|---|
//! | `/healthz` | the process answers, and leader election is healthy (client-go's `HealthzAdaptor`: not a leader whose lease ran out more than 20 s ago) | one `[+]check ok` / `[-]check failed: reason` line per check |
//! | `/readyz` | `/healthz`'s checks pass and every controller's caches have synced | same |
//! | `/metrics` | always | Prometheus text: every family of the manager's registry |
//!
//! Any other path is a 404. Like the API server's own health endpoints, a failing check answers
//! 500 with the list of checks, so `curl` shows which one failed.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::leader::Leadership;

/// How long past the end of its lease a leader still counts as healthy (client-go's
/// `HealthzAdaptor` timeout as kube-controller-manager sets it: 20 s).
pub(crate) const LEADER_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// What the health checks look at.
#[derive(Clone)]
pub(crate) struct Health {
    leadership: Option<Leadership>,
    /// Controllers whose caches have synced; ready when it reaches `controllers`.
    synced: Arc<AtomicUsize>,
    controllers: usize,
}

impl Health {
    pub(crate) fn new(
        leadership: Option<Leadership>,
        synced: Arc<AtomicUsize>,
        controllers: usize,
    ) -> Health {
        Health {
            leadership,
            synced,
            controllers,
        }
    }

    /// `(name, Ok or the reason it fails)` for each check of `/healthz`, plus the caches for
    /// `/readyz`.
    fn checks(&self, ready: bool) -> Vec<(&'static str, Result<(), String>)> {
        let mut checks = vec![("ping", Ok(()))];
        if let Some(leadership) = &self.leadership {
            checks.push((
                "leaderElection",
                leadership
                    .health_check(LEADER_HEALTH_TOLERANCE)
                    .map_err(|unhealthy| unhealthy.to_string()),
            ));
        }
        if ready {
            let synced = self.synced.load(Ordering::SeqCst);
            let caches = if synced >= self.controllers {
                Ok(())
            } else {
                Err(format!(
                    "{synced} of {} controllers have synced their caches",
                    self.controllers
                ))
            };
            checks.push(("informers-synced", caches));
        }
        checks
    }
}

/// A bound listener, not yet serving.
pub(crate) struct Endpoints {
    listener: TcpListener,
    health: Health,
    registry: Arc<Registry>,
}

impl Endpoints {
    /// Takes over a listener bound (non-blocking) by the manager's builder.
    pub(crate) fn from_std(
        listener: std::net::TcpListener,
        health: Health,
        registry: Arc<Registry>,
    ) -> std::io::Result<Endpoints> {
        Ok(Endpoints {
            listener: TcpListener::from_std(listener)?,
            health,
            registry,
        })
    }

    /// Answers requests until `stop` turns true.
    pub(crate) async fn serve(self, mut stop: watch::Receiver<bool>) {
        loop {
            let stream = tokio::select! {
                _ = stop.wait_for(|stop| *stop) => return,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        tracing::warn!(%error, "health endpoint: accept failed");
                        continue;
                    }
                },
            };
            let (health, registry) = (self.health.clone(), self.registry.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let reply = answer(request.uri().path(), &health, &registry);
                    async move { Ok::<_, Infallible>(reply) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "health endpoint: connection ended");
                }
            });
        }
    }
}

fn answer(path: &str, health: &Health, registry: &Registry) -> Response<Full<Bytes>> {
    match path {
        "/healthz" | "/livez" => checks_response(health.checks(false)),
        "/readyz" => checks_response(health.checks(true)),
        "/metrics" => {
            let mut text = String::new();
            let status = match prometheus_client::encoding::text::encode(&mut text, registry) {
                Ok(()) => StatusCode::OK,
                Err(error) => {
                    tracing::warn!(%error, "metrics: encoding failed");
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            };
            text_response(
                status,
                text,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
        }
        _ => text_response(
            StatusCode::NOT_FOUND,
            "not found\n".into(),
            "text/plain; charset=utf-8",
        ),
    }
}

fn checks_response(checks: Vec<(&'static str, Result<(), String>)>) -> Response<Full<Bytes>> {
    let mut body = String::new();
    let mut healthy = true;
    for (name, result) in &checks {
        match result {
            Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                healthy = false;
                body.push_str(&format!("[-]{name} failed: {reason}\n"));
            }
        }
    }
    let status = if healthy {
        body.push_str("ok\n");
        StatusCode::OK
    } else {
        body.push_str("check failed\n");
        StatusCode::INTERNAL_SERVER_ERROR
    };
    text_response(status, body, "text/plain; charset=utf-8")
}

fn text_response(
    status: StatusCode,
    body: String,
    content_type: &'static str,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}
