//! The Get / Done / Forget loop of every controller, on its own.
//!
//! An "informer" (here a loop that pretends to see changes) adds keys; two workers take them, "reconcile"
//! them (here: `web` fails twice before it succeeds) and tell the queue how it went. Watch the output:
//! repeated adds of a waiting key collapse into one, the failing key comes back after 5 ms, 10 ms, then
//! succeeds and its failures are forgotten, and shutdown lets the workers finish what they hold.
//!
//! ```text
//! cargo run -p ferrokube-examples --bin workqueue_basics
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferrokube::workqueue::WorkQueue;

#[tokio::main]
async fn main() {
    let queue: WorkQueue<String> = WorkQueue::builder().name("demo").build();
    let web_failures = Arc::new(AtomicU32::new(0));

    let workers: Vec<_> = (1..=2)
        .map(|id| {
            let (queue, web_failures) = (queue.clone(), web_failures.clone());
            tokio::spawn(async move {
                // 1. Get: wait for a key; `None` means the queue shut down and is empty.
                while let Some(key) = queue.get().await {
                    // 2. Reconcile: look at the world and act. Here `default/web` fails twice.
                    let result = if key == "default/web"
                        && web_failures.fetch_add(1, Ordering::SeqCst) < 2
                    {
                        Err("the API server said 409 Conflict")
                    } else {
                        Ok(())
                    };
                    match result {
                        Ok(()) => {
                            println!("worker {id}: {key} reconciled");
                            // 3a. Forget: success resets the key's backoff.
                            queue.forget(&key);
                        }
                        Err(why) => {
                            let retries = queue.num_requeues(&key);
                            println!(
                                "worker {id}: {key} failed ({why}); retry #{} with backoff",
                                retries + 1
                            );
                            // 3b. AddRateLimited: try again later, later each time.
                            queue.add_rate_limited(key.clone());
                        }
                    }
                    // 4. Done: always. Until then, adds of this key only mark it dirty.
                    queue.done(&key);
                }
                println!("worker {id}: queue shut down, exiting");
            })
        })
        .collect();

    // The "informer": three events for web in a burst, one for db.
    for key in ["default/web", "default/web", "default/db", "default/web"] {
        println!(
            "event for {key} -> add (queue length before: {})",
            queue.len()
        );
        queue.add(key.to_string());
    }

    tokio::time::sleep(Duration::from_millis(200)).await;
    println!("shutting down (draining keys being processed)");
    queue.shut_down_with_drain().await;
    for worker in workers {
        let _ = worker.await;
    }
}
