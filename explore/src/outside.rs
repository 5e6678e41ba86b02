//! The outside system: records a controller keeps somewhere other than the API server (a DNS
//! zone, a cloud load balancer, a database), in memory, shared by every incarnation of the
//! controller of a run.
//!
//! It exists because the worst controller bugs sit between the API server and such a system: a
//! finalizer removed before the outside record was deleted leaks the record forever; a record
//! created, then a crash before the object says so, creates it twice. So every call is a point of
//! the run (`outside:N`, see [`crate::fault`]): the explorer can crash the controller just before
//! a call, or just after it took effect.
//!
//! ```text
//!   incarnation 1 ──OutsideClient──┐
//!   incarnation 2 ──OutsideClient──┼──▶ records (BTreeMap name → value), one per run
//!   (a dead incarnation's calls fail with OutsideError::Down)
//! ```
//!
//! A crashed incarnation's client refuses every call, as a dead process makes none.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::shared::{Incarnation, RunShared};

/// A call to the outside system that did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutsideError {
    /// The calling incarnation of the controller has crashed: a dead process calls nothing.
    #[error("the controller crashed before this call")]
    Down,
}

/// The records of the outside system of one run (name → value), shared by every incarnation.
#[derive(Debug, Default, Clone)]
pub(crate) struct Records {
    inner: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Records {
    pub(crate) fn snapshot(&self) -> BTreeMap<String, String> {
        self.inner.lock().clone()
    }
}

/// One incarnation's handle on the outside system, a store of named records shared by every
/// incarnation of the controller of a run; a crashed incarnation's calls fail. Cheap to
/// clone; every call is a point of the run.
#[derive(Clone)]
pub struct OutsideClient {
    records: Records,
    incarnation: Arc<Incarnation>,
    shared: Arc<RunShared>,
}

impl std::fmt::Debug for OutsideClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutsideClient")
            .field("incarnation", &self.incarnation.number)
            .finish_non_exhaustive()
    }
}

impl OutsideClient {
    pub(crate) fn new(
        records: Records,
        incarnation: Arc<Incarnation>,
        shared: Arc<RunShared>,
    ) -> OutsideClient {
        OutsideClient {
            records,
            incarnation,
            shared,
        }
    }

    /// Passes one call through the run's fault plan: `apply` runs unless the controller crashes
    /// before it; the answer is lost if it crashes after it.
    async fn call<T>(
        &self,
        what: String,
        apply: impl FnOnce(&mut BTreeMap<String, String>) -> T,
    ) -> Result<T, OutsideError> {
        // An outside system answers later than a function call does: let the rest of the run
        // move (and let a crash decided elsewhere land) before the call.
        tokio::task::yield_now().await;
        let crash_after = self
            .shared
            .outside_call(&self.incarnation, &what)
            .map_err(|_| OutsideError::Down)?;
        let answer = apply(&mut self.records.inner.lock());
        self.shared.outside_changed(self.records.snapshot(), &what);
        if let Some(fault) = crash_after {
            self.shared.crash(
                &self.incarnation,
                &fault,
                &format!("outside {what} took effect; its answer was lost"),
            );
            return Err(OutsideError::Down);
        }
        Ok(answer)
    }

    /// Sets record `name` to `value` (creates or replaces it).
    pub async fn put(&self, name: &str, value: &str) -> Result<(), OutsideError> {
        let (name, value) = (name.to_string(), value.to_string());
        self.call(format!("put {name}={value}"), move |records| {
            records.insert(name, value);
        })
        .await
    }

    /// Deletes record `name`; whether it was there.
    pub async fn delete(&self, name: &str) -> Result<bool, OutsideError> {
        let name = name.to_string();
        self.call(format!("delete {name}"), move |records| {
            records.remove(&name).is_some()
        })
        .await
    }

    /// Record `name`'s value, if it exists.
    pub async fn get(&self, name: &str) -> Result<Option<String>, OutsideError> {
        let name = name.to_string();
        self.call(format!("get {name}"), move |records| {
            records.get(&name).cloned()
        })
        .await
    }

    /// Every record whose name starts with `prefix`, in name order.
    pub async fn list(&self, prefix: &str) -> Result<Vec<(String, String)>, OutsideError> {
        let prefix = prefix.to_string();
        self.call(format!("list {prefix}*"), move |records| {
            records
                .range(prefix.clone()..)
                .take_while(|(name, _)| name.starts_with(&prefix))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect()
        })
        .await
    }
}
