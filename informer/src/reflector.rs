//! The Reflector: keeps a [`DeltaFifo`] in step with the server by listing once, then watching.
//!
//! ```text
//!             ┌───────────── 410 Gone: relist from the latest ─────────────┐
//!             ▼                                                             │
//!   List ──replace──▶ Watch ──opened──▶ Watching ──server closes──▶ Watch (from the last version)
//!     │                 │                  │ error
//!     └──── error ──────┴──────────────────┴──▶ Backoff(800 ms … 30 s) ──▶ Watch, or List
//! ```
//!
//! - **List** pages through the collection (500 per page). The first list is a consistent read
//!   (no `resourceVersion`: the server's current state; see [`FirstList`] for why not client-go's
//!   `resourceVersion=0`); later lists ask for at least the last version seen. If a page's continue token has expired
//!   (410), the reflector lists everything again in one consistent read. Pages overlap: the next
//!   is asked for as soon as the current page's continue token has arrived (before its items), so
//!   at most two are in flight, kept in order.
//! - **Watch** opens from the list's resourceVersion, with bookmarks and a random timeout of 5 to 10
//!   minutes (so that many clients do not reconnect together). Each event moves the last seen
//!   version forward; a bookmark moves it with no change (and goes through the fifo too, so the
//!   store's own version follows once everything before it is applied).
//! - A watch the server ends is reopened at once from the last version seen: nothing is relisted.
//!   A 410 on the watch (the version was compacted) is the only thing that forces a relist, and that
//!   relist is a consistent read, since the cache may be behind what we already saw.
//! - A watch that brings nothing (no event, no bookmark) for
//!   [`ReflectorOptions::watch_idle_timeout`] (15 s) is dropped and resumed from the last version
//!   seen: its connection may have died without a word (a server host gone, a NAT that forgot the
//!   connection), and on HTTP/1.1 nothing else would notice for minutes. A resume, never a
//!   relist; on a healthy but quiet watch it costs one watch request per interval.
//! - Errors back off exponentially with jitter ([`Backoff`], client-go's 800 ms → 30 s, reset after
//!   2 quiet minutes). Unreachable servers and 429/5xx resume the watch; other errors relist.
//! - **Streaming list** ([`ListMode::Streaming`]): one watch with `sendInitialEvents=true` delivers
//!   every object as ADDED, then a bookmark marked `k8s.io/initial-events-end`; the objects replace
//!   the fifo's contents at that bookmark and the same watch goes on. A server that refuses the
//!   request (older than 1.27, or the feature off) makes the reflector fall back to list + watch
//!   for good.
//!
//! Every phase is a variant of `Phase`; [`Reflector::run`] just steps from one to the next until
//! stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ferrokube_core::{ManagedFields, pipeline_event};
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use parking_lot::Mutex;
use tokio::sync::watch;
// The runtime's clock: a watch's age is measured on the clock its idle timeout and the backoff
// sleep on (virtual on a paused runtime, real otherwise).
use tokio::time::Instant;

use crate::delta_fifo::DeltaFifo;
use crate::lister_watcher::{
    Event, EventStream, ListPage, ListRequest, ListVersion, ListWatchError, ListerWatcher, Prepare,
    Transform, WatchRequest,
};
use crate::metrics::{EventKind, InformerMetrics};
use crate::pipeline::{WatchEventKey, WatchEventVersion, watch_event_type};
use ferrokube_core::Backoff;
use ferrokube_core::object::{Object, ObjectKey};

/// Called with every list or watch error (client-go's `WatchErrorHandler`). The reflector recovers
/// by itself; the hook is for logging, metrics or alerting.
pub type WatchErrorHandler = Arc<dyn Fn(&ListWatchError) + Send + Sync>;

/// How the reflector fills the fifo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListMode {
    /// Paginated list, then watch. Default: every server supports it.
    #[default]
    ListWatch,
    /// Streaming list (`sendInitialEvents`), falling back to [`ListMode::ListWatch`] if the
    /// server refuses it.
    Streaming,
}

