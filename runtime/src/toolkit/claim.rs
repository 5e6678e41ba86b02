//! # Claiming children: adopt orphans, release strays
//!
//! A controller that selects its children by labels (a ReplicaSet's `spec.selector`) and marks them
//! with a controller reference ([`owner`](super::owner)) must keep the two in agreement, because
//! either can change on its own: someone relabels a pod, edits the selector, or deletes a
//! ReplicaSet with `--cascade=orphan` and creates another that selects the same pods. Before it
//! counts its children, the controller *claims* them: from the candidates in its namespace (usually
//! all of them, read from an informer's cache) it keeps those that are its own and match, and fixes
//! the rest:
//!
//! | candidate's controller | matches the selector | what happens | kept? |
//! |---|---|---|---|
//! | this owner (same uid) | yes | nothing | yes |
//! | this owner | no | **release**: our reference is removed (not while the owner is being deleted) | no |
//! | another owner | either | nothing: it is not ours | no |
//! | none (an orphan) | yes | **adopt**: our controller reference is added, unless the owner or the orphan is being deleted or it is in another namespace | yes, if adopted |
//! | none | no | nothing | no |
//!
//! Adoption trusts the owner's cached copy only after a **recheck**: before the first adoption of a
//! claim, the owner is read again from the server, and adoption is refused
//! ([`ClaimError::CannotAdopt`]) if it is gone, was replaced by a new object of the same name (another
//! uid), or is being deleted: adopting for a dead owner would hand the orphans to the garbage
//! collector. The read happens at most once per [`Claimer::claim`] call, and only if an orphan is
//! to be adopted.
//!
//! Adopt and release are patches that carry the child's `metadata.uid`, so a child deleted and
//! re-created under the same name meanwhile is not claimed by mistake (the server refuses a patch
//! whose uid differs). Two styles ([`PatchStyle`]):
//!
//! ```text
//!  Strategic (built-in kinds; what kube-controller-manager sends):
//!    adopt   {"metadata":{"ownerReferences":[<controller reference>],"uid":"<child uid>"}}
//!    release {"metadata":{"ownerReferences":[{"$patch":"delete","uid":"<owner uid>"}],"uid":"<child uid>"}}
//!  Json (custom resources, which refuse strategic merge patches):
//!    [{"op":"test","path":"/metadata/uid","value":"<child uid>"},
//!     {"op":"test","path":"/metadata/resourceVersion","value":"<as read>"},
//!     {"op":"add","path":"/metadata/ownerReferences","value":[<the new list>]}]   (or "remove" if empty)
//! ```
//!
//! A JSON *merge* patch is not offered: it replaces the whole `ownerReferences` list, and without a
//! guard would drop references written meanwhile by others. The JSON patch rewrites the list too,
//! but only if the object is still at the resourceVersion the list was computed from.
//!
//! Errors of individual adoptions and releases do not stop the claim: every candidate is processed,
//! then the first error is returned (the controller retries the key). A child that is gone
//! (NotFound) is skipped silently; so is a release refused as Invalid (the reference was already
//! gone, or the uid or resourceVersion changed: the child's own update event brings the owner back).
//!
//! This is `ControllerRefManager.ClaimObject` of Kubernetes' `pkg/controller/controller_ref_manager.go`,
//! generalised from the sample ReplicaSet controller's `claim`.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

use super::owner::controller_of;
use ferrokube_client::api::{Api, DynamicObject, Patch, PatchParams};
use ferrokube_client::error::Error;
use ferrokube_core::ApiResource;
use ferrokube_core::{LabelSelector, Object, ObjectKey};

/// How adopt and release patches are written. Default: [`PatchStyle::Strategic`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PatchStyle {
    /// Strategic merge patches, as kube-controller-manager sends them; for built-in kinds.
    #[default]
    Strategic,
    /// JSON patches guarded by `test`s of the uid and resourceVersion; for custom resources (and
    /// anything else).
    Json,
}

