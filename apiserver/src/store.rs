//! The versioned object store: etcd and the watch cache in one small type.
//!
//! One lock guards it all, so everything done under the lock must be short: every reader and
//! writer of any key waits for it. Writes come in two shapes:
//!
//! - [`Store::commit`], etcd's compare-and-swap, for the REST verbs: the caller read the object
//!   ([`Store::get`], a moment under the lock; a create reads nothing), computed the new one
//!   **without** the lock (patch, defaults, admission, schema and CEL validation, managed
//!   fields: see [`crate::api`]), and commits it only if the key still holds the revision it
//!   read (for a create: nothing); else it gets [`Raced`] and computes again from a fresh read.
//!   The commit compares and encodes the object before it takes the lock (`Encoding`).
//! - [`Store::transact`], read and decide under the lock in one step, for decisions of a few
//!   comparisons (the in-process controllers' status writes, the CRD cleanup's deletes).
//!
//! Either way, once the write is decided, still under the lock, the store:
//!
//! 1. assigns the next **global** resourceVersion (one counter for all kinds, like etcd's revision)
//!    and writes it into `metadata.resourceVersion`;
//! 2. serializes the object once ([`Stored::json`]; a commit only fills the resourceVersion into
//!    bytes encoded before the lock) — lists and every watcher reuse those bytes;
//! 3. appends a [`Change`] to the history window and hands it to every matching watcher.
//!
//! ```text
//!  get ──► (no lock) compute ──► commit(read revision) ─┬─ key moved on? ──► Raced: get again
//!                                                       └─► tables[type][key] = Stored
//!                                                           history.push_back(Change)
//!                                                           watcher.try_send(item)
//!  transact(decide) ──────────────────────────────────────► (the same three, decide under the lock)
//! ```
//!
//! `tables` keeps keys sorted like etcd's; `history` is a bounded window (the oldest dropped =
//! "compacted"); each watcher has a bounded buffer, and a full one is closed.
//!
//! Because history keeps each change's previous object, the store can also answer a list *at* an older
//! revision (`resourceVersionMatch=Exact`, and every page after the first of a paginated list) by
//! undoing the newer changes; a revision older than the window is 410 Expired, as on a real server
//! after etcd compaction.
//!
//! Invariants, all under the one lock: `compacted <= revision`; every change in `history` has a revision
//! in `(compacted, revision]`, strictly increasing; a watcher registered at revision `r` has received
//! (in its backlog or channel) every matching change with revision > `r`, in order, or has been closed;
//! a [`Store::commit`] writes only over the revision its caller read.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::meta;
use crate::selection::Selection;
use crate::status::StatusError;

/// An object as stored: the parsed value (for selectors and updates) and its JSON (for responses).
#[derive(Debug, Clone)]
pub struct Stored {
    /// The object, `metadata.resourceVersion` included.
    pub object: Arc<Value>,
    /// `object` serialized once, at commit, in kube-apiserver's key order ([`crate::wire`]).
    pub json: Bytes,
    /// Where `json` continues after its `kind` and `apiVersion` entries: see
    /// [`crate::wire::Encoded::untyped_from`], whose invariant holds for `json`.
    pub untyped_from: usize,
    /// The revision that wrote this object.
    pub revision: u64,
    /// When it was written (a delivery-delay fault counts from here), on the tokio runtime's clock:
    /// the delayed delivery sleeps on that clock, which on a paused runtime (a deterministic run)
    /// is virtual time. A write made off any runtime reads real time (tokio's fallback).
    pub written: Instant,
}

/// The kind of a committed change, as a watch event reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed write.
#[derive(Debug, Clone)]
pub struct Change {
    /// The revision this write created.
    pub revision: u64,
    /// The resource type's table (`ResourceType::qualified`).
    pub table: Arc<str>,
    /// `namespace/name` or `name`.
    pub key: String,
    pub event: EventType,
    /// The new object; for a delete, the object as it was when deleted (at the delete's revision).
    pub object: Stored,
    /// The object before this change (`None` for an add).
    pub previous: Option<Stored>,
}

/// An object with where it is stored: its table and its key.
pub type StoredAt = (Arc<str>, String, Stored);

