//! Which `Host` and `Origin` headers the live view answers: its defence against DNS rebinding.
//!
//! A page on any web site can make the browser send requests to `127.0.0.1:PORT` under a name of
//! its own (DNS rebinding), or post to it cross-origin. The view's answers must reach only pages
//! the user opened at the view's own address, so every request is checked here first, by the
//! server before it routes and by the routes that act: a `Host` or `Origin` that is not loopback,
//! `localhost`, the bound address or a configured name is refused with 403.

use std::net::{IpAddr, SocketAddr};

/// Which `Host` and `Origin` headers the view answers (see the [module docs](self) and the server's, `server.rs`).
#[derive(Debug, Clone)]
pub(crate) struct HostGuard {
    bound: IpAddr,
    /// Lowercase, without a trailing dot.
    names: Vec<String>,
}

impl HostGuard {
    /// The guard of a view bound to `bound`, also answering to `names`.
    pub(crate) fn new(bound: SocketAddr, names: &[String]) -> HostGuard {
        HostGuard {
            bound: bound.ip().to_canonical(),
            names: names.iter().map(|name| normal(name)).collect(),
        }
    }

    /// Whether `host` (no port; IPv6 with or without brackets) is one the view answers to.
    fn allows(&self, host: &str) -> bool {
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

    /// `Err(why)` when a request with these headers must be refused.
    pub(crate) fn check(&self, headers: &http::HeaderMap) -> Result<(), String> {
        for value in headers.get_all(http::header::HOST) {
            let text = String::from_utf8_lossy(value.as_bytes());
            if !host_of_authority(&text).is_some_and(|host| self.allows(host)) {
                return Err(format!(
                    "the host {text:?} is not one the live view answers to (localhost, a loopback address or a configured name): a DNS rebinding defence"
                ));
            }
        }
        for value in headers.get_all(http::header::ORIGIN) {
            let text = String::from_utf8_lossy(value.as_bytes());
            let host = text
                .strip_prefix("http://")
                .or_else(|| text.strip_prefix("https://"))
                .and_then(host_of_authority);
            if !host.is_some_and(|host| self.allows(host)) {
                return Err(format!(
                    "requests from the web origin {text:?} are not accepted (only from localhost, a loopback address or a configured name)"
                ));
            }
        }
        Ok(())
    }
}

/// Lowercase, one trailing dot dropped.
fn normal(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// The host of `host`, `host:port` or `[v6]:port`; `None` for anything else.
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