/// Why a claim, or building a [`Claimer`], failed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The recheck before adopting found the owner gone, replaced (another uid) or being deleted,
    /// or could not read it. No orphan was adopted in this claim.
    #[error("cannot adopt objects for {owner}: {reason}")]
    CannotAdopt {
        /// The owner's key (`namespace/name`).
        owner: String,
        reason: String,
    },
    /// Adopting `child` failed.
    #[error("adopting {child}: {source}")]
    Adopt {
        /// The child's key (`namespace/name`).
        child: String,
        #[source]
        source: Error,
    },
    /// Releasing `child` failed.
    #[error("releasing {child}: {source}")]
    Release {
        /// The child's key (`namespace/name`).
        child: String,
        #[source]
        source: Error,
    },
    /// The owner has no `metadata.name` or `metadata.uid` (not read from the server).
    #[error("the owner has no metadata.{missing}")]
    IncompleteOwner {
        /// `"name"` or `"uid"`.
        missing: &'static str,
    },
    /// The owner's `Api` serves another namespace than the owner's.
    #[error("the owner's Api serves namespace {api:?} but the owner is in {owner:?}")]
    WrongNamespace {
        api: Option<String>,
        owner: Option<String>,
    },
}

impl ClaimError {
    /// The API error behind an adopt or release failure.
    pub fn api_error(&self) -> Option<&Error> {
        match self {
            ClaimError::Adopt { source, .. } | ClaimError::Release { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Claims children for one owner, for one reconcile: see the [module docs](self).
///
/// ```no_run
/// # use std::sync::Arc;
/// # use ferrokube_runtime::controller::claim::Claimer;
/// # use ferrokube_core::LabelSelector;
/// # use ferrokube_client::{Api, Client};
/// # use k8s_openapi::api::apps::v1::ReplicaSet;
/// # use k8s_openapi::api::core::v1::Pod;
/// # async fn demo(client: Client, rs: Arc<ReplicaSet>, candidates: Vec<Arc<Pod>>) -> Result<(), Box<dyn std::error::Error>> {
/// let namespace = rs.metadata.namespace.clone().unwrap_or_default();
/// let selector = LabelSelector::from_spec(&rs.spec.selector)?;
/// let claimer = Claimer::new(Api::<ReplicaSet>::namespaced(client, &namespace), rs, selector)?;
/// let mine: Vec<Arc<Pod>> = claimer.claim(candidates).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Claimer<O> {
    owner: Arc<O>,
    owner_api: Api<O>,
    selector: LabelSelector,
    reference: OwnerReference,
    style: PatchStyle,
}

impl<O: Object> Claimer<O> {
    /// A claimer for `owner` (as cached), selecting children with `selector` (the owner's own,
    /// usually [`LabelSelector::from_spec`] of its `spec.selector`). `owner_api` serves the owner's
    /// kind in its namespace: the recheck reads the owner through it, and the controller reference
    /// takes its apiVersion and kind from `owner_api.resource()` (so dynamic owners work too). Its
    /// client writes the children, so an `owner_api` from the reconcile context
    /// ([`Context::api_for_object`](crate::controller::Context::api_for_object)) records every
    /// adoption and release in the controller's consistency store. Refuses an owner without name or uid, and an `owner_api` for
    /// another namespace. Patches are [`PatchStyle::Strategic`] unless [`patch_style`](Self::patch_style)
    /// says otherwise.
    pub fn new(
        owner_api: Api<O>,
        owner: Arc<O>,
        selector: LabelSelector,
    ) -> Result<Claimer<O>, ClaimError> {
        let meta = owner.meta();
        let name = meta.name.clone().filter(|n| !n.is_empty());
        let name = name.ok_or(ClaimError::IncompleteOwner { missing: "name" })?;
        let uid = meta.uid.clone().filter(|u| !u.is_empty());
        let uid = uid.ok_or(ClaimError::IncompleteOwner { missing: "uid" })?;
        let owner_namespace = meta.namespace.as_deref().filter(|ns| !ns.is_empty());
        if owner_api.resource().namespaced && owner_api.namespace() != owner_namespace {
            return Err(ClaimError::WrongNamespace {
                api: owner_api.namespace().map(str::to_string),
                owner: owner_namespace.map(str::to_string),
            });
        }
        let resource = owner_api.resource();
        let reference = OwnerReference {
            api_version: resource.api_version(),
            kind: resource.kind.clone(),
            name,
            uid,
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        Ok(Claimer {
            owner,
            owner_api,
            selector,
            reference,
            style: PatchStyle::default(),
        })
    }

    /// Writes adopt and release patches in `style` (default [`PatchStyle::Strategic`]).
    pub fn patch_style(mut self, style: PatchStyle) -> Claimer<O> {
        self.style = style;
        self
    }

    /// The owner, as given.
    pub fn owner(&self) -> &Arc<O> {
        &self.owner
    }

    /// The controller reference adoption adds.
    pub fn controller_reference(&self) -> &OwnerReference {
        &self.reference
    }

    /// Claims `children` of a k8s-openapi kind (or any type with its `Resource` constants): returns
    /// the ones that are this owner's after adopting and releasing (see the [module docs](self)),
    /// in their input order. Each child is patched in its own namespace, through the owner's
    /// client. Sequential: one request at a time.
    pub async fn claim<C>(&self, children: Vec<Arc<C>>) -> Result<Vec<Arc<C>>, ClaimError>
    where
        C: Object + k8s_openapi::Resource,
    {
        let client = self.owner_api.client().clone();
        self.claim_with(children, |namespace| match namespace {
            Some(ns) => Api::<C>::all(client.clone()).in_namespace(ns),
            None => Api::<C>::all(client.clone()),
        })
        .await
    }

    /// [`claim`](Self::claim) for children known only at run time, of kind `resource`. Custom
    /// resources refuse strategic merge patches: use [`PatchStyle::Json`] for them.
    pub async fn claim_dynamic(
        &self,
        resource: &ApiResource,
        children: Vec<Arc<DynamicObject>>,
    ) -> Result<Vec<Arc<DynamicObject>>, ClaimError> {
        let client = self.owner_api.client().clone();
        self.claim_with(children, |namespace| {
            Api::dynamic(client.clone(), resource.clone(), namespace)
        })
        .await
    }

    async fn claim_with<C: Object>(
        &self,
        children: Vec<Arc<C>>,
        api_for: impl Fn(Option<&str>) -> Api<C>,
    ) -> Result<Vec<Arc<C>>, ClaimError> {
        let owner_meta = self.owner.meta();
        let owner_deleting = owner_meta.deletion_timestamp.is_some();
        let owner_namespace = owner_meta.namespace.as_deref().filter(|ns| !ns.is_empty());
        let mut claimed = Vec::with_capacity(children.len());
        let mut first_error: Option<ClaimError> = None;
        // The recheck's verdict, once made: Ok, or why adoption is refused.
        let mut may_adopt: Option<Result<(), String>> = None;
        for child in children {
            let meta = child.meta();
            let matches = self.selector.matches(meta.labels.as_ref());
            let child_namespace = meta.namespace.as_deref().filter(|ns| !ns.is_empty());
            match controller_of(meta) {
                Some(controller) if controller.uid != self.reference.uid => {}
                Some(_) if matches => claimed.push(child),
                Some(_) if owner_deleting => {}
                Some(_) => match self.release(&api_for(child_namespace), &child).await {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() || e.is_invalid() => {
                        tracing::debug!(child = %ObjectKey::of(&*child), error = %e, "nothing to release");
                    }
                    Err(source) => {
                        first_error.get_or_insert(ClaimError::Release {
                            child: ObjectKey::of(&*child).to_string(),
                            source,
                        });
                    }
                },
                None if owner_deleting || !matches || meta.deletion_timestamp.is_some() => {}
                None if owner_namespace.is_some() && owner_namespace != child_namespace => {}
                None => {
                    if may_adopt.is_none() {
                        may_adopt = Some(self.recheck_owner().await);
                    }
                    if let Some(Err(reason)) = &may_adopt {
                        first_error.get_or_insert(ClaimError::CannotAdopt {
                            owner: ObjectKey::of(&*self.owner).to_string(),
                            reason: reason.clone(),
                        });
                        continue;
                    }
                    match self.adopt(&api_for(child_namespace), &child).await {
                        Ok(()) => claimed.push(child),
                        Err(e) if e.is_not_found() => {
                            tracing::debug!(child = %ObjectKey::of(&*child), "orphan gone before adoption");
                        }
                        Err(source) => {
                            first_error.get_or_insert(ClaimError::Adopt {
                                child: ObjectKey::of(&*child).to_string(),
                                source,
                            });
                        }
                    }
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(claimed),
        }
    }

    /// Reads the owner from the server: it must still be the same object (uid) and not be deleted.
    async fn recheck_owner(&self) -> Result<(), String> {
        let fresh = self
            .owner_api
            .get(&self.reference.name)
            .await
            .map_err(|e| e.to_string())?;
        let fresh_uid = fresh.meta().uid.as_deref().unwrap_or_default();
        if fresh_uid != self.reference.uid {
            return Err(format!(
                "the original is gone: got uid {fresh_uid}, wanted {}",
                self.reference.uid
            ));
        }
        if fresh.meta().deletion_timestamp.is_some() {
            return Err(format!(
                "{} has just been deleted at {:?}",
                ObjectKey::of(&fresh),
                fresh.meta().deletion_timestamp
            ));
        }
        Ok(())
    }

    async fn adopt<C: Object>(&self, api: &Api<C>, child: &C) -> Result<(), Error> {
        let patch = adopt_patch(self.style, &self.reference, child);
        send(api, child, &patch).await?;
        tracing::debug!(owner = %ObjectKey::of(&*self.owner), child = %ObjectKey::of(child), "adopted");
        Ok(())
    }

    async fn release<C: Object>(&self, api: &Api<C>, child: &C) -> Result<(), Error> {
        let patch = release_patch(self.style, &self.reference, child);
        send(api, child, &patch).await?;
        tracing::debug!(owner = %ObjectKey::of(&*self.owner), child = %ObjectKey::of(child), "released");
        Ok(())
    }
}

/// The patch that makes `reference` the controller of `child`.
fn adopt_patch<C: Object>(
    style: PatchStyle,
    reference: &OwnerReference,
    child: &C,
) -> Patch<Value> {
    match style {
        PatchStyle::Strategic => Patch::Strategic(json!({"metadata": {
            "ownerReferences": [reference],
            "uid": child.meta().uid,
        }})),
        PatchStyle::Json => {
            let mut references = child.meta().owner_references.clone().unwrap_or_default();
            references.push(reference.clone());
            Patch::Json(json_patch(child, Some(&references)))
        }
    }
}

/// The patch that removes `reference`'s owner (by uid) from `child`'s owner references.
fn release_patch<C: Object>(
    style: PatchStyle,
    reference: &OwnerReference,
    child: &C,
) -> Patch<Value> {
    match style {
        PatchStyle::Strategic => Patch::Strategic(json!({"metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": reference.uid}],
            "uid": child.meta().uid,
        }})),
        PatchStyle::Json => {
            let mut references = child.meta().owner_references.clone().unwrap_or_default();
            references.retain(|r| r.uid != reference.uid);
            let remaining = Some(&references).filter(|list| !list.is_empty());
            Patch::Json(json_patch(child, remaining))
        }
    }
}

/// The guarded JSON patch that sets the child's ownerReferences to `references` (`None`: removes
/// the field).
fn json_patch<C: Object>(child: &C, references: Option<&Vec<OwnerReference>>) -> Value {
    let meta = child.meta();
    let write = match references {
        Some(list) => json!({"op": "add", "path": "/metadata/ownerReferences", "value": list}),
        None => json!({"op": "remove", "path": "/metadata/ownerReferences"}),
    };
    json!([
        {"op": "test", "path": "/metadata/uid", "value": meta.uid.as_deref().unwrap_or_default()},
        {"op": "test", "path": "/metadata/resourceVersion",
         "value": meta.resource_version.as_deref().unwrap_or_default()},
        write,
    ])
}

/// Sends `patch` to `child` (recorded by `api`'s write observers, if it has any).
async fn send<C: Object>(api: &Api<C>, child: &C, patch: &Patch<Value>) -> Result<(), Error> {
    let name = child.meta().name.as_deref().unwrap_or_default();
    api.patch(name, &PatchParams::default(), patch).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn reference(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn child(references: Option<Vec<OwnerReference>>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                uid: Some("child-uid".into()),
                resource_version: Some("7".into()),
                owner_references: references,
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn controller_claim_json_patches_test_uid_and_resource_version() {
        let list = vec![reference("u1")];
        assert_eq!(
            json_patch(&child(None), Some(&list)),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "child-uid"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/ownerReferences", "value": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1",
                    "controller": true, "blockOwnerDeletion": true,
                }]},
            ])
        );
        assert_eq!(
            json_patch(&child(Some(list)), None)[2],
            json!({"op": "remove", "path": "/metadata/ownerReferences"})
        );
    }

