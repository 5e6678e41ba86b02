//! A resource request, parsed once: which verb, on what, with which options.
//!
//! # Why this module exists
//!
//! kube-apiserver turns every resource request into a `RequestInfo` (verb, resource, namespace,
//! name, subresource) before any handler runs, and each verb's handler then decodes its options
//! (`ListOptions`, `CreateOptions`, `PatchOptions`, `DeleteOptions`) from the query string into
//! typed structs. This module does the same here: the handlers never see a query string, and a
//! malformed value (`limit=ten`, a label selector that does not parse, a force on a non-apply patch)
//! is a typed [`StatusError`] made in one place, with the code and message kube-apiserver answers.
//!
//! # How a request flows
//!
//! ```text
//!  path ──► route::route ──► Route::Collection / Route::Object (resource, namespace, name, subresource)
//!                                   │
//!  method, query, headers ──────────┤  ApiRequest::parse (this module)
//!                                   ▼
//!                            ApiRequest { resource, namespace, verb: Verb + its options, answer }
//!                                   │
//!                                   ▼  verbs::serve: one handler per verb
//!     get · list · watch · create · review · update · patch · apply · delete · deletecollection
//!                                   │  faults, the body, then a call on the Api
//!                                   ▼
//!                            crate::api::Api ──► crate::store::Store
//! ```
//!
//! # The order of refusals
//!
//! A request with several things wrong is refused for the first one kube-apiserver checks, and
//! this parse checks them in that order: an unknown method or subresource (405, 404), then the
//! Accept header (406, see [`crate::table`]), then the query's options (400, 422), then the patch
//! format (415). Two values are parsed here but refused later, when the handler reaches the step at
//! which they are refused today (a [`Deferred`]): `includeObject` only once the objects have been
//! read (a missing object is a 404 first, as on kube-apiserver), and a deletecollection's selectors
//! only after the injected write faults. A DELETE's query options are merged with its body
//! ([`DeleteQuery::options`]), which comes later still.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{HeaderMap, Method, header};

use super::query;
use super::route::Subresource;
use crate::api::{ListOptions, Propagation, WatchOptions};
use crate::field_validation::FieldValidation;
use crate::patch::PatchType;
use crate::resource::{Extra, ResourceType};
use crate::selection::Selection;
use crate::status::StatusError;
use crate::strategy::Endpoint;
use crate::table::{self, IncludeObject, PartialMetadata, TableVersion, Wanted};

/// One request on a resource type, parsed (see the [module docs](self)).
#[derive(Debug)]
pub struct ApiRequest {
    /// The type the path names, from the request's catalog snapshot.
    pub resource: Arc<ResourceType>,
    /// The namespace of a `/namespaces/{ns}/...` path. Always `None` for a cluster-scoped type;
    /// `None` for a namespaced type means every namespace (a list, watch, create or
    /// deletecollection on `/api/v1/pods`).
    pub namespace: Option<String>,
    /// The verb, with the name and subresource of the object it acts on, and its options.
    pub verb: Verb,
    /// The representation to answer with.
    pub answer: Answer,
}

