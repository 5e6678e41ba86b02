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

mod auth;
mod exec;
mod incluster;
pub mod kubeconfig;

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use auth::{Auth, TokenFile};
pub use exec::ExecCredentials;
pub use kubeconfig::Kubeconfig;

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

/// Everything needed to talk to one API server as one user. Build it with [`Config::infer`],
/// [`Config::from_kubeconfig`] or [`Config::incluster`], then adjust the public fields.
#[derive(Debug, Clone)]
pub struct Config {
    /// The API server, e.g. `https://127.0.0.1:6443`.
    pub cluster_url: http::Uri,
    /// The context's namespace, else `default`.
    pub default_namespace: String,
    /// CA certificates (DER) to trust; `None` trusts the system's roots.
    pub root_certs: Option<Vec<Vec<u8>>>,
    /// `insecure-skip-tls-verify`: accept any server certificate. For tests only.
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
    /// Time limit of establishing a connection. Default 30 s (client-go's dialer timeout).
    pub connect_timeout: Duration,
    /// Client-side rate limit in requests per second; `None` disables it. Default `Some(5.0)`
    /// (client-go's `rest.Config` default).
    pub qps: Option<f32>,
    /// Requests that may go at once above `qps`. Default 10 (client-go's default).
    pub burst: u32,
    /// Retries of failed requests (see [`RetryPolicy`](crate::client::RetryPolicy)).
    pub retry: crate::client::RetryPolicy,
    /// Offer HTTP/2 in the TLS handshake (ALPN `h2`), so that every request and watch shares one
    /// connection. Default `false`: HTTP/1.1, one connection per request in flight and per watch.
    ///
    /// This default is a deliberate difference from client-go, which prefers HTTP/2. Measured on
    /// kube-apiserver 1.20 (README, "Informers": the paired runs), watch events reach an HTTP/1.1
    /// client sooner under load (our reading: on HTTP/2 they also pass through the server's frame
    /// writer, one more step that waits for the CPU). An HTTP/1.1 watch also has a connection of
    /// its own: no head-of-line blocking behind other requests, and a dead connection takes down
    /// one watch, not all traffic. Choose HTTP/2 to hold fewer connections when a process keeps many watches.
    pub http2: bool,
    /// The `User-Agent` of every request (client-go's `rest.Config.UserAgent`). Default `None`:
    /// `ferrokube/<version>`. Give each replica or component its own to tell their requests apart
    /// in the API server's audit log and metrics.
    pub user_agent: Option<String>,
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
    /// client-go keeps); `None`: until the server closes it. Set it with
    /// [`Config::with_idle_conn_timeout`].
    pub idle_conn_timeout: Option<Duration>,
}

/// Default request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
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
            connect_timeout: DEFAULT_TIMEOUT,
            qps: Some(DEFAULT_QPS),
            burst: DEFAULT_BURST,
            retry: crate::client::RetryPolicy::default(),
            http2: false,
            user_agent: None,
            max_idle_conns_per_host: DEFAULT_MAX_IDLE_CONNS_PER_HOST,
            idle_conn_timeout: Some(DEFAULT_IDLE_CONN_TIMEOUT),
        }
    }

    /// This config with at most `max` idle pooled connections (see
    /// [`Config::max_idle_conns_per_host`]; default [`DEFAULT_MAX_IDLE_CONNS_PER_HOST`]).
    ///
    /// ```
    /// # use ferrokube::Config;
    /// let config = Config::new("https://127.0.0.1:6443".parse().unwrap()).with_max_idle_conns_per_host(4);
    /// assert_eq!(config.max_idle_conns_per_host, 4);
    /// ```
    pub fn with_max_idle_conns_per_host(mut self, max: usize) -> Config {
        self.max_idle_conns_per_host = max;
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
            reason: format!("{server:?} needs an http:// or https:// scheme and a host"),
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
