//! What every request handler works with: the server's state they share ([`Shared`]), the shape
//! of their answer ([`Reply`]), and the bearer-token comparison ([`same_secret`]).
//!
//! Why a module of its own: the front door ([`super::handlers`]: check, route, dispatch) and the
//! verbs ([`super::verbs`]: one handler per verb) both build on these, and the front door calls the
//! verbs. With these here, the imports run one way only: `handlers` -> `verbs` -> `shared`, and
//! `handlers` -> `shared`; neither handler module needs the other to be read.

use std::sync::Arc;
use std::time::Duration;

use http::Response;

use super::body::Body;
use super::discovery;
use super::guard::HostPolicy;
use crate::api::Api;
use crate::audit::AuditLog;
use crate::faults::Faults;
use crate::status::StatusError;

/// Everything a request handler needs.
pub struct Shared {
    pub api: Api,
    pub faults: Arc<Faults>,
    /// `host:port`, for `/api`'s serverAddressByClientCIDRs.
    pub address: String,
    /// A bearer token every request must carry, if set.
    pub token: Option<String>,
    /// The hosts and origins a request from the listening socket may name (see [`super::guard`]).
    pub hosts: HostPolicy,
    /// How long a watch without `timeoutSeconds` stays open.
    pub default_watch_timeout: Duration,
    /// Write requests, when auditing is on.
    pub audit: Arc<AuditLog>,
    /// Discovery documents, rendered once per catalog.
    pub discovery: discovery::DiscoveryCache,
    /// The feature gates requests are read under (see [`super::ApiServer::sharded_list_and_watch`]).
    pub gates: super::request::Gates,
}

/// A handler's answer: a response, or the `Status` of its refusal.
pub type Reply = Result<Response<Body>, StatusError>;

/// Whether `sent` is `secret`, in a time that does not depend on where they first differ (so the
/// answer's timing does not leak the token a byte at a time).
pub fn same_secret(sent: &[u8], secret: &[u8]) -> bool {
    sent.len() == secret.len()
        && sent
            .iter()
            .zip(secret)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}
