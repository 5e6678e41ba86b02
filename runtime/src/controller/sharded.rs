//! The [`Ownership`] of a sharded controller (feature `shard`): the controller's side of
//! `crate::shard`, and the only module of the controller that names it.
//!
//! `Controller::shard(member)` records a [`Sharded`]; the controller's run asks it as it asks any
//! ownership (see [`ownership`](super::ownership)), and it answers from the member and the
//! member's gate:
//!
//! ```text
//!  scope / client / mark_child ─▶ ShardMember (its label, its membership-gated client)
//!  start                       ─▶ ShardGate::new(member, primary kind, owned caches as dependents)
//!  ready                       ─▶ the member's Lease is held (membership acquired)
//!  claim                       ─▶ ShardGate::turn; HandOver(to) ─▶ ShardGate::hand_over
//!  beside_workers              ─▶ the share reporter (shard_objects, each second) and this
//!                                 replica's candidacy for the ring's assigner
//! ```
//!
//! The owned kinds reach the gate as [`DependentKind`]s through [`AsDependent`], an adapter over
//! the controller's [`OwnedCache`]s.
//!
//! In the server-side mode (`crate::shard::ranges`) there is no gate and no label: an epoch's
//! controller records a [`Ranged`] (`Controller::shard_epoch`), which narrows every informer to
//! the epoch's hash ranges (the server filters) and writes with the member's gated client. The
//! handover is the epoch's business: the controller of an epoch runs only while the fence holds.

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::watch;

use super::ownership::{Child, Claim, OwnedCache, Ownership, Start};
use crate::shard::{ChildRef, DependentKind, Marks, ShardGate, ShardMember, Turn};
use ferrokube_client::{Client, Error};
use ferrokube_core::shard::ShardSelector;
use ferrokube_core::{ApiResource, Kind, ObjectKey, Scope};
use ferrokube_informer::{Store, StoreRevision};

/// A sharded controller's ownership: `member`'s share of the primary objects.
pub(super) struct Sharded<K: Kind> {
    member: ShardMember,
    /// Set by [`Ownership::start`]; invariant: set before the workers (or the tasks beside them)
    /// first ask.
    running: OnceLock<Running<K>>,
}

/// What a sharded controller holds once it runs.
struct Running<K: Kind> {
    gate: Arc<ShardGate>,
    dynamic: K::DynamicType,
    /// The primary scope before the member's label narrowed it: the assigner's.
    recorded_scope: Scope,
    primary: Arc<Store<K>>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Sharded<K> {
    pub(super) fn new(member: &ShardMember) -> Sharded<K> {
        Sharded {
            member: member.clone(),
            running: OnceLock::new(),
        }
    }
}

impl<K: Kind> Ownership<K> for Sharded<K> {
    fn scope(&self, scope: Scope) -> Scope {
        self.member.scope(scope)
    }

    fn client(&self) -> Option<Client> {
        Some(self.member.client())
    }

    fn keeps_stale_protection(&self) -> bool {
        // The gate hands an object over only once the caches show every child the member
        // created for it, which is what the consistency store checks.
        true
    }

    fn start(&self, start: Start<'_, K>) {
        let dependents = start
            .owned
            .into_iter()
            .map(|owned| Arc::new(AsDependent(owned)) as Arc<dyn DependentKind>)
            .collect();
        let gate = ShardGate::new(self.member.clone(), start.resource.clone(), dependents);
        let running = Running {
            gate: Arc::new(gate),
            dynamic: start.dynamic.clone(),
            recorded_scope: start.recorded_scope.clone(),
            primary: start.primary,
            _kind: PhantomData,
        };
        if self.running.set(running).is_err() {
            tracing::warn!(member = %self.member.identity(), "a sharded controller ran twice");
        }
    }

    fn ready(&self) -> BoxFuture<'static, bool> {
        let membership = self.member.membership();
        Box::pin(async move { membership.acquired().await.is_ok() })
    }

