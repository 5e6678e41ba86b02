//! One HTTP request in, one response out: parse the path and query, call the [`Api`], render JSON.
//!
//! Watches are the one streaming response: a task moves items from the store's [`WatchFeed`] to the
//! response body as newline-delimited `{"type":…,"object":…}` events, applying the delivery-delay fault
//! and `timeoutSeconds`, and ends the body when the store closes the watcher.
//!
//! Requests whose `Accept` header asks for a Table (`kubectl get`) are answered with one, written by
//! [`crate::table`] (a write's Table has the written object's row); the Accept header is read for
//! nothing else.
//!
//! Create and update bodies may be JSON or Kubernetes protobuf (decoded to JSON by
//! [`crate::protobuf`]); answers are always JSON.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::body::Body;
use super::discovery;
use super::guard::HostPolicy;
use super::query;
use super::route::{Route, Subresource, route};
use crate::api::{Api, DeleteOptions, Deletion, ListOptions, Propagation, WatchOptions};
use crate::faults::{FaultSettings, Faults};
use crate::patch::PatchType;
use crate::resource::{Catalog, ResourceType};
use crate::review;
use crate::selection::Selection;
use crate::status::StatusError;
use crate::store::{Stored, WatchFeed, WatchItem};
use crate::strategy::{self, Endpoint};
use crate::table::{self, Convertor, IncludeObject, TableVersion, TableWriter, Wanted};

/// The largest request body accepted, of every verb and format (JSON, protobuf, merge, JSON and
/// strategic merge patches, apply YAML); more is 413 `RequestEntityTooLarge`. kube-apiserver's
/// `MaxRequestBodyBytes` (3 MiB, `k8s.io/apiserver/pkg/server/config.go`: twice etcd's 1.5 MB
/// request limit, a JSON body being larger than the protobuf stored), with its message
/// `Request entity too large: limit is 3145728`.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Everything a request handler needs.
pub struct Shared {
    pub api: Api,
    pub faults: Arc<Faults>,
    /// `host:port`, for `/api`'s serverAddressByClientCIDRs.
    pub address: String,
    /// A bearer token every request must carry, if set.
    pub token: Option<String>,
    /// The hosts and origins a request from the listening socket may name (see [`super::guard`]).
    pub hosts: HostPolicy,
    /// How long a watch without `timeoutSeconds` stays open.
    pub default_watch_timeout: Duration,
    /// Write requests, when auditing is on.
    pub audit: Arc<AuditLog>,
}

use crate::audit::{AuditEntry, AuditLog};

type Reply = Result<Response<Body>, StatusError>;

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
    let reply = dispatch(&shared, &catalog, route, request).await;
    let response = reply.unwrap_or_else(|e| error_response(&e));
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

