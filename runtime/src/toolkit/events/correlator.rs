//! What happens to an event between the recorder's queue and the API server, as client-go's
//! `EventCorrelator` does it, so `kubectl get events` reads the same for a ferrokube controller as
//! for an upstream one.
//!
//! Two rules, both keyed by what the event is about:
//!
//! - **Similar events are combined.** Per object, type and reason, the first 9 different messages
//!   within 10 minutes are posted as they are; from the 10th on, every such event is posted as one
//!   Event, "(combined from similar events): *latest message*". A scale-up of 10 pods gives 9
//!   "Created pod: …" events and one combined one.
//! - **Repeats are counted, not re-posted.** An event whose object, type, reason and message were
//!   posted before is sent as a patch of that Event (`count` + 1, `lastTimestamp`, `message`)
//!   instead of a new one; the combined event is always such a repeat after its first post.
//!
//! ```text
//! queue ─▶ combine (similar → one key) ─▶ repeat? ─┬─ no:  POST a new Event
//!                                                   └─ yes: PATCH count/lastTimestamp/message
//! ```
//!
//! Either way it is one request per event: this changes what the events look like, not how many
//! requests they cost. State is kept for 4,096 keys; beyond that, keys idle for 10 minutes go.
//!
//! The correlator reads no clock: each call is given `now`. The posting task passes the tokio
//! runtime's clock (`tokio::time::Instant::now().into_std()`), so a 10-minute window is 10
//! minutes of the runtime's time, virtual in a deterministic run.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::json;

/// Different messages per object, type and reason before they are combined (client-go's 10).
const SIMILAR_BEFORE_COMBINING: usize = 10;
/// How long similar events count as one run (client-go's 10 minutes).
const SIMILAR_WINDOW: Duration = Duration::from_secs(600);
/// Keys remembered before idle ones are forgotten (client-go's LRU size).
const KEYS_KEPT: usize = 4096;
/// The prefix of a combined event's message.
pub const COMBINED: &str = "(combined from similar events): ";

/// How an event is to be sent.
#[derive(Debug)]
pub enum Delivery {
    /// A new Event.
    Create(Event),
    /// A repeat: patch the Event named `event.metadata.name` with `patch`; `event` is its new
    /// state, to create instead if the old one is gone.
    Patch {
        event: Event,
        patch: serde_json::Value,
    },
}

impl Delivery {
    /// The Event as it will be after this delivery.
    pub fn event(&self) -> &Event {
        match self {
            Delivery::Create(event) | Delivery::Patch { event, .. } => event,
        }
    }
}

/// See the [module docs](self). Owned by the posting task alone.
#[derive(Default)]
pub struct EventCorrelator {
    /// Per object+type+reason: the messages seen in the current run, and when the run last grew.
    /// Invariant: at most `SIMILAR_BEFORE_COMBINING - 1` messages once combining has begun.
    similar: HashMap<String, (HashSet<String>, Instant)>,
    /// Per event key: the Event the server holds for it, and when it was last used.
    posted: HashMap<String, (Posted, Instant)>,
}

/// What a repeat patch needs of the Event already posted.
#[derive(Debug, Clone)]
struct Posted {
    name: String,
    count: i32,
    first_timestamp: Option<Time>,
}

impl EventCorrelator {
    /// Combines `event` with similar ones and decides how to send it; returns its key too, for
    /// [`sent`](Self::sent).
    pub fn correlate(&mut self, event: Event, now: Instant) -> (Delivery, String) {
        let (event, key) = self.combine(event, now);
        (self.observe(event, &key, now), key)
    }

    /// Remembers the Event the server returned for `key`, so the next repeat patches it.
    pub fn sent(&mut self, key: String, stored: &Event, now: Instant) {
        let posted = Posted {
            name: stored.metadata.name.clone().unwrap_or_default(),
            count: stored.count.unwrap_or(1),
            first_timestamp: stored.first_timestamp.clone(),
        };
        self.posted.insert(key, (posted, now));
    }

    fn combine(&mut self, event: Event, now: Instant) -> (Event, String) {
        forget_idle(&mut self.similar, now, |(_, last)| *last);
        let message = event.message.clone().unwrap_or_default();
        let run = self
            .similar
            .entry(similar_key(&event))
            .or_insert_with(|| (HashSet::new(), now));
        if now.duration_since(run.1) > SIMILAR_WINDOW {
            run.0.clear();
        }
        run.1 = now;
        run.0.insert(message.clone());
        if run.0.len() < SIMILAR_BEFORE_COMBINING {
            let key = event_key(&event);
            return (event, key);
        }
        // Keep the set bounded: drop any one message, as client-go does.
        if let Some(any) = run.0.iter().next().cloned() {
            run.0.remove(&any);
        }
        let key = similar_key(&event);
        let name = event.involved_object.name.clone().unwrap_or_default();
        let stamp = event
            .first_timestamp
            .clone()
            .unwrap_or_else(|| Time(ferrokube_core::time::now()));
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", stamp.0.as_nanosecond())),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            message: Some(format!("{COMBINED}{message}")),
            count: Some(1),
            first_timestamp: Some(stamp.clone()),
            last_timestamp: Some(stamp),
            ..event
        };
        (combined, key)
    }

    fn observe(&mut self, mut event: Event, key: &str, now: Instant) -> Delivery {
        forget_idle(&mut self.posted, now, |(_, last)| *last);
        let Some((posted, last)) = self.posted.get_mut(key) else {
            return Delivery::Create(event);
        };
        posted.count += 1;
        *last = now;
        event.metadata.name = Some(posted.name.clone());
        event.first_timestamp = posted.first_timestamp.clone();
        event.count = Some(posted.count);
        let patch = json!({
            "count": posted.count,
            "lastTimestamp": event.last_timestamp,
            "message": event.message,
        });
        Delivery::Patch { event, patch }
    }
}

