//! Event filters: which informer events are worth a reconcile (controller-runtime's predicates).
//!
//! Every informer event a controller hears (of its primary type, of the objects it owns, of the
//! objects it watches) passes the filters of its kind before it becomes a key in the queue; an
//! event that any of them rejects is dropped. Filters are per kind, because what is worth a
//! reconcile differs: "a status-only update of my own object is not worth a reconcile" is true of
//! the primary and false of a child whose status the reconcile reads.
//!
//! ```text
//!  informer event of O ──▶ Change (metadata only) ──▶ O's filter₁ ∧ filter₂ ∧ … ──yes──▶ map to keys ──▶ queue
//!                                                                └──no──▶ dropped
//! ```
//!
//! ## Which filters a source gets
//!
//! - [`Controller::filter`](super::Controller::filter) adds a filter to the **primary** kind;
//!   [`Controller::filter_for::<O>`](super::Controller::filter_for) to every source of kind `O`.
//! - A kind you gave no filter gets its default. The primary's: **none**, so every notification
//!   reaches the queue, resyncs included (they are how a controller repairs what it missed). Every
//!   other source's: [`Filter::resource_version_changed`], so a child the informer merely
//!   re-delivers unchanged (a relist after a broken watch) does not reconcile its owner again.
//!   Filters you give a kind replace its default.
//! - A filter that cannot do its job for a kind is refused when the controller runs, with an
//!   error that says why: [`Filter::generation_changed`] for a kind whose objects have no
//!   `metadata.generation` (a ConfigMap, a Secret), where it could tell nothing apart; and a
//!   filter for a kind the controller has no source of.
//!
//! Filters see metadata, not the typed object, so one filter serves every type. The built-in ones
//! judge only updates (creates and deletes always pass, as controller-runtime's do); a resync is an
//! update whose old and new objects are the same, so it is dropped by every built-in filter. Keys
//! from external sources (streams of keys) have no object and are never filtered.
//!
//! | filter | an update passes when | controller-runtime |
//! |---|---|---|
//! | [`Filter::generation_changed`] | `metadata.generation` changed (the spec changed); objects without a generation always pass | `GenerationChangedPredicate` |
//! | [`Filter::labels_changed`] | the labels changed | `LabelChangedPredicate` |
//! | [`Filter::annotations_changed`] | the annotations changed | `AnnotationChangedPredicate` |
//! | [`Filter::resource_version_changed`] | anything changed (drops resyncs only) | `ResourceVersionChangedPredicate` |
//! | [`Filter::new`] | your closure says so | `predicate.Funcs` |
//!
//! Combine with [`Filter::or`] (e.g. generation *or* labels changed) and `!` (negation); several
//! filters given to the builder must all pass.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use ferrokube_core::Kind;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// One informer event, as a filter sees it: the metadata involved.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// An object appeared (`initial`: it came with the informer's first list).
    Added { meta: &'a ObjectMeta, initial: bool },
    /// An object changed; for a resync `old` and `new` are the same.
    Updated {
        old: &'a ObjectMeta,
        new: &'a ObjectMeta,
    },
    /// An object was deleted (its last known metadata).
    Deleted { meta: &'a ObjectMeta },
}

impl<'a> Change<'a> {
    /// The metadata of the object as it is now (the new state of an update, the last of a delete).
    pub fn meta(&self) -> &'a ObjectMeta {
        match self {
            Change::Added { meta, .. } | Change::Deleted { meta } => meta,
            Change::Updated { new, .. } => new,
        }
    }
}

type Predicate = dyn Fn(&Change<'_>) -> bool + Send + Sync;

/// A test an event must pass to reach the queue. Cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct Filter {
    predicate: Arc<Predicate>,
    /// It judges only by `metadata.generation`: for a kind without one it can tell nothing apart,
    /// and the controller refuses it (see the [module docs](self#which-filters-a-source-gets)).
    by_generation_only: bool,
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Filter")
            .field("by_generation_only", &self.by_generation_only)
            .finish_non_exhaustive()
    }
}

