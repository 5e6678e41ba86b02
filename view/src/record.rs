//! One pipeline event as the view keeps it: a [`Record`], and the [`Draft`] a `tracing` event is
//! read into before the journal numbers it.
//!
//! `tracing` hands a layer an event's fields one at a time through the [`Visit`] trait, each with
//! its static name and a value of one of a few primitive types. The schema's named fields
//! (`stage`, `op`, `instance`, `key`, `state`, `cause`) get their own slots; every other field
//! lands in [`Record::fields`] with its JSON type (numbers stay numbers, `bool`s stay `bool`s,
//! anything formatted with `%` or `?` becomes a string).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::field::{Field, Visit};

/// The `tracing` target of every pipeline event: the only events the view records.
pub const PIPELINE_TARGET: &str = ferrokube_core::pipeline::TARGET;

/// The state that means "the key left this stage": its slot is removed from the snapshot.
pub const GONE: &str = "gone";

/// One pipeline event, numbered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the journal: 1 for the first event, then +1 per event, never reused.
    pub seq: u64,
    /// Milliseconds since the journal was created (the layer started).
    pub at_ms: u64,
    /// Which part of the machinery did it: `reflector`, `watch`, `fifo`, `store`, `handler`,
    /// `queue`, `limiter`, `reconcile`, `client` (empty if the event named none).
    pub stage: String,
    /// What happened in that stage (`add`, `get`, `popped`, …; empty if the event named none).
    pub op: String,
    /// Which one of several of that stage: the informer's resource, the queue's or controller's
    /// name.
    pub instance: Option<String>,
    /// The object or queue key the event is about; `None` for events about a whole stage (a
    /// reflector's list, a fifo's batch).
    pub key: Option<String>,
    /// The key's state in that stage after the event; [`GONE`] when it left the stage.
    pub state: Option<String>,
    /// The key of the reconcile this event happened in (from the enclosing `reconcile` span), or
    /// an explicit `cause` field.
    pub cause: Option<String>,
    /// Every other field, by name.
    pub fields: BTreeMap<String, Value>,
}

impl Record {
    /// Whether this record belongs to `key`'s story: it is about `key`, was caused by `key`'s
    /// reconcile, or put `key` in a queue (`queue_key`).
    pub fn mentions(&self, key: &str) -> bool {
        self.key.as_deref() == Some(key)
            || self.cause.as_deref() == Some(key)
            || self.fields.get("queue_key").and_then(Value::as_str) == Some(key)
    }

    /// Whether the record says its key left its stage.
    pub fn is_gone(&self) -> bool {
        self.state.as_deref() == Some(GONE)
    }
}

/// A record before the journal gave it a number and a time: what a `tracing` event's fields said.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Draft {
    pub(crate) stage: String,
    pub(crate) op: String,
    pub(crate) instance: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) state: Option<String>,
    pub(crate) cause: Option<String>,
    pub(crate) fields: BTreeMap<String, Value>,
}

impl Draft {
    /// The record this draft becomes as number `seq`, `at_ms` after the journal started.
    pub(crate) fn into_record(self, seq: u64, at_ms: u64) -> Record {
        Record {
            seq,
            at_ms,
            stage: self.stage,
            op: self.op,
            instance: self.instance,
            key: self.key,
            state: self.state,
            cause: self.cause,
            fields: self.fields,
        }
    }

    /// Files one field: the schema's named fields into their slots (as text), the rest as they
    /// came.
    fn put(&mut self, name: &str, value: Value) {
        match name {
            "stage" => self.stage = text_of(value),
            "op" => self.op = text_of(value),
            "instance" => self.instance = Some(text_of(value)),
            "state" => self.state = Some(text_of(value)),
            "key" => self.key = Some(unquoted(text_of(value))),
            "cause" => self.cause = Some(unquoted(text_of(value))),
            "queue_key" => {
                let key = unquoted(text_of(value));
                self.fields.insert(name.to_owned(), Value::String(key));
            }
            _ => {
                self.fields.insert(name.to_owned(), value);
            }
        }
    }
}

impl Visit for Draft {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field.name(), Value::String(value.to_owned()));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field.name(), Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field.name(), Value::from(value));
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        let value =
            u64::try_from(value).map_or_else(|_| Value::String(value.to_string()), Value::from);
        self.put(field.name(), value);
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        let value =
            i64::try_from(value).map_or_else(|_| Value::String(value.to_string()), Value::from);
        self.put(field.name(), value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and infinities have no JSON number: they become null.
        self.put(field.name(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field.name(), Value::Bool(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field.name(), Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%x` fields arrive here too, wrapped so that Debug prints their Display.
        self.put(field.name(), Value::String(format!("{value:?}")));
    }
}

/// A value as text: strings as they are, anything else as its JSON.
fn text_of(value: Value) -> String {
    match value {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// `text` without one pair of surrounding double quotes: the workqueue records its keys with
/// `?` (Debug), which quotes a string key.
pub(crate) fn unquoted(text: String) -> String {
    match text
        .strip_prefix('"')
        .and_then(|inner| inner.strip_suffix('"'))
    {
        Some(inner) => inner.to_owned(),
        None => text,
    }
}

/// Reads the `key` field of a span's attributes or a later `record` (the reconcile span's).
#[derive(Default)]
pub(crate) struct KeyField(pub(crate) Option<String>);

impl Visit for KeyField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "key" {
            self.0 = Some(unquoted(value.to_owned()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "key" {
            self.0 = Some(unquoted(format!("{value:?}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pair_of_quotes_is_stripped() {
        assert_eq!(unquoted("\"ns/a\"".into()), "ns/a");
        assert_eq!(unquoted("ns/a".into()), "ns/a");
        assert_eq!(unquoted("\"\"x\"\"".into()), "\"x\"");
        assert_eq!(unquoted("\"".into()), "\"");
    }

    #[test]
    fn named_fields_get_slots_and_the_rest_keep_their_types() {
        let mut draft = Draft::default();
        draft.put("stage", Value::from("queue"));
        draft.put("key", Value::from("\"ns/a\""));
        draft.put("queue_key", Value::from("\"ns/b\""));
        draft.put("depth", Value::from(3u64));
        draft.put("instance", Value::from(7u64));
        assert_eq!(draft.stage, "queue");
        assert_eq!(draft.key.as_deref(), Some("ns/a"));
        assert_eq!(draft.instance.as_deref(), Some("7"));
        assert_eq!(draft.fields["queue_key"], Value::from("ns/b"));
        assert_eq!(draft.fields["depth"], Value::from(3u64));
        let record = draft.into_record(1, 0);
        assert!(record.mentions("ns/a") && record.mentions("ns/b") && !record.mentions("ns/c"));
    }
}
