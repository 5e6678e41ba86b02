//! The trace of a run: every request the server answered and every watch event it delivered, in
//! the order they passed the tap, with the scenario's steps as markers between them.
//!
//! A trace is plain data: two traces are compared line by line ([`Trace::first_difference`]) or
//! by a stable hash of their text ([`Trace::fingerprint`]). Each entry prints as one line:
//!
//! ```text
//! step 0 create source a
//! request scenario POST /api/v1/namespaces/default/configmaps -> 201 rv=12 name=a
//! request controller GET /api/v1/configmaps?watch=true&resourceVersion=11&timeoutSeconds=412 -> 200 watch=1
//! event watch=1 ADDED ConfigMap default/a rv=12
//! request controller PUT /api/v1/namespaces/default/configmaps/a -> 409 Conflict
//! ```
//!
//! An error's status is followed by the `reason` of its `Status` body: `409 Conflict` (a stale
//! resourceVersion) and `409 AlreadyExists` (a create of a name in use) call for different
//! fixes.

use std::fmt;

use parking_lot::Mutex;

/// One thing that happened in a run. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TraceEntry {
    /// The scenario began step `index`.
    Step {
        /// Position of the step in the scenario, from 0.
        index: usize,
        /// The step's description.
        name: String,
    },
    /// A request and its answer's status, recorded when the answer has passed the tap (for a
    /// watch: when its head has).
    Request {
        /// Who sent it: the `User-Agent` of its client (the runner gives each client one).
        actor: String,
        /// `GET`, `POST`, ...
        method: String,
        /// Path and query, as sent (a watch's `timeoutSeconds` is drawn from the seed).
        path: String,
        /// The answer's HTTP status.
        status: u16,
        /// The `reason` of an error's `Status` body (`Conflict`, `AlreadyExists`, `NotFound`):
        /// a 409 alone does not say whether the object changed or already exists.
        reason: Option<String>,
        /// `metadata.resourceVersion` of the answer's body (an object's or a list's), if any.
        resource_version: Option<String>,
        /// `metadata.name` of the answer's body, if it names an object.
        name: Option<String>,
        /// For a watch, its number in the run (from 1, by order of opening).
        watch: Option<u64>,
    },
    /// A fault of the run's plan took effect (see [`crate::fault`]).
    Fault {
        /// The fault, as the plan writes it (`crash-after@request:12`).
        fault: String,
        /// What it did (`hid MODIFIED ConfigMap default/a rv=12`, `the answer was lost`).
        detail: String,
    },
    /// A new incarnation of the controller started after a crash.
    Restart {
        /// Its number (the first incarnation is 1).
        incarnation: u32,
        /// The revision its lists come from while its replica lags, if it does.
        lagging_at: Option<u64>,
    },
    /// A call to the outside system ([`crate::OutsideClient`]).
    Outside {
        /// Who called: `controller#N`.
        actor: String,
        /// The call (`put a=1`, `delete a`).
        call: String,
    },
    /// One event of a watch, recorded when the client read it from the tap.
    Event {
        /// The watch's number (see [`TraceEntry::Request::watch`]).
        watch: u64,
        /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
        kind_of_event: String,
        /// The object's kind.
        kind: String,
        /// `namespace/name`, or `name` for a cluster-scoped object (empty for a bookmark;
        /// `code=410` and the like for the `Status` of an `ERROR` event).
        key: String,
        /// The object's resourceVersion.
        resource_version: String,
    },
}

impl fmt::Display for TraceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceEntry::Step { index, name } => write!(f, "step {index} {name}"),
            TraceEntry::Request {
                actor,
                method,
                path,
                status,
                reason,
                resource_version,
                name,
                watch,
            } => {
                write!(f, "request {actor} {method} {path} -> {status}")?;
                if let Some(reason) = reason {
                    write!(f, " {reason}")?;
                }
                if let Some(watch) = watch {
                    write!(f, " watch={watch}")?;
                }
                if let Some(rv) = resource_version {
                    write!(f, " rv={rv}")?;
                }
                if let Some(name) = name {
                    write!(f, " name={name}")?;
                }
                Ok(())
            }
            TraceEntry::Fault { fault, detail } => write!(f, "fault {fault}: {detail}"),
            TraceEntry::Restart {
                incarnation,
                lagging_at,
            } => {
                write!(f, "restart controller#{incarnation}")?;
                if let Some(revision) = lagging_at {
                    write!(f, " (lists and watches lag at rv={revision})")?;
                }
                Ok(())
            }
            TraceEntry::Outside { actor, call } => write!(f, "outside {actor} {call}"),
            TraceEntry::Event {
                watch,
                kind_of_event,
                kind,
                key,
                resource_version,
            } => write!(
                f,
                "event watch={watch} {kind_of_event} {kind} {key} rv={resource_version}"
            ),
        }
    }
}

