//! # Finalizers: cleaning up before an object disappears
//!
//! When a controller acts *outside* the cluster for an object (a DNS record at a provider, a bucket,
//! a row in a database), deleting the object must first undo that. A *finalizer* makes the API server
//! wait: an object whose `metadata.finalizers` is not empty is not removed by a delete; it only gets
//! a `deletionTimestamp`, and is removed when the last finalizer is taken off.
//!
//! ```text
//!  created ──reconcile──▶ add "example.com/cleanup" ──▶ apply … apply …   (normal life)
//!                                                            │ kubectl delete
//!                                                            ▼
//!                                  deletionTimestamp set, object still there (finalizer pending)
//!                                                            │ reconcile sees it
//!                                                            ▼
//!                                  cleanup (outside world) ──ok──▶ remove finalizer ──▶ object gone
//!                                          │ error: finalizer stays, the key is retried
//! ```
//!
//! The writes are JSON patches (RFC 6902) that change only `metadata.finalizers` and keep every
//! other controller's finalizers, guarded against lost updates by a `test` operation:
//!
//! ```text
//!  list present:  [{"op":"test","path":"/metadata/finalizers","value":[…as read…]},
//!                  {"op":"add","path":"/metadata/finalizers/-","value":"example.com/cleanup"}]
//!  list absent:   [{"op":"test","path":"/metadata/resourceVersion","value":"…as read…"},
//!                  {"op":"add","path":"/metadata/finalizers","value":["example.com/cleanup"]}]
//!  remove:        [{"op":"test","path":"/metadata/finalizers","value":[…as read…]},
//!                  {"op":"remove","path":"/metadata/finalizers/<index>"}]
//! ```
//!
//! If the list changed since the object was read (another controller added or removed one), the
//! `test` fails and the server refuses the whole patch (422, or 409): the error is
//! [`FinalizerPatchError::Stale`], meaning "read the object again and retry"; returning it from a
//! reconcile does exactly that, with backoff.
//!
//! [`finalize`] runs the whole pattern for one reconcile. The semantics follow kube-rs's
//! `runtime::finalizer` and controller-runtime's `controllerutil.AddFinalizer`/`RemoveFinalizer`;
//! the differences are in [`finalize`]'s docs.

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use ferrokube_client::api::{Api, Patch, PatchParams};
use ferrokube_client::error::Error;
use ferrokube_core::Object;

/// Why adding or removing a finalizer failed.
#[derive(Debug, thiserror::Error)]
pub enum FinalizerPatchError {
    /// The guarded patch was refused because the object changed since it was read (its finalizers,
    /// or for an object without finalizers its resourceVersion): a failed `test` (422 Invalid
    /// without field causes) or a 409 Conflict. Read the object again and retry; from a reconcile,
    /// return the error.
    #[error("the object changed since it was read; retry with a fresh copy: {0}")]
    Stale(#[source] Error),
    /// Any other failure of the request (including NotFound: the object is gone).
    #[error(transparent)]
    Api(Error),
    /// The object has no `metadata.name`, so there is nothing to patch.
    #[error("the object has no metadata.name")]
    Unnamed,
    /// The `Api` serves another namespace than the object's (e.g. `Api::all` for a namespaced
    /// kind); build it with `Api::namespaced(client, object_namespace)`.
    #[error("the Api serves namespace {api:?} but the object is in {object:?}")]
    WrongNamespace {
        api: Option<String>,
        object: Option<String>,
    },
}

impl FinalizerPatchError {
    /// True if the object changed underneath and a retry with a fresh copy may succeed.
    pub fn is_stale(&self) -> bool {
        matches!(self, FinalizerPatchError::Stale(_))
    }

