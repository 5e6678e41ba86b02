//! The REST verbs — get, list, watch, create, update, patch, delete, deletecollection and the scale
//! subresource — over the [`Store`], with no HTTP in sight.
//!
//! The HTTP layer (`http/`) parses a request into a call here and renders the result (running
//! each write on tokio's blocking pool, since a write may compute for a while); the garbage
//! collector and the pod simulator call the same methods in-process.
//!
//! # How a write flows: kube-apiserver's `GuaranteedUpdate`
//!
//! The store has one lock for every key. A write must not hold it while it does the slow part of
//! its work, or one hostile object (a CEL rule at the edge of its cost limit, a huge patch, a
//! long list of finalizers) stalls every client of the server. So an update, a patch, an apply or
//! a delete is a loop (`Api::guaranteed`):
//!
//! ```text
//!        ┌──────────────────────────────────────────────────────────────┐
//!        ▼                                                              │ lost the race
//!  read: store.get(key) ──► current object, its revision r   (lock: a moment)
//!        │                                                              │
//!  compute, without the lock:                                           │
//!        preconditions (a resourceVersion sent ≠ r ──► 409, no retry)   │
//!        apply the patch / take the new object                          │
//!        strategy: keep what may not change, defaults, generation       │
//!        validation: schema, CEL rules (on their big-stack thread)      │
//!        managed fields (server-side apply's walk), Service addresses   │
//!        │                                                              │
//!  commit: store.commit(key, r, write)   (lock: compare, stamp, notify) │
//!        ├── key still at r ──► written: the next revision, watchers told
//!        └── key moved on ─────────────────────────────────────────────┘ (at most MAX_WRITE_ATTEMPTS)
//! ```
//!
//! Two clients racing on one object without a resourceVersion therefore both land (the loser
//! computes again over the winner's object); with the same stale resourceVersion one lands and the
//! other gets 409 Conflict, as with etcd's compare-and-swap. A create validates everything before
//! it takes the lock, whose decision is then only "is the name taken". A dry run reads and
//! computes, and commits nothing.

mod establish;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::crd;
use crate::meta;
use crate::patch::{self, PatchType};
use crate::quota;
use crate::resource::{Registry, ResourceType};
use crate::selection::Selection;
use crate::services::{self, ServiceAllocator};
use crate::status::StatusError;
use crate::store::{Change, ListPage, Store, Stored, WatchFeed, WatchFilter, WatchStart, Write};
use crate::strategy::{self, Endpoint};

/// How many times `Api::guaranteed` computes a write before it gives up with a 409. Each lost
/// race means another write of the same object committed meanwhile, so a write fails only when
/// this many others overtake it one after the other.
pub const MAX_WRITE_ATTEMPTS: usize = 32;

/// The field manager of writes made in-process (tests, examples) with the default
/// [`WriteOptions`] and [`UpdateOptions`]; HTTP requests name theirs (see [`crate::apply`]).
pub const IN_PROCESS: &str = "ferrokube-apiserver";

/// The query of a list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub selection: Selection,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

/// The query of a watch.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    pub selection: Selection,
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Option<Duration>,
}

/// How a create is made: dry run or not, by which field manager. The default is a real write by
/// [`IN_PROCESS`], the manager of in-process writes (tests, examples).
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions<'a> {
    /// Validate and answer, store nothing (`dryRun=All`).
    pub dry_run: bool,
    /// The field manager recorded in `managedFields` (see [`crate::apply`]).
    pub manager: &'a str,
}

impl Default for WriteOptions<'_> {
    fn default() -> Self {
        WriteOptions {
            dry_run: false,
            manager: IN_PROCESS,
        }
    }
}

/// How an update or a patch is made: through which endpoint, dry run or not, by which field
/// manager. The default is a real write of the object itself (not its status) by [`IN_PROCESS`].
#[derive(Debug, Clone, Copy)]
pub struct UpdateOptions<'a> {
    /// The object itself or its `/status` (see [`strategy::Endpoint`]).
    pub endpoint: Endpoint,
    /// Validate and answer, store nothing (`dryRun=All`).
    pub dry_run: bool,
    /// The field manager recorded in `managedFields` (see [`crate::apply`]).
    pub manager: &'a str,
}

impl Default for UpdateOptions<'_> {
    fn default() -> Self {
        UpdateOptions {
            endpoint: Endpoint::Main,
            dry_run: false,
            manager: IN_PROCESS,
        }
    }
}

