//! Exec credential plugins: a program that prints a token (`aws eks get-token`, `gke-gcloud-auth-plugin`,
//! `kubelogin`, …).
//!
//! The protocol (`client.authentication.k8s.io/v1` and `v1beta1`): we run the command with its args
//! and env, plus `KUBERNETES_EXEC_INFO` holding an `ExecCredential` that says we are not interactive.
//! It prints an `ExecCredential` whose `status.token` we send as a bearer token, or whose
//! `status.clientCertificateData` and `status.clientKeyData` we present as the TLS client
//! certificate of new connections (the client's TLS setup reads [`ExecCredentials::identity`] at
//! each handshake). Either is cached until `status.expirationTimestamp` (for ever if there is none)
//! and fetched again after a 401. One plugin run at a time: concurrent requests wait for the same
//! run instead of starting their own.
//!
//! A rotated certificate is used by connections opened after the rotation; client-go also closes
//! the open ones, we let them run until the pool retires them (at most `idle_conn_timeout` idle).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;

use super::kubeconfig::ExecConfig;
use super::{ConfigError, Identity, redacted};

/// A plugin gets this long to answer.
const PLUGIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Refresh a token this long before it expires, so it does not expire in flight.
const EXPIRY_MARGIN: Duration = Duration::from_secs(10);

/// The credentials of one exec plugin, with its cached token. Its `Debug` shows the plugin's
/// command and the state of its cache, never the token, the key, nor the plugin's arguments and
/// environment values (which may hold secrets; see [`ExecConfig`]).
pub struct ExecCredentials {
    config: ExecConfig,
    api_version: String,
    /// Invariant: `Some` only for a token that had not expired when it was last checked.
    cache: tokio::sync::Mutex<Option<CachedToken>>,
    /// Set by [`invalidate`](Self::invalidate); checked (and cleared) under `cache`'s lock.
    stale: std::sync::atomic::AtomicBool,
    /// The client certificate of the plugin's last answer, if it gave one: read by TLS handshakes
    /// (which cannot wait for a plugin), written after each run.
    identity: parking_lot::Mutex<Option<Arc<Identity>>>,
}

/// What one plugin run gave: a token, or a client certificate and key (or both).
struct CachedToken {
    token: Option<String>,
    identity: Option<Arc<Identity>>,
    expires: Option<Time>,
}

impl std::fmt::Debug for ExecCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("ExecCredentials");
        debug
            .field("config", &self.config)
            .field("api_version", &self.api_version);
        match self.cache.try_lock() {
            Ok(cache) => debug.field("cache", &*cache),
            // A plugin run holds it; waiting here could block a log line for a minute.
            Err(_) => debug.field("cache", &format_args!("<being refreshed>")),
        };
        debug
            .field("stale", &self.stale)
            .field("identity", &*self.identity.lock())
            .finish()
    }
}

