//! The optional notifications of the builder (client-go's `LeaderCallbacks`), and how they are
//! called: on the elector's task, in order, a panic in one logged and contained so that it cannot
//! take the elector (and with it the lease) down; the started-leading future spawned.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;

use super::leadership::Lost;

type StartedFn = dyn Fn(Lost) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;
type StoppedFn = dyn Fn() + Send + Sync;
type NewLeaderFn = dyn Fn(&str) + Send + Sync;

/// The callbacks given to the builder; each is optional.
#[derive(Clone, Default)]
pub(crate) struct Callbacks {
    pub(crate) started: Option<Arc<StartedFn>>,
    pub(crate) stopped: Option<Arc<StoppedFn>>,
    pub(crate) new_leader: Option<Arc<NewLeaderFn>>,
}

impl Callbacks {
    /// Calls `on_started_leading` and spawns the future it returns.
    pub(crate) fn started_leading(&self, lost: Lost) {
        let Some(started) = &self.started else {
            return;
        };
        match catch_unwind(AssertUnwindSafe(|| started(lost))) {
            // A panic inside the spawned future ends that task only; tokio contains it.
            Ok(work) => drop(tokio::spawn(work)),
            Err(_) => tracing::error!("the on_started_leading callback panicked"),
        }
    }

    /// Calls `on_stopped_leading`.
    pub(crate) fn stopped_leading(&self) {
        let Some(stopped) = &self.stopped else {
            return;
        };
        if catch_unwind(AssertUnwindSafe(|| stopped())).is_err() {
            tracing::error!("the on_stopped_leading callback panicked");
        }
    }

    /// Calls `on_new_leader`.
    pub(crate) fn new_leader(&self, identity: &str) {
        let Some(new_leader) = &self.new_leader else {
            return;
        };
        if catch_unwind(AssertUnwindSafe(|| new_leader(identity))).is_err() {
            tracing::error!(identity, "the on_new_leader callback panicked");
        }
    }
}

/// Remembers the last holder reported to `on_new_leader`, so each change is reported once.
#[derive(Debug, Default)]
pub(crate) struct NewLeaderReports {
    /// The holder as last observed; `None`: no holder (not reported) or nothing observed yet.
    last: Option<String>,
}

impl NewLeaderReports {
    /// Notes the holder now observed; calls `on_new_leader` if it is a candidate and differs from
    /// the last one noted.
    pub(crate) fn observe(&mut self, holder: Option<&str>, callbacks: &Callbacks) {
        if self.last.as_deref() == holder {
            return;
        }
        self.last = holder.map(str::to_string);
        if let Some(identity) = holder {
            callbacks.new_leader(identity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[test]
    fn leader_changes_are_reported_once_each() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let callbacks = Callbacks {
            new_leader: Some(Arc::new(move |id: &str| sink.lock().push(id.to_string()))),
            ..Callbacks::default()
        };
        let mut reports = NewLeaderReports::default();
        for holder in [
            None,
            Some("a"),
            Some("a"),
            None,
            Some("a"),
            Some("b"),
            Some("b"),
        ] {
            reports.observe(holder, &callbacks);
        }
        assert_eq!(*seen.lock(), ["a", "a", "b"]);
    }

    #[test]
    fn leader_callback_panics_are_contained() {
        let callbacks = Callbacks {
            new_leader: Some(Arc::new(|_: &str| panic!("user bug"))),
            stopped: Some(Arc::new(|| panic!("user bug"))),
            ..Callbacks::default()
        };
        callbacks.new_leader("a");
        callbacks.stopped_leading();
    }
}