/// What the reflector's first list asks for.
///
/// client-go's reflector lists first with `resourceVersion=0`: "any version", which an API
/// server answers from its watch cache without touching etcd. After a restart against an API
/// server whose cache lags (a partitioned replica of an HA control plane), that list is the
/// past: the controller acts again on objects long changed or deleted. Sieve (OSDI 2022) found
/// this "time travel" in many operators (pravega/zookeeper-operator#312, datastax/cass-operator#412,
/// rabbitmq/cluster-operator#653), and ferrokube's fault explorer finds it in a plain finalizer
/// controller (`restart-lagging` faults, `explore/tests/explore_search.rs`). A consistent list
/// cannot go back in time: kube-apiserver serves it from etcd, or (1.31+, consistent reads from
/// the watch cache, GA in 1.34) from a cache it first brings up to etcd's revision, so on a
/// current server it costs about what `resourceVersion=0` does. client-go 1.35+ reaches the same
/// by default another way: its streaming list is consistent too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirstList {
    /// No `resourceVersion`: the server's current state. Default.
    #[default]
    Consistent,
    /// `resourceVersion=0`, as client-go's reflector before streaming lists: cheaper on old
    /// servers with huge collections, and exposed to time travel after a restart.
    FromCache,
}

/// Reflector settings. The defaults are client-go's, but for [`FirstList`].
#[derive(Clone)]
#[must_use]
pub struct ReflectorOptions {
    /// Objects asked for in a list's first page. Default 500 (client-go's).
    pub page_size: u32,
    /// The largest page asked for: each page after the first asks for twice as many objects as
    /// the one before, up to this (500, 1,000, 2,000, 4,000, 5,000, 5,000, …). Default 5,000
    /// ([`DEFAULT_MAX_PAGE_SIZE`]). Set it to `page_size` (or lower) for pages of one size, as
    /// client-go asks for.
    ///
    /// Why pages grow: every page is a round trip, and the server's work per request does not
    /// shrink with the page. On kube-apiserver 1.37.2 with 100,000 Pods, pages of 500 (200
    /// requests) took 6.1–11.1 s to sync against 4.2–5.3 s in pages of 5,000 and 3.9–5.1 s in one
    /// unpaginated list (three interleaved runs each, loaded 2-core machine, 2026-11-29:
    /// `benches/informer/page-size-2026-11-29.jsonl`). A small collection still fits in the first
    /// small page, and no page is larger than `max_page_size`, so a huge collection never becomes
    /// one huge response.
    pub max_page_size: u32,
    /// Each watch asks the server to end it after a random time in `[min, 2·min)`. Default 5 min.
    pub min_watch_timeout: Duration,
    /// Waits after errors. Default [`Backoff::default`] (800 ms doubling to 30 s, jitter 1.0,
    /// reset after 2 quiet minutes).
    pub backoff: Backoff,
    /// Default [`ListMode::ListWatch`].
    pub list_mode: ListMode,
    /// What the first list asks for. Default [`FirstList::Consistent`].
    pub first_list: FirstList,
    /// Default: none (errors are logged with `tracing`).
    pub error_handler: Option<WatchErrorHandler>,
    /// Whether cached objects keep `metadata.managedFields`. Default [`ManagedFields::Drop`]:
    /// the client skips them while decoding (they are never built) and the reflector drops any
    /// that still arrive, as kube-controller-manager's, the scheduler's and kube-apiserver's own
    /// informers do (kubernetes PR 118455). Set [`ManagedFields::Keep`] for a controller that
    /// reads them. Writing a cached object back is safe either way: see [`ManagedFields`].
    pub managed_fields: ManagedFields,
    /// A watch that brings nothing at all for this long is dropped and resumed from the last
    /// resourceVersion seen (a new watch, not a relist). Default 15 s
    /// ([`DEFAULT_WATCH_IDLE_TIMEOUT`]); `None`: only the client's own idle deadline, taken from
    /// the server's promises (about 90 s with bookmarks).
    ///
    /// client-go has no such deadline: it relies on HTTP/2 pings (a dead connection is found in
    /// 30 s + 15 s) and on HTTP/1.1 waits until TCP gives up. 15 s finds a dead connection in a
    /// third of client-go's time on either protocol; the price is one watch request per 15 s
    /// per quiet watch (kube-apiserver serves it from its watch cache).
    pub watch_idle_timeout: Option<Duration>,
}

/// The default of [`ReflectorOptions::max_page_size`].
pub const DEFAULT_MAX_PAGE_SIZE: u32 = 5_000;

