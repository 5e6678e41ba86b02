//! The third sample, written the way the README teaches, from scratch: Buckets (a custom resource
//! from `#[derive(CustomResource)]`) kept equal to the buckets of an object store outside
//! Kubernetes. The binary `bucket` (`src/bin/bucket.rs`) runs it on the embedded API server;
//! `tests/bucket.rs` takes it through creation, edits, edits behind its back, a namespace label
//! that moves its buckets, and deletion with nothing left over.
//!
//! Why a third sample: the ReplicaSet sample is a port of upstream's controller and the dns sample
//! predates the derive and the reconcile context. This one uses only what a new controller author
//! finds in README.md and the API docs, and is the shape to copy:
//!
//! ```text
//!  resource.rs:   BucketSpec + BucketStatus ──derive──▶ Bucket, Bucket::crd()
//!  controller.rs: Controller<Bucket> ◀─ Buckets, owned ConfigMaps, Namespaces (cluster-scoped)
//!                     │ reconcile(bucket, ctx): writes only through ctx
//!                     ▼
//!                 finalizer ─▶ store.rs (outside) ─▶ ConfigMap `<name>-bucket` ─▶ status Ready
//! ```
//!
//! | module | what |
//! |---|---|
//! | [`resource`] | the custom resource: spec, status, printer columns, validation |
//! | [`store`] | the simulated object store: buckets by name, tampering behind the controller's back; the `BucketStore` seam the controller reaches it through |
//! | [`controller`] | the controller's sources and filters, and the reconciler |
//! | [`mutant`] | five deliberate bugs the reconciler can be built with, for the fault explorer's tests |

pub mod controller;
pub mod mutant;
pub mod resource;
pub mod store;