/// Whether `sent` is `secret`, in a time that does not depend on where they first differ (so the
/// answer's timing does not leak the token a byte at a time).
fn same_secret(sent: &[u8], secret: &[u8]) -> bool {
    sent.len() == secret.len()
        && sent
            .iter()
            .zip(secret)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

async fn dispatch(
    shared: &Arc<Shared>,
    registry: &Catalog,
    route: Route,
    request: Request<Incoming>,
) -> Reply {
    let method = request.method().clone();
    let params = query::parse(request.uri().query());
    let get_only = |document: Option<Value>| match (&method, document) {
        (&Method::GET, Some(document)) => Ok(json_response(StatusCode::OK, &document)),
        (&Method::GET, None) => Err(StatusError::no_such_resource()),
        (m, _) => Err(StatusError::method_not_allowed(m.as_str())),
    };
    match route {
        Route::Version => get_only(Some(discovery::version())),
        Route::Health => Ok(Response::new(Body::full("ok"))),
        Route::CoreVersions => get_only(Some(discovery::core_versions(&shared.address))),
        Route::Groups => get_only(Some(discovery::groups(registry))),
        Route::Group(group) => get_only(discovery::group_document(registry, &group)),
        Route::Resources { group, version } => {
            get_only(discovery::resources(registry, &group, &version))
        }
        Route::OpenApiRoot => get_only(Some(discovery::openapi_v3_root(registry))),
        Route::OpenApi(prefix) => get_only(discovery::openapi_v3_group(registry, &prefix)),
        Route::NotFound => Err(StatusError::no_such_resource()),
        Route::Faults => faults(shared, request).await,
        Route::Collection {
            resource,
            namespace,
        } => {
            let ns = namespace.as_deref();
            match method {
                // An access review is create-only: kube-apiserver answers anything else with 405.
                Method::POST if resource.review => {
                    wanted_table(&request, false)?;
                    let review = read_object(request).await?;
                    Ok(json_response(StatusCode::CREATED, &review::allow(review)))
                }
                _ if resource.review => Err(StatusError::method_not_allowed(method.as_str())),
                Method::GET if is_true(params.get("watch")) => {
                    let table = wanted_table(&request, true)?;
                    watch(shared, &resource, ns, &params, table)
                }
                Method::GET => {
                    let table = wanted_table(&request, true)?;
                    list(shared, &resource, ns, &params, table)
                }
                Method::POST => {
                    let table = wanted_table(&request, true)?;
                    write_fault(shared)?;
                    let manager = field_manager(&request, &params);
                    let object = read_object(request).await?;
                    let created = shared.api.create_by(
                        &resource,
                        ns,
                        object,
                        is_dry_run(&params),
                        &manager,
                    )?;
                    object_reply(
                        shared,
                        &resource,
                        StatusCode::CREATED,
                        &created,
                        table,
                        &params,
                    )
                }
                Method::DELETE if resource.delete_collection => {
                    let table = wanted_table(&request, true)?;
                    write_fault(shared)?;
                    let selection = selection(&resource, &params)?;
                    let (options, dry_run) =
                        delete_options(&params, read_json_or_empty(request).await?)?;
                    let deleted = shared
                        .api
                        .delete_collection(&resource, ns, &selection, &options, dry_run)?;
                    let revision = shared.api.store.revision();
                    if let Some(version) = table {
                        let writer = table_writer(shared, &resource, version, &params)?;
                        let meta = table::ListMeta {
                            resource_version: revision.to_string(),
                            ..table::ListMeta::default()
                        };
                        let objects = deleted.iter().map(|s| s.object.as_ref());
                        return Ok(json_response(StatusCode::OK, &writer.list(objects, &meta)));
                    }
                    let body = list_body(&resource, revision, &deleted, None, None);
                    Ok(bytes_response(StatusCode::OK, body))
                }
                m => Err(StatusError::method_not_allowed(m.as_str())),
            }
        }
        Route::Object {
            resource,
            namespace,
            name,
            subresource,
        } => {
            object(
                shared,
                &resource,
                namespace.as_deref(),
                &name,
                subresource,
                &params,
                request,
            )
            .await
        }
    }
}

async fn object(
    shared: &Arc<Shared>,
    resource: &Arc<ResourceType>,
    ns: Option<&str>,
    name: &str,
    subresource: Option<Subresource>,
    params: &HashMap<String, String>,
    request: Request<Incoming>,
) -> Reply {
    if resource.review {
        return Err(StatusError::method_not_allowed(request.method().as_str()));
    }
    let api = &shared.api;
    let dry_run = is_dry_run(params);
    let endpoint = match subresource {
        Some(Subresource::Status) if resource.status => Endpoint::Status,
        Some(Subresource::Scale) if resource.scale => Endpoint::Main,
        None => Endpoint::Main,
        Some(_) => return Err(StatusError::no_such_resource()),
    };
    let scale = subresource == Some(Subresource::Scale);
    let method = request.method().clone();
    // A write answers with a Table too when asked for one (not for subresources: no convertor).
    let write_table = match method {
        Method::PUT | Method::PATCH | Method::DELETE => {
            wanted_table(&request, subresource.is_none())?
        }
        _ => None,
    };
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    match method {
        Method::GET if scale => {
            // Subresources have no table convertor: only a non-Table clause will do.
            wanted_table(&request, false)?;
            Ok(json_response(
                StatusCode::OK,
                &api.get_scale(resource, ns, name)?,
            ))
        }
        Method::GET => {
            let table = wanted_table(&request, subresource.is_none())?;
            let stored = strategy::read_defaults(resource, api.get(resource, ns, name)?);
            match table {
                Some(version) => {
                    let writer = table_writer(shared, resource, version, params)?;
                    let table = writer.object(&stored.object, true);
                    Ok(json_response(StatusCode::OK, &table))
                }
                None => Ok(stored_response(StatusCode::OK, &stored)),
            }
        }
        Method::PUT => {
            write_fault(shared)?;
            update_fault(shared, resource, name)?;
            let manager = field_manager(&request, params);
            let object = read_object(request).await?;
            let updated = if scale {
                api.update_scale(resource, ns, name, dry_run, |_| Ok(object))?
            } else {
                api.update_by(resource, ns, name, endpoint, object, dry_run, &manager)?
            };
            object_reply(
                shared,
                resource,
                StatusCode::OK,
                &updated,
                write_table,
                params,
            )
        }
        Method::PATCH if is_apply(&content_type) && !scale => {
            apply(
                shared,
                resource,
                ns,
                name,
                endpoint,
                params,
                request,
                write_table,
            )
            .await
        }
        Method::PATCH => {
            let apply = is_apply(&content_type);
            crate::apply::verb::check_patch_options(
                apply,
                params.get("fieldManager").map(String::as_str),
                params.get("force").map(String::as_str),
            )?;
            let kind = PatchType::from_content_type(&content_type)?;
            write_fault(shared)?;
            update_fault(shared, resource, name)?;
            let manager = field_manager(&request, params);
            let patch = read_json(request).await?;
            let patched = if scale {
                api.update_scale(resource, ns, name, dry_run, |current| {
                    crate::patch::apply(kind, &current, &patch)
                })?
            } else {
                api.patch_by(
                    resource, ns, name, endpoint, kind, &patch, dry_run, &manager,
                )?
            };
            object_reply(
                shared,
                resource,
                StatusCode::OK,
                &patched,
                write_table,
                params,
            )
        }
        Method::DELETE if subresource.is_none() => {
            write_fault(shared)?;
            let (options, dry_run) = delete_options(params, read_json_or_empty(request).await?)?;
            match api.delete(resource, ns, name, &options, dry_run)? {
                Deletion::Pending(stored) => {
                    stored_reply(shared, resource, &stored, write_table, params)
                }
                Deletion::Deleted(stored) if resource.returns_deleted_object => {
                    stored_reply(shared, resource, &stored, write_table, params)
                }
                Deletion::Deleted(stored) => {
                    let mut details = serde_json::Map::new();
                    details.insert("name".into(), name.into());
                    if !resource.group.is_empty() {
                        details.insert("group".into(), resource.group.clone().into());
                    }
                    details.insert("kind".into(), resource.plural.clone().into());
                    let uid = crate::meta::uid(&stored.object).unwrap_or_default();
                    details.insert("uid".into(), uid.into());
                    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "details": details});
                    Ok(json_response(StatusCode::OK, &status))
                }
            }
        }
        m => Err(StatusError::method_not_allowed(m.as_str())),
    }
}