/// The size of the page after one of `last` objects: twice as large, but no larger than `max`
/// (and never smaller than `last`, so a `max` below the first page keeps pages at that size).
fn next_page_size(last: u32, max: u32) -> u32 {
    last.saturating_mul(2).min(max.max(last))
}

/// The default of [`ReflectorOptions::watch_idle_timeout`].
pub const DEFAULT_WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(15);

impl Default for ReflectorOptions {
    fn default() -> Self {
        ReflectorOptions {
            page_size: 500,
            max_page_size: DEFAULT_MAX_PAGE_SIZE,
            min_watch_timeout: Duration::from_secs(300),
            backoff: Backoff::default(),
            list_mode: ListMode::ListWatch,
            first_list: FirstList::Consistent,
            error_handler: None,
            managed_fields: ManagedFields::Drop,
            watch_idle_timeout: Some(DEFAULT_WATCH_IDLE_TIMEOUT),
        }
    }
}

/// What the reflector has done, readable while it runs.
#[derive(Debug, Default)]
pub struct ReflectorStatus {
    last_sync_resource_version: Mutex<String>,
    lists: AtomicU64,
    watches: AtomicU64,
    idle_resumes: AtomicU64,
    streaming_unsupported: AtomicBool,
}

impl ReflectorStatus {
    /// The newest resourceVersion the reflector received: the last list's, then each event's or
    /// bookmark's. The store may not have applied it yet (its changes can still wait in the fifo):
    /// [`Store::resource_version`](crate::Store::resource_version) says what it has applied.
    pub fn last_sync_resource_version(&self) -> String {
        self.last_sync_resource_version.lock().clone()
    }
    /// Complete lists so far (1 after the first list; more means relists).
    pub fn lists(&self) -> u64 {
        self.lists.load(Ordering::Relaxed)
    }
    /// Watches opened so far.
    pub fn watches(&self) -> u64 {
        self.watches.load(Ordering::Relaxed)
    }
    /// Watches given up because they brought nothing for
    /// [`ReflectorOptions::watch_idle_timeout`] (each followed by a resume).
    pub fn idle_resumes(&self) -> u64 {
        self.idle_resumes.load(Ordering::Relaxed)
    }
    /// True once a server refused a streaming list.
    pub fn streaming_unsupported(&self) -> bool {
        self.streaming_unsupported.load(Ordering::Relaxed)
    }
}

/// What the reflector does next. See the [module docs](self).
enum Phase<K> {
    /// List everything at this version, then watch.
    List(ListVersion),
    /// One watch that starts with every object (`sendInitialEvents`).
    StreamingList,
    /// Open a watch from the last synced version.
    Watch,
    /// Consume an open watch.
    Watching {
        stream: EventStream<K>,
        opened: Instant,
        events: u64,
    },
    /// Wait, then go on.
    Backoff { wait: Duration, then: Box<Phase<K>> },
}

/// A watch that ends this soon without a single event is treated as a failure, so a server that
/// closes every watch at once is retried with backoff rather than in a tight loop.
const SHORTEST_HEALTHY_WATCH: Duration = Duration::from_secs(1);

/// `object` without `metadata.managedFields`: a no-op when the lister-watcher skipped them while
/// decoding (the client's does), the guarantee when it did not (a fake, a custom one).
fn without_managed_fields<K: Object>(mut object: K) -> K {
    object.clear_managed_fields();
    object
}

/// See the [module docs](self).
pub struct Reflector<K, L> {
    lister_watcher: L,
    fifo: Arc<DeltaFifo<K>>,
    options: ReflectorOptions,
    status: Arc<ReflectorStatus>,
    metrics: Option<Arc<dyn InformerMetrics>>,
    /// The informer's transform, then `Arc::new`: applied to every object once, as it is decoded.
    prepare: Box<Prepare<K>>,
    /// The informer's name, as the pipeline's events call this reflector (`instance`).
    name: Arc<str>,
}

