//! The leader-election record in a `coordination.k8s.io/v1` Lease, and the three ways a candidate
//! writes it (client-go's `LeaderElectionRecord`, stored in `spec`):
//!
//! | field | acquire | renew | release |
//! |---|---|---|---|
//! | `holderIdentity` | this candidate | this candidate | `""` (nobody) |
//! | `leaseDurationSeconds` | ours, whole seconds | ours | 1 |
//! | `acquireTime` | now (kept if we held it already) | kept | now |
//! | `renewTime` | now | now | now |
//! | `leaseTransitions` | +1 if the holder was not us | kept | kept |
//!
//! The times are written for people and other tools to read: no candidate trusts another
//! machine's clock, so none of them is ever compared with a local time. What followers compare is
//! whether the record *changed* (see `observe`).
//!
//! `preferredHolder` and `strategy` (coordinated leader election) are kept as they are.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

/// The holder named in `lease`, if any (an empty `holderIdentity` means none).
pub(crate) fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.as_deref())
        .filter(|holder| !holder.is_empty())
}

/// `leaseDurationSeconds` for a lease duration: whole seconds (rounded up, at least 1, as the API
/// requires a positive value). client-go truncates; for whole seconds the two agree.
pub(crate) fn lease_seconds(duration: Duration) -> i32 {
    let seconds = duration.as_secs_f64().ceil();
    if seconds >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        // In range and integral: the cast is exact.
        (seconds as i32).max(1)
    }
}

/// The current time as the Lease's fields hold it.
pub(crate) fn now() -> MicroTime {
    MicroTime(ferrokube_core::time::now())
}

/// The spec that makes `identity` the holder, over the `previous` one (`None`: the Lease is new).
pub(crate) fn acquired(
    previous: Option<&LeaseSpec>,
    identity: &str,
    lease_seconds: i32,
    now: MicroTime,
) -> LeaseSpec {
    // client-go starts a new Lease at 0 transitions, and counts one per change of holder after
    // (taking a Lease that has no holder counts too).
    let (acquire_time, transitions, previous) = match previous {
        None => (Some(now.clone()), 0, LeaseSpec::default()),
        Some(previous) => {
            let transitions = previous.lease_transitions.unwrap_or(0);
            if previous.holder_identity.as_deref() == Some(identity) {
                let kept = previous.acquire_time.clone().or_else(|| Some(now.clone()));
                (kept, transitions, previous.clone())
            } else {
                (
                    Some(now.clone()),
                    transitions.saturating_add(1),
                    previous.clone(),
                )
            }
        }
    };
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(lease_seconds),
        acquire_time,
        renew_time: Some(now),
        lease_transitions: Some(transitions),
        ..previous
    }
}

/// The spec of a renewal by its holder `identity`.
pub(crate) fn renewed(
    current: Option<&LeaseSpec>,
    identity: &str,
    lease_seconds: i32,
    now: MicroTime,
) -> LeaseSpec {
    let current = current.cloned().unwrap_or_default();
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(lease_seconds),
        acquire_time: current.acquire_time.clone().or_else(|| Some(now.clone())),
        renew_time: Some(now),
        lease_transitions: Some(current.lease_transitions.unwrap_or(0)),
        ..current
    }
}

/// The spec that hands the lease back: no holder, duration 1 s, times now (client-go's release).
pub(crate) fn released(current: Option<&LeaseSpec>, now: MicroTime) -> LeaseSpec {
    let current = current.cloned().unwrap_or_default();
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        lease_transitions: Some(current.lease_transitions.unwrap_or(0)),
        ..current
    }
}

/// A new Lease `namespace/name` with `spec`.
pub(crate) fn new_lease(namespace: &str, name: &str, spec: LeaseSpec) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("timestamp"))
    }

    #[test]
    fn leader_lease_seconds_round_up_to_a_positive_whole() {
        assert_eq!(lease_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_seconds(Duration::from_millis(1000)), 1);
        assert_eq!(lease_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(lease_seconds(Duration::from_millis(1)), 1);
        assert_eq!(lease_seconds(Duration::MAX), i32::MAX);
    }

    #[test]
    fn leader_record_writes_follow_client_go() {
        let created = acquired(None, "a", 15, at(10));
        assert_eq!(created.holder_identity.as_deref(), Some("a"));
        assert_eq!(created.lease_transitions, Some(0), "a new lease");
        assert_eq!(created.acquire_time, Some(at(10)));

        let renewal = renewed(Some(&created), "a", 15, at(12));
        assert_eq!(renewal.acquire_time, Some(at(10)), "kept");
        assert_eq!(renewal.renew_time, Some(at(12)));
        assert_eq!(renewal.lease_transitions, Some(0));

        let taken = acquired(Some(&renewal), "b", 15, at(30));
        assert_eq!(taken.holder_identity.as_deref(), Some("b"));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.acquire_time, Some(at(30)));

        let again = acquired(Some(&taken), "b", 15, at(31));
        assert_eq!(
            again.lease_transitions,
            Some(1),
            "ours already: no transition"
        );
        assert_eq!(again.acquire_time, Some(at(30)));

        let release = released(Some(&again), at(40));
        assert_eq!(release.holder_identity.as_deref(), Some(""));
        assert_eq!(release.lease_duration_seconds, Some(1));
        assert_eq!(release.lease_transitions, Some(1));
        let lease = new_lease("ns", "lock", release);
        assert_eq!(holder(&lease), None, "an empty holder is no holder");

        let after_release = acquired(lease.spec.as_ref(), "c", 15, at(41));
        assert_eq!(after_release.lease_transitions, Some(2));
    }

    #[test]
    fn leader_record_keeps_coordination_fields() {
        let spec = LeaseSpec {
            strategy: Some("OldestEmulationVersion".into()),
            ..LeaseSpec::default()
        };
        assert_eq!(
            acquired(Some(&spec), "a", 15, at(1)).strategy.as_deref(),
            Some("OldestEmulationVersion")
        );
    }
}
