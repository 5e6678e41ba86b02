//! The status a ReplicaSet should report, and writing it only when it changed.
//!
//! Computed from the active pods the sync claimed: `replicas` counts them, `fullyLabeledReplicas` those
//! whose labels include all of the template's labels, `readyReplicas` the ready ones, and
//! `availableReplicas` those ready for at least `minReadySeconds`. `observedGeneration` says which spec
//! the numbers answer. `terminatingReplicas` counts its pods that are being deleted and have not
//! finished (kube-controller-manager writes it since 1.33, by default since 1.35, 0 included; a
//! 1.20 server drops the field, so there every status write sends it again). A `ReplicaFailure` condition appears when creating or deleting pods failed
//! (reason `FailedCreate` / `FailedDelete`, the error as message) and goes away on the next sync
//! that manages replicas without error.
//!
//! The write is a PUT of the whole object to the `status` subresource, carrying the resourceVersion
//! the lister had: if the cache was stale the server answers 409, and the key goes back to the queue
//! (with backoff) to be synced again from a fresher cache, rather than retried here in a loop.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferrokube::Error;
use ferrokube::api::PostParams;
use ferrokube::controller::Context;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::pod::{is_available, is_ready};

/// The condition type reported when pods could not be created or deleted.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// What went wrong managing replicas, for the `ReplicaFailure` condition.
pub struct ManageFailure<'a> {
    /// Active pods minus desired replicas when the sync began: < 0 was creating, > 0 deleting.
    pub diff: i64,
    pub error: &'a super::SyncError,
}

/// The status `rs` should have, given its active claimed `pods` and how many of its pods are
/// terminating.
pub fn calculate(
    rs: &ReplicaSet,
    pods: &[Arc<Pod>],
    terminating: usize,
    failure: Option<ManageFailure<'_>>,
) -> ReplicaSetStatus {
    let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
    let template_labels = rs
        .spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    let now = ferrokube::controller::now();
    let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
    for pod in pods {
        if has_all(pod.metadata.labels.as_ref(), template_labels) {
            fully_labeled += 1;
        }
        if is_ready(pod) {
            ready += 1;
            if is_available(pod, min_ready, now) {
                available += 1;
            }
        }
    }
    let mut status = rs.status.clone().unwrap_or_default();
    let has_failure = condition(&status, REPLICA_FAILURE).is_some();
    match failure {
        Some(failure) if !has_failure => {
            let reason = if failure.diff < 0 {
                "FailedCreate"
            } else {
                "FailedDelete"
            };
            status
                .conditions
                .get_or_insert_default()
                .push(ReplicaSetCondition {
                    type_: Some(REPLICA_FAILURE.into()),
                    status: Some("True".into()),
                    reason: Some(reason.into()),
                    message: Some(failure.error.to_string()),
                    last_transition_time: Some(Time(now)),
                });
        }
        None if has_failure => {
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_.as_deref() != Some(REPLICA_FAILURE));
            }
            if status.conditions.as_ref().is_some_and(|c| c.is_empty()) {
                status.conditions = None;
            }
        }
        _ => {}
    }
    status.replicas = pods.len() as i32;
    // Zero is written as absent, as the API server's Go types do (`omitempty`).
    status.fully_labeled_replicas = nonzero(fully_labeled);
    status.ready_replicas = nonzero(ready);
    status.available_replicas = nonzero(available);
    status.terminating_replicas = Some(i32::try_from(terminating).unwrap_or(i32::MAX));
    status
}

fn nonzero(count: i32) -> Option<i32> {
    (count != 0).then_some(count)
}

/// Whether `labels` include every pair of `wanted`.
fn has_all(
    labels: Option<&BTreeMap<String, String>>,
    wanted: Option<&BTreeMap<String, String>>,
) -> bool {
    wanted.is_none_or(|wanted| {
        wanted
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    })
}

pub fn condition<'a>(status: &'a ReplicaSetStatus, type_: &str) -> Option<&'a ReplicaSetCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(type_))
}

/// Writes `status` (with `observedGeneration` set to the spec's generation) unless `rs` already
/// reports exactly that; the write goes through the reconcile's context, so it is recorded (the
/// next sync waits for the cache to show it, so it never sends this ReplicaSet's old
/// resourceVersion). Returns the ReplicaSet as it now is on the server (or `rs` if unchanged),
/// and whether a write happened.
pub async fn update(
    ctx: &Context,
    rs: &ReplicaSet,
    mut status: ReplicaSetStatus,
) -> Result<(ReplicaSet, bool), Error> {
    let current = rs.status.clone().unwrap_or_default();
    let generation = rs.metadata.generation;
    let unchanged = current.replicas == status.replicas
        && current.fully_labeled_replicas.unwrap_or(0)
            == status.fully_labeled_replicas.unwrap_or(0)
        && current.ready_replicas.unwrap_or(0) == status.ready_replicas.unwrap_or(0)
        && current.available_replicas.unwrap_or(0) == status.available_replicas.unwrap_or(0)
        && current.observed_generation == generation
        && current.conditions.as_deref().unwrap_or_default()
            == status.conditions.as_deref().unwrap_or_default();
    if unchanged {
        return Ok((rs.clone(), false));
    }
    status.observed_generation = generation;
    let mut updated = rs.clone();
    updated.status = Some(status);
    let name = rs.metadata.name.as_deref().unwrap_or_default();
    let written = ctx
        .api_for_object(rs)
        .replace_status(name, &PostParams::default(), &updated)
        .await?;
    Ok((written, true))
}
