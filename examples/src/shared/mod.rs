//! Small pieces the programs share: result files, Go-style durations on the command line, logs to
//! stderr, a realistic Pod for the benchmarks, a ReplicaSet builder.

pub mod args;
pub mod go_duration;
pub mod logging;
pub mod realistic_pod;
pub mod replica_set;
