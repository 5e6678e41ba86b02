//! # ferrokube-runtime
//!
//! The layer that runs things: it joins the client to the informers and the workqueue, and turns
//! them into controllers that reconcile, replicas that elect a leader, and a manager that starts,
//! watches over and stops all of it.
//!
//! | module | holds | client-go / controller-runtime counterpart |
//! |---|---|---|
//! | [`controller`] | the reconciler runtime: the builder, sources, filters, workers, context, metrics | controller-runtime's `controller`, `builder` |
//! | [`freshness`] | never acting on a cache older than your own writes: one write record under two views (the workers' automatic skip, `ctx.cache()` / `ReadYourWrites` reads), one `Stale` error; expectations for child counts | kube-controller-manager's stale controller handling (KEP-5647); `pkg/controller` expectations |
//! | [`toolkit`] | what a reconcile calls: claiming, events, finalizers, conditions, owner references, stabilization | `controllerutil`, `ControllerRefManager`, `tools/record` |
//! | [`leader`] | leader election on a Lease, and the write gate it plugs into the client | `tools/leaderelection` |
//! | [`manager`] | one process's controllers, leader election, health and metrics endpoints, graceful shutdown | controller-runtime's `manager` |
//! | `shard` | (feature `shard`) a controller's objects split across replicas by a hash ring on Leases | |
//!
//! ## How data flows through it
//!
//! ```text
//!   ferrokube-client            ferrokube-informer                 ferrokube-workqueue
//!   Api<K> ──ListWatch──▶ Reflector ─▶ DeltaFifo ─▶ Store ─▶ handlers ──keys──▶ WorkQueue
//!     ▲                                             │ Lister reads               │
//!     │ writes (recorded by the consistency store,  ▼                            ▼
//!     │ gated by the leader's write gate) ◀──── controller worker: reconcile(Arc<K>) ─▶ Action
//!     │
//!   leader: LeaderElector renews a Lease through the same client; its Leadership is the
//!           client's write gate, so no write leaves once the lease may have run out
//!   manager: starts the factory, the controllers and the elector; serves /healthz, /readyz,
//!            /metrics; on a signal stops them in order
//! ```
//!
//! ## What it stands on
//!
//! `ferrokube-core` (the object model), `ferrokube-informer` (the caches; it does no I/O),
//! `ferrokube-client` (the requests, and `ListWatch`, where the informers meet the client) and
//! `ferrokube-workqueue`. Nothing in ferrokube but the front crate `ferrokube` depends on it.
//!
//! ## Cargo features
//!
//! - `shard` (off): the `shard` module, `Controller::shard` and `ManagerBuilder::shard`.

pub mod controller;
mod deadline;
pub mod freshness;
pub mod leader;
pub mod manager;
#[cfg(feature = "shard")]
pub mod shard;
pub mod toolkit;

/// The sources of the modules whose docs `ferrokube::view` serves beside each stage of its page
/// (path under `src/`, text): embedded here so that they ship with this crate.
#[doc(hidden)]
pub const MODULE_SOURCES: &[(&str, &str)] = &[
    ("controller/source.rs", include_str!("controller/source.rs")),
    ("controller/worker.rs", include_str!("controller/worker.rs")),
    (
        "freshness/consistency.rs",
        include_str!("freshness/consistency.rs"),
    ),
    ("shard/assigner.rs", include_str!("shard/assigner.rs")),
];
