//! Reaching the API server through the proxy a kubeconfig's cluster names (`proxy-url`), as kubectl
//! does: an HTTP proxy is asked to open a tunnel (`CONNECT host:port`), a SOCKS5 proxy to connect
//! (the proxy resolves the host name, as Go's SOCKS5 dialer lets it). Either way the proxy carries
//! bytes only: TLS to the API server runs end to end through the tunnel, so the proxy sees neither
//! the credentials nor the objects.
//!
//! ```text
//!  pool needs a connection ──▶ Dialer::call(api server URI)
//!      Direct      ──▶ TCP to the API server
//!      HttpConnect ──▶ TCP to the proxy ──▶ "CONNECT host:port" ──▶ 200 ──▶ the same socket, now a tunnel
//!      Socks5      ──▶ TCP to the proxy ──▶ SOCKS5 handshake (user/password if the URL has them) ──▶ tunnel
//!      Custom      ──▶ the caller's `Dial` (`Config::dial`, e.g. an in-memory pipe); no proxy
//!  then TLS (hyper-rustls) and HTTP on top, exactly as without a proxy
//! ```
//!
//! The tunnels are hyper-util's (`Tunnel`, `SocksV5`): well-kept code for a protocol detail, used
//! rather than written again. Proxies spoken to over TLS (`https://` proxy URLs) are refused with
//! a clear error when the configuration is read; so are other schemes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine;
use http::{HeaderValue, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::{SocksV5, Tunnel};
use hyper_util::rt::TokioIo;
use tower_service::Service;

use crate::config::ConfigError;
use crate::dial::{Conn, Dial};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How the client opens a connection to the API server: TCP directly, or through a proxy, or a
/// [`Dial`] of the caller's (see `dial`).
#[derive(Clone)]
pub(crate) enum Dialer {
    Direct(HttpConnector),
    HttpConnect(Tunnel<HttpConnector>),
    Socks5(SocksV5<HttpConnector>),
    Custom(Dial),
}

impl Dialer {
    /// The dialer for `proxy` (a kubeconfig's `proxy-url`; `None`: connect directly).
    pub(crate) fn new(tcp: HttpConnector, proxy: Option<&Uri>) -> Result<Dialer, ConfigError> {
        let Some(proxy) = proxy else {
            return Ok(Dialer::Direct(tcp));
        };
        let bad = |reason: &str| ConfigError::BadValue {
            what: format!("proxy-url {}", without_password(proxy)),
            reason: reason.into(),
        };
        let authority = proxy.authority().ok_or_else(|| bad("it names no host"))?;
        let (credentials, host_port) = match authority.as_str().rsplit_once('@') {
            Some((userinfo, host)) => (Some(userinfo), host),
            None => (None, authority.as_str()),
        };
        match proxy.scheme_str() {
            Some("http") => {
                let default_port = if host_port.contains(':') { "" } else { ":80" };
                let target: Uri = format!("http://{host_port}{default_port}")
                    .parse()
                    .map_err(|_| bad("not a valid proxy address"))?;
                let mut tunnel = Tunnel::new(target, tcp);
                if let Some(userinfo) = credentials {
                    let (user, password) = user_and_password(userinfo);
                    let token = base64::engine::general_purpose::STANDARD
                        .encode(format!("{user}:{password}"));
                    let header = HeaderValue::from_str(&format!("Basic {token}"))
                        .map_err(|_| bad("its credentials are not a valid header"))?;
                    tunnel = tunnel.with_auth(header);
                }
                Ok(Dialer::HttpConnect(tunnel))
            }
            Some("socks5") | Some("socks5h") => {
                let default_port = if host_port.contains(':') { "" } else { ":1080" };
                let target: Uri = format!("socks5://{host_port}{default_port}")
                    .parse()
                    .map_err(|_| bad("not a valid proxy address"))?;
                let mut socks = SocksV5::new(target, tcp).local_dns(false);
                if let Some(userinfo) = credentials {
                    let (user, password) = user_and_password(userinfo);
                    socks = socks.with_auth(user, password);
                }
                Ok(Dialer::Socks5(socks))
            }
            Some("https") => Err(bad(
                "proxies spoken to over TLS are not supported; use an http:// or socks5:// proxy",
            )),
            _ => Err(bad("the scheme must be http or socks5")),
        }
    }
}

/// `user:password` (percent-decoded), either part possibly empty.
fn user_and_password(userinfo: &str) -> (String, String) {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    (percent_decode(user), percent_decode(password))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[at], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The proxy URL for messages: a password is never printed (`user:<redacted>@`).
pub(crate) fn without_password(proxy: &Uri) -> String {
    crate::config::redact_url_password(&proxy.to_string())
}

type Connecting = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

impl Service<Uri> for Dialer {
    type Response = Conn;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Dialer::Direct(tcp) => tcp.poll_ready(cx).map_err(Into::into),
            Dialer::HttpConnect(tunnel) => tunnel.poll_ready(cx).map_err(Into::into),
            Dialer::Socks5(socks) => socks.poll_ready(cx).map_err(Into::into),
            Dialer::Custom(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, destination: Uri) -> Connecting {
        match self {
            Dialer::Direct(tcp) => {
                let connecting = tcp.call(destination);
                Box::pin(async move { Ok(Conn::Tcp(connecting.await?)) })
            }
            Dialer::HttpConnect(tunnel) => {
                let connecting = tunnel.call(destination);
                Box::pin(async move { Ok(Conn::Tcp(connecting.await?)) })
            }
            Dialer::Socks5(socks) => {
                let connecting = socks.call(destination);
                Box::pin(async move { Ok(Conn::Tcp(connecting.await?)) })
            }
            Dialer::Custom(dial) => {
                let connecting = dial.open(&destination);
                Box::pin(async move { Ok(Conn::Dialed(TokioIo::new(connecting.await?))) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialer(url: &str) -> Result<Dialer, ConfigError> {
        let uri: Uri = url.parse().map_err(|_| ConfigError::BadValue {
            what: url.into(),
            reason: "unparsable".into(),
        })?;
        Dialer::new(HttpConnector::new(), Some(&uri))
    }

    #[test]
    fn http_and_socks5_proxies_are_accepted_others_refused_clearly() {
        assert!(matches!(
            dialer("http://proxy.example:3128"),
            Ok(Dialer::HttpConnect(_))
        ));
        assert!(matches!(
            dialer("http://u:p%40ss@proxy.example"),
            Ok(Dialer::HttpConnect(_))
        ));
        assert!(matches!(
            dialer("socks5://proxy.example"),
            Ok(Dialer::Socks5(_))
        ));
        let Err(refused) = dialer("https://user:secret@proxy.example") else {
            panic!("an https proxy is refused");
        };
        let text = refused.to_string();
        assert!(text.contains("over TLS"), "{text}");
        assert!(!text.contains("secret"), "the password is printed: {text}");
        assert!(dialer("ftp://proxy.example").is_err());
    }

    #[test]
    fn credentials_are_percent_decoded() {
        assert_eq!(
            user_and_password("me:p%40ss%3Aword"),
            ("me".to_string(), "p@ss:word".to_string())
        );
        assert_eq!(user_and_password("me"), ("me".to_string(), String::new()));
        assert_eq!(percent_decode("100%"), "100%");
    }
}
