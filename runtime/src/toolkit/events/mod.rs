//! Events: a controller's notes on the objects it works on (`kubectl describe` shows them), with
//! the behaviour of client-go's `tools/record`.
//!
//! A reconcile must not wait on its own bookkeeping, so recording an event only queues it; one task
//! posts queued events to the API server in order, as client-go's event broadcaster does. When the
//! queue is full (1,000 events) new ones are dropped with a log line, never blocking a reconcile.
//!
//! ```text
//!  record(obj, type, reason, msg) ─try_send─▶ queue (1,000) ─▶ posting task:
//!      correlator (similar combined, repeats → count patch) ─▶ spam filter (25, then 1 per 5 min
//!      per object) ─▶ sink: POST or PATCH, retried on transport errors (12 tries, 10 s apart)
//! ```
//!
//! - **Correlation** ([`correlator`]): per object, type and reason, the first 9 different messages
//!   in 10 minutes are posted as they are, then they are combined into one Event; an event seen
//!   before is sent as a patch of its Event's `count`, not posted again.
//! - **Spam filter**: each object may post a burst of 25 events, then one more per 5 minutes
//!   (client-go's defaults). As upstream, it runs as each event leaves the queue, so an event the
//!   full queue dropped costs its object nothing.
//! - **Retries**, as client-go's: an event whose request failed in transport (connection refused or
//!   broken, timeout) is tried again after 10 s (the first wait is random in 0–10 s, so clients do
//!   not retry in step after an API server restart), up to 12 tries. An answer from the server
//!   (403, 422, a namespace being deleted…) is final: the same request would get it again.
//! - **Background lane**, where we differ from upstream on purpose: the posting task's requests
//!   wait in the client's background lane ([`Priority::Background`]), so an event takes a
//!   rate-limit token only when no reconcile is waiting for one. Under load, upstream's events
//!   queue for tokens with the reconciles and slow them down (at 20 QPS, every event posted is 50 ms
//!   of convergence); here reconciles go first, and events are posted in the gaps.
//!
//! Where the events go is an [`EventSink`]: the client (`Api<Event>` in the object's namespace), or
//! your own in tests.
//!
//! **Recorded for the reconcile's key.** [`EventRecorder::record`] takes the reconcile's
//! [`Context`]: once the posting task has written the event, the write is recorded in the
//! controller's consistency store for that key, like every other write of the reconcile (it
//! holds the key back only if the controller caches Events). The post happens after the
//! reconcile returned, so the record comes when the write does, not before the call returns.
//! Recording an event from outside a reconcile is the deliberate
//! [`record_outside_reconcile`](EventRecorder::record_outside_reconcile).

pub mod correlator;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::controller::context::Context;
use crate::freshness::consistency::Writes;
use correlator::{Delivery, EventCorrelator};
use ferrokube_client::api::{Api, Patch, PatchParams, PostParams};
use ferrokube_client::client::{Client, Priority};
use ferrokube_client::error::Error;
use ferrokube_client::write_observer::WriteObserver;
use ferrokube_core::{ApiResource, Kind};