/// A verb and its options. An object's name is in the variants that act on one object, so a
/// collection verb has none and an object verb always has one.
#[derive(Debug)]
pub enum Verb {
    /// GET of one object, its status or its Scale.
    Get(ObjectTarget),
    /// GET of a collection.
    List(ListOptions),
    /// GET of a collection with `watch=true` (or `1`).
    Watch(WatchOptions),
    /// POST to a collection.
    Create {
        options: WriteQuery,
        body: BodyFormat,
    },
    /// POST of an access review: answered, never stored (see [`crate::review`]).
    Review { body: BodyFormat },
    /// PUT of one object, its status or its Scale.
    Update {
        target: ObjectTarget,
        options: WriteQuery,
        body: BodyFormat,
    },
    /// PATCH (merge, JSON or strategic merge) of one object, its status or its Scale.
    Patch {
        target: ObjectTarget,
        kind: PatchType,
        options: WriteQuery,
    },
    /// PATCH with `application/apply-patch+yaml` (server-side apply) of one object, its status
    /// or its Scale (415 at parse for any other subresource).
    Apply {
        name: String,
        target: crate::apply::verb::ApplyTarget,
        options: ApplyQuery,
    },
    /// A subresource that is an action rather than a view of the object: `pods/binding`,
    /// `pods/eviction`, `serviceaccounts/token` (POST), `pods/log` (GET), `pods/exec`,
    /// `attach`, `portforward` and the proxies (see [`crate::subresource`]).
    Action {
        name: String,
        extra: Extra,
        options: WriteQuery,
        body: BodyFormat,
        /// `container` of a log request.
        container: Option<String>,
    },
    /// DELETE of one object (never of a subresource: 405 at parse).
    Delete { name: String, options: DeleteQuery },
    /// DELETE of a collection; only for types that allow it (405 at parse otherwise).
    DeleteCollection {
        /// `labelSelector` and `fieldSelector`, refused (400) after the write faults.
        selection: Deferred<Selection>,
        options: DeleteQuery,
    },
}

/// The object a verb acts on.
#[derive(Debug, Clone)]
pub struct ObjectTarget {
    pub name: String,
    /// A subresource the type serves: `Status` only when `resource.status`, `Scale` only when
    /// `resource.scale`, `Finalize` only for Namespaces (any other is a 404 at parse).
    pub subresource: Option<Subresource>,
}

impl ObjectTarget {
    /// The endpoint a write goes through: `/status` writes the status, the object itself and
    /// `/scale` write the rest (see [`crate::strategy`]).
    pub fn endpoint(&self) -> Endpoint {
        match self.subresource {
            Some(Subresource::Status) => Endpoint::Status,
            Some(Subresource::Finalize) => Endpoint::Finalize,
            Some(Subresource::Extra(Extra::EphemeralContainers)) => Endpoint::EphemeralContainers,
            Some(Subresource::Extra(Extra::Resize)) => Endpoint::Resize,
            Some(Subresource::Extra(Extra::Approval)) => Endpoint::Approval,
            Some(Subresource::Scale | Subresource::Extra(_)) | None => Endpoint::Main,
        }
    }

    /// Whether it is the `/scale` subresource.
    pub fn is_scale(&self) -> bool {
        self.subresource == Some(Subresource::Scale)
    }
}

/// The encoding of a create's, update's or delete's body (`Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyFormat {
    #[default]
    Json,
    /// Kubernetes protobuf (what kubectl's generators send), decoded by [`crate::protobuf`].
    Protobuf,
}

/// The options of a create, update or (non-apply) patch (kube-apiserver's `CreateOptions`,
/// `UpdateOptions`, `PatchOptions`).
#[derive(Debug, Clone)]
pub struct WriteQuery {
    /// `dryRun=All`; any other value is no dry run (not refused, unlike kube-apiserver).
    pub dry_run: bool,
    /// `fieldManager`, else the product of the `User-Agent` (see [`crate::apply::manager_name`]).
    pub field_manager: String,
    /// `fieldValidation`: what to do about unknown fields in the body (see
    /// [`crate::field_validation`]).
    pub field_validation: FieldValidation,
}

/// The options of a server-side apply.
#[derive(Debug, Clone)]
pub struct ApplyQuery {
    pub dry_run: bool,
    /// `fieldManager`: never empty (422 at parse: apply requires one).
    pub field_manager: String,
    /// `force=true` (or `1`): take the fields other managers own.
    pub force: bool,
}

/// The query's part of a delete's options. kube-apiserver reads the query only when the DELETE
/// has no body; here each field comes from the body when it has it, else from the query (see
/// [`DeleteQuery::options`]), so a query value is refused only when the body does not override it.
#[derive(Debug, Clone, Default)]
pub struct DeleteQuery {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `propagationPolicy`, checked when merged with the body.
    pub propagation_policy: Option<PolicyValue>,
    /// `orphanDependents`: `true`, or anything else for false.
    pub orphan_dependents: Option<bool>,
    /// `gracePeriodSeconds`; a value that is not an integer is ignored.
    pub grace_period_seconds: Option<i64>,
    /// The encoding of the `DeleteOptions` body (`Content-Type`): client-go's typed clients send
    /// it as protobuf when they talk protobuf.
    pub body: BodyFormat,
}

