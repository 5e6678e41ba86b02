//! # ferrokube-informer
//!
//! The informer machinery of ferrokube (client-go's `tools/cache`): how a controller keeps an
//! up-to-date copy of the objects it cares about in memory, and hears about every change.
//!
//! ## Why informers exist
//!
//! A controller must react to changes and read current state, all the time, for thousands of
//! objects. Asking the API server each time would be slow and would overload it. So each process
//! lists a resource once, then watches it, and keeps what it learned in a local cache. Reads go to
//! the cache; changes are pushed to handlers, which usually put a key in a workqueue.
//!
//! ## Follow one event
//!
//! ```text
//!  API server ──list, then watch──▶ Reflector ──Δ──▶ DeltaFifo ──pop──▶ SharedIndexInformer ──▶ Store (+ indexes)
//!                                  reflector.rs      delta_fifo.rs      shared_informer.rs        store.rs, index.rs
//!                                                                              │
//!                                                           each handler's buffer and thread ──▶ your EventHandler
//!                                                                    handler.rs                    (→ WorkQueue)
//!  Lister ◀── reads ── Store                                          lister.rs
//! ```
//!
//! 1. The [`Reflector`] lists the collection, then watches it from the list's resourceVersion. It
//!    talks to the server only through the [`ListerWatcher`] trait (implemented by the client's
//!    `Api<K>`, and by [`fake::FakeListerWatcher`] in tests).
//! 2. Each change becomes a [`Delta`] in the [`DeltaFifo`], grouped by object key, in order; a list
//!    (the first, or a relist) becomes one entry.
//! 3. The [`SharedIndexInformer`]'s processor pops a key with its deltas (or a whole list, applied
//!    in one step: no reader sees half of a relist), applies them to the [`Store`], moves the
//!    store's resourceVersion ([`SharedIndexInformer::last_store_sync_resource_version`]: how fresh
//!    the cache is), and pushes an add/update/delete notification to every handler's own buffer.
//! 4. Each handler's thread calls its [`EventHandler`] (or, for a handler registered
//!    [`Delivery::Inline`], the processor calls it itself); workers read the store through a
//!    [`Lister`].
//!
//! [`SharedInformerFactory`] makes sure a process opens one watch per type and scope.
//!
//! Each step above is also a `tracing` event at TRACE level with target `ferrokube_pipeline`
//! (`stage` = `reflector`, `watch`, `fifo`, `store` or `handler`; the informer's name as
//! `instance`): the seam `ferrokube::view` draws live in a browser. Nothing is formatted unless a
//! subscriber asks for that target.
//!
//! ## Where Rust lets us do better than client-go
//!
//! - **No deep copies.** Every object is decoded once and shared as an immutable `Arc<K>` by the
//!   fifo, the store, every handler and every lister read. client-go hands out pointers into its
//!   cache and asks you never to mutate them (`DeepCopy` first); here the type system enforces it.
//! - **Transform while decoding.** The transform runs on each object as it comes off the wire
//!   ([`ListerWatcher::list_prepared`]), so dropping `managedFields` lowers the peak, not only the
//!   steady state.
//! - **Handlers cannot stall each other.** Each handler has its own unbounded buffer and thread
//!   (client-go: a goroutine per listener), and its depth is a metric. A handler that only adds
//!   keys to a queue can skip both ([`Delivery::Inline`]): one hop less between the watch event and
//!   the queue, which is what the controller layer does.
//!
//! | module | holds |
//! |---|---|
//! | (crate `ferrokube-core`) | the object model below this crate, imported from there: [`Object`](ferrokube_core::Object) (what we need of an object: its metadata), [`ObjectKey`](ferrokube_core::ObjectKey), [`LabelSelector`](ferrokube_core::LabelSelector), [`Scope`](ferrokube_core::Scope), [`backoff`](ferrokube_core::backoff) |
//! | [`compact`] | [`Compact`]: an object stored as typed metadata + JSON bytes, for big caches |
//! | `lister_watcher` | the [`ListerWatcher`] seam and its request, page, event and error types |
//! | `reflector` | [`Reflector`]: list, watch, resume, relist on 410, backoff, streaming lists |
//! | `delta` | [`Delta`], one recorded change, and [`DeletedObject`] tombstones: shared by the fifo, the processor, the handlers and the trace events |
//! | `delta_fifo` | [`DeltaFifo`] (re-exports `Delta`, `DeletedObject`), lists as one [`Changes::List`] |
//! | `store`, `index` | [`Store`] with [`Indexers`], lists applied at once (a gate for multi-key reads), its resourceVersion; built-in namespace, label and owner indexes |
//! | `shared_informer` | [`SharedIndexInformer`] and its builder |
//! | [`freshness`] | [`StoreRevision`]: how far a cache has caught up, as an etcd revision; the one "has this cache seen that write" |
//! | `handler` | [`EventHandler`], [`HandlerFns`], per-handler buffers and threads, [`Delivery`] |
//! | `lister` | [`Lister`], [`NamespaceLister`] |
//! | `factory` | [`SharedInformerFactory`]; the [`Scope`](ferrokube_core::Scope) it keys informers by (from `ferrokube-core`) |
//! | [`metrics`] | what an informer reports, and a Prometheus implementation |
//! | [`fake`] | an in-memory ListerWatcher with fault injection |

mod delta;
mod pipeline;

pub mod compact;
pub mod delta_fifo;
pub mod factory;
pub mod fake;
pub mod freshness;
pub mod handler;
pub mod index;
pub mod lister;
pub mod lister_watcher;
pub mod metrics;
pub mod reflector;
pub mod shared_informer;
pub mod store;

/// The sources of the modules whose docs `ferrokube::view` serves beside each stage of its page
/// (file name, text): embedded here so that they ship with this crate.
#[doc(hidden)]
pub const MODULE_SOURCES: &[(&str, &str)] = &[
    ("reflector.rs", include_str!("reflector.rs")),
    ("lister_watcher.rs", include_str!("lister_watcher.rs")),
    ("delta_fifo.rs", include_str!("delta_fifo.rs")),
    ("shared_informer.rs", include_str!("shared_informer.rs")),
    ("store.rs", include_str!("store.rs")),
    ("handler.rs", include_str!("handler.rs")),
];

pub use compact::{Compact, CompactError};
pub use delta::{DeletedObject, Delta};
pub use delta_fifo::{Changes, DeltaFifo, Popped};
pub use factory::{ListerWatcherSource, SharedInformerFactory};
pub use freshness::StoreRevision;
pub use handler::{Delivery, EventHandler, HandlerFns, HandlerOptions, HandlerRegistration};
pub use index::{IndexFn, Indexers, NAMESPACE_INDEX};
pub use lister::{Lister, NamespaceLister};
pub use lister_watcher::{
    BoxError, Event, EventStream, ListPage, ListRequest, ListVersion, ListWatchError,
    ListerWatcher, Prepare, Transform, WatchRequest,
};
pub use metrics::{InformerMetrics, PrometheusInformerMetrics};
pub use reflector::{
    DEFAULT_MAX_PAGE_SIZE, DEFAULT_WATCH_IDLE_TIMEOUT, FirstList, ListMode, Reflector,
    ReflectorOptions, ReflectorStatus, WatchErrorHandler,
};
pub use shared_informer::{InformerBuilder, SharedIndexInformer, StartError};
pub use store::{IndexConflict, Store, UnknownIndex, VersionObserver};