impl<K: Object, L: ListerWatcher<K>> Reflector<K, L> {
    pub fn new(lister_watcher: L, fifo: Arc<DeltaFifo<K>>, options: ReflectorOptions) -> Self {
        let prepare: Box<Prepare<K>> = match options.managed_fields {
            ManagedFields::Keep => Box::new(Arc::new),
            ManagedFields::Drop => Box::new(|object| Arc::new(without_managed_fields(object))),
        };
        Reflector {
            lister_watcher,
            fifo,
            options,
            status: Arc::new(ReflectorStatus::default()),
            metrics: None,
            prepare,
            name: Arc::from(""),
        }
    }

    /// Names the reflector in the pipeline's `tracing` events (the informer's name). Default empty.
    pub fn with_name(mut self, name: &str) -> Self {
        self.name = Arc::from(name);
        self
    }

    /// Rewrites every object received (listed or watched) before anything keeps it. Default: none.
    pub fn with_transform(mut self, transform: Transform<K>) -> Self {
        self.prepare = match self.options.managed_fields {
            ManagedFields::Keep => Box::new(move |object| Arc::new(transform(object))),
            ManagedFields::Drop => {
                Box::new(move |object| Arc::new(transform(without_managed_fields(object))))
            }
        };
        self
    }

    pub fn with_metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// A handle on the reflector's progress (e.g. [`ReflectorStatus::last_sync_resource_version`]).
    pub fn status(&self) -> Arc<ReflectorStatus> {
        self.status.clone()
    }

