//! # The write record: what this process wrote, and whether its caches show it yet
//!
//! Why this module exists: the stale-cache protection of a controller (the
//! [consistency store](super::consistency)) and the [read-your-own-writes
//! client](super::read_your_writes) ask the same question, "has this informer's cache shown the
//! writes I made?", and need the same answer kept in the same way. This is that one record; the
//! two are views over it. A reconcile's key (the consistency store) or a whole client (the
//! read-your-own-writes client) is an *account*: the writes made for it are recorded under it,
//! and its readers ask whether the caches show them.
//!
//! ```text
//!   Api verb ─▶ server ─▶ answer ─▶ the client's write observer (one: `Recorder`, for one account)
//!                                      │
//!                                      ▼
//!   the record: account ─▶ [ wait for informer I: resourceVersion ≥ r          ]
//!                          [ wait for informer I: object o (uid u) gone       ]
//!               hidden uids (deleted before any cache showed them: filtered from reads)
//!                                      │
//!   checked against each informer's store (its revision, whether it holds o/u)
//!                                      ▼
//!   Verdict: Visible (forgotten) │ Pending (a typed `Stale` saying what is missing) │ Off
//! ```
//!
//! ## The life of one recorded write (one state machine for both views)
//!
//! ```text
//!  write answered at r, object the informer will show ─▶ Pending(version ≥ r) ─ store ≥ r ─▶ Visible
//!  write answered at r, object it will not show        ─▶ nothing recorded
//!  write that ended its object (last finalizer gone)   ─▶ Pending(version ≥ r) and the delete rule
//!  delete answered with the object (grace, finalizers) ─▶ a write like any other, at its version
//!  delete answered with a Status (gone), per informer:
//!      the store holds that uid now                    ─▶ Pending(gone) ─ store drops it ─▶ Visible
//!      the store held it when the delete was sent      ─▶ Visible at once (it has applied it)
//!      the store never held it                         ─▶ Hidden: its uid is filtered from reads
//!                                                         (its creation may still arrive)
//!  any resourceVersion that is not an integer          ─▶ Off, for good, with one warning
//! ```
//!
//! A `Visible` wait is forgotten: a store never goes back, and uids are never reused, so what a
//! store once showed it shows for ever. Per account and informer the version waits merge into
//! one (the highest version; writes observed out of order do not lower it).
//!
//! ## Which writes count
//!
//! Only writes of a kind an informer the record tracks caches (matched by API group and kind),
//! and only for an informer whose scope holds the written object (namespace, labels) or whose
//! store holds it when the write returns (the write moved it out of the scope: the informer will
//! see a delete). A field selector cannot be evaluated here: with one, only the second rule
//! applies. A write answered with no resourceVersion records nothing.
//!
//! ## Bounds (the sweep)
//!
//! Waits go when a check finds them met, when their account is forgotten (a controller's key
//! whose object was deleted), and in a sweep that drops every met wait whenever the number of
//! waits passes a mark: first 1,024, then twice what the sweep left. So the record
//! holds at most about twice the waits some cache has not met yet, or 1,024. Hidden uids: the
//! last 1,024. When no account has a wait, a check costs one atomic load.
//!
//! ## One error, one timeout
//!
//! A cache that does not show the writes yet is a [`Stale`]: which informer, for which key, the
//! version wanted and the version seen, the objects still to go, and how long it was waited for
//! (zero for the workers' check, which never waits). Every wait is bounded, by default by
//! [`DEFAULT_MAX_WAIT`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ferrokube_client::write_observer::{DeleteNote, DeleteOutcome, WriteObserver};
use ferrokube_core::{ApiResource, Object, ObjectKey, Scope, ScopeMatcher};
use ferrokube_informer::{SharedIndexInformer, StoreRevision};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::{Mutex, RwLock};

/// How long a read waits, by default, for a cache to show this process's writes: the one
/// timeout of the freshness guards (a reconcile context's cached reads and the
/// read-your-own-writes client). 3 s is what kube-apiserver's watch cache itself waits for a
/// resourceVersion it has not reached before giving up: a watch further behind than that is not
/// slow but broken (reconnecting, relisting), and a worker blocked longer holds its key while
/// nothing improves; the error lets the caller requeue instead. client-go has no such setting (its
/// consistency store never waits: it skips the reconcile and requeues, as the workers here do).
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(3);

/// Waits at which the first sweep runs; later sweeps run each time the count doubles.
pub(crate) const FIRST_SWEEP: usize = 1024;

/// How many uids of objects deleted before any cache showed them are remembered (and filtered).
pub(crate) const HIDDEN_UIDS: usize = 1024;

// ---- the one error ---------------------------------------------------------------------------

/// A deleted object a cache must stop holding: its key and, if known, its uid (then a newer
/// object under the same name does not count).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GoneObject {
    pub key: ObjectKey,
    pub uid: Option<String>,
}

impl std::fmt::Display for GoneObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.uid {
            Some(uid) => write!(f, "{} (uid {uid}) gone", self.key),
            None => write!(f, "{} gone", self.key),
        }
    }
}

