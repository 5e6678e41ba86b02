//! Where the cluster is and who we are: everything the [`Client`](crate::Client) needs to connect.
//!
//! A [`Config`] comes from one of three places, tried in this order by [`Config::infer`]:
//!
//! ```text
//!   $KUBECONFIG (a:b:c, merged)  ─┐
//!   ~/.kube/config                ├─▶ Kubeconfig ─▶ context ─▶ cluster + user ─▶ Config
//!   in-cluster service account   ─┘   (files)                  (TLS, Auth)
//! ```
//!
//! Every field is checked while the config is built, so a bad kubeconfig fails here with an error that
//! names the file, the entry and the field, not later with a TLS handshake failure. Credentials that
//! change while the process runs (a token file that is rotated, an exec plugin's expiring token) are
//! kept as *sources* in [`Auth`] and read again when needed.
//!
//! ## Secrets stay out of `{:?}`
//!
//! A config is often printed whole, in a log line or a panic message. So every type here that holds
//! a credential has a `Debug` of its own that prints `<redacted>` in place of the secret (a token, a
//! password, a client key, an exec plugin's arguments, environment values and answers, the password
//! of a URL) and everything else as derived `Debug` would: client-go's `AuthInfo`, `ExecConfig` and
//! `rest.Config` redact the same fields in their `String` and `GoString`.

mod auth;
mod exec;
mod incluster;
pub mod kubeconfig;
mod retry;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use auth::{Auth, TokenFile};
pub use exec::ExecCredentials;
pub use kubeconfig::Kubeconfig;
pub use retry::RetryPolicy;

use crate::dial::Dial;

/// Why a configuration could not be built. Each variant names the file, entry or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid kubeconfig: {source}")]
    Yaml {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("kubeconfig has no current-context and no context was named")]
    NoCurrentContext,
    #[error("kubeconfig has no {kind} named \"{name}\"")]
    MissingEntry { kind: &'static str, name: String },
    #[error("{kind} \"{name}\" has no {field}")]
    MissingField {
        kind: &'static str,
        name: String,
        field: &'static str,
    },
    #[error("{what} is not a usable server URL: {reason}")]
    InvalidUrl { what: String, reason: String },
    #[error("{what} is not valid base64: {source}")]
    Base64 {
        what: String,
        #[source]
        source: base64::DecodeError,
    },
    #[error("{what}: {reason}")]
    Pem { what: String, reason: String },
    #[error("{what}: {reason}")]
    BadValue { what: String, reason: String },
    #[error("user \"{user}\": {what} is not supported by ferrokube")]
    Unsupported { user: String, what: String },
    #[error("exec plugin {command}: {reason}")]
    Exec { command: String, reason: String },
    #[error("in-cluster config: {0}")]
    InCluster(String),
    #[error("no configuration found; tried: {}", tried.join("; "))]
    NotFound { tried: Vec<String> },
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// `insecure-skip-tls-verify` (or [`Config::accept_invalid_certs`]) together with a
    /// certificate authority ([`Config::root_certs`]). A CA is only used to verify the server's
    /// certificate, which the flag turns off: one of the two is a mistake, and guessing which
    /// would either trust any server or refuse the one meant. Refused when a
    /// [`Client`](crate::Client) is built from the config, where client-go refuses it too
    /// (`transport.TLSConfigFor`, so kubectl does): loading the kubeconfig still works.
    #[error(
        "insecure-skip-tls-verify is set together with a certificate authority: with verification off the CA would never be used, so keep only the one you mean (remove the certificate-authority, or insecure-skip-tls-verify)"
    )]
    InsecureWithCertificateAuthority,
}

/// What `Debug` prints in place of a secret.
#[derive(Clone, Copy)]
pub(crate) struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `Some(<redacted>)` or `None`: whether a secret is set, never what it is.
pub(crate) fn redacted<T>(secret: &Option<T>) -> Option<Redacted> {
    secret.as_ref().map(|_| Redacted)
}

