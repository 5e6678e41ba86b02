//! A follower's watch on the one Lease (`fieldSelector=metadata.name=<name>`), so that it learns
//! of a change when it happens instead of at its next poll: a released lease is taken at once,
//! and an expiry is scheduled from the moment the last renewal was written, not from a poll that
//! came up to 4.4 s later.
//!
//! The watch runs in a task of its own (so its reconnect backoff is its own, whatever the
//! campaign loop is doing) and hands each reading to the campaign through a small channel. It is
//! an optimisation only: polling goes on beside it, so a watch that fails, stalls or is slow
//! costs speed, never correctness. It reopens by itself ([`ResumingWatcher`]); after a 410 it
//! starts over from the current state (a watch from resourceVersion `""` begins with the Lease as
//! it is now). The task ends when the [`LeaseWatch`] is dropped.
//!
//! ```text
//!   API server ──watch (one object)──▶ task: ResumingWatcher ──Some(lease) / None (deleted)──▶ campaign
//! ```

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use ferrokube_client::Api;
use ferrokube_client::api::WatchParams;
use ferrokube_client::watch::WatchEvent;
use ferrokube_client::watcher::{ResumingWatcher, WatchError};
use ferrokube_core::backoff::Backoff;

/// The running watch; stops when dropped.
pub(crate) struct LeaseWatch {
    readings: mpsc::Receiver<Option<Lease>>,
    task: JoinHandle<()>,
}

impl LeaseWatch {
    /// Starts watching Lease `name` of `api`'s namespace; reconnects back off from `retry_period`.
    pub(crate) fn start(api: Api<Lease>, name: &str, retry_period: Duration) -> LeaseWatch {
        let (tx, readings) = mpsc::channel(8);
        // Like the reflector's: the server ends the watch after 5 to 10 minutes, so a connection
        // that died silently is replaced.
        let timeout = u32::try_from(ferrokube_core::random::range_u64(300, 600)).unwrap_or(600);
        let params = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(timeout);
        let backoff = Backoff::new(
            retry_period,
            retry_period.max(Duration::from_secs(30)),
            Duration::from_secs(120),
        );
        let watcher = ResumingWatcher::new(api, params, "").with_backoff(backoff);
        let task = tokio::spawn(forward(watcher, tx));
        LeaseWatch { readings, task }
    }

    /// The next reading: `Some(lease)`, or `None` when the Lease was deleted. Pending forever if
    /// the task is gone (it ends only when dropped), so it can sit in a `select!`.
    pub(crate) async fn next(&mut self) -> Option<Lease> {
        match self.readings.recv().await {
            Some(reading) => reading,
            None => std::future::pending().await,
        }
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The task: every change of the Lease, forwarded, until the receiver is dropped.
async fn forward(mut watcher: ResumingWatcher<Lease>, tx: mpsc::Sender<Option<Lease>>) {
    loop {
        let reading = match watcher.next().await {
            Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease)) => Some(lease),
            Ok(WatchEvent::Deleted(_)) => None,
            Ok(WatchEvent::Bookmark(_) | WatchEvent::Error(_)) => continue,
            Err(WatchError::Gone(version)) => {
                tracing::debug!(%version, "lease watch expired; starting over from the current state");
                watcher.resume_from("");
                continue;
            }
            // The watcher has waited its backoff already; polling covers the gap.
            Err(WatchError::Retrying(error)) => {
                tracing::debug!(%error, "lease watch interrupted; reconnecting");
                continue;
            }
        };
        if tx.send(reading).await.is_err() {
            return;
        }
    }
}
