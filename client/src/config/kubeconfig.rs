//! The kubeconfig file format, and how several files merge into one view.
//!
//! `$KUBECONFIG` may list several files (`a:b:c`). kubectl merges them like this, and so do we:
//! - named clusters, users and contexts: the first file that defines a name wins;
//! - `current-context`: the first file that sets it wins;
//! - relative paths (`certificate-authority`, `client-key`, `tokenFile`, an exec `command` with a
//!   slash) are relative to the folder of the file that holds them, so they are resolved while each
//!   file is read, before merging.
//!
//! `{:?}` of any of these types prints no secret: a user's token, password, client key and
//! auth-provider settings, an exec plugin's arguments and environment values, and the password of
//! a URL print as `<redacted>` (client-go's `AuthInfo.GoString` and `ExecConfig.GoString` hide
//! the same).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ConfigError, Redacted, redact_url_password, redacted};

/// One kubeconfig file, or several merged.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    #[serde(default, deserialize_with = "null_as_default")]
    pub clusters: Vec<NamedCluster>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub users: Vec<NamedAuthInfo>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub contexts: Vec<NamedContext>,
    #[serde(default)]
    pub current_context: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedCluster {
    pub name: String,
    pub cluster: Cluster,
}

#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    pub server: Option<String>,
    pub certificate_authority: Option<PathBuf>,
    pub certificate_authority_data: Option<String>,
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
    pub tls_server_name: Option<String>,
    pub proxy_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedAuthInfo {
    pub name: String,
    #[serde(default)]
    pub user: AuthInfo,
}

/// A kubeconfig `user`.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AuthInfo {
    pub client_certificate: Option<PathBuf>,
    pub client_certificate_data: Option<String>,
    pub client_key: Option<PathBuf>,
    pub client_key_data: Option<String>,
    pub token: Option<String>,
    #[serde(rename = "tokenFile")]
    pub token_file: Option<PathBuf>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub exec: Option<ExecConfig>,
    /// Only detected, to say clearly that it is not supported.
    pub auth_provider: Option<serde_yaml_ng::Value>,
}

/// An `exec` credential plugin (`client.authentication.k8s.io`). Its `Debug` shows the command
/// and how many arguments, and the names of the environment variables, but neither the arguments
/// nor the values: they may carry secrets (`--token=...`, `AWS_SECRET_ACCESS_KEY`), which is why
/// client-go hides them too.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecConfig {
    pub api_version: Option<String>,
    pub command: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub args: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub env: Vec<ExecEnvVar>,
    /// `Never`, `IfAvailable` or `Always`. We never have a terminal to offer, so `Always` is refused.
    pub interactive_mode: Option<String>,
    #[serde(default)]
    pub provide_cluster_info: bool,
}

#[derive(Clone, Deserialize)]
pub struct ExecEnvVar {
    pub name: String,
    pub value: String,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Cluster {
            server,
            certificate_authority,
            certificate_authority_data,
            insecure_skip_tls_verify,
            tls_server_name,
            proxy_url,
        } = self;
        f.debug_struct("Cluster")
            .field("server", &server.as_deref().map(redact_url_password))
            .field("certificate_authority", certificate_authority)
            .field("certificate_authority_data", certificate_authority_data)
            .field("insecure_skip_tls_verify", insecure_skip_tls_verify)
            .field("tls_server_name", tls_server_name)
            .field("proxy_url", &proxy_url.as_deref().map(redact_url_password))
            .finish()
    }
}

impl fmt::Debug for AuthInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let AuthInfo {
            client_certificate,
            client_certificate_data,
            client_key,
            client_key_data,
            token,
            token_file,
            username,
            password,
            exec,
            auth_provider,
        } = self;
        f.debug_struct("AuthInfo")
            .field("client_certificate", client_certificate)
            // A certificate is public; its key is not.
            .field("client_certificate_data", client_certificate_data)
            .field("client_key", client_key)
            .field("client_key_data", &redacted(client_key_data))
            .field("token", &redacted(token))
            .field("token_file", token_file)
            .field("username", username)
            .field("password", &redacted(password))
            .field("exec", exec)
            .field(
                "auth_provider",
                &auth_provider.as_ref().map(AuthProviderDebug),
            )
            .finish()
    }
}

