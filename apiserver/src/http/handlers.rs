//! One HTTP request in, one response out: check the caller (host, origin, token), route the path,
//! then answer discovery and the fault switches here, and hand a resource request, parsed into an
//! [`ApiRequest`] (see [`super::request`]), to its verb's handler ([`super::verbs`]). What both
//! share (the server's state, the reply type) is in [`super::shared`].
//!
//! Requests whose `Accept` header asks for a Table (`kubectl get`) are answered with one, written by
//! [`crate::table`] (a write's Table has the written object's row), and those asking for metadata
//! only with `PartialObjectMetadata` (see `partial`); on `/api` and `/apis` the Accept header
//! chooses between legacy and aggregated discovery (see [`discovery`]).
//!
//! Create and update bodies may be JSON or Kubernetes protobuf (decoded to JSON by
//! [`crate::protobuf`]). Answers to resource requests are protobuf when the Accept header prefers
//! it and the kind has a protobuf form (errors' `Status` included; transcoded at the end by
//! [`crate::protobuf::answer`], a watch framed by its handler), else JSON.

use std::sync::Arc;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use serde_json::Value;

use super::body::{Body, bytes_response, error_response, json_response, read_body};
use super::discovery;
use super::request::{ApiRequest, FaultActions, Path};
use super::route::{Route, route};
use super::shared::{Reply, Shared, same_secret};
use super::verbs;
use crate::audit::AuditEntry;
use crate::faults::FaultSettings;
use crate::resource::Catalog;
use crate::status::StatusError;

/// Serves one request. `from_socket`: it came through the listening socket, so its `Host` and
/// `Origin` are checked first (see [`super::guard`]); connections handed in by
/// `RunningServer::serve_connection` are in-process, where no browser can reach.
pub async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
    from_socket: bool,
) -> Response<Body> {
    let path = request.uri().path().to_string();
    let method = request.method().clone();
    if from_socket {
        if let Err(refusal) = shared
            .hosts
            .check(&method, request.uri(), request.headers())
        {
            tracing::warn!(%method, %path, %refusal, "request refused");
            return error_response(&StatusError {
                code: 403,
                reason: "Forbidden",
                message: format!("forbidden: {refusal}"),
                details: None,
            });
        }
    }
    let audited = shared.audit.is_on()
        && matches!(
            method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        );
    let received = std::time::SystemTime::now();
    let user_agent = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    // One snapshot of the served types for the whole request (see `resource`).
    let catalog = shared.api.registry.snapshot();
    let route = route(&catalog, &path);
    // The health checks answer anyone, as kube-apiserver's do (its default RBAC lets even
    // anonymous users read /healthz, /livez and /readyz); and neither they nor the fault switches
    // wait while the server is paused (`resume` has to get through). Everything else, the fault
    // switches included, needs the token when there is one.
    if !matches!(route, Route::Health) {
        if !matches!(route, Route::Faults) {
            shared.faults.wait_unpaused().await;
        }
        if let Some(error) = unauthorized(&shared, &request) {
            return error_response(&error);
        }
    }
    let protobuf = matches!(
        route,
        Route::Collection { .. } | Route::Object { .. } | Route::NotFound
    ) && matches!(
        crate::table::encoding(
            request
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok()),
            crate::table::Endpoint { tables: true }
        ),
        crate::table::Encoding::Protobuf { .. }
    );
    let reply = dispatch(&shared, &catalog, route, request).await;
    let mut response = reply.unwrap_or_else(|e| error_response(&e));
    if protobuf {
        response = super::body::transcode(response);
    }
    tracing::debug!(%method, %path, status = response.status().as_u16(), "request");
    if audited {
        shared.audit.record(AuditEntry {
            received,
            method: method.to_string(),
            path,
            user_agent,
            code: response.status().as_u16(),
        });
    }
    response
}

fn unauthorized(shared: &Shared, request: &Request<Incoming>) -> Option<StatusError> {
    let token = shared.token.as_deref()?;
    let sent = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let matches = sent.is_some_and(|sent| same_secret(sent, token.as_bytes()));
    (!matches).then(|| StatusError {
        code: 401,
        reason: "Unauthorized",
        message: "Unauthorized".into(),
        details: None,
    })
}

