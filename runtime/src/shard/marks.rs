//! The marks sharding leaves on objects and Leases: where the assignment is recorded, so that every
//! member's informer can select its own share on the server.
//!
//! | mark | on | value | written by |
//! |---|---|---|---|
//! | label `shard.ferrokube.dev/<ring>` | primary objects and their dependents | the member that owns it | the assigner (new and orphaned objects), the old owner (handover) |
//! | label `drain.shard.ferrokube.dev/<ring>` | a primary object being moved | the member it moves to | the assigner; removed by the old owner when it hands over |
//! | annotation `shard.ferrokube.dev/<ring>-handover` | a primary object that moved | per dependent kind, the resourceVersion of the last one relabelled for the move (`Pod=123`) | whoever relabelled them |
//! | Lease `<ring>-shard-<member>`, label `shard.ferrokube.dev/ring=<ring>` | one per member | `holderIdentity` = the member | the member (it is a leader election of one); the assigner while it fences a dead member |
//! | Lease `<ring>-assigner` | one per ring | the replica that assigns | leader election among all members |
//! | annotation `shard.ferrokube.dev/<ring>-adopted` on a member Lease | server-side mode only | the members of the ring the member has adopted (`a,b,c`) | the member |

use std::collections::BTreeMap;

use ferrokube_core::Scope;

/// The label on every member Lease of a ring (value: the ring's name): the assigner watches only
/// these, and never touches another Lease.
pub const RING_LABEL: &str = "shard.ferrokube.dev/ring";

use super::ShardError;

/// A ring's name and the names of its marks, checked once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marks {
    ring: String,
    owner_label: String,
    drain_label: String,
    handover_annotation: String,
    adopted_annotation: String,
}

impl Marks {
    /// The marks of ring `ring`: lower-case letters, digits and `-`, starting and ending
    /// alphanumeric, at most 52 characters (the annotation's name adds 10 to it).
    pub fn new(ring: &str) -> Result<Marks, ShardError> {
        if !is_dns_label(ring, 52) {
            return Err(ShardError::BadRingName(ring.to_string()));
        }
        Ok(Marks {
            ring: ring.to_string(),
            owner_label: format!("shard.ferrokube.dev/{ring}"),
            drain_label: format!("drain.shard.ferrokube.dev/{ring}"),
            handover_annotation: format!("shard.ferrokube.dev/{ring}-handover"),
            adopted_annotation: format!("shard.ferrokube.dev/{ring}-adopted"),
        })
    }

    pub fn ring(&self) -> &str {
        &self.ring
    }

    /// The label naming an object's member.
    pub fn owner_label(&self) -> &str {
        &self.owner_label
    }

    /// The label naming the member an object is being moved to.
    pub fn drain_label(&self) -> &str {
        &self.drain_label
    }

    /// The annotation with the resourceVersion of the last dependent moved with the object.
    pub fn handover_annotation(&self) -> &str {
        &self.handover_annotation
    }

    /// The annotation on a member's Lease naming the members of the ring it has adopted, in the
    /// server-side mode (see [`super::ranges`]).
    pub fn adopted_annotation(&self) -> &str {
        &self.adopted_annotation
    }

    /// The name of `member`'s Lease.
    pub fn member_lease(&self, member: &str) -> String {
        format!("{}-shard-{member}", self.ring)
    }

    /// The member a Lease name belongs to, if it is one of this ring's member Leases.
    pub fn member_of_lease<'a>(&self, lease: &'a str) -> Option<&'a str> {
        lease
            .strip_prefix(self.ring.as_str())?
            .strip_prefix("-shard-")
            .filter(|member| !member.is_empty())
    }

    /// The name of the assigner's Lease.
    pub fn assigner_lease(&self) -> String {
        format!("{}-assigner", self.ring)
    }

    /// `base` narrowed to the objects labelled as `member`'s.
    pub fn scope_of(&self, member: &str, base: Scope) -> Scope {
        let own = format!("{}={member}", self.owner_label);
        let selector = match base.label_selector.as_deref() {
            Some(existing) if !existing.trim().is_empty() => format!("{existing},{own}"),
            _ => own,
        };
        Scope {
            label_selector: Some(selector),
            ..base
        }
    }
}

/// Checks a member's name: it is a label value and part of a Lease name, so lower-case letters,
/// digits and `-`, at most 63 characters, starting and ending alphanumeric (a DNS label, as a
/// pod's name usually is).
pub fn check_member_name(member: &str) -> Result<(), ShardError> {
    if is_dns_label(member, 63) {
        Ok(())
    } else {
        Err(ShardError::BadMemberName(member.to_string()))
    }
}

fn is_dns_label(text: &str, max: usize) -> bool {
    let bytes = text.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    !text.is_empty()
        && text.len() <= max
        && edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// The handover annotation's value: `Kind=resourceVersion` per dependent kind, comma-separated.
pub fn format_handover(versions: &BTreeMap<String, u64>) -> String {
    versions
        .iter()
        .map(|(kind, version)| format!("{kind}={version}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads a handover annotation; `None` if it does not parse (then the member waits for nothing
/// it cannot name, and says so in its log).
pub fn parse_handover(value: &str) -> Option<BTreeMap<String, u64>> {
    value
        .split(',')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (kind, version) = part.split_once('=')?;
            Some((kind.to_string(), version.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_marks_names_and_scopes() {
        let marks = Marks::new("rs").expect("valid");
        assert_eq!(marks.owner_label(), "shard.ferrokube.dev/rs");
        assert_eq!(marks.member_lease("replica-1"), "rs-shard-replica-1");
        assert_eq!(
            marks.member_of_lease("rs-shard-replica-1"),
            Some("replica-1")
        );
        assert_eq!(marks.member_of_lease("rs-assigner"), None);
        assert_eq!(marks.member_of_lease("other-shard-x"), None);
        let scope = marks.scope_of("a", Scope::all().labels("app=web"));
        assert_eq!(
            scope.label_selector.as_deref(),
            Some("app=web,shard.ferrokube.dev/rs=a")
        );
        assert_eq!(
            marks.scope_of("a", Scope::all()).label_selector.as_deref(),
            Some("shard.ferrokube.dev/rs=a")
        );
    }

    #[test]
    fn shard_marks_refuse_bad_names() {
        assert!(Marks::new("Bad").is_err());
        assert!(Marks::new("").is_err());
        assert!(Marks::new(&"r".repeat(53)).is_err());
        assert!(check_member_name("replica_1").is_err());
        assert!(check_member_name("a..b").is_err());
        assert!(Marks::new("a.b").is_err());
        assert!(check_member_name("-a").is_err());
        assert!(check_member_name("replica-1").is_ok());
    }

    #[test]
    fn shard_marks_handover_annotation_round_trips() {
        let versions = BTreeMap::from([("Pod".to_string(), 12), ("ConfigMap".to_string(), 7)]);
        let text = format_handover(&versions);
        assert_eq!(text, "ConfigMap=7,Pod=12");
        assert_eq!(parse_handover(&text), Some(versions));
        assert_eq!(parse_handover(""), Some(BTreeMap::new()));
        assert_eq!(parse_handover("Pod=x"), None);
        assert_eq!(parse_handover("12"), None);
    }
}