    fn from_api(error: Error) -> FinalizerPatchError {
        let failed_test = error.is_invalid()
            && error.api().is_some_and(|api| {
                api.details
                    .as_ref()
                    .and_then(|d| d.causes.as_ref())
                    .is_none_or(|causes| causes.is_empty())
            });
        if error.is_conflict() || failed_test {
            FinalizerPatchError::Stale(error)
        } else {
            FinalizerPatchError::Api(error)
        }
    }
}

/// Why [`finalize`] failed. `E` is the error of the caller's `apply` and `cleanup`.
///
/// It is an error type for any `E` that prints (`Debug + Display`), not only for an `E` that is
/// itself an `Error`: so a reconciler whose error is `Box<dyn Error + Send + Sync>` (which is not
/// an `Error` itself) can `?` it. The caller's error is part of the message, and reachable as the
/// variant's field; it is not the error's `source()`, which would need `E: Error`.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use ferrokube_client::Api;
/// # use ferrokube_runtime::controller::finalizer::finalize;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// type Error = Box<dyn std::error::Error + Send + Sync>;
///
/// async fn reconcile(api: &Api<ConfigMap>, cm: Arc<ConfigMap>) -> Result<(), Error> {
///     finalize(api, "example.com/cleanup", cm, |_| async { Ok::<_, Error>(()) }, |_| async {
///         Ok::<_, Error>(())
///     })
///     .await?;
///     Ok(())
/// }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError<E> {
    /// `apply` failed (the finalizer, if it was just added, stays).
    #[error("apply failed: {0}")]
    Apply(E),
    /// `cleanup` failed; the finalizer stays, so the object stays until a later cleanup succeeds.
    #[error("cleanup failed: {0}")]
    Cleanup(E),
    /// Adding the finalizer failed; `apply` did not run.
    #[error("could not add the finalizer: {0}")]
    AddFinalizer(#[source] FinalizerPatchError),
    /// `cleanup` succeeded but removing the finalizer failed; the next reconcile runs `cleanup`
    /// again, so it must be idempotent.
    #[error("could not remove the finalizer: {0}")]
    RemoveFinalizer(#[source] FinalizerPatchError),
}

/// Whether `meta` lists the finalizer `finalizer`.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_deref()
        .is_some_and(|list| list.iter().any(|f| f == finalizer))
}

/// Adds `finalizer` to `object` on the server, keeping the others, with a guarded JSON patch (see
/// the [module docs](self)); returns the object as patched. If `object` lists it already, nothing is
/// sent and a copy of `object` is returned.
///
/// `object` is the version the guard compares with: pass what you read (a cache's copy is fine; if
/// it is stale the patch fails with [`FinalizerPatchError::Stale`]). The server refuses new
/// finalizers on an object that is being deleted. `api` must serve the object's namespace.
pub async fn add_finalizer<K: Object>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
) -> Result<K, FinalizerPatchError> {
    let meta = object.meta();
    if has_finalizer(meta, finalizer) {
        return Ok(object.clone());
    }
    let name = target(api, meta)?;
    let patch = add_patch(meta, finalizer);
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Json(patch))
        .await
        .map_err(FinalizerPatchError::from_api)?;
    tracing::debug!(name, finalizer, "added finalizer");
    Ok(patched)
}

/// Removes `finalizer` from `object` on the server, keeping the others, with a guarded JSON patch
/// (see the [module docs](self)); returns the object as patched (if this was the last finalizer of
/// an object being deleted, the server removes the object and answers with its final state). If
/// `object` does not list it, nothing is sent and a copy of `object` is returned.
pub async fn remove_finalizer<K: Object>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
) -> Result<K, FinalizerPatchError> {
    let meta = object.meta();
    let Some(patch) = remove_patch(meta, finalizer) else {
        return Ok(object.clone());
    };
    let name = target(api, meta)?;
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Json(patch))
        .await
        .map_err(FinalizerPatchError::from_api)?;
    tracing::debug!(name, finalizer, "removed finalizer");
    Ok(patched)
}

/// The object's name, after checking that `api` serves its namespace.
fn target<'a, K: Object>(
    api: &Api<K>,
    meta: &'a ObjectMeta,
) -> Result<&'a str, FinalizerPatchError> {
    let name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or(FinalizerPatchError::Unnamed)?;
    let object_namespace = meta.namespace.as_deref().filter(|ns| !ns.is_empty());
    if api.resource().namespaced && api.namespace() != object_namespace {
        return Err(FinalizerPatchError::WrongNamespace {
            api: api.namespace().map(str::to_string),
            object: object_namespace.map(str::to_string),
        });
    }
    Ok(name)
}

