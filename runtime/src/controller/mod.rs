//! # The controller layer
//!
//! A controller makes the world match what objects ask for: a ReplicaSet asks for three pods, a
//! DNSRecord for an entry at a provider. This module is the runtime that calls your code at the
//! right times, and the toolkit that code needs, so a controller author writes only what is
//! specific to their kind. It sits on top of every other layer of ferrokube:
//!
//! ```text
//!  controller  (this module: Controller, Reconciler, toolkit)
//!      │ uses
//!      ├── informer  (ferrokube-informer: list+watch, caches, handlers; shared by a factory)
//!      ├── workqueue (ferrokube-workqueue: dedup, one worker per key, backoff, priorities)
//!      └── client    (ferrokube-client: Client, Api; the informers list and watch through it)
//! ```
//!
//! It lives in `ferrokube-runtime` with the leader election and the manager: the layer that
//! joins the client to the informers and the workqueue. Nothing below it depends on it.
//!
//! ## The controller pattern
//!
//! ```text
//!                 ┌────────── sources ──────────┐
//!  API server ─watch─▶ informer (K) ─┐          │   each change becomes a *key* (namespace/name)
//!             ─watch─▶ informer (C) ─┼─ filters ─┼─▶ WorkQueue ──▶ worker ──▶ reconcile(Arc<K>)
//!  outside world ─▶ Stream of keys ──┘          │   (dedup,        │  reads the cache, never
//!                 └─────────────────────────────┘    backoff)      │  the event; writes to the
//!                                                         ▲        │  server or the world
//!                          Action: requeue after d / ─────┘        ▼
//!                          rate-limited / await change     API server, outside systems
//! ```
//!
//! - **Edge-triggered**: nothing runs unless something happened: an event, a resync, a retry, a
//!   requeue the reconcile asked for, a key from an outside source.
//! - **Level-driven**: what runs never asks *what happened*, only *what is wanted* (the object's
//!   spec) and *what is* (the caches, the outside world). So a missed, duplicated or reordered
//!   event cannot mislead it; the next reconcile of that key repairs whatever a lost one would have.
//! - **Keys, not events**: the queue holds `namespace/name`, not the event. Ten updates of one
//!   object while a worker is busy become one reconcile of its latest state, and a key is never
//!   reconciled by two workers at once (the queue's guarantee).
//! - **Idempotent reconciles**: a key is reconciled again for a state it has handled already (a
//!   resync, a retry after a timeout whose write did land, a restart), so a reconcile must converge
//!   instead of repeating actions: create what is missing, not "create one".
//! - What the cache cannot know yet (the pods you created a moment ago) is covered by
//!   [`expectations`]; reconciling from a cache older than your own last write (a 409, a repeated
//!   action, a status going backwards) by the [`consistency`] store, which the workers check
//!   before each reconcile; acting on the outside world before the object can disappear is
//!   covered by [`finalizer`].
//!
//! ## A controller in one screen
//!
//! ```no_run
//! use std::sync::Arc;
//! use ferrokube_runtime::controller::{Action, Context, Controller, Reconciler};
//! use ferrokube_core::Scope;
//! use ferrokube_client::Client;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Stamp;
//!
//! impl Reconciler<Deployment> for Stamp {
//!     type Error = ferrokube_client::Error;
//!     async fn reconcile(&self, deployment: Arc<Deployment>, ctx: Context) -> Result<Action, Self::Error> {
//!         // ... read caches, write what is missing (idempotently) through ctx.api_in_primary_namespace::<ConfigMap>() ...
//!         Ok(Action::await_change())
//!     }
//! }
//!
//! # async fn demo(client: Client) -> Result<(), Box<dyn std::error::Error>> {
//! Controller::<Deployment>::new(client, Scope::all())
//!     .owns::<ConfigMap>(Scope::all())
//!     .workers(2)
//!     .run(Stamp, async { let _ = tokio::signal::ctrl_c().await; })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! The reconcile writes through its [`Context`]: each write is recorded for the key in the
//! [`consistency`] store, which the workers check before the next reconcile of that key.
//!
//! ## Where each concept lives
//!
//! This module is the runtime; the freshness guards and the toolkit live in modules of their own
//! ([`crate::freshness`], [`crate::toolkit`]) and are named here too, under the paths authors know
//! (`controller::finalizer`, `controller::Expectations`).
//!
//! | module | holds | upstream counterpart |
//! |---|---|---|
//! | [`builder`] | [`Controller`]: records the primary, owned, watched and stream sources, filters per kind, options | controller-runtime's builder, kube-rs's `Controller` |
//! | `run` | what `Controller::run` does: check, make, attach, sync, gate, spawn, drain | controller-runtime's `Controller.Start` |
//! | [`reconciler`] | [`Reconciler`]: reconcile, deletions, error policy; [`from_fn`] | `reconcile.Reconciler` |
//! | [`context`] | [`Context`]: the key, the retries, and the client whose writes are recorded for the key | kube-rs's `Context`, controller-runtime's `reconcile.Request` |
//! | [`action`] | [`Action`]: await change, requeue after, rate-limited | `reconcile.Result`, kube-rs `Action` |
//! | [`source`] | how events become keys; priorities; deletions on their way to the worker | `handler.EnqueueRequestForOwner`, `source.Channel` |
//! | [`filter`] | [`Filter`]: generation, labels, annotations, resourceVersion, any closure; per kind, with defaults | `predicate`, `builder.WithPredicates` |
//! | `worker` | the workers' loop: span, metrics, panics, requeue | `controller.reconcileHandler` |
//! | [`ownership`] | [`Ownership`](ownership::Ownership): which primaries this replica reconciles, asked by the run and the workers; the one interface to sharding (its impl, feature `shard`, in `sharded`) | kubernetes-controller-sharding's shard filter |
//! | [`metrics`] | [`Metrics`]: `controller_runtime_*`, with the queue's and informers' | controller-runtime's metrics |
//! | [`crate::freshness`] | the consistency store (the automatic skip), [`ReadYourWrites`], [`Expectations`]: never acting on a cache older than your own writes | KEP-5647; `pkg/controller` expectations |
//! | [`crate::toolkit`] | what a reconcile calls: [`claim`], [`events`], [`finalizer`], [`conditions`], [`owner`], [`stabilization`] | `controllerutil`, `tools/record` |