/// An informer's cache does not show this process's own writes (yet): the one error of the
/// freshness guards. The workers skip a key on it (and requeue); a read returns it after its
/// `max_wait` (requeue, or read the server). See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct Stale {
    /// The key the writes were made for (a reconcile's key) or the object read (`get`); `None`
    /// for a read of many objects.
    pub key: Option<ObjectKey>,
    /// The informer whose cache is behind (`configmaps`, `replicasets/demo`, …).
    pub informer: String,
    /// The resourceVersion the store must reach; `None` when only deletions are missing.
    pub wanted_version: Option<u64>,
    /// Objects deleted by a write that the store still holds.
    pub wanted_gone: Vec<GoneObject>,
    /// The store's resourceVersion when last checked (`""`: it has not listed yet).
    pub seen_version: String,
    /// How long the caller waited: zero for the workers' check, which never waits.
    pub waited: Duration,
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the cache of informer {:?} does not show this process's writes",
            self.informer
        )?;
        if let Some(key) = &self.key {
            write!(f, " for {key}")?;
        }
        if !self.waited.is_zero() {
            write!(f, " within {:?}", self.waited)?;
        }
        write!(
            f,
            ": it needs {}; its store is at resourceVersion {:?}",
            self.needs(),
            self.seen_version
        )
    }
}

impl Stale {
    /// What is missing, as text: `resourceVersion >= 12, default/a (uid u1) gone`.
    pub fn needs(&self) -> String {
        let version = self
            .wanted_version
            .map(|version| format!("resourceVersion >= {version}"));
        version
            .into_iter()
            .chain(self.wanted_gone.iter().map(GoneObject::to_string))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The same, for `key`.
    pub(crate) fn for_key(mut self, key: &ObjectKey) -> Stale {
        self.key = Some(key.clone());
        self
    }
}

/// Why a cached read of the freshness guards failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The cache did not show this process's earlier writes within the read's `max_wait`. The
    /// watch is slow or broken; requeue and try again, or read the server.
    #[error(transparent)]
    Stale(#[from] Stale),
    /// A reconcile context's cached read of an informer the controller does not run (not made
    /// from the factory the controller was given, so nothing started it): it would read an empty
    /// cache. Make it from a shared factory passed to `Controller::with_factory` (whose informers
    /// `run` starts and waits for), or read the server.
    #[error(
        "informer {informer:?} is not synced: the controller does not run it (make it from the \
         factory given to Controller::with_factory)"
    )]
    NotRunning {
        /// The informer's name.
        informer: String,
    },
}

// ---- the informers the record checks against -------------------------------------------------

/// What the record needs of one informer, whatever its type: the informer's own answers.
pub(crate) trait Progress: Send + Sync {
    fn store_revision(&self) -> StoreRevision;
    /// `None` if the store does not hold `key`; else the held object's uid.
    fn held_uid(&self, key: &ObjectKey) -> Option<Option<String>>;
    /// The store holds `key` (with this uid, if given).
    fn holds(&self, key: &ObjectKey, uid: Option<&str>) -> bool {
        self.held_uid(key)
            .is_some_and(|held| uid.is_none_or(|uid| held.as_deref() == Some(uid)))
    }
}

impl<K: Object> Progress for SharedIndexInformer<K> {
    fn store_revision(&self) -> StoreRevision {
        SharedIndexInformer::store_revision(self)
    }
    fn held_uid(&self, key: &ObjectKey) -> Option<Option<String>> {
        self.store()
            .get_by_key(key)
            .map(|held| held.meta().uid.clone())
    }
    fn holds(&self, key: &ObjectKey, uid: Option<&str>) -> bool {
        SharedIndexInformer::holds(self, key, uid)
    }
}

/// One informer the record checks writes against, and which objects its scope holds.
pub(crate) struct Tracked {
    /// Numbers the informer within its record (a delete's note names informers by it).
    id: usize,
    name: String,
    scope: Scope,
    /// The scope as a test of metadata; `None` if its label selector did not parse (then only
    /// the "store holds it" rule counts a write).
    matcher: Option<ScopeMatcher>,
    progress: Box<dyn Progress>,
}

impl Tracked {
    /// Whether the informer will show a write that left `object` with metadata `meta`.
    fn will_show(&self, meta: &ObjectMeta, object: &ObjectKey) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.matches(meta))
            || self.progress.held_uid(object).is_some()
    }
}

/// The API group and kind of a resource: how writes find the informers caching them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupKind {
    group: String,
    kind: String,
}

impl GroupKind {
    fn of(resource: &ApiResource) -> GroupKind {
        GroupKind {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
        }
    }
}

// ---- waits and verdicts ----------------------------------------------------------------------

/// What one recorded write waits for in one informer's store.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Awaited {
    /// The store must reach this resourceVersion.
    Version(u64),
    /// The store must no longer hold this object.
    Gone(GoneObject),
}

/// One thing an account waits for.
#[derive(Clone)]
pub(crate) struct Wait {
    informer: Arc<Tracked>,
    awaited: Awaited,
}

