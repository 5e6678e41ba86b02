//! # Owner references and `create_or_update`
//!
//! A controller that makes objects (a ReplicaSet its pods, an operator its ConfigMaps) marks each
//! one with an *owner reference* naming the object it acts for:
//!
//! ```text
//!  metadata:
//!    name: web-7d9f-x2x4z
//!    ownerReferences:
//!    - apiVersion: apps/v1          ┐ which owner: group/version + kind + name,
//!      kind: ReplicaSet             │ and its uid (a re-created owner of the same
//!      name: web-7d9f               │ name is a different object)
//!      uid: 0b5c…                   ┘
//!      controller: true             at most one reference per object says this: "my manager"
//!      blockOwnerDeletion: true     foreground deletion of the owner waits for this child
//! ```
//!
//! Three parts of the system read it: the **garbage collector** deletes a child once every owner it
//! names is gone, **event sources** map a change of a child to its controller's key (so the
//! controller reconciles when its pods change), and **claiming** ([`claim`](super::claim)) decides
//! which children a controller may manage. This module writes references and finds them:
//!
//! - [`controller_reference`]: the reference that makes an object a child's controller;
//! - [`set_controller_reference`]: puts that reference into a child's metadata, refusing what the
//!   API server or the garbage collector would refuse or misread (a child with another
//!   controller, an owner in another namespace);
//! - [`controller_of`]: the reference that names a child's controller;
//! - [`create_or_update`]: read an object, let a closure say how it should look, and write only if
//!   that differs, the usual way an operator keeps a child it owns as it should be.
//!
//! The behaviour follows controller-runtime's `controllerutil` package (`SetControllerReference`,
//! `CreateOrUpdate`); the differences are in each item's docs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use ferrokube_client::api::{Api, PostParams};
use ferrokube_client::error::Error;
use ferrokube_core::{Kind, Object};

/// Why [`set_controller_reference`] refused to set a reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// The child already has a controller, and it is not this owner (a different group, kind or
    /// name). An object has at most one controller; take it over only by removing the old
    /// reference first, deliberately.
    #[error("the object is already owned by another controller: {kind} {name:?}")]
    AlreadyOwned {
        /// The kind of the existing controller.
        kind: String,
        /// The name of the existing controller.
        name: String,
    },
    /// The owner is namespaced and the child lives in another namespace. Owner references carry no
    /// namespace: the garbage collector looks the owner up in the child's namespace, would not
    /// find it, and would delete the child.
    #[error(
        "cross-namespace owner references are disallowed: owner in namespace {owner_namespace:?}, object in {child_namespace:?}"
    )]
    CrossNamespace {
        owner_namespace: String,
        child_namespace: String,
    },
    /// The child has no namespace (it is cluster-scoped, or its namespace was not set yet) and the
    /// owner is namespaced: a cluster-scoped object cannot be owned by a namespaced one. If the
    /// child is namespaced, set `metadata.namespace` before the reference.
    #[error(
        "a cluster-scoped object must not have a namespaced owner (owner in namespace {owner_namespace:?})"
    )]
    ClusterScopedChild { owner_namespace: String },
    /// The owner has no `metadata.name` or `metadata.uid` (or, a `DynamicObject`, no `kind`):
    /// it was not read from the server (an object you built yourself has no uid until it is
    /// created).
    #[error("the owner has no {missing}; use the object as the server returned it")]
    IncompleteOwner {
        /// `"metadata.name"`, `"metadata.uid"` or `"kind"`.
        missing: &'static str,
    },
}

