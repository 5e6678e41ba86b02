//! How fresh a cache is, as one number: the question the controller layer asks in three places
//! ("has this cache seen my write?" before a reconcile, before a read-your-own-writes read, and
//! before a shard member reconciles an object whose children another member moved to it), answered
//! once, here.
//!
//! A store's resourceVersion ([`SharedIndexInformer::last_store_sync_resource_version`]) says how
//! far it has caught up: every change the server made up to it has been applied. ResourceVersions
//! are opaque strings; only where the server's are integers (etcd's revisions: every
//! kube-apiserver so far, and ferrokube's embedded server) may two be compared. [`StoreRevision`]
//! is that reading of the string, and [`StoreRevision::reached`] the comparison:
//!
//! ```text
//!  store resourceVersion ──▶ ""        ─▶ NotListed     reached(r) = false (behind everything)
//!                           "10452"   ─▶ At(10452)     reached(r) = 10452 ≥ r
//!                           "a1b2c3"  ─▶ Opaque(..)    reached(r) = false; the caller must stop
//!                                                      comparing (its protection turns off)
//! ```
//!
//! [`SharedIndexInformer::last_store_sync_resource_version`]: crate::SharedIndexInformer::last_store_sync_resource_version

use std::fmt;

/// A store's resourceVersion, read as an etcd revision. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRevision {
    /// The store has not applied its first list.
    NotListed,
    /// The store has applied every change up to this revision.
    At(u64),
    /// The version is not an integer: revisions of this server cannot be compared.
    Opaque(String),
}

impl StoreRevision {
    /// The revision a store's resourceVersion `version` stands for.
    pub fn of(version: &str) -> StoreRevision {
        if version.is_empty() {
            return StoreRevision::NotListed;
        }
        match version.parse::<u64>() {
            Ok(at) => StoreRevision::At(at),
            Err(_) => StoreRevision::Opaque(version.to_string()),
        }
    }

    /// Whether the store has applied every change up to `revision`.
    pub fn reached(&self, revision: u64) -> bool {
        matches!(self, StoreRevision::At(at) if *at >= revision)
    }

    /// The revision, if it is one.
    pub fn at(&self) -> Option<u64> {
        match self {
            StoreRevision::At(at) => Some(*at),
            StoreRevision::NotListed | StoreRevision::Opaque(_) => None,
        }
    }
}

/// The resourceVersion as the store holds it (`""` before the first list).
impl fmt::Display for StoreRevision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreRevision::NotListed => Ok(()),
            StoreRevision::At(at) => write!(f, "{at}"),
            StoreRevision::Opaque(version) => f.write_str(version),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_revisions_compare_only_as_integers() {
        assert_eq!(StoreRevision::of(""), StoreRevision::NotListed);
        assert!(
            !StoreRevision::of("").reached(0),
            "an unlisted store is behind everything"
        );
        assert!(StoreRevision::of("12").reached(12));
        assert!(!StoreRevision::of("12").reached(13));
        assert!(
            StoreRevision::of("12").reached(3),
            "not a string comparison"
        );
        let opaque = StoreRevision::of("a1");
        assert!(matches!(opaque, StoreRevision::Opaque(_)) && !opaque.reached(0));
        assert_eq!(StoreRevision::of("12").to_string(), "12");
        assert_eq!(StoreRevision::of("").to_string(), "");
    }
}