/// An `auth-provider` for `Debug`: its name, and `<redacted>` for its `config`, which holds
/// tokens and client secrets (`id-token`, `refresh-token`, `client-secret`).
struct AuthProviderDebug<'a>(&'a serde_yaml_ng::Value);

impl fmt::Debug for AuthProviderDebug<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthProvider")
            .field("name", &self.0.get("name").and_then(|name| name.as_str()))
            .field("config", &Redacted)
            .finish()
    }
}

impl fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ExecConfig {
            api_version,
            command,
            args,
            env,
            interactive_mode,
            provide_cluster_info,
        } = self;
        f.debug_struct("ExecConfig")
            .field("api_version", api_version)
            .field("command", command)
            .field("args", &vec![Redacted; args.len()])
            .field("env", env)
            .field("interactive_mode", interactive_mode)
            .field("provide_cluster_info", provide_cluster_info)
            .finish()
    }
}

impl fmt::Debug for ExecEnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecEnvVar")
            .field("name", &self.name)
            .field("value", &Redacted)
            .finish()
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedContext {
    pub name: String,
    pub context: Context,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Context {
    pub cluster: String,
    #[serde(default)]
    pub user: String,
    pub namespace: Option<String>,
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl Kubeconfig {
    /// Reads one file, resolving its relative paths against its folder.
    pub fn read(path: &Path) -> Result<Kubeconfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Kubeconfig::parse(&text).map_err(|source| ConfigError::Yaml {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(folder) = path.parent() {
            config.resolve_paths(folder);
        }
        Ok(config)
    }

    /// Parses kubeconfig YAML (or JSON, which is YAML too). Relative paths stay as written.
    pub fn parse(text: &str) -> Result<Kubeconfig, serde_yaml_ng::Error> {
        if text.trim().is_empty() {
            return Ok(Kubeconfig::default());
        }
        serde_yaml_ng::from_str(text)
    }

    /// Reads every file of a `$KUBECONFIG`-style list and merges them (files that do not exist are
    /// skipped, as kubectl skips them; an unreadable or malformed one is an error).
    pub fn read_merged(paths: &[PathBuf]) -> Result<Kubeconfig, ConfigError> {
        let mut merged = Kubeconfig::default();
        for path in paths {
            if !path.exists() {
                tracing::debug!(path = %path.display(), "kubeconfig: listed file does not exist, skipped");
                continue;
            }
            merged.merge(Kubeconfig::read(path)?);
        }
        Ok(merged)
    }

    /// Merges `later` into `self`: what `self` already defines wins.
    pub fn merge(&mut self, later: Kubeconfig) {
        for cluster in later.clusters {
            if !self.clusters.iter().any(|c| c.name == cluster.name) {
                self.clusters.push(cluster);
            }
        }
        for user in later.users {
            if !self.users.iter().any(|u| u.name == user.name) {
                self.users.push(user);
            }
        }
        for context in later.contexts {
            if !self.contexts.iter().any(|c| c.name == context.name) {
                self.contexts.push(context);
            }
        }
        if self
            .current_context
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
            self.current_context = later.current_context;
        }
    }

    fn resolve_paths(&mut self, folder: &Path) {
        let resolve = |path: &mut Option<PathBuf>| {
            if let Some(p) = path {
                if p.is_relative() && !p.as_os_str().is_empty() {
                    *p = folder.join(&*p);
                }
            }
        };
        for cluster in &mut self.clusters {
            resolve(&mut cluster.cluster.certificate_authority);
        }
        for user in &mut self.users {
            let user = &mut user.user;
            resolve(&mut user.client_certificate);
            resolve(&mut user.client_key);
            resolve(&mut user.token_file);
            if let Some(exec) = &mut user.exec {
                // A bare command name is looked up on PATH; one with a slash is a relative path.
                if exec.command.contains('/') && Path::new(&exec.command).is_relative() {
                    exec.command = folder.join(&exec.command).to_string_lossy().into_owned();
                }
            }
        }
    }

    /// The context named `name`, or the current one.
    pub fn context(&self, name: Option<&str>) -> Result<(&str, &Context), ConfigError> {
        let wanted = match name {
            Some(name) => name,
            None => self
                .current_context
                .as_deref()
                .filter(|c| !c.is_empty())
                .ok_or(ConfigError::NoCurrentContext)?,
        };
        self.contexts
            .iter()
            .find(|c| c.name == wanted)
            .map(|c| (c.name.as_str(), &c.context))
            .ok_or_else(|| ConfigError::MissingEntry {
                kind: "context",
                name: wanted.to_string(),
            })
    }

    pub fn cluster(&self, name: &str) -> Result<&Cluster, ConfigError> {
        self.clusters
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.cluster)
            .ok_or_else(|| ConfigError::MissingEntry {
                kind: "cluster",
                name: name.to_string(),
            })
    }

    /// The user named `name`; an empty name (a context without a user) is an anonymous user.
    pub fn user(&self, name: &str) -> Result<AuthInfo, ConfigError> {
        if name.is_empty() {
            return Ok(AuthInfo::default());
        }
        self.users
            .iter()
            .find(|u| u.name == name)
            .map(|u| u.user.clone())
            .ok_or_else(|| ConfigError::MissingEntry {
                kind: "user",
                name: name.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &str = r#"
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: certs/ca.crt
contexts:
- name: dev
  context: {cluster: dev, user: alice, namespace: team-a}
users:
- name: alice
  user:
    client-certificate: certs/alice.crt
    client-key: /abs/alice.key
"#;

    const SECOND: &str = r#"
current-context: prod
clusters:
- name: dev
  cluster: {server: https://shadowed.example:6443}
- name: prod
  cluster: {server: https://prod.example:6443}
contexts:
- name: prod
  context: {cluster: prod, user: bob}
users:
- name: bob
  user: {token: abc}
"#;

    #[test]
    fn first_file_wins_and_paths_resolve_against_their_file() {
        let mut first = Kubeconfig::parse(FIRST).expect("first parses");
        first.resolve_paths(Path::new("/home/me/.kube"));
        let second = Kubeconfig::parse(SECOND).expect("second parses");
        first.merge(second);
        let (name, context) = first.context(None).expect("current context");
        assert_eq!(name, "dev");
        assert_eq!(context.namespace.as_deref(), Some("team-a"));
        let dev = first.cluster("dev").expect("dev cluster");
        assert_eq!(dev.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            dev.certificate_authority.as_deref(),
            Some(Path::new("/home/me/.kube/certs/ca.crt"))
        );
        let alice = first.user("alice").expect("alice");
        assert_eq!(
            alice.client_key.as_deref(),
            Some(Path::new("/abs/alice.key"))
        );
        assert_eq!(
            first.user("bob").expect("bob").token.as_deref(),
            Some("abc")
        );
        assert!(first.cluster("prod").is_ok());
    }

    #[test]
    fn missing_entries_are_named() {
        let config = Kubeconfig::parse(SECOND).expect("parses");
        let error = config.context(Some("nope")).expect_err("no such context");
        assert_eq!(
            error.to_string(),
            "kubeconfig has no context named \"nope\""
        );
        let error = config.cluster("nope").expect_err("no such cluster");
        assert!(error.to_string().contains("cluster named \"nope\""));
    }

    #[test]
    fn empty_and_null_sections_parse() {
        let config = Kubeconfig::parse("clusters: null\nusers:\ncontexts: []\n").expect("parses");
        assert!(config.clusters.is_empty());
        assert!(matches!(
            config.context(None),
            Err(ConfigError::NoCurrentContext)
        ));
        assert!(
            Kubeconfig::parse("")
                .expect("empty file")
                .clusters
                .is_empty()
        );
    }

    #[test]
    fn malformed_yaml_is_an_error_not_a_panic() {
        assert!(Kubeconfig::parse("clusters: [ {name: x, cluster: ").is_err());
        assert!(Kubeconfig::parse("clusters: 7").is_err());
    }
}
