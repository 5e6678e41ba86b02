//! # ferrokube
//!
//! Kubernetes controller machinery written from scratch in Rust, in the shape of Go's client-go.
//!
//! This crate is the one a controller author puts in `Cargo.toml`; it re-exports the member crates so
//! that every concept has one path:
//!
//! | module | what it is | crate | client-go counterpart |
//! |---|---|---|---|
//! | [`core`] | the object model every layer shares: `Object`, `ObjectKey`, `Scope`, label and field selectors, `now()`, uids, backoff; no I/O | `ferrokube-core` | `apimachinery` (`metav1`, `labels`, `fields`) |
//! | [`config`] | kubeconfig (merged like kubectl), in-cluster, credentials that rotate | `ferrokube-client` | `tools/clientcmd`, `rest.Config` |
//! | [`client`] | pooled HTTP/1.1 (or, opted into, HTTP/2) connections to the API server, rate limit, retries | `ferrokube-client` | `rest.RESTClient` |
//! | [`api`] | the verbs on one resource, typed (`Api<Pod>`) or dynamic (`Api<DynamicObject>`) | `ferrokube-client` | clientset, `dynamic` |
//! | [`watch`] | watch streams decoded incrementally | `ferrokube-client` | `watch` |
//! | [`watcher`] | a watcher that resumes from the last resourceVersion and says when to relist | `ferrokube-client` | `RetryWatcher` |
//! | [`crd`] | custom resources: `#[derive(`[`CustomResource`]`)]` on a spec struct gives the resource type and its CustomResourceDefinition (structural schema from the Rust types, via schemars); [`crd::apply_and_wait`] installs it | `ferrokube-client`, `ferrokube-derive` | `apiextensions` clientset; kube-rs's `CustomResource` |
//! | [`error`] | the server's `Status` as a typed error (`is_conflict()`, `is_gone()`, …) | `ferrokube-client` | `api/errors` |
//! | [`write_gate`] | the seam through which the leader election decides whether a write may leave | `ferrokube-client` | |
//! | [`workqueue`] | deduplicating keyed queue with Get/Done, delays, rate limits, priorities, metrics | `ferrokube-workqueue` | `util/workqueue` |
//! | [`informer`] | Reflector, Store, Indexers, Listers, SharedIndexInformer, factory | `ferrokube-informer` | `tools/cache`, `informers` |
//! | [`list_watch`] | `Api<K>` as the informer's ListerWatcher, `Client` as a factory's source | `ferrokube-client` | `cache.ListWatch` |
//! | [`controller`] | the reconciler runtime (sources, filters, workers, metrics) and the toolkit: expectations, claiming, events, finalizers, conditions, owner references | `ferrokube-runtime` | kubernetes' `pkg/controller`, `tools/record`; controller-runtime |
//! | [`leader`] | leader election on a Lease, with a write gate for the leader's client | `ferrokube-runtime` | `tools/leaderelection` |
//! | [`manager`] | controllers, leader election, health and metrics endpoints, graceful shutdown in one process | `ferrokube-runtime` | controller-runtime's `manager` |
//! | `shard` | a controller's objects split across replicas by a hash ring on Leases; with the `shard` feature | `ferrokube-runtime` | |
//! | `view` | the live view: a web page following each event through the machinery, fed by `tracing`; with the `view` feature | `ferrokube-view` | |
//! | `apiserver` | an in-process API server (the real REST API, fault injection, a pod simulator); with the `apiserver` feature | `ferrokube-apiserver` | envtest's kube-apiserver, kwok |
//! | `testing` | a client straight from a running embedded server (no client-side rate limit); with the `apiserver` feature | this crate | envtest's `Config` |
//!
//! The crates form a stack without a cycle, drawn in the guide's map of crates (`docs/src/crates.md`) and checked by
//! `scripts/module-cycles.sh`: core (and the pipeline seam) at the bottom, then the workqueue and
//! the informers, the client, the runtime, the view; the embedded server stands on the core alone.
//! This crate holds no code of its own but `testing`, the glue between the embedded server and
//! the client, the one place that sees both.
//!
//! ## Cargo features
//!
//! - `apiserver` (off by default): `ferrokube::apiserver`, the embedded API server of the
//!   `ferrokube-apiserver` crate, for a controller's own tests and demos. A controller does not need
//!   it, and without it the build has no HTTP server of the API, no certificate generation and no
//!   TLS acceptor. Turn it on where you test: `ferrokube = { version = "0.1", features =
//!   ["apiserver"] }` in `[dev-dependencies]` next to the plain `ferrokube` of `[dependencies]`.
//!   (ferrokube's own tests get it that way, from a dev-dependency on itself; its samples, the
//!   `ferrokube-examples` package in `examples/`, from their dependency on ferrokube.)
//! - `shard` (off): `ferrokube::shard` and the `shard` options of the controller and manager
//!   builders.
//! - `view` (off): `ferrokube::view`, the live view.
//! - `e2e`: the end-to-end tests against a real kube-apiserver (`scripts/e2e.sh`).
//!
//! The data flow of a controller built on ferrokube is the same as one built on client-go:
//!
//! ```text
//!  API server ──watch──▶ Reflector ──deltas──▶ Store/Indexer ──events──▶ handlers ──keys──▶ WorkQueue ──▶ workers
//!                                                   ▲                                                      │
//!                                                   └──────────────── Lister reads ◀─────────────────────────┘
//! ```