pub mod action;
pub mod builder;
pub mod context;
pub mod filter;
pub mod metrics;
pub mod ownership;
pub mod reconciler;
mod run;
#[cfg(feature = "shard")]
mod sharded;
pub mod source;
mod wiring;
mod worker;

pub use action::Action;
pub use builder::{Controller, ControllerError, Objects, controller_queue};
pub use context::{CachedReads, Context};
pub use filter::{Change, Filter};
pub use metrics::Metrics;
pub use reconciler::{FnReconciler, Reconciler, from_fn};
pub use source::{Enqueue, LOW_PRIORITY, ObjectEvent};

// What a controller author reaches for beside the runtime: the freshness guards
// (`crate::freshness`) and the toolkit (`crate::toolkit`), each at home in its own module, named
// here too under the paths authors know (`controller::finalizer`, `controller::Expectations`).
pub use crate::freshness::{
    ConsistencyStore, Expectations, ReadError, ReadYourWrites, Stale, Writes,
};
pub use crate::freshness::{consistency, expectations, read_your_writes, record};
pub use crate::toolkit::{EventRecorder, EventType, Stabilization};
pub use crate::toolkit::{claim, conditions, events, finalizer, owner, stabilization};

/// The current time as the API's timestamps count it (events, conditions, a pod's readiness):
/// the object model's one reading of the clock, here where a controller looks for it.
pub use ferrokube_core::time::now;

#[cfg(test)]
mod error_conversions {
    //! Every error a helper returns converts with `?` into the two error types reconcilers use
    //! most, `Box<dyn Error + Send + Sync>` (the README's) and `anyhow::Error`, whatever error the
    //! caller's own closures return. This module does not compile if one does not.

    use super::ControllerError;
    use crate::freshness::record::ReadError;
    use crate::toolkit::claim::ClaimError;
    use crate::toolkit::finalizer::{FinalizerError, FinalizerPatchError};
    use crate::toolkit::owner::{CreateOrUpdateError, OwnerError};

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    fn boxed<E>(error: E) -> Result<(), BoxError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Err(error)?
    }

    fn anyhow<E>(error: E) -> anyhow::Result<()>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Err(error)?
    }

    fn both<E>(error: impl Fn() -> E) -> (String, String)
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let boxed = boxed(error()).expect_err("an error").to_string();
        let anyhow = anyhow(error()).expect_err("an error").to_string();
        (boxed, anyhow)
    }

    #[test]
    fn controller_helper_errors_convert_into_box_dyn_error_and_anyhow() {
        let caller = || -> BoxError { "the provider is down".into() };
        let (boxed, anyhow) = both(|| FinalizerError::Cleanup(caller()));
        assert_eq!(boxed, "cleanup failed: the provider is down");
        assert_eq!(anyhow, boxed);
        let (boxed, _) = both(|| CreateOrUpdateError::Mutate(caller()));
        assert_eq!(boxed, "the mutate function failed: the provider is down");
        let owned = || OwnerError::AlreadyOwned {
            kind: "ReplicaSet".into(),
            name: "web".into(),
        };
        both(|| CreateOrUpdateError::<OwnerError>::Mutate(owned()));
        both(|| FinalizerError::<String>::Apply("x".into()));
        both(|| FinalizerPatchError::Unnamed);
        both(|| ClaimError::IncompleteOwner { missing: "uid" });
        both(owned);
        let stale = || crate::freshness::Stale {
            key: None,
            informer: "configmaps".into(),
            wanted_version: Some(1),
            wanted_gone: Vec::new(),
            seen_version: String::new(),
            waited: std::time::Duration::ZERO,
        };
        both(|| ReadError::from(stale()));
        both(stale);
        both(|| ControllerError::CacheSync("c".into()));
        both(|| ferrokube_client::Error::InvalidRequest("x".into()));
    }
}