/// Once `map` holds `KEYS_KEPT` keys, drops those unused for `SIMILAR_WINDOW`.
fn forget_idle<V>(map: &mut HashMap<String, V>, now: Instant, last_used: impl Fn(&V) -> Instant) {
    if map.len() >= KEYS_KEPT {
        map.retain(|_, value| now.duration_since(last_used(value)) <= SIMILAR_WINDOW);
    }
}

/// Object, type and reason: events that differ only in message are similar.
fn similar_key(event: &Event) -> String {
    let object = &event.involved_object;
    let source = event.source.as_ref();
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        object.kind.as_deref(),
        object.namespace.as_deref(),
        object.name.as_deref(),
        object.uid.as_deref(),
        object.api_version.as_deref(),
        event.type_.as_deref(),
        event.reason.as_deref(),
    ]
    .map(Option::unwrap_or_default)
    .join("\u{0}")
}

/// Similar, and the same message (and field path): the same event again.
fn event_key(event: &Event) -> String {
    let object = &event.involved_object;
    [
        similar_key(event).as_str(),
        object.field_path.as_deref().unwrap_or_default(),
        event.message.as_deref().unwrap_or_default(),
    ]
    .join("\u{0}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn event(reason: &str, message: &str) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("web.{message}")),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                kind: Some("ReplicaSet".into()),
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            count: Some(1),
            ..Event::default()
        }
    }

    /// Sends like the posting task: the server names a created Event as asked and keeps counts.
    fn send(correlator: &mut EventCorrelator, event: Event, now: Instant) -> (bool, Event) {
        let (delivery, key) = correlator.correlate(event, now);
        let (patched, stored) = match delivery {
            Delivery::Create(event) => (false, event),
            Delivery::Patch { event, patch } => {
                assert_eq!(patch["count"], json!(event.count));
                assert_eq!(patch["message"], json!(event.message));
                (true, event)
            }
        };
        correlator.sent(key, &stored, now);
        (patched, stored)
    }

    #[test]
    fn controller_events_ten_similar_events_are_nine_posts_then_one_combined_event_that_is_patched_after()
     {
        let mut correlator = EventCorrelator::default();
        let now = Instant::now();
        let mut sent = Vec::new();
        for i in 0..13 {
            sent.push(send(
                &mut correlator,
                event("SuccessfulCreate", &format!("Created pod: p{i}")),
                now,
            ));
        }
        assert!(sent[..10].iter().all(|(patched, _)| !patched));
        assert!(sent[10..].iter().all(|(patched, _)| *patched));
        let messages: Vec<_> = sent
            .iter()
            .map(|(_, e)| e.message.clone().unwrap())
            .collect();
        assert_eq!(messages[8], "Created pod: p8");
        assert_eq!(messages[9], format!("{COMBINED}Created pod: p9"));
        assert_eq!(messages[12], format!("{COMBINED}Created pod: p12"));
        let combined_name = &sent[9].1.metadata.name;
        assert!(
            sent[10..]
                .iter()
                .all(|(_, e)| &e.metadata.name == combined_name)
        );
        assert_eq!(sent[12].1.count, Some(4));
        // Another reason is another run: posted as it is.
        let (patched, other) = send(
            &mut correlator,
            event("SuccessfulDelete", "Deleted pod: p0"),
            now,
        );
        assert!(!patched);
        assert_eq!(other.message.as_deref(), Some("Deleted pod: p0"));
    }

    #[test]
    fn controller_events_an_identical_event_is_a_count_patch_and_a_run_ends_after_ten_quiet_minutes()
     {
        let mut correlator = EventCorrelator::default();
        let start = Instant::now();
        let (_, first) = send(&mut correlator, event("FailedCreate", "quota"), start);
        let (patched, again) = send(&mut correlator, event("FailedCreate", "quota"), start);
        assert!(patched);
        assert_eq!(again.metadata.name, first.metadata.name);
        assert_eq!(again.count, Some(2));
        for i in 0..8 {
            send(
                &mut correlator,
                event("FailedCreate", &format!("m{i}")),
                start,
            );
        }
        let later = start + SIMILAR_WINDOW + Duration::from_secs(1);
        let (_, fresh) = send(&mut correlator, event("FailedCreate", "new"), later);
        assert_eq!(
            fresh.message.as_deref(),
            Some("new"),
            "the old run has ended"
        );
    }
}
