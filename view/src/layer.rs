//! The `tracing` side: [`PipelineLayer`], which turns pipeline events into journal records and
//! leaves every other event alone.
//!
//! A layer is told about every span and event its subscriber enables. A plain layer that wanted
//! only one target would have two bad choices: say "enabled" for everything (then every
//! `debug!` in the process is built and handed to it, even if no other layer wants it), or say
//! "disabled" for everything else (then it would switch those events off for the *other* layers
//! too, since a plain layer's answer is the whole subscriber's). Per-layer filtering
//! ([`Filtered`]) is the way out: the [`PipelineFilter`] answers for this layer only, and the
//! registry asks each layer's filter and enables a callsite when any layer wants it.
//!
//! The filter wants two things, both decided once per callsite (so a disabled `trace!` elsewhere
//! costs one cached check):
//!
//! - events with target [`PIPELINE_TARGET`](super::PIPELINE_TARGET): they become records;
//! - spans named `reconcile` (the controller's workers open one per reconcile, with a field `key`):
//!   the layer notes their key, and a pipeline event emitted inside one gets it as its `cause`.
//!   That is how a client request or an enqueue is tied to the reconcile that made it.

use tracing::span::{Attributes, Id, Record as SpanValues};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::{Filtered, LevelFilter};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

use super::journal::Journal;
use super::record::{Draft, KeyField, PIPELINE_TARGET};

/// The name of the span whose `key` becomes the `cause` of the events inside it.
pub const RECONCILE_SPAN: &str = "reconcile";

/// The layer to add to a subscriber: the [`PipelineRecorder`] behind its [`PipelineFilter`].
/// Make one with [`Journal::layer`] or [`LiveView::layer`](super::LiveView::layer):
///
/// ```no_run
/// use tracing_subscriber::prelude::*;
///
/// let view = ferrokube_view::LiveView::new();
/// tracing_subscriber::registry().with(view.layer()).init();
/// ```
///
/// It composes with other layers (a `fmt` layer with its own filter, …): it neither turns their
/// events on nor off.
pub type PipelineLayer<S> = Filtered<PipelineRecorder, PipelineFilter, S>;

/// Says which callsites the [`PipelineRecorder`] wants: pipeline events, and reconcile spans.
/// Every non-span callsite of the pipeline's target counts, so that an emitter's
/// `tracing::enabled!(target: "ferrokube_pipeline", Level::TRACE)` (a hint, not an event) is true
/// exactly when its events would be recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct PipelineFilter;

impl PipelineFilter {
    fn wants(metadata: &Metadata<'_>) -> bool {
        (!metadata.is_span() && metadata.target() == PIPELINE_TARGET)
            || (metadata.is_span() && metadata.name() == RECONCILE_SPAN)
    }
}

impl<S> Filter<S> for PipelineFilter {
    fn enabled(&self, metadata: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        PipelineFilter::wants(metadata)
    }

    fn callsite_enabled(&self, metadata: &'static Metadata<'static>) -> Interest {
        if PipelineFilter::wants(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        // Pipeline events are TRACE, so nothing lower can be ruled out.
        Some(LevelFilter::TRACE)
    }
}

/// Writes each pipeline event into a [`Journal`]. Only reachable through [`PipelineLayer`]: on
/// its own it would see every event of the process.
pub struct PipelineRecorder {
    journal: Journal,
}

/// The key of a `reconcile` span, kept in the span's extensions.
struct ReconcileCause(String);

impl PipelineRecorder {
    pub(crate) fn new(journal: Journal) -> PipelineRecorder {
        PipelineRecorder { journal }
    }

    /// The key of the innermost `reconcile` span around `event`, if any.
    fn cause_of<S>(event: &Event<'_>, ctx: &Context<'_, S>) -> Option<String>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        ctx.event_scope(event)?.find_map(|span| {
            span.extensions()
                .get::<ReconcileCause>()
                .map(|cause| cause.0.clone())
        })
    }
}

impl<S> Layer<S> for PipelineRecorder
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != RECONCILE_SPAN {
            return;
        }
        let mut key = KeyField::default();
        attrs.record(&mut key);
        if let (Some(key), Some(span)) = (key.0, ctx.span(id)) {
            span.extensions_mut().replace(ReconcileCause(key));
        }
    }

    fn on_record(&self, id: &Id, values: &SpanValues<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if span.name() != RECONCILE_SPAN {
            return;
        }
        let mut key = KeyField::default();
        values.record(&mut key);
        if let Some(key) = key.0 {
            span.extensions_mut().replace(ReconcileCause(key));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != PIPELINE_TARGET {
            return;
        }
        let mut draft = Draft::default();
        event.record(&mut draft);
        if draft.cause.is_none() {
            draft.cause = PipelineRecorder::cause_of(event, &ctx);
        }
        self.journal.record(draft);
    }
}