/// What a watcher receives.
#[derive(Debug, Clone)]
pub enum WatchItem {
    /// An object event (a selector can turn a change into an add or a delete for this watcher).
    Event(EventType, Stored),
    /// A BOOKMARK at `revision`; `initial_events_end` marks the end of a streaming list's initial state.
    Bookmark {
        revision: u64,
        initial_events_end: bool,
    },
    /// A terminal error (e.g. 410 for a compacted resourceVersion), sent as an `ERROR` event.
    Error(StatusError),
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// Synthetic ADDED events for the current state, then changes (resourceVersion "" or "0").
    CurrentState,
    /// Like `CurrentState`, then a bookmark marking the end of the initial events (`sendInitialEvents`).
    InitialEvents,
    /// Changes after this revision only.
    After(u64),
}

/// What a watcher wants: one table, maybe one namespace, a selection.
#[derive(Debug, Clone)]
pub struct WatchFilter {
    pub table: Arc<str>,
    pub namespace: Option<String>,
    pub selection: Selection,
    pub bookmarks: bool,
}

struct Watcher {
    filter: WatchFilter,
    tx: mpsc::Sender<WatchItem>,
}

/// A registered watch: first the backlog, then the live channel.
pub struct WatchFeed {
    /// Items owed from before registration (initial state, or history after the start revision).
    pub backlog: VecDeque<WatchItem>,
    /// Items after registration; ends when the store closes the watcher.
    pub live: mpsc::Receiver<WatchItem>,
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// The revision the list was read at (the list's `metadata.resourceVersion`).
    pub revision: u64,
    pub items: Vec<Stored>,
    /// The key to continue from (inclusive) if the page was cut by the limit.
    pub continue_from: Option<String>,
    /// How many matching objects remain after this page, when it was cut.
    pub remaining: Option<u64>,
}

/// A [`Store::commit`] that lost the race: the key no longer holds what the caller read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the object changed after it was read (read at {read:?}, now at {now:?})")]
pub struct Raced {
    /// The revision the caller read (`None`: the key was empty).
    pub read: Option<u64>,
    /// The revision at the key when the commit came (`None`: the key is empty now).
    pub now: Option<u64>,
}

/// What a transaction decided to do with the key.
#[derive(Debug)]
pub enum Write {
    /// Store this object (the store sets `metadata.resourceVersion`).
    Put(Value),
    /// Delete the object.
    Delete,
    /// Change nothing; the transaction returns the current object.
    Keep,
}

#[derive(Default)]
struct State {
    /// The last revision assigned.
    revision: u64,
    /// Watches and exact lists can start at any revision >= `compacted`.
    compacted: u64,
    /// table → key → object. Keys sort as etcd's do, so lists come out in the same order.
    tables: HashMap<Arc<str>, BTreeMap<String, Stored>>,
    /// Changes with revision in (compacted, revision], oldest first.
    history: VecDeque<Arc<Change>>,
    watchers: Vec<Watcher>,
    /// Internal subscribers (garbage collector, pod simulator): every change, unbounded.
    subscribers: Vec<mpsc::UnboundedSender<Arc<Change>>>,
}

/// See the [module docs](self).
pub struct Store {
    state: Mutex<State>,
    /// How many changes history keeps.
    history_limit: usize,
    /// Per-watcher buffer; a watcher that falls this far behind is closed.
    watch_buffer: usize,
}

impl Store {
    /// An empty store keeping `history_limit` changes, with `watch_buffer` items per watcher.
    pub fn new(history_limit: usize, watch_buffer: usize) -> Store {
        Store {
            state: Mutex::new(State::default()),
            history_limit: history_limit.max(1),
            watch_buffer: watch_buffer.max(1),
        }
    }

    /// The last revision assigned.
    pub fn revision(&self) -> u64 {
        self.state.lock().revision
    }

    /// The current object at `key`.
    pub fn get(&self, table: &str, key: &str) -> Option<Stored> {
        self.state.lock().tables.get(table)?.get(key).cloned()
    }