/// The guarded JSON patch that appends `finalizer` (an empty list counts as absent).
fn add_patch(meta: &ObjectMeta, finalizer: &str) -> Value {
    match meta.finalizers.as_deref().filter(|list| !list.is_empty()) {
        Some(current) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]),
        None => json!([
            {"op": "test", "path": "/metadata/resourceVersion",
             "value": meta.resource_version.as_deref().unwrap_or_default()},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]),
    }
}

/// The guarded JSON patch that removes `finalizer`, or `None` if it is not listed.
fn remove_patch(meta: &ObjectMeta, finalizer: &str) -> Option<Value> {
    let current = meta.finalizers.as_deref()?;
    let index = current.iter().position(|f| f == finalizer)?;
    Some(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": current},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]))
}

/// What [`finalize`] ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finalized<T> {
    /// The object is alive: `apply` ran (after the finalizer was added, if it was missing) and
    /// returned this.
    Applied(T),
    /// The object is being deleted: `cleanup` ran, returned this, and the finalizer was removed.
    CleanedUp(T),
    /// The object is being deleted and does not carry the finalizer (any more): nothing ran.
    /// Usually there is nothing left to do but wait for it to go.
    NothingToDo,
}

impl<T> Finalized<T> {
    /// The value `apply` or `cleanup` returned, if one ran.
    pub fn into_inner(self) -> Option<T> {
        match self {
            Finalized::Applied(value) | Finalized::CleanedUp(value) => Some(value),
            Finalized::NothingToDo => None,
        }
    }

    /// The value `apply` or `cleanup` returned, or `default` when nothing ran; e.g.
    /// `finalize(…).await?.unwrap_or(Action::await_change())` in a reconcile.
    pub fn unwrap_or(self, default: T) -> T {
        self.into_inner().unwrap_or(default)
    }
}

