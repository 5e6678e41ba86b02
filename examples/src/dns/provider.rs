//! A DNS provider outside Kubernetes, simulated in-process: the "outside world" the controller
//! manages. It behaves like a real one in the ways that matter to a controller:
//!
//! - it is the truth about records, and Kubernetes cannot watch it;
//! - someone may edit a record behind the controller's back ([`Provider::drift`]): sometimes the
//!   provider tells (its change feed, like a cloud's event notifications), sometimes it does not,
//!   and only polling finds out;
//! - every record remembers which object it belongs to (the owner's uid, as a real provider keeps
//!   a tag or a TXT ownership record), so a controller can clean up only what is its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferrokube::core::ObjectKey;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::broadcast;

/// One record as the provider stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub type_: String,
    pub value: String,
    pub ttl: i64,
    /// The uid of the DnsRecord that owns it.
    pub owner_uid: String,
    /// The owner's key, for the change feed.
    pub owner_key: ObjectKey,
}

/// See the [module docs](self). Cheap to clone; clones share one provider.
#[derive(Clone)]
pub struct Provider {
    /// By fully qualified name.
    records: Arc<Mutex<BTreeMap<String, Entry>>>,
    /// The key of the owner of every record that changed behind the controller's back (only for
    /// changes the provider announces).
    changes: broadcast::Sender<ObjectKey>,
    rng: Arc<Mutex<StdRng>>,
    /// Writes made by the controller (to show that an unchanged world costs nothing).
    writes: Arc<Mutex<u64>>,
}

impl Provider {
    /// A provider whose drift is chosen by `seed` (the same seed drifts the same records).
    pub fn new(seed: u64) -> Provider {
        Provider {
            records: Arc::default(),
            changes: broadcast::channel(1024).0,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
            writes: Arc::default(),
        }
    }

    pub fn get(&self, fqdn: &str) -> Option<Entry> {
        self.records.lock().get(fqdn).cloned()
    }

    /// Every record, by name.
    pub fn records(&self) -> BTreeMap<String, Entry> {
        self.records.lock().clone()
    }

    /// Writes made through [`upsert`](Self::upsert) and [`delete_owned`](Self::delete_owned).
    pub fn writes(&self) -> u64 {
        *self.writes.lock()
    }

    /// Creates or replaces `fqdn`. Refused (returns the other owner's key) if another owner holds
    /// the name.
    pub fn upsert(&self, fqdn: &str, entry: Entry) -> Result<(), ObjectKey> {
        let mut records = self.records.lock();
        if let Some(existing) = records.get(fqdn) {
            if existing.owner_uid != entry.owner_uid {
                return Err(existing.owner_key.clone());
            }
        }
        records.insert(fqdn.to_string(), entry);
        *self.writes.lock() += 1;
        Ok(())
    }

    /// Deletes every record owned by `owner_uid` except `keep`; returns how many went.
    pub fn delete_owned(&self, owner_uid: &str, keep: Option<&str>) -> usize {
        let mut records = self.records.lock();
        let before = records.len();
        records.retain(|fqdn, entry| entry.owner_uid != owner_uid || Some(fqdn.as_str()) == keep);
        let deleted = before - records.len();
        *self.writes.lock() += deleted as u64;
        deleted
    }

    /// Someone edits one record at the provider: its value changes. With `announce`, the change
    /// feed tells the owner; without, only a poll can find it. Returns the name edited.
    pub fn drift(&self, announce: bool) -> Option<String> {
        let mut records = self.records.lock();
        if records.is_empty() {
            return None;
        }
        let mut rng = self.rng.lock();
        let index = rng.random_range(0..records.len());
        let (fqdn, entry) = records.iter_mut().nth(index)?;
        entry.value = format!("drifted-{}", rng.random_range(0..1_000_000u32));
        if announce {
            let _ = self.changes.send(entry.owner_key.clone());
        }
        Some(fqdn.clone())
    }

    /// The change feed: owner keys of records changed behind the controller's back, as a stream
    /// (an external event source for the controller). Missed notifications (a slow reader) are
    /// skipped: polling covers them.
    pub fn changes(&self) -> impl futures_util::Stream<Item = ObjectKey> + Send + 'static {
        let receiver = self.changes.subscribe();
        futures_util::stream::unfold(receiver, |mut receiver| async move {
            loop {
                match receiver.recv().await {
                    Ok(key) => return Some((key, receiver)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }
}
