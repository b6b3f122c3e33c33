//! TLS to backends (`HTTPS`, `GRPCS`): what a compiled backend carries so that a worker can open a
//! TLS connection to its endpoints without deciding anything.
//!
//! The compiler turns the user's settings ([`UpstreamTlsSpec`]: verify against a CA bundle or not,
//! the server name, whether to send it as SNI) into an [`UpstreamTls`] once: two rustls client
//! configurations (ALPN `http/1.1` for the pooled HTTP/1.1 exchanges, ALPN `h2` for the multiplexed
//! HTTP/2 connections) and the parsed server name. Its [`UpstreamTls::id`] is a content hash of the
//! settings, so the same settings in the next generation are the same value (shared by `Arc`), the
//! table digest moves when they change, and the worker's pools never hand a connection made with
//! one set of settings to a backend that asks for another.
//!
//! Without a CA bundle the backend's certificate is not verified — the connection is encrypted, and
//! the handshake's signatures are still checked against the certificate the backend presented — as
//! ingress-nginx does by default (`proxy-ssl-verify: off`).

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use sha2::{Digest as _, Sha256};

use crate::cert::{CertId, Certificate};

/// A CA bundle (PEM), content-addressed: the id is the SHA-256 of the PEM bytes, so an unchanged
/// Secret or file is the same bundle in every generation and is parsed once.
pub struct CaBundle {
    pub id: [u8; 32],
    pub roots: Arc<RootCertStore>,
    /// Where it came from (`namespace/secret`, a file path), for diagnostics.
    pub source: String,
}

impl fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaBundle").field("source", &self.source).field("roots", &self.roots.len()).finish()
    }
}

impl CaBundle {
    /// The content id of PEM bytes, to look a bundle up before parsing it.
    pub fn id_of(pem: &[u8]) -> [u8; 32] {
        Sha256::digest(pem).into()
    }

    /// Parses every `CERTIFICATE` block of `pem` as a trust anchor. A bundle without any, or with a
    /// block that is not a usable CA certificate, is refused with the reason.
    pub fn parse(pem: &[u8], certs: Vec<CertificateDer<'static>>, source: &str) -> Result<Arc<CaBundle>, String> {
        if certs.is_empty() {
            return Err("no CERTIFICATE PEM block in the CA bundle".into());
        }
        let mut roots = RootCertStore::empty();
        for (i, cert) in certs.into_iter().enumerate() {
            roots.add(cert).map_err(|e| format!("CA certificate {}: {e}", i + 1))?;
        }
        Ok(Arc::new(CaBundle { id: Self::id_of(pem), roots: Arc::new(roots), source: source.to_string() }))
    }
}

/// What the user asked for: the input of [`UpstreamTls::new`].
#[derive(Debug, Clone)]
pub struct UpstreamTlsSpec {
    /// Verify the backend's certificate against this bundle; `None`: encrypt without verifying.
    pub verify: Option<Arc<CaBundle>>,
    /// The name the certificate is verified against, and sent as SNI when `sni` is set: a DNS name
    /// or an IP address.
    pub server_name: String,
    /// Send the server name in the handshake (SNI). ingress-nginx's default is not to.
    pub sni: bool,
    /// A client certificate to present to backends that ask for one.
    pub client_cert: Option<Arc<Certificate>>,
    /// Names the certificate must carry one of, instead of `server_name` (needs `verify`).
    pub subject_alt_names: Vec<SubjectAltName>,
}

/// A subject alternative name a backend's certificate may be verified by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum SubjectAltName {
    /// A DNS name (a `*.` wildcard in the certificate covers one label, as for server names).
    Dns(String),
    /// A URI, compared as written (a SPIFFE id, say).
    Uri(String),
}

/// What makes two upstream TLS set-ups the same: the settings, bundles and certificates by their
/// content ids (where they were read from is not what they are). The content hash and `PartialEq`
/// are both taken over it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
struct Settings {
    verify: Option<[u8; 32]>,
    server_name: String,
    sni: bool,
    client_cert: Option<CertId>,
    subject_alt_names: Vec<SubjectAltName>,
}

impl Settings {
    fn of(spec: &UpstreamTlsSpec) -> Self {
        // Every field of the spec, so that a new one does not compile until it is here.
        let UpstreamTlsSpec { verify, server_name, sni, client_cert, subject_alt_names } = spec;
        Settings {
            verify: verify.as_ref().map(|b| b.id),
            server_name: server_name.clone(),
            sni: *sni,
            client_cert: client_cert.as_ref().map(|c| c.id),
            subject_alt_names: subject_alt_names.clone(),
        }
    }
}