    fn body(patch: Patch<Value>) -> (&'static str, String) {
        let kind = match &patch {
            Patch::Strategic(_) => "strategic",
            Patch::Json(_) => "json",
            _ => "other",
        };
        let text = match patch {
            Patch::Strategic(v) | Patch::Json(v) | Patch::Merge(v) | Patch::Apply(v) => {
                v.to_string()
            }
        };
        (kind, text)
    }

    #[test]
    fn controller_claim_strategic_bodies_match_the_sample_controller() {
        // Byte for byte what kube-controller-manager's PodControl (and the sample's) sends.
        let owner = reference("u1");
        assert_eq!(
            body(adopt_patch(PatchStyle::Strategic, &owner, &child(None))),
            (
                "strategic",
                r#"{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","blockOwnerDeletion":true,"controller":true,"kind":"ReplicaSet","name":"web","uid":"u1"}],"uid":"child-uid"}}"#
                    .to_string()
            )
        );
        assert_eq!(
            body(release_patch(PatchStyle::Strategic, &owner, &child(Some(vec![owner.clone()])))),
            (
                "strategic",
                r#"{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"u1"}],"uid":"child-uid"}}"#
                    .to_string()
            )
        );
    }

    #[test]
    fn controller_claim_json_style_keeps_other_references() {
        let mut other = reference("other");
        other.kind = "ConfigMap".into();
        other.controller = None;
        let (kind, adopt) = body(adopt_patch(
            PatchStyle::Json,
            &reference("u1"),
            &child(Some(vec![other.clone()])),
        ));
        assert_eq!(kind, "json");
        let adopt: Value = serde_json::from_str(&adopt).expect("json");
        assert_eq!(adopt[2]["value"], json!([other, reference("u1")]));
        let (_, release) = body(release_patch(
            PatchStyle::Json,
            &reference("u1"),
            &child(Some(vec![other.clone(), reference("u1")])),
        ));
        let release: Value = serde_json::from_str(&release).expect("json");
        assert_eq!(
            release[2],
            json!({"op": "add", "path": "/metadata/ownerReferences", "value": [other]})
        );
    }

    #[test]
    fn controller_claim_patch_style_defaults_to_strategic() {
        assert_eq!(PatchStyle::default(), PatchStyle::Strategic);
    }
}