/// Whether a PATCH's `Content-Type` is server-side apply's.
fn is_apply(content_type: &str) -> bool {
    content_type.split(';').next().map(str::trim) == Some(crate::apply::CONTENT_TYPE)
}

/// The field manager of a write: `?fieldManager=`, or the User-Agent's product.
fn field_manager(request: &Request<Incoming>, params: &HashMap<String, String>) -> String {
    let user_agent = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    crate::apply::manager_name(params.get("fieldManager").map(String::as_str), user_agent)
}

/// PATCH with `application/apply-patch+yaml`: server-side apply (see [`crate::apply`]); 201 when
/// it created the object. Subresources cannot be applied to here (415).
#[allow(clippy::too_many_arguments)]
async fn apply(
    shared: &Arc<Shared>,
    resource: &ResourceType,
    ns: Option<&str>,
    name: &str,
    endpoint: Endpoint,
    params: &HashMap<String, String>,
    request: Request<Incoming>,
    table: Option<TableVersion>,
) -> Reply {
    use crate::apply::verb::{self, ApplyOutcome, ApplyRequest};
    let manager = params.get("fieldManager").map(String::as_str);
    verb::check_patch_options(true, manager, params.get("force").map(String::as_str))?;
    if endpoint != Endpoint::Main {
        return Err(StatusError::unsupported_media_type(
            crate::apply::CONTENT_TYPE,
        ));
    }
    write_fault(shared)?;
    update_fault(shared, resource, name)?;
    let body = read_body(request).await?;
    let applied = ApplyRequest {
        config: verb::parse_body(&body)?,
        manager: manager.unwrap_or_default().to_string(),
        force: is_true(params.get("force")),
    };
    let (object, outcome) = shared
        .api
        .apply(resource, ns, name, &applied, is_dry_run(params))?;
    let code = match outcome {
        ApplyOutcome::Created => StatusCode::CREATED,
        ApplyOutcome::Updated => StatusCode::OK,
    };
    object_reply(shared, resource, code, &object, table, params)
}

