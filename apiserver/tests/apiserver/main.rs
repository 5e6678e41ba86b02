//! The API server's own tests (`cargo test -p ferrokube-apiserver --test apiserver`), one test
//! binary (one link, one run) of six suites:
//!
//! | module | what it checks |
//! |---|---|
//! | [`cel`] | CRD validation rules in CEL: the corpus of tests/fixtures/cel_corpus.json against kube-apiserver 1.37.2's recorded answers |
//! | [`conformance`] | the embedded server against kube-apiserver: the same cases, the same observations |
//! | [`discovery`] | discovery documents are rendered once per set of served types, not per request |
//! | [`faults`] | the fault switches over HTTP (`/ferrokube/faults`) and the pod simulator |
//! | [`kubectl`] | kubectl 1.32 as a real client: apply, edit, scale, server-side apply, generators |
//! | [`tables`] | `kubectl get` and the Table documents, against kube-apiserver's |
//!
//! They drive the server through the ferrokube client (`ferrokube_client::...`), as a controller would.
//! `cel`, `conformance` and `tables` compare with a real kube-apiserver too with `--features e2e` and a
//! kubeconfig (`scripts/e2e.sh` runs them so: `cargo test -p ferrokube-apiserver --features e2e
//! --test apiserver -- cel:: conformance:: tables::`).

mod cel;
mod conformance;
mod connection_abuse;
mod discovery;
mod faults;
mod kubectl;
mod tables;