/// A `propagationPolicy` value, from the query or a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyValue {
    /// The empty string: the type's default.
    Default,
    Set(Propagation),
    /// Not a policy kube-apiserver knows: a 400 when it is the one that counts.
    Unsupported(String),
}

impl PolicyValue {
    fn parse(text: &str) -> PolicyValue {
        match text {
            "" => PolicyValue::Default,
            "Background" => PolicyValue::Set(Propagation::Background),
            "Foreground" => PolicyValue::Set(Propagation::Foreground),
            "Orphan" => PolicyValue::Set(Propagation::Orphan),
            other => PolicyValue::Unsupported(other.to_string()),
        }
    }

    /// The policy, or the 400 for one that is not.
    fn resolve(self) -> Result<Option<Propagation>, StatusError> {
        match self {
            PolicyValue::Default => Ok(None),
            PolicyValue::Set(policy) => Ok(Some(policy)),
            PolicyValue::Unsupported(other) => Err(StatusError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            ))),
        }
    }
}

impl DeleteQuery {
    /// The query's options, and `body`, the encoding of the body that may override them.
    fn parse(query: &Query, body: BodyFormat) -> DeleteQuery {
        DeleteQuery {
            body,
            dry_run: query.dry_run(),
            propagation_policy: query.text("propagationPolicy").map(PolicyValue::parse),
            orphan_dependents: query.text("orphanDependents").map(|v| v == "true"),
            grace_period_seconds: query
                .text("gracePeriodSeconds")
                .and_then(|g| g.parse().ok()),
        }
    }