/// The object a write returns, or a one-row Table of it when the client asked for one.
fn object_reply(
    shared: &Shared,
    resource: &ResourceType,
    code: StatusCode,
    object: &Value,
    table: Option<TableVersion>,
    params: &HashMap<String, String>,
) -> Reply {
    match table {
        Some(version) => {
            let writer = table_writer(shared, resource, version, params)?;
            Ok(json_response(code, &writer.object(object, true)))
        }
        None => Ok(json_response(code, object)),
    }
}

/// [`object_reply`] for a stored object (a 200 with its stored bytes when no Table is wanted).
fn stored_reply(
    shared: &Shared,
    resource: &ResourceType,
    stored: &Stored,
    table: Option<TableVersion>,
    params: &HashMap<String, String>,
) -> Reply {
    match table {
        Some(_) => object_reply(
            shared,
            resource,
            StatusCode::OK,
            &stored.object,
            table,
            params,
        ),
        None => Ok(stored_response(StatusCode::OK, stored)),
    }
}

fn write_fault(shared: &Shared) -> Result<(), StatusError> {
    match shared.faults.write_failure() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn update_fault(shared: &Shared, resource: &ResourceType, name: &str) -> Result<(), StatusError> {
    if shared.faults.update_conflicts() {
        return Err(StatusError::conflict(resource, name, StatusError::MODIFIED));
    }
    Ok(())
}

fn is_true(value: Option<&String>) -> bool {
    matches!(value.map(String::as_str), Some("true" | "1"))
}

fn is_dry_run(params: &HashMap<String, String>) -> bool {
    params.get("dryRun").is_some_and(|v| v == "All")
}

fn selection(
    resource: &ResourceType,
    params: &HashMap<String, String>,
) -> Result<Selection, StatusError> {
    Selection::parse(
        resource,
        params.get("labelSelector").map(String::as_str),
        params.get("fieldSelector").map(String::as_str),
    )
}

/// The Table version a read's Accept header asks for, if it asks for one this endpoint (`tables`:
/// it has a table convertor) can serve; `None` for the plain object; 406 when no Accept clause can
/// be served. Checked before anything is read, as kube-apiserver does. See [`crate::table`].
fn wanted_table(
    request: &Request<Incoming>,
    tables: bool,
) -> Result<Option<TableVersion>, StatusError> {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    match table::negotiate(accept, table::Endpoint { tables })? {
        Wanted::Table(version) => Ok(Some(version)),
        Wanted::Object => Ok(None),
    }
}

/// The writer of a Table of `version`, made once the objects have been read: a bad `includeObject`
/// is a 400 only then (a missing object is a 404 first), as on kube-apiserver.
fn table_writer(
    shared: &Shared,
    resource: &ResourceType,
    version: TableVersion,
    params: &HashMap<String, String>,
) -> Result<TableWriter, StatusError> {
    Ok(TableWriter {
        convertor: Convertor::for_resource(resource, &shared.api),
        version,
        include: IncludeObject::parse(params.get("includeObject").map(String::as_str))?,
        now: table::Instant::now(),
    })
}

fn list(
    shared: &Shared,
    resource: &ResourceType,
    ns: Option<&str>,
    params: &HashMap<String, String>,
    table: Option<TableVersion>,
) -> Reply {
    let limit = match params.get("limit").map(|l| l.parse::<usize>()) {
        None => None,
        Some(Ok(limit)) => Some(limit),
        Some(Err(_)) => {
            return Err(StatusError::bad_request(
                "limit must be a non-negative integer",
            ));
        }
    };
    let options = ListOptions {
        selection: selection(resource, params)?,
        limit,
        continue_token: params.get("continue").filter(|c| !c.is_empty()).cloned(),
        resource_version: params.get("resourceVersion").cloned(),
        resource_version_match: params.get("resourceVersionMatch").cloned(),
    };
    let mut result = shared.api.list(resource, ns, &options)?;
    if resource.schema.is_some() {
        let items = std::mem::take(&mut result.page.items);
        result.page.items = items
            .into_iter()
            .map(|s| strategy::read_defaults(resource, s))
            .collect();
    }
    if let Some(version) = table {
        let writer = table_writer(shared, resource, version, params)?;
        let meta = table::ListMeta {
            resource_version: result.page.revision.to_string(),
            continue_token: result.continue_token.clone(),
            remaining: result.continue_token.as_ref().and(result.page.remaining),
        };
        let objects = result.page.items.iter().map(|s| s.object.as_ref());
        return Ok(json_response(StatusCode::OK, &writer.list(objects, &meta)));
    }
    let body = list_body(
        resource,
        result.page.revision,
        &result.page.items,
        result.continue_token.as_deref(),
        result.page.remaining,
    );
    Ok(bytes_response(StatusCode::OK, body))
}

/// A `<Kind>List` body, assembled from each object's stored bytes.
fn list_body(
    resource: &ResourceType,
    revision: u64,
    items: &[Stored],
    continue_token: Option<&str>,
    remaining: Option<u64>,
) -> Bytes {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if let (Some(token), Some(map)) = (continue_token, metadata.as_object_mut()) {
        map.insert("continue".into(), token.into());
        if let Some(remaining) = remaining {
            map.insert("remainingItemCount".into(), remaining.into());
        }
    }
    let head = json!({"kind": format!("{}List", resource.kind), "apiVersion": resource.api_version(), "metadata": metadata});
    let head = head.to_string();
    let size: usize = items.iter().map(|s| s.json.len() + 1).sum();
    let mut body = BytesMut::with_capacity(head.len() + size + 16);
    // `head` is `{...}`: reopen it to append the items.
    body.put_slice(&head.as_bytes()[..head.len() - 1]);
    body.put_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.put_u8(b',');
        }
        body.put_slice(&item.json);
    }
    body.put_slice(b"]}");
    body.freeze()
}

