//! The second sample, as a library: DnsRecords (a CustomResource) kept equal to the records of a DNS
//! provider outside Kubernetes. The binary `dns` (`src/bin/dns.rs`) runs it; `tests/dns.rs` checks
//! it converges.
//!
//! | module | what |
//! |---|---|
//! | [`record`] | the custom resource's Rust type and its CustomResourceDefinition |
//! | [`provider`] | the simulated provider: records, drift (announced or silent), a change feed |
//! | [`controller`] | the reconciler: finalizer, provider writes, an owned ConfigMap, `Ready` |
//! | [`story`] | the script (drift, edits, a restart, deletions) and the convergence check |

pub mod controller;
pub mod provider;
pub mod record;
pub mod story;