    /// Atomically reads `key` and applies what `decide` returns. Returns the change made (`None` for
    /// [`Write::Keep`], or a `Put` equal to the current object) and the object now at the key.
    ///
    /// `decide` runs **under the store's lock**: every other reader and writer of any key waits for
    /// it. Keep it to a few comparisons (the in-process controllers' status writes); anything that validates, patches or walks an object belongs in
    /// [`Store::commit`]'s read-compute-swap loop instead (see [`crate::api`]).
    pub fn transact(
        &self,
        table: &Arc<str>,
        key: &str,
        decide: impl FnOnce(Option<&Stored>) -> Result<Write, StatusError>,
    ) -> Result<(Option<Arc<Change>>, Option<Stored>), StatusError> {
        let mut state = self.state.lock();
        let current = state.tables.get(table).and_then(|t| t.get(key)).cloned();
        let write = decide(current.as_ref())?;
        Ok(self.apply(&mut state, table, key, current, write))
    }

    /// Writes `write` at `key` if the key still holds what the caller read: `read` (the object
    /// [`Store::get`] gave, at its revision), or nothing when `read` is `None`. This is etcd's
    /// compare-and-swap on the key's modification revision, the last step of kube-apiserver's
    /// `GuaranteedUpdate`: the caller read the object, computed the new one without the lock,
    /// and now either commits it or learns that another write came first ([`Raced`]) and
    /// computes again from a new read.
    ///
    /// What grows with the object is done before the lock too: the comparison with what was read
    /// (an unchanged object writes nothing, as kube-apiserver's byte comparison), and the
    /// encoding (`Encoding`, which leaves a hole for the resourceVersion). Under the lock: the
    /// revision compared, the hole filled (a copy of the bytes), the change recorded and sent.
    pub fn commit(
        &self,
        table: &Arc<str>,
        key: &str,
        read: Option<&Stored>,
        write: Write,
    ) -> Result<(Option<Arc<Change>>, Option<Stored>), Raced> {
        let (event, object) = match write {
            Write::Keep => return Ok((None, read.cloned())),
            Write::Put(object) => {
                if read.is_some_and(|r| same_apart_from_version(&r.object, &object)) {
                    return Ok((None, read.cloned()));
                }
                let event = match read {
                    Some(_) => EventType::Modified,
                    None => EventType::Added,
                };
                (event, object)
            }
            Write::Delete => match read {
                Some(r) => (EventType::Deleted, (*r.object).clone()),
                None => return Ok((None, None)),
            },
        };
        let encoding = Encoding::new(object);
        let mut state = self.state.lock();
        let current = state.tables.get(table).and_then(|t| t.get(key)).cloned();
        let (was, now) = (
            read.map(|r| r.revision),
            current.as_ref().map(|c| c.revision),
        );
        if was != now {
            return Err(Raced { read: was, now });
        }
        let revision = state.revision + 1;
        let stored = encoding.finish(revision);
        state.revision = revision;
        Ok(self.insert(&mut state, table, key, current, event, stored))
    }

    /// Applies a decided `write` to `key`, whose object is `current`; the caller holds the lock.
    fn apply(
        &self,
        state: &mut State,
        table: &Arc<str>,
        key: &str,
        current: Option<Stored>,
        write: Write,
    ) -> (Option<Arc<Change>>, Option<Stored>) {
        let (event, object) = match write {
            Write::Keep => return (None, current),
            Write::Put(object) => {
                let unchanged = current
                    .as_ref()
                    .is_some_and(|c| same_apart_from_version(&c.object, &object));
                if unchanged {
                    return (None, current);
                }
                let event = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (event, object)
            }
            Write::Delete => match &current {
                Some(c) => (EventType::Deleted, (*c.object).clone()),
                None => return (None, None),
            },
        };
        let revision = state.revision + 1;
        let stored = stamp(object, revision);
        state.revision = revision;
        self.insert(state, table, key, current, event, stored)
    }

