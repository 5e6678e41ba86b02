//! The controller's writes to pods: create from the template, and delete.
//!
//! Each is one API request. Creates and deletes record an event on the ReplicaSet, as upstream's
//! `PodControl` does (`SuccessfulCreate` / `FailedCreate`, `SuccessfulDelete` / `FailedDelete`).
//! Adopting and releasing pods is the library's ([`ferrokube::controller::claim`]).

use ferrokube::api::{DeleteParams, PostParams};
use ferrokube::shard::ShardMember;
use ferrokube::{Api, Client, Error};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::SyncError;
use ferrokube::controller::{EventRecorder, EventType, Writes, owner};

/// Writes pods on behalf of ReplicaSets. Cheap to clone.
#[derive(Clone)]
pub struct PodControl {
    client: Client,
    events: EventRecorder,
    /// Sharded: the member whose label new pods carry (so they land in its cache and move with
    /// their ReplicaSet).
    member: Option<ShardMember>,
}

impl PodControl {
    pub fn new(client: Client, events: EventRecorder, member: Option<ShardMember>) -> PodControl {
        PodControl {
            client,
            events,
            member,
        }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Creates one pod from `rs`'s template, controlled by `rs`; recorded in `writes`.
    pub async fn create(&self, writes: &Writes, rs: &ReplicaSet) -> Result<(), SyncError> {
        let mut pod = pod_from_template(rs)?;
        if let Some(member) = &self.member {
            member.mark(&mut pod.metadata);
        }
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        match writes
            .api(self.pods(namespace))
            .create(&PostParams::default(), &pod)
            .await
        {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or_default();
                tracing::debug!(rs = ?rs.metadata.name, pod = name, "created pod");
                let message = format!("Created pod: {name}");
                self.events
                    .record(rs, EventType::Normal, "SuccessfulCreate", message);
                Ok(())
            }
            Err(error) => {
                let message = format!("Error creating: {error}");
                self.events
                    .record(rs, EventType::Warning, "FailedCreate", message);
                Err(error.into())
            }
        }
    }

    /// Deletes pod `name` of `rs` (gracefully: the pod's own grace period); recorded in `writes`.
    pub async fn delete(&self, writes: &Writes, rs: &ReplicaSet, name: &str) -> Result<(), Error> {
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        match writes
            .api(self.pods(namespace))
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                let message = format!("Deleted pod: {name}");
                self.events
                    .record(rs, EventType::Normal, "SuccessfulDelete", message);
                Ok(())
            }
            Err(error) if error.is_not_found() => Err(error),
            Err(error) => {
                let message = format!("Error deleting: {error}");
                self.events
                    .record(rs, EventType::Warning, "FailedDelete", message);
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