impl Filter {
    /// A filter from any closure over a [`Change`].
    pub fn new(predicate: impl Fn(&Change<'_>) -> bool + Send + Sync + 'static) -> Filter {
        Filter {
            predicate: Arc::new(predicate),
            by_generation_only: false,
        }
    }

    /// A filter that judges updates with `changed(old, new)` and lets creates and deletes pass.
    pub fn on_update(
        changed: impl Fn(&ObjectMeta, &ObjectMeta) -> bool + Send + Sync + 'static,
    ) -> Filter {
        Filter::new(move |change| match change {
            Change::Updated { old, new } => changed(old, new),
            Change::Added { .. } | Change::Deleted { .. } => true,
        })
    }

    /// Updates pass when `metadata.generation` changed: spec changes, not status or metadata ones.
    /// An object without a generation passes every update: this filter cannot tell whether its
    /// content changed, so it does not hide the change. (controller-runtime's
    /// `GenerationChangedPredicate` drops them all, so a ConfigMap under it is never heard from.)
    /// Given to a kind known to have no generation (ConfigMap, Secret, Event, Endpoints,
    /// ServiceAccount), it is refused when the controller runs.
    pub fn generation_changed() -> Filter {
        Filter {
            by_generation_only: true,
            ..Filter::on_update(|old, new| {
                old.generation.is_none()
                    || new.generation.is_none()
                    || old.generation != new.generation
            })
        }
    }

    /// Updates pass when the labels changed.
    pub fn labels_changed() -> Filter {
        Filter::on_update(|old, new| old.labels != new.labels)
    }

    /// Updates pass when the annotations changed.
    pub fn annotations_changed() -> Filter {
        Filter::on_update(|old, new| old.annotations != new.annotations)
    }

    /// Updates pass when the resourceVersion changed: every real change, no resyncs.
    pub fn resource_version_changed() -> Filter {
        Filter::on_update(|old, new| old.resource_version != new.resource_version)
    }

    /// Passes what either filter passes.
    pub fn or(self, other: Filter) -> Filter {
        let by_generation_only = self.by_generation_only && other.by_generation_only;
        Filter {
            by_generation_only,
            ..Filter::new(move |change| self.passes(change) || other.passes(change))
        }
    }

    /// Whether `change` passes.
    pub fn passes(&self, change: &Change<'_>) -> bool {
        (self.predicate)(change)
    }

    /// Why this filter cannot do its job for objects of `group`/`kind`, if it cannot.
    pub(crate) fn refusal(&self, group: &str, kind: &str) -> Option<String> {
        let ungenerated = matches!(
            (group, kind),
            (
                "",
                "ConfigMap" | "Secret" | "Event" | "Endpoints" | "ServiceAccount"
            ) | ("events.k8s.io", "Event")
        );
        (self.by_generation_only && ungenerated).then(|| {
            format!(
                "Filter::generation_changed() on {kind}: {kind}s have no metadata.generation, so it \
                 cannot tell a change from a resync and lets every update through; use \
                 Filter::resource_version_changed() (the default for a kind that is not the \
                 primary), or no filter"
            )
        })
    }
}

/// `!filter` passes what `filter` rejects.
impl std::ops::Not for Filter {
    type Output = Filter;
    fn not(self) -> Filter {
        Filter::new(move |change| !self.passes(change))
    }
}

/// Which kind a source hears: the Rust type, and the API group and kind (which tell apart two
/// sources of `DynamicObject`s, judge a filter ([`Filter::refusal`]) and name it in errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceKind {
    type_id: TypeId,
    pub(crate) group: String,
    pub(crate) kind: String,
}

impl SourceKind {
    /// The kind `dynamic` names for `K`s (`&()` for a typed kind).
    pub(crate) fn of<K: Kind>(dynamic: &K::DynamicType) -> SourceKind {
        let resource = K::api_resource(dynamic);
        SourceKind {
            type_id: TypeId::of::<K>(),
            group: resource.group,
            kind: resource.kind,
        }
    }
}

/// A filter recorded for one kind.
pub(crate) struct KindFilter {
    pub(crate) kind: SourceKind,
    pub(crate) filter: Filter,
}

/// The filters of one source; an event must pass them all.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filters(Arc<[Filter]>);

impl Filters {
    pub(crate) fn new(filters: Vec<Filter>) -> Filters {
        Filters(filters.into())
    }

    pub(crate) fn pass(&self, change: &Change<'_>) -> bool {
        self.0.iter().all(|filter| filter.passes(change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(generation: i64, rv: &str, label: &str) -> ObjectMeta {
        ObjectMeta {
            generation: Some(generation),
            resource_version: Some(rv.into()),
            labels: Some(BTreeMap::from([("app".to_string(), label.to_string())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn controller_filters_judge_updates_and_pass_adds_and_deletes() {
        let (a, status_only, spec, relabeled) = (
            meta(1, "10", "web"),
            meta(1, "11", "web"),
            meta(2, "12", "web"),
            meta(1, "13", "db"),
        );
        let update = |old, new| Change::Updated { old, new };
        let generation = Filter::generation_changed();
        assert!(!generation.passes(&update(&a, &status_only)));
        assert!(generation.passes(&update(&a, &spec)));
        assert!(generation.passes(&Change::Added {
            meta: &a,
            initial: true
        }));
        assert!(generation.passes(&Change::Deleted { meta: &a }));
        let ungenerated = |rv: &str| ObjectMeta {
            generation: None,
            ..meta(0, rv, "web")
        };
        let (before, after) = (ungenerated("1"), ungenerated("2"));
        assert!(
            generation.passes(&update(&before, &after)),
            "a kind without a generation (a ConfigMap) is not silently filtered out"
        );

        let labels = Filter::labels_changed();
        assert!(!labels.passes(&update(&a, &spec)));
        assert!(labels.passes(&update(&a, &relabeled)));
        let either = Filter::generation_changed().or(Filter::labels_changed());
        assert!(either.passes(&update(&a, &spec)) && either.passes(&update(&a, &relabeled)));
        assert!(!either.passes(&update(&a, &status_only)));

        let rv = Filter::resource_version_changed();
        assert!(!rv.passes(&update(&a, &a)), "a resync is dropped");
        assert!(rv.passes(&update(&a, &status_only)));
        assert!((!Filter::resource_version_changed()).passes(&update(&a, &a)));

        let all = Filters::new(vec![
            Filter::resource_version_changed(),
            Filter::labels_changed(),
        ]);
        assert!(
            !all.pass(&update(&a, &status_only)),
            "every filter must pass"
        );
        assert!(all.pass(&update(&a, &relabeled)));
        assert!(
            Filters::default().pass(&update(&a, &a)),
            "no filters: all pass"
        );
    }
}