/// Events one object may emit at once (client-go's spam filter burst).
const SPAM_BURST: f64 = 25.0;
/// And then one per this long.
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Objects the spam filter tracks before it forgets those whose budget is full again (an object
/// with a full budget needs no entry; client-go keeps an LRU of this size).
const SPAM_TRACKED: usize = 4096;
/// Events waiting to be posted before new ones are dropped (client-go's broadcaster queue).
const QUEUE: usize = 1000;
/// Tries per event when the request fails in transport (client-go's `maxTriesPerEvent`).
pub const MAX_TRIES: u32 = 12;
/// The wait between tries (client-go's `sleepDuration`); the first is random in 0 to this.
pub const RETRY_WAIT: Duration = Duration::from_secs(10);

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Where events are written: the API server through a client, or a fake in tests.
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event` in its namespace; returns it as stored.
    fn create(&self, event: &Event) -> impl Future<Output = Result<Event, Error>> + Send;
    /// Patches (strategic merge) the Event `namespace/name` with `patch`; returns it as stored.
    fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> impl Future<Output = Result<Event, Error>> + Send;
}

impl EventSink for Client {
    async fn create(&self, event: &Event) -> Result<Event, Error> {
        let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Event> = Api::namespaced(self.clone(), namespace);
        api.create(&PostParams::default(), event).await
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Event, Error> {
        let api: Api<Event> = Api::namespaced(self.clone(), namespace);
        api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
    }
}

/// Queues events; cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Queued>,
    budget: Arc<SpamFilter>,
    /// The `source.component` of every event, e.g. `replicaset-controller`.
    component: Arc<str>,
}

/// An event waiting to be posted, and the reconcile key its write is recorded for (none: recorded
/// outside a reconcile).
struct Queued {
    event: Event,
    writes: Option<Writes>,
}

/// Per involved object uid: tokens left and when they were counted.
#[derive(Default)]
struct SpamFilter(Mutex<HashMap<String, (f64, Instant)>>);

impl EventRecorder {
    /// A recorder whose events name `component` as their source, and the task that posts them
    /// through `client` in its background lane (spawn it; it ends when every recorder is dropped
    /// and the queue is empty).
    #[must_use = "no event is posted unless the returned task is spawned"]
    pub fn new(
        client: Client,
        component: &str,
    ) -> (EventRecorder, impl Future<Output = ()> + Send + 'static) {
        EventRecorder::with_sink(client.with_priority(Priority::Background), component)
    }

    /// A recorder that posts to `sink`, and its posting task.
    #[must_use = "no event is posted unless the returned task is spawned"]
    pub fn with_sink<S: EventSink>(
        sink: S,
        component: &str,
    ) -> (EventRecorder, impl Future<Output = ()> + Send + 'static) {
        let (queue, posts) = mpsc::channel(QUEUE);
        let budget = Arc::new(SpamFilter::default());
        let recorder = EventRecorder {
            queue,
            budget: budget.clone(),
            component: component.into(),
        };
        (recorder, post_all(sink, posts, budget))
    }

    /// Queues an event about `object` from the reconcile of `ctx`; never waits (a full queue
    /// drops it, with a log line). Once posted, the write is recorded for `ctx`'s key (see the
    /// [module docs](self)).
    pub fn record<O: Kind>(
        &self,
        ctx: &Context,
        object: &O,
        kind: EventType,
        reason: &str,
        message: String,
    ) {
        self.queue(object, Some(ctx.writes()), kind, reason, message);
    }

    /// [`record`](Self::record) from outside any reconcile (a startup or shutdown note): the
    /// write is recorded for no key.
    pub fn record_outside_reconcile<O: Kind>(
        &self,
        object: &O,
        kind: EventType,
        reason: &str,
        message: String,
    ) {
        self.queue(object, None, kind, reason, message);
    }

    fn queue<O: Kind>(
        &self,
        object: &O,
        writes: Option<Writes>,
        kind: EventType,
        reason: &str,
        message: String,
    ) {
        let event = event_about(object, &self.component, kind, reason, message);
        if self.queue.try_send(Queued { event, writes }).is_err() {
            tracing::warn!(reason, "event queue full; event dropped");
        }
    }

    /// Drops the spam-filter state of a deleted object.
    pub fn forget(&self, uid: &str) {
        self.budget.0.lock().remove(uid);
    }
}

impl SpamFilter {
    /// Whether the object `uid` may post one more event at `now` (and if so, counts it).
    fn take_token(&self, uid: &str, now: Instant) -> bool {
        let mut budget = self.0.lock();
        let full_again = |tokens: f64, counted: Instant| {
            tokens + now.duration_since(counted).as_secs_f64() / SPAM_REFILL.as_secs_f64()
                >= SPAM_BURST
        };
        if budget.len() >= SPAM_TRACKED && !budget.contains_key(uid) {
            // Also what bounds entries re-made by events posted after `forget`.
            budget.retain(|_, (tokens, counted)| !full_again(*tokens, *counted));
        }
        let (tokens, counted) = budget.entry(uid.to_string()).or_insert((SPAM_BURST, now));
        let refilled = now.duration_since(*counted).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        *tokens = (*tokens + refilled).min(SPAM_BURST);
        *counted = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn event_about<O: Kind>(
    object: &O,
    component: &str,
    kind: EventType,
    reason: &str,
    message: String,
) -> Event {
    let now = ferrokube_core::time::now();
    let meta = object.meta();
    let (api_version, involved_kind) = object.api_version_and_kind();
    let name = meta.name.clone().unwrap_or_default();
    // A cluster-scoped object's events go to `default`, as client-go's do.
    let namespace = meta.namespace.clone().filter(|ns| !ns.is_empty());
    Event {
        metadata: ObjectMeta {
            // client-go's naming: the object's name and the time in nanoseconds, in hex.
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace.clone().unwrap_or_else(|| "default".into())),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(involved_kind.into()),
            name: Some(name),
            namespace,
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_string()),
        message: Some(message),
        source: Some(EventSource {
            component: Some(component.into()),
            host: None,
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(
            match kind {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        ..Event::default()
    }
}

/// The posting task: each queued event is correlated (combined, counted), spam-filtered and sent.
async fn post_all<S: EventSink>(
    sink: S,
    mut posts: mpsc::Receiver<Queued>,
    budget: Arc<SpamFilter>,
) {
    let events = ApiResource::of::<Event>();
    let mut correlator = EventCorrelator::default();
    while let Some(Queued { event, writes }) = posts.recv().await {
        // The correlator's windows and the spam filter's refill count on the runtime's clock, the
        // one the retries sleep on: virtual time on a paused runtime (a deterministic run).
        let now = tokio::time::Instant::now().into_std();
        let (delivery, key) = correlator.correlate(event, now);
        let event = delivery.event();
        let uid = event.involved_object.uid.as_deref().unwrap_or_default();
        if !budget.take_token(uid, now) {
            tracing::debug!(reason = ?event.reason, "event dropped by the spam filter");
            continue;
        }
        if let Some(stored) = send_with_retries(&sink, delivery, RETRY_WAIT).await {
            if let Some(writes) = &writes {
                writes.committed(&events, &stored.metadata);
            }
            correlator.sent(key, &stored, tokio::time::Instant::now().into_std());
        }
    }
}

/// Sends `delivery`, trying again after `wait` (the first wait random in 0 to `wait`) while it
/// fails in transport, up to [`MAX_TRIES`] tries. The stored Event, or `None` if it was given up.
async fn send_with_retries<S: EventSink>(
    sink: &S,
    delivery: Delivery,
    wait: Duration,
) -> Option<Event> {
    let reason = delivery.event().reason.clone();
    for attempt in 1..=MAX_TRIES {
        match send(sink, &delivery).await {
            Ok(stored) => return Some(stored),
            Err(error) if !is_transport(&error) => {
                tracing::debug!(%error, ?reason, "event rejected; not retrying");
                return None;
            }
            Err(error) if attempt == MAX_TRIES => {
                tracing::warn!(%error, ?reason, tries = MAX_TRIES, "could not post event; giving up");
                return None;
            }
            Err(error) => {
                tracing::debug!(%error, ?reason, attempt, "could not post event; will retry");
                let pause = if attempt == 1 {
                    wait.mul_f64(ferrokube_core::random::unit_f64())
                } else {
                    wait
                };
                tokio::time::sleep(pause).await;
            }
        }
    }
    None
}

/// A failure the same request may not meet again: no answer, or a broken connection.
fn is_transport(error: &Error) -> bool {
    matches!(error, Error::Transport { .. } | Error::Timeout { .. })
}

/// One request: a POST, or a PATCH of the repeated Event (a POST after all if it is gone).
async fn send<S: EventSink>(sink: &S, delivery: &Delivery) -> Result<Event, Error> {
    match delivery {
        Delivery::Create(event) => sink.create(event).await,
        Delivery::Patch { event, patch } => {
            let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
            let name = event.metadata.name.as_deref().unwrap_or_default();
            match sink.patch(namespace, name, patch).await {
                Err(error) if error.is_not_found() => {
                    let mut event = event.clone();
                    event.metadata.resource_version = None;
                    sink.create(&event).await
                }
                sent => sent,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_events_spam_filter_allows_a_burst_per_object_then_one_per_refill() {
        let filter = SpamFilter::default();
        let start = Instant::now();
        assert!((0..25).all(|_| filter.take_token("a", start)));
        assert!(!filter.take_token("a", start));
        assert!(
            filter.take_token("b", start),
            "objects have separate budgets"
        );
        assert!(!filter.take_token("a", start + SPAM_REFILL / 2));
        assert!(filter.take_token("a", start + SPAM_REFILL + SPAM_REFILL / 2));
        assert!(!filter.take_token("a", start + SPAM_REFILL + SPAM_REFILL / 2));
    }

    #[test]
    fn controller_events_spam_filter_forgets_objects_whose_budget_is_full_again_once_it_tracks_many()
     {
        let filter = SpamFilter::default();
        let start = Instant::now();
        for i in 0..SPAM_TRACKED {
            assert!(filter.take_token(&format!("old-{i}"), start));
        }
        // One token spent each: none is full yet, so a newcomer forgets nobody.
        assert!(filter.take_token("new-1", start));
        assert_eq!(filter.0.lock().len(), SPAM_TRACKED + 1);
        // A refill period later every old budget is full again and may go.
        assert!(filter.take_token("new-2", start + SPAM_REFILL));
        let tracked = filter.0.lock();
        assert!(tracked.len() <= 3, "{}", tracked.len());
        assert!(tracked.contains_key("new-2"));
    }

    /// Fails the first `failures` requests with `error`, then stores what it is sent.
    struct FlakySink {
        failures: std::sync::atomic::AtomicU32,
        calls: std::sync::atomic::AtomicU32,
        transport: bool,
    }

    impl FlakySink {
        fn new(failures: u32, transport: bool) -> FlakySink {
            FlakySink {
                failures: failures.into(),
                calls: 0.into(),
                transport,
            }
        }
        fn fail_or(&self, event: &Event) -> Result<Event, Error> {
            use std::sync::atomic::Ordering::SeqCst;
            self.calls.fetch_add(1, SeqCst);
            if self
                .failures
                .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                .is_err()
            {
                return Ok(event.clone());
            }
            Err(if self.transport {
                Error::Transport {
                    url: "https://127.0.0.1:1".into(),
                    source: "connection refused".into(),
                }
            } else {
                Error::InvalidRequest("rejected".into())
            })
        }
    }

    impl EventSink for FlakySink {
        async fn create(&self, event: &Event) -> Result<Event, Error> {
            self.fail_or(event)
        }
        async fn patch(&self, _: &str, _: &str, _: &serde_json::Value) -> Result<Event, Error> {
            self.fail_or(&Event::default())
        }
    }

    #[tokio::test]
    async fn controller_events_are_retried_on_transport_errors_only_up_to_twelve_tries() {
        use std::sync::atomic::Ordering::SeqCst;
        let event = || Delivery::Create(Event::default());
        let wait = Duration::from_millis(1);

        let flaky = FlakySink::new(2, true);
        assert!(send_with_retries(&flaky, event(), wait).await.is_some());
        assert_eq!(flaky.calls.load(SeqCst), 3, "two failures, then posted");

        let rejected = FlakySink::new(1, false);
        assert!(send_with_retries(&rejected, event(), wait).await.is_none());
        assert_eq!(rejected.calls.load(SeqCst), 1, "an answer is final");

        let down = FlakySink::new(u32::MAX, true);
        assert!(send_with_retries(&down, event(), wait).await.is_none());
        assert_eq!(down.calls.load(SeqCst), MAX_TRIES);
    }
}