/// The owner reference that makes `owner` a child's controller: apiVersion and kind from the
/// type's k8s-openapi constants (a `DynamicObject`'s own fields), name and uid from its metadata
/// (empty strings if it has none; use [`set_controller_reference`], which refuses such an owner),
/// `controller: true` and `blockOwnerDeletion: true` (so a foreground deletion of the owner waits
/// for the child).
pub fn controller_reference<O: Kind>(owner: &O) -> OwnerReference {
    let meta = owner.meta();
    let (api_version, kind) = owner.api_version_and_kind();
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Makes `owner` the controller of the object whose metadata is `child_meta`, with
/// controller-runtime's `SetControllerReference` rules:
///
/// 1. the owner must have a name and a uid, else [`OwnerError::IncompleteOwner`];
/// 2. a namespaced owner needs a child in the same namespace, else
///    [`OwnerError::CrossNamespace`] or [`OwnerError::ClusterScopedChild`] (a cluster-scoped
///    owner may own objects anywhere);
/// 3. if the child already has a controller that is not this owner, [`OwnerError::AlreadyOwned`];
/// 4. if a reference to the same owner is there already (same API *group*, kind and name; the
///    version and uid may differ, e.g. the owner was re-created), that entry is replaced in place
///    by the new reference; otherwise the reference is appended. Other references are kept.
///
/// Only `child_meta` is changed, and only when `Ok` is returned; nothing is written to the server.
pub fn set_controller_reference<O: Kind>(
    owner: &O,
    child_meta: &mut ObjectMeta,
) -> Result<(), OwnerError> {
    let meta = owner.meta();
    if owner.api_version_and_kind().1.is_empty() {
        return Err(OwnerError::IncompleteOwner { missing: "kind" });
    }
    if meta.name.as_deref().is_none_or(str::is_empty) {
        return Err(OwnerError::IncompleteOwner {
            missing: "metadata.name",
        });
    }
    if meta.uid.as_deref().is_none_or(str::is_empty) {
        return Err(OwnerError::IncompleteOwner {
            missing: "metadata.uid",
        });
    }
    check_namespaces(meta.namespace.as_deref(), child_meta.namespace.as_deref())?;
    let reference = controller_reference(owner);
    if let Some(existing) = controller_of(child_meta).filter(|e| !same_owner(e, &reference)) {
        return Err(OwnerError::AlreadyOwned {
            kind: existing.kind.clone(),
            name: existing.name.clone(),
        });
    }
    let references = child_meta.owner_references.get_or_insert_default();
    match references.iter_mut().find(|r| same_owner(r, &reference)) {
        Some(slot) => *slot = reference,
        None => references.push(reference),
    }
    Ok(())
}

/// A namespaced owner (non-empty namespace) needs a child in its own namespace.
fn check_namespaces(owner: Option<&str>, child: Option<&str>) -> Result<(), OwnerError> {
    let Some(owner) = owner.filter(|ns| !ns.is_empty()) else {
        return Ok(());
    };
    match child.filter(|ns| !ns.is_empty()) {
        None => Err(OwnerError::ClusterScopedChild {
            owner_namespace: owner.to_string(),
        }),
        Some(child) if child != owner => Err(OwnerError::CrossNamespace {
            owner_namespace: owner.to_string(),
            child_namespace: child.to_string(),
        }),
        Some(_) => Ok(()),
    }
}

/// Whether two references name the same object: same API group (not version), kind and name.
fn same_owner(a: &OwnerReference, b: &OwnerReference) -> bool {
    group_of(&a.api_version) == group_of(&b.api_version) && a.kind == b.kind && a.name == b.name
}

/// `apps` of `apps/v1`; `""` (the core group) of `v1`.
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

/// The reference naming the object's controller (the one with `controller: true`), if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// What [`create_or_update`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The object did not exist; it was created.
    Created,
    /// The object existed and the mutation changed it; it was replaced.
    Updated,
    /// The object existed and already looked as the mutation wanted; nothing was written.
    Unchanged,
}

