//! # ferrokube-client
//!
//! The layer that talks to an API server: where the cluster is and who we are, the connections to
//! it, the verbs on a resource and the watches on a set of them. Nothing in here keeps a cache,
//! runs a loop of its own or knows what a controller is; the informers, the workqueue and the
//! runtime sit above it and reach the server only through it.
//!
//! | module | holds | client-go counterpart |
//! |---|---|---|
//! | [`config`] | [`Config`]: a kubeconfig (merged like kubectl), in-cluster, credentials that rotate (exec plugins, token files) | `tools/clientcmd`, `rest.Config` |
//! | [`client`] | [`Client`]: pooled HTTP/1.1 (or, opted into, HTTP/2) connections, rate limit, retries, deadlines on every wait | `rest.RESTClient` |
//! | [`api`] | [`Api`]: the verbs on one resource, typed (`Api<Pod>`) or dynamic (`Api<DynamicObject>`) | clientset, `dynamic` |
//! //! | [`watch`] | watch streams: one HTTP watch decoded line by line into events | `watch` |
//! | [`watcher`] | [`ResumingWatcher`](watcher::ResumingWatcher): watches strung together from the last resourceVersion, saying when to relist | `RetryWatcher` |
//! | [`protobuf`] | Kubernetes' protobuf encoding read straight into k8s-openapi's types (a serde `Deserializer` driven by core's schema table), for gets, streaming lists and watch frames of built-in kinds; on by default ([`Config::content_type`](config::Config::content_type)) | `runtime/serializer/protobuf` |
//! | [`error`] | [`Error`]: the server's `Status` as a typed error (`is_conflict()`, `is_gone()`, …) and what broke on the way | `api/errors` |
//! | [`list_watch`] | [`ListWatch`]: an `Api<K>` as the informer's `ListerWatcher`, a `Client` as a factory's source | `cache.ListWatch`, `NewListWatchFromClient` |
//! | [`crd`] | custom resources: a CustomResourceDefinition from Rust types (structural schema via schemars), applied and waited for until Established; the runtime side of `#[derive(CustomResource)]` | `apiextensions` clientset, kube-rs's `CustomResourceExt` |
//! | [`write_gate`] | [`WriteGate`](write_gate::WriteGate): the seam through which a layer above (the leader election) decides whether a write may leave | |
//! | [`write_observer`] | [`WriteObserver`](write_observer::WriteObserver): the seam through which a layer above (the consistency store, read-your-own-writes) hears of every committed write | |
//!
//! ## How a request flows through this crate
//!
//! ```text
//!   Config ──▶ Client ─────────────────────────────────────────────────────────────▶ API server
//!   (kubeconfig,  │ rate limit ─▶ credentials ─▶ write gate (writes only) ─▶ pooled connection
//!    in-cluster)  │                                                                      │
//!   Api<K>: verb ─┘  ◀── decoded K, or Error (Status, transport, timeout, NotLeader) ◀────┘
//!                    └─ a committed write ─▶ the handle's write observers (if any), then returned
//!   Api<K>::watch ───▶ WatchStream<K>: body chunks ─▶ lines (JSON) or frames (protobuf) ─▶ WatchEvent<K>
//!                      ResumingWatcher: reopens from the last resourceVersion; 410 ─▶ relist
//! ```
//!
//! ## What it stands on, and who stands on it
//!
//! Among ferrokube's crates it depends on `ferrokube-core` (the object model: [`Object`](ferrokube_core::Object),
//! selectors, the clock, the backoff) and `ferrokube-informer`, for one thing only: the seam the
//! informers are fed through (`ListerWatcher`). The informers do no I/O and know nothing of HTTP;
//! they say what they need, and [`list_watch`] supplies it from an [`Api`]. The write gate is the
//! same shape the other way round: this crate says what it asks before a write, and the leader
//! election in `ferrokube-runtime` supplies the answer from above. Either way the layer that
//! defines a seam sits below the one that fills it, so no arrow runs back down.

pub mod api;
pub mod client;
pub mod config;
pub mod crd;
pub mod dial;
pub mod error;
pub mod list_watch;
pub mod protobuf;
pub mod watch;
pub mod watcher;
pub mod write_gate;
pub mod write_observer;

pub use api::{Api, DynamicObject};
pub use client::Client;
pub use config::{Config, ContentType};
pub use error::Error;
pub use list_watch::ListWatch;

/// The sources of the modules whose docs `ferrokube::view` serves beside each stage of its page
/// (path under `src/`, text): embedded here so that they ship with this crate.
#[doc(hidden)]
pub const MODULE_SOURCES: &[(&str, &str)] = &[
    ("watch/decoder.rs", include_str!("watch/decoder.rs")),
    ("watch/mod.rs", include_str!("watch/mod.rs")),
    ("list_watch.rs", include_str!("list_watch.rs")),
    ("client/mod.rs", include_str!("client/mod.rs")),
    ("client/rate_limit.rs", include_str!("client/rate_limit.rs")),
    ("api/mod.rs", include_str!("api/mod.rs")),
];
