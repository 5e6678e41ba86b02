//! Which requests the listening socket answers at all: a defence against DNS rebinding and
//! cross-site requests from web pages.
//!
//! # Why it exists
//!
//! The server listens on loopback, often without a token, so that anything on the machine can
//! reach it; that includes the browser. A web page cannot read a loopback server's answers (no
//! CORS headers), but it can still get at it two ways:
//!
//! - **DNS rebinding.** `evil.example` answers the page, then re-points its DNS name at
//!   `127.0.0.1`. The page's scripts now talk to this server as `evil.example` — same origin, so
//!   they read every answer. The one trace is the `Host` header: `evil.example:PORT`.
//! - **Cross-site requests.** A page may send a "simple" POST (a form, or `fetch` with
//!   `text/plain`) to any address without asking first; this server reads the body as JSON
//!   whatever its content type, so that POST would create objects. The trace is the `Origin`
//!   header browsers add to it: the page's own origin.
//!
//! Hence two checks, made before anything else (even the token), refused with 403:
//!
//! | header | allowed when | refused |
//! |---|---|---|
//! | `Host` (or an HTTP/2 `:authority`, or an absolute request URI) | it names an [allowed host](HostPolicy), any port | always |
//! | `Origin` | its host is allowed | on `POST`, `PUT`, `PATCH` and `DELETE` (a cross-site `GET` cannot read the answer) |
//!
//! Clients that are not browsers are not affected: kubectl, client-go, ferrokube's client and
//! `curl` send `Host: <host>:<port>` from the URL they were given (the server's own URL names
//! `127.0.0.1`) and no `Origin`. A request without `Host` (HTTP/1.0) is let through: no browser
//! sends one. Connections that do not come through the socket
//! (`RunningServer::serve_connection`) are not checked: no browser can open one.
//!
//! kube-apiserver has neither check: it is not meant to be reachable from a browser without
//! credentials (its default is TLS with client authentication; CORS is off unless
//! `--cors-allowed-origins` is set).

use std::net::{IpAddr, SocketAddr};

use http::{HeaderMap, Method, Uri, header};

/// The hosts requests from the listening socket may name:
///
/// - `localhost` and every loopback address (`127.0.0.0/8`, `::1`);
/// - the address the server is bound to, when it is not loopback; when it is unspecified
///   (`0.0.0.0` or `::`, every interface) any IP address literal, since the server cannot tell its
///   interfaces' addresses and an address literal cannot be rebound (DNS rebinding needs a name);
/// - the names given to [`ApiServer::allow_host`](super::ApiServer::allow_host), which the serving
///   certificate names too.
///
/// Names compare case-insensitively, with one trailing dot ignored.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    bound: IpAddr,
    /// Lowercase, without a trailing dot.
    names: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The `Host` names a host this server does not answer to.
    #[error(
        "the host {0:?} is not one this server answers to (localhost, a loopback address or a configured name): a DNS rebinding defence"
    )]
    Host(String),
    /// A state-changing request from a web page of another site.
    #[error(
        "requests that change state are not accepted from the web origin {0:?} (only from localhost, a loopback address or a configured name)"
    )]
    Origin(String),
}

impl HostPolicy {
    /// The policy of a server bound to `bound`, also answering to `names`.
    pub fn new(bound: SocketAddr, names: &[String]) -> HostPolicy {
        HostPolicy {
            bound: bound.ip().to_canonical(),
            names: names.iter().map(|name| normal(name)).collect(),
        }
    }

    /// Whether `host` (a name or an address, without port; IPv6 with or without brackets) is
    /// one this server answers to.
    pub fn allows(&self, host: &str) -> bool {
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = host.parse::<IpAddr>() {
            let ip = ip.to_canonical();
            return ip.is_loopback() || self.bound.is_unspecified() || ip == self.bound;
        }
        let host = normal(host);
        host == "localhost" || self.names.contains(&host)
    }

    /// Checks one request's `Host` (and URI authority) and, for state-changing methods, its
    /// `Origin`.
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        if let Some(authority) = uri.authority() {
            if !self.allows(authority.host()) {
                return Err(Refusal::Host(authority.to_string()));
            }
        }
        for value in headers.get_all(header::HOST) {
            let text = String::from_utf8_lossy(value.as_bytes());
            if !host_of_authority(&text).is_some_and(|host| self.allows(host)) {
                return Err(Refusal::Host(text.into_owned()));
            }
        }
        let changes_state = matches!(
            *method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        );
        if changes_state {
            for value in headers.get_all(header::ORIGIN) {
                let text = String::from_utf8_lossy(value.as_bytes());
                if !host_of_origin(&text).is_some_and(|host| self.allows(host)) {
                    return Err(Refusal::Origin(text.into_owned()));
                }
            }
        }
        Ok(())
    }
}

/// Lowercase, one trailing dot dropped.
fn normal(name: &str) -> String {
    let name = name.strip_suffix('.').unwrap_or(name);
    name.to_ascii_lowercase()
}