/// How a delete treats the object's dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Delete the owner now; the garbage collector deletes dependents afterwards.
    Background,
    /// Delete dependents first; the owner stays (with a `foregroundDeletion` finalizer) until they are gone.
    Foreground,
    /// Remove the owner reference from dependents, then delete the owner.
    Orphan,
}

/// The options of a delete (query parameters or a `DeleteOptions` body).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub grace_period_seconds: Option<i64>,
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum Deletion {
    /// Gone now; the object as it was deleted.
    Deleted(Stored),
    /// Still there, waiting for finalizers or a grace period.
    Pending(Stored),
}

/// A page of a list, with the continue token for the next one.
#[derive(Debug)]
pub struct ListResult {
    pub page: ListPage,
    pub continue_token: Option<String>,
}

/// See the [module docs](self).
pub struct Api {
    pub store: Arc<Store>,
    pub registry: Registry,
    /// Pods bound to a node are deleted gracefully (a stand-in kubelet finishes the deletion).
    pub graceful_pods: bool,
    /// Services' cluster IPs and node ports (see [`crate::services`]); shared by every handle on
    /// the same store.
    pub services: Arc<ServiceAllocator>,
}

impl Api {
    fn table(resource: &ResourceType) -> Arc<str> {
        Arc::from(resource.qualified())
    }

