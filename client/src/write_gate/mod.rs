//! The write gate: the seam through which a layer above the client decides, write by write,
//! whether a [`Client`](crate::Client)'s writes may leave.
//!
//! The client knows nothing of leases. A process that must write only while it holds one (a
//! leader-elected controller) hands its client a [`WriteGate`] with
//! [`Client::with_write_gate`](crate::Client::with_write_gate); the runtime's leader election
//! (`ferrokube::leader::Leadership`) is the gate ferrokube provides, and it plugs in here from the
//! layer above, so the arrow runs one way: the leader depends on the client, never back.
//!
//! ```text
//!   Api::create ─▶ Client: rate limit ─▶ credentials ─▶ gate.admit() ──no──▶ Error::NotLeader (unsent)
//!                                                         │ yes: a WritePermit
//!                                                         ▼
//!                           hyper has a connection, polls the body ─▶ gate.admit() again ──no──▶ aborted
//!                                                         │ yes
//!                                                         ▼
//!                                answer's head arrives ─▶ permit dropped (the gate may count it done)
//!                                no answer ever        ─▶ permit's on_abandon (it may still land)
//! ```
//!
//! A refusal is a [`NotLeader`], carried by [`Error::NotLeader`](crate::Error::NotLeader). See the
//! [client's module docs](crate::client#write-gates) for why a write is checked twice.
//!
//! Two modules: `gate`, the trait and its permit and refusal (what a layer above implements), and
//! `enforce`, how the client holds each write to the gate's word. The client's errors name the
//! refusal, and the enforcement returns the client's errors, so the trait sits in a module of its
//! own that needs neither.

pub(crate) mod enforce;
mod gate;

pub use gate::{NotLeader, NotLeaderReason, WriteGate, WritePermit};
