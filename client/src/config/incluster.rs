//! In-cluster configuration: what a pod needs to reach its own API server.
//!
//! The kubelet mounts the pod's service account at [`SERVICE_ACCOUNT_DIR`] (`token`, `ca.crt`,
//! `namespace`) and the environment names the API server (`KUBERNETES_SERVICE_HOST`,
//! `KUBERNETES_SERVICE_PORT`). The token is rotated by the kubelet, so it is kept as a
//! [`TokenFile`](super::TokenFile) and re-read when it changes.

use std::path::Path;
use std::sync::Arc;

use super::{Auth, Config, ConfigError, TokenFile, parse_certs};

pub(super) const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub(super) fn config(dir: &Path) -> Result<Config, ConfigError> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .map_err(|_| ConfigError::InCluster("KUBERNETES_SERVICE_HOST is not set".into()))?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT")
        .map_err(|_| ConfigError::InCluster("KUBERNETES_SERVICE_PORT is not set".into()))?;
    // An IPv6 address needs brackets in a URL.
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let url = format!("https://{host}:{port}");
    let cluster_url = super::parse_server(&url, "KUBERNETES_SERVICE_HOST/PORT")?;
    let token_path = dir.join("token");
    if !token_path.exists() {
        return Err(ConfigError::InCluster(format!(
            "{} does not exist",
            token_path.display()
        )));
    }
    let mut config = Config::new(cluster_url);
    config.auth = Auth::TokenFile(Arc::new(TokenFile::open(token_path)?));
    let ca_path = dir.join("ca.crt");
    let ca = std::fs::read(&ca_path).map_err(|source| ConfigError::Read {
        path: ca_path.clone(),
        source,
    })?;
    config.root_certs = Some(parse_certs(&ca, &ca_path.display().to_string())?);
    if let Ok(namespace) = std::fs::read_to_string(dir.join("namespace")) {
        let namespace = namespace.trim();
        if !namespace.is_empty() {
            config.default_namespace = namespace.to_string();
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mounted_service_account() {
        let dir = std::env::temp_dir().join(format!("ferrokube-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("token"), "sa-token\n").expect("token");
        std::fs::copy(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/src/config/testdata/client.crt"
            ),
            dir.join("ca.crt"),
        )
        .expect("ca");
        std::fs::write(dir.join("namespace"), "kube-system").expect("namespace");
        // SAFETY of the test: no other test reads these two variables.
        unsafe {
            std::env::set_var("KUBERNETES_SERVICE_HOST", "fd00::1");
            std::env::set_var("KUBERNETES_SERVICE_PORT", "443");
        }
        let config = config(&dir).expect("in-cluster config");
        assert_eq!(config.cluster_url.to_string(), "https://[fd00::1]:443/");
        assert_eq!(config.default_namespace, "kube-system");
        assert_eq!(config.root_certs.map(|c| c.len()), Some(1));
        let Auth::TokenFile(token) = &config.auth else {
            panic!("expected a token file, got {:?}", config.auth);
        };
        assert_eq!(token.token().expect("token"), "sa-token");
        std::fs::remove_file(dir.join("token")).expect("remove token");
        let missing = super::config(&dir).expect_err("no token");
        assert!(missing.to_string().contains("token does not exist"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
