//! One handler per verb: each takes its parsed options (see [`super::request`]), checks the
//! injected faults, reads the body, calls the [`crate::api::Api`] and renders the answer: the
//! object, a list, a watch stream, or a Table of them.
//!
//! Watches are the one streaming response: a task moves items from the store's [`WatchFeed`] to the
//! response body as newline-delimited `{"type":…,"object":…}` events, applying the delivery-delay fault
//! and `timeoutSeconds`, and ends the body when the store closes the watcher.
//!
//! A write answers with a Table too when the Accept header asked for one (the written object's
//! row); a subresource never does (no table convertor).

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use ferrokube_core::shard::ShardSelector;
use http::{HeaderValue, Response, StatusCode, header};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::body::{
    Body, bytes_response, json_response, read_body, read_custom_object, read_delete_options,
    read_json_and_text, read_object, read_object_and_text, stored_response,
};
use super::partial;
use super::request::{
    Answer, ApiRequest, ApplyQuery, BodyFormat, Deferred, DeleteQuery, ObjectTarget, Verb,
    WriteQuery,
};
use super::shared::{Reply, Shared, same_secret};
use crate::api::{Deletion, ListOptions, UpdateOptions, WatchOptions, WriteOptions};
use crate::apply::verb::ApplyTarget;
use crate::faults::Faults;
use crate::patch::PatchType;
use crate::resource::Extra;
use crate::resource::ResourceType;
use crate::review;
use crate::selection::Selection;
use crate::status::StatusError;
use crate::store::{Stored, WatchFeed, WatchItem};
use crate::strategy;
use crate::subresource::{self, ActionReply};
use crate::table::{self, Convertor, MetadataShape, PartialMetadata, TableVersion, TableWriter};

/// Serves a parsed resource request: its verb's handler.
pub async fn serve(shared: &Arc<Shared>, request: ApiRequest, body: Incoming) -> Reply {
    let ApiRequest {
        resource,
        namespace,
        verb,
        answer,
    } = request;
    let call = Call {
        shared,
        resource: &resource,
        namespace: namespace.as_deref(),
        answer: &answer,
    };
    match verb {
        Verb::Get(target) => call.get(&target),
        Verb::List(options) => call.list(&options),
        Verb::Watch(options) => call.watch(options),
        Verb::Create {
            options,
            body: format,
        } => call.create(&options, format, body).await,
        Verb::Review { body: format } => {
            review(shared, &resource, namespace.as_deref(), format, body).await
        }
        Verb::Update {
            target,
            options,
            body: format,
        } => call.update(&target, &options, format, body).await,
        Verb::Patch {
            target,
            kind,
            options,
        } => call.patch(&target, kind, &options, body).await,
        Verb::Apply {
            name,
            target,
            options,
        } => call.apply(&name, target, &options, body).await,
        Verb::Action {
            name,
            extra,
            options,
            body: format,
            container,
        } => {
            call.action(&name, extra, &options, format, container.as_deref(), body)
                .await
        }
        Verb::Delete { name, options } => call.delete(&name, options, body).await,
        Verb::DeleteCollection { selection, options } => {
            call.delete_collection(&selection, options, body).await
        }
    }
}

impl Call<'_> {
    /// The namespace of the path, owned (for a write moved to the blocking pool).
    fn owned_namespace(&self) -> Option<String> {
        self.namespace.map(str::to_string)
    }
}

/// What every verb's handler shares: the server, the type and namespace of the path, the
/// representation asked for.
struct Call<'a> {
    shared: &'a Arc<Shared>,
    resource: &'a Arc<ResourceType>,
    /// See [`ApiRequest::namespace`].
    namespace: Option<&'a str>,
    answer: &'a Answer,
}