fn watch(
    shared: &Arc<Shared>,
    resource: &Arc<ResourceType>,
    ns: Option<&str>,
    params: &HashMap<String, String>,
    table: Option<TableVersion>,
) -> Reply {
    let timeout = match params.get("timeoutSeconds").map(|t| t.parse::<u64>()) {
        None => None,
        Some(Ok(seconds)) => Some(Duration::from_secs(seconds)),
        Some(Err(_)) => {
            return Err(StatusError::bad_request(
                "timeoutSeconds must be an integer",
            ));
        }
    };
    let options = WatchOptions {
        selection: selection(resource, params)?,
        resource_version: params.get("resourceVersion").cloned(),
        bookmarks: is_true(params.get("allowWatchBookmarks")),
        send_initial_events: is_true(params.get("sendInitialEvents")),
        timeout,
    };
    let feed = shared.api.watch(resource, ns, &options)?;
    let table = match table {
        Some(version) => Some(table_writer(shared, resource, version, params)?),
        None => None,
    };
    let (tx, rx) = mpsc::channel(64);
    let timeout = options.timeout.unwrap_or(shared.default_watch_timeout);
    tokio::spawn(stream_watch(
        feed,
        tx,
        resource.clone(),
        shared.faults.clone(),
        timeout,
        table,
    ));
    let mut response = Response::new(Body::Stream(rx));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(response)
}

