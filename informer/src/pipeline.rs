//! The informer's side of the pipeline seam: how its events print a delta, a watch event and
//! their keys. Every event goes through `ferrokube_core::pipeline_event!`, so that it has the
//! same target and level as every other layer's. The schema (stages, ops, states, fields) is
//! written down in `ferrokube::view`.
//!
//! | stage | ops (state after it) |
//! |---|---|
//! | `reflector` | `list_start` (`listing`), `list_done` (`listed`), `watch_start` (`watching`), `watch_end` (`watch_ended`), `relist` (`relisting`), `backoff` (`backing_off`) |
//! | `watch` | `event` (`seen`): `type`, `rv` |
//! | `fifo` | `queued` (`queued`), `popped` (`gone`), `list_queued`, `list_popped` |
//! | `store` | `applied` (`stored`, or `gone` for a delete), `replaced` |
//! | `handler` | `notify` (`buffered`, or `handling` for an inline handler): `handler`, `kind`, `buffered`; `handled` (`gone`) |

use std::fmt;

use crate::delta::Delta;
use crate::lister_watcher::Event;
use ferrokube_core::object::{Object, ObjectKey};

/// A key's deltas as `Added,Updated,...`: formatted only when a subscriber records the event.
pub(crate) struct DeltaNames<'a, K>(pub(crate) &'a [Delta<K>]);

impl<K> fmt::Display for DeltaNames<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (at, delta) in self.0.iter().enumerate() {
            if at > 0 {
                f.write_str(",")?;
            }
            f.write_str(delta_name(delta))?;
        }
        Ok(())
    }
}

/// The name client-go gives the delta's type.
pub(crate) fn delta_name<K>(delta: &Delta<K>) -> &'static str {
    match delta {
        Delta::Added(_) => "Added",
        Delta::Updated(_) => "Updated",
        Delta::Deleted(_) => "Deleted",
        Delta::Replaced(_) => "Replaced",
        Delta::Sync(_) => "Sync",
    }
}

/// The key a key's deltas are about (they all share it): lets the fifo name the key in an event
/// after it moved the key into its map, without cloning it when nobody listens.
pub(crate) struct DeltasKey<'a, K>(pub(crate) &'a [Delta<K>]);

impl<K: Object> fmt::Display for DeltasKey<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.last() {
            Some(Delta::Deleted(deleted)) => fmt::Display::fmt(&deleted.key(), f),
            Some(delta) => fmt::Display::fmt(&ObjectKey::of(&**delta.object()), f),
            None => Ok(()),
        }
    }
}

/// The key of a watch event's object (empty for a bookmark).
pub(crate) struct WatchEventKey<'a, K>(pub(crate) &'a Event<K>);

impl<K: Object> fmt::Display for WatchEventKey<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Event::Added(object) | Event::Modified(object) | Event::Deleted(object) => {
                fmt::Display::fmt(&ObjectKey::of(object), f)
            }
            Event::Bookmark { .. } => Ok(()),
        }
    }
}

/// The resourceVersion a watch event carries.
pub(crate) struct WatchEventVersion<'a, K>(pub(crate) &'a Event<K>);

impl<K: Object> fmt::Display for WatchEventVersion<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Event::Added(object) | Event::Modified(object) | Event::Deleted(object) => {
                f.write_str(object.resource_version())
            }
            Event::Bookmark {
                resource_version, ..
            } => f.write_str(resource_version),
        }
    }
}

/// The event's type as the API server writes it.
pub(crate) fn watch_event_type<K>(event: &Event<K>) -> &'static str {
    match event {
        Event::Added(_) => "ADDED",
        Event::Modified(_) => "MODIFIED",
        Event::Deleted(_) => "DELETED",
        Event::Bookmark { .. } => "BOOKMARK",
    }
}
