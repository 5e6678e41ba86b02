//! How a controller's sources attach to their informers: the part of running a controller that
//! both the builder (which records a source as a closure over a [`Wiring`]) and the run (which
//! calls those closures) need, kept apart from both so that neither imports the other.
//!
//! ```text
//!  builder: .owns::<C>(scope) ─ records ─▶ Attach = |wiring| attach::<C>(wiring, &(), scope, map)
//!  run:     Wiring { factory, enqueue, filters per kind, consistency, .. } ─▶ each Attach
//!              ─▶ the factory's informer of C: handler (C's filters ─▶ map ─▶ queue); tracked by
//!                 the consistency store
//! ```

use std::pin::Pin;
use std::time::Duration;

use std::sync::Arc;

use ferrokube_core::{ObjectKey, Scope};
use ferrokube_informer::{
    HandlerOptions, HandlerRegistration, SharedIndexInformer, SharedInformerFactory, StartError,
    Store, UnknownIndex,
};
use futures_util::Stream;

use super::filter::{Filter, Filters, KindFilter, SourceKind};
use super::metrics::Metrics;
use super::source::{Enqueue, KeyCheck, MapEvent, SourceHandler};
use crate::freshness::consistency::ConsistencyStore;
use ferrokube_client::client::Client;
use ferrokube_core::{Kind, Object};

pub(super) type KeyStream = Pin<Box<dyn Stream<Item = ObjectKey> + Send>>;

/// The primary informer's indexes, whatever the primary's type: what a
/// [`watches_by_index`](super::Controller::watches_by_index) source looks its keys up in.
pub(super) trait PrimaryIndex: Send + Sync {
    /// The keys of the primaries whose index `index` has `value`, sorted (as [`all_keys`]'s).
    ///
    /// [`all_keys`]: PrimaryIndex::all_keys
    fn keys(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndex>;
    /// The keys of every primary in the store, sorted: the order they are queued in is then the
    /// same on every run (the store's own order comes from a randomly seeded hash, and a
    /// deterministic run, as the fault explorer's, must not depend on it).
    fn all_keys(&self) -> Vec<ObjectKey>;
}

impl<K: Object> PrimaryIndex for Store<K> {
    fn keys(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, UnknownIndex> {
        let mut keys = self.index_keys(index, value)?;
        keys.sort_unstable();
        Ok(keys)
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        let mut keys = self.list_keys();
        keys.sort_unstable();
        keys
    }
}

/// How one source attaches itself to its informer at `run`.
pub(super) type Attach =
    Box<dyn FnOnce(&Wiring<'_>) -> Result<Box<dyn Attached>, StartError> + Send>;

/// A handler on an informer, whatever the informer's type.
pub(super) trait Attached: Send + Sync {
    /// Takes the handler off the informer.
    fn detach(&self);
}

pub(super) struct Attachment<O> {
    informer: SharedIndexInformer<O>,
    registration: HandlerRegistration<O>,
}

impl<O: Object> Attached for Attachment<O> {
    fn detach(&self) {
        self.informer.remove_event_handler(&self.registration);
    }
}

/// What a source needs to attach itself.
pub(super) struct Wiring<'a> {
    pub(super) factory: &'a SharedInformerFactory<Client>,
    pub(super) enqueue: &'a Enqueue,
    pub(super) filters: &'a [KindFilter],
    pub(super) primary: &'a SourceKind,
    pub(super) name: &'a str,
    pub(super) consistency: &'a ConsistencyStore,
    /// Whether the primary kind is namespaced: what a source's keys must say (see
    /// [`KeyCheck`]).
    pub(super) primary_namespaced: bool,
    pub(super) metrics: Option<&'a Metrics>,
    /// The primary informer's store, for sources that map through its indexes.
    pub(super) primary_index: Arc<dyn PrimaryIndex>,
    /// The scope of an owned type: as recorded, narrowed by the controller's
    /// [`Ownership`](super::ownership::Ownership) (to a member's objects when sharded).
    pub(super) narrow: &'a (dyn Fn(Scope) -> Scope + Sync),
}

impl Wiring<'_> {
    /// The filters of `kind`: those recorded for it, else its default (none for the primary,
    /// [`Filter::resource_version_changed`] for any other kind).
    fn filters_for(&self, kind: &SourceKind) -> Filters {
        let recorded: Vec<Filter> = self
            .filters
            .iter()
            .filter(|f| f.kind == *kind)
            .map(|f| f.filter.clone())
            .collect();
        match (recorded.is_empty(), kind == self.primary) {
            (false, _) => Filters::new(recorded),
            (true, true) => Filters::default(),
            (true, false) => Filters::new(vec![Filter::resource_version_changed()]),
        }
    }
}

/// What a source is called, in logs and in `controller_mapper_keys_refused_total`: its builder
/// call (`watches::<Secret>`), and where its mapper is in the author's code (the closure's type
/// name).
pub(super) struct SourceName {
    pub(super) call: String,
    pub(super) mapper: &'static str,
}

/// Attaches `map` to the factory's informer of the `O`s of the kind `dynamic` names over `scope`.
pub(super) fn attach<O: Kind>(
    wiring: &Wiring<'_>,
    dynamic: &O::DynamicType,
    scope: &Scope,
    map: Box<MapEvent<O>>,
    resync: Option<Duration>,
    source: SourceName,
) -> Result<Box<dyn Attached>, StartError> {
    let informer = wiring
        .factory
        .informer_for::<O>(dynamic, scope, |builder| builder);
    wiring
        .consistency
        .track_kind(&informer, &O::api_resource(dynamic), scope);
    let handler = SourceHandler {
        filters: wiring.filters_for(&SourceKind::of::<O>(dynamic)),
        enqueue: wiring.enqueue.checked(KeyCheck {
            namespaced: wiring.primary_namespaced,
            controller: wiring.name.to_string(),
            metrics: wiring.metrics.cloned(),
            source: source.call,
            mapper: source.mapper,
            logged: Default::default(),
        }),
        map,
    };
    // Inline: a source only maps an event to keys and adds them to the queue, which never blocks,
    // so the informer's processor calls it directly (no handler thread, no wake-up between the
    // watch event and the queue). A `watches_with` handler runs there too: see its docs.
    let mut options = HandlerOptions::default().name(wiring.name).inline();
    if let Some(resync) = resync {
        options = options.resync(resync);
    }
    let registration = informer.add_event_handler_with(handler, options)?;
    Ok(Box::new(Attachment {
        informer,
        registration,
    }))
}
