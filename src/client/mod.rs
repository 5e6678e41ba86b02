//! The HTTP client: one connection pool to one API server, shared by every [`Api`](crate::Api).
//!
//! Each request goes through the same steps:
//!
//! ```text
//!  Api::get/list/watch/…  ──▶ Call { request, idempotent, streaming }
//!        │
//!        ▼
//!  rate limiter (governor; QPS 5, burst 10 by default; a watch takes one token to open; first
//!  come, first served, or in the background lane: see `rate_limit`)
//!        ▼
//!  + base URL, User-Agent, Accept, Authorization (re-read from its source if it rotates)
//!        ▼
//!  hyper (pooled HTTP/1.1 connections; one HTTP/2 connection with `Config::http2`) ── timeout 30 s,
//!  none for watches
//!        ▼
//!  2xx ──▶ response           error ──▶ RetryPolicy: 429 any verb, 5xx/transport idempotent only
//!                                        401 once more with fresh credentials
//! ```
//!
//! `Client` is cheap to clone: clones share the pool and the rate limiter.

mod rate_limit;
mod retry;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::de::DeserializeOwned;

pub use rate_limit::Priority;
pub use retry::RetryPolicy;

use crate::config::{Auth, Config, ConfigError};
use crate::error::{ApiError, Error};
use rate_limit::RateLimit;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A client for one API server. See the [module docs](self).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// The rate-limit lane of this handle's requests (clones made by [`Client::with_priority`]
    /// share everything else).
    priority: Priority,
}

struct Inner {
    http: HyperClient<Connector, Full<Bytes>>,
    /// Scheme, authority and path prefix (without a trailing slash) of the server.
    base: String,
    auth: Auth,
    timeout: Option<Duration>,
    limiter: Option<RateLimit>,
    retry: RetryPolicy,
    default_namespace: String,
    user_agent: HeaderValue,
}

/// With [`Config::http2`], how long a connection may be quiet before it is pinged (client-go's
/// `ReadIdleTimeout`: 30 s).
const HTTP2_PING_AFTER_IDLE: Duration = Duration::from_secs(30);
/// With [`Config::http2`], how long a ping may go unanswered before the connection is closed
/// (client-go's `PingTimeout`: 15 s).
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(15);

