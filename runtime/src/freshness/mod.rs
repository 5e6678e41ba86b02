//! # Freshness: a controller acting on a cache that has not caught up with what it did
//!
//! Why this is a module of its own: the controller runtime ([`crate::controller`]) reads every
//! object from informer caches, and a cache lags the API server. A reconcile that trusts a cache
//! older than its own last write repeats an action, writes with an old resourceVersion (409) or
//! writes a status that goes backwards. The guards against that live here, apart from the runtime
//! that calls them, so each can be read (and tested) alone:
//!
//! ```text
//!  reconcile ─ write through ctx ─▶ API server ─▶ resourceVersion r ──▶ recorded for the key
//!                                                                        │ (consistency)
//!  watch ─▶ informer store reaches r ────────────────────────────────────┤
//!                                                                        ▼
//!  worker takes the key: caches at ≥ r? ── yes ─▶ reconcile    no ─▶ skip, requeue (automatic)
//!  ctx reads through a cache: wait (bounded) until it shows the write (read_your_writes)
//!  children created or deleted and not yet seen: hold further creates (expectations)
//! ```
//!
//! | module | holds | when an author meets it |
//! |---|---|---|
//! | [`consistency`] | [`ConsistencyStore`]: the controller's own writes per key; the workers skip a reconcile until the caches show them | never: automatic for writes made through the `Context` |
//! | [`read_your_writes`] | [`ReadYourWrites`]: a client whose cache reads wait until they show its own completed writes | reading a cache right after writing, outside a reconcile |
//! | [`expectations`] | [`Expectations`]: creates and deletes asked for and not yet seen in a cache | a controller that counts its children (ReplicaSet) |
//!
//! Nothing here depends on the controller runtime; the runtime depends on this.

pub mod consistency;
pub mod expectations;
pub mod read_your_writes;

pub use consistency::{ConsistencyStore, StaleCache, Writes};
pub use expectations::Expectations;
pub use read_your_writes::{ReadError, ReadYourWrites};
