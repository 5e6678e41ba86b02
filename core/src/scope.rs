//! Which objects of a type a list, a watch or an informer covers: a namespace (or all), a label
//! selector, a field selector and a shard selector.
//!
//! A [`Scope`] is what a controller asks an informer factory for, and what the client turns into a
//! list and watch: `Scope::namespace("default").labels("app=web")` is
//! `GET /api/v1/namespaces/default/pods?labelSelector=app%3Dweb`. It keeps its selectors as the text
//! the server is sent; [`Scope::matcher`] parses the label selector for callers that test objects
//! against the scope themselves. A shard selector ([`ShardSelector`], sent as `shardSelector`) is
//! kept typed: the server tests it against each object's uid or namespace hash, and so can
//! [`ScopeMatcher`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels::{LabelSelector, SelectorError};
use crate::shard::ShardSelector;

/// Which objects of a type an informer covers. Default: all namespaces, no selectors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Scope {
    /// `None`: all namespaces (or a cluster-scoped type).
    pub namespace: Option<String>,
    /// The `labelSelector` sent to the server, as written (`None`: every label set).
    pub label_selector: Option<String>,
    /// The `fieldSelector` sent to the server, as written (`None`: no field requirement).
    pub field_selector: Option<String>,
    /// The `shardSelector` sent to the server (`None`: every shard). Only servers with the
    /// `ShardedListAndWatch` feature (Kubernetes 1.36+, alpha) apply it; others ignore it and
    /// send everything, which a sharded list tells apart by its `metadata.shardInfo`.
    pub shard: Option<ShardSelector>,
}

impl Scope {
    /// Every object of the type.
    pub fn all() -> Scope {
        Scope::default()
    }
    /// The objects of one namespace.
    pub fn namespace(namespace: &str) -> Scope {
        Scope {
            namespace: Some(namespace.to_string()),
            ..Scope::default()
        }
    }
    pub fn labels(mut self, selector: &str) -> Scope {
        self.label_selector = Some(selector.to_string());
        self
    }
    pub fn fields(mut self, selector: &str) -> Scope {
        self.field_selector = Some(selector.to_string());
        self
    }
    /// Only the objects of this shard (see [`crate::shard`]).
    pub fn shard(mut self, selector: ShardSelector) -> Scope {
        self.shard = Some(selector);
        self
    }

    /// A test of object metadata against this scope (see [`ScopeMatcher`]); fails if the label
    /// selector does not parse.
    pub fn matcher(&self) -> Result<ScopeMatcher, SelectorError> {
        Ok(ScopeMatcher {
            namespace: self.namespace.clone(),
            labels: self
                .label_selector
                .as_deref()
                .map(LabelSelector::parse)
                .transpose()?,
            has_field_selector: self.field_selector.is_some(),
            shard: self.shard.clone(),
        })
    }
}

/// Whether an informer of a [`Scope`] will cache an object, told from the object's metadata:
/// its namespace, its labels and, under a shard selector, the hash of its uid or namespace (a
/// server without the feature sends objects of other shards too; the matcher still says no to
/// them, so nobody waits on them). A field selector needs the whole object and the server's field
/// set for the kind, so a scope with one is "cannot tell" and [`matches`](Self::matches) says
/// no: callers that wait for an informer to show a write (the controller's consistency store,
/// the read-your-own-writes client) must not wait for what may never come.
#[derive(Debug, Clone)]
pub struct ScopeMatcher {
    namespace: Option<String>,
    labels: Option<LabelSelector>,
    has_field_selector: bool,
    shard: Option<ShardSelector>,
}

impl ScopeMatcher {
    /// True when the scope holds an object with this metadata (false whenever the scope has a
    /// field selector).
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        let namespace_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| meta.namespace.as_deref() == Some(ns));
        let labels_ok = self
            .labels
            .as_ref()
            .is_none_or(|selector| selector.matches(meta.labels.as_ref()));
        let shard_ok = self.shard.as_ref().is_none_or(|shard| shard.matches(meta));
        namespace_ok && labels_ok && shard_ok && !self.has_field_selector
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::{ShardRange, shard_hash};

    #[test]
    fn shard_selector_scope_matcher_tests_the_uid_hash() {
        let uid = "0b8e4c1e-5f0a-4d6e-9a43-3f1d2c7b9e10";
        let meta = ObjectMeta {
            uid: Some(uid.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        };
        let hash = shard_hash(uid);
        let own = ShardRange::new(hash, u128::from(hash) + 1).expect("range");
        let scope = Scope::namespace("default").shard(ShardSelector::uid(own));
        assert!(scope.matcher().expect("matcher").matches(&meta));
        let below = ShardRange::new(0, u128::from(hash)).expect("this uid's hash is not 0");
        let scope = Scope::namespace("default").shard(ShardSelector::uid(below));
        assert!(!scope.matcher().expect("matcher").matches(&meta));
        assert_ne!(Scope::all(), Scope::all().shard(ShardSelector::uid(own)));
    }
}
