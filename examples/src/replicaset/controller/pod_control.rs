//! The controller's writes to pods: create from the template, and delete.
//!
//! Each is one API request. Creates and deletes record an event on the ReplicaSet, as upstream's
//! `PodControl` does (`SuccessfulCreate` / `FailedCreate`, `SuccessfulDelete` / `FailedDelete`).
//! Adopting and releasing pods is the library's ([`ferrokube::controller::claim`]).

use ferrokube::Error;
use ferrokube::api::{DeleteParams, PostParams};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::SyncError;
use ferrokube::controller::{Context, EventRecorder, EventType, owner};

/// Writes pods on behalf of ReplicaSets, through the reconcile's [`Context`] (so each write is
/// recorded for the ReplicaSet's key). Cheap to clone.
#[derive(Clone)]
pub struct PodControl {
    events: EventRecorder,
}

impl PodControl {
    pub fn new(events: EventRecorder) -> PodControl {
        PodControl { events }
    }

    /// Creates one pod from `rs`'s template, controlled by `rs` (and, sharded, labelled for this
    /// member, so it lands in its cache and moves with its ReplicaSet).
    pub async fn create(&self, ctx: &Context, rs: &ReplicaSet) -> Result<(), SyncError> {
        let mut pod = pod_from_template(rs)?;
        ctx.mark_child(&mut pod.metadata);
        match ctx
            .api_in_primary_namespace::<Pod>()
            .create(&PostParams::default(), &pod)
            .await
        {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or_default();
                tracing::debug!(rs = ?rs.metadata.name, pod = name, "created pod");
                let message = format!("Created pod: {name}");
                self.events
                    .record(ctx, rs, EventType::Normal, "SuccessfulCreate", message);
                Ok(())
            }
            Err(error) => {
                let message = format!("Error creating: {error}");
                self.events
                    .record(ctx, rs, EventType::Warning, "FailedCreate", message);
                Err(error.into())
            }
        }
    }

    /// Deletes pod `name` of `rs` (gracefully: the pod's own grace period).
    pub async fn delete(&self, ctx: &Context, rs: &ReplicaSet, name: &str) -> Result<(), Error> {
        match ctx
            .api_in_primary_namespace::<Pod>()
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                let message = format!("Deleted pod: {name}");
                self.events
                    .record(ctx, rs, EventType::Normal, "SuccessfulDelete", message);
                Ok(())
            }
            Err(error) if error.is_not_found() => Err(error),
            Err(error) => {
                let message = format!("Error deleting: {error}");
                self.events
                    .record(ctx, rs, EventType::Warning, "FailedDelete", message);
                Err(error)
            }
        }
    }
}

/// The pod `rs`'s template describes: its labels, annotations, finalizers and spec, named
/// `<rs>-<random>`, controlled by `rs`.
fn pod_from_template(rs: &ReplicaSet) -> Result<Pod, SyncError> {
    let name = rs.metadata.name.as_deref().unwrap_or_default();
    let template = rs.spec.template.as_ref();
    let meta = template
        .and_then(|t| t.metadata.clone())
        .unwrap_or_default();
    if meta.labels.as_ref().is_none_or(|labels| labels.is_empty()) {
        return Err(SyncError::TemplateWithoutLabels {
            key: format!(
                "{}/{name}",
                rs.metadata.namespace.as_deref().unwrap_or_default()
            ),
        });
    }
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(pod_name_prefix(name)),
            namespace: rs.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner::controller_reference(rs)]),
            ..ObjectMeta::default()
        },
        spec: template.and_then(|t| t.spec.clone()),
        status: None,
    })
}

/// `<name>-`, unless that is not a valid name prefix (too long), then `<name>` (upstream's rule).
fn pod_name_prefix(name: &str) -> String {
    // generateName gets 5 random characters; a pod name is a DNS subdomain (at most 253).
    if name.len() + 1 + 5 <= 253 {
        format!("{name}-")
    } else {
        name.to_string()
    }
}
