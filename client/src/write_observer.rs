//! The write observer: the one seam through which a layer above the client learns of every write
//! a [`Client`](crate::Client) made, with what the server committed.
//!
//! Several parts of a controller must hear of each of its writes, with the object as the server
//! answered it (its resourceVersion, its uid):
//!
//! - the controller's freshness record (`ferrokube::freshness::record`), under its two views: the
//!   next reconcile of a key waits until the caches show the key's own writes (the consistency
//!   store), and a cache read waits until it shows them (`ctx.cache()`, `ReadYourWrites`);
//! - a test or an audit that counts what a controller wrote.
//!
//! None of them wraps the write verbs. An observer is handed to a client handle with
//! [`Client::with_write_observer`](crate::Client::with_write_observer), and every
//! [`Api`](crate::Api) built on that handle (or on a clone of it) reports to it, whatever its
//! kind, so a helper that is given such an `Api`, or builds one from its client, is observed too.
//! The verbs exist once, in [`Api`](crate::Api).
//!
//! ```text
//!   Api::create / replace / patch / *_status ─▶ server ─▶ Ok(answer), not a dry run
//!                                                              │
//!                                    each observer.committed(resource, Written(answer.meta))
//!
//!   Api::delete ─▶ observer.deleting(resource, key) ─▶ DeleteNote (whatever it needs to keep)
//!               ─▶ server ─▶ Ok(answer), not a dry run
//!                               │
//!                               ├ the object, still there (finalizers, grace) ─▶ Written(meta)
//!                               └ a Status: gone                              ─▶ Gone { uid }
//!                  each observer.deleted(resource, key, note, outcome)
//! ```
//!
//! A failed write reports nothing (the server committed nothing, or the client cannot know
//! whether it did), and neither does a dry run (`dryRun=All`: the server answers as if it wrote,
//! but commits nothing, so no cache will ever show it). `delete_collection` is not reported: it
//! deletes what the server selects, one by one, at resourceVersions the answer does not give.
//!
//! Observers run on the writer's task, right after the answer is decoded and before the verb
//! returns, so that whatever a caller does after `await`ing a write already sees it recorded.
//! They must be quick and must not block.

use std::any::Any;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use ferrokube_core::ObjectKey;

use ferrokube_core::ApiResource;

/// Hears of every write a client handle committed. See the [module docs](self).
pub trait WriteObserver: Send + Sync + 'static {
    /// A create, replace, patch or status write of `resource`'s kind was committed; `written` is
    /// the metadata of the object the server answered.
    fn committed(&self, resource: &ApiResource, written: &ObjectMeta);

    /// A delete of `object` is about to be sent. Whatever the observer must remember from just
    /// before it (the read-your-own-writes client: the uid its cache held) goes in the note it
    /// returns; the note comes back in [`deleted`](Self::deleted). Default: nothing.
    fn deleting(&self, resource: &ApiResource, object: &ObjectKey) -> DeleteNote {
        let _ = (resource, object);
        DeleteNote::empty()
    }

    /// A delete of `object` was committed: `outcome` says whether the object is still there
    /// (held by finalizers or a grace period) or gone.
    fn deleted(
        &self,
        resource: &ApiResource,
        object: &ObjectKey,
        note: DeleteNote,
        outcome: DeleteOutcome<'_>,
    );
}

/// What a delete answered, as an observer needs it.
#[derive(Debug, Clone, Copy)]
pub enum DeleteOutcome<'a> {
    /// The object is still there, marked for deletion: a write like any other, at its new
    /// resourceVersion.
    Pending(&'a ObjectMeta),
    /// The server answered a `Status`: the object is gone. `uid` is the one the status names,
    /// when it does (kube-apiserver and the embedded server always do).
    Gone { uid: Option<&'a str> },
}

/// What an observer kept from just before a delete was sent (see
/// [`WriteObserver::deleting`]). Empty unless the observer put something in it; allocates only
/// then.
#[derive(Default)]
pub struct DeleteNote(Option<Box<dyn Any + Send>>);

impl DeleteNote {
    /// A note that holds nothing.
    pub fn empty() -> DeleteNote {
        DeleteNote(None)
    }

    /// A note that holds `value`.
    pub fn holding<T: Any + Send>(value: T) -> DeleteNote {
        DeleteNote(Some(Box::new(value)))
    }

    /// The value the note holds, if it holds a `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        self.0
            .and_then(|value| value.downcast::<T>().ok())
            .map(|value| *value)
    }
}

impl std::fmt::Debug for DeleteNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DeleteNote")
            .field(&self.0.as_ref().map(|_| ".."))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_gives_back_what_it_holds_and_nothing_else() {
        assert_eq!(
            DeleteNote::holding(Some(7u32)).take::<Option<u32>>(),
            Some(Some(7))
        );
        assert_eq!(DeleteNote::holding(7u32).take::<String>(), None);
        assert_eq!(DeleteNote::empty().take::<u32>(), None);
    }
}
