//! `run_workers`: the Get / Done / Forget / AddRateLimited loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokube_workqueue::{ExponentialFailureRateLimiter, WorkQueue, run_workers};

fn fast_retry_queue() -> WorkQueue<String> {
    WorkQueue::builder()
        .rate_limiter(ExponentialFailureRateLimiter::new(
            Duration::from_millis(1),
            Duration::from_millis(10),
        ))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_retried_with_backoff_and_successes_forgotten() {
    let queue = fast_retry_queue();
    // Key "flaky" fails twice, then succeeds; the others succeed at once.
    let attempts: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let pool = tokio::spawn(run_workers(queue.clone(), 3, {
        let attempts = attempts.clone();
        move |key: String| {
            let attempts = attempts.clone();
            async move {
                let n = {
                    let mut a = attempts.lock().unwrap();
                    let n = a.entry(key.clone()).or_default();
                    *n += 1;
                    *n
                };
                if key == "flaky" && n <= 2 {
                    Err(format!("attempt {n} failed"))
                } else {
                    Ok(())
                }
            }
        }
    }));
    for key in ["a", "b", "flaky", "c"] {
        queue.add(key.to_string());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while attempts.lock().unwrap().get("flaky") != Some(&3) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "flaky never succeeded"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    queue.shut_down_with_drain().await;
    tokio::time::timeout(Duration::from_secs(5), pool)
        .await
        .expect("workers did not exit after shutdown")
        .unwrap();
    let attempts = attempts.lock().unwrap();
    assert_eq!(attempts["a"], 1);
    assert_eq!(attempts["flaky"], 3);
    // Success forgot the failures.
    assert_eq!(queue.num_requeues(&"flaky".to_string()), 0);
    assert!(!queue.is_processing(&"flaky".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_does_not_lose_the_key_or_the_worker() {
    let queue = fast_retry_queue();
    let calls: Arc<Mutex<Vec<String>>> = Arc::default();
    let pool = tokio::spawn(run_workers(queue.clone(), 1, {
        let calls = calls.clone();
        move |key: String| {
            let calls = calls.clone();
            async move {
                let first = {
                    let mut c = calls.lock().unwrap();
                    c.push(key.clone());
                    c.len() == 1
                };
                if first {
                    panic!("reconcile bug");
                }
                Ok::<(), String>(())
            }
        }
    }));
    queue.add("a".to_string());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while calls.lock().unwrap().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "key lost after a panic"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The key was done (not stuck processing) and retried by a replacement worker.
    queue.add("b".to_string());
    while calls.lock().unwrap().len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no worker after a panic"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    queue.shut_down();
    tokio::time::timeout(Duration::from_secs(5), pool)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*calls.lock().unwrap(), ["a", "a", "b"]);
}
