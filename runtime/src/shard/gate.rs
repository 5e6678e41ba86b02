//! The member's side of an object's turn: before a worker reconciles an object, the gate says
//! whether this member may, and runs the handover when the assigner asked for one.
//!
//! ```text
//!  worker takes key ─▶ object in the (sharded) cache ─▶ ShardGate::turn
//!     owner label ≠ me ────────────────────────────────▶ Skip (the cache is behind a move)
//!     a handover of this very version already done ────▶ Skip (same)
//!     drain label = B ≠ me ────────────────────────────▶ HandOver(B): relabel the cached children
//!                                                         to B, then the object (owner B, no drain,
//!                                                         handover annotation = per kind, the last
//!                                                         child's resourceVersion)
//!     annotation Kind=R, that kind's cache < R ────────▶ Wait (requeue shortly): the children the
//!                                                         previous owner moved have not arrived yet
//!     otherwise ───────────────────────────────────────▶ Reconcile
//! ```
//!
//! The handover runs on the worker that holds the key, so it is ordered after any reconcile of
//! the object in flight (the queue never hands one key to two workers): the member has stopped
//! working on the object when it lets go. The workers check the controller's consistency store
//! before the gate, so the member's cache already shows every child it created for the object
//! through the reconcile's [`Context`](crate::controller::Context) (which is why a sharded
//! controller keeps stale protection on): no child is left behind with the old label.
//! The assigner never changes or clears a drain label while the owner is live, so a handover
//! retried after a failed write relabels the remaining children to the same member as the first.
//!
//! The new owner's wait on the annotation is what keeps it from creating the children again: its
//! informer of children watches its own label, so each relabelled child arrives as an event
//! carrying the relabel's resourceVersion; once that informer's store has reached the last one, it
//! holds them all.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::ShardError;
use super::dependents::{DependentKind, MovedChildren};
use super::marks::parse_handover;
use super::member::ShardMember;
use ferrokube_client::api::{Patch, PatchParams};
use ferrokube_client::{Api, DynamicObject};
use ferrokube_core::ObjectKey;
use ferrokube_core::pipeline_event;
use ferrokube_core::{ApiResource, Object};

/// What the member does with an object this turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// It is this member's: reconcile it.
    Reconcile,
    /// It is not (or no longer) this member's; the cache will drop it.
    Skip(&'static str),
    /// Hand it over to this member.
    HandOver(String),
    /// It just arrived from another member, whose children have not all reached this member's
    /// cache yet: try again shortly.
    WaitForChildren {
        kind: String,
        needs: u64,
        cache: Option<u64>,
    },
}

/// The member's gate for one controller's primary kind; see the [module docs](self).
pub struct ShardGate {
    member: ShardMember,
    resource: ApiResource,
    dependents: Vec<Arc<dyn DependentKind>>,
    /// Objects handed over, with the resourceVersion they had when this member let go: a cache
    /// still showing that version is behind, not a new request. Entries go when the cache moves on
    /// or lets the object go ([`ShardGate::forget`]), so the map holds only handovers in flight.
    handed_over: Mutex<HashMap<ObjectKey, String>>,
    /// Handovers begun and not finished: the children relabelled so far.
    moved: MovedChildren,
}

impl ShardGate {
    pub fn new(
        member: ShardMember,
        resource: ApiResource,
        dependents: Vec<Arc<dyn DependentKind>>,
    ) -> ShardGate {
        ShardGate {
            member,
            resource,
            dependents,
            handed_over: Mutex::new(HashMap::new()),
            moved: MovedChildren::default(),
        }
    }

    pub fn member(&self) -> &ShardMember {
        &self.member
    }

    /// The dependent kinds that move with the primary objects.
    pub fn dependents(&self) -> &[Arc<dyn DependentKind>] {
        &self.dependents
    }

    /// The member's cache no longer holds `key` (the object was deleted, or its label now names
    /// another member): nothing about its handover is needed any more. Without this, every object
    /// ever handed over would keep an entry here for the life of the process.
    pub fn forget(&self, key: &ObjectKey) {
        self.handed_over.lock().remove(key);
        self.moved.finish(key);
    }