/// Moves a watcher's items to its response body until the feed ends, the client leaves, or the
/// timeout passes. With a `table` writer, objects are sent as one-row Tables, headers on the first.
async fn stream_watch(
    mut feed: WatchFeed,
    tx: mpsc::Sender<Bytes>,
    resource: Arc<ResourceType>,
    faults: Arc<Faults>,
    timeout: Duration,
    mut table: Option<TableWriter>,
) {
    let mut headers_sent = false;
    // `None`: a timeout past what the clock can represent (`timeoutSeconds` near 2^64), which is
    // no timeout; adding it to now would panic.
    let deadline = tokio::time::Instant::now().checked_add(timeout);
    let expired = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(expired);
    loop {
        let item = match feed.backlog.pop_front() {
            Some(item) => item,
            None => tokio::select! {
                item = feed.live.recv() => match item {
                    Some(item) => item,
                    None => return,
                },
                _ = tx.closed() => return,
                () = &mut expired => return,
            },
        };
        if let WatchItem::Event(_, stored) = &item {
            let delay = faults.watch_delay();
            if !delay.is_zero() {
                // The delay is at most an hour (see `crate::faults`); an overflow delivers at once.
                if let Some(due) = stored.written.checked_add(delay) {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
                }
            }
        }
        let last = matches!(item, WatchItem::Error(_));
        let line = match &mut table {
            Some(writer) => render_table(writer, &resource, &item, &mut headers_sent),
            None => render(&resource, &item),
        };
        if tx.send(line).await.is_err() || last {
            return;
        }
        if deadline.is_some_and(|deadline| tokio::time::Instant::now() >= deadline) {
            return;
        }
    }
}

/// One watch event line of a watch asked for as Tables: an object event carries a one-row Table,
/// and so does a bookmark (its row made from the bookmark's near-empty object, as kube-apiserver
/// makes it); the first of them carries the column definitions. Errors are sent as they are.
fn render_table(
    writer: &mut TableWriter,
    resource: &ResourceType,
    item: &WatchItem,
    headers_sent: &mut bool,
) -> Bytes {
    let table = match item {
        WatchItem::Event(event, stored) => {
            writer.now = table::Instant::now();
            json!({"type": event.as_str(), "object": writer.object(&stored.object, !*headers_sent)})
        }
        WatchItem::Bookmark {
            revision,
            initial_events_end,
        } => {
            let object = bookmark_object(resource, *revision, *initial_events_end);
            json!({"type": "BOOKMARK", "object": writer.object(&object, !*headers_sent)})
        }
        WatchItem::Error(_) => return render(resource, item),
    };
    *headers_sent = true;
    Bytes::from(format!("{table}\n"))
}

/// The object of a BOOKMARK event: the watched kind with only a resourceVersion (and the
/// end-of-initial-events annotation of a streaming list).
fn bookmark_object(resource: &ResourceType, revision: u64, initial_events_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": revision.to_string(), "creationTimestamp": null});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": metadata})
}

/// One watch event line.
fn render(resource: &ResourceType, item: &WatchItem) -> Bytes {
    let mut line = BytesMut::new();
    match item {
        WatchItem::Event(event, stored) => {
            line.put_slice(b"{\"type\":\"");
            line.put_slice(event.as_str().as_bytes());
            line.put_slice(b"\",\"object\":");
            line.put_slice(&stored.json);
            line.put_slice(b"}\n");
        }
        WatchItem::Bookmark {
            revision,
            initial_events_end,
        } => {
            let object = bookmark_object(resource, *revision, *initial_events_end);
            let event = json!({"type": "BOOKMARK", "object": object});
            line.put_slice(event.to_string().as_bytes());
            line.put_u8(b'\n');
        }
        WatchItem::Error(error) => {
            let event = json!({"type": "ERROR", "object": error.to_status()});
            line.put_slice(event.to_string().as_bytes());
            line.put_u8(b'\n');
        }
    }
    line.freeze()
}