impl Wait {
    /// Where this wait stands against its informer's store now.
    fn verdict(&self) -> Verdict {
        let progress = &self.informer.progress;
        match &self.awaited {
            Awaited::Version(version) => match progress.store_revision() {
                revision if revision.reached(*version) => Verdict::Visible,
                StoreRevision::Opaque(current) => Verdict::Off(current),
                _ => Verdict::Pending,
            },
            Awaited::Gone(gone) if progress.holds(&gone.key, gone.uid.as_deref()) => {
                Verdict::Pending
            }
            Awaited::Gone(_) => Verdict::Visible,
        }
    }

    /// Whether `met` (a wait just found met) settles this one too: the same informer, and the
    /// same object gone or a version at least this one's.
    fn settled_by(&self, met: &Wait) -> bool {
        Arc::ptr_eq(&self.informer, &met.informer)
            && match (&self.awaited, &met.awaited) {
                (Awaited::Version(held), Awaited::Version(met)) => held <= met,
                (held, met) => held == met,
            }
    }
}

/// Where one wait stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// The store shows the write: the wait may be forgotten.
    Visible,
    /// Not yet.
    Pending,
    /// The store's resourceVersion is this, which is not an integer: nothing can be compared on
    /// this server, and the protection goes off for good.
    Off(String),
}

/// The waits that are pending, as one error (the first informer behind; what it misses).
fn stale_of(pending: &[&Wait]) -> Option<Stale> {
    let first = pending.first()?;
    let informer = &first.informer;
    let mut stale = Stale {
        key: None,
        informer: informer.name.clone(),
        wanted_version: None,
        wanted_gone: Vec::new(),
        seen_version: informer.progress.store_revision().to_string(),
        waited: Duration::ZERO,
    };
    for wait in pending
        .iter()
        .filter(|wait| Arc::ptr_eq(&wait.informer, informer))
    {
        match &wait.awaited {
            Awaited::Version(version) => {
                stale.wanted_version =
                    Some(stale.wanted_version.map_or(*version, |w| w.max(*version)))
            }
            Awaited::Gone(gone) => stale.wanted_gone.push(gone.clone()),
        }
    }
    Some(stale)
}

/// Every wait of `waits` judged: `Err` with what is pending, or `Off` with the opaque version.
fn judge<'a>(waits: impl Iterator<Item = &'a Wait>) -> Result<(), Judged> {
    let mut pending = Vec::new();
    for wait in waits {
        match wait.verdict() {
            Verdict::Visible => {}
            Verdict::Pending => pending.push(wait),
            Verdict::Off(version) => return Err(Judged::Off(version)),
        }
    }
    match stale_of(&pending) {
        Some(stale) => Err(Judged::Stale(stale)),
        None => Ok(()),
    }
}

enum Judged {
    Stale(Stale),
    Off(String),
}

// ---- the record ------------------------------------------------------------------------------

/// The waits, by account, and the hidden uids.
struct Book<A> {
    /// Invariant: no account maps to an empty list; version waits: at most one per informer.
    waits: HashMap<A, Vec<Wait>>,
    /// Waits in `waits`, all accounts together.
    count: usize,
    /// Sweep when `count` grows past this.
    sweep_at: usize,
    /// Uids of objects deleted (answered with a `Status`) that no store held then: filtered out
    /// of reads. Oldest first, at most `HIDDEN_UIDS`; `hidden_set` holds the same.
    hidden: VecDeque<String>,
    hidden_set: HashSet<String>,
}

struct Inner<A> {
    /// Who keeps this record (a controller, a client), for logs.
    owner: RwLock<String>,
    /// The protection is wanted (a controller's builder option).
    enabled: AtomicBool,
    /// A resourceVersion was not an integer: the protection is off for good.
    off: AtomicBool,
    /// Tracked informers by the kind they cache. Invariant: no two with one scope per kind.
    informers: RwLock<HashMap<GroupKind, Vec<Arc<Tracked>>>>,
    /// Numbers the next tracked informer.
    next_id: AtomicUsize,
    book: Mutex<Book<A>>,
    /// `book.waits.len()`, readable without the lock: the check's fast path.
    accounts: AtomicUsize,
}

/// The one record of this process's writes and of what its caches show: see the
/// [module docs](self). Cheap to clone; clones share one record.
pub(crate) struct WriteRecord<A> {
    inner: Arc<Inner<A>>,
}

impl<A> Clone for WriteRecord<A> {
    fn clone(&self) -> Self {
        WriteRecord {
            inner: self.inner.clone(),
        }
    }
}

