//! An in-memory [`ListerWatcher`]: a tiny API server for one resource, for tests and teaching.
//!
//! It keeps what the real server keeps for one collection: the objects, one increasing
//! resourceVersion, and a history of changes that watches replay from any version still in it.
//! Clones share the same state, so a test hands one clone to an informer and drives the other:
//! create, update and delete objects, and inject the faults informers must survive.
//!
//! | call | what the informer sees |
//! |---|---|
//! | [`close_watches`](FakeListerWatcher::close_watches) | every open watch ends (the server's timeout, a restart) |
//! | [`compact`](FakeListerWatcher::compact) | history dropped: watches and continue tokens from older versions get 410 |
//! | [`advance_version`](FakeListerWatcher::advance_version) | nothing (a change outside the selector), until the next bookmark |
//! | [`send_bookmarks`](FakeListerWatcher::send_bookmarks) | a BOOKMARK at the current version on every watch |
//! | [`fail_next_list`](FakeListerWatcher::fail_next_list), [`fail_next_watch`](FakeListerWatcher::fail_next_watch) | the next call fails with the given error |
//! | [`set_streaming`](FakeListerWatcher::set_streaming) | whether streaming lists are served (else refused, as servers before 1.27) |
//!
//! Simplifications: a list always returns the current state (a continue token only remembers where
//! it stopped), `timeoutSeconds` is ignored, and there are no selectors.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use futures_util::stream;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::lister_watcher::{
    Event, EventStream, ListPage, ListRequest, ListVersion, ListWatchError, ListerWatcher,
    WatchRequest,
};
use ferrokube_core::object::{Object, ObjectKey};

type Sender<K> = mpsc::UnboundedSender<Result<Event<K>, ListWatchError>>;

struct FakeState<K> {
    version: u64,
    objects: BTreeMap<ObjectKey, K>,
    /// Every change after version `compacted`, oldest first, with its version.
    history: VecDeque<(u64, Event<K>)>,
    /// Watches from a version older than this get 410.
    compacted: u64,
    watchers: Vec<Sender<K>>,
    streaming: bool,
    failing_lists: VecDeque<ListWatchError>,
    failing_watches: VecDeque<ListWatchError>,
    lists: Vec<ListRequest>,
    watches: Vec<WatchRequest>,
}

/// See the [module docs](self).
pub struct FakeListerWatcher<K> {
    state: Arc<Mutex<FakeState<K>>>,
}

impl<K> Clone for FakeListerWatcher<K> {
    fn clone(&self) -> Self {
        FakeListerWatcher {
            state: self.state.clone(),
        }
    }
}

impl<K: Object> Default for FakeListerWatcher<K> {
    fn default() -> Self {
        FakeListerWatcher::new()
    }
}

impl<K: Object> FakeListerWatcher<K> {
    /// An empty collection at resourceVersion 1, without streaming lists.
    pub fn new() -> Self {
        FakeListerWatcher {
            state: Arc::new(Mutex::new(FakeState {
                version: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted: 0,
                watchers: Vec::new(),
                streaming: false,
                failing_lists: VecDeque::new(),
                failing_watches: VecDeque::new(),
                lists: Vec::new(),
                watches: Vec::new(),
            })),
        }
    }

    /// Serve streaming lists (`sendInitialEvents`) or refuse them with [`ListWatchError::Rejected`].
    pub fn set_streaming(&self, enabled: bool) {
        self.state.lock().streaming = enabled;
    }

    /// Stores a new object (replacing one with the same key) and announces it as ADDED.
    pub fn create(&self, object: K) -> K {
        self.change(object, Event::Added)
    }

    /// Replaces an object and announces it as MODIFIED.
    pub fn update(&self, object: K) -> K {
        self.change(object, Event::Modified)
    }

    fn change(&self, mut object: K, event: fn(K) -> Event<K>) -> K {
        let mut state = self.state.lock();
        state.version += 1;
        let version = state.version;
        object.meta_mut().resource_version = Some(version.to_string());
        state.objects.insert(ObjectKey::of(&object), object.clone());
        state.record(version, event(object.clone()));
        object
    }

    /// Deletes the object under `key` (`namespace/name`) and announces it; `None` if absent.
    pub fn delete(&self, key: &str) -> Option<K> {
        let mut state = self.state.lock();
        let mut object = state.objects.remove(key)?;
        state.version += 1;
        let version = state.version;
        object.meta_mut().resource_version = Some(version.to_string());
        state.record(version, Event::Deleted(object.clone()));
        Some(object)
    }

