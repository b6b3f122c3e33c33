//! Reading certificates and keys (PEM) into content-addressed [`Certificate`]s.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ramjet_shared::{CaBundle, CertId, Certificate};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// Why a certificate or key was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CertError {
    /// The chain has no `CERTIFICATE` PEM block.
    #[error("no CERTIFICATE PEM block in the certificate")]
    NoCertificate,
    /// The key has no private-key PEM block.
    #[error("no PRIVATE KEY PEM block in the key")]
    NoKey,
    /// The PEM text could not be read.
    #[error("invalid PEM: {0}")]
    Pem(String),
    /// The key type is not supported, or the key is corrupt.
    #[error("unsupported or invalid private key: {0}")]
    Key(String),
    /// The key is not the one the leaf certificate was issued for.
    #[error("the private key does not match the certificate")]
    Mismatch,
}

/// Parses a PEM chain and key into a certificate, once; the id is the content hash of both.
pub fn parse_certificate(chain_pem: &[u8], key_pem: &[u8], source: &str) -> Result<Arc<Certificate>, CertError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| CertError::Pem(e.to_string()))?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate);
    }
    let key = match PrivateKeyDer::from_pem_slice(key_pem) {
        Ok(key) => key,
        Err(pem::Error::NoItemsFound) => return Err(CertError::NoKey),
        Err(e) => return Err(CertError::Pem(e.to_string())),
    };
    let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| CertError::Key(e.to_string()))?;
    let not_after = leaf_not_after(&chain[0]);
    let certified = CertifiedKey::new(chain, signer);
    certified.keys_match().map_err(|_| CertError::Mismatch)?;
    Ok(Arc::new(Certificate {
        id: CertId::of(chain_pem, key_pem),
        key: Arc::new(certified),
        source: source.to_string(),
        not_after,
    }))
}

/// The subject of the certificate served to a TLS client whose server name has no certificate
/// (and none was given by `--default-certificate`), as ingress-nginx serves its "Fake Certificate".
pub const FALLBACK_SUBJECT: &str = "Ramjet Ingress Controller Fake Certificate";

/// A self-signed certificate made at start, so that a client asking for a name ramjet has no
/// certificate for gets a handshake and then an HTTP answer (a 404, usually) rather than a TLS
/// alert it cannot explain. No client trusts it.
pub fn fallback_certificate() -> Result<Arc<CertifiedKey>, CertError> {
    let key = rcgen::KeyPair::generate().map_err(|e| CertError::Key(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| CertError::Key(e.to_string()))?;
    params.distinguished_name.push(rcgen::DnType::CommonName, FALLBACK_SUBJECT);
    let cert = params.self_signed(&key).map_err(|e| CertError::Key(e.to_string()))?;
    let key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| CertError::Key(e.to_string()))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| CertError::Key(e.to_string()))?;
    Ok(Arc::new(CertifiedKey::new(vec![cert.der().clone()], signer)))
}

/// Parses a CA bundle (PEM, one or more `CERTIFICATE` blocks) for verifying backends.
pub fn parse_ca_bundle(pem: &[u8], source: &str) -> Result<Arc<CaBundle>, String> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pem).collect::<Result<_, _>>().map_err(|e| format!("invalid PEM: {e}"))?;
    CaBundle::parse(pem, certs, source)
}

/// The Mozilla root certificates (webpki-root-certs, built in, so an image without a system
/// bundle verifies the same way), for hosts outside the cluster: parsed once.
pub fn mozilla_roots() -> Arc<CaBundle> {
    static ROOTS: std::sync::OnceLock<Arc<CaBundle>> = std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let certs = webpki_root_certs::TLS_SERVER_ROOT_CERTS.to_vec();
            CaBundle::parse(b"webpki-root-certs", certs, "the Mozilla root certificates")
                .expect("the built-in roots parse")
        })
        .clone()
}

/// Whether a certificate has expired (a warning, never a refusal).
pub fn is_expired(cert: &Certificate) -> bool {
    cert.not_after.is_some_and(|t| t < SystemTime::now())
}

/// Reads `notAfter` from a DER certificate: Certificate → TBSCertificate → Validity → notAfter.
fn leaf_not_after(der: &[u8]) -> Option<SystemTime> {
    let (_, cert, _) = der_element(der)?;
    let (_, tbs, _) = der_element(cert)?;
    let mut rest = tbs;
    // Optional [0] version, then serial, signature algorithm, issuer, validity.
    let (tag, _, after) = der_element(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..3 {
        rest = der_element(rest)?.2;
    }
    let (_, validity, _) = der_element(rest)?;
    let (_, _, after_not_before) = der_element(validity)?;
    let (tag, time, _) = der_element(after_not_before)?;
    parse_asn1_time(tag, std::str::from_utf8(time).ok()?)
}

/// One DER element: (tag, contents, rest).
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)? as usize;
    let (len, header) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let len = input.get(2..2 + n)?.iter().fold(0usize, |acc, b| acc << 8 | *b as usize);
        (len, 2 + n)
    };
    let contents = input.get(header..header + len)?;
    Some((tag, contents, &input[header + len..]))
}

/// UTCTime (`YYMMDDHHMMSSZ`, tag 0x17) or GeneralizedTime (`YYYYMMDDHHMMSSZ`, tag 0x18).
fn parse_asn1_time(tag: u8, s: &str) -> Option<SystemTime> {
    let s = s.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 => {
            let yy: i64 = s.get(0..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, s.get(2..)?)
        }
        0x18 => (s.get(0..4)?.parse().ok()?, s.get(4..)?),
        _ => return None,
    };
    let field = |i: usize| -> Option<i64> { rest.get(i..i + 2)?.parse().ok() };
    let (month, day, hour, minute, second) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    // Days since the epoch for a civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    if secs >= 0 {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64))
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }
}
