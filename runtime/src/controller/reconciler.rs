//! The part of a controller you write: what to do for one object, given only its current state.
//!
//! A [`Reconciler`] is called with the primary object as the cache holds it when a worker takes its
//! key, never with the event that queued it. It compares what the object asks for with what is,
//! changes the world one step, and returns an [`Action`]. It must be **idempotent**: it may run
//! again for a state it has already handled (a resync, a retry, a restart, two events folded into
//! one key), and running it twice must do no more than running it once.
//!
//! Beside the object it gets a [`Context`]: the key, the retry count, and the controller's
//! client, whose writes (through any `Api` the context hands out) are recorded in the
//! controller's [consistency store](crate::freshness::consistency), so that the next reconcile of the key
//! waits until the caches show them. Write through the context: that is what keeps a reconcile
//! from acting on a cache older than its own writes.
//!
//! The reconciler's own fields (listers, an outside system's client, an event recorder) are
//! shared by every worker, so it is `Send + Sync` and borrowed, not cloned, per call. For a small
//! controller, [`from_fn`] turns an `async fn(Arc<K>, Context) -> Result<Action, E>` into one.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use ferrokube_core::ObjectKey;

use super::action::Action;
use super::context::Context;

/// What a controller runs for each key. See the [module docs](self).
pub trait Reconciler<K>: Send + Sync + 'static {
    /// Why a reconcile failed; logged, counted, and given to [`error_policy`](Self::error_policy).
    type Error: Display + Send + 'static;

    /// Brings the world closer to what `object` asks for. Called with the object in the cache
    /// when the worker took its key; write through `context` (see the [module docs](self)).
    fn reconcile(
        &self,
        object: Arc<K>,
        context: Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// The object was deleted: `last_known` is its last state the informer saw. Called once per
    /// deletion the informer saw, oldest first, when a worker takes the key and before any
    /// reconcile of an object re-created under the same key. On an error the deletion is kept and
    /// the key retried through [`error_policy`](Self::error_policy).
    ///
    /// A deletion that happened while no informer watched (the process was down, or the delete
    /// happened between two lists and the relist found it gone) still arrives if the informer had
    /// cached the object; one of an object never cached does not. Cleanup that must happen belongs
    /// in a finalizer ([`finalizer`](crate::toolkit::finalizer)), which the server waits for. A panic in
    /// this hook is retried like an error. Writes through `context` are recorded as a
    /// reconcile's are. Default: nothing.
    fn deleted(
        &self,
        last_known: Arc<K>,
        context: Context,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = (last_known, context);
        async { Ok(()) }
    }

    /// What to do with `key` after `error`; `retries` is how many times it has failed in a row
    /// before. Default: [`Action::requeue_rate_limited`], the queue's per-key exponential backoff
    /// (5 ms doubling to 1000 s, and 10 qps overall: client-go's controller rate limiter).
    fn error_policy(&self, key: &ObjectKey, error: &Self::Error, retries: usize) -> Action {
        let _ = (key, error, retries);
        Action::requeue_rate_limited()
    }
}

/// A [`Reconciler`] made of an async function; see [`from_fn`].
pub struct FnReconciler<K, F> {
    reconcile: F,
    /// `fn() -> K`: the reconciler is `Send + Sync` whatever `K` is.
    kind: PhantomData<fn() -> K>,
}

/// A reconciler that calls `reconcile(object, context)`: the shape of kube-rs's and
/// controller-runtime's reconcile functions, for controllers with no deletion hook and the default
/// error policy. Data of your own goes in the closure (an `Arc` it clones per call).
pub fn from_fn<K, F, Fut, E>(reconcile: F) -> FnReconciler<K, F>
where
    F: Fn(Arc<K>, Context) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    FnReconciler {
        reconcile,
        kind: PhantomData,
    }
}

impl<K, F, Fut, E> Reconciler<K> for FnReconciler<K, F>
where
    K: Send + Sync + 'static,
    F: Fn(Arc<K>, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send,
    E: Display + Send + 'static,
{
    type Error = E;

    fn reconcile(
        &self,
        object: Arc<K>,
        context: Context,
    ) -> impl Future<Output = Result<Action, E>> + Send {
        (self.reconcile)(object, context)
    }
}