/// Why [`create_or_update`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateOrUpdateError<E> {
    /// A request failed. A 409 Conflict on the update means the object changed between the read
    /// and the write ([`is_conflict`](Self::is_conflict)); a 409 AlreadyExists on the create means
    /// someone created it meanwhile. Either way, run again (usually: return the error so the key is
    /// retried) rather than loop here.
    #[error(transparent)]
    Api(#[from] Error),
    /// The mutate closure returned an error; nothing was written. (Its error is in the message
    /// and here, not behind `source()`: so any `E` that prints will do, a
    /// `Box<dyn Error + Send + Sync>` too, and this type stays an error that `?` turns into
    /// `Box<dyn Error + Send + Sync>` or `anyhow::Error`.)
    #[error("the mutate function failed: {0}")]
    Mutate(E),
    /// The mutate closure changed the object's name or namespace, which identify it; nothing was
    /// written.
    #[error("the mutate function changed metadata.{field} from {before:?} to {after:?}")]
    IdentityChanged {
        /// `"name"` or `"namespace"`.
        field: &'static str,
        before: Option<String>,
        after: Option<String>,
    },
    /// The object could not be converted to or from JSON (to compare it, or to start a new one).
    #[error("could not encode the object: {0}")]
    Encode(#[source] serde_json::Error),
}

impl<E> CreateOrUpdateError<E> {
    /// True for a 409 Conflict: the object changed between the read and the write.
    pub fn is_conflict(&self) -> bool {
        matches!(self, CreateOrUpdateError::Api(e) if e.is_conflict())
    }
}

/// Makes the object `name` look as `mutate` says, writing only if needed; controller-runtime's
/// `CreateOrUpdate`.
///
/// ```text
///  GET name ──404──▶ K::default() + name + the Api's namespace ─▶ mutate ─▶ POST      ⇒ Created
///      │
///      └─found─▶ copy ─▶ mutate(copy) ─▶ copy == found (as JSON)?  ─yes─▶ no write  ⇒ Unchanged
///                                                                  └no──▶ PUT copy  ⇒ Updated
///                                                      (with the resourceVersion read: 409 if
///                                                       the object changed since the GET)
/// ```
///
/// - `mutate` sets the fields the caller manages (e.g. `data`, labels, an owner reference with
///   [`set_controller_reference`]) and leaves the rest as it found it; it is called once. It must
///   not change the name or namespace ([`CreateOrUpdateError::IdentityChanged`]). A change it
///   makes to `metadata.resourceVersion` is ignored: the update always carries the version read.
/// - The comparison is of the two objects as JSON values, so a field the server fills in (a
///   default) that `mutate` overwrites with its own value counts as a change every time: set what
///   the server would, or leave such fields alone.
/// - A new object starts from `K::default()`; its `apiVersion` and `kind` are set from the `Api`'s
///   resource when the type does not write them itself (a `DynamicObject`).
/// - A conflict (the object changed between the GET and the PUT) is returned, not retried: the
///   caller's next reconcile reads the newer object. Likewise AlreadyExists on the create.
///
/// Returns the object as the server answered it (or as read, when unchanged) and what happened.
/// `api` must be in the object's namespace (`Api::namespaced`) for a namespaced kind.
pub async fn create_or_update<K, E, F>(
    api: &Api<K>,
    name: &str,
    mut mutate: F,
) -> Result<(K, Outcome), CreateOrUpdateError<E>>
where
    K: Object + Default,
    F: FnMut(&mut K) -> Result<(), E>,
{
    let Some(current) = api.get_opt(name).await? else {
        let mut object = new_object::<K>(api, name).map_err(CreateOrUpdateError::Encode)?;
        let (name_before, namespace_before) = identity(&object);
        mutate(&mut object).map_err(CreateOrUpdateError::Mutate)?;
        check_identity(&object, name_before, namespace_before)?;
        let created = api.create(&PostParams::default(), &object).await?;
        tracing::debug!(name, namespace = ?api.namespace(), kind = %api.resource().kind, "created");
        return Ok((created, Outcome::Created));
    };
    let mut wanted = current.clone();
    let (name_before, namespace_before) = identity(&current);
    mutate(&mut wanted).map_err(CreateOrUpdateError::Mutate)?;
    check_identity(&wanted, name_before, namespace_before)?;
    wanted.meta_mut().resource_version = current.meta().resource_version.clone();
    let before = serde_json::to_value(&current).map_err(CreateOrUpdateError::Encode)?;
    let after = serde_json::to_value(&wanted).map_err(CreateOrUpdateError::Encode)?;
    if before == after {
        return Ok((current, Outcome::Unchanged));
    }
    let updated = api.replace(name, &PostParams::default(), &wanted).await?;
    tracing::debug!(name, namespace = ?api.namespace(), kind = %api.resource().kind, "updated");
    Ok((updated, Outcome::Updated))
}

/// `K::default()` named `name` in the Api's namespace, with apiVersion and kind filled in if the
/// type leaves them out.
fn new_object<K: Object + Default>(api: &Api<K>, name: &str) -> Result<K, serde_json::Error> {
    let mut object = K::default();
    object.meta_mut().name = Some(name.to_string());
    if api.resource().namespaced {
        object.meta_mut().namespace = api.namespace().map(str::to_string);
    }
    let mut value = serde_json::to_value(&object)?;
    if let Some(map) = value.as_object_mut() {
        let resource = api.resource();
        let missing =
            |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).is_none_or(str::is_empty);
        if missing(map.get("apiVersion")) {
            map.insert("apiVersion".into(), resource.api_version().into());
        }
        if missing(map.get("kind")) {
            map.insert("kind".into(), resource.kind.clone().into());
        }
    }
    serde_json::from_value(value)
}