/// One reconcile of an object guarded by the finalizer `finalizer` (a qualified name such as
/// `example.com/cleanup`):
///
/// | object | finalizer listed | what runs | returns |
/// |---|---|---|---|
/// | alive (no `deletionTimestamp`) | yes | `apply(obj)` | [`Finalized::Applied`] |
/// | alive | no | add the finalizer, then `apply(patched obj)` | [`Finalized::Applied`] |
/// | being deleted | yes | `cleanup(obj)`, then, only if it succeeded, remove the finalizer (an object already gone counts as removed) | [`Finalized::CleanedUp`] |
/// | being deleted | no | nothing | [`Finalized::NothingToDo`] |
///
/// - The finalizer is added *before* `apply` does anything outside the cluster, so a delete can
///   never slip in between an outside effect and the finalizer that would undo it.
/// - After adding it, `apply` runs at once with the object the patch returned, rather than
///   waiting for the update event the patch causes (kube-rs returns and waits instead). Waiting
///   would stall for ever behind a filter that drops metadata-only changes (a generation filter),
///   and a reconcile that runs once more than needed is harmless. That update event still
///   arrives (unless filtered) and reconciles once more; `apply` must be idempotent, as every
///   reconcile is.
/// - `cleanup` may run more than once for one deletion (removing the finalizer failed, the
///   controller restarted): make it idempotent too, treating "already gone" as success.
/// - Writes are guarded patches ([`add_finalizer`], [`remove_finalizer`]): if `obj` is stale, they
///   fail with [`FinalizerPatchError::Stale`] inside [`FinalizerError::AddFinalizer`] /
///   [`FinalizerError::RemoveFinalizer`]; return it and the key is retried with a fresh object.
///
/// `T` is whatever the closures return (the controller's `Action`, typically); `E` their error.
/// `api` must serve `obj`'s namespace.
pub async fn finalize<K, T, E, A, AF, C, CF>(
    api: &Api<K>,
    finalizer: &str,
    obj: Arc<K>,
    apply: A,
    cleanup: C,
) -> Result<Finalized<T>, FinalizerError<E>>
where
    K: Object,
    A: FnOnce(Arc<K>) -> AF,
    AF: Future<Output = Result<T, E>>,
    C: FnOnce(Arc<K>) -> CF,
    CF: Future<Output = Result<T, E>>,
{
    let listed = has_finalizer(obj.meta(), finalizer);
    if obj.meta().deletion_timestamp.is_some() {
        if !listed {
            return Ok(Finalized::NothingToDo);
        }
        let value = cleanup(obj.clone())
            .await
            .map_err(FinalizerError::Cleanup)?;
        match remove_finalizer(api, &obj, finalizer).await {
            Ok(_) => {}
            // Gone already: a reconcile of a stale copy, after an earlier one removed the
            // finalizer and the server finished the delete. Nothing is left to remove.
            Err(FinalizerPatchError::Api(error)) if error.is_not_found() => {}
            Err(error) => return Err(FinalizerError::RemoveFinalizer(error)),
        }
        return Ok(Finalized::CleanedUp(value));
    }
    let obj = if listed {
        obj
    } else {
        let patched = add_finalizer(api, &obj, finalizer)
            .await
            .map_err(FinalizerError::AddFinalizer)?;
        Arc::new(patched)
    };
    apply(obj)
        .await
        .map(Finalized::Applied)
        .map_err(FinalizerError::Apply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(finalizers: Option<&[&str]>) -> ObjectMeta {
        ObjectMeta {
            name: Some("x".into()),
            resource_version: Some("42".into()),
            finalizers: finalizers.map(|l| l.iter().map(|f| f.to_string()).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn controller_finalizer_has_finalizer_looks_for_the_exact_name() {
        assert!(has_finalizer(&meta(Some(&["a/b", "c/d"])), "c/d"));
        assert!(!has_finalizer(&meta(Some(&["a/b"])), "a"));
        assert!(!has_finalizer(&meta(None), "a/b"));
    }

    #[test]
    fn controller_finalizer_adding_tests_the_list_or_the_resource_version() {
        assert_eq!(
            add_patch(&meta(Some(&["other/f"])), "me/f"),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other/f"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "me/f"},
            ])
        );
        let absent = json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
            {"op": "add", "path": "/metadata/finalizers", "value": ["me/f"]},
        ]);
        assert_eq!(add_patch(&meta(None), "me/f"), absent);
        assert_eq!(
            add_patch(&meta(Some(&[])), "me/f"),
            absent,
            "empty = absent"
        );
    }

    #[test]
    fn controller_finalizer_removing_tests_the_list_and_removes_by_index() {
        assert_eq!(
            remove_patch(&meta(Some(&["a/a", "me/f", "z/z"])), "me/f"),
            Some(json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a/a", "me/f", "z/z"]},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ]))
        );
        assert_eq!(remove_patch(&meta(Some(&["a/a"])), "me/f"), None);
        assert_eq!(remove_patch(&meta(None), "me/f"), None);
    }

    #[test]
    fn controller_finalizer_failed_tests_and_conflicts_are_stale_validation_errors_are_not() {
        use ferrokube_client::error::ApiError;
        let api_error = |code: u16, body: &str| {
            Error::Api(Box::new(ApiError::from_response(
                code,
                body.as_bytes(),
                None,
            )))
        };
        let failed_test = api_error(
            422,
            r#"{"kind":"Status","status":"Failure","reason":"Invalid","code":422,"message":"test operation failed"}"#,
        );
        assert!(FinalizerPatchError::from_api(failed_test).is_stale());
        let conflict = api_error(
            409,
            r#"{"kind":"Status","status":"Failure","reason":"Conflict","code":409,"message":"modified"}"#,
        );
        assert!(FinalizerPatchError::from_api(conflict).is_stale());
        let invalid_name = api_error(
            422,
            r#"{"kind":"Status","status":"Failure","reason":"Invalid","code":422,"message":"bad","details":{"causes":[{"field":"metadata.finalizers[0]"}]}}"#,
        );
        assert!(!FinalizerPatchError::from_api(invalid_name).is_stale());
        let missing = api_error(
            404,
            r#"{"kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"gone"}"#,
        );
        assert!(!FinalizerPatchError::from_api(missing).is_stale());
    }

    #[test]
    fn controller_finalizer_finalized_values() {
        assert_eq!(Finalized::Applied(1).into_inner(), Some(1));
        assert_eq!(Finalized::CleanedUp(2).unwrap_or(0), 2);
        assert_eq!(Finalized::<i32>::NothingToDo.unwrap_or(7), 7);
    }
}
