//! # Freshness: a controller acting on a cache that has not caught up with what it did
//!
//! Why this is a module of its own: the controller runtime ([`crate::controller`]) reads every
//! object from informer caches, and a cache lags the API server. A reconcile that trusts a cache
//! older than its own last write repeats an action, writes with an old resourceVersion (409) or
//! writes a status that goes backwards. The guards against that live here, apart from the runtime
//! that calls them, so each can be read (and tested) alone.
//!
//! One [record] keeps what this process wrote and what its caches have shown, fed by one
//! write observer on the client; the automatic skip and the cached reads are views over it:
//!
//! ```text
//!  write through ctx / a ReadYourWrites api ─▶ API server ─▶ answer at resourceVersion r
//!                                                               │ the client's write observer
//!                                                               ▼
//!        record: per account (a reconcile's key, or one client), per informer:
//!                version ≥ r │ object (uid) gone │ hidden uids        (the sweep bounds it)
//!           │                              │                               │
//!   workers: caches at ≥ r? ─ no ─▶     ctx.cache() / ReadYourWrites:     Stale { key, informer,
//!   skip, requeue (automatic)           wait (≤ 3 s) until they are  ──▶   wanted, seen, waited }
//!
//!  children created or deleted and not yet seen: hold further creates (expectations, counted)
//! ```
//!
//! ## What an author does
//!
//! | situation | what to do | what happens | module |
//! |---|---|---|---|
//! | a reconcile writes through its `Context` (`ctx.api*`, toolkit helpers given such an `Api`) | nothing | the next reconcile of the key is skipped and requeued ([`DEFAULT_STALE_REQUEUE`], or the write's own event) until every cache shows the write | [`consistency`] ([`ConsistencyStore`]) |
//! | a reconcile reads a cache after writing (lists its children) | read through `ctx.cache::<K>(&scope)?` | the read waits until that informer shows the key's writes | [`crate::controller::Context::cache`], over [`consistency`] |
//! | code outside a reconcile (a webhook, a CLI, a test) writes, then reads the cache | write through [`ReadYourWrites::api`], read with its `get` / `list` | the read waits until the informer shows this client's completed writes | [`read_your_writes`] |
//! | a controller counts its children (ReplicaSet: pods to create) | [`Expectations`]: expect, observe, check `satisfied` | no second create for a child not yet seen | [`expectations`] |
//! | a record, its states, its bounds | — | — | [`record`] |
//!
//! One timeout: every cached read waits at most [`DEFAULT_MAX_WAIT`] (3 s) unless given its own
//! `max_wait`. One error: a cache that does not show the writes is a [`Stale`] (in a read's
//! [`ReadError::Stale`]); the workers' skip carries the same type, with `waited` zero.
//!
//! Nothing here depends on the controller runtime; the runtime depends on this.

pub mod consistency;
pub mod expectations;
pub mod read_your_writes;
pub mod record;

pub use consistency::{ConsistencyStore, DEFAULT_STALE_REQUEUE, Writes};
pub use expectations::Expectations;
pub use read_your_writes::ReadYourWrites;
pub use record::{DEFAULT_MAX_WAIT, GoneObject, ReadError, Stale};
