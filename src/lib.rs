//! # ferrokube
//!
//! Kubernetes controller machinery written from scratch in Rust, in the shape of Go's client-go.
//!
//! This crate is the one a controller author puts in `Cargo.toml`; it re-exports the member crates so
//! that every concept has one path:
//!
//! | module | what it is | client-go counterpart |
//! |---|---|---|
//! | [`core`] | the object model every layer shares: `Object`, `ObjectKey`, `Scope`, label and field selectors, `now()`, uids; no I/O | `apimachinery` (`metav1`, `labels`, `fields`) |
//! | [`config`] | kubeconfig (merged like kubectl), in-cluster, credentials that rotate | `tools/clientcmd`, `rest.Config` |
//! | [`client`] | pooled HTTP/1.1 (or, opted into, HTTP/2) connections to the API server, rate limit, retries | `rest.RESTClient` |
//! | [`api`] | the verbs on one resource, typed (`Api<Pod>`) or dynamic (`Api<DynamicObject>`) | clientset, `dynamic` |
//! | [`watch`] | watch streams decoded incrementally, and a watcher that resumes and says when to relist | `watch`, `RetryWatcher` |
//! | [`error`] | the server's `Status` as a typed error (`is_conflict()`, `is_gone()`, …) | `api/errors` |
//! | [`workqueue`] | deduplicating keyed queue with Get/Done, delays, rate limits, priorities, metrics | `util/workqueue` |
//! | [`informer`] | Reflector, Store, Indexers, Listers, SharedIndexInformer, factory | `tools/cache`, `informers` |
//! | [`list_watch`] | `Api<K>` as the informer's ListerWatcher, `Client` as a factory's source | `cache.ListWatch` |
//! | [`leader`] | leader election on a Lease, with a write gate for the leader's client | `tools/leaderelection` |
//! | [`controller`] | the reconciler runtime (sources, filters, workers, metrics) and the toolkit: expectations, claiming, events, finalizers, conditions, owner references | kubernetes' `pkg/controller`, `tools/record`; controller-runtime |
//! | [`view`] | the live view: a web page following each event through the machinery, fed by `tracing` | |
//! | `apiserver` | an in-process API server (the real REST API, fault injection, a pod simulator); with the `apiserver` feature | envtest's kube-apiserver, kwok |
//!
//! ## Cargo features
//!
//! - `apiserver` (off by default): `ferrokube::apiserver`, the embedded API server of the
//!   `ferrokube-apiserver` crate, for a controller's own tests and demos. A controller does not need
//!   it, and without it the build has no HTTP server of the API, no certificate generation and no
//!   TLS acceptor. Turn it on where you test: `ferrokube = { version = "0.1", features =
//!   ["apiserver"] }` in `[dev-dependencies]` next to the plain `ferrokube` of `[dependencies]`.
//!   (ferrokube's own examples and tests get it that way, from a dev-dependency on itself.)
//! - `e2e`: the end-to-end tests against a real kube-apiserver (`scripts/e2e.sh`).
//!
//! The data flow of a controller built on ferrokube is the same as one built on client-go:
//!
//! ```text
//!  API server ──watch──▶ Reflector ──deltas──▶ Store/Indexer ──events──▶ handlers ──keys──▶ WorkQueue ──▶ workers
//!                                                   ▲                                                      │
//!                                                   └──────────────── Lister reads ◀─────────────────────────┘
//! ```

pub mod api;
pub mod client;
pub mod config;
pub mod controller;
pub mod error;
pub mod leader;
pub mod list_watch;
pub mod manager;
pub mod shard;
pub mod view;
pub mod watch;

pub use api::{Api, ApiResource, DynamicObject, Object};
pub use client::Client;
pub use config::Config;
pub use error::Error;
/// The embedded API server (crate `ferrokube-apiserver`); needs the `apiserver` feature.
#[cfg(feature = "apiserver")]
pub use ferrokube_apiserver as apiserver;
/// The object model (crate `ferrokube-core`): objects and keys, scopes, label and field selectors,
/// the clock, uids, and the `pipeline_event!` macro every layer emits through.
pub use ferrokube_core as core;
pub use ferrokube_informer as informer;
pub use ferrokube_informer::backoff;
pub use ferrokube_workqueue as workqueue;
pub use k8s_openapi;
pub use list_watch::ListWatch;
