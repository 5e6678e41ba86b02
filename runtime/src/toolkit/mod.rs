//! # The controller toolkit: what a reconcile calls
//!
//! Why this is a module of its own: the controller runtime ([`crate::controller`]) decides *when*
//! a reconcile runs; these helpers are what a reconcile *does* with the objects it is given, the
//! same few chores in every controller (client-go's `controllerutil`, `ControllerRefManager`,
//! `tools/record`). Each is a small module that a reconcile calls with a client or an [`Api`];
//! none of them knows the runtime's workers or queue, so each can be used (and tested) on its own:
//!
//! ```text
//!  reconcile(obj, ctx)
//!    ├─ finalizer:     add ours; on delete run the cleanup, then remove it
//!    ├─ claim:         adopt matching orphans, release children that no longer match (owner refs)
//!    ├─ owner:         set controller references; create_or_update a child
//!    ├─ conditions:    set status conditions with observedGeneration
//!    ├─ stabilization: lower a wanted count only to the highest wanted within a window
//!    └─ events:        record an Event (queued, correlated, spam-filtered, posted in order)
//! ```
//!
//! | module | holds | upstream counterpart |
//! |---|---|---|
//! | [`claim`] | adopting orphans and releasing children that no longer match | `ControllerRefManager` |
//! | [`conditions`] | status conditions with `observedGeneration` | `meta.SetStatusCondition` |
//! | [`events`] | [`EventRecorder`]: events, correlated, spam-filtered, retried | `tools/record` |
//! | [`finalizer`] | add, run cleanup on delete, remove | kube-rs `finalizer`, `controllerutil` |
//! | [`owner`] | controller references, `create_or_update` | `controllerutil` |
//! | [`stabilization`] | [`Stabilization`]: the HPA's scale-down stabilization window | the HPA controller |
//!
//! [`Api`]: ferrokube_client::Api

pub mod claim;
pub mod conditions;
pub mod events;
pub mod finalizer;
pub mod owner;
pub mod stabilization;

pub use events::{EventRecorder, EventType};
pub use stabilization::{Adaptive, Stabilization};