impl<A: Eq + Hash + Clone + Send + Sync + 'static> WriteRecord<A> {
    /// An empty record kept by `owner` (a name for logs), tracking no informer.
    pub(crate) fn new(owner: &str) -> WriteRecord<A> {
        WriteRecord {
            inner: Arc::new(Inner {
                owner: RwLock::new(owner.to_string()),
                enabled: AtomicBool::new(true),
                off: AtomicBool::new(false),
                informers: RwLock::new(HashMap::new()),
                next_id: AtomicUsize::new(0),
                book: Mutex::new(Book {
                    waits: HashMap::new(),
                    count: 0,
                    sweep_at: FIRST_SWEEP,
                    hidden: VecDeque::new(),
                    hidden_set: HashSet::new(),
                }),
                accounts: AtomicUsize::new(0),
            }),
        }
    }

    pub(crate) fn owner(&self) -> String {
        self.inner.owner.read().clone()
    }

    pub(crate) fn rename(&self, owner: &str) {
        *self.inner.owner.write() = owner.to_string();
    }

    /// Turns the protection on or off. Off, nothing is recorded and every check passes.
    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.inner.enabled.store(enabled, Ordering::Relaxed);
        if !enabled {
            self.clear();
        }
    }

    /// Enabled, and no resourceVersion so far was anything but an integer.
    pub(crate) fn is_active(&self) -> bool {
        self.inner.enabled.load(Ordering::Relaxed) && !self.inner.off.load(Ordering::Relaxed)
    }

    /// Makes writes of `resource`'s kind count against an informer named `name` over `scope`,
    /// whose answers `progress` gives. One already tracked with the same scope is not added
    /// twice.
    pub(crate) fn track(
        &self,
        resource: &ApiResource,
        name: &str,
        scope: &Scope,
        progress: Box<dyn Progress>,
    ) {
        let mut informers = self.inner.informers.write();
        let list = informers.entry(GroupKind::of(resource)).or_default();
        if list.iter().any(|tracked| tracked.scope == *scope) {
            return;
        }
        let matcher = scope
            .matcher()
            .inspect_err(|error| {
                tracing::warn!(
                    owner = %self.owner(), informer = name, %error,
                    "the informer's label selector does not parse here; only writes of objects it \
                     already caches will wait for it"
                );
            })
            .ok();
        list.push(Arc::new(Tracked {
            id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            scope: scope.clone(),
            matcher,
            progress,
        }));
    }

    fn informers_of(&self, resource: &ApiResource) -> Vec<Arc<Tracked>> {
        self.inner
            .informers
            .read()
            .get(&GroupKind::of(resource))
            .cloned()
            .unwrap_or_default()
    }

    // ---- recording -------------------------------------------------------------------------

    /// Records that a write made for `account` left `written` (the metadata of an object of
    /// `resource`'s kind, as the server answered it).
    pub(crate) fn wrote(&self, account: &A, resource: &ApiResource, written: &ObjectMeta) {
        if !self.is_active() {
            return;
        }
        let object = ObjectKey::new(
            written.namespace.as_deref(),
            written.name.as_deref().unwrap_or_default(),
        );
        let text = written.resource_version.as_deref().unwrap_or_default();
        if text.is_empty() {
            tracing::debug!(%object, "a write answered no resourceVersion: nothing to wait for");
            return;
        }
        let Ok(version) = text.parse::<u64>() else {
            self.turn_off(&format!("a write answered resourceVersion {text:?}"));
            return;
        };
        let informers = self.informers_of(resource);
        let waits = informers
            .iter()
            .filter(|informer| informer.will_show(written, &object))
            .map(|informer| Wait {
                informer: informer.clone(),
                awaited: Awaited::Version(version),
            })
            .collect();
        self.record(account, waits);
        // The write that removes the last finalizer of an object being deleted ends it, but
        // kube-apiserver answers it at a version its watch has delivered already, the object
        // still there; the deletion comes one revision later. So the object's absence is
        // recorded too, as for a delete (issue 44: a reconciler found the finalizer still there
        // and cleaned up twice).
        if ends_the_object(resource, written) {
            let gone = GoneObject {
                key: object,
                uid: written.uid.clone(),
            };
            self.record_gone(account, &informers, gone, &[]);
        }
    }

    /// What each informer of `resource`'s kind holds under `object` just before a delete is
    /// sent, kept in the delete's note (see [`deleted`](Self::deleted)).
    pub(crate) fn deleting(&self, resource: &ApiResource, object: &ObjectKey) -> DeleteNote {
        if !self.is_active() {
            return DeleteNote::empty();
        }
        let held: HeldBefore = self
            .informers_of(resource)
            .iter()
            .filter_map(|informer| Some((informer.id, informer.progress.held_uid(object)?)))
            .collect();
        DeleteNote::holding(held)
    }

    /// Records that a write made for `account` deleted `object` (of `resource`'s kind), and the
    /// server answered `outcome`; `note` is what [`deleting`](Self::deleting) kept (empty: the
    /// stores are taken never to have held it).
    pub(crate) fn deleted(
        &self,
        account: &A,
        resource: &ApiResource,
        object: &ObjectKey,
        note: DeleteNote,
        outcome: DeleteOutcome<'_>,
    ) {
        match outcome {
            DeleteOutcome::Pending(still_there) => self.wrote(account, resource, still_there),
            DeleteOutcome::Gone { uid } => {
                if !self.is_active() {
                    return;
                }
                let held_before = note.take::<HeldBefore>().unwrap_or_default();
                let gone = GoneObject {
                    key: object.clone(),
                    uid: uid.filter(|uid| !uid.is_empty()).map(str::to_string),
                };
                self.record_gone(account, &self.informers_of(resource), gone, &held_before);
            }
        }
    }

    /// The delete rule of the [module docs](self), per informer.
    fn record_gone(
        &self,
        account: &A,
        informers: &[Arc<Tracked>],
        gone: GoneObject,
        held_before: &[(usize, Option<String>)],
    ) {
        let mut waits = Vec::new();
        let mut hide = false;
        for informer in informers {
            let held_now = informer.progress.held_uid(&gone.key);
            let held_then = held_before
                .iter()
                .find(|(id, _)| *id == informer.id)
                .map(|(_, uid)| uid);
            match (&gone.uid, held_now) {
                // The store holds that object now: it must drop it.
                (Some(uid), Some(Some(held))) if *uid == held => waits.push(Wait {
                    informer: informer.clone(),
                    awaited: Awaited::Gone(gone.clone()),
                }),
                // No uid: whatever the store holds under the key must go.
                (None, Some(held)) => waits.push(Wait {
                    informer: informer.clone(),
                    awaited: Awaited::Gone(GoneObject {
                        key: gone.key.clone(),
                        uid: held,
                    }),
                }),
                (None, None) => {}
                // It held it when the delete was sent and has applied the delete since.
                (Some(uid), _) if held_then == Some(&Some(uid.clone())) => {}
                // It never showed it: its creation may still arrive; hide it from reads.
                (Some(_), _) => hide = true,
            }
        }
        self.record(account, waits);
        if let (true, Some(uid)) = (hide, gone.uid) {
            self.hide(uid);
        }
    }

    fn record(&self, account: &A, waits: Vec<Wait>) {
        if waits.is_empty() {
            return;
        }
        let mut book = self.inner.book.lock();
        let book = &mut *book;
        let list = book.waits.entry(account.clone()).or_default();
        for wait in waits {
            book.count += merge(list, wait);
        }
        if book.count > book.sweep_at {
            sweep(book);
            book.sweep_at = (book.count * 2).max(FIRST_SWEEP);
        }
        self.inner
            .accounts
            .store(book.waits.len(), Ordering::Relaxed);
    }

    fn hide(&self, uid: String) {
        let mut book = self.inner.book.lock();
        if !book.hidden_set.insert(uid.clone()) {
            return;
        }
        book.hidden.push_back(uid);
        while book.hidden.len() > HIDDEN_UIDS {
            if let Some(oldest) = book.hidden.pop_front() {
                book.hidden_set.remove(&oldest);
            }
        }
    }

    // ---- checking --------------------------------------------------------------------------

    /// What `account` waits for now, in the informer named `informer` if given, with deletions
    /// only of `object` if given: a snapshot a read waits for (see [`check`](Self::check)).
    pub(crate) fn needs(
        &self,
        account: &A,
        informer: Option<&str>,
        object: Option<&ObjectKey>,
    ) -> Vec<Wait> {
        if self.inner.accounts.load(Ordering::Relaxed) == 0 || !self.is_active() {
            return Vec::new();
        }
        let book = self.inner.book.lock();
        book.waits
            .get(account)
            .into_iter()
            .flatten()
            .filter(|wait| informer.is_none_or(|name| wait.informer.name == name))
            .filter(|wait| match (&wait.awaited, object) {
                (Awaited::Gone(gone), Some(object)) => gone.key == *object,
                _ => true,
            })
            .cloned()
            .collect()
    }

    /// `Ok` if the stores show every wait of `needs` (then forgets them under `account`); else
    /// what is missing. `Ok` too once the protection is off.
    pub(crate) fn check(&self, account: &A, needs: &[Wait]) -> Result<(), Stale> {
        if needs.is_empty() || !self.is_active() {
            return Ok(());
        }
        match judge(needs.iter()) {
            Ok(()) => {
                self.forget_met(account, needs);
                Ok(())
            }
            Err(Judged::Stale(stale)) => Err(stale),
            Err(Judged::Off(version)) => {
                self.turn_off(&format!(
                    "an informer's store is at resourceVersion {version:?}"
                ));
                Ok(())
            }
        }
    }

    /// [`check`](Self::check) of what `account` waits for now (in the informer named
    /// `informer`, if given), forgetting every wait met.
    pub(crate) fn settle(&self, account: &A, informer: Option<&str>) -> Result<(), Stale> {
        if self.inner.accounts.load(Ordering::Relaxed) == 0 || !self.is_active() {
            return Ok(());
        }
        let judged = {
            let mut guard = self.inner.book.lock();
            let book = &mut *guard;
            let Some(list) = book.waits.get_mut(account) else {
                return Ok(());
            };
            let concerned = |wait: &Wait| informer.is_none_or(|name| wait.informer.name == name);
            let judged = judge(list.iter().filter(|wait| concerned(wait)));
            let before = list.len();
            list.retain(|wait| !concerned(wait) || wait.verdict() != Verdict::Visible);
            book.count -= before - list.len();
            if list.is_empty() {
                book.waits.remove(account);
            }
            self.inner
                .accounts
                .store(book.waits.len(), Ordering::Relaxed);
            judged
        };
        match judged {
            Ok(()) => Ok(()),
            Err(Judged::Stale(stale)) => Err(stale),
            Err(Judged::Off(version)) => {
                self.turn_off(&format!(
                    "an informer's store is at resourceVersion {version:?}"
                ));
                Ok(())
            }
        }
    }

    /// Forgets the waits of `account` that `met` (waits just found met) settles.
    fn forget_met(&self, account: &A, met: &[Wait]) {
        let mut book = self.inner.book.lock();
        let book = &mut *book;
        let Some(list) = book.waits.get_mut(account) else {
            return;
        };
        let before = list.len();
        list.retain(|wait| !met.iter().any(|seen| wait.settled_by(seen)));
        book.count -= before - list.len();
        if list.is_empty() {
            book.waits.remove(account);
        }
        self.inner
            .accounts
            .store(book.waits.len(), Ordering::Relaxed);
    }

    /// Forgets every wait of `account`.
    pub(crate) fn forget(&self, account: &A) {
        if self.inner.accounts.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut book = self.inner.book.lock();
        if let Some(list) = book.waits.remove(account) {
            book.count -= list.len();
        }
        self.inner
            .accounts
            .store(book.waits.len(), Ordering::Relaxed);
    }

    /// Accounts with waits now.
    pub(crate) fn accounts(&self) -> usize {
        self.inner.accounts.load(Ordering::Relaxed)
    }

    /// Waits now, all accounts together.
    pub(crate) fn waits(&self) -> usize {
        self.inner.book.lock().count
    }

    /// Whether `meta` is of an object deleted before any cache showed it (to leave out of reads).
    pub(crate) fn is_hidden(&self, meta: &ObjectMeta) -> bool {
        let book = self.inner.book.lock();
        !book.hidden_set.is_empty()
            && meta
                .uid
                .as_deref()
                .is_some_and(|uid| book.hidden_set.contains(uid))
    }

    /// Leaves out of `objects` those deleted before any cache showed them.
    pub(crate) fn drop_hidden<K: Object>(&self, objects: &mut Vec<Arc<K>>) {
        let book = self.inner.book.lock();
        if book.hidden_set.is_empty() {
            return;
        }
        objects.retain(|object| {
            object
                .meta()
                .uid
                .as_deref()
                .is_none_or(|uid| !book.hidden_set.contains(uid))
        });
    }

    fn turn_off(&self, why: &str) {
        if !self.inner.off.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                owner = %self.owner(),
                "{why}, which is not an integer: resourceVersions cannot be compared on this \
                 server, so the stale-cache protection is off here"
            );
        }
        self.clear();
    }

    fn clear(&self) {
        let mut book = self.inner.book.lock();
        book.waits.clear();
        book.count = 0;
        book.hidden.clear();
        book.hidden_set.clear();
        self.inner.accounts.store(0, Ordering::Relaxed);
    }

    /// A write observer recording every write it hears of under `account`.
    pub(crate) fn recorder(&self, account: A) -> Recorder<A> {
        Recorder {
            record: self.clone(),
            account,
        }
    }
}

