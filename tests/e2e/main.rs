//! End-to-end tests against a real API server (feature `e2e`; `scripts/e2e.sh` starts
//! kube-apiserver and runs each module in turn): the client, kubeconfigs kubectl accepts, the
//! informer, and network faults beside client-go. `KUBECONFIG=~/.kube/config cargo test --features
//! e2e --test e2e -- client::` runs the client's on a cluster of yours.

mod client;
mod informer;
mod kubeconfigs;
mod network_faults;
