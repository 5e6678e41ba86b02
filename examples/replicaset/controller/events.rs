//! Events: the controller's notes on a ReplicaSet (`kubectl describe rs` shows them).
//!
//! A sync must not wait on its own bookkeeping, so recording an event only queues it; one task posts
//! queued events to the API server in order, through the controller's client (and so its rate limit),
//! as client-go's event broadcaster does. When the queue is full (1,000 events) new ones are dropped
//! with a log line, never blocking a sync.
//!
//! One difference from upstream, on purpose: the posting task's requests wait in the client's
//! background lane ([`Priority::Background`]), so an event takes a rate-limit token only when no
//! sync is waiting for one. Under load, upstream's events queue for tokens with the syncs and slow
//! them down (at 20 QPS, every event posted is 50 ms of convergence); here the syncs go first, the
//! events are posted in the gaps, and the queue drops what it cannot hold, as it does upstream.
//!
//! On the way out each event goes through an [`EventCorrelator`] (similar events combined, repeats
//! patched instead of re-posted, as client-go's), then a spam filter like client-go's: each
//! ReplicaSet may post a burst of 25 events, then one more per 5 minutes. As upstream, both run in
//! the posting task as each event leaves the queue, so an event the full queue dropped costs its
//! object nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube::api::{Patch, PatchParams, PostParams};
use ferrokube::client::Priority;
use ferrokube::{Api, Client};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::event_correlator::{Delivery, EventCorrelator};

/// The `source.component` of every event (upstream's name for this controller).
pub const COMPONENT: &str = "replicaset-controller";
/// Events one object may emit at once (client-go's spam filter burst).
const SPAM_BURST: f64 = 25.0;
/// And then one per this long.
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Objects the spam filter tracks before it forgets those whose budget is full again (an object
/// with a full budget needs no entry; client-go keeps an LRU of this size).
const SPAM_TRACKED: usize = 4096;
/// Events waiting to be posted before new ones are dropped.
const QUEUE: usize = 1000;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Queues events; cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Event>,
    budget: Arc<SpamFilter>,
}

/// Per involved object uid: tokens left and when they were counted.
#[derive(Default)]
struct SpamFilter(Mutex<HashMap<String, (f64, Instant)>>);

impl EventRecorder {
    /// A recorder and the task that posts its events through `client` (spawn it; it ends when every
    /// recorder is dropped and the queue is empty).
    pub fn new(client: Client) -> (EventRecorder, impl Future<Output = ()> + Send + 'static) {
        let (queue, posts) = mpsc::channel(QUEUE);
        let budget = Arc::new(SpamFilter::default());
        let recorder = EventRecorder {
            queue,
            budget: budget.clone(),
        };
        let client = client.with_priority(Priority::Background);
        (recorder, post_all(client, posts, budget))
    }

    /// Queues an event about `rs`.
    pub fn record(&self, rs: &ReplicaSet, kind: EventType, reason: &str, message: String) {
        let event = event_about(rs, kind, reason, message);
        if self.queue.try_send(event).is_err() {
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

fn event_about(rs: &ReplicaSet, kind: EventType, reason: &str, message: String) -> Event {
    let now = super::pod::now();
    let name = rs.metadata.name.clone().unwrap_or_default();
    let namespace = rs.metadata.namespace.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            // client-go's naming: the object's name and the time in nanoseconds, in hex.
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("apps/v1".into()),
            kind: Some("ReplicaSet".into()),
            name: Some(name),
            namespace: Some(namespace),
            uid: rs.metadata.uid.clone(),
            resource_version: rs.metadata.resource_version.clone(),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_string()),
        message: Some(message),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
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
async fn post_all(client: Client, mut posts: mpsc::Receiver<Event>, budget: Arc<SpamFilter>) {
    let mut correlator = EventCorrelator::default();
    while let Some(event) = posts.recv().await {
        let now = Instant::now();
        let (delivery, key) = correlator.correlate(event, now);
        let event = delivery.event();
        let uid = event.involved_object.uid.as_deref().unwrap_or_default();
        if !budget.take_token(uid, now) {
            tracing::debug!(reason = ?event.reason, "event dropped by the spam filter");
            continue;
        }
        let reason = event.reason.clone();
        match send(&client, delivery).await {
            Ok(stored) => correlator.sent(key, &stored, now),
            Err(error) => tracing::debug!(%error, ?reason, "could not post event"),
        }
    }
}

/// One request: a POST, or a PATCH of the repeated Event (a POST after all if it is gone).
async fn send(client: &Client, delivery: Delivery) -> Result<Event, ferrokube::Error> {
    let namespace = delivery.event().metadata.namespace.as_deref();
    let api: Api<Event> = Api::namespaced(client.clone(), namespace.unwrap_or_default());
    match delivery {
        Delivery::Create(event) => api.create(&PostParams::default(), &event).await,
        Delivery::Patch { mut event, patch } => {
            let name = event.metadata.name.clone().unwrap_or_default();
            match api
                .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Err(error) if error.is_not_found() => {
                    event.metadata.resource_version = None;
                    api.create(&PostParams::default(), &event).await
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
    fn spam_filter_allows_a_burst_per_object_then_one_per_refill() {
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
    fn spam_filter_forgets_objects_whose_budget_is_full_again_once_it_tracks_many() {
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
}
