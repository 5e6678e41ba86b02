//! Events: the controller's notes on a ReplicaSet (`kubectl describe rs` shows them).
//!
//! A sync must not wait on its own bookkeeping, so recording an event only queues it; one task posts
//! queued events to the API server in order, through the controller's client (and so its rate limit),
//! as client-go's event broadcaster does. When the queue is full (1,000 events) new ones are dropped
//! with a log line, never blocking a sync.
//!
//! Like client-go's spam filter, each ReplicaSet may emit a burst of 25 events, then one more per
//! 5 minutes; upstream also merges runs of similar events into one "combined" event and patches the
//! count of repeated ones, which this recorder does not (it posts or drops).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokube::api::PostParams;
use ferrokube::{Api, Client};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use parking_lot::Mutex;
use tokio::sync::mpsc;

/// The `source.component` of every event (upstream's name for this controller).
pub const COMPONENT: &str = "replicaset-controller";
/// Events one object may emit at once (client-go's spam filter burst).
const SPAM_BURST: f64 = 25.0;
/// And then one per this long.
const SPAM_REFILL: Duration = Duration::from_secs(300);
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
    /// Per involved object uid: tokens left and when they were counted.
    budget: Arc<Mutex<HashMap<String, (f64, Instant)>>>,
}

impl EventRecorder {
    /// A recorder and the task that posts its events through `client` (spawn it; it ends when every
    /// recorder is dropped and the queue is empty).
    pub fn new(client: Client) -> (EventRecorder, impl Future<Output = ()> + Send + 'static) {
        let (queue, posts) = mpsc::channel(QUEUE);
        let recorder = EventRecorder {
            queue,
            budget: Arc::default(),
        };
        (recorder, post_all(client, posts))
    }

    /// Queues an event about `rs`.
    pub fn record(&self, rs: &ReplicaSet, kind: EventType, reason: &str, message: String) {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        if !self.take_token(&uid) {
            tracing::debug!(reason, %message, "event dropped by the spam filter");
            return;
        }
        let event = event_about(rs, kind, reason, message);
        if self.queue.try_send(event).is_err() {
            tracing::warn!(reason, "event queue full; event dropped");
        }
    }

    fn take_token(&self, uid: &str) -> bool {
        let mut budget = self.budget.lock();
        let now = Instant::now();
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

async fn post_all(client: Client, mut posts: mpsc::Receiver<Event>) {
    while let Some(event) = posts.recv().await {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(%error, reason = ?event.reason, "could not post event");
        }
    }
}

impl EventRecorder {
    /// Drops the spam-filter state of a deleted object.
    pub fn forget(&self, uid: &str) {
        self.budget.lock().remove(uid);
    }
}