/// Runs a write of the [`Api`] on tokio's blocking pool and waits for it there.
///
/// A write computes for as long as its object and request ask: a patch applied, the schema and
/// the CEL rules of a custom type evaluated (each write's rules on a big-stack thread the call
/// joins, see [`crate::cel`]), managed fields walked. All of that is synchronous code; run on a
/// runtime worker it would hold the worker, and every connection the worker serves, until it
/// ends. On the blocking pool it holds one thread of its own: the workers go on answering other
/// clients, and (the store's lock being taken only to read and to commit, see [`crate::api`])
/// so does the store.
///
/// On a current-thread runtime the write runs in place (see below).
async fn off_the_runtime<T: Send + 'static>(
    shared: &Arc<Shared>,
    work: impl FnOnce(&crate::api::Api) -> Result<T, StatusError> + Send + 'static,
) -> Result<T, StatusError> {
    // On a current-thread runtime there is no other worker to keep free, and the explorer's
    // deterministic runs (a paused current-thread runtime) need every step on that one thread:
    // a write on another thread would finish at a moment that varies from run to run.
    let flavor = tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor());
    if matches!(flavor, Ok(tokio::runtime::RuntimeFlavor::CurrentThread)) {
        return work(&shared.api);
    }
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || work(&shared.api))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "a write panicked or was cancelled");
            StatusError::internal("the write did not complete")
        })?
}

/// POST of a review: answered by its kind, never stored (see [`crate::review`]). A TokenReview's
/// token is checked against the server's own bearer token, the one credential it knows.
async fn review(
    shared: &Shared,
    resource: &ResourceType,
    namespace: Option<&str>,
    format: BodyFormat,
    body: Incoming,
) -> Reply {
    let review = read_object(body, format).await?;
    // The `bindings` collection: create-only like a review, but it writes the pod it names.
    if resource.kind == "Binding" && resource.group.is_empty() {
        let reply = shared.api.bind(namespace, None, &review, false)?;
        return action_reply(reply);
    }
    let known_token = |token: &str| {
        shared
            .token
            .as_deref()
            .is_some_and(|own| same_secret(token.as_bytes(), own.as_bytes()))
    };
    let answer = review::answer(&resource.kind, review, known_token);
    Ok(json_response(StatusCode::CREATED, &answer))
}

