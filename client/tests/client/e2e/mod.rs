//! The client against a real kube-apiserver (compiled with the crate's `e2e` feature only; the
//! cluster is the kubeconfig's, `KUBECONFIG`): `scripts/e2e.sh` runs each module as a suite,
//! `cargo test -p ferrokube-client --features e2e --test client -- e2e::client::`.
//!
//! | module | what it checks |
//! |---|---|
//! | [`client`] | the wire: TLS, tokens, errors, watch framing, protobuf, pagination |
//! | [`kubeconfigs`] | the kubeconfigs kubectl accepts, we accept (and what it refuses, we refuse) |
//! | [`network_faults`] | the dead-connection drill beside client-go, the lease-window drill |

mod client;
mod kubeconfigs;
mod network_faults;
