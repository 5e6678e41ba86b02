//! What the controller asks of a pod: is it active, ready, available.
//!
//! The same predicates as Kubernetes' `podutil` and `controller` packages, in one place, because the
//! sync, the status and the deletion ranking all need them and must agree.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Counts toward `replicas`: not terminating, and not finished (phase Succeeded or Failed).
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Being deleted and not finished: counted in `status.terminatingReplicas`.
pub fn is_terminating(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_some() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// The `Ready` condition's transition time, if the condition is `True`.
pub fn ready_since(pod: &Pod) -> Option<Option<&Time>> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    (ready.status == "True").then_some(ready.last_transition_time.as_ref())
}

pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Ready for at least `min_ready_seconds` at `now` (with 0, ready is enough).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(since)) => since
            .0
            .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
            .is_ok_and(|due| due < now),
    }
}