/// One request to send, and what the retry rules need to know about it.
pub struct Call {
    /// Path and query (e.g. `/api/v1/namespaces/default/pods?limit=500`), with method, headers, body.
    pub request: Request<Bytes>,
    /// Safe to send twice (GET, LIST, DELETE with preconditions).
    pub idempotent: bool,
    /// A watch: no request timeout, and the body is read as a stream by the caller.
    pub streaming: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.inner.base)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Builds a client (and its TLS configuration) from `config`. Needs a tokio runtime to send.
    pub fn new(config: Config) -> Result<Client, Error> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(config.connect_timeout));
        http.set_nodelay(true);
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls::client_config(&config)?)
            .https_or_http();
        let builder = match &config.tls_server_name {
            Some(name) => {
                let name = rustls_pki_types::ServerName::try_from(name.clone()).map_err(|e| {
                    ConfigError::BadValue {
                        what: "tls-server-name".into(),
                        reason: e.to_string(),
                    }
                })?;
                builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
            }
            None => builder,
        };
        let connector = if config.http2 {
            builder.enable_all_versions().wrap_connector(http)
        } else {
            builder.enable_http1().wrap_connector(http)
        };
        let mut http = HyperClient::builder(TokioExecutor::new());
        if config.http2 {
            // A shared HTTP/2 connection that died silently would stall every request and watch
            // on it; ping it when it has been quiet, as client-go's health check does.
            http.timer(TokioTimer::new())
                .http2_keep_alive_interval(HTTP2_PING_AFTER_IDLE)
                .http2_keep_alive_timeout(HTTP2_PING_TIMEOUT)
                .http2_keep_alive_while_idle(true);
        }
        let http = http.build(connector);
        let limiter = config.qps.and_then(|qps| RateLimit::new(qps, config.burst));
        let base = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        let user_agent = HeaderValue::from_static(concat!("ferrokube/", env!("CARGO_PKG_VERSION")));
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                base,
                auth: config.auth,
                timeout: config.timeout,
                limiter,
                retry: config.retry,
                default_namespace: config.default_namespace,
                user_agent,
            }),
            priority: Priority::default(),
        })
    }

    /// A handle on the same client (pool, credentials, rate limiter) whose requests wait in the
    /// `priority` lane of the rate limiter. [`Priority::Background`] is for best-effort requests
    /// (e.g. Events) that should use only tokens no other request is waiting for.
    pub fn with_priority(&self, priority: Priority) -> Client {
        Client {
            inner: self.inner.clone(),
            priority,
        }
    }

    /// [`Config::infer`], then [`Client::new`].
    pub fn try_default() -> Result<Client, Error> {
        Client::new(Config::infer()?)
    }

    /// The namespace of the config's context (or `default`).
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    /// Sends `call`, retrying as [`RetryPolicy`] allows; returns a 2xx response with its body unread.
    pub async fn send(&self, call: Call) -> Result<Response<Incoming>, Error> {
        let mut attempt = 0;
        let mut refreshed_credentials = false;
        loop {
            match self.send_once(&call).await {
                Ok(response) => return Ok(response),
                Err(error) => {
                    if error.is_unauthorized()
                        && !refreshed_credentials
                        && matches!(self.inner.auth, Auth::Exec(_) | Auth::TokenFile(_))
                    {
                        refreshed_credentials = true;
                        self.inner.auth.invalidate();
                        continue;
                    }
                    let Some(wait) = self.inner.retry.delay(&error, call.idempotent, attempt)
                    else {
                        return Err(error);
                    };
                    tracing::debug!(%error, ?wait, attempt, "retrying request");
                    attempt += 1;
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Sends `call` and decodes the 2xx body as `T`.
    pub async fn request<T: DeserializeOwned>(&self, call: Call) -> Result<T, Error> {
        let url = call.request.uri().to_string();
        let body = self.request_bytes(call).await?;
        serde_json::from_slice(&body).map_err(|source| Error::Decode {
            what: format!("the response of {url}"),
            source,
        })
    }

    /// Sends `call` and returns the whole 2xx body. Reading the body has its own request timeout.
    pub async fn request_bytes(&self, call: Call) -> Result<Bytes, Error> {
        let mut body = BytesMut::new();
        self.request_chunks(call, |chunk| {
            body.extend_from_slice(chunk);
            Ok(())
        })
        .await?;
        Ok(body.freeze())
    }

    /// Sends `call` and hands the 2xx body to `each` piece by piece as it arrives, so the caller
    /// can decode while the rest is still on the wire (a list: see `api::list`). Reading the body
    /// has its own request timeout, as in [`request_bytes`](Self::request_bytes).
    pub async fn request_chunks(
        &self,
        call: Call,
        each: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let url = call.request.uri().to_string();
        let body = self.send(call).await?.into_body();
        match self.inner.timeout {
            Some(limit) => tokio::time::timeout(limit, read_chunks(body, &url, each))
                .await
                .map_err(|_| Error::Timeout { url, after: limit })?,
            None => read_chunks(body, &url, each).await,
        }
    }

    async fn send_once(&self, call: &Call) -> Result<Response<Incoming>, Error> {
        if let Some(limiter) = &self.inner.limiter {
            limiter.acquire(self.priority).await;
        }
        let request = self.prepare(&call.request).await?;
        let url = request.uri().to_string();
        let sent = self.inner.http.request(request);
        let response = match (self.inner.timeout, call.streaming) {
            (Some(limit), false) => {
                tokio::time::timeout(limit, sent)
                    .await
                    .map_err(|_| Error::Timeout {
                        url: url.clone(),
                        after: limit,
                    })?
            }
            _ => sent.await,
        }
        .map_err(|source| Error::Transport {
            url: url.clone(),
            source: Box::new(source),
        })?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(error_from_response(response, &url).await)
    }

    /// The full request: base URL, standard headers and credentials added to the caller's.
    async fn prepare(&self, template: &Request<Bytes>) -> Result<Request<Full<Bytes>>, Error> {
        let path = template.uri().path_and_query().map_or("/", |p| p.as_str());
        let uri = format!("{}{}", self.inner.base, path);
        let mut builder = Request::builder()
            .method(template.method().clone())
            .uri(uri);
        if let Some(headers) = builder.headers_mut() {
            headers.extend(
                template
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            headers.insert(USER_AGENT, self.inner.user_agent.clone());
            headers
                .entry(ACCEPT)
                .or_insert(HeaderValue::from_static("application/json"));
            if !template.body().is_empty() {
                headers
                    .entry(CONTENT_TYPE)
                    .or_insert(HeaderValue::from_static("application/json"));
            }
            if let Some(auth) = self.inner.auth.header().await? {
                headers.insert(AUTHORIZATION, auth);
            }
        }
        builder
            .body(Full::new(template.body().clone()))
            .map_err(|e| Error::InvalidRequest(e.to_string()))
    }
}

async fn read_body(body: Incoming, url: &str) -> Result<Bytes, Error> {
    body.collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|source| Error::Transport {
            url: url.to_string(),
            source: Box::new(source),
        })
}

async fn read_chunks(
    mut body: Incoming,
    url: &str,
    mut each: impl FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|source| Error::Transport {
            url: url.to_string(),
            source: Box::new(source),
        })?;
        if let Some(data) = frame.data_ref() {
            each(data)?;
        }
    }
    Ok(())
}

async fn error_from_response(response: Response<Incoming>, url: &str) -> Error {
    let code = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = match read_body(response.into_body(), url).await {
        Ok(body) => body,
        Err(error) => return error,
    };
    if code == StatusCode::UNAUTHORIZED.as_u16() {
        tracing::debug!(url, "401 Unauthorized");
    }
    Error::Api(Box::new(ApiError::from_response(code, &body, retry_after)))
}