/// What each informer held under a deleted object's key when the delete was sent: by informer
/// id, the held uid. Informers that held nothing are not listed.
type HeldBefore = Vec<(usize, Option<String>)>;

/// Adds `wait` to an account's list; answers how many waits were added (0 or 1). A version wait
/// raises an existing one of the same informer rather than being added; an identical wait is not
/// added twice.
fn merge(list: &mut Vec<Wait>, wait: Wait) -> usize {
    for existing in list.iter_mut() {
        if !Arc::ptr_eq(&existing.informer, &wait.informer) {
            continue;
        }
        match (&mut existing.awaited, &wait.awaited) {
            (Awaited::Version(held), Awaited::Version(version)) => {
                *held = (*held).max(*version);
                return 0;
            }
            (held, awaited) if *held == *awaited => return 0,
            _ => {}
        }
    }
    list.push(wait);
    1
}

/// Drops every wait already met, and accounts left with none.
fn sweep<A>(book: &mut Book<A>) {
    let mut count = 0;
    book.waits.retain(|_, list| {
        list.retain(|wait| wait.verdict() != Verdict::Visible);
        count += list.len();
        !list.is_empty()
    });
    book.count = count;
}

/// Whether a write answered with `written` ended its object: marked for deletion, no finalizer
/// left and no grace period running (a Pod on a node waits for its kubelet with a positive one),
/// so the server removes it now. A Namespace waits for its `spec.finalizers` too, which metadata
/// does not show: its writes are never taken for its end.
fn ends_the_object(resource: &ApiResource, written: &ObjectMeta) -> bool {
    let namespace = resource.group.is_empty() && resource.kind == "Namespace";
    written.deletion_timestamp.is_some()
        && written.finalizers.as_ref().is_none_or(Vec::is_empty)
        && written.deletion_grace_period_seconds.unwrap_or(0) == 0
        && !namespace
}