    /// Stores `stored`, the object `event` made at `key` (the next revision, already counted), and
    /// records the change; the caller holds the lock.
    fn insert(
        &self,
        state: &mut State,
        table: &Arc<str>,
        key: &str,
        current: Option<Stored>,
        event: EventType,
        stored: Stored,
    ) -> (Option<Arc<Change>>, Option<Stored>) {
        let revision = stored.revision;
        let table_map = state.tables.entry(table.clone()).or_default();
        if event == EventType::Deleted {
            table_map.remove(key);
        } else {
            table_map.insert(key.to_string(), stored.clone());
        }
        let change = Arc::new(Change {
            revision,
            table: table.clone(),
            key: key.to_string(),
            event,
            object: stored.clone(),
            previous: current,
        });
        self.record(state, &change);
        let now = (event != EventType::Deleted).then_some(stored);
        (Some(change), now)
    }

    fn record(&self, state: &mut State, change: &Arc<Change>) {
        state.history.push_back(change.clone());
        while state.history.len() > self.history_limit {
            if let Some(old) = state.history.pop_front() {
                state.compacted = old.revision;
            }
        }
        state.watchers.retain(|w| deliver(w, change));
        state.subscribers.retain(|s| s.send(change.clone()).is_ok());
    }

    /// Lists `table` (one namespace, or all), at the latest revision or at `at`, from key `from`
    /// (inclusive), at most `limit` matching objects.
    pub fn list(
        &self,
        table: &str,
        namespace: Option<&str>,
        selection: &Selection,
        at: Option<u64>,
        from: Option<&str>,
        limit: Option<usize>,
    ) -> Result<ListPage, StatusError> {
        let state = self.state.lock();
        let revision = at.unwrap_or(state.revision);
        if revision < state.compacted {
            return Err(StatusError::too_old(revision, state.compacted));
        }
        if revision > state.revision {
            return Err(StatusError::too_large_resource_version(
                revision,
                state.revision,
            ));
        }
        let empty = BTreeMap::new();
        let current = state.tables.get(table).unwrap_or(&empty);
        let prefix = namespace.map(|ns| format!("{ns}/"));
        let start = match (from, &prefix) {
            (Some(from), _) => from.to_string(),
            (None, Some(prefix)) => prefix.clone(),
            (None, None) => String::new(),
        };
        let in_scope = |key: &str| prefix.as_ref().is_none_or(|p| key.starts_with(p.as_str()));
        let snapshot;
        let view = if revision == state.revision {
            current
        } else {
            snapshot = rewind(current, &state.history, table, revision);
            &snapshot
        };
        let mut items = Vec::new();
        let mut continue_from = None;
        let mut remaining = 0u64;
        for (key, stored) in view.range(start..) {
            if !in_scope(key) {
                if prefix.is_some() {
                    break;
                }
                continue;
            }
            if !selection.matches(&stored.object) {
                continue;
            }
            match limit {
                Some(limit) if items.len() >= limit => {
                    if continue_from.is_none() {
                        continue_from = Some(key.clone());
                    }
                    remaining += 1;
                }
                _ => items.push(stored.clone()),
            }
        }
        let remaining = continue_from.as_ref().map(|_| remaining);
        Ok(ListPage {
            revision,
            items,
            continue_from,
            remaining,
        })
    }

    /// Registers a watcher. For [`WatchStart::After`] older than the history window, the feed holds a
    /// single 410 error, as the real server sends it (an `ERROR` event, not an HTTP error).
    pub fn watch(&self, filter: WatchFilter, start: WatchStart) -> WatchFeed {
        let mut state = self.state.lock();
        let (tx, live) = mpsc::channel(self.watch_buffer);
        let mut backlog = VecDeque::new();
        match start {
            WatchStart::After(revision) if revision < state.compacted => {
                backlog.push_back(WatchItem::Error(StatusError::too_old(
                    revision,
                    state.compacted,
                )));
                return WatchFeed { backlog, live };
            }
            WatchStart::After(revision) => {
                for change in state.history.iter().filter(|c| c.revision > revision) {
                    if let Some(item) = item_for(&filter, change) {
                        backlog.push_back(item);
                    }
                }
            }
            WatchStart::CurrentState | WatchStart::InitialEvents => {
                let prefix = filter.namespace.as_ref().map(|ns| format!("{ns}/"));
                if let Some(table) = state.tables.get(&filter.table) {
                    for (key, stored) in table {
                        let in_scope = prefix.as_ref().is_none_or(|p| key.starts_with(p.as_str()));
                        if in_scope && filter.selection.matches(&stored.object) {
                            backlog.push_back(WatchItem::Event(EventType::Added, stored.clone()));
                        }
                    }
                }
                if start == WatchStart::InitialEvents {
                    backlog.push_back(WatchItem::Bookmark {
                        revision: state.revision,
                        initial_events_end: true,
                    });
                }
            }
        }
        state.watchers.push(Watcher { filter, tx });
        WatchFeed { backlog, live }
    }

