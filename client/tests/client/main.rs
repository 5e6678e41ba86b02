//! The client (`ferrokube_client`: `client`, `config`, `api`, `watch`) as one test binary
//! (`cargo test -p ferrokube-client`): its HTTP behaviour against a scripted server, connection
//! lifetimes, credentials kept out of `Debug`, the write gate, and network faults that give no
//! signal (a proxy that freezes connections), on the embedded server.
//!
//! With the crate's `e2e` feature, module [`e2e`] too: the same client against a real
//! kube-apiserver (the kubeconfig's; `scripts/e2e.sh` starts one).

mod connections;
mod credentials_debug;
#[cfg(feature = "e2e")]
mod e2e;
mod http;
mod network_faults;
mod write_gate;
