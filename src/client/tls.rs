//! The TLS side of a connection: which server certificates we trust and which certificate we show.
//!
//! rustls with the `ring` provider. ALPN offers HTTP/1.1, or HTTP/2 and HTTP/1.1 with
//! [`Config::http2`] (the connector sets it), and the server picks.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::config::{Config, ConfigError, parse_certs, parse_key};

/// The rustls client configuration for `config`.
pub(super) fn client_config(config: &Config) -> Result<ClientConfig, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls(e.to_string()))?;
    let builder = if config.accept_invalid_certs {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(provider)))
    } else {
        builder.with_root_certificates(root_store(config)?)
    };
    // ALPN (h2, http/1.1) is set by the connector builder (`enable_all_versions`), which refuses a
    // config that already has protocols.
    let tls = match &config.identity {
        Some(identity) => {
            let certs = parse_certs(&identity.cert_pem, "client certificate")?
                .into_iter()
                .map(CertificateDer::from)
                .collect();
            let key = parse_key(&identity.key_pem, "client key")?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| ConfigError::Tls(format!("client certificate and key: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(tls)
}

fn root_store(config: &Config) -> Result<RootCertStore, ConfigError> {
    let mut roots = RootCertStore::empty();
    match &config.root_certs {
        Some(certs) => {
            for der in certs {
                roots
                    .add(CertificateDer::from(der.clone()))
                    .map_err(|e| ConfigError::Tls(format!("certificate authority: {e}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::debug!(%error, "could not load a system root certificate");
            }
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(ConfigError::Tls(
                    "no certificate-authority is configured and the system has no root certificates"
                        .into(),
                ));
            }
        }
    }
    Ok(roots)
}

/// `insecure-skip-tls-verify: true`: any server certificate is accepted, but handshake signatures are
/// still checked (so the connection is at least encrypted to whoever holds the key).
#[derive(Debug)]
struct AcceptAnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