/// `url` with the password of its `user:password@` replaced by `<redacted>` (as Go's
/// `url.URL.Redacted`: the user name stays). Also for text that is not a valid URL, such as a
/// kubeconfig's `proxy-url` before it is checked.
pub(crate) fn redact_url_password(url: &str) -> String {
    let authority_start = url.find("://").map_or(0, |scheme_end| scheme_end + 3);
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    match authority.rfind('@') {
        Some(at) => match authority[..at].split_once(':') {
            Some((user, _password)) => format!(
                "{}{user}:<redacted>{}",
                &url[..authority_start],
                &url[authority_start + at..]
            ),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// A client certificate and key, as PEM (checked when the config was built).
#[derive(Clone)]
pub struct Identity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity { .. }")
    }
}

/// The encoding a client reads and writes built-in kinds in ([`Config::content_type`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentType {
    /// Protobuf where the kind has a protobuf form, JSON where the server answers JSON.
    #[default]
    Protobuf,
    /// JSON only.
    Json,
}

/// Everything needed to talk to one API server as one user. Build it with [`Config::infer`],
/// [`Config::from_kubeconfig`] or [`Config::incluster`], then adjust the public fields.
///
/// Its `Debug` prints no secret: [`Auth`] and [`Identity`] redact theirs, and the password of
/// a URL is replaced by `<redacted>`.
#[derive(Clone)]
pub struct Config {
    /// The API server, e.g. `https://127.0.0.1:6443`.
    pub cluster_url: http::Uri,
    /// The context's namespace, else `default`.
    pub default_namespace: String,
    /// CA certificates (DER) to trust; `None` trusts the system's roots.
    pub root_certs: Option<Vec<Vec<u8>>>,
    /// `insecure-skip-tls-verify`: accept any server certificate. For tests only. Together with
    /// `root_certs`, building a [`Client`](crate::Client) fails
    /// ([`ConfigError::InsecureWithCertificateAuthority`]), as in client-go.
    pub accept_invalid_certs: bool,
    /// `tls-server-name`: the name to check the server certificate against instead of the URL's host.
    pub tls_server_name: Option<String>,
    /// The proxy to reach the server through (a cluster's `proxy-url`): `http://` (a `CONNECT`
    /// tunnel) or `socks5://`, with optional `user:password@`. Default none: connect directly.
    /// Unlike client-go, `HTTPS_PROXY` and friends are not read.
    pub proxy_url: Option<http::Uri>,
    /// Client certificate authentication.
    pub identity: Option<Identity>,
    /// Header-based authentication.
    pub auth: Auth,
    /// Time limit of every request except watches. Default 30 s.
    pub timeout: Option<Duration>,
    /// Time limit of a write's answer head (every method but GET, HEAD and OPTIONS), when shorter
    /// than [`timeout`](Config::timeout). Default `Some(10 s)` ([`DEFAULT_WRITE_TIMEOUT`]): the
    /// leader election's default renew deadline, so that a write stuck on a dead connection is
    /// given up (and the connections pooled with it retired, see `client`'s module docs) within
    /// the time a leader allows itself to renew its lease. client-go has no such deadline (it
    /// relies on HTTP/2 pings, ~45 s). A write that times out may still have been applied; the
    /// caller learns it from its informer, as after any unanswered write. An admission webhook
    /// slower than this makes the write fail here while the server may still apply it: raise it
    /// (or set `None`) for such a cluster.
    pub write_timeout: Option<Duration>,
    /// Time limit of establishing a connection. Default 30 s (client-go's dialer timeout).
    pub connect_timeout: Duration,
    /// Time limit of the TLS handshake once the connection is open. Default 10 s
    /// ([`DEFAULT_TLS_HANDSHAKE_TIMEOUT`], client-go's `TLSHandshakeTimeout`). Together with
    /// [`connect_timeout`](Config::connect_timeout) it bounds how long a request can wait for a
    /// connection (a proxy tunnel included), so that a server that accepts and then says nothing
    /// cannot hold a request, or a watch, forever.
    pub tls_handshake_timeout: Duration,
    /// TCP keepalive: probe a connection that has been quiet this long, and again at this
    /// interval (Go's dialer: idle and interval both 30 s, 9 probes, as client-go's dialer sets
    /// `KeepAlive: 30s`). Default `Some(30 s)` ([`DEFAULT_TCP_KEEPALIVE`]); `None` turns it off.
    /// Keepalive finds a peer that vanished (its host died, a NAT forgot the connection) after a
    /// few minutes; quicker detection of a silent watch is the reflector's idle deadline and,
    /// with [`http2`](Config::http2), the HTTP/2 pings (see `client`'s module docs).
    pub tcp_keepalive: Option<Duration>,
    /// Client-side rate limit in requests per second; `None` disables it. Default `Some(5.0)`
    /// (client-go's `rest.Config` default).
    pub qps: Option<f32>,
    /// Requests that may go at once above `qps`. Default 10 (client-go's default).
    pub burst: u32,
    /// Retries of failed requests (see [`RetryPolicy`]).
    pub retry: RetryPolicy,
    /// Offer HTTP/2 in the TLS handshake (ALPN `h2`), so that every request and watch shares one
    /// connection. Default `false`: HTTP/1.1, one connection per request in flight and per watch.
    ///
    /// This default is a deliberate difference from client-go, which prefers HTTP/2. Measured on
    /// kube-apiserver 1.20 (the guide's performance chapter, "Informers": the paired runs), watch events reach an HTTP/1.1
    /// client sooner under load (our reading: on HTTP/2 they also pass through the server's frame
    /// writer, one more step that waits for the CPU). An HTTP/1.1 watch also has a connection of
    /// its own: no head-of-line blocking behind other requests, and a dead connection takes down
    /// one watch, not all traffic. Choose HTTP/2 to hold fewer connections when a process keeps many watches.
    ///
    /// Dead connections do not argue for HTTP/2 any more: with the pool's rules (a connection idle
    /// for [`idle_conn_stale_after`](Config::idle_conn_stale_after) is not reused unchecked, an
    /// unanswered request retires the connections pooled beside it), writes after a freeze of
    /// every connection succeed as soon on HTTP/1.1 as on HTTP/2 (measured 2026-11-29, the
    /// pooled-writes drill: 15.0 s vs 15.1 s after the watch resumes, 10.0 s vs 10.0 s when
    /// writing at once; benches/dead-connection/pooled-writes-*), and the ReplicaSet sample acts
    /// as soon on either beside kube-controller-manager (the frozen-pool drill, 2026-11-29: 13.0–13.2 s
    /// on HTTP/1.1, 13.2–14.5 s on HTTP/2, kube-controller-manager 44.0–44.9 s;
    /// benches/dead-connection/frozen-pool-*).
    pub http2: bool,
    /// The `User-Agent` of every request (client-go's `rest.Config.UserAgent`). Default `None`:
    /// `ferrokube/<version>`. Give each replica or component its own to tell their requests apart
    /// in the API server's audit log and metrics.
    pub user_agent: Option<String>,
    /// The encoding of built-in kinds on the wire (client-go's `rest.Config.ContentType`).
    /// Default [`ContentType::Protobuf`]: gets, lists and watches of kinds in Kubernetes'
    /// protobuf schema send `Accept: application/vnd.kubernetes.protobuf, application/json`
    /// and decode whichever the server answers (JSON only from then on for a resource whose
    /// server refuses, 406), and creates and updates send their body as
    /// protobuf (JSON once more, and from then on for that resource, when the server answers
    /// 415; see [`crate::protobuf`]). Custom resources, `DynamicObject` and patches are JSON
    /// either way. [`ContentType::Json`] sends and asks for JSON only.
    pub content_type: ContentType,
    /// Do not ask for compressed answers (client-go's `rest.Config.DisableCompression`).
    /// Default `false`: every request says `Accept-Encoding: gzip`, as client-go's do, and
    /// kube-apiserver gzips what it judges worth it (a get or list answer over 128 KiB, a
    /// streaming list), which the client inflates as it streams in (see the `client` module's
    /// `gzip`). Set it where the network is fast and the CPU is not: on a localhost or a
    /// datacenter link, gzip's CPU (level 1 on the server, inflating here) can cost more time
    /// than the bytes it saves (docs/src/performance.md has the measurements).
    pub disable_compression: bool,
    /// How many idle keep-alive connections the pool keeps open for reuse. Default 25
    /// ([`DEFAULT_MAX_IDLE_CONNS_PER_HOST`], client-go's `MaxIdleConnsPerHost`). A client talks to
    /// one server, so this caps the whole pool; `0` keeps none (every request opens a connection
    /// of its own, HTTP/2 included). Set it with [`Config::with_max_idle_conns_per_host`].
    ///
    /// Why a cap: with HTTP/1.1 every request in flight holds a connection, so a burst of N
    /// concurrent requests opens N connections. Without a cap all N would then stay open, idle,
    /// on both ends until the server's idle timeout; with it, those beyond the cap are closed as
    /// soon as their response has been read. Connections in use (a watch, a request in flight)
    /// are never counted or closed by it.
    pub max_idle_conns_per_host: usize,
    /// How long a connection may sit idle in the pool before it is closed. Default 90 s
    /// ([`DEFAULT_IDLE_CONN_TIMEOUT`], Go's `http.DefaultTransport.IdleConnTimeout`, which
    /// client-go keeps); `None`: until the server closes it. Over HTTP/1.1 an idle connection is
    /// closed sooner, once [stale](Config::idle_conn_stale_after). Set it with
    /// [`Config::with_idle_conn_timeout`].
    pub idle_conn_timeout: Option<Duration>,
    /// How long a connection may carry nothing before it is no longer trusted with a request
    /// unchecked. Default 10 s ([`DEFAULT_IDLE_CONN_STALE_AFTER`]). Over HTTP/1.1 (no probe
    /// exists) an idle pooled connection this old is closed instead of reused; over HTTP/2 the
    /// connection is pinged after this much silence and closed if the ping is not answered
    /// within 5 s. Keep it below the informers' watch idle deadline (15 s): a change learned
    /// through a watch resumed after an outage is then never acted upon through a connection
    /// from before the outage. See `client`'s module docs, "Dead connections".
    pub idle_conn_stale_after: Duration,
    /// How connections are opened. Default `None`: TCP to the host and port of
    /// [`cluster_url`](Config::cluster_url) (through [`proxy_url`](Config::proxy_url) if set).
    /// `Some`: the caller's function makes each connection, e.g. an in-memory pipe to an
    /// embedded API server; the proxy is then not used. Set it with [`Config::with_dial`]; see
    /// [`dial`](crate::dial).
    pub dial: Option<Dial>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every field, in order; only the URLs' passwords are hidden (the rest redact themselves).
        // Destructured, so that a new field cannot be added without deciding how it prints.
        let Config {
            cluster_url,
            default_namespace,
            root_certs,
            accept_invalid_certs,
            tls_server_name,
            proxy_url,
            identity,
            auth,
            timeout,
            write_timeout,
            connect_timeout,
            tls_handshake_timeout,
            tcp_keepalive,
            qps,
            burst,
            retry,
            http2,
            user_agent,
            content_type,
            disable_compression,
            max_idle_conns_per_host,
            idle_conn_timeout,
            idle_conn_stale_after,
            dial,
        } = self;
        f.debug_struct("Config")
            .field(
                "cluster_url",
                &redact_url_password(&cluster_url.to_string()),
            )
            .field("default_namespace", default_namespace)
            .field("root_certs", root_certs)
            .field("accept_invalid_certs", accept_invalid_certs)
            .field("tls_server_name", tls_server_name)
            .field(
                "proxy_url",
                &proxy_url
                    .as_ref()
                    .map(|url| redact_url_password(&url.to_string())),
            )
            .field("identity", identity)
            .field("auth", auth)
            .field("timeout", timeout)
            .field("write_timeout", write_timeout)
            .field("connect_timeout", connect_timeout)
            .field("tls_handshake_timeout", tls_handshake_timeout)
            .field("tcp_keepalive", tcp_keepalive)
            .field("qps", qps)
            .field("burst", burst)
            .field("retry", retry)
            .field("http2", http2)
            .field("user_agent", user_agent)
            .field("content_type", content_type)
            .field("disable_compression", disable_compression)
            .field("max_idle_conns_per_host", max_idle_conns_per_host)
            .field("idle_conn_timeout", idle_conn_timeout)
            .field("idle_conn_stale_after", idle_conn_stale_after)
            .field("dial", dial)
            .finish()
    }
}

