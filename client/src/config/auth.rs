//! Header credentials: what goes into `Authorization` on every request.
//!
//! Some credentials are fixed (a token written in the kubeconfig, a username and password); others
//! change while the process runs and are kept as a *source* that is read again when needed:
//! - a token file (`tokenFile`, and the in-cluster service-account token, which the kubelet rotates)
//!   is re-read when its modification time changes, checked at most once a second;
//! - an exec plugin's token is cached until its `expirationTimestamp`, and the plugin is run again
//!   when it has expired or when the server answers 401 (see [`Auth::invalidate`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use http::HeaderValue;
use parking_lot::Mutex;

use super::exec::ExecCredentials;
use super::kubeconfig::AuthInfo;
use super::{ConfigError, Redacted};

/// How requests authenticate (besides a client certificate, which is part of TLS). Its `Debug`
/// shows which kind, and the user name of basic authentication; the secrets print as
/// `<redacted>`.
#[derive(Clone, Default)]
pub enum Auth {
    /// No `Authorization` header.
    #[default]
    None,
    /// HTTP basic authentication.
    Basic { username: String, password: String },
    /// A fixed bearer token.
    Token(String),
    /// A bearer token read from a file, re-read when the file changes.
    TokenFile(Arc<TokenFile>),
    /// A bearer token from an exec credential plugin.
    Exec(Arc<ExecCredentials>),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Basic {
                username,
                password: _,
            } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &Redacted)
                .finish(),
            Auth::Token(_) => f.debug_tuple("Token").field(&Redacted).finish(),
            Auth::TokenFile(file) => f.debug_tuple("TokenFile").field(file).finish(),
            Auth::Exec(exec) => f.debug_tuple("Exec").field(exec).finish(),
        }
    }
}

impl Auth {
    /// The credentials of a kubeconfig user. `token` wins over `tokenFile`, as in client-go.
    pub(super) fn from_user(user_name: &str, user: &AuthInfo) -> Result<Auth, ConfigError> {
        if let Some(token) = user.token.as_deref().filter(|t| !t.is_empty()) {
            return Ok(Auth::Token(token.to_string()));
        }
        if let Some(path) = user
            .token_file
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty())
        {
            return Ok(Auth::TokenFile(Arc::new(TokenFile::open(path.clone())?)));
        }
        if let Some(username) = user.username.as_deref().filter(|u| !u.is_empty()) {
            return Ok(Auth::Basic {
                username: username.to_string(),
                password: user.password.clone().unwrap_or_default(),
            });
        }
        if let Some(exec) = &user.exec {
            return Ok(Auth::Exec(Arc::new(ExecCredentials::new(
                exec.clone(),
                user_name,
            )?)));
        }
        Ok(Auth::None)
    }

    /// The `Authorization` header to send now, if any.
    pub async fn header(&self) -> Result<Option<HeaderValue>, ConfigError> {
        let value = match self {
            Auth::None => return Ok(None),
            Auth::Basic { username, password } => {
                let encoded = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{password}"));
                format!("Basic {encoded}")
            }
            Auth::Token(token) => format!("Bearer {token}"),
            Auth::TokenFile(file) => format!("Bearer {}", file.token()?),
            Auth::Exec(exec) => match exec.token().await? {
                Some(token) => format!("Bearer {token}"),
                // The plugin gave a client certificate: TLS carries it (client/tls.rs).
                None => return Ok(None),
            },
        };
        let mut header = HeaderValue::from_str(&value).map_err(|_| ConfigError::BadValue {
            what: "credentials".into(),
            reason: "the token contains characters not allowed in an HTTP header".into(),
        })?;
        header.set_sensitive(true);
        Ok(Some(header))
    }

    /// The server said 401: forget cached credentials so that the next request fetches new ones.
    pub fn invalidate(&self) {
        match self {
            Auth::TokenFile(file) => file.invalidate(),
            Auth::Exec(exec) => exec.invalidate(),
            Auth::None | Auth::Basic { .. } | Auth::Token(_) => {}
        }
    }
}

/// A token kept in a file that may be replaced at any time. Its `Debug` shows the path, not the
/// token.
pub struct TokenFile {
    path: PathBuf,
    cache: Mutex<CachedToken>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("path", &self.path)
            .field("token", &Redacted)
            .finish()
    }
}

struct CachedToken {
    token: String,
    modified: Option<SystemTime>,
    checked: Instant,
}

/// How often the file's modification time is looked at.
const RECHECK: Duration = Duration::from_secs(1);

impl TokenFile {
    /// Reads the file once now, so that a missing or empty file is reported at configuration time.
    pub fn open(path: PathBuf) -> Result<TokenFile, ConfigError> {
        let cached = read_token(&path)?;
        Ok(TokenFile {
            path,
            cache: Mutex::new(cached),
        })
    }

    /// The current token: re-read if the file changed since it was last read.
    pub fn token(&self) -> Result<String, ConfigError> {
        let mut cache = self.cache.lock();
        if cache.checked.elapsed() >= RECHECK {
            let modified = std::fs::metadata(&self.path)
                .and_then(|m| m.modified())
                .ok();
            cache.checked = Instant::now();
            if modified != cache.modified || modified.is_none() {
                match read_token(&self.path) {
                    Ok(fresh) => *cache = fresh,
                    // Mid-rotation the file may be briefly absent: keep using the last token.
                    Err(error) => {
                        tracing::warn!(%error, "token file unreadable; keeping the last token")
                    }
                }
            }
        }
        Ok(cache.token.clone())
    }

    fn invalidate(&self) {
        let mut cache = self.cache.lock();
        cache.checked = Instant::now() - RECHECK;
        cache.modified = None;
    }
}

fn read_token(path: &PathBuf) -> Result<CachedToken, ConfigError> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(ConfigError::BadValue {
            what: format!("token file {}", path.display()),
            reason: "the file is empty".into(),
        });
    }
    Ok(CachedToken {
        token,
        modified,
        checked: Instant::now(),
    })
}