/// The journal's side of the seam: the layer that writes into it lives here, with the rest of
/// the `tracing` glue, so the journal itself knows nothing of `tracing_subscriber`.
impl Journal {
    /// A layer that records the pipeline's events into this journal, and ignores every other
    /// event (see [`PipelineLayer`]).
    pub fn layer<S>(&self) -> PipelineLayer<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        PipelineRecorder::new(self.clone()).with_filter(PipelineFilter)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::Value;
    use tracing_subscriber::prelude::*;

    use super::*;
    use crate::journal::Journal;

    /// Emits `queue add` for `key` with state `state`.
    fn queue_event(key: &str, state: &str) {
        tracing::trace!(target: "ferrokube_pipeline", stage = "queue", op = "add", instance = "q", key = ?key, state = state, depth = 1u64);
    }

    fn recording<R>(journal: &Journal, emit: impl FnOnce() -> R) -> R {
        let subscriber = tracing_subscriber::registry().with(journal.layer());
        tracing::subscriber::with_default(subscriber, emit)
    }

    #[test]
    fn an_event_becomes_a_record_with_its_fields() {
        let journal = Journal::new(16);
        recording(&journal, || {
            tracing::trace!(target: "ferrokube_pipeline", stage = "queue", op = "add", instance = "q", key = %"ns/a", state = "queued", depth = 1u64, deduplicated = false, priority = -100i64);
            queue_event("ns/b", "queued");
        });
        let page = journal.events_after(0, 100);
        assert!(!page.gap);
        assert_eq!(page.last_seq, 2);
        let first = &page.records[0];
        assert_eq!(
            (first.seq, first.stage.as_str(), first.op.as_str()),
            (1, "queue", "add")
        );
        assert_eq!(first.instance.as_deref(), Some("q"));
        assert_eq!(first.key.as_deref(), Some("ns/a"));
        assert_eq!(first.state.as_deref(), Some("queued"));
        assert_eq!(first.cause, None);
        assert_eq!(first.fields["depth"], Value::from(1u64));
        assert_eq!(first.fields["deduplicated"], Value::Bool(false));
        assert_eq!(first.fields["priority"], Value::from(-100i64));
        // Recorded with `?`: the quotes Debug adds are gone.
        assert_eq!(page.records[1].key.as_deref(), Some("ns/b"));
    }

    #[test]
    fn other_targets_are_neither_recorded_nor_enabled() {
        let journal = Journal::new(16);
        let enabled = recording(&journal, || {
            tracing::info!(target: "somebody_else", stage = "queue", "not ours");
            tracing::info!("not ours either");
            tracing::enabled!(target: "somebody_else", tracing::Level::INFO)
        });
        assert_eq!(journal.last_seq(), 0);
        assert!(!enabled, "the pipeline layer must not turn other events on");
    }

    /// Emitters ask `enabled!` before work only an event needs (the client parses the object's key
    /// out of its path, the informer lists each key of a relist): it must say yes under the view.
    #[test]
    fn an_emitters_enabled_check_for_the_pipeline_is_true() {
        let journal = Journal::new(16);
        let enabled = recording(
            &journal,
            || tracing::enabled!(target: "ferrokube_pipeline", tracing::Level::TRACE),
        );
        assert!(enabled);
    }

    /// Counts the events it is handed.
    struct Counting(Arc<AtomicUsize>);

