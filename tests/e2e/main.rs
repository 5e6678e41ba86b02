//! End-to-end tests against a real API server (feature `e2e`; `scripts/e2e.sh` starts
//! kube-apiserver and runs each module in turn): the client, kubeconfigs kubectl accepts, the
//! informer, network faults beside client-go, and `#[derive(CustomResource)]`. `KUBECONFIG=~/.kube/config cargo test --features
//! e2e --test e2e -- client::` runs the client's on a cluster of yours.

mod client;
mod derive;
/// The story of a derived custom resource, shared with the embedded server's test.
#[path = "../derive/story.rs"]
mod derive_story;
mod informer;
mod kubeconfigs;
mod network_faults;