    /// The current objects, by key.
    pub fn objects(&self) -> BTreeMap<ObjectKey, K> {
        self.state.lock().objects.clone()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> String {
        self.state.lock().version.to_string()
    }

    /// Drops the history: watches and continue tokens from older versions get 410.
    pub fn compact(&self) {
        let mut state = self.state.lock();
        state.compacted = state.version;
        state.history.clear();
    }

    /// Ends every open watch.
    pub fn close_watches(&self) {
        self.state.lock().watchers.clear();
    }

    /// A change the watches do not see (as one outside their selector): only the version moves.
    pub fn advance_version(&self) {
        self.state.lock().version += 1;
    }

    /// Sends a BOOKMARK with the current version on every open watch.
    pub fn send_bookmarks(&self) {
        let mut state = self.state.lock();
        let bookmark = Event::Bookmark {
            resource_version: state.version.to_string(),
            initial_events_end: false,
        };
        state.broadcast(&bookmark);
    }

    /// Ends every open watch with `error` as its last item (e.g. an in-stream 410).
    pub fn fail_watches(&self, error: impl Fn() -> ListWatchError) {
        let mut state = self.state.lock();
        for watcher in state.watchers.drain(..) {
            let _ = watcher.send(Err(error()));
        }
    }

    /// The next list call fails with `error`.
    pub fn fail_next_list(&self, error: ListWatchError) {
        self.state.lock().failing_lists.push_back(error);
    }

    /// The next watch call fails with `error`.
    pub fn fail_next_watch(&self, error: ListWatchError) {
        self.state.lock().failing_watches.push_back(error);
    }

    /// Every list request received so far.
    pub fn list_requests(&self) -> Vec<ListRequest> {
        self.state.lock().lists.clone()
    }

    /// Every watch request received so far.
    pub fn watch_requests(&self) -> Vec<WatchRequest> {
        self.state.lock().watches.clone()
    }

    /// Watches still open.
    pub fn open_watches(&self) -> usize {
        let mut state = self.state.lock();
        state.watchers.retain(|w| !w.is_closed());
        state.watchers.len()
    }

    fn list_now(&self, request: ListRequest) -> Result<ListPage<K>, ListWatchError> {
        let mut state = self.state.lock();
        state.lists.push(request.clone());
        if let Some(error) = state.failing_lists.pop_front() {
            return Err(error);
        }
        if let ListVersion::NotOlderThan(v) = &request.version {
            if parse_version(v)? > state.version {
                return Err(ListWatchError::Unavailable(
                    format!("too large resource version {v}").into(),
                ));
            }
        }
        let after = match &request.continue_token {
            Some(token) => {
                let (version, key) = token
                    .split_once(':')
                    .ok_or_else(|| ListWatchError::Rejected("malformed continue token".into()))?;
                if parse_version(version)? < state.compacted {
                    return Err(ListWatchError::Gone(
                        "the provided continue parameter is too old".into(),
                    ));
                }
                Some(ObjectKey::from(key))
            }
            None => None,
        };
        let limit = request.limit.map_or(usize::MAX, |l| l as usize).max(1);
        let mut rest = state
            .objects
            .iter()
            .filter(|(key, _)| after.as_ref().is_none_or(|after| *key > after));
        let items: Vec<K> = rest.by_ref().take(limit).map(|(_, o)| o.clone()).collect();
        let more = rest.next().is_some();
        let continue_token = match items.last() {
            Some(last) if more => Some(format!("{}:{}", state.version, ObjectKey::of(last))),
            _ => None,
        };
        Ok(ListPage {
            items,
            resource_version: state.version.to_string(),
            continue_token,
        })
    }

    fn watch_now(&self, request: WatchRequest) -> Result<EventStream<K>, ListWatchError> {
        let mut state = self.state.lock();
        state.watches.push(request.clone());
        if let Some(error) = state.failing_watches.pop_front() {
            return Err(error);
        }
        if request.send_initial_events && !state.streaming {
            return Err(ListWatchError::Rejected(
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
                    .into(),
            ));
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        let from = request.resource_version.as_str();
        if from.is_empty() || from == "0" {
            // From now, after a synthetic ADDED for every object (as the real server does).
            for object in state.objects.values() {
                let _ = sender.send(Ok(Event::Added(object.clone())));
            }
            if request.send_initial_events {
                let _ = sender.send(Ok(Event::Bookmark {
                    resource_version: state.version.to_string(),
                    initial_events_end: true,
                }));
            }
        } else {
            let from = parse_version(from)?;
            if from < state.compacted {
                return Err(ListWatchError::Gone(
                    format!("too old resource version: {from} ({})", state.compacted).into(),
                ));
            }
            for (version, event) in &state.history {
                if *version > from {
                    let _ = sender.send(Ok(event.clone()));
                }
            }
        }
        state.watchers.push(sender);
        Ok(Box::pin(stream::unfold(receiver, |mut receiver| async {
            receiver.recv().await.map(|item| (item, receiver))
        })))
    }
}

impl<K: Object> FakeState<K> {
    fn record(&mut self, version: u64, event: Event<K>) {
        self.broadcast(&event);
        self.history.push_back((version, event));
    }

    fn broadcast(&mut self, event: &Event<K>) {
        self.watchers
            .retain(|watcher| watcher.send(Ok(event.clone())).is_ok());
    }
}

fn parse_version(version: &str) -> Result<u64, ListWatchError> {
    version.parse().map_err(|_| {
        ListWatchError::Rejected(format!("invalid resource version {version:?}").into())
    })
}

impl<K: Object> ListerWatcher<K> for FakeListerWatcher<K> {
    async fn list(&self, request: ListRequest) -> Result<ListPage<K>, ListWatchError> {
        self.list_now(request)
    }

    async fn watch(&self, request: WatchRequest) -> Result<EventStream<K>, ListWatchError> {
        self.watch_now(request)
    }
}
