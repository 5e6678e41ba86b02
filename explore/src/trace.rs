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
//! ```

use std::fmt;

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
        /// `metadata.resourceVersion` of the answer's body (an object's or a list's), if any.
        resource_version: Option<String>,
        /// `metadata.name` of the answer's body, if it names an object.
        name: Option<String>,
        /// For a watch, its number in the run (from 1, by order of opening).
        watch: Option<u64>,
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
                resource_version,
                name,
                watch,
            } => {
                write!(f, "request {actor} {method} {path} -> {status}")?;
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

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            writeln!(f, "{entry}")?;
        }
        Ok(())
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
        };
        let b = Trace {
            entries: vec![step(0), step(2)],
        };
        let short = Trace {
            entries: vec![step(0)],
        };
        assert_eq!(a.first_difference(&a.clone()), None);
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
        let difference = a.first_difference(&b);
        assert_eq!(difference.as_ref().map(|d| d.at), Some(1));
        let ended = a.first_difference(&short);
        assert_eq!(ended.and_then(|d| d.right), None);
    }
}