    /// The delete's options and whether it is a dry run, each field from the `DeleteOptions`
    /// body when it has it, else from the query: `"dryRun": ["All"]` in the body (what client-go,
    /// kube-rs and ferrokube send), else `dryRun=All`. An unknown dry-run value in the body is a
    /// 422, as kube-apiserver's validation of DeleteOptions answers; an unknown policy a 400.
    pub fn options(
        self,
        body: &serde_json::Value,
    ) -> Result<(crate::api::DeleteOptions, bool), StatusError> {
        use serde_json::Value;
        let dry_run = match body.get("dryRun") {
            None | Some(Value::Null) => self.dry_run,
            Some(Value::Array(values)) => {
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
        let policy = match body.get("propagationPolicy").and_then(Value::as_str) {
            Some(text) => Some(PolicyValue::parse(text)),
            None => self.propagation_policy,
        };
        let propagation = match policy {
            Some(policy) => policy.resolve()?,
            None => None,
        };
        let orphan = body
            .get("orphanDependents")
            .and_then(Value::as_bool)
            .or(self.orphan_dependents);
        let propagation = propagation.or(match orphan {
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Background),
            None => None,
        });
        let grace_period_seconds = body
            .get("gracePeriodSeconds")
            .and_then(Value::as_i64)
            .or(self.grace_period_seconds);
        let precondition = |field: &str| {
            body.pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let options = crate::api::DeleteOptions {
            propagation,
            uid: precondition("uid"),
            resource_version: precondition("resourceVersion"),
            grace_period_seconds,
        };
        Ok((options, dry_run))
    }
}

/// How to answer: the object (or list) itself, a Table of it, or its metadata alone.
/// Invariant: at most one of `table` and `metadata` is `Some` (one Accept clause is chosen).
#[derive(Debug)]
pub struct Answer {
    /// The Table version the `Accept` header asks for, if this endpoint can serve one; `None`
    /// for the object itself. Always `None` for `/scale` and an access review.
    pub table: Option<TableVersion>,
    /// The metadata-only kind the `Accept` header asks for (`as=PartialObjectMetadata[List]`).
    pub metadata: Option<PartialMetadata>,
    /// `includeObject`: what each Table row carries. Read only when `table` is `Some`, and then
    /// after the objects, so its 400 follows a 404.
    pub include_object: Deferred<IncludeObject>,
    /// JSON or protobuf (see the `protobuf::answer` module). Protobuf only for a resource with a
    /// protobuf form, or with JSON accepted too (then its answers stay JSON).
    pub encoding: table::Encoding,
}

/// A value parsed with the rest of the request whose error is reported later, at the step where
/// the handler reaches it (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Deferred<T>(Result<T, StatusError>);

impl<T: Clone> Deferred<T> {
    /// The value, or its error.
    pub fn get(&self) -> Result<T, StatusError> {
        self.0.clone()
    }
}

/// What the route found, before the method and query are read.
pub struct Path {
    pub resource: Arc<ResourceType>,
    pub namespace: Option<String>,
    /// The object's name and subresource; `None` for the collection.
    pub object: Option<(String, Option<Subresource>)>,
}

impl ApiRequest {
    /// Parses the method, query and headers of a request whose path named `path`, in the order
    /// kube-apiserver refuses them (see the [module docs](self)).
    pub fn parse(head: &Parts, path: Path, gates: Gates) -> Result<ApiRequest, StatusError> {
        let Path {
            resource,
            namespace,
            object,
        } = path;
        let query = Query(query::parse(head.uri.query()));
        let headers = Headers(&head.headers);
        let method = &head.method;
        let (verb, wanted) = match object {
            None => collection(&resource, method, &query, headers, gates)?,
            Some((name, subresource)) => {
                one_object(&resource, method, &query, headers, name, subresource)?
            }
        };
        let (table, metadata) = match wanted {
            Wanted::Object => (None, None),
            Wanted::Table(version) => (Some(version), None),
            Wanted::Metadata(partial) => (None, Some(partial)),
        };
        let encoding = table::encoding(
            headers.text(header::ACCEPT),
            table::Endpoint { tables: true },
        );
        let protobuf_form =
            ferrokube_core::protobuf::top_level(&resource.api_version(), &resource.kind).is_some();
        if encoding == (table::Encoding::Protobuf { json_too: false }) && !protobuf_form {
            // kube-apiserver: a custom resource has no protobuf form, and nothing else is taken.
            return Err(table::not_acceptable());
        }
        let answer = Answer {
            table,
            metadata,
            include_object: Deferred(IncludeObject::parse(query.text("includeObject"))),
            encoding,
        };
        Ok(ApiRequest {
            resource,
            namespace,
            verb,
            answer,
        })
    }
}

/// The feature gates that change how a request is read (kube-apiserver's `--feature-gates`).
#[derive(Debug, Clone, Copy)]
pub struct Gates {
    /// `ShardedListAndWatch`: lists, watches and deletecollections honour `shardSelector` (see
    /// [`crate::shard`]); off, the parameter is ignored, bad or not.
    pub sharded_list_and_watch: bool,
}

impl Default for Gates {
    /// Every gate this server implements on.
    fn default() -> Gates {
        Gates {
            sharded_list_and_watch: true,
        }
    }
}

/// A verb on a collection and the Table it wants.
fn collection(
    resource: &ResourceType,
    method: &Method,
    query: &Query,
    headers: Headers,
    gates: Gates,
) -> Result<(Verb, Wanted), StatusError> {
    // An access review is create-only: kube-apiserver answers anything else with 405.
    if resource.review {
        return match *method {
            Method::POST => {
                headers.wanted(false)?;
                Ok((
                    Verb::Review {
                        body: headers.body_format(),
                    },
                    Wanted::Object,
                ))
            }
            _ => Err(StatusError::method_not_allowed(method.as_str())),
        };
    }
    if resource.read_only && (*method != Method::GET || query.flag("watch")) {
        let verb = if *method == Method::GET {
            "WATCH"
        } else {
            method.as_str()
        };
        return Err(StatusError::method_not_allowed(verb));
    }
    let verb = match *method {
        Method::GET if query.flag("watch") => {
            let wanted = headers.wanted(true)?;
            return Ok((Verb::Watch(watch_options(resource, query, gates)?), wanted));
        }
        Method::GET => {
            let wanted = headers.wanted(true)?;
            return Ok((Verb::List(list_options(resource, query, gates)?), wanted));
        }
        Method::POST => Verb::Create {
            options: write_query(query, headers, Some("CreateOptions"))?,
            body: headers.body_format(),
        },
        Method::DELETE if resource.delete_collection => Verb::DeleteCollection {
            selection: Deferred(selection(resource, query, gates)),
            options: DeleteQuery::parse(query, headers.body_format()),
        },
        _ => return Err(StatusError::method_not_allowed(method.as_str())),
    };
    Ok((verb, headers.wanted(true)?))
}

/// A verb on one object (or its subresource) and the Table it wants.
fn one_object(
    resource: &ResourceType,
    method: &Method,
    query: &Query,
    headers: Headers,
    name: String,
    subresource: Option<Subresource>,
) -> Result<(Verb, Wanted), StatusError> {
    // Long: a table more than logic: first what this resource serves (each refusal as
    // kube-apiserver words it), then one arm per HTTP method with the options that verb reads.
    if resource.review {
        return Err(StatusError::method_not_allowed(method.as_str()));
    }
    let served = match subresource {
        Some(Subresource::Status) => resource.status,
        Some(Subresource::Scale) => resource.scale,
        Some(Subresource::Finalize) => crate::strategy::is_namespaces(resource),
        Some(Subresource::Extra(extra)) => resource.extras.contains(&extra),
        None => true,
    };
    if !served {
        return Err(StatusError::no_such_resource());
    }
    if resource.read_only && (*method != Method::GET || subresource.is_some()) {
        return Err(StatusError::method_not_allowed(method.as_str()));
    }
    if let Some(Subresource::Extra(extra)) = subresource {
        if let Some(verb) = action(extra, method, query, headers, &name)? {
            return Ok((verb, Wanted::Object));
        }
    }
    // kube-apiserver's finalize storage only updates: no get, patch or delete there.
    if subresource == Some(Subresource::Finalize) && *method != Method::PUT {
        return Err(StatusError::method_not_allowed(method.as_str()));
    }
    // `/status` converts to a Table as its object does (1.37: the status storage shares the
    // object's convertor; 1.20 had none there). `/scale` has none: only a non-Table Accept clause
    // will do for it.
    let tables = matches!(subresource, None | Some(Subresource::Status));
    let target = ObjectTarget { name, subresource };
    match *method {
        Method::GET => {
            let wanted = headers.wanted(tables)?;
            Ok((Verb::Get(target), wanted))
        }
        Method::PUT => {
            let wanted = headers.wanted(tables)?;
            let verb = Verb::Update {
                target,
                options: write_query(query, headers, Some("UpdateOptions"))?,
                body: headers.body_format(),
            };
            Ok((verb, wanted))
        }
        Method::PATCH => {
            let wanted = headers.wanted(tables)?;
            let field_manager = query.text("fieldManager");
            let force = query.text("force");
            if headers.is_apply() {
                crate::apply::verb::check_patch_options(true, field_manager, force)?;
                use crate::apply::verb::ApplyTarget;
                let apply_target = match subresource {
                    None => ApplyTarget::Object,
                    Some(Subresource::Status) => ApplyTarget::Status,
                    Some(Subresource::Scale) => ApplyTarget::Scale,
                    Some(_) => {
                        return Err(StatusError::unsupported_media_type(
                            crate::apply::CONTENT_TYPE,
                        ));
                    }
                };
                let options = ApplyQuery {
                    dry_run: query.dry_run(),
                    field_manager: field_manager.unwrap_or_default().to_string(),
                    force: query.flag("force"),
                };
                let verb = Verb::Apply {
                    name: target.name,
                    target: apply_target,
                    options,
                };
                return Ok((verb, wanted));
            }
            crate::apply::verb::check_patch_options(false, field_manager, force)?;
            let kind = PatchType::from_content_type(headers.content_type())?;
            let verb = Verb::Patch {
                target,
                kind,
                options: write_query(query, headers, Some("PatchOptions"))?,
            };
            Ok((verb, wanted))
        }
        Method::DELETE => {
            let wanted = headers.wanted(tables)?;
            if subresource.is_some() {
                return Err(StatusError::method_not_allowed(method.as_str()));
            }
            let verb = Verb::Delete {
                name: target.name,
                options: DeleteQuery::parse(query, headers.body_format()),
            };
            Ok((verb, wanted))
        }
        _ => Err(StatusError::method_not_allowed(method.as_str())),
    }
}

/// The verb of an action subresource (see [`Verb::Action`]), or `None` for the subresources
/// that read and write the object itself (`ephemeralcontainers`, `resize`, `approval`: the
/// usual get, update and patch). A method the subresource does not serve is a 405.
fn action(
    extra: Extra,
    method: &Method,
    query: &Query,
    headers: Headers,
    name: &str,
) -> Result<Option<Verb>, StatusError> {
    let allowed = match extra {
        Extra::EphemeralContainers | Extra::Resize | Extra::Approval => return Ok(None),
        Extra::Binding | Extra::Eviction | Extra::Token => *method == Method::POST,
        Extra::Log => *method == Method::GET,
        Extra::Exec | Extra::Attach | Extra::PortForward => {
            matches!(*method, Method::GET | Method::POST)
        }
        Extra::Proxy => matches!(
            *method,
            Method::GET | Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        ),
    };
    if !allowed {
        return Err(StatusError::method_not_allowed(method.as_str()));
    }
    Ok(Some(Verb::Action {
        name: name.to_string(),
        extra,
        // Creating a binding, an eviction or a token decodes CreateOptions; the rest none.
        options: write_query(
            query,
            headers,
            matches!(extra, Extra::Binding | Extra::Eviction | Extra::Token)
                .then_some("CreateOptions"),
        )?,
        body: headers.body_format(),
        container: query.text("container").map(str::to_string),
    }))
}

/// `limit`, `continue`, `resourceVersion`, `resourceVersionMatch` and the selectors of a list.
/// The resourceVersion and its match are checked by [`crate::api::Api::list`].
fn list_options(
    resource: &ResourceType,
    query: &Query,
    gates: Gates,
) -> Result<ListOptions, StatusError> {
    let limit = match query.text("limit").map(str::parse::<usize>) {
        None => None,
        Some(Ok(limit)) => Some(limit),
        Some(Err(_)) => {
            return Err(StatusError::bad_request(
                "limit must be a non-negative integer",
            ));
        }
    };
    Ok(ListOptions {
        selection: selection(resource, query, gates)?,
        limit,
        continue_token: query
            .text("continue")
            .filter(|c| !c.is_empty())
            .map(str::to_string),
        resource_version: query.text("resourceVersion").map(str::to_string),
        resource_version_match: query.text("resourceVersionMatch").map(str::to_string),
    })
}

/// `timeoutSeconds`, `resourceVersion`, `allowWatchBookmarks`, `sendInitialEvents` and the
/// selectors of a watch. Their combination is checked by [`crate::api::Api::watch`].
fn watch_options(
    resource: &ResourceType,
    query: &Query,
    gates: Gates,
) -> Result<WatchOptions, StatusError> {
    let timeout = match query.text("timeoutSeconds").map(str::parse::<u64>) {
        None => None,
        Some(Ok(seconds)) => Some(Duration::from_secs(seconds)),
        Some(Err(_)) => {
            return Err(StatusError::bad_request(
                "timeoutSeconds must be an integer",
            ));
        }
    };
    Ok(WatchOptions {
        selection: selection(resource, query, gates)?,
        resource_version: query.text("resourceVersion").map(str::to_string),
        bookmarks: query.flag("allowWatchBookmarks"),
        send_initial_events: query.flag("sendInitialEvents"),
        timeout,
    })
}

/// The label, field and shard selectors. A bad label or field selector is a 400 before the shard
/// selector is read; a bad shard selector is kube-apiserver's 500 (see [`crate::shard`]). An
/// empty `shardSelector` is no selector, as there.
fn selection(
    resource: &ResourceType,
    query: &Query,
    gates: Gates,
) -> Result<Selection, StatusError> {
    let selection = Selection::parse(
        resource,
        query.text("labelSelector"),
        query.text("fieldSelector"),
    )?;
    let shard = match query.text("shardSelector") {
        Some(text) if gates.sharded_list_and_watch && !text.is_empty() => {
            Some(crate::shard::parse(text).map_err(|e| crate::shard::invalid(&e))?)
        }
        _ => None,
    };
    Ok(selection.with_shard(shard))
}

/// The options of a write. `kind` names the options type kube-apiserver decodes for it
/// (`CreateOptions`, `UpdateOptions`, `PatchOptions`), whose `fieldManager` it validates before
/// anything else (a 422 naming the type); `None` where it decodes none (a pod's `exec` or `proxy`).
fn write_query(
    query: &Query,
    headers: Headers,
    kind: Option<&str>,
) -> Result<WriteQuery, StatusError> {
    if let Some(kind) = kind {
        crate::apply::verb::check_write_options(kind, query.text("fieldManager"))?;
    }
    Ok(WriteQuery {
        dry_run: query.dry_run(),
        field_manager: crate::apply::manager_name(query.text("fieldManager"), headers.user_agent()),
        field_validation: FieldValidation::parse(query.text("fieldValidation"))?,
    })
}

/// The switches of a POST to `/ferrokube/faults`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FaultActions {
    /// `closeWatches=true`: end every watch.
    pub close_watches: bool,
    /// `compact=true`: drop the watch history.
    pub compact: bool,
}

impl FaultActions {
    pub fn parse(query: Option<&str>) -> FaultActions {
        let query = Query(query::parse(query));
        FaultActions {
            close_watches: query.flag("closeWatches"),
            compact: query.flag("compact"),
        }
    }
}

/// The decoded query string; private to the parse.
struct Query(HashMap<String, String>);

impl Query {
    fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// A boolean parameter: `true` or `1`; anything else, or nothing, is false.
    fn flag(&self, name: &str) -> bool {
        matches!(self.text(name), Some("true" | "1"))
    }

