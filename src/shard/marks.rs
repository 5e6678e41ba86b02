//! The marks sharding leaves on objects and Leases: where the assignment is recorded, so that every
//! member's informer can select its own share on the server.
//!
//! | mark | on | value | written by |
//! |---|---|---|---|
//! | label `shard.ferrokube.dev/<ring>` | primary objects and their dependents | the member that owns it | the assigner (new and orphaned objects), the old owner (handover) |
//! | label `drain.shard.ferrokube.dev/<ring>` | a primary object being moved | the member it moves to | the assigner; removed by the old owner when it hands over |
//! | annotation `shard.ferrokube.dev/<ring>-handover` | a primary object that moved | resourceVersion of the last dependent relabelled for the move | whoever relabelled them |
//! | Lease `<ring>-shard-<member>` | one per member | `holderIdentity` = the member | the member (it is a leader election of one) |
//! | Lease `<ring>-assigner` | one per ring | the replica that assigns | leader election among all members |

use crate::informer::Scope;

use super::ShardError;

/// A ring's name and the names of its marks, checked once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marks {
    ring: String,
    owner_label: String,
    drain_label: String,
    handover_annotation: String,
}

impl Marks {
    /// The marks of ring `ring`: a label name (at most 52 characters, since the annotation adds 10:
    /// lower-case letters, digits, `-` and `.`, starting and ending alphanumeric).
    pub fn new(ring: &str) -> Result<Marks, ShardError> {
        if !is_dns_label_like(ring, 52) {
            return Err(ShardError::BadRingName(ring.to_string()));
        }
        Ok(Marks {
            ring: ring.to_string(),
            owner_label: format!("shard.ferrokube.dev/{ring}"),
            drain_label: format!("drain.shard.ferrokube.dev/{ring}"),
            handover_annotation: format!("shard.ferrokube.dev/{ring}-handover"),
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
/// digits, `-` and `.`, at most 63 characters, starting and ending alphanumeric.
pub fn check_member_name(member: &str) -> Result<(), ShardError> {
    if is_dns_label_like(member, 63) {
        Ok(())
    } else {
        Err(ShardError::BadMemberName(member.to_string()))
    }
}

fn is_dns_label_like(text: &str, max: usize) -> bool {
    let bytes = text.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    !text.is_empty()
        && text.len() <= max
        && edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'.')
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
        assert!(check_member_name("-a").is_err());
        assert!(check_member_name("replica-1").is_ok());
    }
}
