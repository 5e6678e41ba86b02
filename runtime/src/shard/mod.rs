//! # Sharding: one controller spread across replicas, on Kubernetes Leases
//!
//! Leader election gives a controller high availability, not scale: one replica does all the work,
//! caches every object and spends one client rate limit. Sharding splits the objects between the
//! replicas, so that N replicas do N times the work with N rate limits, and each caches about 1/N
//! of the objects. It needs nothing but the API server: membership is Leases, the assignment is a
//! label on each object, and each member's informers select their own label on the server.
//! (The design follows the kubernetes-controller-sharding project's for controller-runtime,
//! built here into the controller layer for any controller.)
//!
//! ```text
//!             Lease rs-shard-a   Lease rs-shard-b   Lease rs-shard-c      (membership: one each,
//!                  ▲ renew            ▲ renew            ▲ renew            renewed like a leader)
//!   replica a ─────┘   replica b ─────┘   replica c ─────┘
//!   │  also a candidate for Lease rs-assigner; the elected one (say b) runs the assigner:
//!   │
//!   │   assigner: watches the member Leases and every ReplicaSet (not the Pods),
//!   │             owner = HashRing(live members).owner("namespace/name"),
//!   │             writes label shard.ferrokube.dev/rs=<owner> on the ReplicaSet
//!   ▼
//!   each replica: informers with label selector shard.ferrokube.dev/rs=<me>, for ReplicaSets
//!                 and Pods (it labels the Pods it creates); workers reconcile only those
//! ```
//!
//! ## Where each part lives
//!
//! | module | holds |
//! |---|---|
//! | [`ring`] | [`HashRing`]: consistent hashing, 100 tokens per member: a join or leave moves ~1/N |
//! | [`marks`] | [`Marks`]: the label, drain label, handover annotation and Lease names of a ring |
//! | [`member`] | [`ShardMember`]: a replica's membership Lease, its write gate, its scopes |
//! | `assigner` (private) | the elected assigner: liveness, fences, the ring, labels, moves |
//! | [`gate`] | [`ShardGate`]: before each reconcile, may this member act; the handover |
//! | [`dependents`] | [`DependentKind`]: the owned kinds that move with their owner |
//! | [`metrics`] | [`ShardMetrics`]: objects per member, moves, drains, time to assign |
//! | [`ranges`] | the server-side mode: hash ranges the server filters (`shardSelector`), no assigner; [`ranges::run`] detects it and falls back to the label mode |
//!
//! ## Handover without overlap
//!
//! An object moves from A to B in one of two ways, and in neither are A and B ever both working on
//! it:
//!
//! - **A is live** (B joined, so the ring changed): the assigner labels the object
//!   `drain.shard.ferrokube.dev/<ring>=B`. A's worker, when it next takes the key (so after any
//!   reconcile in flight), relabels the object's children, then the object, to B. Only then does
//!   it reach B's informers. A never reconciles it again: it has left A's caches, and a late copy
//!   of it in A's cache is recognised by its resourceVersion. (A's informers report the object
//!   that left their label selector as deleted, so [`Reconciler::deleted`] runs for it on A: keep
//!   per-replica bookkeeping there, never actions on the world.) The assigner never changes or
//!   clears a drain label while A is live, so a handover retried after a failed write goes on to
//!   the same member.
//! - **A is dead or gone** (its Lease released, or unchanged for the lease duration): its write
//!   gate shut earlier, at its renew deadline, so it can no longer write anything. The assigner
//!   first *fences* A's Lease (writes its own holder into it, and renews it), so that no process
//!   of A, not even one restarted under the same name, can join while A's objects are half moved;
//!   then it relabels A's children and the object to B itself; once nothing is labelled for A it
//!   deletes A's Lease. A frozen A that wakes up finds its gate shut and its membership lost:
//!   [`ShardMember::run`] returns, and the process should exit.
//!
//! In both cases the object carries, per kind of child, the resourceVersion of the last child
//! relabelled, and B does not reconcile it until its informer of that kind has caught up to it, so
//! B never sees the object without its children (and never creates them again). The old owner's
//! cache holds every child it created because a sharded controller records its writes in the
//! [consistency store](crate::freshness::consistency) (every write through the reconcile's
//! [`Context`](crate::controller::Context)), which the workers check before the handover.
//!
//! [`Reconciler::deleted`]: crate::controller::Reconciler::deleted
//!
//! ## Using it
//!
//! ```no_run
//! # use ferrokube_runtime::controller::Controller;
//! # use ferrokube_core::Scope;
//! # use ferrokube_runtime::shard::ShardMember;
//! # use k8s_openapi::api::apps::v1::ReplicaSet;
//! # use k8s_openapi::api::core::v1::Pod;
//! # async fn demo(client: ferrokube_client::Client, reconciler: impl ferrokube_runtime::controller::Reconciler<ReplicaSet>) -> Result<(), Box<dyn std::error::Error>> {
//! let member = ShardMember::builder(client.clone(), "kube-system", "replicaset")
//!     .identity("replica-1")
//!     .build()?;
//! // The reconciler writes through its Context (the member's client, gated by membership) and
//! // calls ctx.mark_child(&mut pod.metadata) on each pod it creates.
//! let controller = Controller::<ReplicaSet>::new(client, Scope::all())
//!     .shard(&member)
//!     .owns::<Pod>(Scope::all());
//! // Stop the controller first (reconciles in flight finish), then release the Lease: a
//! // ferrokube_runtime::manager::Manager built with `.shard(member)` does exactly this on SIGTERM.
//! let (controller_stopped, stopped) = tokio::sync::oneshot::channel::<()>();
//! tokio::join!(
//!     async {
//!         let _ = controller.run(reconciler, async { let _ = tokio::signal::ctrl_c().await; }).await;
//!         let _ = controller_stopped.send(());
//!     },
//!     async { let _ = member.run(async { let _ = stopped.await; }).await; },
//! );
//! # Ok(()) }
//! ```
//!
//! ## What it does not do
//!
//! - Objects of the primary kind with no owner label are not reconciled until the assigner
//!   labels them (one watch event and one PATCH; `shard_assignment_seconds`).
//! - Orphaned dependents (no controller owner, no label) reach no member: a controller that
//!   adopts orphans adopts only those already labelled as its own.
//! - A member's name is its label value: two live replicas must never share one.

pub(crate) mod assigner;
pub mod dependents;
pub mod gate;
pub mod marks;
pub mod member;
pub mod metrics;
pub mod ranges;
pub mod ring;

pub use dependents::{ChildRef, DependentKind, Dependents, OwnerUid};
pub use gate::{ShardGate, Turn};
pub use marks::Marks;
pub use member::{ShardMember, ShardMemberBuilder};
pub use metrics::ShardMetrics;
pub use ranges::{Epoch, Narrowing, ShardKey};
pub use ring::HashRing;

use crate::leader::LeaderElectionError;

/// What can go wrong in sharding.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error(
        "ring name {0:?} is not usable in a label name (lower-case letters, digits, '-', '.', at most 52 characters)"
    )]
    BadRingName(String),
    #[error(
        "member name {0:?} is not a usable label value and Lease name (lower-case letters, digits, '-', '.', at most 63 characters)"
    )]
    BadMemberName(String),
    #[error(transparent)]
    Election(#[from] LeaderElectionError),
    #[error("{what}: {source}")]
    Write {
        what: String,
        #[source]
        source: ferrokube_client::Error,
    },
    #[error("{what}: {source}")]
    Read {
        what: String,
        #[source]
        source: ferrokube_client::Error,
    },
}
