//! What a follower knows about the Lease, and since when, on its own clock.
//!
//! Every reading of the Lease (a poll's GET, a watch event, the GET after a lost race) goes
//! through [`Observed::update`]. The rule is client-go's: the moment that counts is when *this*
//! candidate first saw the current record, never a time written in the record, so clocks of other
//! machines are never compared with ours. A record that does not change for `lease_duration` after
//! we first saw it is expired; one that changes starts the count again.
//!
//! ```text
//!   reading ──▶ same record (spec) as before? ── yes ──▶ keep seen_at (take the newer resourceVersion)
//!                        │ no
//!                        ▼
//!               seen_at = now
//! ```
//!
//! When the follower may try to take the lease ([`Observed::acquirable_at`]):
//!
//! | what it saw | try at |
//! |---|---|
//! | no Lease, and never one with a holder (a fresh start) | at once (create it, as client-go) |
//! | a Lease with a holder, then none (someone deleted it) | deletion seen + lease duration |
//! | a Lease without holder (released) or held by itself | at once |
//! | a Lease held by another candidate | record seen + lease duration |
//!
//! The deleted case is stricter than client-go (which creates at once): the deleted Lease's
//! holder may still be writing, and a follower that saw it held knows it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;

use super::record;

/// A follower's knowledge of the Lease.
#[derive(Debug, Clone)]
pub(crate) enum Observed {
    /// No Lease of this name exists, as read at `seen_at` or earlier.
    Absent {
        /// When this candidate first saw it missing.
        seen_at: Instant,
        /// A Lease with a holder was seen before this absence, in this campaign.
        after_holder: bool,
    },
    /// The Lease as last read.
    Present {
        /// The latest reading: its resourceVersion is the precondition of a takeover.
        lease: Box<Lease>,
        /// When this candidate first saw the record (the spec) that `lease` holds.
        seen_at: Instant,
    },
}

impl Observed {
    /// The knowledge after a reading taken at `now` (`None`: the Lease does not exist).
    pub(crate) fn update(
        previous: Option<Observed>,
        reading: Option<Lease>,
        now: Instant,
    ) -> Observed {
        match (previous, reading) {
            (
                Some(Observed::Present {
                    lease: old,
                    seen_at,
                }),
                Some(new),
            ) => {
                let seen_at = if old.spec == new.spec { seen_at } else { now };
                Observed::Present {
                    lease: Box::new(new),
                    seen_at,
                }
            }
            (_, Some(new)) => Observed::Present {
                lease: Box::new(new),
                seen_at: now,
            },
            (Some(Observed::Present { lease, .. }), None) => Observed::Absent {
                seen_at: now,
                after_holder: record::holder(&lease).is_some(),
            },
            (Some(absent @ Observed::Absent { .. }), None) => absent,
            (None, None) => Observed::Absent {
                seen_at: now,
                after_holder: false,
            },
        }
    }

    /// The holder of the Lease, if it exists and has one.
    pub(crate) fn holder(&self) -> Option<&str> {
        match self {
            Observed::Present { lease, .. } => record::holder(lease),
            Observed::Absent { .. } => None,
        }
    }

    /// The Lease as last read, if it exists.
    pub(crate) fn lease(&self) -> Option<&Lease> {
        match self {
            Observed::Present { lease, .. } => Some(lease),
            Observed::Absent { .. } => None,
        }
    }

    /// From when `identity` may try to take the lease (see the module docs' table). A time in
    /// the past means at once. `None` only if the expiry is not representable (durations are
    /// validated to at most a year, so never in practice): then not until the record changes.
    pub(crate) fn acquirable_at(
        &self,
        identity: &str,
        lease_duration: Duration,
    ) -> Option<Instant> {
        match self {
            Observed::Absent {
                seen_at,
                after_holder: false,
            } => Some(*seen_at),
            Observed::Absent { seen_at, .. } => seen_at.checked_add(lease_duration),
            Observed::Present { lease, seen_at } => match record::holder(lease) {
                None => Some(*seen_at),
                Some(holder) if holder == identity => Some(*seen_at),
                Some(_) => seen_at.checked_add(lease_duration),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;

    const LEASE: Duration = Duration::from_secs(15);

    fn lease(holder: &str, renewed: i64, resource_version: &str) -> Lease {
        let mut lease = record::new_lease(
            "ns",
            "lock",
            LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(renewed).expect("timestamp"),
                )),
                ..LeaseSpec::default()
            },
        );
        lease.metadata.resource_version = Some(resource_version.into());
        lease
    }

    #[test]
    fn leader_expiry_counts_from_when_the_record_last_changed_here() {
        let t0 = Instant::now();
        let seen = Observed::update(None, Some(lease("a", 100, "1")), t0);
        assert_eq!(
            seen.acquirable_at("me", LEASE),
            Some(t0 + LEASE),
            "a fresh follower waits a full lease"
        );
        // The same record again later (a poll): the count goes on; the newer version is kept.
        let t1 = t0 + Duration::from_secs(5);
        let seen = Observed::update(Some(seen), Some(lease("a", 100, "2")), t1);
        assert_eq!(seen.acquirable_at("me", LEASE), Some(t0 + LEASE));
        assert_eq!(
            seen.lease()
                .and_then(|l| l.metadata.resource_version.as_deref()),
            Some("2")
        );
        // A renewal: the count starts over, whatever time the record claims.
        let t2 = t0 + Duration::from_secs(6);
        let seen = Observed::update(Some(seen), Some(lease("a", 50, "3")), t2);
        assert_eq!(seen.acquirable_at("me", LEASE), Some(t2 + LEASE));
        assert_eq!(seen.holder(), Some("a"));
    }

    #[test]
    fn leader_released_or_own_or_missing_lease_is_taken_at_once() {
        let t0 = Instant::now();
        let released = Observed::update(None, Some(lease("", 1, "1")), t0);
        assert_eq!(released.holder(), None);
        assert_eq!(released.acquirable_at("me", LEASE), Some(t0));
        let own = Observed::update(None, Some(lease("me", 1, "1")), t0);
        assert_eq!(own.acquirable_at("me", LEASE), Some(t0));
        let missing = Observed::update(None, None, t0);
        assert_eq!(missing.acquirable_at("me", LEASE), Some(t0));
    }

    #[test]
    fn leader_deleted_while_held_waits_a_lease_duration() {
        let t0 = Instant::now();
        let held = Observed::update(None, Some(lease("a", 1, "1")), t0);
        let t1 = t0 + Duration::from_secs(3);
        let deleted = Observed::update(Some(held), None, t1);
        assert_eq!(deleted.acquirable_at("me", LEASE), Some(t1 + LEASE));
        // Still missing at the next poll: the count goes on from the first sighting.
        let deleted = Observed::update(Some(deleted), None, t1 + Duration::from_secs(2));
        assert_eq!(deleted.acquirable_at("me", LEASE), Some(t1 + LEASE));
    }
}