    /// What to do with `object` (cached under `key`) now.
    pub fn turn<K: Object>(&self, key: &ObjectKey, object: &K) -> Turn {
        let marks = self.member.marks();
        let me = self.member.identity();
        let meta = object.meta();
        let label = |name: &str| meta.labels.as_ref().and_then(|l| l.get(name)).cloned();
        if label(marks.owner_label()).as_deref() != Some(me) {
            return Turn::Skip("labelled for another member");
        }
        {
            let mut handed_over = self.handed_over.lock();
            match handed_over.get(key) {
                Some(version) if version == object.resource_version() => {
                    return Turn::Skip("handed over; the cache has not seen it yet");
                }
                Some(_) => {
                    handed_over.remove(key);
                }
                None => {}
            }
        }
        if let Some(to) = label(marks.drain_label()).filter(|to| to != me) {
            return Turn::HandOver(to);
        }
        let annotation = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(marks.handover_annotation()));
        let Some(annotation) = annotation else {
            return Turn::Reconcile;
        };
        let Some(needs) = parse_handover(annotation) else {
            tracing::warn!(%key, %annotation, "unreadable handover annotation; not waiting for it");
            return Turn::Reconcile;
        };
        for dependents in &self.dependents {
            let kind = &dependents.resource().kind;
            let Some(needs) = needs.get(kind).copied() else {
                continue;
            };
            let cache = dependents.store_revision();
            if !cache.reached(needs) {
                return Turn::WaitForChildren {
                    kind: kind.clone(),
                    needs,
                    cache: cache.at(),
                };
            }
        }
        Turn::Reconcile
    }

    /// Hands `object` over to member `to`: its cached children first, then the object itself
    /// (owner `to`, no drain label, the handover annotation), with the object's resourceVersion as
    /// precondition. Writes go through the member's gated client.
    pub async fn hand_over<K: Object>(
        &self,
        key: &ObjectKey,
        object: &K,
        to: &str,
    ) -> Result<(), ShardError> {
        let marks = self.member.marks();
        let client = self.member.client();
        let uid = object.meta().uid.clone().unwrap_or_default();
        let first_try = !self.moved.any(key);
        for dependents in &self.dependents {
            let children = dependents.cached_children(&uid);
            if children.is_empty() && first_try {
                // Nothing to move in this process's cache. If an earlier process of this member
                // (restarted under the same name) moved some before it stopped, they were moved
                // before this cache was listed: the new owner waits for this cache's version.
                if let Some(version) = dependents.store_revision().at() {
                    self.moved.note(key, &dependents.resource().kind, version);
                }
            }
            for child in children {
                self.moved
                    .relabel(key, &client, marks, dependents.as_ref(), &child, to)
                    .await?;
            }
        }
        let annotation = self.moved.annotation(key);
        let patch = json!({"metadata": {
            "resourceVersion": object.resource_version(),
            "labels": {marks.owner_label(): to, marks.drain_label(): Value::Null},
            "annotations": {marks.handover_annotation(): annotation},
        }});
        let api = Api::dynamic(
            client,
            self.resource.clone(),
            object.meta().namespace.as_deref(),
        );
        let name = object.meta().name.clone().unwrap_or_default();
        let _: DynamicObject = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|source| ShardError::Write {
                what: format!("hand over {key} to {to}"),
                source,
            })?;
        self.moved.finish(key);
        self.handed_over
            .lock()
            .insert(key.clone(), object.resource_version().to_string());
        if let Some(metrics) = self.member.metrics() {
            metrics.handed_over(marks.ring(), self.member.identity());
        }
        tracing::info!(ring = %marks.ring(), member = %self.member.identity(), %key, %to, "handed over");
        pipeline_event!(stage = "shard", op = "owner", instance = %marks.ring(), key = %key, state = %to, handed_over_by = %self.member.identity());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::dependents::ChildRef;
    use crate::shard::marks::Marks;
    use ferrokube_client::{Client, Config, Error};
    use ferrokube_informer::StoreRevision;
    use futures_util::future::BoxFuture;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A dependents cache that is at a version the test sets.
    struct AtVersion(AtomicU64, ApiResource);

    impl DependentKind for AtVersion {
        fn resource(&self) -> &ApiResource {
            &self.1
        }
        fn cached_children(&self, _: &str) -> Vec<ChildRef> {
            Vec::new()
        }
        fn store_revision(&self) -> StoreRevision {
            StoreRevision::At(self.0.load(Ordering::SeqCst))
        }
        fn list_marked<'a>(
            &'a self,
            _: &'a Client,
            _: &'a Marks,
            _: &'a str,
            _: Option<&'a str>,
        ) -> BoxFuture<'a, Result<(u64, Vec<ChildRef>), Error>> {
            Box::pin(async { Ok((0, Vec::new())) })
        }
    }

    fn member(identity: &str) -> ShardMember {
        let client =
            Client::new(Config::new("http://127.0.0.1:1".parse().expect("a URL"))).expect("client");
        ShardMember::builder(client, "default", "rs")
            .identity(identity)
            .build()
            .expect("member")
    }

    fn rs(labels: &[(&str, &str)], annotations: &[(&str, &str)], version: &str) -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.name = Some("web".into());
        rs.metadata.namespace = Some("default".into());
        rs.metadata.resource_version = Some(version.into());
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        rs.metadata.labels = Some(map(labels));
        rs.metadata.annotations = Some(map(annotations));
        rs
    }

    #[tokio::test]
    async fn shard_gate_turns() {
        let pods = Arc::new(AtVersion(AtomicU64::new(10), ApiResource::of::<Pod>()));
        let gate = ShardGate::new(
            member("a"),
            ApiResource::of::<ReplicaSet>(),
            vec![pods.clone() as Arc<dyn DependentKind>],
        );
        let key = ObjectKey::new(Some("default"), "web");
        let owner = "shard.ferrokube.dev/rs";
        let drain = "drain.shard.ferrokube.dev/rs";
        let handover = "shard.ferrokube.dev/rs-handover";

        assert_eq!(
            gate.turn(&key, &rs(&[(owner, "a")], &[], "5")),
            Turn::Reconcile
        );
        assert!(matches!(
            gate.turn(&key, &rs(&[(owner, "b")], &[], "5")),
            Turn::Skip(_)
        ));
        assert!(matches!(gate.turn(&key, &rs(&[], &[], "5")), Turn::Skip(_)));
        assert_eq!(
            gate.turn(&key, &rs(&[(owner, "a"), (drain, "b")], &[], "5")),
            Turn::HandOver("b".into())
        );
        // A drain naming this very member (the ring changed back) is no request.
        assert_eq!(
            gate.turn(&key, &rs(&[(owner, "a"), (drain, "a")], &[], "5")),
            Turn::Reconcile
        );
        // Moved here with children up to version 12: wait until the pod cache is there.
        let arrived = rs(&[(owner, "a")], &[(handover, "Pod=12")], "13");
        // A kind it does not own is no reason to wait.
        assert_eq!(
            gate.turn(&key, &rs(&[(owner, "a")], &[(handover, "Secret=99")], "13")),
            Turn::Reconcile
        );
        assert_eq!(
            gate.turn(&key, &arrived),
            Turn::WaitForChildren {
                kind: "Pod".into(),
                needs: 12,
                cache: Some(10)
            }
        );
        pods.0.store(12, Ordering::SeqCst);
        assert_eq!(gate.turn(&key, &arrived), Turn::Reconcile);
        // After a handover of version 20, a cache still showing version 20 is behind.
        gate.handed_over.lock().insert(key.clone(), "20".into());
        assert!(matches!(
            gate.turn(&key, &rs(&[(owner, "a"), (drain, "b")], &[], "20")),
            Turn::Skip(_)
        ));
        assert_eq!(
            gate.turn(&key, &rs(&[(owner, "a")], &[], "21")),
            Turn::Reconcile
        );
    }

    #[test]
    fn shard_gate_forgets_what_left_the_cache() {
        let gate = ShardGate::new(member("a"), ApiResource::of::<ReplicaSet>(), Vec::new());
        let key = ObjectKey::new(Some("default"), "web");
        gate.handed_over.lock().insert(key.clone(), "20".into());
        gate.moved.note(&key, "Pod", 19);
        gate.forget(&key);
        assert!(gate.handed_over.lock().is_empty());
        assert!(!gate.moved.any(&key));
    }
}
