//! The sample ReplicaSet controller, as a library: the binary `replicaset` (the demo,
//! `src/bin/replicaset/`) runs it, and so do the tests and drills (`tests/`) and the stale-cache
//! benchmark (`src/bin/bench_stale.rs`).
//!
//! | module | what |
//! |---|---|
//! | [`controller`] | the controller: the same decisions as kube-controller-manager's, on ferrokube |
//! | [`world`] | what the cluster looks like, read back for the checks: ReplicaSets and their pods |
//! | [`churn`] | a scripted churn (scale up and down, pods killed) for the stale-cache comparison |

pub mod churn;
pub mod controller;
pub mod world;