impl Call<'_> {
    /// GET of one object (its stored bytes, with a custom type's schema defaults), its status,
    /// or its Scale.
    fn get(&self, target: &ObjectTarget) -> Reply {
        let api = &self.shared.api;
        let (resource, ns) = (self.resource, self.namespace);
        if resource.read_only {
            return subresource::component_statuses()
                .into_iter()
                .find(|c| c["metadata"]["name"] == target.name.as_str())
                .map(|c| json_response(StatusCode::OK, &c))
                .ok_or_else(|| StatusError::not_found(resource, &target.name));
        }
        if target.is_scale() {
            let scale = api.get_scale(resource, ns, &target.name)?;
            return self.object_reply(StatusCode::OK, &scale);
        }
        let stored = strategy::read_defaults(resource, api.get(resource, ns, &target.name)?);
        if let Some(reply) = self.metadata_reply(StatusCode::OK, &stored.object) {
            return reply;
        }
        match self.answer.table {
            Some(version) => {
                let writer = self.table_writer(version)?;
                let table = writer.object(&stored.object, true);
                Ok(json_response(StatusCode::OK, &table))
            }
            None => Ok(stored_response(StatusCode::OK, &stored)),
        }
    }

    /// LIST, one page: a `<Kind>List` of the stored bytes, or a Table.
    fn list(&self, options: &ListOptions) -> Reply {
        let resource = self.resource;
        if resource.read_only {
            let items: Vec<Value> = subresource::component_statuses()
                .into_iter()
                .filter(|c| options.selection.matches(c))
                .collect();
            let list = json!({"kind": format!("{}List", resource.kind), "apiVersion": "v1",
                              "metadata": {}, "items": items});
            return Ok(json_response(StatusCode::OK, &list));
        }
        let mut result = self.shared.api.list(resource, self.namespace, options)?;
        if resource.schema.is_some() {
            let items = std::mem::take(&mut result.page.items);
            result.page.items = items
                .into_iter()
                .map(|s| strategy::read_defaults(resource, s))
                .collect();
        }
        if let Some(version) = self.answer.table {
            let writer = self.table_writer(version)?;
            let meta = table::ListMeta {
                resource_version: result.page.revision.to_string(),
                continue_token: result.continue_token.clone(),
                remaining: result.continue_token.as_ref().and(result.page.remaining),
            };
            let objects = result.page.items.iter().map(|s| s.object.as_ref());
            return Ok(json_response(StatusCode::OK, &writer.list(objects, &meta)));
        }
        let list_meta = || {
            list_metadata(
                result.page.revision,
                result.continue_token.as_deref(),
                result.page.remaining,
            )
        };
        if let Some(reply) = self.metadata_list_reply(list_meta, &result.page.items) {
            return reply;
        }
        let body = list_body(
            resource,
            result.page.revision,
            &result.page.items,
            result.continue_token.as_deref(),
            result.page.remaining,
            options.selection.shard(),
        );
        Ok(bytes_response(StatusCode::OK, body))
    }

    /// WATCH: registers a watcher, then streams its events from a task of its own.
    fn watch(&self, options: WatchOptions) -> Reply {
        let shared = self.shared;
        let feed = shared.api.watch(self.resource, self.namespace, &options)?;
        let table = match self.answer.table {
            Some(version) => Some(self.table_writer(version)?),
            None => None,
        };
        let (tx, rx) = mpsc::channel(64);
        let timeout = options.timeout.unwrap_or(shared.default_watch_timeout);
        // Protobuf frames for the objects themselves of a kind with a protobuf form; Tables and
        // metadata-only watches stay JSON lines.
        let protobuf = matches!(self.answer.encoding, table::Encoding::Protobuf { .. })
            && table.is_none()
            && self.answer.metadata.is_none()
            && ferrokube_core::protobuf::top_level(
                &self.resource.api_version(),
                &self.resource.kind,
            )
            .is_some();
        tokio::spawn(stream_watch(
            feed,
            tx,
            self.resource.clone(),
            shared.faults.clone(),
            timeout,
            table,
            self.answer.metadata,
            protobuf,
        ));
        let mut response = Response::new(Body::Stream(rx));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(if protobuf {
                crate::protobuf::answer::WATCH_CONTENT_TYPE
            } else {
                "application/json"
            }),
        );
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
        Ok(response)
    }

    /// POST: 201 with the created object.
    async fn create(&self, options: &WriteQuery, format: BodyFormat, body: Incoming) -> Reply {
        self.write_fault()?;
        let (mut object, text) = if self.resource.is_custom() {
            read_custom_object(body, format, &self.resource.kind).await?
        } else {
            read_object_and_text(body, format).await?
        };
        let warnings = self.judge_unknown_fields(options, &mut object, text.as_deref())?;
        let (resource, namespace) = (self.resource.clone(), self.owned_namespace());
        let (dry_run, manager) = (options.dry_run, options.field_manager.clone());
        let created = off_the_runtime(self.shared, move |api| {
            let options = WriteOptions {
                dry_run,
                manager: &manager,
            };
            api.create(&resource, namespace.as_deref(), object, &options)
        })
        .await?;
        with_warnings(self.object_reply(StatusCode::CREATED, &created), &warnings)
    }

    /// PUT of an object, its status or its Scale.
    async fn update(
        &self,
        target: &ObjectTarget,
        options: &WriteQuery,
        format: BodyFormat,
        body: Incoming,
    ) -> Reply {
        self.write_fault()?;
        self.update_fault(&target.name)?;
        let (mut object, text) = if self.resource.is_custom() && !target.is_scale() {
            read_custom_object(body, format, &self.resource.kind).await?
        } else {
            read_object_and_text(body, format).await?
        };
        let warnings = if target.is_scale() {
            Vec::new()
        } else {
            self.judge_unknown_fields(options, &mut object, text.as_deref())?
        };
        let (resource, ns, name) = (
            self.resource.clone(),
            self.owned_namespace(),
            target.name.clone(),
        );
        let (scale, endpoint) = (target.is_scale(), target.endpoint());
        let (dry_run, manager) = (options.dry_run, options.field_manager.clone());
        let updated = off_the_runtime(self.shared, move |api| {
            let ns = ns.as_deref();
            if scale {
                return api.update_scale(&resource, ns, &name, dry_run, |_| Ok(object.clone()));
            }
            let options = UpdateOptions {
                endpoint,
                dry_run,
                manager: &manager,
            };
            api.update(&resource, ns, &name, object, &options)
        })
        .await?;
        with_warnings(self.object_reply(StatusCode::OK, &updated), &warnings)
    }

    /// PATCH (merge, JSON or strategic merge) of an object, its status or its Scale.
    async fn patch(
        &self,
        target: &ObjectTarget,
        kind: PatchType,
        options: &WriteQuery,
        body: Incoming,
    ) -> Reply {
        self.write_fault()?;
        self.update_fault(&target.name)?;
        let (mut patch, text) = read_json_and_text(body).await?;
        // A merge patch names fields where the object has them: its unknown ones are the
        // object's. (A JSON patch's are not looked for: a known difference.)
        let warnings = match kind {
            PatchType::Merge | PatchType::Strategic if !target.is_scale() => {
                self.judge_unknown_fields(options, &mut patch, Some(&text))?
            }
            _ => Vec::new(),
        };
        let (resource, ns, name) = (
            self.resource.clone(),
            self.owned_namespace(),
            target.name.clone(),
        );
        let (scale, endpoint) = (target.is_scale(), target.endpoint());
        let (dry_run, manager) = (options.dry_run, options.field_manager.clone());
        let patched = off_the_runtime(self.shared, move |api| {
            let ns = ns.as_deref();
            if scale {
                return api.update_scale(&resource, ns, &name, dry_run, |current| {
                    crate::patch::apply(kind, &current, &patch)
                });
            }
            let options = UpdateOptions {
                endpoint,
                dry_run,
                manager: &manager,
            };
            api.patch(&resource, ns, &name, kind, &patch, &options)
        })
        .await?;
        with_warnings(self.object_reply(StatusCode::OK, &patched), &warnings)
    }

    /// PATCH with `application/apply-patch+yaml`: server-side apply (see [`crate::apply`]); 201
    /// when it created the object.
    async fn apply(
        &self,
        name: &str,
        target: ApplyTarget,
        options: &ApplyQuery,
        body: Incoming,
    ) -> Reply {
        use crate::apply::verb::{self, ApplyOutcome, ApplyRequest};
        self.write_fault()?;
        self.update_fault(name)?;
        let body = read_body(body).await?;
        let applied = ApplyRequest {
            config: verb::parse_body(&body)?,
            manager: options.field_manager.clone(),
            force: options.force,
        };
        let (resource, namespace, owned_name) = (
            self.resource.clone(),
            self.owned_namespace(),
            name.to_string(),
        );
        let dry_run = options.dry_run;
        let (object, outcome) = off_the_runtime(self.shared, move |api| {
            api.apply_to(
                &resource,
                namespace.as_deref(),
                &owned_name,
                &applied,
                dry_run,
                target,
            )
        })
        .await?;
        if target == ApplyTarget::Scale {
            return Ok(json_response(StatusCode::OK, &object));
        }
        let code = match outcome {
            ApplyOutcome::Created => StatusCode::CREATED,
            ApplyOutcome::Updated => StatusCode::OK,
        };
        self.object_reply(code, &object)
    }

    /// An action subresource (see [`crate::subresource`]): binding, eviction, token, log, the
    /// streams and the proxies.
    async fn action(
        &self,
        name: &str,
        extra: Extra,
        options: &WriteQuery,
        format: BodyFormat,
        container: Option<&str>,
        body: Incoming,
    ) -> Reply {
        let api = &self.shared.api;
        let ns = self.namespace;
        let reply = match extra {
            Extra::Binding | Extra::Eviction | Extra::Token => {
                self.write_fault()?;
                let object = read_object(body, format).await?;
                match extra {
                    Extra::Binding => api.bind(ns, Some(name), &object, options.dry_run)?,
                    Extra::Eviction => api.evict(ns, name, &object, options.dry_run)?,
                    _ => api.token(ns, name, &object)?,
                }
            }
            Extra::Log => api.log(ns, name, container)?,
            Extra::Exec | Extra::Attach | Extra::PortForward => api.connect(ns, name)?,
            Extra::Proxy => api.proxy(self.resource, ns, name)?,
            // Served as get, update and patch (see `request::action`).
            Extra::EphemeralContainers | Extra::Resize | Extra::Approval => {
                return Err(StatusError::method_not_allowed("POST"));
            }
        };
        action_reply(reply)
    }

    /// DELETE of one object: the object while it waits for finalizers or a grace period (or
    /// when its type returns deleted objects), else a `Success` Status naming it.
    async fn delete(&self, name: &str, options: DeleteQuery, body: Incoming) -> Reply {
        self.write_fault()?;
        let body = read_delete_options(body, options.body).await?;
        let (options, dry_run) = options.options(&body)?;
        let resource = self.resource;
        let (owned, namespace, owned_name) = (
            self.resource.clone(),
            self.owned_namespace(),
            name.to_string(),
        );
        let deletion = off_the_runtime(self.shared, move |api| {
            api.delete(&owned, namespace.as_deref(), &owned_name, &options, dry_run)
        })
        .await?;
        match deletion {
            Deletion::Pending(stored) => self.stored_reply(&stored),
            Deletion::Deleted(stored) if resource.returns_deleted_object => {
                self.stored_reply(&stored)
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

    /// DELETECOLLECTION: a list (or Table) of the objects it deleted or marked for deletion.
    async fn delete_collection(
        &self,
        selection: &Deferred<Selection>,
        options: DeleteQuery,
        body: Incoming,
    ) -> Reply {
        self.write_fault()?;
        let selection = selection.get()?;
        let body = read_delete_options(body, options.body).await?;
        let (options, dry_run) = options.options(&body)?;
        let api = &self.shared.api;
        let resource = self.resource;
        let (owned, namespace) = (self.resource.clone(), self.owned_namespace());
        let shard = selection.shard().cloned();
        let deleted = off_the_runtime(self.shared, move |api| {
            api.delete_collection(&owned, namespace.as_deref(), &selection, &options, dry_run)
        })
        .await?;
        let revision = api.store.revision();
        if let Some(version) = self.answer.table {
            let writer = self.table_writer(version)?;
            let meta = table::ListMeta {
                resource_version: revision.to_string(),
                ..table::ListMeta::default()
            };
            let objects = deleted.iter().map(|s| s.object.as_ref());
            return Ok(json_response(StatusCode::OK, &writer.list(objects, &meta)));
        }
        if let Some(reply) =
            self.metadata_list_reply(|| list_metadata(revision, None, None), &deleted)
        {
            return reply;
        }
        let body = list_body(resource, revision, &deleted, None, None, shard.as_ref());
        Ok(bytes_response(StatusCode::OK, body))
    }

    /// The object a write returns, or a one-row Table of it, or its metadata alone, as the client
    /// asked.
    fn object_reply(&self, code: StatusCode, object: &Value) -> Reply {
        if let Some(reply) = self.metadata_reply(code, object) {
            return reply;
        }
        match self.answer.table {
            Some(version) => {
                let writer = self.table_writer(version)?;
                Ok(json_response(code, &writer.object(object, true)))
            }
            None => Ok(json_response(code, object)),
        }
    }

    /// [`Call::object_reply`] for a stored object (a 200 with its stored bytes when no Table is
    /// wanted).
    fn stored_reply(&self, stored: &Stored) -> Reply {
        match (self.answer.table, self.answer.metadata) {
            (None, None) => Ok(stored_response(StatusCode::OK, stored)),
            _ => self.object_reply(StatusCode::OK, &stored.object),
        }
    }

    /// The `PartialObjectMetadata` of one object when the client asked for metadata only (406
    /// when it asked for a list's); `None` when it did not ask.
    fn metadata_reply(&self, code: StatusCode, object: &Value) -> Option<Reply> {
        let wanted = self.answer.metadata?;
        Some(
            match wanted.mismatch(false, || partial::go_type(self.resource, false)) {
                Some(refusal) => Err(refusal),
                None => Ok(json_response(
                    code,
                    &partial::object(object, wanted.version),
                )),
            },
        )
    }

    /// The `PartialObjectMetadataList` of a list when the client asked for metadata only (406
    /// when it asked for one object's); `None` when it did not ask.
    fn metadata_list_reply(
        &self,
        list_metadata: impl FnOnce() -> Value,
        items: &[Stored],
    ) -> Option<Reply> {
        let wanted = self.answer.metadata?;
        Some(
            match wanted.mismatch(true, || partial::go_type(self.resource, true)) {
                Some(refusal) => Err(refusal),
                None => {
                    let objects = items.iter().map(|s| s.object.as_ref());
                    let list = partial::list(wanted.version, list_metadata(), objects);
                    Ok(json_response(StatusCode::OK, &list))
                }
            },
        )
    }

    /// The writer of a Table of `version`, made once the objects have been read: a bad
    /// `includeObject` is a 400 only then (a missing object is a 404 first), as on kube-apiserver.
    fn table_writer(&self, version: TableVersion) -> Result<TableWriter, StatusError> {
        Ok(TableWriter {
            convertor: Convertor::for_resource(self.resource, &self.shared.api),
            version,
            include: self.answer.include_object.get()?,
            now: table::Instant::now(),
        })
    }

    /// Removes the unknown fields of a write's body and judges them by the request's
    /// `fieldValidation` (see [`crate::field_validation`]): the warnings to send, or the 400 of
    /// a strict write.
    /// Drops the unknown fields of a write's `body` and judges them, with its duplicate fields
    /// (read from its JSON `text`), by the request's `fieldValidation`.
    fn judge_unknown_fields(
        &self,
        options: &WriteQuery,
        body: &mut Value,
        text: Option<&[u8]>,
    ) -> Result<Vec<String>, StatusError> {
        use crate::field_validation::{Problem, problems, read_merging_duplicates, strip_unknown};
        let unknown = strip_unknown(self.resource, body);
        let problems = problems(unknown, text);
        let duplicated = problems.iter().any(|p| matches!(p, Problem::Duplicate(_)));
        let warnings = options.field_validation.judge(self.resource, problems)?;
        // A field of a built-in kind written twice: the body as Go reads it into its struct
        // (objects merged), its unknown fields dropped again (they were judged above). A custom
        // object is read into a map, where the last value wins, as serde_json has it.
        let builtin = crate::field_validation::builtin_message(self.resource).is_some();
        if let Some(merged) = text
            .filter(|_| duplicated && builtin)
            .and_then(read_merging_duplicates)
        {
            *body = merged;
            strip_unknown(self.resource, body);
        }
        Ok(warnings)
    }

    /// The injected write failure (500 or 429), if one is due.
    fn write_fault(&self) -> Result<(), StatusError> {
        match self.shared.faults.write_failure() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The injected update conflict (409), if one is due.
    fn update_fault(&self, name: &str) -> Result<(), StatusError> {
        if self.shared.faults.update_conflicts() {
            return Err(StatusError::conflict(
                self.resource,
                name,
                StatusError::MODIFIED,
            ));
        }
        Ok(())
    }
}

/// The response of an action subresource.
fn action_reply(reply: ActionReply) -> Reply {
    match reply {
        ActionReply::Json(code, value) => {
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            Ok(json_response(code, &value))
        }
        ActionReply::Text(text) => {
            let mut response = bytes_response(StatusCode::OK, Bytes::from(text));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            Ok(response)
        }
        ActionReply::NoContent => Ok(bytes_response(StatusCode::NO_CONTENT, Bytes::new())),
    }
}

/// `reply` with one `Warning: 299 - "<text>"` header per warning (the form kube-apiserver sends
/// and client-go's warning handlers print).
fn with_warnings(reply: Reply, warnings: &[String]) -> Reply {
    let mut response = reply?;
    for warning in warnings {
        let quoted = serde_json::to_string(warning).unwrap_or_default();
        if let Ok(value) = HeaderValue::from_str(&format!("299 - {quoted}")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    Ok(response)
}

/// A list's `metadata`: its resourceVersion, and the continue token and remaining count of a page
/// that is not the last.
fn list_metadata(revision: u64, continue_token: Option<&str>, remaining: Option<u64>) -> Value {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if let (Some(token), Some(map)) = (continue_token, metadata.as_object_mut()) {
        map.insert("continue".into(), token.into());
        if let Some(remaining) = remaining {
            map.insert("remainingItemCount".into(), remaining.into());
        }
    }
    metadata
}

/// A `<Kind>List` body, assembled from each object's stored bytes. A list of one shard carries
/// `metadata.shardInfo.selector`, the selector's canonical text (a Table or a
/// `PartialObjectMetadataList` does not: kube-apiserver 1.37 drops it in their conversion).
fn list_body(
    resource: &ResourceType,
    revision: u64,
    items: &[Stored],
    continue_token: Option<&str>,
    remaining: Option<u64>,
    shard: Option<&ShardSelector>,
) -> Bytes {
    let mut metadata = list_metadata(revision, continue_token, remaining);
    if let (Some(shard), Some(map)) = (shard, metadata.as_object_mut()) {
        map.insert("shardInfo".into(), json!({"selector": shard.to_string()}));
    }
    let head = json!({"kind": format!("{}List", resource.kind), "apiVersion": resource.api_version(), "metadata": metadata});
    let (before, after) = crate::wire::list_frame(&head);
    let size: usize = items.iter().map(|s| s.json.len() + 1).sum();
    let mut body = BytesMut::with_capacity(before.len() + size + after.len());
    body.put_slice(&before);
    // kube-apiserver's items of a built-in kind carry no `kind` and `apiVersion` (Go's typed list
    // holds the bare structs); a custom kind's items are whole objects (see `crate::wire`).
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.put_u8(b',');
        }
        for part in crate::wire::untyped_item(&item.json, item.untyped_from) {
            body.put_slice(part);
        }
    }
    body.put_slice(&after);
    body.freeze()
}

/// Moves a watcher's items to its response body until the feed ends, the client leaves, or the
/// timeout passes. With a `table` writer, objects are sent as one-row Tables, headers on the first;
/// with `metadata`, as `PartialObjectMetadata` (a watch asked for `PartialObjectMetadataList`
/// sends no object events: kube-apiserver cannot convert an event's object to a list, and its
/// watch stays open and silent).
#[allow(clippy::too_many_arguments)]
async fn stream_watch(
    mut feed: WatchFeed,
    tx: mpsc::Sender<Bytes>,
    resource: Arc<ResourceType>,
    faults: Arc<Faults>,
    timeout: Duration,
    mut table: Option<TableWriter>,
    metadata: Option<PartialMetadata>,
    protobuf: bool,
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
                // The ends first (the client gone, the watch's timeout), then the next event: a
                // flood of writes cannot keep a watch open past its end.
                biased;
                _ = tx.closed() => return,
                () = &mut expired => return,
                item = feed.live.recv() => match item {
                    Some(item) => item,
                    None => return,
                },
            },
        };
        if let WatchItem::Event(_, stored) = &item {
            let delay = faults.watch_delay();
            if !delay.is_zero() {
                // The delay is at most an hour (see `crate::faults`); an overflow delivers at once.
                if let Some(due) = stored.written.checked_add(delay) {
                    tokio::time::sleep_until(due).await;
                }
            }
        }
        let last = matches!(item, WatchItem::Error(_));
        let line = match (&mut table, metadata) {
            (Some(writer), _) => render_table(writer, &resource, &item, &mut headers_sent),
            (None, Some(wanted)) => match render_metadata(wanted, &resource, &item) {
                Some(line) => line,
                None => continue,
            },
            (None, None) if protobuf => match render_protobuf(&resource, &item) {
                Ok(frame) => frame,
                Err(error) => {
                    // Not expected for a kind in the table; the watch ends rather than mix
                    // encodings.
                    tracing::warn!(%error, "a watch event has no protobuf form: watch ended");
                    return;
                }
            },
            (None, None) => render(&resource, &item),
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
            (
                event.as_str(),
                writer.object(&stored.object, !*headers_sent),
            )
        }
        WatchItem::Bookmark {
            revision,
            initial_events_end,
        } => {
            let object = bookmark_object(resource, *revision, *initial_events_end);
            ("BOOKMARK", writer.object(&object, !*headers_sent))
        }
        WatchItem::Error(_) => return render(resource, item),
    };
    *headers_sent = true;
    event_line(table.0, &table.1)
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

/// One watch event line of a metadata-only watch (see [`stream_watch`]); `None`: not sent.
fn render_metadata(
    wanted: PartialMetadata,
    resource: &ResourceType,
    item: &WatchItem,
) -> Option<Bytes> {
    if let WatchItem::Error(_) = item {
        return Some(render(resource, item));
    }
    if wanted.shape == MetadataShape::List {
        return None;
    }
    let (kind, object) = match item {
        WatchItem::Event(event, stored) => (
            event.as_str(),
            partial::object(&stored.object, wanted.version),
        ),
        WatchItem::Bookmark {
            revision,
            initial_events_end,
        } => {
            let bookmark = bookmark_object(resource, *revision, *initial_events_end);
            ("BOOKMARK", partial::object(&bookmark, wanted.version))
        }
        WatchItem::Error(_) => return Some(render(resource, item)),
    };
    Some(event_line(kind, &object))
}

/// A watch event's line: `{"type":...,"object":...}` in kube-apiserver's key order, and a newline.
fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = crate::wire::event(kind, object);
    line.push(b'\n');
    Bytes::from(line)
}

/// One watch event as a protobuf frame.
fn render_protobuf(
    resource: &ResourceType,
    item: &WatchItem,
) -> Result<Bytes, ferrokube_core::protobuf::EncodeError> {
    use crate::protobuf::answer::watch_frame;
    match item {
        WatchItem::Event(event, stored) => watch_frame(event.as_str(), &stored.object),
        WatchItem::Bookmark {
            revision,
            initial_events_end,
        } => watch_frame(
            "BOOKMARK",
            &bookmark_object(resource, *revision, *initial_events_end),
        ),
        WatchItem::Error(error) => watch_frame("ERROR", &error.to_status()),
    }
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
            return event_line("BOOKMARK", &object);
        }
        WatchItem::Error(error) => return event_line("ERROR", &error.to_status()),
    }
    line.freeze()
}
