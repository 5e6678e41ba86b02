//! The informer (`ferrokube_informer`) as one test binary (`cargo test -p ferrokube-informer`):
//! over the in-memory fake lister-watcher ([`fake`]: no HTTP, every fault on demand) and against
//! the embedded API server fed through the client ([`embedded`]). With the crate's `e2e` feature,
//! module [`e2e`] too: the same convergence checks against a real kube-apiserver (the
//! kubeconfig's; `scripts/e2e.sh`).
//!
//! (`pipeline_seam`, the instrumentation seam's test that installs a process-wide `tracing`
//! subscriber, is in crate `ferrokube-pipeline`'s tests.)

#[cfg(feature = "e2e")]
mod e2e;
mod embedded;
mod fake;
