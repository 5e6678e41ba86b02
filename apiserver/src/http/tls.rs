//! A throwaway certificate authority and serving certificate, and the kubeconfig that trusts them.
//!
//! Each server start makes a fresh CA and a certificate for `localhost` and `127.0.0.1` (and the
//! names it was told to answer to) signed by it, so kubectl and ferrokube's client verify the
//! server exactly as they verify a real cluster (through `certificate-authority-data`), with
//! nothing to install.
//!
//! The kubeconfig can hold the server's bearer token, so [`write_private_file`] writes it readable
//! by its owner only; the CA's and the serving certificate's private keys never leave memory.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::ServerError;

/// The serving certificate chain and key, plus the CA's PEM for kubeconfigs. (No `Debug`: it holds
/// the private key.)
pub struct Certificates {
    pub ca_pem: String,
    pub server: rustls::ServerConfig,
}

/// Makes a CA and a serving certificate for loopback and `names` (DNS names or IP addresses), and a
/// rustls config that offers h2 and http/1.1.
pub fn generate(names: &[String]) -> Result<Certificates, ServerError> {
    let tls = |e: rcgen::Error| ServerError::Tls(e.to_string());
    let ca_key = KeyPair::generate().map_err(tls)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "ferrokube-apiserver-ca");
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().map_err(tls)?;
    let mut subject_names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    for name in names {
        if !subject_names.contains(name) {
            subject_names.push(name.clone());
        }
    }
    let mut params = CertificateParams::new(subject_names).map_err(tls)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "ferrokube-apiserver");
    let cert = params.signed_by(&server_key, &issuer).map_err(tls)?;
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone(), ca_cert.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| ServerError::Tls(e.to_string()))?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Certificates {
        ca_pem: ca_cert.pem(),
        server,
    })
}

/// A kubeconfig with one cluster, user and context, all named `ferrokube`.
pub fn kubeconfig(url: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    let ca = ca_pem
        .map(|pem| {
            format!(
                "    certificate-authority-data: {}\n",
                STANDARD.encode(pem.as_bytes())
            )
        })
        .unwrap_or_default();
    let user = match token {
        Some(token) => format!("    token: {token}\n"),
        None => "    username: ferrokube\n".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: ferrokube\n  cluster:\n    server: {url}\n{ca}users:\n- name: ferrokube\n  user:\n{user}contexts:\n- name: ferrokube\n  context:\n    cluster: ferrokube\n    user: ferrokube\n    namespace: default\ncurrent-context: ferrokube\n"
    )
}

/// Writes `contents` to `path`, readable and writable by the owner only (mode 0600 on Unix; on
/// other systems the file gets the directory's default permissions).
///
/// The file is made under a fresh temporary name in the same directory, with `O_CREAT|O_EXCL` and
/// mode 0600 from the start (never a `chmod` after writing, which would leave a moment when others
/// could open it), then renamed over `path`: a file already there, whatever its mode, is replaced,
/// and a symbolic link there is replaced rather than followed. On failure the temporary file is
/// removed.
pub fn write_private_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let Some(name) = path.file_name() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        ));
    };
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(name);
    temporary.push(format!(
        ".{}.{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    let temporary = path.with_file_name(temporary);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(contents)?;
        drop(file);
        std::fs::rename(&temporary, path)
    });
    if written.is_err() {
        // Best effort: the write already failed, and that is the error worth reporting.
        let _ = std::fs::remove_file(&temporary);
    }
    written
}
