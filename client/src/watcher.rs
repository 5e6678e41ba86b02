//! A watch that outlives its connections (client-go's `RetryWatcher`).
//!
//! The API server ends every watch sooner or later: its `timeoutSeconds`, a restart, a load
//! balancer's idle timeout. Reopening from the last resourceVersion seen (from an event's object or a
//! bookmark) continues exactly where the old watch stopped, so nothing is missed and nothing repeats.
//! That works until the server no longer has that version (etcd compaction, or it fell out of the
//! watch cache): it answers 410 Gone, as an HTTP status or as an in-stream ERROR event, and the only
//! way on is to list again. The watcher cannot do that for the caller (the caller owns the state a
//! relist must be reconciled with), so it says [`WatchError::Gone`] and waits for
//! [`ResumingWatcher::resume_from`] with the new list's resourceVersion.
//!
//! ```text
//!   Idle ──open──▶ Watching ──server closes──▶ Idle (reopen at once from the last version)
//!    ▲                │ error / bad line
//!    └── backoff ◀────┘                      410 ──▶ NeedsRelist ──resume_from(rv)──▶ Idle
//! ```

use futures_util::StreamExt;

use crate::api::{Api, WatchParams};
use crate::error::Error;
use crate::watch::{WatchEvent, WatchStream};
use ferrokube_core::Backoff;
use ferrokube_core::Object;

/// What can interrupt a resuming watch.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The resourceVersion is too old (410): list again, then call `resume_from`.
    #[error("resource version {0} is gone (410): relist")]
    Gone(String),
    /// A failure the watcher recovers from by itself (it waited its backoff before reporting it).
    #[error("watch interrupted, reconnecting: {0}")]
    Retrying(#[source] Error),
}

enum State<K> {
    /// No watch open; the next call opens one.
    Idle,
    Watching(WatchStream<K>),
    /// Stopped on 410 until `resume_from`.
    NeedsRelist,
}

/// A watch that reopens itself from the last resourceVersion it saw whenever the server ends it,
/// backs off after errors, and on 410 Gone returns [`WatchError::Gone`] until the caller has relisted
/// and called [`resume_from`](Self::resume_from). (client-go's `RetryWatcher`.)
pub struct ResumingWatcher<K> {
    api: Api<K>,
    params: WatchParams,
    /// The last resourceVersion seen: the watch reopens from here.
    resource_version: String,
    backoff: Backoff,
    state: State<K>,
}

impl<K: Object> ResumingWatcher<K> {
    /// Watches from `resource_version` (usually a list's). Reconnects back off as [`Backoff`] says.
    pub fn new(api: Api<K>, params: WatchParams, resource_version: &str) -> ResumingWatcher<K> {
        ResumingWatcher {
            api,
            params,
            resource_version: resource_version.to_string(),
            backoff: Backoff::default(),
            state: State::Idle,
        }
    }

    /// Replaces the reconnect backoff.
    pub fn with_backoff(mut self, backoff: Backoff) -> ResumingWatcher<K> {
        self.backoff = backoff;
        self
    }

    /// The resourceVersion the watch would reopen from.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// After a relist: continue from its resourceVersion.
    pub fn resume_from(&mut self, resource_version: &str) {
        self.resource_version = resource_version.to_string();
        self.state = State::Idle;
    }

    /// The next event. `None` never happens while the watcher is usable; after [`WatchError::Gone`]
    /// every call returns `Gone` again until [`resume_from`](Self::resume_from).
    pub async fn next(&mut self) -> Result<WatchEvent<K>, WatchError> {
        loop {
            match &mut self.state {
                State::NeedsRelist => return Err(WatchError::Gone(self.resource_version.clone())),
                State::Idle => match self.api.watch(&self.params, &self.resource_version).await {
                    Ok(stream) => self.state = State::Watching(stream),
                    Err(error) if error.is_gone() => {
                        self.state = State::NeedsRelist;
                    }
                    Err(error) => return Err(self.retry_later(error).await),
                },
                State::Watching(stream) => match stream.next().await {
                    Some(Ok(WatchEvent::Error(status))) => {
                        if status.code == 410 {
                            self.state = State::NeedsRelist;
                        } else {
                            self.state = State::Idle;
                            return Err(self.retry_later(Error::Api(status)).await);
                        }
                    }
                    Some(Ok(event)) => {
                        self.remember(&event);
                        return Ok(event);
                    }
                    // Silent past its deadline: the connection is presumed dead. Reopen at once
                    // (on a new connection) from where it stopped, as if the server had ended it;
                    // if the server is really gone, the reopening fails and backs off.
                    Some(Err(Error::Idle { after, .. })) => {
                        tracing::warn!(rv = %self.resource_version, ?after, "watch silent past its deadline; resuming");
                        self.state = State::Idle;
                    }
                    Some(Err(error)) => {
                        self.state = State::Idle;
                        return Err(self.retry_later(error).await);
                    }
                    // The server ended the watch normally: reopen at once from where it stopped.
                    None => {
                        tracing::debug!(rv = %self.resource_version, "watch closed by the server; reopening");
                        self.state = State::Idle;
                    }
                },
            }
        }
    }

    fn remember(&mut self, event: &WatchEvent<K>) {
        let version = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                o.meta().resource_version.as_deref()
            }
            WatchEvent::Bookmark(b) => Some(b.resource_version.as_str()),
            WatchEvent::Error(_) => None,
        };
        if let Some(version) = version.filter(|v| !v.is_empty()) {
            self.resource_version = version.to_string();
        }
    }

    async fn retry_later(&mut self, error: Error) -> WatchError {
        // On the runtime's clock, the one the wait below sleeps on (virtual on a paused runtime).
        let wait = self.backoff.failure(tokio::time::Instant::now().into_std());
        tracing::warn!(%error, ?wait, "watch failed; reconnecting after backoff");
        tokio::time::sleep(wait).await;
        WatchError::Retrying(error)
    }
}
