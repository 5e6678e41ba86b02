//! # ferrokube-workqueue
//!
//! A work queue for controllers, with the semantics of client-go's `util/workqueue`, no Kubernetes
//! types, and a design measured to be faster (see `benches/` and the guide's performance chapter).
//!
//! ## Why a controller needs this queue
//!
//! A controller is told *that* something changed (an informer event), and then works out *what to do*
//! by reading the current state. Events come in bursts, many for the same object, while the work for
//! an object may take a while and may fail. So the controller does not act on events: it turns each
//! event into a key (`namespace/name`) and adds it to this queue, and workers take keys out. The queue
//! guarantees what makes that safe and cheap:
//!
//! - **dedup**: a key waiting in the queue is stored once, however many times it is added;
//! - **one worker per key**: a key is never handed to two workers at once;
//! - **nothing lost**: a key added while a worker processes it is processed again afterwards;
//! - **backoff**: a failing key comes back later and later ([`RateLimiter`]), a succeeding one is
//!   forgotten.
//!
//! ## The three states, and why `done` exists
//!
//! ```text
//!            add                      get                        done
//!  idle ───────────▶  queue  ───────────────────▶  processing ─────────▶ idle
//!                    (dirty)                           │  ▲
//!                      ▲                          add  │  │
//!                      │         done                  ▼  │
//!                      └──────────────────────  processing + dirty
//! ```
//!
//! client-go calls the sets `queue` (waiting to be handed out), `processing` (handed out, not done) and
//! `dirty` (needs processing). A key is in at most one of queue and processing; dirty ⊇ queue.
//! `get` moves a key from queue to processing. An `add` of a processing key only marks it dirty: if it
//! were queued instead, a second worker could take it while the first still works on it, and the two
//! would race on the same object. `done` is how the queue learns that the worker has finished: then a
//! dirty key goes back into the queue, and a clean one is forgotten. Forgetting `done` leaves the key
//! "processing" forever; [`run_workers`] calls it for you.
//!
//! ## Usage
//!
//! ```
//! use ferrokube_workqueue::WorkQueue;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let queue: WorkQueue<String> = WorkQueue::new();
//! queue.add("default/web".to_string());
//! queue.add("default/web".to_string()); // deduplicated
//! assert_eq!(queue.len(), 1);
//!
//! let key = queue.get().await.unwrap(); // now processing
//! // ... reconcile `key`: on success forget its failures, on failure retry with backoff ...
//! queue.forget(&key);
//! queue.done(&key);
//! queue.shut_down();
//! assert_eq!(queue.get().await, None);
//! # }
//! ```
//!
//! Beyond client-go: priorities ([`WorkQueue::add_with_priority`], as controller-runtime's priority
//! queue), a counted drop of adds after shutdown, and a worker pool helper ([`run_workers`]).
//!
//! ## How it is built
//!
//! | module | holds |
//! |---|---|
//! | `queue` | [`WorkQueue`]: the public verbs, tying the parts below together |
//! | `key_table` | each key's state (queued / processing / processing+dirty), in 64 locked shards |
//! | `ready_queue` | the keys ready to hand out, by priority then FIFO |
//! | `delay` | keys added with a delay, and the timer thread that adds them when due |
//! | `clock` | the queue's one clock (real time, or the tokio runtime's: [`WorkQueueBuilder::virtual_time`]) and the metrics' timestamps |
//! | [`rate_limiter`] | how long a failing key waits |
//! | [`metrics`] | what the queue reports, and a Prometheus implementation |
//! | `worker` | [`run_workers`] |
//! | `block_on` | `get_blocking` and friends for code that is not async |
//!
//! client-go guards all of its sets with one mutex. Here a key's state lives in its own shard of the
//! key table, so the most common operation of a busy controller, adding a key that is already waiting,
//! takes one short shard lock and never touches the shared ready queue.
//!
//! ## Watching it work
//!
//! Every change of a key's state is also a `tracing` event at TRACE level with target
//! `ferrokube_pipeline` (`stage = "queue"` or `"limiter"`, the queue's name as `instance`, the key, the
//! key's new `state`): the seam that `ferrokube::view` draws in a browser. The events' fields are
//! computed only when a subscriber wants them; with none, each costs one relaxed atomic load (see the
//! benchmarks in the guide's performance chapter).

mod block_on;
mod clock;
mod delay;
mod key_table;
#[macro_use]
mod pipeline;
pub mod metrics;
mod probe_table;
mod queue;
pub mod rate_limiter;
mod ready_queue;
mod worker;

/// The sources of the modules whose docs `ferrokube::view` serves beside each stage of its page
/// (file name, text): embedded here so that they ship with this crate.
#[doc(hidden)]
pub const MODULE_SOURCES: &[(&str, &str)] = &[("queue.rs", include_str!("queue.rs"))];

pub use metrics::{PrometheusMetrics, QueueMetrics};
pub use queue::{AddOptions, QueueKey, WorkQueue, WorkQueueBuilder};
pub use rate_limiter::{
    BucketRateLimiter, ExponentialFailureRateLimiter, FastSlowRateLimiter, MaxOfRateLimiter,
    RateLimiter, default_controller_rate_limiter,
};
pub use worker::run_workers;
