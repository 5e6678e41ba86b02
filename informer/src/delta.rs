//! One recorded change of one key ([`Delta`]), and what a delete leaves behind ([`DeletedObject`]).
//!
//! These are the words the informer's stages share: the [`DeltaFifo`](crate::DeltaFifo) records
//! deltas, the informer's processor applies them to the store and turns them into notifications,
//! a delete handler receives a [`DeletedObject`], and the pipeline's trace events print a key's
//! deltas by name (`Added,Updated`). They live in a module of their own, below all of those, so
//! that each can use them without importing another stage: the fifo's events are printed by
//! `pipeline`, and if the types lived in the fifo, the fifo and its printing would import each
//! other. This module imports nothing of the informer but the object model.

use std::sync::Arc;

use ferrokube_core::object::{Object, ObjectKey};

/// What a delete handler receives.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletedObject<K> {
    /// A delete the watch reported: the object's last state.
    Object(Arc<K>),
    /// A delete found by a relist: the object is gone, it was deleted at some point while the
    /// watch was down, and `last_known` is the state we had (client-go's `DeletedFinalStateUnknown`).
    FinalStateUnknown { key: ObjectKey, last_known: Arc<K> },
}

impl<K: Object> DeletedObject<K> {
    /// The last state we have of the object, whichever way it was deleted.
    pub fn object(&self) -> &Arc<K> {
        match self {
            DeletedObject::Object(object) => object,
            DeletedObject::FinalStateUnknown { last_known, .. } => last_known,
        }
    }

    pub fn key(&self) -> ObjectKey {
        match self {
            DeletedObject::Object(object) => ObjectKey::of(&**object),
            DeletedObject::FinalStateUnknown { key, .. } => key.clone(),
        }
    }
}

/// One recorded change of one key.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta<K> {
    /// The watch reported ADDED.
    Added(Arc<K>),
    /// The watch reported MODIFIED.
    Updated(Arc<K>),
    /// The watch reported DELETED, or a relist no longer has the object.
    Deleted(DeletedObject<K>),
    /// A list (the first, or a relist) has the object.
    Replaced(Arc<K>),
    /// A resync: nothing changed, the stored object is offered to handlers again.
    Sync(Arc<K>),
}

impl<K: Object> Delta<K> {
    /// The object the delta carries (for a delete, the last known state).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Delta::Added(o) | Delta::Updated(o) | Delta::Replaced(o) | Delta::Sync(o) => o,
            Delta::Deleted(deleted) => deleted.object(),
        }
    }
}
