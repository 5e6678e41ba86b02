//! Running workers over a queue: the Get / Done / Forget / AddRateLimited loop, written once.
//!
//! Every client-go controller repeats the same loop in each worker goroutine:
//!
//! ```text
//! loop {
//!     key = queue.get()            // None: the queue shut down, the worker exits
//!     match reconcile(key) {
//!         Ok  => queue.forget(key)            // success: reset the key's backoff
//!         Err => queue.add_rate_limited(key)  // failure: retry later, with backoff
//!     }
//!     queue.done(key)              // always, or the key is stuck "processing" forever
//! }
//! ```
//!
//! [`run_workers`] runs that loop on `n` tokio tasks. `done` is called by a guard, so it happens even
//! if the reconcile future panics (the key is then retried with backoff, and the worker replaced).

use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinSet;

use crate::queue::{QueueKey, WorkQueue};

/// Runs `workers` tasks, each taking keys from `queue` and passing them to `reconcile`, until the queue
/// is shut down and empty. On `Ok` the key's failures are forgotten; on `Err` (logged at `warn`) the key
/// is re-added through the rate limiter. Returns when every worker has exited. Must be called within a
/// tokio runtime.
pub async fn run_workers<K, F, Fut, E>(queue: WorkQueue<K>, workers: usize, reconcile: F)
where
    K: QueueKey + Debug,
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + 'static,
{
    let reconcile = Arc::new(reconcile);
    let mut tasks = JoinSet::new();
    for _ in 0..workers {
        tasks.spawn(work(queue.clone(), Arc::clone(&reconcile)));
    }
    while let Some(finished) = tasks.join_next().await {
        if let Err(error) = finished {
            tracing::error!(queue = queue.name(), %error, "workqueue: a worker panicked");
            if !queue.is_shutting_down() {
                tasks.spawn(work(queue.clone(), Arc::clone(&reconcile)));
            }
        }
    }
}

/// One worker's loop.
async fn work<K, F, Fut, E>(queue: WorkQueue<K>, reconcile: Arc<F>)
where
    K: QueueKey + Debug,
    F: Fn(K) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    while let Some(key) = queue.get().await {
        let mut in_flight = InFlight {
            queue: &queue,
            key: &key,
            finished: false,
        };
        match reconcile(key.clone()).await {
            Ok(()) => queue.forget(&key),
            Err(error) => {
                tracing::warn!(queue = queue.name(), ?key, %error, retries = queue.num_requeues(&key), "reconcile failed; retrying with backoff");
                queue.add_rate_limited(key.clone());
            }
        }
        in_flight.finished = true;
    }
}

/// Calls `done` for a key however its processing ends; if it did not finish (a panic), the key is
/// first re-added through the rate limiter so it is not lost.
struct InFlight<'a, K: QueueKey> {
    queue: &'a WorkQueue<K>,
    key: &'a K,
    finished: bool,
}

impl<K: QueueKey> Drop for InFlight<'_, K> {
    fn drop(&mut self) {
        if !self.finished {
            self.queue.add_rate_limited(self.key.clone());
        }
        self.queue.done(self.key);
    }
}