/// The host of a `Host` header: `host`, `host:port`, `[v6]:port`. `None` for anything else (a
/// `user@host` is no Host a client sends).
fn host_of_authority(text: &str) -> Option<&str> {
    if text.is_empty() || text.contains(['@', '/', '?', '#', ' ']) {
        return None;
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        return (after.is_empty() || after.starts_with(':')).then_some(v6);
    }
    match text.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => Some(host),
        Some(_) => None,
        None => Some(text),
    }
}

/// The host of an `Origin` header (`scheme://host[:port]`); `None` for `null` (sandboxed pages,
/// `file:` URLs) and anything else that is not an http(s) origin.
fn host_of_origin(text: &str) -> Option<&str> {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))?;
    host_of_authority(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn request(method: Method, host: Option<&str>, origin: Option<&str>) -> (Method, HeaderMap) {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).expect("host"));
        }
        if let Some(origin) = origin {
            headers.insert(
                header::ORIGIN,
                HeaderValue::from_str(origin).expect("origin"),
            );
        }
        (method, headers)
    }

    #[test]
    fn abuse_hosts_and_origins_of_a_loopback_server() {
        let policy = HostPolicy::new(
            SocketAddr::from(([127, 0, 0, 1], 6443)),
            &["Dev.Example.".to_string()],
        );
        let path = Uri::from_static("/api/v1/pods");
        let cases: &[(Method, Option<&str>, Option<&str>, bool)] = &[
            (Method::GET, Some("127.0.0.1:6443"), None, true),
            (Method::GET, Some("127.0.0.2"), None, true),
            (Method::GET, Some("localhost:1"), None, true),
            (Method::GET, Some("LOCALHOST."), None, true),
            (Method::GET, Some("[::1]:6443"), None, true),
            (Method::GET, Some("[::ffff:127.0.0.1]:6443"), None, true),
            (Method::GET, Some("dev.example:443"), None, true),
            (Method::GET, None, None, true),
            (Method::GET, Some("evil.example:6443"), None, false),
            (Method::GET, Some("localhost.evil.example"), None, false),
            (Method::GET, Some("127.0.0.1.nip.io:6443"), None, false),
            (Method::GET, Some("10.0.0.1:6443"), None, false),
            (Method::GET, Some("evil@127.0.0.1"), None, false),
            (Method::GET, Some("127.0.0.1:x"), None, false),
            (Method::GET, Some(""), None, false),
            // A cross-site GET cannot read the answer: let through.
            (
                Method::GET,
                Some("127.0.0.1"),
                Some("https://evil.example"),
                true,
            ),
            (
                Method::POST,
                Some("127.0.0.1"),
                Some("http://127.0.0.1:6443"),
                true,
            ),
            (
                Method::POST,
                Some("127.0.0.1"),
                Some("http://localhost:3000"),
                true,
            ),
            (
                Method::DELETE,
                Some("127.0.0.1"),
                Some("https://dev.example"),
                true,
            ),
            (
                Method::POST,
                Some("127.0.0.1"),
                Some("https://evil.example"),
                false,
            ),
            (Method::PUT, Some("127.0.0.1"), Some("null"), false),
            (Method::PATCH, Some("127.0.0.1"), Some("file://"), false),
            (
                Method::DELETE,
                Some("127.0.0.1"),
                Some("http://127.0.0.1.evil.example"),
                false,
            ),
        ];
        for (method, host, origin, allowed) in cases {
            let (method, headers) = request(method.clone(), *host, *origin);
            let answer = policy.check(&method, &path, &headers);
            assert_eq!(
                answer.is_ok(),
                *allowed,
                "{method} {host:?} {origin:?}: {answer:?}"
            );
        }
        // HTTP/2's :authority (and an absolute request URI) is checked like Host.
        let absolute = Uri::from_static("http://evil.example:6443/api");
        assert!(
            policy
                .check(&Method::GET, &absolute, &HeaderMap::new())
                .is_err()
        );
        let own = Uri::from_static("https://localhost:6443/api");
        assert!(policy.check(&Method::GET, &own, &HeaderMap::new()).is_ok());
    }

    #[test]
    fn abuse_hosts_of_servers_bound_elsewhere() {
        let specific = HostPolicy::new(SocketAddr::from(([192, 168, 1, 5], 80)), &[]);
        assert!(specific.allows("192.168.1.5"));
        assert!(specific.allows("127.0.0.1"));
        assert!(!specific.allows("192.168.1.6"));
        assert!(!specific.allows("my-laptop"));
        let everywhere = HostPolicy::new(SocketAddr::from(([0, 0, 0, 0], 80)), &[]);
        assert!(everywhere.allows("192.168.1.6"));
        assert!(everywhere.allows("[fe80::1]"));
        assert!(!everywhere.allows("my-laptop"));
        assert!(!everywhere.allows("evil.example"));
    }
}
