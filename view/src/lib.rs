//! The live view: a web page that shows one event travelling through the whole machinery, from
//! the API server's watch to a reconcile and back to the API server, as it happens.
//!
//! ## Why it exists
//!
//! client-go's machinery is famously hard to see: a change crosses a reflector, a fifo, a cache,
//! handlers, a workqueue with three sets and a rate limiter, a worker pool and a rate-limited
//! client, each in its own file and on its own thread. Reading the code tells you what *can*
//! happen; the live view shows what *does*: which keys are queued, dirty or processing right now,
//! why a key came back (a failure and its backoff, a requeue, an event caused by its own write),
//! and how long requests waited for the client's rate limiter. Pause it and step one event at a
//! time, click a key to follow its story, and each stage links to the docs of the file that does
//! the work.
//!
//! ## How data flows through it
//!
//! ```text
//!  machinery ── tracing::trace!(target: "ferrokube_pipeline", stage, op, key, state, …) ──┐
//!                                                                                         ▼
//!  PipelineLayer (layer.rs): reads the fields into a Record (record.rs); inside a `reconcile`
//!                            span, notes the span's key as the record's `cause`
//!                                                                                         ▼
//!  Journal (journal.rs): numbers it (seq), appends it to a bounded ring, applies it to the
//!                        latest-per-slot table (latest.rs), counts it per stage
//!                                                                                         ▼
//!  LiveView / ViewServer (server.rs, routes.rs): /api/snapshot, /api/events?after=SEQ,
//!                        /api/follow?key=K, actions, docs (docs.rs), the page (page.html)
//!                                                                                         ▼
//!  page.html: loads the snapshot, then polls the events after it and applies each with the
//!             same rule as latest.rs (buffering them while paused; "step" applies one)
//! ```
//!
//! The view knows nothing about stages beyond their names: both the snapshot and the page keep
//! the latest record per `(stage, instance, key)` (per `(stage, instance)` for keyless records)
//! and drop a slot when its state is `"gone"`. Only the page's drawing gives stages meaning
//! (which list a queue state goes in, which worker holds which key).
//!
//! The emitting side costs nothing when no view is installed: the events are TRACE with their
//! own target, and the [`PipelineFilter`] makes sure that installing the view turns on those and
//! the `reconcile` spans only, whatever other layers (a `fmt` layer, …) the subscriber has.
//!
//! ## The events (the seam)
//!
//! Every event has target `"ferrokube_pipeline"`, level TRACE, and the fields `stage` and `op`;
//! most have `instance` (the informer's resource, the queue's or the controller's name), `key`
//! (the object or queue key: one pair of surrounding quotes is stripped, since the workqueue
//! records keys with `?`), and `state` (the key's state in that stage after the event; `"gone"`
//! means it left the stage). Other fields are kept by name in [`Record::fields`].
//!
//! | stage | op | key? | state | extra fields |
//! |---|---|---|---|---|
//! | reflector | `list_start` / `list_done` | no | `listing` / `listed` | `rv`, `items` |
//! | reflector | `watch_start` / `watch_end` | no | `watching` / `watch_ended` | `rv` / `reason` |
//! | reflector | `relist` / `backoff` | no | `relisting` / `backing_off` | `reason`, `delay_ms` |
//! | watch | `event` | yes | `seen` | `type` (ADDED, MODIFIED, DELETED, BOOKMARK), `rv` |
//! | fifo | `queued` / `popped` | yes | `queued` / `gone` | `deltas`, `depth` |
//! | fifo | `list_queued` / `list_popped` | no | same as op | `items` |
//! | store | `applied` | yes | `stored`, or `gone` (deleted) | `delta`, `rv`, `size` |
//! | store | `replaced` | no | `replaced` | `items`, `rv`, `size` |
//! | handler | `notify` / `handled` | yes | `buffered` (`handling` when inline) / `gone` | `handler`, `kind`, `buffered` / `panicked` |
//! | handler | `enqueue` / `filtered` (a filter dropped the event) | yes (object key) | `gone` (what the handler did; the key's slot is its notification's) | `queue_key`, `priority`, `delay_ms` |
//! | queue | `add` | yes | `queued` or `processing_dirty` | `priority`, `depth`, `deduplicated` |
//! | delay | `add_after` / `due` | yes | `delayed` / `gone` | `delay_ms`, `depth_delayed` (a slot of its own: a key can wait there while queued or processed) |
//! | queue | `get` / `done` | yes | `processing` / `gone` or `queued` (it was dirty) | `depth` |
//! | limiter | `failure` / `forget` | yes | `failing` / `gone` | `failures`, `backoff_ms` |
//! | reconcile | `start` / `end` | yes | `running` / `ok`, `requeue`, `error`, `skipped` (a cache older than the key's own writes) | `worker`, `result`, `duration_ms`, `retries` |
//! | client | `request` | if the path names an object | `done` | `verb`, `path`, `status` (0: no answer), `wait_ms` (rate limit), `duration_ms` |
//!
//! Events emitted inside a span named `reconcile` (the controller's workers open one per
//! reconcile, with a field `key`) get that key as [`Record::cause`]: a client request or an
//! enqueue is tied to the reconcile that made it, and `/api/follow?key=K` finds it.
//!
//! ## Using it
//!
//! ```no_run
//! # async fn demo() -> Result<(), ferrokube_view::ViewError> {
//! use tracing_subscriber::prelude::*;
//!
//! let view = ferrokube_view::LiveView::new()
//!     .action("drop-watch", "Drop every watch", || "dropped".to_string());
//! tracing_subscriber::registry()
//!     .with(view.layer())
//!     .with(tracing_subscriber::fmt::layer().with_filter(tracing_subscriber::filter::LevelFilter::INFO))
//!     .init();
//! let server = view.serve().await?;                 // keep `server`: dropping it stops the view
//! println!("live view: http://{}/", server.addr());
//! # Ok(()) }
//! ```
//!
//! | module | holds |
//! |---|---|
//! | `record` | [`Record`], and reading a `tracing` event's fields into one |
//! | `layer` | [`PipelineLayer`] = [`PipelineRecorder`] behind [`PipelineFilter`] |
//! | `journal`, `latest` | [`Journal`]: the ring, the latest-per-slot table, the counters |
//! | `server`, `routes`, `query` | [`LiveView`], [`ViewServer`], the HTTP routes |
//! | `actions` | the page's buttons |
//! | `docs` | the embedded module docs and tour |

mod actions;
mod docs;
mod host_guard;
mod journal;
mod latest;
mod layer;
mod limits;
mod query;
mod record;
mod routes;
mod server;

pub use actions::{ActionInfo, ActionOutcome};
pub use journal::{
    DEFAULT_EVENTS_LIMIT, DEFAULT_RING_CAPACITY, DEFAULT_SNAPSHOT_CAPACITY, EventsPage, Journal,
    KeyStory, Snapshot,
};
pub use layer::{PipelineFilter, PipelineLayer, PipelineRecorder, RECONCILE_SPAN};
pub use limits::{DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS};
pub use record::{GONE, PIPELINE_TARGET, Record};
pub use server::{LiveView, ViewError, ViewServer};