async fn dispatch(
    shared: &Arc<Shared>,
    registry: &Arc<Catalog>,
    route: Route,
    request: Request<Incoming>,
) -> Reply {
    let method = request.method().clone();
    let get_only = |document: Option<Value>| match (&method, document) {
        (&Method::GET, Some(document)) => Ok(json_response(StatusCode::OK, &document)),
        (&Method::GET, None) => Err(StatusError::no_such_resource()),
        (m, _) => Err(StatusError::method_not_allowed(m.as_str())),
    };
    // A document that depends only on the catalog, from the cache.
    let cached = |document: discovery::Document| match (
        &method,
        shared.discovery.document(registry, document),
    ) {
        (&Method::GET, Some(bytes)) => Ok(bytes_response(StatusCode::OK, bytes)),
        (&Method::GET, None) => Err(StatusError::no_such_resource()),
        (m, _) => Err(StatusError::method_not_allowed(m.as_str())),
    };
    let path = match route {
        Route::Version => return get_only(Some(discovery::version())),
        Route::Health => return Ok(Response::new(Body::full("ok"))),
        Route::CoreVersions | Route::Groups if aggregated_discovery(&request) => {
            let document = if matches!(route, Route::CoreVersions) {
                discovery::Document::AggregatedCore
            } else {
                discovery::Document::AggregatedGroups
            };
            return cached(document).map(|mut response| {
                let headers = response.headers_mut();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(discovery::AGGREGATED_CONTENT_TYPE),
                );
                headers.insert(header::VARY, HeaderValue::from_static("Accept"));
                response
            });
        }
        Route::CoreVersions => return get_only(Some(discovery::core_versions(&shared.address))),
        Route::Groups => return cached(discovery::Document::Groups),
        Route::Group(group) => return cached(discovery::Document::Group(group)),
        Route::Resources { group, version } => {
            return cached(discovery::Document::Resources { group, version });
        }
        Route::OpenApiRoot => return get_only(Some(discovery::openapi_v3_root(registry))),
        Route::OpenApi(prefix) => return get_only(discovery::openapi_v3_group(registry, &prefix)),
        Route::NotFound => return Err(StatusError::no_such_resource()),
        Route::Faults => return faults(shared, request).await,
        Route::Collection {
            resource,
            namespace,
        } => Path {
            resource,
            namespace,
            object: None,
        },
        Route::Object {
            resource,
            namespace,
            name,
            subresource,
        } => Path {
            resource,
            namespace,
            object: Some((name, subresource)),
        },
    };
    let (head, body) = request.into_parts();
    let parsed = ApiRequest::parse(&head, path, shared.gates)?;
    verbs::serve(shared, parsed, body).await
}

/// Whether a discovery request asks for the aggregated form (see [`discovery`]).
fn aggregated_discovery(request: &Request<Incoming>) -> bool {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    crate::table::wants_aggregated_discovery(accept)
}

async fn faults(shared: &Shared, request: Request<Incoming>) -> Reply {
    let method = request.method().clone();
    let actions = FaultActions::parse(request.uri().query());
    match method {
        Method::GET => {}
        Method::PUT => {
            // Malformed JSON is a 400; JSON that is not valid settings a 422 naming each field.
            let body = read_body(request.into_body()).await?;
            let body: Value = serde_json::from_slice(&body)
                .map_err(|e| StatusError::bad_request(format!("fault settings: {e}")))?;
            let settings = FaultSettings::from_json(&body).map_err(|e| e.to_status())?;
            shared.faults.try_set(settings).map_err(|e| e.to_status())?;
        }
        Method::POST => {
            if actions.close_watches {
                shared.api.store.close_watches();
            }
            if actions.compact {
                shared.api.store.compact();
            }
        }
        m => return Err(StatusError::method_not_allowed(m.as_str())),
    }
    let settings = serde_json::to_value(shared.faults.settings())
        .map_err(|e| StatusError::internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, &settings))
}