    /// Every change from now on, unbounded, for in-process controllers (garbage collector, simulator).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Arc<Change>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.state.lock().subscribers.push(tx);
        rx
    }

    /// Every current object (table, key, object) and, from that same moment, every change after
    /// it, unbounded: a view of the whole store that misses nothing and counts nothing twice (the
    /// fault explorer's oracles watch the server's state through it).
    pub fn subscribe_with_state(&self) -> (Vec<StoredAt>, mpsc::UnboundedReceiver<Arc<Change>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut state = self.state.lock();
        let objects = state
            .tables
            .iter()
            .flat_map(|(table, objects)| {
                objects
                    .iter()
                    .map(|(key, stored)| (table.clone(), key.clone(), stored.clone()))
            })
            .collect();
        state.subscribers.push(tx);
        (objects, rx)
    }

    /// Sends a BOOKMARK at the current revision to every watcher that asked for bookmarks. It goes
    /// through the same channel as events, so it never overtakes one.
    pub fn send_bookmarks(&self) {
        let mut state = self.state.lock();
        let revision = state.revision;
        state.watchers.retain(|w| {
            if !w.filter.bookmarks {
                return !w.tx.is_closed();
            }
            let item = WatchItem::Bookmark {
                revision,
                initial_events_end: false,
            };
            match w.tx.try_send(item) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => true,
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    /// Closes every open watch (clients see their streams end and resume).
    pub fn close_watches(&self) -> usize {
        let mut state = self.state.lock();
        let n = state.watchers.len();
        state.watchers.clear();
        n
    }

    /// Moves the revision on by one without changing any object, as etcd's moves for a write to a
    /// key no watcher here cares about; returns the new revision.
    pub fn advance_revision(&self) -> u64 {
        let mut state = self.state.lock();
        state.revision += 1;
        state.revision
    }

    /// Forgets all history: a watch or exact list from any revision before now gets 410.
    pub fn compact(&self) -> u64 {
        let mut state = self.state.lock();
        state.history.clear();
        state.compacted = state.revision;
        state.compacted
    }

    /// Open watchers, for metrics and tests.
    pub fn watcher_count(&self) -> usize {
        let mut state = self.state.lock();
        state.watchers.retain(|w| !w.tx.is_closed());
        state.watchers.len()
    }

    /// Objects stored, over all tables.
    pub fn object_count(&self) -> usize {
        self.state.lock().tables.values().map(BTreeMap::len).sum()
    }

    /// The current objects of one table, for in-process controllers.
    pub fn snapshot(&self, table: &str) -> Vec<Stored> {
        let state = self.state.lock();
        state
            .tables
            .get(table)
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default()
    }
}

/// An object serialized before its revision is known: the JSON before and after the
/// resourceVersion's value, to be joined around it under the lock ([`Store::commit`]).
///
/// The value is found by writing a random 128-bit marker in its place and looking for it, so no
/// client can place the same text elsewhere in the object; if it is not found exactly once (it
/// always is), the object is encoded whole when the revision is known, as [`stamp`] does.
struct Encoding {
    object: Value,
    /// The JSON up to the resourceVersion's value (its opening quote included) and after it
    /// (from its closing quote), and where the type entries end (see [`crate::wire::Encoded`]).
    split: Option<(Vec<u8>, Vec<u8>, usize)>,
}

impl Encoding {
    fn new(mut object: Value) -> Encoding {
        let marker = format!("ferrokube-revision-{}", ferrokube_core::id::uuid_v4());
        meta::metadata_mut(&mut object).insert("resourceVersion".into(), marker.clone().into());
        let encoded = crate::wire::encode_object(&object);
        let quoted = format!("\"{marker}\"");
        let mut found = find_all(&encoded.json, quoted.as_bytes());
        let split = match (found.next(), found.next()) {
            // The marker sits after the type entries (in `metadata`), so their end stays put.
            (Some(at), None) if at >= encoded.untyped_from => {
                let head = encoded.json[..=at].to_vec();
                let tail = encoded.json[at + quoted.len() - 1..].to_vec();
                Some((head, tail, encoded.untyped_from))
            }
            _ => None,
        };
        Encoding { object, split }
    }

    /// The stored object at `revision`.
    fn finish(self, revision: u64) -> Stored {
        let Encoding { mut object, split } = self;
        let Some((head, tail, untyped_from)) = split else {
            return stamp(object, revision);
        };
        let version = revision.to_string();
        meta::metadata_mut(&mut object).insert("resourceVersion".into(), version.clone().into());
        let mut json = Vec::with_capacity(head.len() + version.len() + tail.len());
        json.extend_from_slice(&head);
        json.extend_from_slice(version.as_bytes());
        json.extend_from_slice(&tail);
        Stored {
            object: Arc::new(object),
            json: Bytes::from(json),
            untyped_from,
            revision,
            written: Instant::now(),
        }
    }
}

/// Where `needle` starts in `haystack`, each time.
fn find_all<'a>(haystack: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    haystack
        .windows(needle.len().max(1))
        .enumerate()
        .filter(move |(_, window)| *window == needle)
        .map(|(at, _)| at)
}

/// Writes `revision` into the object and serializes it.
fn stamp(mut object: Value, revision: u64) -> Stored {
    meta::metadata_mut(&mut object).insert(
        "resourceVersion".into(),
        Value::String(revision.to_string()),
    );
    let encoded = crate::wire::encode_object(&object);
    Stored {
        object: Arc::new(object),
        json: Bytes::from(encoded.json),
        untyped_from: encoded.untyped_from,
        revision,
        written: Instant::now(),
    }
}

impl Stored {
    /// The same stored version holding `object` instead (an answer computed from it: a dry run,
    /// defaults applied on read), re-encoded.
    pub fn with_object(&self, object: Value) -> Stored {
        let encoded = crate::wire::encode_object(&object);
        Stored {
            object: Arc::new(object),
            json: Bytes::from(encoded.json),
            untyped_from: encoded.untyped_from,
            revision: self.revision,
            written: self.written,
        }
    }
}

/// True if `a` and `b` differ at most in `metadata.resourceVersion`: such a write is a no-op.
/// Compares in place (this runs on every write, under the store's lock).
fn same_apart_from_version(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let others_equal = a.len() == b.len()
        && a.iter()
            .filter(|(k, _)| *k != "metadata")
            .all(|(k, v)| b.get(k) == Some(v));
    let empty = serde_json::Map::new();
    let ma = a
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mb = b
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let fields =
        |m: &serde_json::Map<String, Value>| m.keys().filter(|k| *k != "resourceVersion").count();
    others_equal
        && fields(ma) == fields(mb)
        && ma
            .iter()
            .filter(|(k, _)| *k != "resourceVersion")
            .all(|(k, v)| mb.get(k) == Some(v))
}

/// The table as it was at `revision`: undo every later change (the oldest later change per key
/// holds the state at `revision` as its `previous`).
fn rewind(
    current: &BTreeMap<String, Stored>,
    history: &VecDeque<Arc<Change>>,
    table: &str,
    revision: u64,
) -> BTreeMap<String, Stored> {
    let mut earlier: BTreeMap<&str, Option<&Stored>> = BTreeMap::new();
    for change in history
        .iter()
        .filter(|c| c.revision > revision && &*c.table == table)
    {
        earlier
            .entry(change.key.as_str())
            .or_insert(change.previous.as_ref());
    }
    let mut view = current.clone();
    for (key, then) in earlier {
        match then {
            Some(stored) => view.insert(key.to_string(), stored.clone()),
            None => view.remove(key),
        };
    }
    view
}

/// What `filter`'s watcher should see of `change`, if anything. A selector turns an update that
/// enters the selection into ADDED and one that leaves it into DELETED, as the real watch cache does.
fn item_for(filter: &WatchFilter, change: &Change) -> Option<WatchItem> {
    if *change.table != *filter.table {
        return None;
    }
    if let Some(ns) = &filter.namespace {
        if meta::namespace(&change.object.object) != Some(ns.as_str()) {
            return None;
        }
    }
    let now = filter.selection.matches(&change.object.object);
    let event = match change.event {
        EventType::Added if now => EventType::Added,
        EventType::Deleted if now => EventType::Deleted,
        EventType::Modified => {
            let before = change
                .previous
                .as_ref()
                .is_some_and(|p| filter.selection.matches(&p.object));
            match (before, now) {
                (true, true) => EventType::Modified,
                (false, true) => EventType::Added,
                (true, false) => EventType::Deleted,
                (false, false) => return None,
            }
        }
        _ => return None,
    };
    Some(WatchItem::Event(event, change.object.clone()))
}

/// Hands `change` to one watcher; false if the watcher must be dropped (gone, or too far behind).
fn deliver(watcher: &Watcher, change: &Change) -> bool {
    let Some(item) = item_for(&watcher.filter, change) else {
        return !watcher.tx.is_closed();
    };
    match watcher.tx.try_send(item) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            tracing::info!(table = %watcher.filter.table, "closing a watcher that fell too far behind");
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table() -> Arc<str> {
        Arc::from("configmaps")
    }

    fn put(store: &Store, name: &str, value: &str) -> u64 {
        let object = json!({"metadata": {"name": name, "namespace": "n"}, "data": {"v": value}});
        let (change, _) = store
            .transact(&table(), &format!("n/{name}"), |_| Ok(Write::Put(object)))
            .expect("put");
        change.map(|c| c.revision).unwrap_or(0)
    }

    fn names(page: &ListPage) -> Vec<String> {
        page.items
            .iter()
            .filter_map(|s| meta::name(&s.object).map(str::to_string))
            .collect()
    }

    #[test]
    fn only_resource_version_differences_make_a_write_a_no_op() {
        let a = json!({"metadata": {"name": "x", "resourceVersion": "1"}, "data": {"k": "v"}});
        let b = json!({"metadata": {"name": "x"}, "data": {"k": "v"}});
        assert!(same_apart_from_version(&a, &b));
        let labelled = json!({"metadata": {"name": "x", "labels": {}}, "data": {"k": "v"}});
        assert!(!same_apart_from_version(&a, &labelled));
        let more = json!({"metadata": {"name": "x"}, "data": {"k": "v"}, "extra": 1});
        assert!(!same_apart_from_version(&b, &more));
        let no_meta = json!({"data": {"k": "v"}});
        assert!(!same_apart_from_version(&b, &no_meta));
    }

    #[test]
    fn an_object_encoded_before_its_revision_is_the_object_encoded_after() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "n", "annotations": {"a": "\"ferrokube-revision-"}},
            "data": {"k": "v"}});
        let early = Encoding::new(object.clone()).finish(42);
        let late = stamp(object, 42);
        assert_eq!(early.json, late.json);
        assert_eq!(early.untyped_from, late.untyped_from);
        assert_eq!(early.object, late.object);
    }

    #[test]
    fn a_commit_over_a_revision_no_longer_current_is_raced() {
        let store = Store::new(100, 10);
        put(&store, "a", "1");
        let read = store.get("configmaps", "n/a");
        put(&store, "a", "2");
        let object = json!({"metadata": {"name": "a", "namespace": "n"}, "data": {"v": "3"}});
        let raced = store
            .commit(&table(), "n/a", read.as_ref(), Write::Put(object.clone()))
            .expect_err("another write came first");
        assert_eq!((raced.read, raced.now), (Some(1), Some(2)));
        let fresh = store.get("configmaps", "n/a");
        let (change, now) = store
            .commit(&table(), "n/a", fresh.as_ref(), Write::Put(object))
            .expect("committed");
        assert_eq!(change.map(|c| c.revision), Some(3));
        let now = now.expect("stored");
        assert_eq!(now.object["data"]["v"], "3");
        assert_eq!(now.json, stamp((*now.object).clone(), 3).json);
    }

    #[test]
    fn one_global_revision_and_no_op_writes_do_not_bump_it() {
        let store = Store::new(100, 10);
        assert_eq!(put(&store, "a", "1"), 1);
        assert_eq!(put(&store, "b", "1"), 2);
        assert_eq!(put(&store, "a", "1"), 0, "an identical write is a no-op");
        assert_eq!(put(&store, "a", "2"), 3);
        let a = store.get("configmaps", "n/a").expect("stored");
        assert_eq!(meta::string(&a.object, "resourceVersion"), Some("3"));
    }

    #[test]
    fn a_list_at_an_old_revision_undoes_later_changes() {
        let store = Store::new(100, 10);
        put(&store, "a", "1");
        let r = put(&store, "b", "1");
        put(&store, "a", "2");
        put(&store, "c", "1");
        let t = table();
        store
            .transact(&t, "n/b", |_| Ok(Write::Delete))
            .expect("delete");
        let all = Selection::default();
        let then = store.list("configmaps", Some("n"), &all, Some(r), None, None);
        let then = then.expect("within the window");
        assert_eq!(names(&then), ["a", "b"]);
        assert_eq!(then.items[0].object["data"]["v"], "1");
        let now = store.list("configmaps", None, &all, None, None, None);
        assert_eq!(names(&now.expect("latest")), ["a", "c"]);
    }

    #[test]
    fn pages_continue_from_a_key_and_count_what_remains() {
        let store = Store::new(100, 10);
        for name in ["a", "b", "c", "d", "e"] {
            put(&store, name, "1");
        }
        let all = Selection::default();
        let page = store
            .list("configmaps", None, &all, None, None, Some(2))
            .expect("page");
        assert_eq!(names(&page), ["a", "b"]);
        assert_eq!(page.continue_from.as_deref(), Some("n/c"));
        assert_eq!(page.remaining, Some(3));
        let next = store
            .list(
                "configmaps",
                None,
                &all,
                Some(page.revision),
                page.continue_from.as_deref(),
                Some(2),
            )
            .expect("page 2");
        assert_eq!(names(&next), ["c", "d"]);
    }

    #[test]
    fn history_past_the_window_is_gone() {
        let store = Store::new(2, 10);
        for v in ["1", "2", "3", "4"] {
            put(&store, "a", v);
        }
        let all = Selection::default();
        let error = store
            .list("configmaps", None, &all, Some(1), None, None)
            .expect_err("compacted");
        assert_eq!(error.code, 410);
        let filter = WatchFilter {
            table: table(),
            namespace: None,
            selection: all,
            bookmarks: false,
        };
        let feed = store.watch(filter, WatchStart::After(1));
        assert!(matches!(feed.backlog.front(), Some(WatchItem::Error(e)) if e.code == 410));
    }

    #[tokio::test]
    async fn a_watcher_gets_the_backlog_then_live_changes_and_a_slow_one_is_closed() {
        let store = Store::new(100, 2);
        let r = put(&store, "a", "1");
        put(&store, "a", "2");
        let filter = WatchFilter {
            table: table(),
            namespace: Some("n".into()),
            selection: Selection::default(),
            bookmarks: false,
        };
        let mut feed = store.watch(filter, WatchStart::After(r));
        assert_eq!(feed.backlog.len(), 1);
        put(&store, "b", "1");
        assert!(matches!(
            feed.live.recv().await,
            Some(WatchItem::Event(EventType::Added, _))
        ));
        for v in ["1", "2", "3"] {
            put(&store, "c", v);
        }
        assert_eq!(
            store.watcher_count(),
            0,
            "a watcher that fell behind is closed"
        );
        let mut received = 0;
        while feed.live.recv().await.is_some() {
            received += 1;
        }
        assert_eq!(
            received, 2,
            "what was buffered is still delivered, then the stream ends"
        );
    }
}