    /// Lists and watches until `stop` turns true (or its sender is dropped).
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut phase = self.first_phase();
        loop {
            phase = tokio::select! {
                // Stop first: once asked to stop, no further phase runs, however busy the watch.
                biased;
                _ = stop.wait_for(|stopped| *stopped) => return,
                next = self.step(phase) => next,
            };
        }
    }

    fn first_phase(&self) -> Phase<K> {
        match self.options.list_mode {
            ListMode::Streaming if !self.status.streaming_unsupported() => Phase::StreamingList,
            _ => Phase::List(self.relist_version()),
        }
    }

    async fn step(&mut self, phase: Phase<K>) -> Phase<K> {
        match phase {
            Phase::List(version) => self.list(version).await,
            Phase::StreamingList => self.streaming_list().await,
            Phase::Watch => self.open_watch().await,
            Phase::Watching {
                stream,
                opened,
                events,
            } => self.watching(stream, opened, events).await,
            Phase::Backoff { wait, then } => {
                pipeline_event!(stage = "reflector", op = "backoff", instance = %self.name, state = "backing_off", delay_ms = wait.as_millis() as u64);
                tokio::time::sleep(wait).await;
                *then
            }
        }
    }

    /// Before the first list, what [`FirstList`] says; then "at least what we saw".
    fn relist_version(&self) -> ListVersion {
        let last = self.status.last_sync_resource_version();
        if last.is_empty() {
            match self.options.first_list {
                FirstList::Consistent => ListVersion::Latest,
                FirstList::FromCache => ListVersion::Any,
            }
        } else {
            ListVersion::NotOlderThan(last)
        }
    }

    /// The phase that starts over after a 410: a consistent list (or streaming list from now).
    fn after_gone(&mut self) -> Phase<K> {
        pipeline_event!(stage = "reflector", op = "relist", instance = %self.name, state = "relisting", reason = "410 Gone");
        self.set_version(String::new());
        if self.streaming() {
            Phase::StreamingList
        } else {
            Phase::List(ListVersion::Latest)
        }
    }

    fn streaming(&self) -> bool {
        self.options.list_mode == ListMode::Streaming && !self.status.streaming_unsupported()
    }

    fn failed(&mut self, error: &ListWatchError, then: Phase<K>) -> Phase<K> {
        self.report(error);
        Phase::Backoff {
            // On the runtime's clock, the one the backoff phase sleeps on.
            wait: self
                .options
                .backoff
                .failure(tokio::time::Instant::now().into_std()),
            then: Box::new(then),
        }
    }

    fn report(&self, error: &ListWatchError) {
        tracing::warn!(%error, "list/watch failed");
        pipeline_event!(stage = "reflector", op = "watch_end", instance = %self.name, state = "failed", reason = %error);
        if let Some(handler) = &self.options.error_handler {
            handler(error);
        }
    }

    fn set_version(&self, version: String) {
        if let Some(metrics) = &self.metrics {
            metrics.resource_version(&version);
        }
        *self.status.last_sync_resource_version.lock() = version;
    }

    async fn list(&mut self, version: ListVersion) -> Phase<K> {
        pipeline_event!(stage = "reflector", op = "list_start", instance = %self.name, state = "listing", rv = ?version);
        match self.list_pages(version.clone()).await {
            Ok((items, resource_version)) => {
                let relist = self.status.lists.fetch_add(1, Ordering::Relaxed) > 0;
                pipeline_event!(stage = "reflector", op = "list_done", instance = %self.name, state = "listed", items = items.len() as u64, rv = %resource_version, relist);
                if let Some(metrics) = &self.metrics {
                    metrics.listed(items.len(), relist);
                }
                tracing::debug!(objects = items.len(), %resource_version, relist, "listed");
                self.fifo.replace(items, &resource_version);
                self.set_version(resource_version);
                Phase::Watch
            }
            Err(ListWatchError::Gone(source)) if version != ListVersion::Latest => {
                tracing::info!(%source, "list version gone; listing the latest");
                Phase::List(ListVersion::Latest)
            }
            Err(error) => {
                let retry = Phase::List(self.relist_version());
                self.failed(&error, retry)
            }
        }
    }

    /// Every page of one list. Continuation pages carry only the token (the API forbids a version
    /// with it). An expired token restarts as one unpaginated consistent list.
    ///
    /// Pages overlap: the next page is asked for as soon as the current page's continue token
    /// is known, which (with the client's `ListWatch`) is when the page's `metadata` has arrived,
    /// before its items. So the server prepares page k+1 while page k is still decoded here,
    /// instead of each page waiting for a round trip after the last (on kube-apiserver 1.37 with
    /// 10,000 Pods in pages of 500, that wait was a third of the time to sync). At most two pages
    /// are in flight; they are kept in order. Each page asks for twice the objects of the one
    /// before, up to [`ReflectorOptions::max_page_size`].
    async fn list_pages(
        &self,
        version: ListVersion,
    ) -> Result<(Vec<Arc<K>>, String), ListWatchError> {
        let mut items = Vec::new();
        let mut last_version = String::new();
        // The limit of the last page asked for; pages grow up to `max_page_size`.
        let mut limit = self.options.page_size;
        let first = ListRequest {
            version,
            limit: Some(limit),
            continue_token: None,
            managed_fields: self.options.managed_fields,
        };
        let mut in_flight = FuturesOrdered::new();
        let (told, mut next_token) = tokio::sync::oneshot::channel();
        in_flight.push_back(self.list_page(first, told));
        // Invariant: `next_token` is the receiver of the last page asked for, and not yet read.
        let mut waiting_for_token = true;
        let mut continued = false;
        loop {
            tokio::select! {
                // The token first: the next page should leave as early as possible.
                biased;
                token = &mut next_token, if waiting_for_token => {
                    waiting_for_token = false;
                    // A dropped sender: that page failed, and says so below.
                    if let Ok(Some(token)) = token {
                        if !token.is_empty() {
                            let (told, receiver) = tokio::sync::oneshot::channel();
                            next_token = receiver;
                            waiting_for_token = true;
                            continued = true;
                            limit = next_page_size(limit, self.options.max_page_size);
                            let request = ListRequest {
                                version: ListVersion::Latest,
                                limit: Some(limit),
                                continue_token: Some(token),
                                managed_fields: self.options.managed_fields,
                            };
                            in_flight.push_back(self.list_page(request, told));
                        }
                    }
                }
                page = in_flight.next(), if !in_flight.is_empty() => match page {
                    Some(Ok(page)) => {
                        items.extend(page.items);
                        last_version = page.resource_version;
                    }
                    Some(Err(ListWatchError::Gone(source))) if continued => {
                        tracing::info!(%source, "continue token expired; listing everything at once");
                        drop(in_flight);
                        let whole = ListRequest {
                            version: ListVersion::Latest,
                            limit: None,
                            continue_token: None,
                            managed_fields: self.options.managed_fields,
                        };
                        let page = self
                            .lister_watcher
                            .list_prepared(whole, &*self.prepare)
                            .await?;
                        return Ok((page.items, page.resource_version));
                    }
                    Some(Err(error)) => return Err(error),
                    None => {}
                },
                else => return Ok((items, last_version)),
            }
        }
    }

    /// One page of [`list_pages`](Self::list_pages), its continue token told to `told` early.
    fn list_page(
        &self,
        request: ListRequest,
        told: tokio::sync::oneshot::Sender<Option<String>>,
    ) -> impl Future<Output = Result<ListPage<Arc<K>>, ListWatchError>> + Send + '_ {
        self.lister_watcher
            .list_prepared_early(request, &*self.prepare, told)
    }

    fn watch_request(&self, send_initial_events: bool) -> WatchRequest {
        let min = self.options.min_watch_timeout.as_secs().max(1);
        let timeout = ferrokube_core::random::range_u64(min, 2 * min);
        WatchRequest {
            resource_version: self.status.last_sync_resource_version(),
            timeout_seconds: Some(u32::try_from(timeout).unwrap_or(u32::MAX)),
            allow_bookmarks: true,
            send_initial_events,
            managed_fields: self.options.managed_fields,
        }
    }

    fn count_watch(&self) {
        let restart = self.status.watches.fetch_add(1, Ordering::Relaxed) > 0;
        if let Some(metrics) = &self.metrics {
            metrics.watch_opened(restart);
        }
    }

    async fn open_watch(&mut self) -> Phase<K> {
        match self.lister_watcher.watch(self.watch_request(false)).await {
            Ok(stream) => {
                self.count_watch();
                pipeline_event!(stage = "reflector", op = "watch_start", instance = %self.name, state = "watching", rv = %self.status.last_sync_resource_version());
                Phase::Watching {
                    stream,
                    opened: Instant::now(),
                    events: 0,
                }
            }
            Err(ListWatchError::Gone(source)) => {
                tracing::info!(%source, "watch version gone; relisting");
                self.after_gone()
            }
            Err(error @ ListWatchError::Unavailable(_)) => self.failed(&error, Phase::Watch),
            Err(error) => {
                let relist = Phase::List(self.relist_version());
                self.failed(&error, relist)
            }
        }
    }

    async fn watching(
        &mut self,
        mut stream: EventStream<K>,
        opened: Instant,
        mut events: u64,
    ) -> Phase<K> {
        loop {
            let item = match self.options.watch_idle_timeout {
                Some(idle) => match tokio::time::timeout(idle, stream.next()).await {
                    Ok(item) => item,
                    Err(_) => {
                        self.status.idle_resumes.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(
                            ?idle,
                            events,
                            "watch silent past its idle deadline; resuming"
                        );
                        pipeline_event!(stage = "reflector", op = "watch_end", instance = %self.name, state = "watch_ended", reason = "silent past the idle deadline", events);
                        return Phase::Watch;
                    }
                },
                None => stream.next().await,
            };
            let Some(item) = item else { break };
            match item {
                Ok(event) => {
                    events += 1;
                    self.apply(event);
                }
                Err(ListWatchError::Gone(source)) => {
                    tracing::info!(%source, "watch version gone; relisting");
                    return self.after_gone();
                }
                Err(error) => return self.failed(&error, Phase::Watch),
            }
        }
        if events == 0 && opened.elapsed() < SHORTEST_HEALTHY_WATCH {
            let error = ListWatchError::Unavailable("watch closed at once with no events".into());
            return self.failed(&error, Phase::Watch);
        }
        tracing::debug!(events, "watch ended; resuming");
        pipeline_event!(stage = "reflector", op = "watch_end", instance = %self.name, state = "watch_ended", reason = "the server ended the watch", events);
        Phase::Watch
    }

    fn apply(&self, event: Event<K>) {
        pipeline_event!(
            stage = "watch",
            op = "event",
            instance = %self.name,
            key = %WatchEventKey(&event),
            state = "seen",
            r#type = watch_event_type(&event),
            rv = %WatchEventVersion(&event),
        );
        let (kind, version) = match event {
            Event::Added(object) => {
                let version = object.resource_version().to_string();
                self.fifo.add((self.prepare)(object));
                (EventKind::Added, version)
            }
            Event::Modified(object) => {
                let version = object.resource_version().to_string();
                self.fifo.update((self.prepare)(object));
                (EventKind::Modified, version)
            }
            Event::Deleted(object) => {
                let version = object.resource_version().to_string();
                self.fifo.delete((self.prepare)(object));
                (EventKind::Deleted, version)
            }
            Event::Bookmark {
                resource_version, ..
            } => {
                self.fifo.bookmark(&resource_version);
                (EventKind::Bookmark, resource_version)
            }
        };
        if let Some(metrics) = &self.metrics {
            metrics.event(kind);
        }
        if !version.is_empty() {
            self.set_version(version);
        }
    }

    async fn streaming_list(&mut self) -> Phase<K> {
        pipeline_event!(stage = "reflector", op = "list_start", instance = %self.name, state = "listing", rv = "", streaming = true);
        let mut stream = match self.lister_watcher.watch(self.watch_request(true)).await {
            Ok(stream) => stream,
            Err(ListWatchError::Rejected(source)) => {
                tracing::info!(%source, "streaming list refused; falling back to list + watch");
                self.status
                    .streaming_unsupported
                    .store(true, Ordering::Relaxed);
                return Phase::List(self.relist_version());
            }
            Err(ListWatchError::Gone(_)) => return self.after_gone(),
            Err(error) => return self.failed(&error, Phase::StreamingList),
        };
        self.count_watch();
        // The initial objects by key: a change to one during the initial phase replaces it.
        let mut initial: Vec<Arc<K>> = Vec::new();
        let mut positions: std::collections::HashMap<ObjectKey, usize> = Default::default();
        while let Some(item) = stream.next().await {
            match item {
                Ok(Event::Added(object)) | Ok(Event::Modified(object)) => {
                    let object = (self.prepare)(object);
                    let key = ObjectKey::of(&*object);
                    match positions.get(&key) {
                        Some(&at) => initial[at] = object,
                        None => {
                            positions.insert(key, initial.len());
                            initial.push(object);
                        }
                    }
                }
                Ok(Event::Deleted(object)) => {
                    if let Some(at) = positions.remove(&ObjectKey::of(&object)) {
                        initial.swap_remove(at);
                        if let Some(moved) = initial.get(at) {
                            positions.insert(ObjectKey::of(&**moved), at);
                        }
                    }
                }
                Ok(Event::Bookmark {
                    resource_version,
                    initial_events_end,
                }) => {
                    if !initial_events_end {
                        continue;
                    }
                    let relist = self.status.lists.fetch_add(1, Ordering::Relaxed) > 0;
                    if let Some(metrics) = &self.metrics {
                        metrics.listed(initial.len(), relist);
                    }
                    pipeline_event!(stage = "reflector", op = "list_done", instance = %self.name, state = "watching", items = initial.len() as u64, rv = %resource_version, relist, streaming = true);
                    self.fifo.replace(initial, &resource_version);
                    self.set_version(resource_version);
                    return Phase::Watching {
                        stream,
                        opened: Instant::now(),
                        events: 1,
                    };
                }
                Err(ListWatchError::Gone(_)) => return self.after_gone(),
                Err(ListWatchError::Rejected(source)) => {
                    self.status
                        .streaming_unsupported
                        .store(true, Ordering::Relaxed);
                    tracing::info!(%source, "streaming list refused; falling back to list + watch");
                    return Phase::List(self.relist_version());
                }
                Err(error) => return self.failed(&error, Phase::StreamingList),
            }
        }
        let error =
            ListWatchError::Unavailable("streaming list ended before its last object".into());
        self.failed(&error, Phase::StreamingList)
    }
}

#[cfg(test)]
mod tests {
    use super::next_page_size;

    #[test]
    fn pages_double_up_to_the_largest_page() {
        let mut sizes = vec![500];
        for _ in 0..5 {
            sizes.push(next_page_size(*sizes.last().unwrap(), 5_000));
        }
        assert_eq!(sizes, [500, 1_000, 2_000, 4_000, 5_000, 5_000]);
    }

    #[test]
    fn a_largest_page_at_or_below_the_first_keeps_pages_at_one_size() {
        assert_eq!(next_page_size(500, 500), 500);
        assert_eq!(next_page_size(500, 100), 500);
        assert_eq!(next_page_size(u32::MAX, 5_000), u32::MAX);
        assert_eq!(next_page_size(3_000_000_000, u32::MAX), u32::MAX);
    }
}