    fn dry_run(&self) -> bool {
        self.text("dryRun") == Some("All")
    }
}

/// The headers the parse reads.
#[derive(Clone, Copy)]
struct Headers<'a>(&'a HeaderMap);

impl Headers<'_> {
    fn text(&self, name: header::HeaderName) -> Option<&str> {
        self.0.get(name).and_then(|v| v.to_str().ok())
    }

    fn content_type(&self) -> &str {
        self.text(header::CONTENT_TYPE).unwrap_or("")
    }

    fn user_agent(&self) -> &str {
        self.text(header::USER_AGENT).unwrap_or("")
    }

    /// Whether a PATCH's `Content-Type` is server-side apply's.
    fn is_apply(&self) -> bool {
        self.content_type().split(';').next().map(str::trim) == Some(crate::apply::CONTENT_TYPE)
    }

    fn body_format(&self) -> BodyFormat {
        if crate::protobuf::is_protobuf(self.content_type()) {
            BodyFormat::Protobuf
        } else {
            BodyFormat::Json
        }
    }

    /// The representation the Accept header asks for, if this endpoint (`tables`: it has a table
    /// convertor) can serve it; 406 when no Accept clause can be served.
    fn wanted(&self, tables: bool) -> Result<Wanted, StatusError> {
        table::negotiate(self.text(header::ACCEPT), table::Endpoint { tables })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Catalog;
    use serde_json::json;

    fn parse(
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        object: Option<(&str, Option<Subresource>)>,
    ) -> Result<ApiRequest, StatusError> {
        let mut builder = http::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let (head, ()) = builder.body(()).expect("request").into_parts();
        let resource = Catalog::default()
            .find("", "v1", "pods")
            .expect("pods are served");
        let path = Path {
            resource,
            namespace: Some("default".into()),
            object: object.map(|(name, sub)| (name.to_string(), sub)),
        };
        ApiRequest::parse(&head, path, Gates::default())
    }

    #[test]
    fn a_list_is_refused_for_its_accept_header_before_its_query() {
        let bad_accept = [("accept", "application/json;as=Table;v=v9;g=meta.k8s.io")];
        let error = parse(Method::GET, "/p?limit=ten", &bad_accept, None).expect_err("406");
        assert_eq!(error.code, 406);
        let error = parse(Method::GET, "/p?limit=ten", &[], None).expect_err("400");
        assert_eq!(
            (error.code, error.message.as_str()),
            (400, "limit must be a non-negative integer")
        );
        let request = parse(
            Method::GET,
            "/p?limit=2&continue=&labelSelector=app%3Dweb",
            &[],
            None,
        )
        .expect("a list");
        let Verb::List(options) = request.verb else {
            panic!("not a list: {:?}", request.verb);
        };
        assert_eq!((options.limit, options.continue_token), (Some(2), None));
    }

    #[test]
    fn a_bad_include_object_waits_for_the_table() {
        let request = parse(
            Method::GET,
            "/p?includeObject=Everything",
            &[],
            Some(("a", None)),
        )
        .expect("parsed: the value is refused later");
        assert!(matches!(request.verb, Verb::Get(_)));
        assert_eq!(
            request.answer.include_object.get().map_err(|e| e.code),
            Err(400)
        );
    }

    #[test]
    fn apply_names_a_manager_before_its_subresource_is_refused() {
        let apply = [("content-type", "application/apply-patch+yaml")];
        // Apply is served on the object, `/status` and `/scale`; not on the other subresources.
        let ephemeral = Some((
            "a",
            Some(Subresource::Extra(
                crate::resource::Extra::EphemeralContainers,
            )),
        ));
        let error = parse(Method::PATCH, "/p", &apply, ephemeral).expect_err("422");
        assert_eq!(error.code, 422);
        let error = parse(Method::PATCH, "/p?fieldManager=m", &apply, ephemeral).expect_err("415");
        assert_eq!(error.code, 415);
        let status = Some(("a", Some(Subresource::Status)));
        let request = parse(Method::PATCH, "/p?fieldManager=m", &apply, status).expect("apply");
        assert!(matches!(
            request.verb,
            Verb::Apply {
                target: crate::apply::verb::ApplyTarget::Status,
                ..
            }
        ));
        let request = parse(
            Method::PATCH,
            "/p?fieldManager=m&force=true",
            &apply,
            Some(("a", None)),
        )
        .expect("an apply");
        let Verb::Apply { name, options, .. } = request.verb else {
            panic!("not an apply: {:?}", request.verb);
        };
        assert_eq!((name.as_str(), options.field_manager.as_str()), ("a", "m"));
        assert!(options.force && !options.dry_run);
    }

    #[test]
    fn a_delete_body_overrides_its_query() {
        let request = parse(
            Method::DELETE,
            "/p?propagationPolicy=Sideways&dryRun=All",
            &[],
            Some(("a", None)),
        )
        .expect("a delete");
        let Verb::Delete { options, .. } = request.verb else {
            panic!("not a delete: {:?}", request.verb);
        };
        let body = json!({"propagationPolicy": "Foreground", "dryRun": []});
        let (merged, dry_run) = options.clone().options(&body).expect("the body's policy");
        assert_eq!(
            (merged.propagation, dry_run),
            (Some(Propagation::Foreground), false)
        );
        let error = options.options(&json!({})).expect_err("the query's policy");
        assert_eq!(error.code, 400);
    }
}