    impl<S: Subscriber> Layer<S> for Counting {
        fn on_event(&self, _: &Event<'_>, _: Context<'_, S>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn it_composes_with_other_layers_without_turning_their_events_off() {
        let journal = Journal::new(16);
        let seen = Arc::new(AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry()
            .with(journal.layer())
            .with(Counting(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "somebody_else", "for the other layer");
            queue_event("ns/a", "queued");
        });
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        assert_eq!(journal.last_seq(), 1);
    }

    #[test]
    fn events_inside_a_reconcile_span_name_its_key_as_their_cause() {
        let journal = Journal::new(16);
        recording(&journal, || {
            let reconcile = tracing::info_span!("reconcile", controller = "rs", key = %"ns/web");
            reconcile.in_scope(|| {
                let inner = tracing::debug_span!("patch");
                inner.in_scope(|| {
                    tracing::trace!(target: "ferrokube_pipeline", stage = "client", op = "request", verb = "PATCH", path = "/apis/apps/v1/namespaces/ns/replicasets/web", status = 200u64, wait_ms = 0u64, duration_ms = 3u64, state = "done");
                });
                tracing::trace!(target: "ferrokube_pipeline", stage = "handler", op = "enqueue", instance = "rs", key = %"ns/pod-1", queue_key = ?"ns/web", state = "enqueued", cause = "explicit");
            });
            tracing::trace!(target: "ferrokube_pipeline", stage = "client", op = "request", verb = "GET", path = "/api/v1/pods", status = 200u64, state = "done");
        });
        let records = journal.events_after(0, 100).records;
        assert_eq!(records[0].cause.as_deref(), Some("ns/web"));
        assert_eq!(records[1].cause.as_deref(), Some("explicit"));
        assert_eq!(records[1].fields["queue_key"], Value::from("ns/web"));
        assert_eq!(records[2].cause, None);
        let story: Vec<u64> = journal
            .follow("ns/web")
            .records
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(story, vec![1, 2]);
    }

    #[test]
    fn the_snapshot_keeps_the_latest_record_per_slot_and_drops_gone_keys() {
        let journal = Journal::new(16);
        recording(&journal, || {
            tracing::trace!(target: "ferrokube_pipeline", stage = "reflector", op = "list_start", instance = "pods", state = "listing", rv = "");
            queue_event("ns/a", "queued");
            queue_event("ns/b", "queued");
            tracing::trace!(target: "ferrokube_pipeline", stage = "queue", op = "get", instance = "q", key = ?"ns/a", state = "processing", depth = 1u64);
            tracing::trace!(target: "ferrokube_pipeline", stage = "queue", op = "done", instance = "q", key = ?"ns/b", state = "gone", depth = 0u64);
            tracing::trace!(target: "ferrokube_pipeline", stage = "reflector", op = "list_done", instance = "pods", state = "listed", items = 3u64, rv = "42");
            tracing::trace!(target: "ferrokube_pipeline", stage = "client", op = "request", state = "done", wait_ms = 5u64, duration_ms = 2u64);
            tracing::trace!(target: "ferrokube_pipeline", stage = "client", op = "request", state = "done", wait_ms = 7u64, duration_ms = 1u64);
        });
        let snapshot = journal.snapshot();
        assert_eq!(snapshot.seq, 8);
        let slots: Vec<(&str, Option<&str>, Option<&str>)> = snapshot
            .records
            .iter()
            .map(|r| (r.stage.as_str(), r.key.as_deref(), r.state.as_deref()))
            .collect();
        assert_eq!(
            slots,
            vec![
                ("queue", Some("ns/a"), Some("processing")),
                ("reflector", None, Some("listed")),
                ("client", None, Some("done")),
            ]
        );
        assert_eq!(snapshot.counts["queue"], 4);
        assert_eq!(snapshot.counts["reflector"], 2);
        assert_eq!(snapshot.totals_ms["client"]["wait_ms"], 12);
        assert_eq!(snapshot.totals_ms["client"]["duration_ms"], 3);
    }

    #[test]
    fn a_reader_that_fell_out_of_the_ring_is_told_of_the_gap() {
        let journal = Journal::new(3);
        recording(&journal, || {
            for n in 0..5 {
                queue_event(&format!("ns/{n}"), "queued");
            }
        });
        // The ring holds seqs 3, 4, 5.
        let behind = journal.events_after(1, 100);
        assert!(behind.gap);
        assert_eq!(
            behind.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        let just_in_time = journal.events_after(2, 100);
        assert!(!just_in_time.gap);
        assert_eq!(just_in_time.records.len(), 3);
        let limited = journal.events_after(2, 2);
        assert_eq!(
            limited.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert_eq!(limited.last_seq, 5);
        let caught_up = journal.events_after(5, 100);
        assert!(!caught_up.gap && caught_up.records.is_empty());
        assert!(
            journal.events_after(9, 100).gap,
            "a seq from the future means a restart"
        );
        // The snapshot is not bounded by the ring: every key is still there.
        assert_eq!(journal.snapshot().records.len(), 5);
        assert_eq!(journal.follow("ns/0").records.len(), 0);
        assert_eq!(journal.follow("ns/4").records.len(), 1);
    }
}