/// The entries of one run, in order. See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Trace {
    /// The entries, in the order they passed the tap.
    pub entries: Vec<TraceEntry>,
    /// When each entry happened: virtual milliseconds since the run began (`times[i]` is
    /// `entries[i]`'s; empty for a trace built by hand).
    pub times: Vec<u64>,
}

/// Where two traces part: the first position at which they differ and what each has there
/// (`None`: that trace had ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The position, from 0.
    pub at: usize,
    /// The first trace's entry there.
    pub left: Option<TraceEntry>,
    /// The second trace's entry there.
    pub right: Option<TraceEntry>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |entry: &Option<TraceEntry>| {
            entry
                .as_ref()
                .map_or_else(|| "<end of trace>".to_string(), ToString::to_string)
        };
        write!(
            f,
            "entry {}:\n  left:  {}\n  right: {}",
            self.at,
            show(&self.left),
            show(&self.right)
        )
    }
}

impl Trace {
    /// A stable 64-bit hash of the trace's text (FNV-1a): the same on every platform, every run
    /// and every Rust release, so it can be printed and compared across processes.
    pub fn fingerprint(&self) -> u64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut hash = OFFSET;
        for entry in &self.entries {
            for byte in entry.to_string().bytes().chain([b'\n']) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(PRIME);
            }
        }
        hash
    }

    /// The first position where `self` and `other` differ, or `None` if they are equal.
    pub fn first_difference(&self, other: &Trace) -> Option<Difference> {
        let longest = self.entries.len().max(other.entries.len());
        (0..longest).find_map(|at| {
            let (left, right) = (self.entries.get(at), other.entries.get(at));
            (left != right).then(|| Difference {
                at,
                left: left.cloned(),
                right: right.cloned(),
            })
        })
    }

    /// How many requests the trace holds.
    pub fn requests(&self) -> usize {
        self.entries
            .iter()
            .filter(|entry| matches!(entry, TraceEntry::Request { .. }))
            .count()
    }

    /// How many watch events the trace holds.
    pub fn events(&self) -> usize {
        self.entries
            .iter()
            .filter(|entry| matches!(entry, TraceEntry::Event { .. }))
            .count()
    }
}

impl Trace {
    /// The entries from `from` to `to` (exclusive), one per line, each with its virtual time.
    pub fn excerpt(&self, from: usize, to: usize) -> String {
        let to = to.min(self.entries.len());
        let mut text = String::new();
        for at in from.min(to)..to {
            let ms = self.times.get(at).copied().unwrap_or_default();
            text.push_str(&format!(
                "  [{at:>4}] {:>4}.{:03}s  {}\n",
                ms / 1000,
                ms % 1000,
                self.entries[at]
            ));
        }
        text
    }