/// TLS to a backend's endpoints, ready for the worker.
pub struct UpstreamTls {
    /// Content hash of the settings: the pools' key and the backend digest's input.
    pub id: u64,
    /// For HTTP/1.1 exchanges (ALPN `http/1.1`).
    pub http1: Arc<ClientConfig>,
    /// For HTTP/2 connections (ALPN `h2`).
    pub h2: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
    /// Whether the certificate is verified, and against which bundle (its source).
    pub verified_by: Option<String>,
    pub sni: bool,
    settings: Settings,
    /// The digest of `settings`.
    digest: [u8; 32],
}

impl fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("server_name", &self.server_name)
            .field("verified_by", &self.verified_by)
            .field("sni", &self.sni)
            .finish()
    }
}

/// In a backend's encoding: the content hash of the settings (the client configurations have no
/// encoding of their own, and are made from the settings alone).
impl serde::Serialize for UpstreamTls {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.digest)
    }
}

impl PartialEq for UpstreamTls {
    fn eq(&self, other: &Self) -> bool {
        self.settings == other.settings
    }
}

impl Eq for UpstreamTls {}

impl UpstreamTls {
    /// Builds the client configurations: TLS 1.2 and 1.3 with rustls' safe defaults (ring), no
    /// session resumption (its cache is shared by every worker behind a lock; connections are
    /// pooled, so a handshake is paid per connection, not per request).
    pub fn new(spec: &UpstreamTlsSpec) -> Result<Arc<UpstreamTls>, String> {
        let server_name = ServerName::try_from(spec.server_name.clone())
            .map_err(|_| format!("`{}` is not a DNS name or an IP address", spec.server_name))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let names = spec.subject_alt_names.clone();
        let builder = match &spec.verify {
            Some(bundle) if names.is_empty() => builder.with_root_certificates(bundle.roots.clone()),
            Some(bundle) => {
                let verifier = AnyOfNames { roots: bundle.roots.clone(), names, provider };
                builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier))
            }
            None if names.is_empty() => {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            }
            None => return Err("subject alternative names are verified against a CA bundle, and none is given".into()),
        };
        let mut config = match &spec.client_cert {
            Some(cert) => builder.with_client_cert_resolver(Arc::new(ClientCert(cert.key.clone()))),
            None => builder.with_no_client_auth(),
        };
        config.enable_sni = spec.sni;
        config.resumption = Resumption::disabled();
        let mut http1 = config.clone();
        http1.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut h2 = config;
        h2.alpn_protocols = vec![b"h2".to_vec()];

        let settings = Settings::of(spec);
        let digest = crate::digest::digest_of(&settings).0;
        let id = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
        Ok(Arc::new(UpstreamTls {
            // 0 stands for "no TLS" in the pools' keys.
            id: id.max(1),
            http1: Arc::new(http1),
            h2: Arc::new(h2),
            server_name,
            verified_by: spec.verify.as_ref().map(|b| b.source.clone()),
            sni: spec.sni,
            settings,
            digest,
        }))
    }

    /// The bytes backend digests include.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

/// The client certificate presented whenever a backend asks for one.
#[derive(Debug)]
struct ClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ClientCert {
    fn resolve(&self, _issuers: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A BackendTLSPolicy's `subjectAltNames`: the certificate must chain to `roots` (for server
/// authentication, at the time of the handshake) and carry at least one of `names`.
#[derive(Debug)]
struct AnyOfNames {
    roots: Arc<RootCertStore>,
    names: Vec<SubjectAltName>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AnyOfNames {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = webpki::EndEntityCert::try_from(end_entity).map_err(certificate_error)?;
        let algorithms = self.provider.signature_verification_algorithms.all;
        let usage = webpki::KeyUsage::server_auth();
        cert.verify_for_usage(algorithms, &self.roots.roots, intermediates, now, usage, None, None)
            .map_err(certificate_error)?;
        let uris = crate::der::subject_alt_uris(end_entity);
        let carries = |name: &SubjectAltName| match name {
            SubjectAltName::Dns(dns) => {
                ServerName::try_from(dns.as_str()).is_ok_and(|dns| cert.verify_is_valid_for_subject_name(&dns).is_ok())
            }
            SubjectAltName::Uri(uri) => uris.contains(&uri.as_str()),
        };
        if self.names.iter().any(carries) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// webpki's verdict in rustls' terms (the access log and the upstream error count read them).
fn certificate_error(error: webpki::Error) -> rustls::Error {
    use rustls::CertificateError as C;
    let reason = match error {
        webpki::Error::UnknownIssuer => C::UnknownIssuer,
        webpki::Error::CertExpired { .. } => C::Expired,
        webpki::Error::CertNotValidYet { .. } => C::NotValidYet,
        webpki::Error::InvalidSignatureForPublicKey => C::BadSignature,
        webpki::Error::CertNotValidForName(_) => C::NotValidForName,
        other => C::Other(rustls::OtherError(Arc::new(other))),
    };
    rustls::Error::InvalidCertificate(reason)
}

/// `proxy-ssl-verify: off`: any certificate is accepted as the backend's, but the handshake must
/// still be signed by its key (so the connection is encrypted to whoever holds it).
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
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
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
