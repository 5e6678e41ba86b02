//! The part of a controller you write: what to do for one object, given only its current state.
//!
//! A [`Reconciler`] is called with the primary object as the cache holds it when a worker takes its
//! key, never with the event that queued it. It compares what the object asks for with what is,
//! changes the world one step, and returns an [`Action`]. It must be **idempotent**: it may run
//! again for a state it has already handled (a resync, a retry, a restart, two events folded into
//! one key), and running it twice must do no more than running it once.
//!
//! The reconciler is also the controller's context: its fields (a client, listers, an event
//! recorder) are shared by every worker, so it is `Send + Sync` and borrowed, not cloned, per call.
//! For a small controller, [`from_fn`] turns an `async fn(Arc<K>, Arc<C>) -> Result<Action, E>`
//! and a context `Arc<C>` into one.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use ferrokube_informer::ObjectKey;

use super::action::Action;

/// What a controller runs for each key. See the [module docs](self).
pub trait Reconciler<K>: Send + Sync + 'static {
    /// Why a reconcile failed; logged, counted, and given to [`error_policy`](Self::error_policy).
    type Error: Display + Send + 'static;

    /// Brings the world closer to what `object` asks for. Called with the object in the cache
    /// when the worker took its key.
    fn reconcile(&self, object: Arc<K>)
    -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// The object was deleted: `last_known` is its last state the informer saw. Called once per
    /// deletion the informer saw, oldest first, when a worker takes the key and before any
    /// reconcile of an object re-created under the same key. On an error the deletion is kept and
    /// the key retried through [`error_policy`](Self::error_policy).
    ///
    /// A deletion that happened while no informer watched (the process was down, or the delete
    /// happened between two lists and the relist found it gone) still arrives if the informer had
    /// cached the object; one of an object never cached does not. Cleanup that must happen belongs
    /// in a finalizer ([`finalizer`](super::finalizer)), which the server waits for. Default:
    /// nothing.
    fn deleted(&self, last_known: Arc<K>) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = last_known;
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

/// A [`Reconciler`] made of an async function and a context; see [`from_fn`].
pub struct FnReconciler<K, C, F> {
    context: Arc<C>,
    reconcile: F,
    /// `fn() -> K`: the reconciler is `Send + Sync` whatever `K` is.
    kind: PhantomData<fn() -> K>,
}

/// A reconciler that calls `reconcile(object, context)`: the shape of kube-rs's and
/// controller-runtime's reconcile functions, for controllers with no deletion hook and the default
/// error policy.
pub fn from_fn<K, C, F, Fut, E>(context: Arc<C>, reconcile: F) -> FnReconciler<K, C, F>
where
    F: Fn(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    FnReconciler {
        context,
        reconcile,
        kind: PhantomData,
    }
}

impl<K, C, F, Fut, E> Reconciler<K> for FnReconciler<K, C, F>
where
    K: Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send,
    E: Display + Send + 'static,
{
    type Error = E;

    fn reconcile(&self, object: Arc<K>) -> impl Future<Output = Result<Action, E>> + Send {
        (self.reconcile)(object, self.context.clone())
    }
}