    /// The trace as JSON lines in the live view's journal format (`ferrokube-view`'s `Record`:
    /// `seq`, `at_ms`, `stage`, `op`, `instance`, `key`, `state`, `cause`, `fields`), so a failing
    /// run can be read with the same tools as a live controller's journal. Requests are stage
    /// `client` (op: the method), watch events stage `watch` (op: the event type), faults stage
    /// `fault`, restarts stage `controller`, outside calls stage `outside`.
    pub fn journal_lines(&self) -> String {
        use serde_json::{Value, json};
        let mut lines = String::new();
        for (at, entry) in self.entries.iter().enumerate() {
            let (stage, op, instance, key, fields): (
                &str,
                String,
                Option<String>,
                Option<String>,
                Value,
            ) = match entry {
                TraceEntry::Step { index, name } => (
                    "scenario",
                    "step".into(),
                    None,
                    None,
                    json!({ "index": index, "name": name }),
                ),
                TraceEntry::Request {
                    actor,
                    method,
                    path,
                    status,
                    reason,
                    resource_version,
                    name,
                    watch,
                } => (
                    "client",
                    method.clone(),
                    Some(actor.clone()),
                    name.clone(),
                    json!({
                        "path": path,
                        "status": status,
                        "reason": reason,
                        "resource_version": resource_version,
                        "watch": watch,
                    }),
                ),
                TraceEntry::Event {
                    watch,
                    kind_of_event,
                    kind,
                    key,
                    resource_version,
                } => (
                    "watch",
                    kind_of_event.clone(),
                    Some(format!("watch={watch}")),
                    Some(key.clone()),
                    json!({ "kind": kind, "resource_version": resource_version }),
                ),
                TraceEntry::Fault { fault, detail } => (
                    "fault",
                    fault.clone(),
                    None,
                    None,
                    json!({ "detail": detail }),
                ),
                TraceEntry::Restart {
                    incarnation,
                    lagging_at,
                } => (
                    "controller",
                    "restart".into(),
                    Some(format!("controller#{incarnation}")),
                    None,
                    json!({ "lagging_at": lagging_at }),
                ),
                TraceEntry::Outside { actor, call } => (
                    "outside",
                    "call".into(),
                    Some(actor.clone()),
                    None,
                    json!({ "call": call }),
                ),
            };
            let record = json!({
                "seq": at + 1,
                "at_ms": self.times.get(at).copied().unwrap_or_default(),
                "stage": stage,
                "op": op,
                "instance": instance,
                "key": key,
                "state": Value::Null,
                "cause": Value::Null,
                "fields": fields,
            });
            lines.push_str(&record.to_string());
            lines.push('\n');
        }
        lines
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            writeln!(f, "{entry}")?;
        }
        Ok(())
    }
}

/// What the tap has recorded so far; shared by every connection of a run.
pub(crate) struct Recorder {
    started: tokio::time::Instant,
    entries: Mutex<(Vec<TraceEntry>, Vec<u64>)>,
    watches: Mutex<u64>,
}

impl Recorder {
    /// An empty recorder whose times count from `started`.
    pub(crate) fn new(started: tokio::time::Instant) -> Recorder {
        Recorder {
            started,
            entries: Mutex::new((Vec::new(), Vec::new())),
            watches: Mutex::new(0),
        }
    }

    pub(crate) fn push(&self, entry: TraceEntry) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut entries = self.entries.lock();
        entries.0.push(entry);
        entries.1.push(ms);
    }

    /// How many entries there are (the position of the next one).
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().0.len()
    }

    pub(crate) fn next_watch(&self) -> u64 {
        let mut watches = self.watches.lock();
        *watches += 1;
        *watches
    }

    pub(crate) fn trace(&self) -> Trace {
        let entries = self.entries.lock();
        Trace {
            entries: entries.0.clone(),
            times: entries.1.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: usize) -> TraceEntry {
        TraceEntry::Step {
            index,
            name: format!("step {index}"),
        }
    }

    #[test]
    fn the_first_difference_and_the_fingerprint() {
        let a = Trace {
            entries: vec![step(0), step(1)],
            times: vec![0, 5],
        };
        let b = Trace {
            entries: vec![step(0), step(2)],
            times: vec![0, 5],
        };
        let short = Trace {
            entries: vec![step(0)],
            times: vec![0],
        };
        assert_eq!(a.first_difference(&a.clone()), None);
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
        let difference = a.first_difference(&b);
        assert_eq!(difference.as_ref().map(|d| d.at), Some(1));
        let ended = a.first_difference(&short);
        assert_eq!(ended.and_then(|d| d.right), None);
    }

    #[test]
    fn the_journal_lines_are_the_views_records() {
        let trace = Trace {
            entries: vec![
                step(0),
                TraceEntry::Fault {
                    fault: "crash-after@request:3".into(),
                    detail: "the answer was lost".into(),
                },
            ],
            times: vec![0, 1500],
        };
        let lines: Vec<serde_json::Value> = trace
            .journal_lines()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_default())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["seq"], 2);
        assert_eq!(lines[1]["at_ms"], 1500);
        assert_eq!(lines[1]["stage"], "fault");
        assert_eq!(lines[1]["op"], "crash-after@request:3");
        assert_eq!(lines[1]["fields"]["detail"], "the answer was lost");
    }
}
