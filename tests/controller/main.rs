//! The controller layer (`ferrokube::controller`) against the embedded API server, as one test
//! binary: the runtime, the toolkit, the stale-cache protection and the read-your-own-writes
//! client. (`shard_controller.rs` is a binary of its own: it installs a process-wide `tracing`
//! subscriber.)

mod author_traps;
mod cleanup_once;
mod context;
mod dynamic;
mod mirror;
mod ownership;
mod read_your_own_writes;
mod readme_testing;
mod runtime;
mod stale;
mod toolkit;
mod traps;
