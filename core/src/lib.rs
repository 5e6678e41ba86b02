//! # ferrokube-core
//!
//! ferrokube's object model: the values every other layer talks about, and the pure rules on them.
//! Both sides of the wire use it: the client stack (informers, controllers) and the embedded API
//! server. Neither depends on the other for these concepts; both depend on this crate.
//!
//! | module | holds | client-go / apimachinery counterpart |
//! |---|---|---|
//! | [`object`] | [`Object`] (what we need of an object: its metadata), [`ObjectKey`] (`namespace/name`), [`drop_managed_fields`] | `metav1.Object`, `cache.MetaNamespaceKeyFunc` |
//! | [`kind`] | [`Kind`]: what it takes to know a type's kind (nothing for typed kinds, an [`ApiResource`] for dynamic objects); [`ApiResource`]: where a kind is served | `schema.GroupVersionResource`, kube-rs's `Resource::DynamicType` |
//! | [`labels`] | [`LabelSelector`]: the grammar (`app=web,tier in (a,b),!canary`), a workload's `spec.selector`, matching | `labels.Selector` |
//! | [`fields`] | [`FieldSelector`]: the grammar (`metadata.name=web,status.phase!=Running`) and matching | `fields.Selector` |
//! | [`scope`] | [`Scope`] (namespace, label selector, field selector, shard selector of a list or watch) and [`ScopeMatcher`] | the options of `NewFilteredSharedInformerFactory` |
//! | [`shard`] | [`ShardSelector`]: server-side sharding's hash ranges over `metadata.uid` or `.namespace`, FNV-1a 64, the wire text | `k8s.io/apimachinery/pkg/sharding` |
//! | [`time`] | the wall clock read in one place ([`time::now`]), RFC 3339 as the API writes it | `metav1.Now`, `time.RFC3339` |
//! | [`backoff`] | [`Backoff`]: exponential backoff with jitter, reset after a healthy stretch (the reflector's and the watcher's reconnect waits) | `wait.Backoff`, the reflector's `BackoffManager` |
//! | [`id`] | random version-4 UUIDs ([`id::uuid_v4`]): `metadata.uid`, a candidate's identity | `uuid.NewUUID` |
//! | [`random`] | every random choice of every layer ([`random::with_rng`]), seedable per thread for repeatable runs ([`random::seed_thread`]) | |
//! | [`protobuf`] | the schema table of Kubernetes' protobuf encoding for every built-in kind of 1.37 ([`protobuf::top_level`]), generated from Kubernetes' `generated.proto` files and Go types; data only, decoders live with their users | the `generated.proto` files of k8s.io/api, `runtime/serializer/protobuf` |
//! | [`pipeline`] | [`pipeline_event!`]: the one macro every layer emits its `tracing` events through, and [`pipeline_enabled!`]: whether anyone records them (from `ferrokube-pipeline`, re-exported) | |
//!
//! ## Why there is no I/O here
//!
//! Everything in this crate is a value or a function of its arguments; the only things it reads
//! from the world are the system clock ([`time`], [`backoff`]) and the thread's random numbers
//! ([`random`]: [`id`], [`backoff`]'s jitter), which a test may seed. It
//! opens no socket, spawns no task and needs no tokio runtime. That buys three things:
//!
//! - **One grammar, by construction.** The server parses `?labelSelector=` with the same
//!   [`LabelSelector`] the informer's listers match with, so client and server cannot disagree
//!   about what `tier notin (a)` selects.
//! - **Layers that do not lean sideways.** The embedded server needs selectors and uids, not
//!   informers; with this crate at the bottom it depends on neither the informer nor the client.
//! - **Rules tested without a server.** Each parser and matcher is unit-tested with plain values.
//!
//! ## How data flows through the layers above
//!
//! ```text
//!                  ferrokube: client, list_watch, controller, manager, leader, shard, view
//!                   │  Scope → ?labelSelector=&fieldSelector= ; keys → WorkQueue ; now() on
//!                   │  events, conditions and Leases ; uuid_v4() as a candidate's identity
//!          ┌────────┴──────────────────┐
//!   ferrokube-informer           ferrokube-apiserver            ferrokube-workqueue
//!   Reflector → DeltaFifo →      parses ?labelSelector= and      (generic keys: no
//!   Store, keyed by ObjectKey;   ?fieldSelector=, stamps uids     object model, so it
//!   Lister filters with          and creationTimestamp            does not depend on
//!   LabelSelector; one informer         │                         this crate)
//!   per (type, Scope)                   │
//!          └────────┬───────────────────┘
//!             ferrokube-core (this crate): Object, ObjectKey, Scope, LabelSelector,
//!             FieldSelector, time, id, pipeline_event!
//! ```
//!
//! Follow one Pod: the embedded server stamps its `metadata.uid` ([`id::uuid_v4`]) and
//! `creationTimestamp` ([`time::now_rfc3339`]), and answers a list with the objects its
//! [`LabelSelector`] and [`FieldSelector`] select. The client decodes it into a type that is an
//! [`Object`]; the informer's reflector, fifo and store file it under [`ObjectKey::of`]; a factory
//! shares one informer per type and [`Scope`]; a handler puts the same key in the workqueue; and a
//! worker that wrote the Pod asks a [`ScopeMatcher`] whether its informer will ever show that write.
//! Each of those steps is a [`pipeline_event!`] for the live view.

pub mod backoff;
pub mod fields;
pub mod id;
pub mod kind;
pub mod labels;
pub mod object;
pub mod pipeline;
pub mod protobuf;
pub mod random;
pub mod scope;
pub mod shard;
pub mod time;

pub use backoff::Backoff;
pub use fields::{FieldSelector, FieldSelectorError};
pub use kind::{ApiResource, Kind};
pub use labels::{LabelSelector, SelectorError};
pub use object::{ManagedFields, Object, ObjectKey, drop_managed_fields};
pub use scope::{Scope, ScopeMatcher};
pub use shard::{ShardField, ShardRange, ShardRangeError, ShardSelector, shard_hash};

pub use ferrokube_pipeline::{pipeline_enabled, pipeline_event};