/// Waits until `check` passes, checking again at each move of a store's resourceVersion
/// (`changes`, subscribed before the first check so that no move is missed), for at most
/// `max_wait`; then fails with what `check` last said was missing, and how long it waited.
pub(crate) async fn wait_until(
    mut check: impl FnMut() -> Result<(), Stale>,
    mut changes: tokio::sync::watch::Receiver<String>,
    max_wait: Duration,
) -> Result<(), Stale> {
    let deadline = crate::deadline::saturating_deadline(tokio::time::Instant::now(), max_wait);
    loop {
        let stale = match check() {
            Ok(()) => return Ok(()),
            Err(stale) => stale,
        };
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            // The sender lives in the store, which the informer keeps; if it were gone, nothing
            // could move any more: fail as at the deadline.
            Ok(Err(_)) | Err(_) => {
                let stale = Stale {
                    waited: max_wait,
                    ..stale
                };
                tracing::debug!(error = %stale, "gave up waiting for the cache");
                return Err(stale);
            }
        }
    }
}

/// The write observer of the freshness guards: every write committed through a client (or `Api`)
/// that carries it is recorded under one account. The one observer both views use.
pub(crate) struct Recorder<A> {
    record: WriteRecord<A>,
    account: A,
}

impl<A> Recorder<A> {
    /// The account it records under.
    pub(crate) fn account(&self) -> &A {
        &self.account
    }
}

