//! The drills: replicas of the sample ReplicaSet controller run as processes (the package's
//! `replicaset` binary), killed, stopped and restarted while they elect a leader (`leader`) or
//! share a ring (`shard`). On the embedded server in `cargo test`; with the `e2e` feature, on a real
//! kube-apiserver with client-go's durations (`leader_e2e`, `shard_e2e`; `scripts/e2e.sh`).

mod cluster;
mod leader;
mod shard;

#[cfg(feature = "e2e")]
mod leader_e2e;
#[cfg(feature = "e2e")]
mod shard_e2e;