/// Default request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default deadline of a write's answer head: the leader election's default renew deadline
/// (client-go's core components use 10 s).
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time after which a quiet connection is stale (see [`Config::idle_conn_stale_after`]).
pub const DEFAULT_IDLE_CONN_STALE_AFTER: Duration = Duration::from_secs(10);
/// Default TLS handshake timeout (client-go's `TLSHandshakeTimeout`: 10 s).
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default TCP keepalive idle time and probe interval (client-go's dialer `KeepAlive`: 30 s).
pub const DEFAULT_TCP_KEEPALIVE: Duration = Duration::from_secs(30);
/// Default client-side QPS (client-go: 5).
pub const DEFAULT_QPS: f32 = 5.0;
/// Default client-side burst (client-go: 10).
pub const DEFAULT_BURST: u32 = 10;
/// Default cap on idle pooled connections: client-go's `MaxIdleConnsPerHost` (25, set by
/// `k8s.io/client-go/transport` on every transport it builds; Go's own default is 2, too few for
/// a controller's bursts, and hyper's is unlimited).
pub const DEFAULT_MAX_IDLE_CONNS_PER_HOST: usize = 25;
/// Default idle timeout of pooled connections: Go's `http.DefaultTransport.IdleConnTimeout`
/// (90 s), which client-go copies onto its transports (`SetOldTransportDefaults`).
pub const DEFAULT_IDLE_CONN_TIMEOUT: Duration = Duration::from_secs(90);

impl Config {
    /// A config for `cluster_url` with no credentials and every default.
    pub fn new(cluster_url: http::Uri) -> Config {
        Config {
            cluster_url,
            default_namespace: "default".into(),
            root_certs: None,
            accept_invalid_certs: false,
            tls_server_name: None,
            proxy_url: None,
            identity: None,
            auth: Auth::None,
            timeout: Some(DEFAULT_TIMEOUT),
            write_timeout: Some(DEFAULT_WRITE_TIMEOUT),
            connect_timeout: DEFAULT_TIMEOUT,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            tcp_keepalive: Some(DEFAULT_TCP_KEEPALIVE),
            qps: Some(DEFAULT_QPS),
            burst: DEFAULT_BURST,
            retry: RetryPolicy::default(),
            http2: false,
            user_agent: None,
            content_type: ContentType::default(),
            disable_compression: false,
            max_idle_conns_per_host: DEFAULT_MAX_IDLE_CONNS_PER_HOST,
            idle_conn_timeout: Some(DEFAULT_IDLE_CONN_TIMEOUT),
            idle_conn_stale_after: DEFAULT_IDLE_CONN_STALE_AFTER,
            dial: None,
        }
    }

    /// This config with its connections opened by `dial` instead of TCP (see [`Config::dial`]
    /// and [`dial`](crate::dial)).
    pub fn with_dial(mut self, dial: Dial) -> Config {
        self.dial = Some(dial);
        self
    }

    /// This config with at most `max` idle pooled connections (see
    /// [`Config::max_idle_conns_per_host`]; default [`DEFAULT_MAX_IDLE_CONNS_PER_HOST`]).
    ///
    /// ```
    /// # use ferrokube_client::Config;
    /// let config = Config::new("https://127.0.0.1:6443".parse().unwrap()).with_max_idle_conns_per_host(4);
    /// assert_eq!(config.max_idle_conns_per_host, 4);
    /// ```
    pub fn with_max_idle_conns_per_host(mut self, max: usize) -> Config {
        self.max_idle_conns_per_host = max;
        self
    }

    /// This config with a client-side rate limit of `qps` requests per second and bursts of
    /// `burst` (see [`Config::qps`]; client-go's defaults are 5 and 10, kube-controller-manager's
    /// 20 and 30).
    pub fn with_qps(mut self, qps: f32, burst: u32) -> Config {
        self.qps = Some(qps);
        self.burst = burst;
        self
    }

    /// This config with idle pooled connections closed after `timeout` (`None`: never by the
    /// client; see [`Config::idle_conn_timeout`], default [`DEFAULT_IDLE_CONN_TIMEOUT`]).
    pub fn with_idle_conn_timeout(mut self, timeout: Option<Duration>) -> Config {
        self.idle_conn_timeout = timeout;
        self
    }

    /// Kubeconfig if there is one, else in-cluster, else an error naming what was tried.
    pub fn infer() -> Result<Config, ConfigError> {
        let mut tried = Vec::new();
        let paths = kubeconfig_paths();
        if paths.iter().any(|p| p.exists()) {
            return Config::from_kubeconfig_files(&paths, None);
        }
        tried.push(format!(
            "kubeconfig ({})",
            if paths.is_empty() {
                "no $KUBECONFIG and no home folder".to_string()
            } else {
                paths
                    .iter()
                    .map(|p| format!("{} does not exist", p.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        match Config::incluster() {
            Ok(config) => Ok(config),
            Err(ConfigError::InCluster(reason)) => {
                tried.push(format!("in-cluster ({reason})"));
                Err(ConfigError::NotFound { tried })
            }
            Err(other) => Err(other),
        }
    }

    /// From `$KUBECONFIG` or `~/.kube/config`, at `context` (else the current context).
    pub fn from_default_kubeconfig(context: Option<&str>) -> Result<Config, ConfigError> {
        Config::from_kubeconfig_files(&kubeconfig_paths(), context)
    }

    /// Reads and merges `paths` (as `$KUBECONFIG` would list them), then builds the config.
    pub fn from_kubeconfig_files(
        paths: &[PathBuf],
        context: Option<&str>,
    ) -> Result<Config, ConfigError> {
        if !paths.iter().any(|p| p.exists()) {
            return Err(ConfigError::NotFound {
                tried: paths
                    .iter()
                    .map(|p| format!("{} does not exist", p.display()))
                    .collect(),
            });
        }
        Config::from_kubeconfig(&Kubeconfig::read_merged(paths)?, context)
    }

    /// Builds the config of `context` (else the current context) of an already loaded kubeconfig.
    pub fn from_kubeconfig(
        kubeconfig: &Kubeconfig,
        context: Option<&str>,
    ) -> Result<Config, ConfigError> {
        let (_, context) = kubeconfig.context(context)?;
        let cluster = kubeconfig.cluster(&context.cluster)?;
        let cluster_name = context.cluster.as_str();
        let server = cluster
            .server
            .as_deref()
            .ok_or_else(|| ConfigError::MissingField {
                kind: "cluster",
                name: cluster_name.into(),
                field: "server",
            })?;
        let mut config = Config::new(parse_server(
            server,
            &format!("cluster \"{cluster_name}\" server"),
        )?);
        if let Some(proxy) = cluster.proxy_url.as_deref().filter(|p| !p.is_empty()) {
            config.proxy_url = Some(proxy.parse().map_err(|_| ConfigError::InvalidUrl {
                what: format!("cluster \"{cluster_name}\" proxy-url"),
                reason: "not a URL".into(),
            })?);
        }
        config.default_namespace = context
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        config.accept_invalid_certs = cluster.insecure_skip_tls_verify;
        config.tls_server_name = cluster.tls_server_name.clone();
        let ca = read_data_or_file(
            cluster.certificate_authority_data.as_deref(),
            cluster.certificate_authority.as_deref(),
            &format!("cluster \"{cluster_name}\" certificate-authority"),
        )?;
        if let Some((pem, what)) = ca {
            config.root_certs = Some(parse_certs(&pem, &what)?);
        }

        let user_name = context.user.as_str();
        let user = kubeconfig.user(user_name)?;
        if user.auth_provider.is_some() {
            return Err(ConfigError::Unsupported {
                user: user_name.into(),
                what: "auth-provider (use an exec plugin instead)".into(),
            });
        }
        let cert = read_data_or_file(
            user.client_certificate_data.as_deref(),
            user.client_certificate.as_deref(),
            &format!("user \"{user_name}\" client-certificate"),
        )?;
        let key = read_data_or_file(
            user.client_key_data.as_deref(),
            user.client_key.as_deref(),
            &format!("user \"{user_name}\" client-key"),
        )?;
        config.identity = match (cert, key) {
            (Some((cert_pem, cert_what)), Some((key_pem, key_what))) => {
                parse_certs(&cert_pem, &cert_what)?;
                parse_key(&key_pem, &key_what)?;
                Some(Identity { cert_pem, key_pem })
            }
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConfigError::MissingField {
                    kind: "user",
                    name: user_name.into(),
                    field: "client-key (it has a client-certificate)",
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::MissingField {
                    kind: "user",
                    name: user_name.into(),
                    field: "client-certificate (it has a client-key)",
                });
            }
        };
        config.auth = Auth::from_user(user_name, &user)?;
        Ok(config)
    }

    /// From the service account Kubernetes mounts into every pod.
    pub fn incluster() -> Result<Config, ConfigError> {
        incluster::config(Path::new(incluster::SERVICE_ACCOUNT_DIR))
    }
}

/// `$KUBECONFIG` split on `:` (empty entries dropped), else `~/.kube/config`.
pub fn kubeconfig_paths() -> Vec<PathBuf> {
    match std::env::var_os("KUBECONFIG") {
        Some(list) if !list.is_empty() => std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        _ => std::env::var_os("HOME")
            .map(|home| vec![Path::new(&home).join(".kube").join("config")])
            .unwrap_or_default(),
    }
}

fn parse_server(server: &str, what: &str) -> Result<http::Uri, ConfigError> {
    let uri: http::Uri =
        server
            .trim_end_matches('/')
            .parse()
            .map_err(|e: http::uri::InvalidUri| ConfigError::InvalidUrl {
                what: what.into(),
                reason: e.to_string(),
            })?;
    match uri.scheme_str() {
        Some("https" | "http") if uri.host().is_some() => Ok(uri),
        _ => Err(ConfigError::InvalidUrl {
            what: what.into(),
            reason: format!(
                "{:?} needs an http:// or https:// scheme and a host",
                redact_url_password(server)
            ),
        }),
    }
}

/// The bytes of a `*-data` field (base64) or of the file a path field names, with a description
/// of where they came from for error messages.
fn read_data_or_file(
    data: Option<&str>,
    file: Option<&Path>,
    what: &str,
) -> Result<Option<(Vec<u8>, String)>, ConfigError> {
    if let Some(data) = data.filter(|d| !d.trim().is_empty()) {
        let what = format!("{what}-data");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|source| ConfigError::Base64 {
                what: what.clone(),
                source,
            })?;
        return Ok(Some((bytes, what)));
    }
    match file.filter(|f| !f.as_os_str().is_empty()) {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            Ok(Some((bytes, format!("{what} ({})", path.display()))))
        }
        None => Ok(None),
    }
}

/// Every certificate in a PEM bundle, as DER; at least one is required.
pub(crate) fn parse_certs(pem: &[u8], what: &str) -> Result<Vec<Vec<u8>>, ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.as_ref().to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::Pem {
            what: what.into(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(ConfigError::Pem {
            what: what.into(),
            reason: "no CERTIFICATE block found".into(),
        });
    }
    Ok(certs)
}

/// A private key: RSA (PKCS#1), EC (SEC1) or PKCS#8.
pub(crate) fn parse_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, ConfigError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| ConfigError::Pem {
        what: what.into(),
        reason: format!("no usable private key (RSA, EC or PKCS#8): {e}"),
    })
}

#[cfg(test)]
mod tests;
