//! The handshake of a host that asks for client certificates: a server configuration per set of
//! CAs, whose verifier asks for a certificate (naming the host's CAs), checks that the client holds
//! its key, and leaves the verdict on the chain to the request ([`crate::policy::client_certs`]),
//! as nginx does: a client with a missing or bad certificate gets an HTTP answer, not a TLS alert.
//! A Gateway listener that requires valid certificates ([`VerifyClient::Require`]) is the
//! exception: its handshake requires one and judges it (the same check), and refuses with an alert.
//!
//! A worker builds each configuration once, the first time a handshake needs it, from the
//! daemon's own (the same certificates, ALPN, session tickets), and keeps it while the CAs stay
//! the same.

use std::cell::RefCell;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};

use ramjet_shared::{ClientAuth, Verdict, VerifyClient};

/// Asks for a certificate, requires none, and checks only that the client signed the handshake
/// with the key of the certificate it sent.
#[derive(Debug)]
struct AskForCertificate {
    /// The subjects of the host's CAs, sent in the CertificateRequest so that a client with
    /// several certificates can pick.
    hints: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AskForCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // Judged per request, against the host the request is for (policy::client_certs).
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Requires a certificate, and judges its chain in the handshake as requests would
/// ([`ClientAuth::check`]): depth, revocation lists, client-authentication usage.
#[derive(Debug)]
struct RequireCertificate {
    ask: AskForCertificate,
    auth: Arc<ClientAuth>,
}

impl ClientCertVerifier for RequireCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.ask.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let mut chain = Vec::with_capacity(1 + intermediates.len());
        chain.push(end_entity.clone());
        chain.extend(intermediates.iter().cloned());
        match self.auth.check(&chain, now) {
            Verdict::Success => Ok(ClientCertVerified::assertion()),
            Verdict::None => Err(rustls::Error::NoCertificatesPresented),
            Verdict::Failed(why) => Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(
                rustls::OtherError(Arc::new(Refused(why))),
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.ask.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.ask.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.ask.supported_verify_schemes()
    }
}

/// Why a required certificate was refused, in OpenSSL's words.
#[derive(Debug)]
struct Refused(&'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Refused {}

/// How many configurations a worker keeps (one per distinct set of CAs).
const KEPT: usize = 64;

/// A worker's server configurations: the daemon's, and one per set of CAs that hosts ask client
/// certificates of (those that require one in the handshake: per authentication, by address, as
/// the compiler keeps an unchanged one the same value across generations).
pub(crate) struct TlsConfigs {
    base: Arc<ServerConfig>,
    asking: RefCell<Vec<(ConfigKey, Arc<ServerConfig>)>>,
}

#[derive(PartialEq, Eq)]
enum ConfigKey {
    Asking([u8; 32]),
    Requiring(*const ClientAuth),
}

impl TlsConfigs {
    pub fn new(base: Arc<ServerConfig>) -> Self {
        TlsConfigs { base, asking: RefCell::new(Vec::new()) }
    }

    /// The daemon's configuration, which asks for no certificate.
    pub fn base(&self) -> &Arc<ServerConfig> {
        &self.base
    }

    /// The configuration for a host: the daemon's, or one asking for (or requiring) a certificate
    /// from `auth`'s CAs.
    pub fn config_for(&self, auth: Option<&Arc<ClientAuth>>) -> Arc<ServerConfig> {
        let Some(auth) = auth else { return self.base.clone() };
        let key = match auth.verify {
            // The configuration holds the authentication, so the address stays its own while kept.
            VerifyClient::Require => ConfigKey::Requiring(Arc::as_ptr(auth)),
            _ => ConfigKey::Asking(auth.ca.id),
        };
        let mut asking = self.asking.borrow_mut();
        if let Some((_, config)) = asking.iter().find(|(k, _)| *k == key) {
            return config.clone();
        }
        let config = self.asking_config(auth);
        if asking.len() == KEPT {
            asking.remove(0);
        }
        asking.push((key, config.clone()));
        config
    }

    fn asking_config(&self, auth: &Arc<ClientAuth>) -> Arc<ServerConfig> {
        let provider = self.base.crypto_provider().clone();
        let ask = AskForCertificate {
            hints: auth.ca.roots.subjects(),
            algorithms: provider.signature_verification_algorithms,
        };
        let verifier: Arc<dyn ClientCertVerifier> = match auth.verify {
            VerifyClient::Require => Arc::new(RequireCertificate { ask, auth: auth.clone() }),
            _ => Arc::new(ask),
        };
        // The process's provider and versions, as the daemon's configuration was built with.
        let mut config = ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(self.base.cert_resolver.clone());
        config.alpn_protocols = self.base.alpn_protocols.clone();
        config.ticketer = self.base.ticketer.clone();
        config.session_storage = self.base.session_storage.clone();
        Arc::new(config)
    }
}
