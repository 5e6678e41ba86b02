//! The controller layer (`ferrokube_runtime::controller`) against the embedded API server, as one test
//! binary: the runtime, the toolkit, the stale-cache protection and the read-your-own-writes
//! client. (`shard_controller.rs` is a binary of its own: it installs a process-wide `tracing`
//! subscriber.) With the crate's `e2e` feature, module [`e2e`] too: the author traps whose answer
//! depends on the server, against a real kube-apiserver (the kubeconfig's; `scripts/e2e.sh`).

mod author_traps;
mod cleanup_once;
mod context;
mod dynamic;
#[cfg(feature = "e2e")]
mod e2e;
mod mirror;
mod ownership;
mod read_your_own_writes;
mod runtime;
mod stale;
mod toolkit;
mod traps;