    fn beside_workers(&self, mut stop: watch::Receiver<bool>) -> Vec<BoxFuture<'static, ()>> {
        let Some(running) = self.running.get() else {
            return Vec::new();
        };
        let mut tasks: Vec<BoxFuture<'static, ()>> = Vec::new();
        if let Some(metrics) = self.member.metrics().cloned() {
            let (member, store, mut stop) =
                (self.member.clone(), running.primary.clone(), stop.clone());
            tasks.push(Box::pin(async move {
                let mut every = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tokio::select! {
                        // Stop first: no report after the controller stopped.
                        biased;
                        _ = stop.wait_for(|stopping| *stopping) => return,
                        _ = every.tick() => metrics.set_objects(member.marks().ring(), member.identity(), store.len()),
                    }
                }
            }));
        }
        let candidacy = crate::shard::assigner::run_candidacy::<K>(
            self.member.clone(),
            running.dynamic.clone(),
            running.recorded_scope.clone(),
            running.gate.dependents().to_vec(),
            async move {
                let _ = stop.wait_for(|stopping| *stopping).await;
            },
        );
        let identity = self.member.identity().to_string();
        tasks.push(Box::pin(async move {
            // It saw `stop` and released the assigner Lease if it held it.
            if let Err(error) = candidacy.await {
                tracing::warn!(member = %identity, %error, "assigner candidacy failed");
            }
        }));
        tasks
    }

    fn claim<'a>(&'a self, key: &'a ObjectKey, object: &'a K) -> BoxFuture<'a, Claim> {
        Box::pin(async move {
            let Some(running) = self.running.get() else {
                return Claim::NotYet("the shard gate is not started".into());
            };
            match running.gate.turn(key, object) {
                Turn::Reconcile => Claim::Mine,
                Turn::Skip(why) => Claim::NotMine(why),
                Turn::WaitForChildren { kind, needs, cache } => {
                    Claim::NotYet(format!("{kind} cache at {cache:?}, needs {needs}"))
                }
                Turn::HandOver(to) => match running.gate.hand_over(key, object, &to).await {
                    Ok(()) => Claim::HandedOver,
                    Err(error) => Claim::HandOverFailed(error.to_string()),
                },
            }
        })
    }

    fn forget(&self, key: &ObjectKey) {
        if let Some(running) = self.running.get() {
            running.gate.forget(key);
        }
    }

    fn mark_child(&self, meta: &mut ObjectMeta) {
        self.member.mark(meta);
    }
}

/// The ownership of one epoch of the server-side mode: the objects whose field hashes into
/// `selector`, which the server alone sends this member.
pub(super) struct Ranged {
    /// The epoch's share. Invariant: no other member acts on a point of it while this epoch
    /// runs (the epoch's fence, `crate::shard::ranges`).
    selector: ShardSelector,
    /// The member's client, gated by its membership.
    client: Client,
}

impl Ranged {
    pub(super) fn new(selector: ShardSelector, client: Client) -> Ranged {
        Ranged { selector, client }
    }
}

impl<K: Kind> Ownership<K> for Ranged {
    fn scope(&self, scope: Scope) -> Scope {
        scope.shard(self.selector.clone())
    }

    fn client(&self) -> Option<Client> {
        Some(self.client.clone())
    }

    fn claim<'a>(&'a self, _: &'a ObjectKey, object: &'a K) -> BoxFuture<'a, Claim> {
        // The server sent only objects in the ranges; checked again so that a cache filled some
        // other way (a scope the author narrowed by hand, a server that ignored the selector)
        // can never make this member act outside its share.
        let claim = if self.selector.matches(object.meta()) {
            Claim::Mine
        } else {
            Claim::NotMine("outside this member's hash ranges")
        };
        Box::pin(std::future::ready(claim))
    }
}

/// An owned kind's cache as the shard gate's [`DependentKind`].
struct AsDependent(Arc<dyn OwnedCache>);

fn child_ref(child: Child) -> ChildRef {
    ChildRef {
        namespace: child.namespace,
        name: child.name,
        owner_uid: child.owner_uid,
    }
}

impl DependentKind for AsDependent {
    fn resource(&self) -> &ApiResource {
        self.0.resource()
    }

    fn cached_children(&self, owner_uid: &str) -> Vec<ChildRef> {
        self.0
            .cached_children(owner_uid)
            .into_iter()
            .map(child_ref)
            .collect()
    }

    fn store_revision(&self) -> StoreRevision {
        self.0.store_revision()
    }

    fn list_marked<'a>(
        &'a self,
        client: &'a Client,
        marks: &'a Marks,
        member: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(u64, Vec<ChildRef>), Error>> {
        Box::pin(async move {
            let selector = format!("{}={member}", marks.owner_label());
            let (version, children) = self.0.list_labelled(client, &selector, namespace).await?;
            Ok((version, children.into_iter().map(child_ref).collect()))
        })
    }
}