fn identity<K: Object>(object: &K) -> (Option<String>, Option<String>) {
    let meta = object.meta();
    (meta.name.clone(), meta.namespace.clone())
}

fn check_identity<K: Object, E>(
    object: &K,
    name: Option<String>,
    namespace: Option<String>,
) -> Result<(), CreateOrUpdateError<E>> {
    let meta = object.meta();
    if meta.name != name {
        return Err(CreateOrUpdateError::IdentityChanged {
            field: "name",
            before: name,
            after: meta.name.clone(),
        });
    }
    if meta.namespace != namespace {
        return Err(CreateOrUpdateError::IdentityChanged {
            field: "namespace",
            before: namespace,
            after: meta.namespace.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    fn owned_by_rs(name: &str, uid: &str, namespace: &str) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(uid.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            ..ReplicaSet::default()
        }
    }

    fn child(namespace: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("child".into()),
            namespace: namespace.map(str::to_string),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn controller_owner_controller_reference_comes_from_the_type_and_metadata() {
        let rs = owned_by_rs("web", "u1", "default");
        let reference = controller_reference(&rs);
        assert_eq!(
            reference,
            OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "web".into(),
                uid: "u1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }
        );
    }

    #[test]
    fn controller_owner_set_controller_reference_appends_and_keeps_other_references() {
        let mut meta = child(Some("default"));
        let other = OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "cfg".into(),
            uid: "c1".into(),
            controller: None,
            block_owner_deletion: None,
        };
        meta.owner_references = Some(vec![other.clone()]);
        let rs = owned_by_rs("web", "u1", "default");
        set_controller_reference(&rs, &mut meta).expect("settable");
        let references = meta.owner_references.clone().unwrap_or_default();
        assert_eq!(references.len(), 2);
        assert_eq!(references[0], other);
        assert_eq!(controller_of(&meta).map(|r| r.uid.as_str()), Some("u1"));
    }

    #[test]
    fn controller_owner_the_same_owner_is_updated_in_place() {
        let mut meta = child(Some("default"));
        set_controller_reference(&owned_by_rs("web", "old-uid", "default"), &mut meta)
            .expect("first");
        // Re-created under the same name: same group, kind and name, a new uid.
        set_controller_reference(&owned_by_rs("web", "new-uid", "default"), &mut meta)
            .expect("same owner again");
        let references = meta.owner_references.clone().unwrap_or_default();
        assert_eq!(references.len(), 1);
        assert_eq!(references[0].uid, "new-uid");
    }

    #[test]
    fn controller_owner_another_controller_is_refused() {
        let mut meta = child(Some("default"));
        set_controller_reference(&owned_by_rs("web", "u1", "default"), &mut meta).expect("first");
        let before = meta.clone();
        let error = set_controller_reference(&owned_by_rs("api", "u2", "default"), &mut meta)
            .expect_err("another controller");
        assert_eq!(
            error,
            OwnerError::AlreadyOwned {
                kind: "ReplicaSet".into(),
                name: "web".into()
            }
        );
        assert_eq!(meta, before, "nothing changes on error");
        // A different kind with the same name is a different owner too.
        let deployment = Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("d1".into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            ..Deployment::default()
        };
        assert!(matches!(
            set_controller_reference(&deployment, &mut meta),
            Err(OwnerError::AlreadyOwned { .. })
        ));
    }

    #[test]
    fn controller_owner_namespaces_must_agree() {
        let rs = owned_by_rs("web", "u1", "a");
        assert_eq!(
            set_controller_reference(&rs, &mut child(Some("b"))),
            Err(OwnerError::CrossNamespace {
                owner_namespace: "a".into(),
                child_namespace: "b".into()
            })
        );
        assert_eq!(
            set_controller_reference(&rs, &mut child(None)),
            Err(OwnerError::ClusterScopedChild {
                owner_namespace: "a".into()
            })
        );
        // A cluster-scoped owner may own a namespaced child.
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("team".into()),
                uid: Some("n1".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let mut meta = child(Some("b"));
        set_controller_reference(&namespace, &mut meta).expect("cluster-scoped owner");
        assert_eq!(
            controller_of(&meta).map(|r| r.kind.as_str()),
            Some("Namespace")
        );
    }

    #[test]
    fn controller_owner_an_owner_without_uid_or_name_is_refused() {
        let mut no_uid = owned_by_rs("web", "", "default");
        no_uid.metadata.uid = None;
        assert_eq!(
            set_controller_reference(&no_uid, &mut child(Some("default"))),
            Err(OwnerError::IncompleteOwner {
                missing: "metadata.uid"
            })
        );
        let no_name = owned_by_rs("", "u1", "default");
        assert_eq!(
            set_controller_reference(&no_name, &mut child(Some("default"))),
            Err(OwnerError::IncompleteOwner {
                missing: "metadata.name"
            })
        );
    }

    #[test]
    fn controller_owner_controller_of_ignores_plain_owners() {
        let mut meta = child(None);
        assert!(controller_of(&meta).is_none());
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "cfg".into(),
            uid: "c1".into(),
            controller: Some(false),
            block_owner_deletion: None,
        }]);
        assert!(controller_of(&meta).is_none());
    }

    #[test]
    fn controller_owner_identity_changes_are_detected() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let mut renamed = cm.clone();
        renamed.metadata.name = Some("b".into());
        let (name, namespace) = identity(&cm);
        let error = check_identity::<_, std::convert::Infallible>(
            &renamed,
            name.clone(),
            namespace.clone(),
        )
        .expect_err("renamed");
        assert!(matches!(
            error,
            CreateOrUpdateError::IdentityChanged { field: "name", .. }
        ));
        let mut moved = cm.clone();
        moved.metadata.namespace = None;
        assert!(matches!(
            check_identity::<_, std::convert::Infallible>(&moved, name.clone(), namespace.clone()),
            Err(CreateOrUpdateError::IdentityChanged {
                field: "namespace",
                ..
            })
        ));
        assert!(check_identity::<_, std::convert::Infallible>(&cm, name, namespace).is_ok());
    }
}
