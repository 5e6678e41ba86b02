//! # ferrokube-examples
//!
//! ferrokube's samples and the programs that measure it, as one package of the workspace, so that
//! what they share is a module and the tests that start them as processes get them the way cargo
//! guarantees (`CARGO_BIN_EXE_replicaset`).
//!
//! | where | what |
//! |---|---|
//! | [`replicaset`], `src/bin/replicaset/` | the sample ReplicaSet controller and the demo (`cargo run -p ferrokube-examples`) |
//! | [`dns`], `src/bin/dns.rs` | the DnsRecord sample: a CustomResource kept equal to a drifting outside provider |
//! | [`bucket`], `src/bin/bucket.rs` | the Bucket sample: a derived custom resource, an outside store, owned ConfigMaps and a namespace label, the new way |
//! | [`mutants`] | the mutant corpus: each sample's deliberate bugs, their classes, and the explorer tests that find them |
//! | [`shared`] | what the programs share |
//! | `src/bin/bench_*.rs` | the benchmark programs of the guide's performance tables (raw data under `benches/`) |
//! | `src/bin/informer_deltas.rs`, `leader_candidate.rs`, `workqueue_basics.rs` | small programs, one concept each |
//! | `tests/` | the samples under faults, the stale-cache churn, the leader and shard drills (processes), and their kube-apiserver twins (feature `e2e`) |
//!
//! Everything here uses only ferrokube's public API, as a controller author's code would.

pub mod bucket;
pub mod dns;
pub mod mutants;
pub mod replicaset;
pub mod shared;
