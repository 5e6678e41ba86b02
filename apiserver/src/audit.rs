//! An audit log of the requests that change something, like the real API server's (`--audit-log-path`
//! with a policy at level `Metadata` for write verbs): who (User-Agent) did what (verb, path) when,
//! and how it ended (status code). Off by default ([`ApiServer::audit`](crate::ApiServer::audit));
//! tests read it to check which client wrote, e.g. that a replica which lost its lease wrote
//! nothing afterwards.
//!
//! Only writes are logged (POST, PUT, PATCH, DELETE): reads and watches would swamp it.
//!
//! [`read_kube_apiserver_log`] reads a real kube-apiserver's audit log (`--audit-log-format json`)
//! into the same entries, so one test or benchmark can count writes on either server.

use std::path::Path;
use std::time::{Duration, SystemTime};

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

/// The write entries of a real kube-apiserver's audit log (JSON lines, one event per line, as
/// `--audit-log-format json` writes them; only the `ResponseComplete` stage of `create`, `update`,
/// `patch`, `delete` and `deletecollection`), as [`AuditEntry`]s: the verb becomes its HTTP method,
/// `requestURI` the path (without the query). Lines that are not such events are skipped.
pub fn read_kube_apiserver_log(path: &Path) -> std::io::Result<Vec<AuditEntry>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().filter_map(kube_apiserver_entry).collect())
}

fn kube_apiserver_entry(line: &str) -> Option<AuditEntry> {
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    if event["stage"] != "ResponseComplete" {
        return None;
    }
    let method = match event["verb"].as_str()? {
        "create" => "POST",
        "update" => "PUT",
        "patch" => "PATCH",
        "delete" | "deletecollection" => "DELETE",
        _ => return None,
    };
    let received: k8s_openapi::jiff::Timestamp =
        event["requestReceivedTimestamp"].as_str()?.parse().ok()?;
    let uri = event["requestURI"].as_str()?;
    Some(AuditEntry {
        received: SystemTime::UNIX_EPOCH
            + Duration::from_nanos(u64::try_from(received.as_nanosecond()).ok()?),
        method: method.to_string(),
        path: uri.split('?').next().unwrap_or(uri).to_string(),
        user_agent: event["userAgent"].as_str().unwrap_or_default().to_string(),
        code: u16::try_from(event["responseStatus"]["code"].as_u64().unwrap_or(0)).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_apiserver_audit_lines_become_entries() {
        let line = r#"{"kind":"Event","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/pods?fieldManager=x","verb":"create","userAgent":"ua/1","responseStatus":{"code":409},"requestReceivedTimestamp":"2026-11-24T08:00:00.000001Z"}"#;
        let entry = kube_apiserver_entry(line).expect("an entry");
        assert_eq!(entry.method, "POST");
        assert_eq!(entry.path, "/api/v1/namespaces/a/pods");
        assert_eq!(entry.user_agent, "ua/1");
        assert_eq!(entry.code, 409);
        let micros = entry
            .received
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_micros() % 1_000_000)
            .ok();
        assert_eq!(micros, Some(1));
        let received_stage = line.replace("ResponseComplete", "RequestReceived");
        assert!(kube_apiserver_entry(&received_stage).is_none());
        assert!(kube_apiserver_entry("not json").is_none());
    }
}