impl<A: Eq + Hash + Clone + Send + Sync + 'static> WriteObserver for Recorder<A> {
    fn committed(&self, resource: &ApiResource, written: &ObjectMeta) {
        self.record.wrote(&self.account, resource, written);
    }

    /// Keeps what the stores hold under the key when the delete is sent.
    fn deleting(&self, resource: &ApiResource, object: &ObjectKey) -> DeleteNote {
        self.record.deleting(resource, object)
    }

    fn deleted(
        &self,
        resource: &ApiResource,
        object: &ObjectKey,
        note: DeleteNote,
        outcome: DeleteOutcome<'_>,
    ) {
        self.record
            .deleted(&self.account, resource, object, note, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::atomic::AtomicU64;

    /// An informer whose answers the test sets: its store's revision and what it holds.
    #[derive(Default)]
    struct Fake {
        revision: AtomicU64,
        held: Mutex<HashMap<ObjectKey, Option<String>>>,
    }

    impl Fake {
        fn at(&self, revision: u64) {
            self.revision.store(revision, Ordering::Relaxed);
        }
        fn hold(&self, key: &str, uid: &str) {
            self.held
                .lock()
                .insert(ObjectKey::from(key), Some(uid.to_string()));
        }
        fn drop_key(&self, key: &str) {
            self.held.lock().remove(&ObjectKey::from(key));
        }
    }

    impl Progress for Arc<Fake> {
        fn store_revision(&self) -> StoreRevision {
            StoreRevision::of(&self.revision.load(Ordering::Relaxed).to_string())
        }
        fn held_uid(&self, key: &ObjectKey) -> Option<Option<String>> {
            self.held.lock().get(key).cloned()
        }
    }

    fn resource() -> ApiResource {
        ApiResource::of::<ConfigMap>()
    }

    fn record() -> (WriteRecord<&'static str>, Arc<Fake>) {
        let record = WriteRecord::new("test");
        let fake = Arc::new(Fake::default());
        record.track(
            &resource(),
            "configmaps",
            &Scope::all(),
            Box::new(fake.clone()),
        );
        (record, fake)
    }

    fn meta(name: &str, version: &str, uid: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            resource_version: Some(version.into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        }
    }

    fn gone(uid: &str) -> DeleteOutcome<'_> {
        DeleteOutcome::Gone { uid: Some(uid) }
    }

    #[test]
    fn record_writes_observed_out_of_order_keep_the_highest_version() {
        let (record, fake) = record();
        fake.at(10);
        record.wrote(&"k", &resource(), &meta("a", "20", "u1"));
        record.wrote(&"k", &resource(), &meta("a", "12", "u1")); // answered later, older
        assert_eq!(record.waits(), 1, "one version wait per informer");
        fake.at(15);
        let stale = record.settle(&"k", None).expect_err("15 < 20");
        assert_eq!(stale.wanted_version, Some(20));
        assert_eq!(stale.seen_version, "15");
        assert_eq!(stale.informer, "configmaps");
        assert_eq!(stale.waited, Duration::ZERO);
        assert!(stale.wanted_gone.is_empty());
        fake.at(20);
        assert_eq!(record.settle(&"k", None), Ok(()));
        assert_eq!(
            (record.accounts(), record.waits()),
            (0, 0),
            "forgotten once met"
        );
        // A snapshot taken before a later write does not wait for it.
        record.wrote(&"k", &resource(), &meta("a", "30", "u1"));
        let snapshot = record.needs(&"k", None, None);
        record.wrote(&"k", &resource(), &meta("a", "40", "u1"));
        fake.at(30);
        assert_eq!(record.check(&"k", &snapshot), Ok(()));
        assert_eq!(
            record
                .settle(&"k", None)
                .map_err(|stale| stale.wanted_version),
            Err(Some(40)),
            "the later write is still waited for, not forgotten with the snapshot's"
        );
    }

    #[test]
    fn record_a_deleted_object_recreated_with_a_new_uid_does_not_hold_the_wait() {
        let (record, fake) = record();
        fake.at(5);
        fake.hold("ns/a", "u1");
        let note = record.deleting(&resource(), &ObjectKey::from("ns/a"));
        record.deleted(
            &"k",
            &resource(),
            &ObjectKey::from("ns/a"),
            note,
            gone("u1"),
        );
        let stale = record.settle(&"k", None).expect_err("u1 still cached");
        assert_eq!(
            stale.wanted_gone,
            [GoneObject {
                key: ObjectKey::from("ns/a"),
                uid: Some("u1".into())
            }]
        );
        assert_eq!(stale.wanted_version, None);
        // Someone re-creates it: a new uid under the same key is not the deleted object.
        fake.hold("ns/a", "u2");
        assert_eq!(record.settle(&"k", None), Ok(()));
        assert_eq!(record.waits(), 0);
        assert!(!record.is_hidden(&meta("a", "6", "u2")));
    }

    #[test]
    fn record_a_delete_the_cache_never_showed_hides_the_uid_and_one_it_applied_needs_nothing() {
        let (record, fake) = record();
        fake.at(5);
        // Never held: the creation is still on its way; the uid is hidden from reads.
        let key = ObjectKey::from("ns/b");
        let note = record.deleting(&resource(), &key);
        record.deleted(&"k", &resource(), &key, note, gone("u3"));
        assert_eq!(record.waits(), 0);
        assert!(record.is_hidden(&meta("b", "7", "u3")));
        // Held when sent, dropped by the time the answer came: applied, nothing to wait for or hide.
        fake.hold("ns/c", "u4");
        let key = ObjectKey::from("ns/c");
        let note = record.deleting(&resource(), &key);
        fake.drop_key("ns/c");
        record.deleted(&"k", &resource(), &key, note, gone("u4"));
        assert_eq!(record.waits(), 0);
        assert!(!record.is_hidden(&meta("c", "7", "u4")));
    }

    #[test]
    fn record_a_write_ending_its_object_waits_for_it_to_go_even_at_a_version_already_seen() {
        let (record, fake) = record();
        fake.at(20);
        fake.hold("ns/a", "u1");
        let mut ended = meta("a", "20", "u1");
        ended.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Default::default(),
        ));
        record.wrote(&"k", &resource(), &ended);
        assert!(
            record.settle(&"k", None).is_err(),
            "at 20, but still holds u1"
        );
        fake.drop_key("ns/a");
        fake.at(21);
        assert_eq!(record.settle(&"k", None), Ok(()));
        // A Namespace's writes never end it (its spec.finalizers are not in metadata).
        let namespaces = ApiResource::of::<k8s_openapi::api::core::v1::Namespace>();
        assert!(!ends_the_object(&namespaces, &ended));
    }

    #[test]
    fn record_the_sweep_drops_met_waits_and_keeps_pending_ones() {
        let (record, fake) = record();
        fake.at(100);
        // One account whose write the cache will not show for a while.
        record.wrote(&"behind", &resource(), &meta("x", "1000", "u"));
        let names: Vec<String> = (0..FIRST_SWEEP).map(|i| format!("k{i}")).collect();
        let accounts: Vec<&'static str> = names
            .into_iter()
            .map(|name| &*Box::leak(name.into_boxed_str()))
            .collect();
        for account in &accounts {
            record.wrote(account, &resource(), &meta("x", "50", "u")); // met already
        }
        assert!(
            record.waits() < 2,
            "the sweep at {FIRST_SWEEP} dropped the met waits: {}",
            record.waits()
        );
        assert_eq!(
            record.settle(&"behind", None).map_err(|s| s.wanted_version),
            Err(Some(1000)),
            "a pending wait survives the sweep"
        );
    }

    #[test]
    fn record_scope_and_opaque_versions() {
        let record: WriteRecord<&str> = WriteRecord::new("test");
        let fake = Arc::new(Fake::default());
        record.track(
            &resource(),
            "web",
            &Scope::namespace("ns").labels("app=web"),
            Box::new(fake.clone()),
        );
        // Outside the label selector and not cached: the informer will never show it.
        record.wrote(&"k", &resource(), &meta("db", "9", "u1"));
        assert_eq!(record.waits(), 0);
        // Cached: the write that moved it out of the selection reaches the cache as a delete.
        fake.hold("ns/db", "u1");
        record.wrote(&"k", &resource(), &meta("db", "9", "u1"));
        assert_eq!(record.waits(), 1);
        // No resourceVersion: nothing to compare, nothing recorded, still on.
        record.wrote(&"k", &resource(), &meta("db", "", "u1"));
        assert!(record.is_active());
        // An opaque one: off for good, and every check passes.
        record.wrote(&"k", &resource(), &meta("db", "a1b2", "u1"));
        assert!(!record.is_active());
        assert_eq!((record.waits(), record.settle(&"k", None)), (0, Ok(())));
        record.wrote(&"k", &resource(), &meta("db", "10", "u1"));
        assert_eq!(record.waits(), 0);
    }

    #[test]
    fn record_stale_says_what_it_waited_for() {
        let stale = Stale {
            key: Some(ObjectKey::from("ns/a")),
            informer: "configmaps".into(),
            wanted_version: Some(12),
            wanted_gone: vec![GoneObject {
                key: ObjectKey::from("ns/b"),
                uid: Some("u1".into()),
            }],
            seen_version: "10".into(),
            waited: Duration::from_millis(100),
        };
        assert_eq!(
            stale.to_string(),
            "the cache of informer \"configmaps\" does not show this process's writes for ns/a \
             within 100ms: it needs resourceVersion >= 12, ns/b (uid u1) gone; its store is at \
             resourceVersion \"10\""
        );
    }
}
