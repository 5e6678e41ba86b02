//! The sample ReplicaSet controller (`ferrokube_examples::replicaset`) as one test binary: under
//! injected faults and a scripted churn on the embedded server, the demo as a process, and, with
//! the `e2e` feature, the same churn and the parity with kube-controller-manager on a real
//! kube-apiserver (`scripts/e2e.sh` runs `parity_e2e::` and `stale_e2e::`).

mod demo;
mod faults;
mod sharded;
mod stale;

#[cfg(feature = "e2e")]
mod kcm;
#[cfg(feature = "e2e")]
mod parity_e2e;
#[cfg(feature = "e2e")]
mod stale_e2e;