impl std::fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedToken")
            .field("token", &redacted(&self.token))
            .field("identity", &self.identity)
            .field("expires", &self.expires)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential {
    api_version: Option<String>,
    kind: Option<String>,
    status: Option<ExecCredentialStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredentialStatus {
    token: Option<String>,
    expiration_timestamp: Option<Time>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

const SUPPORTED: [&str; 2] = [
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
];

impl ExecCredentials {
    pub(super) fn new(config: ExecConfig, user: &str) -> Result<ExecCredentials, ConfigError> {
        let api_version = config
            .api_version
            .clone()
            .unwrap_or_else(|| SUPPORTED[0].to_string());
        let fail = |reason: String| ConfigError::Exec {
            command: config.command.clone(),
            reason,
        };
        if !SUPPORTED.contains(&api_version.as_str()) {
            return Err(fail(format!(
                "apiVersion {api_version} is not supported (use {} or {})",
                SUPPORTED[0], SUPPORTED[1]
            )));
        }
        if config.interactive_mode.as_deref() == Some("Always") {
            return Err(fail(format!(
                "user \"{user}\" asks for interactiveMode Always, and ferrokube never has a terminal to offer"
            )));
        }
        if config.provide_cluster_info {
            tracing::debug!(command = %config.command, "exec plugin: provideClusterInfo is not sent");
        }
        Ok(ExecCredentials {
            config,
            api_version,
            cache: tokio::sync::Mutex::new(None),
            stale: std::sync::atomic::AtomicBool::new(false),
            identity: parking_lot::Mutex::new(None),
        })
    }

    /// The cached token, or a fresh one from the plugin; `None` when the plugin authenticates
    /// with a client certificate instead (then [`identity`](Self::identity) has it).
    pub async fn token(&self) -> Result<Option<String>, ConfigError> {
        let mut cache = self.cache.lock().await;
        if self.stale.swap(false, std::sync::atomic::Ordering::AcqRel) {
            *cache = None;
        }
        if let Some(cached) = cache.as_ref() {
            if !expired(cached.expires.as_ref()) {
                return Ok(cached.token.clone());
            }
        }
        let fresh = self.run().await?;
        let token = fresh.token.clone();
        *self.identity.lock() = fresh.identity.clone();
        *cache = Some(fresh);
        Ok(token)
    }

    /// The client certificate and key of the plugin's last answer, if it gave them.
    pub fn identity(&self) -> Option<Arc<Identity>> {
        self.identity.lock().clone()
    }

    /// Forgets the cached token (after a 401).
    pub fn invalidate(&self) {
        self.stale.store(true, std::sync::atomic::Ordering::Release);
    }

    async fn run(&self) -> Result<CachedToken, ConfigError> {
        let command = &self.config.command;
        let fail = |reason: String| ConfigError::Exec {
            command: command.clone(),
            reason,
        };
        let info = serde_json::json!({
            "apiVersion": self.api_version,
            "kind": "ExecCredential",
            "spec": { "interactive": false },
        });
        let mut process = tokio::process::Command::new(command);
        process
            .args(&self.config.args)
            .envs(self.config.env.iter().map(|e| (&e.name, &e.value)))
            .env("KUBERNETES_EXEC_INFO", info.to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(PLUGIN_TIMEOUT, process.output())
            .await
            .map_err(|_| fail(format!("no answer within {PLUGIN_TIMEOUT:?}")))?
            .map_err(|e| fail(format!("could not start: {e}")))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(fail(format!(
                "exited with {}: {}",
                output.status,
                stderr.trim().chars().take(1000).collect::<String>()
            )));
        }
        let credential: ExecCredential = serde_json::from_slice(&output.stdout).map_err(|e| {
            fail(format!(
                "printed something that is not an ExecCredential: {e}"
            ))
        })?;
        if credential.kind.as_deref() != Some("ExecCredential") {
            return Err(fail(
                "printed an object whose kind is not ExecCredential".into(),
            ));
        }
        if credential.api_version.as_deref() != Some(self.api_version.as_str()) {
            return Err(fail(format!(
                "answered with apiVersion {:?}, expected {}",
                credential.api_version, self.api_version
            )));
        }
        let status = credential
            .status
            .ok_or_else(|| fail("printed no status".into()))?;
        let token = status.token.filter(|t| !t.is_empty());
        let identity = match (status.client_certificate_data, status.client_key_data) {
            (Some(cert), Some(key)) if !cert.is_empty() && !key.is_empty() => {
                let identity = Identity {
                    cert_pem: cert.into_bytes(),
                    key_pem: key.into_bytes(),
                };
                // Checked now, so that a bad answer is this run's error, not a failed handshake.
                super::parse_certs(&identity.cert_pem, "the plugin's clientCertificateData")?;
                super::parse_key(&identity.key_pem, "the plugin's clientKeyData")?;
                Some(Arc::new(identity))
            }
            (Some(_), _) | (_, Some(_)) => {
                return Err(fail(
                    "returned clientCertificateData or clientKeyData without the other".into(),
                ));
            }
            (None, None) => None,
        };
        if token.is_none() && identity.is_none() {
            return Err(fail(
                "returned neither a token nor a client certificate".into(),
            ));
        }
        Ok(CachedToken {
            token,
            identity,
            expires: status.expiration_timestamp,
        })
    }
}

fn expired(expires: Option<&Time>) -> bool {
    let Some(Time(at)) = expires else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let soon = i64::try_from(now + EXPIRY_MARGIN.as_secs()).unwrap_or(i64::MAX);
    at.as_second() <= soon
}