    /// GET one object.
    pub fn get(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Stored, StatusError> {
        self.store
            .get(&resource.qualified(), &resource.key(namespace, name))
            .ok_or_else(|| StatusError::not_found(resource, name))
    }

    /// LIST, one page.
    pub fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult, StatusError> {
        let rv = options.resource_version.as_deref().unwrap_or("");
        let (at, from, limit) = match &options.continue_token {
            Some(token) => {
                if !rv.is_empty() {
                    return Err(StatusError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let (revision, start) = decode_continue(token)?;
                (Some(revision), Some(start), options.limit)
            }
            None => {
                let at = match (rv, options.resource_version_match.as_deref()) {
                    ("", _) => None,
                    // "0": any version; served from the latest state, unpaginated, like the watch cache.
                    ("0", _) => {
                        return self.list_page(resource, namespace, options, None, None, None);
                    }
                    (n, Some("Exact")) => Some(parse_rv(n)?),
                    (n, _) => {
                        let wanted = parse_rv(n)?;
                        let current = self.store.revision();
                        if wanted > current {
                            return Err(StatusError::too_large_resource_version(wanted, current));
                        }
                        None
                    }
                };
                (at, None, options.limit)
            }
        };
        let result = self.list_page(resource, namespace, options, at, from, limit);
        match (result, &options.continue_token) {
            (Err(e), Some(_)) if e.code == 410 => Err(StatusError::continue_expired()),
            // An exact list is read from storage (etcd) on the real server, whose wording this is.
            (Err(e), None) if e.code == 410 => Err(StatusError::expired(
                "The resourceVersion for the provided list is too old.",
            )),
            (result, _) => result,
        }
    }

    fn list_page(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
        at: Option<u64>,
        from: Option<String>,
        limit: Option<usize>,
    ) -> Result<ListResult, StatusError> {
        let limit = limit.filter(|l| *l > 0);
        let page = self.store.list(
            &resource.qualified(),
            namespace,
            &options.selection,
            at,
            from.as_deref(),
            limit,
        )?;
        let continue_token = page
            .continue_from
            .as_ref()
            .map(|key| encode_continue(page.revision, key));
        let mut page = page;
        if !options.selection.is_everything() {
            page.remaining = None;
        }
        Ok(ListResult {
            page,
            continue_token,
        })
    }

    /// WATCH: registers a watcher and returns its feed.
    pub fn watch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<WatchFeed, StatusError> {
        let rv = options.resource_version.as_deref().unwrap_or("");
        let start = if options.send_initial_events {
            if !options.bookmarks {
                return Err(StatusError::bad_request(
                    "sendInitialEvents requires allowWatchBookmarks=true",
                ));
            }
            WatchStart::InitialEvents
        } else {
            match rv {
                "" | "0" => WatchStart::CurrentState,
                n => WatchStart::After(parse_rv(n)?),
            }
        };
        let filter = WatchFilter {
            table: Api::table(resource),
            namespace: namespace.map(str::to_string),
            selection: options.selection.clone(),
            bookmarks: options.bookmarks,
        };
        Ok(self.store.watch(filter, start))
    }

    /// CREATE (POST). A dry run validates and returns the object without storing it.
    pub fn create(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        mut object: Value,
        options: &WriteOptions<'_>,
    ) -> Result<Value, StatusError> {
        let source = self.type_source(resource);
        self.record_update(resource, &source, None, &mut object, (options.manager, ""));
        self.create_recorded(resource, namespace, object, options.dry_run)
    }

    /// CREATE of an object whose managedFields are already written (see [`crate::apply`]).
    pub(crate) fn create_recorded(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, StatusError> {
        if resource.terminating {
            let name = meta::name(&object).unwrap_or("");
            return Err(crd::create_while_terminating(resource, name));
        }
        strategy::check_type(resource, &mut object)?;
        strategy::check_namespace(resource, &mut object, namespace)?;
        if let Some(ns) = namespace.filter(|_| resource.namespaced) {
            self.check_namespace_open(resource, ns, meta::name(&object).unwrap_or(""))?;
        }
        let name = strategy::prepare_create(resource, &mut object)?;
        if let Some(ns) = namespace.filter(|_| resource.namespaced) {
            quota::admit(&self.store, resource, ns, &name, &object)?;
        }
        // Held until the Service is stored: no other Service gets its address meanwhile. A dry
        // run gets the addresses a create would (as on 1.37; 1.20 allocated none) and holds none.
        let is_service = services::is_services(resource);
        let _allocator = is_service.then(|| self.services.hold());
        if is_service {
            let stored = services::stored(&self.store, resource);
            services::allocate(&stored, resource, namespace, &name, &mut object)?;
        }
        let key = resource.key(namespace, &name);
        if dry_run {
            // kube-apiserver's dry run looks the name up instead of storing.
            if self.store.get(&Api::table(resource), &key).is_some() {
                return Err(StatusError::already_exists(resource, &name));
            }
            return Ok(object);
        }
        strategy::refuse_sent_version(&object)?;
        // A compare-and-swap over "nothing there": encoded before the lock, refused if the name
        // is taken.
        let (_, stored) = self
            .store
            .commit(&Api::table(resource), &key, None, Write::Put(object))
            .map_err(|_| StatusError::already_exists(resource, &name))?;
        let created = stored
            .map(|s| (*s.object).clone())
            .ok_or_else(|| StatusError::internal("the created object vanished"))?;
        self.after_write(resource, &name);
        Ok(created)
    }

    /// What a committed write of `resource` sets off: a CRD written is reconciled at once (its kind
    /// served or unserved); an object of a terminating CRD written (a finalizer removed, or a
    /// create that raced the deletion) lets the CRD's deletion go on. Not called for dry runs, nor
    /// from [`establish::reconcile`] itself (which uses the unhooked [`Api::write`] and
    /// [`Api::delete_object`]).
    fn after_write(&self, resource: &ResourceType, name: &str) {
        if resource.is_definitions() {
            establish::reconcile(self, name);
        } else if let Some(definition) = resource.definition.as_deref() {
            let now = self
                .registry
                .find(&resource.group, &resource.version, &resource.plural);
            if now.is_none_or(|t| t.terminating) {
                establish::reconcile(self, definition);
            }
        }
    }

    fn check_namespace_open(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<(), StatusError> {
        let namespaces = self
            .registry
            .find("", "v1", "namespaces")
            .ok_or_else(|| StatusError::internal("namespaces are not registered"))?;
        let ns = self
            .store
            .get(&namespaces.qualified(), namespace)
            .ok_or_else(|| StatusError::not_found(&namespaces, namespace))?;
        if meta::string(&ns.object, "deletionTimestamp").is_some() {
            return Err(StatusError::forbidden(
                resource,
                name,
                &format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            ));
        }
        Ok(())
    }

    /// UPDATE (PUT) of `name` with `object`, through `options.endpoint`.
    pub fn update(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        mut object: Value,
        options: &UpdateOptions<'_>,
    ) -> Result<Value, StatusError> {
        let UpdateOptions {
            endpoint,
            dry_run,
            manager,
        } = *options;
        strategy::check_type(resource, &mut object)?;
        strategy::check_namespace(resource, &mut object, namespace)?;
        match meta::name(&object) {
            Some(n) if n == name => {}
            Some(n) => {
                return Err(StatusError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            None => {
                meta::metadata_mut(&mut object).insert("name".into(), name.into());
            }
        }
        if resource.is_custom()
            && meta::string(&object, "resourceVersion").is_none_or(str::is_empty)
        {
            return Err(crd::unconditional_update(resource, name));
        }
        let source = self.type_source(resource);
        let updated = self.write(resource, namespace, name, dry_run, |current| {
            let mut object = object.clone();
            strategy::prepare_update(resource, current, &mut object, endpoint)?;
            self.record_update(
                resource,
                &source,
                Some(current),
                &mut object,
                (manager, endpoint.subresource()),
            );
            Ok(object)
        })?;
        if !dry_run {
            self.after_write(resource, name);
        }
        Ok(updated)
    }

    /// PATCH of `name` with `patch`, a patch of format `kind`, through `options.endpoint`
    /// (server-side apply is [`Api::apply`]).
    pub fn patch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        kind: PatchType,
        patch: &Value,
        options: &UpdateOptions<'_>,
    ) -> Result<Value, StatusError> {
        let UpdateOptions {
            endpoint,
            dry_run,
            manager,
        } = *options;
        let source = self.type_source(resource);
        let patched = self.write(resource, namespace, name, dry_run, |current| {
            let mut object = patch::apply(kind, current, patch)?;
            strategy::check_type(resource, &mut object)?;
            if meta::name(&object) != Some(name) {
                return Err(StatusError::bad_request(
                    "metadata.name: Invalid value: the name of a patched object cannot change",
                ));
            }
            strategy::check_namespace(resource, &mut object, namespace)?;
            strategy::prepare_update(resource, current, &mut object, endpoint)?;
            self.record_update(
                resource,
                &source,
                Some(current),
                &mut object,
                (manager, endpoint.subresource()),
            );
            Ok(object)
        })?;
        if !dry_run {
            self.after_write(resource, name);
        }
        Ok(patched)
    }

    /// A read-modify-write of one object. An update that clears the last finalizer of an object
    /// being deleted completes the deletion. Unhooked: see [`Api::after_write`].
    pub(crate) fn write(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
        mut change: impl FnMut(&Value) -> Result<Value, StatusError>,
    ) -> Result<Value, StatusError> {
        let key = resource.key(namespace, name);
        let mut preview = None;
        let mut finished_as = None;
        // A Service keeps or gets its addresses (see `crate::services`), the allocator held until
        // it is stored; the stored Services are read before the transaction, which holds the store.
        let is_service = services::is_services(resource);
        let _allocator = is_service.then(|| self.services.hold());
        let stored_services = if is_service {
            services::stored(&self.store, resource)
        } else {
            Vec::new()
        };
        let (change, stored) = self.guaranteed(resource, name, &key, |current| {
            preview = None;
            finished_as = None;
            let current = current.ok_or_else(|| StatusError::not_found(resource, name))?;
            let mut object = change(&current.object)?;
            if is_service {
                services::allocate(&stored_services, resource, namespace, name, &mut object)?;
            }
            if dry_run {
                preview = Some(object);
                return Ok(Write::Keep);
            }
            let finished = meta::string(&object, "deletionTimestamp").is_some()
                && meta::finalizers(&object).is_empty()
                && !self.waits_for_kubelet(resource, &object)
                && !waits_for_namespace_finalizers(resource, &object);
            if !finished {
                return Ok(Write::Put(object));
            }
            // kube-apiserver answers with the object as the write made it, at the version
            // it replaced: the deletion that follows is storage's, not the client's write
            // (the DELETED event carries a later version and the object as it was stored).
            let replaced = meta::string(&current.object, "resourceVersion")
                .unwrap_or_default()
                .to_string();
            meta::metadata_mut(&mut object).insert("resourceVersion".into(), replaced.into());
            finished_as = Some(object);
            Ok(Write::Delete)
        })?;
        if let Some(preview) = preview {
            return Ok(preview);
        }
        match (stored, change, finished_as) {
            (Some(s), _, _) => Ok((*s.object).clone()),
            // Deleted by clearing its last finalizer: the object as the write made it.
            (None, Some(_), Some(finished)) => Ok(finished),
            (None, Some(change), None) => Ok((*change.object.object).clone()),
            (None, None, _) => Err(StatusError::not_found(resource, name)),
        }
    }

    /// kube-apiserver's `GuaranteedUpdate`: the read-compute-swap loop every update, patch, apply
    /// and delete goes through (see the [module docs](self)).
    ///
    /// Each attempt reads the object at `key` (a moment under the store's lock), runs `decide` on
    /// it **without** the lock, then commits what `decide` returned as a compare-and-swap on the
    /// revision it read ([`Store::commit`]). If another write committed in between, the attempt is
    /// thrown away and `decide` runs again on the new object: so `decide` must compute from what it
    /// is given, and reset whatever it records for the caller. An error of `decide` (a 409 for a
    /// resourceVersion the request named, a 422) ends the loop at once: only a lost race retries.
    ///
    /// kube-apiserver retries until the request's deadline; here at most [`MAX_WRITE_ATTEMPTS`]
    /// attempts, then the 409 a client retries on (`the object has been modified`).
    fn guaranteed(
        &self,
        resource: &ResourceType,
        name: &str,
        key: &str,
        mut decide: impl FnMut(Option<&Stored>) -> Result<Write, StatusError>,
    ) -> Result<(Option<Arc<Change>>, Option<Stored>), StatusError> {
        let table = Api::table(resource);
        for attempt in 1..=MAX_WRITE_ATTEMPTS {
            let current = self.store.get(&table, key);
            let write = decide(current.as_ref())?;
            if matches!(write, Write::Keep) {
                return Ok((None, current));
            }
            match self.store.commit(&table, key, current.as_ref(), write) {
                Ok(done) => return Ok(done),
                Err(raced) => {
                    tracing::debug!(key, attempt, %raced, "a write lost the race to commit; computing it again");
                }
            }
        }
        tracing::info!(
            key,
            attempts = MAX_WRITE_ATTEMPTS,
            "a write kept losing the race to commit"
        );
        Err(StatusError::conflict(resource, name, StatusError::MODIFIED))
    }

    /// A pod bound to a node, in its grace period: only the (simulated) kubelet finishes it.
    fn waits_for_kubelet(&self, resource: &ResourceType, object: &Value) -> bool {
        self.graceful_pods
            && resource.kind == "Pod"
            && resource.group.is_empty()
            && object
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .is_some_and(|g| g > 0)
    }

    /// DELETE one object.
    pub fn delete(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Deletion, StatusError> {
        let deletion = self.delete_object(resource, namespace, name, options, dry_run)?;
        if !dry_run {
            self.after_write(resource, name);
        }
        Ok(deletion)
    }

    /// DELETE one object, unhooked: see [`Api::after_write`].
    pub(crate) fn delete_object(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Deletion, StatusError> {
        let key = resource.key(namespace, name);
        let mut preview = None;
        let (change, stored) = self.guaranteed(resource, name, &key, |current| {
            preview = None;
            let current = current.ok_or_else(|| StatusError::not_found(resource, name))?;
            check_preconditions(resource, name, &current.object, options)?;
            let write = self.deletion(resource, &current.object, options);
            if dry_run {
                // Answer what the delete would have done, and store nothing.
                preview = Some(match write {
                    Write::Delete => Deletion::Deleted(current.clone()),
                    Write::Keep => Deletion::Pending(current.clone()),
                    Write::Put(marked) => Deletion::Pending(current.with_object(marked)),
                });
                return Ok(Write::Keep);
            }
            Ok(write)
        })?;
        if let Some(preview) = preview {
            return Ok(preview);
        }
        match (change, stored) {
            (_, Some(still_there)) => Ok(Deletion::Pending(still_there)),
            (Some(change), None) => Ok(Deletion::Deleted(change.object.clone())),
            (None, None) => Err(StatusError::not_found(resource, name)),
        }
    }

    /// What deleting `object` writes: the delete itself, or a deletionTimestamp (and finalizers) when
    /// something must happen first.
    fn deletion(&self, resource: &ResourceType, object: &Value, options: &DeleteOptions) -> Write {
        let mut object = object.clone();
        let mut finalizers = meta::finalizers(&object);
        let mut add = |f: &str| {
            if !finalizers.iter().any(|x| x == f) {
                finalizers.push(f.to_string());
            }
        };
        let namespace_kind = resource.kind == "Namespace" && resource.group.is_empty();
        match options.propagation {
            Some(Propagation::Foreground) => add("foregroundDeletion"),
            Some(Propagation::Orphan) => add("orphan"),
            _ => {}
        }
        let already_deleting = meta::string(&object, "deletionTimestamp").is_some();
        // A CRD waits for its custom objects to be deleted (see `crd`).
        let definition = resource.is_definitions();
        if definition && !already_deleting {
            add(crd::FINALIZER);
        }
        let grace = options.grace_period_seconds.unwrap_or_else(|| {
            object
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30)
        });
        let bound_pod = self.graceful_pods
            && resource.kind == "Pod"
            && resource.group.is_empty()
            && object
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
        let graceful = bound_pod && grace > 0;
        if finalizers.is_empty() && !graceful && !namespace_kind {
            return Write::Delete;
        }
        if already_deleting && !graceful && finalizers == meta::finalizers(&object) {
            if bound_pod && grace == 0 {
                return Write::Delete;
            }
            return Write::Keep;
        }
        let metadata = meta::metadata_mut(&mut object);
        if !already_deleting {
            metadata.insert("deletionTimestamp".into(), meta::now().into());
            // As kube-apiserver does when it marks an object for deletion: an object with a
            // generation gets the next one, so that a controller filtering on generation changes
            // hears that its deletion began.
            if let Some(generation) = metadata.get("generation").and_then(Value::as_i64) {
                if generation > 0 {
                    metadata.insert("generation".into(), (generation + 1).into());
                }
            }
        }
        let grace_value = if graceful { grace } else { 0 };
        metadata.insert("deletionGracePeriodSeconds".into(), grace_value.into());
        if !finalizers.is_empty() {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        if definition && !already_deleting {
            crd::set_terminating(
                &mut object,
                "InstanceDeletionPending",
                "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            );
        }
        if namespace_kind {
            if let Some(map) = object.as_object_mut() {
                map.insert("status".into(), json!({"phase": "Terminating"}));
            }
        }
        Write::Put(object)
    }

    /// DELETECOLLECTION: deletes every selected object; returns those affected.
    pub fn delete_collection(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selection: &Selection,
        options: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Vec<Stored>, StatusError> {
        let page = self.store.list(
            &resource.qualified(),
            namespace,
            selection,
            None,
            None,
            None,
        )?;
        let mut affected = Vec::new();
        for item in page.items {
            let name = meta::name(&item.object).unwrap_or_default().to_string();
            let ns = meta::namespace(&item.object).map(str::to_string);
            match self.delete(resource, ns.as_deref(), &name, options, dry_run) {
                Ok(Deletion::Deleted(s) | Deletion::Pending(s)) => affected.push(s),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(affected)
    }

    /// GET `/scale`: the `autoscaling/v1` Scale of a workload.
    pub fn get_scale(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, StatusError> {
        let stored = self.get(resource, namespace, name)?;
        Ok(self.scale_view(resource, &stored.object))
    }

    /// PUT or PATCH `/scale`: `change` turns the current Scale into the wanted one; only
    /// `spec.replicas` is taken from it, and written at the type's replicas path.
    pub fn update_scale(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
        mut change: impl FnMut(Value) -> Result<Value, StatusError>,
    ) -> Result<Value, StatusError> {
        let object = self.write(resource, namespace, name, dry_run, |current| {
            let wanted = change(self.scale_view(resource, current))?;
            let sent_rv = wanted
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let current_rv = meta::string(current, "resourceVersion").unwrap_or("");
            if !sent_rv.is_empty() && sent_rv != current_rv {
                return Err(StatusError::conflict(resource, name, StatusError::MODIFIED));
            }
            let replicas = wanted
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let mut object = current.clone();
            set_path(&mut object, &spec_replicas_path(resource), replicas.into());
            meta::metadata_mut(&mut object).remove("resourceVersion");
            strategy::prepare_update(resource, current, &mut object, Endpoint::Main)?;
            Ok(object)
        })?;
        Ok(self.scale_view(resource, &object))
    }

    /// The Scale view of `object`, a workload of `resource`: the built-in workloads' replicas and
    /// selector, or where a custom resource's CRD says they are.
    pub(crate) fn scale_view(&self, resource: &ResourceType, object: &Value) -> Value {
        match &resource.scale_paths {
            Some(paths) => custom_scale_of(object, paths),
            None => scale_of(object),
        }
    }
}

/// A terminating Namespace whose `spec.finalizers` are not all gone yet: kube-apiserver removes it
/// only once both its metadata finalizers and these (`kubernetes`, removed through `/finalize` by
/// the namespace controller once the namespace is empty) are gone.
fn waits_for_namespace_finalizers(resource: &ResourceType, object: &Value) -> bool {
    strategy::is_namespaces(resource)
        && object
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
}

/// The path of the replicas a `/scale` write sets: `spec.replicas`, or a custom resource's
/// `specReplicasPath`, as segments.
pub(crate) fn spec_replicas_path(resource: &ResourceType) -> Vec<String> {
    match &resource.scale_paths {
        Some(paths) => path_segments(&paths.spec_replicas),
        None => vec!["spec".into(), "replicas".into()],
    }
}

/// `.spec.size` as `["spec", "size"]`.
fn path_segments(path: &str) -> Vec<String> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Sets `value` at `path` in `object`, making the objects on the way (a non-object on the way is
/// replaced by one).
pub(crate) fn set_path(object: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = object;
    for segment in parents {
        if !at.is_object() {
            *at = json!({});
        }
        let Some(map) = at.as_object_mut() else {
            return;
        };
        at = map.entry(segment.clone()).or_insert_with(|| json!({}));
    }
    if !at.is_object() {
        *at = json!({});
    }
    if let Some(map) = at.as_object_mut() {
        map.insert(last.clone(), value);
    }
}

/// The value at a JSON path (`.status.members`) of `object`.
fn at_path<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    path_segments(path)
        .iter()
        .try_fold(object, |at, segment| at.get(segment))
}

/// The Scale of a custom resource (kube-apiserver: replicas missing read as 0, a selector that
/// is not a string as empty).
fn custom_scale_of(object: &Value, paths: &crate::resource::ScalePaths) -> Value {
    let replicas = |path: &str| at_path(object, path).cloned().unwrap_or(json!(0));
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| at_path(object, p))
        .and_then(Value::as_str)
        .unwrap_or("");
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_metadata(object),
        "spec": {"replicas": replicas(&paths.spec_replicas)},
        "status": {"replicas": replicas(&paths.status_replicas), "selector": selector},
    })
}

/// The metadata a Scale copies from its object.
fn scale_metadata(object: &Value) -> serde_json::Map<String, Value> {
    let mut metadata = serde_json::Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta::metadata(object).and_then(|m| m.get(field)) {
            metadata.insert(field.into(), v.clone());
        }
    }
    metadata
}

/// The Scale view of a workload.
fn scale_of(object: &Value) -> Value {
    let metadata = scale_metadata(object);
    // A LabelSelector's matchLabels, or a ReplicationController's plain map of labels.
    let selector = object
        .pointer("/spec/selector/matchLabels")
        .or_else(|| {
            object
                .pointer("/spec/selector")
                .filter(|s| s.get("matchExpressions").is_none())
        })
        .and_then(Value::as_object)
        .map(|labels| {
            let mut pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            pairs.sort();
            pairs.join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

fn check_preconditions(
    resource: &ResourceType,
    name: &str,
    object: &Value,
    options: &DeleteOptions,
) -> Result<(), StatusError> {
    if let Some(uid) = options.uid.as_deref() {
        let actual = meta::uid(object).unwrap_or("");
        if uid != actual {
            return Err(StatusError::conflict(
                resource,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = options.resource_version.as_deref() {
        let actual = meta::string(object, "resourceVersion").unwrap_or("");
        if rv != actual {
            return Err(StatusError::conflict(
                resource,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}

fn parse_rv(rv: &str) -> Result<u64, StatusError> {
    rv.parse::<u64>()
        .map_err(|_| StatusError::bad_request(format!("invalid resource version {rv:?}")))
}

/// The continue token: the same shape as the real server's (base64 of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"key"}`), so tokens look familiar in logs.
fn encode_continue(revision: u64, from: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": from});
    URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String), StatusError> {
    let invalid = |why: &str| StatusError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| invalid("not base64"))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid("not JSON"))?;
    if value.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(invalid(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let revision = value
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("no resourceVersion"))?;
    let start = value
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("no start key"))?;
    Ok((revision, start.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_garbage_is_a_bad_request() {
        let token = encode_continue(42, "ns/b");
        assert_eq!(
            decode_continue(&token).expect("valid"),
            (42, "ns/b".to_string())
        );
        assert_eq!(decode_continue("%%%").expect_err("garbage").code, 400);
    }

    /// An API over an empty store, with the built-in types, and the ConfigMap `default/race`.
    fn api_with_a_config_map() -> (Api, Arc<ResourceType>) {
        let api = Api {
            store: Arc::new(Store::new(100, 10)),
            registry: Registry::default(),
            graceful_pods: false,
            services: Default::default(),
        };
        let namespaces = api
            .registry
            .find("", "v1", "namespaces")
            .expect("Namespaces are built in");
        let default =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
        api.create(&namespaces, None, default, &WriteOptions::default())
            .expect("namespace created");
        let config_maps = api
            .registry
            .find("", "v1", "configmaps")
            .expect("ConfigMaps are built in");
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "race", "namespace": "default"}, "data": {"k": "0"}});
        api.create(
            &config_maps,
            Some("default"),
            object,
            &WriteOptions::default(),
        )
        .expect("created");
        (api, config_maps)
    }

    /// A write of `data.<key> = <value>` to `default/race` by another client.
    fn racing_write(api: &Api, config_maps: &ResourceType, key: &str, value: &str) {
        let patch = json!({"data": {key: value}});
        api.patch(
            config_maps,
            Some("default"),
            "race",
            PatchType::Merge,
            &patch,
            &UpdateOptions::default(),
        )
        .expect("the racing write lands");
    }

    #[test]
    fn a_write_that_loses_the_race_is_computed_again_from_the_winner() {
        let (api, config_maps) = api_with_a_config_map();
        let mut seen = Vec::new();
        // The first computation is overtaken by another client's write (it runs without the
        // store's lock: under the lock, this nested write would deadlock).
        let written = api
            .write(&config_maps, Some("default"), "race", false, |current| {
                seen.push(current["data"].clone());
                if seen.len() == 1 {
                    racing_write(&api, &config_maps, "other", "1");
                }
                let mut next = current.clone();
                next["data"]["mine"] = "1".into();
                Ok(next)
            })
            .expect("the write lands on its second attempt");
        assert_eq!(seen.len(), 2, "computed twice: {seen:?}");
        assert_eq!(seen[1]["other"], "1", "the second attempt read the winner");
        assert_eq!(
            written["data"],
            json!({"k": "0", "other": "1", "mine": "1"})
        );
        let stored = api
            .get(&config_maps, Some("default"), "race")
            .expect("there");
        assert_eq!(stored.object["data"], written["data"], "both writes landed");
        assert_eq!(
            api.store.revision(),
            4,
            "the namespace, the create, the racing write, this one"
        );
    }

    #[test]
    fn a_resource_version_precondition_that_loses_the_race_is_a_conflict() {
        let (api, config_maps) = api_with_a_config_map();
        let read = api
            .get(&config_maps, Some("default"), "race")
            .expect("there");
        let mut sent = (*read.object).clone();
        sent["data"]["k"] = "mine".into();
        let mut attempts = 0;
        let error = api
            .write(&config_maps, Some("default"), "race", false, |current| {
                attempts += 1;
                if attempts == 1 {
                    racing_write(&api, &config_maps, "other", "1");
                }
                let mut next = sent.clone();
                strategy::prepare_update(&config_maps, current, &mut next, Endpoint::Main)?;
                Ok(next)
            })
            .expect_err("the version sent is no longer the stored one");
        assert_eq!((error.code, error.reason), (409, "Conflict"));
        assert_eq!(attempts, 2, "one lost race, then the precondition fails");
        let stored = api
            .get(&config_maps, Some("default"), "race")
            .expect("there");
        assert_eq!(stored.object["data"], json!({"k": "0", "other": "1"}));
    }

    #[test]
    fn a_write_overtaken_every_time_gives_up_with_a_conflict() {
        let (api, config_maps) = api_with_a_config_map();
        let mut attempts = 0;
        let error = api
            .write(&config_maps, Some("default"), "race", false, |current| {
                attempts += 1;
                racing_write(&api, &config_maps, "other", &attempts.to_string());
                let mut next = current.clone();
                next["data"]["mine"] = "1".into();
                Ok(next)
            })
            .expect_err("never commits");
        assert_eq!((error.code, error.reason), (409, "Conflict"));
        assert_eq!(
            error.message,
            format!(
                "Operation cannot be fulfilled on configmaps \"race\": {}",
                StatusError::MODIFIED
            )
        );
        assert_eq!(attempts, MAX_WRITE_ATTEMPTS);
    }

    #[test]
    fn the_scale_view_sorts_the_selector() {
        let rs = json!({"metadata": {"name": "w", "resourceVersion": "5"},
                        "spec": {"replicas": 3, "selector": {"matchLabels": {"b": "2", "a": "1"}}},
                        "status": {"replicas": 2}});
        let scale = scale_of(&rs);
        assert_eq!(scale["status"]["selector"], "a=1,b=2");
        assert_eq!(scale["spec"]["replicas"], 3);
    }
}