pub use ferrokube_client::crd::schemars;
pub use ferrokube_client::{
    client, config, crd, error, list_watch, protobuf, watch, watcher, write_gate,
};
/// `#[derive(CustomResource)]` on a spec struct: the resource type, its `k8s_openapi::Resource`
/// and `Metadata` impls, `new(name, spec)` and `crd()`. The keys of `#[resource(...)]`, the
/// validation markers and an example: the docs of crate `ferrokube-derive`; the runtime side
/// (schemas, [`crd::apply_and_wait`]): [`crd`].
pub use ferrokube_derive::CustomResource;
/// Sharding (crate `ferrokube-runtime`); needs the `shard` feature.
#[cfg(feature = "shard")]
pub use ferrokube_runtime::shard;
pub use ferrokube_runtime::{controller, freshness, leader, manager, toolkit};
/// The live view (crate `ferrokube-view`); needs the `view` feature.
#[cfg(feature = "view")]
pub use ferrokube_view as view;

/// The embedded API server (crate `ferrokube-apiserver`); needs the `apiserver` feature.
#[cfg(feature = "apiserver")]
pub use ferrokube_apiserver as apiserver;
#[cfg(feature = "apiserver")]
pub mod testing;
pub use ferrokube_client::{Api, Client, Config, DynamicObject, Error, ListWatch};
/// The object model (crate `ferrokube-core`): objects and keys, scopes, label and field selectors,
/// the clock, uids, backoff, and the `pipeline_event!` macro every layer emits through.
pub use ferrokube_core as core;
/// The object model's traits and keys, from their home, crate `ferrokube-core`.
pub use ferrokube_core::{ApiResource, Kind, Object, backoff};
/// Deterministic runs of a controller on the embedded server, the fault explorer's foundation
/// (crate `ferrokube-explore`); needs the `explore` feature.
#[cfg(feature = "explore")]
pub use ferrokube_explore as explore;

/// Typed and dynamic access to one resource (crate `ferrokube-client`, module `api`).
///
/// The object model's traits (`Object`, `Kind`, `ApiResource`) live in crate `ferrokube-core`
/// (`ferrokube::core`); they are named here too, beside the `Api` that takes them, because that is
/// where a client-go reader looks for them. The workspace's own crates import them from core.
pub mod api {
    pub use ferrokube_client::api::*;
    pub use ferrokube_core::{ApiResource, Kind, Object};
}

/// Informers: list + watch into a cache, shared by handlers (crate `ferrokube-informer`).
///
/// The object model the informers hold (objects and keys, scopes, label selectors, backoff) lives in
/// crate `ferrokube-core` (`ferrokube::core`); it is named here too, under the paths a client-go
/// reader looks for (`ferrokube::informer::Scope` beside `SharedInformerFactory`). The workspace's
/// own crates import it from core.
pub mod informer {
    pub use ferrokube_core::{ApiResource, Kind, Object};
    pub use ferrokube_core::{
        Backoff, LabelSelector, ObjectKey, Scope, ScopeMatcher, SelectorError, backoff,
        drop_managed_fields, labels, object,
    };
    pub use ferrokube_informer::*;
}
pub use ferrokube_workqueue as workqueue;
pub use k8s_openapi;

/// README.md and the guide's chapters (`docs/src/`, an mdBook), included here only so that
/// `cargo test` compiles (and, unless marked `no_run`, runs) every Rust block in them: a snippet
/// in the docs cannot rot.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/src/introduction.md")]
    struct Introduction;
    #[doc = include_str!("../docs/src/crates.md")]
    struct Crates;
    #[doc = include_str!("../docs/src/workqueue.md")]
    struct Workqueue;
    #[doc = include_str!("../docs/src/client.md")]
    struct Client;
    #[doc = include_str!("../docs/src/informers.md")]
    struct Informers;
    #[doc = include_str!("../docs/src/embedded-server.md")]
    struct EmbeddedServer;
    #[doc = include_str!("../docs/src/controller.md")]
    struct Controller;
    #[doc = include_str!("../docs/src/custom-resources.md")]
    struct CustomResources;
    #[doc = include_str!("../docs/src/testing.md")]
    struct Testing;
    #[doc = include_str!("../docs/src/freshness.md")]
    struct Freshness;
    #[doc = include_str!("../docs/src/production.md")]
    struct Production;
    #[doc = include_str!("../docs/src/faults.md")]
    struct Faults;
    #[doc = include_str!("../docs/src/sharding.md")]
    struct Sharding;
    #[doc = include_str!("../docs/src/explorer.md")]
    struct Explorer;
    #[doc = include_str!("../docs/src/sample-controller.md")]
    struct SampleController;
    #[doc = include_str!("../docs/src/live-view.md")]
    struct LiveView;
    #[doc = include_str!("../docs/src/real-servers.md")]
    struct RealServers;
    #[doc = include_str!("../docs/src/performance.md")]
    struct Performance;
    #[doc = include_str!("../docs/src/development.md")]
    struct Development;
}
