//! An audit log of the requests that change something, like the real API server's (`--audit-log-path`
//! with a policy at level `Metadata` for write verbs): who (User-Agent) did what (verb, path) when,
//! and how it ended (status code). Off by default ([`ApiServer::audit`](crate::ApiServer::audit));
//! tests read it to check which client wrote, e.g. that a replica which lost its lease wrote
//! nothing afterwards.
//!
//! Only writes are logged (POST, PUT, PATCH, DELETE): reads and watches would swamp it.

use std::time::SystemTime;

use parking_lot::Mutex;

/// One write request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// When the request arrived (before authentication, faults and handling).
    pub received: SystemTime,
    /// The HTTP method: `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The request path, without the query.
    pub path: String,
    /// The `User-Agent` header, or empty.
    pub user_agent: String,
    /// The response's status code.
    pub code: u16,
}

/// The entries, in the order the requests finished. `None` while auditing is off.
#[derive(Debug, Default)]
pub struct AuditLog {
    entries: Mutex<Option<Vec<AuditEntry>>>,
}

impl AuditLog {
    pub(crate) fn new(on: bool) -> AuditLog {
        AuditLog {
            entries: Mutex::new(on.then(Vec::new)),
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.entries.lock().is_some()
    }

    pub(crate) fn record(&self, entry: AuditEntry) {
        if let Some(entries) = self.entries.lock().as_mut() {
            entries.push(entry);
        }
    }

    /// A copy of every entry so far (empty when auditing is off).
    pub fn entries(&self) -> Vec<AuditEntry> {
        self.entries.lock().clone().unwrap_or_default()
    }
}
