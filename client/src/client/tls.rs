//! The TLS side of a connection: which server certificates we trust and which certificate we show.
//!
//! rustls with the `ring` provider. ALPN offers HTTP/1.1, or HTTP/2 and HTTP/1.1 with
//! [`Config::http2`] (the connector sets it), and the server picks.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::config::{Auth, Config, ConfigError, ExecCredentials, Identity, parse_certs, parse_key};

/// The client certificate chain and its key, checked to belong together.
///
/// Not rustls' `with_client_auth_cert`: its check that key and certificate match parses the
/// certificate with webpki, which accepts only X.509 v3, while kubectl and kube-apiserver (Go's
/// `crypto/x509`) accept v1 too, and `openssl x509 -req` without `-extfile` makes v1. The server
/// is the one that verifies a client certificate; what we must check is only that the key is the
/// certificate's, which [`subject_public_key_info`] does on the raw DER for any version.
fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, ConfigError> {
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| ConfigError::Tls(format!("client key: {e}")))?;
    let leaf = certs
        .first()
        .ok_or_else(|| ConfigError::Tls("client certificate: no certificate in the PEM".into()))?;
    let cert_spki = subject_public_key_info(leaf).ok_or_else(|| {
        ConfigError::Tls("client certificate: not a DER X.509 certificate".into())
    })?;
    if let Some(key_spki) = signing_key.public_key()
        && key_spki.as_ref() != cert_spki
    {
        return Err(ConfigError::Tls(
            "client certificate and key: the key is not the certificate's (their public keys differ)"
                .into(),
        ));
    }
    Ok(CertifiedKey::new(certs, signing_key))
}

/// One DER element read off the front of some bytes.
struct DerElement<'a> {
    tag: u8,
    /// The element, header included.
    whole: &'a [u8],
    contents: &'a [u8],
    /// What follows the element.
    rest: &'a [u8],
}

/// The first DER element of `input` (definite lengths of up to 4 bytes, as certificates use).
fn der_element(input: &[u8]) -> Option<DerElement<'_>> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |n, b| (n << 8) | usize::from(*b));
        (length, &rest[count..])
    };
    if rest.len() < length {
        return None;
    }
    let header = input.len() - rest.len();
    let whole = &input[..header + length];
    Some(DerElement {
        tag,
        whole,
        contents: &rest[..length],
        rest: &rest[length..],
    })
}

/// The `subjectPublicKeyInfo` element (whole, header included) of a DER certificate, of any
/// version: `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL (absent in
/// v1), serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo, ... }, ... }`.
fn subject_public_key_info(certificate: &[u8]) -> Option<&[u8]> {
    const SEQUENCE: u8 = 0x30;
    const VERSION: u8 = 0xa0; // [0] EXPLICIT
    let certificate = der_element(certificate)?;
    let tbs = der_element(certificate.contents)?;
    if certificate.tag != SEQUENCE || tbs.tag != SEQUENCE {
        return None;
    }
    let mut fields = tbs.contents;
    let first = der_element(fields)?;
    if first.tag == VERSION {
        fields = first.rest;
    }
    // serialNumber, signature, issuer, validity, subject, then subjectPublicKeyInfo.
    for _ in 0..5 {
        fields = der_element(fields)?.rest;
    }
    let spki = der_element(fields)?;
    (spki.tag == SEQUENCE).then_some(spki.whole)
}

/// The rustls client configuration for `config`.
///
/// Refuses `insecure-skip-tls-verify` together with a certificate authority, at the same point as
/// client-go: `transport.TLSConfigFor`, which every client of a `rest.Config` goes through.
pub(super) fn client_config(config: &Config) -> Result<ClientConfig, ConfigError> {
    let has_ca = config
        .root_certs
        .as_ref()
        .is_some_and(|certs| !certs.is_empty());
    if config.accept_invalid_certs && has_ca {
        return Err(ConfigError::InsecureWithCertificateAuthority);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls(e.to_string()))?;
    let builder = if config.accept_invalid_certs {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(provider.clone())))
    } else {
        builder.with_root_certificates(root_store(config)?)
    };
    // ALPN (h2, http/1.1) is set by the connector builder (`enable_all_versions`), which refuses a
    // config that already has protocols.
    let tls = match (&config.identity, &config.auth) {
        (Some(identity), _) => {
            let certified = identity_key(identity, &provider)?;
            builder.with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified)))
        }
        (None, Auth::Exec(exec)) => builder.with_client_cert_resolver(Arc::new(ExecClientCert {
            exec: exec.clone(),
            provider,
            last: parking_lot::Mutex::new(None),
        })),
        (None, _) => builder.with_no_client_auth(),
    };
    Ok(tls)
}

fn identity_key(
    identity: &Identity,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, ConfigError> {
    let certs = parse_certs(&identity.cert_pem, "client certificate")?
        .into_iter()
        .map(CertificateDer::from)
        .collect();
    let key = parse_key(&identity.key_pem, "client key")?;
    certified_key(certs, key, provider)
}

/// The client certificate an exec plugin gave (if it gave one), shown by each new connection:
/// rustls asks at every handshake, and the answer follows the plugin's latest run. The plugin
/// itself runs before a request is sent (`Auth::header`), never inside a handshake.
struct ExecClientCert {
    exec: Arc<ExecCredentials>,
    provider: Arc<CryptoProvider>,
    /// The identity last converted, and what it became: converted once per plugin answer.
    last: parking_lot::Mutex<Option<(Arc<Identity>, Arc<CertifiedKey>)>>,
}

/// rustls wants `Debug`; the key stays out of it (the plugin's credentials redact themselves).
impl std::fmt::Debug for ExecClientCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecClientCert")
            .field("exec", &self.exec)
            .finish_non_exhaustive()
    }
}

impl rustls::client::ResolvesClientCert for ExecClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        let identity = self.exec.identity()?;
        let mut last = self.last.lock();
        if let Some((converted, key)) = last.as_ref()
            && Arc::ptr_eq(converted, &identity)
        {
            return Some(key.clone());
        }
        match identity_key(&identity, &self.provider) {
            Ok(key) => {
                let key = Arc::new(key);
                *last = Some((identity, key.clone()));
                Some(key)
            }
            Err(error) => {
                tracing::warn!(%error, "exec plugin's client certificate unusable; connecting without one");
                None
            }
        }
    }

    fn has_certs(&self) -> bool {
        true
    }
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