/// The DeleteOptions of a DELETE, each field from its body, else from its query (kube-apiserver
/// reads the query only when there is no body), and whether it is a dry run: `"dryRun": ["All"]`
/// in the body (what client-go, kube-rs and ferrokube send), else `dryRun=All` in the query.
fn delete_options(
    params: &HashMap<String, String>,
    body: Value,
) -> Result<(DeleteOptions, bool), StatusError> {
    let dry_run = match body.get("dryRun") {
        None | Some(Value::Null) => is_dry_run(params),
        Some(Value::Array(values)) => {
            // kube-apiserver validates DeleteOptions: 422, as for an invalid object.
            if let Some(other) = values.iter().find(|v| v.as_str() != Some("All")) {
                return Err(StatusError::invalid_options(
                    "DeleteOptions.meta.k8s.io",
                    &format!("dryRun: Unsupported value: {other}: supported values: \"All\""),
                ));
            }
            !values.is_empty()
        }
        Some(other) => {
            return Err(StatusError::bad_request(format!(
                "dryRun: a list of strings, not {other}"
            )));
        }
    };
    let text = |field: &str| {
        body.get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| params.get(field).cloned())
    };
    let propagation = match text("propagationPolicy").as_deref() {
        None | Some("") => None,
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(StatusError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    let orphan = body
        .get("orphanDependents")
        .and_then(Value::as_bool)
        .or_else(|| params.get("orphanDependents").map(|v| v == "true"));
    let propagation = propagation.or(match orphan {
        Some(true) => Some(Propagation::Orphan),
        Some(false) => Some(Propagation::Background),
        None => None,
    });
    let grace_period_seconds = body
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| {
            params
                .get("gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
        });
    let precondition = |field: &str| {
        body.pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let options = DeleteOptions {
        propagation,
        uid: precondition("uid"),
        resource_version: precondition("resourceVersion"),
        grace_period_seconds,
    };
    Ok((options, dry_run))
}

async fn read_body(request: Request<Incoming>) -> Result<Bytes, StatusError> {
    let limited = Limited::new(request.into_body(), MAX_BODY);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(StatusError::too_large()),
        Err(e) => Err(StatusError::bad_request(format!(
            "reading the request body: {e}"
        ))),
    }
}

async fn read_json(request: Request<Incoming>) -> Result<Value, StatusError> {
    let bytes = read_body(request).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        StatusError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

/// A create's or update's object: JSON, or Kubernetes protobuf (what kubectl sends for built-in
/// kinds), decoded to JSON by [`crate::protobuf`].
async fn read_object(request: Request<Incoming>) -> Result<Value, StatusError> {
    let protobuf = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(crate::protobuf::is_protobuf);
    if !protobuf {
        return read_json(request).await;
    }
    let bytes = read_body(request).await?;
    crate::protobuf::decode(&bytes).map_err(|e| {
        tracing::debug!(error = %e, "protobuf body refused");
        if e.is_unsupported() {
            StatusError::unsupported_body(e.to_string())
        } else {
            StatusError::bad_request(format!("decoding the protobuf body: {e}"))
        }
    })
}

async fn read_json_or_empty(request: Request<Incoming>) -> Result<Value, StatusError> {
    let bytes = read_body(request).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| StatusError::bad_request(format!("json parse error: {e}")))
}

async fn faults(shared: &Shared, request: Request<Incoming>) -> Reply {
    let method = request.method().clone();
    let params = query::parse(request.uri().query());
    match method {
        Method::GET => {}
        Method::PUT => {
            // Malformed JSON is a 400; JSON that is not valid settings a 422 naming each field.
            let body = read_body(request).await?;
            let body: Value = serde_json::from_slice(&body)
                .map_err(|e| StatusError::bad_request(format!("fault settings: {e}")))?;
            let settings = FaultSettings::from_json(&body).map_err(|e| e.to_status())?;
            shared.faults.try_set(settings).map_err(|e| e.to_status())?;
        }
        Method::POST => {
            if is_true(params.get("closeWatches")) {
                shared.api.store.close_watches();
            }
            if is_true(params.get("compact")) {
                shared.api.store.compact();
            }
        }
        m => return Err(StatusError::method_not_allowed(m.as_str())),
    }
    let settings = serde_json::to_value(shared.faults.settings())
        .map_err(|e| StatusError::internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, &settings))
}

fn bytes_response(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Body::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    bytes_response(status, Bytes::from(value.to_string()))
}

fn stored_response(status: StatusCode, stored: &Stored) -> Response<Body> {
    bytes_response(status, stored.json.clone())
}

/// The `Status` response of a failed request.
pub fn error_response(error: &StatusError) -> Response<Body> {
    let status = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &error.to_status());
    if let Some(seconds) = error.retry_after() {
        if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
    }
    response
}
