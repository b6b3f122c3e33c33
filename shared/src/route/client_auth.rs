//! Client certificates: who may use a host, by the certificate its TLS client presents
//! (ingress-nginx's `auth-tls-*` annotations).
//!
//! The handshake only asks for a certificate and checks that the client holds its key; whether the
//! certificate is any good is decided here, once per connection, by [`ClientAuth::check`]. That is
//! nginx's way, and it is what lets a client without a usable certificate get an HTTP answer it can
//! read (`400`, or a redirect to the host's error page) rather than a TLS alert. The verdict and the
//! certificate's names then travel with the connection; each request on a host that needs them is
//! admitted or answered by the route's [`ClientAuth`], and its backend is told the verdict
//! (`ssl-client-verify`, the subject and issuer, optionally the certificate itself).

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, UnixTime};
use webpki::{
    CertRevocationList, EndEntityCert, ExpirationPolicy, KeyUsage, OwnedCertRevocationList, RevocationCheckDepth,
    RevocationOptionsBuilder, UnknownStatusPolicy,
};

use super::policy::Matcher;
use crate::der::{der, der_len};
pub use crate::der::{subject_alt_uris, subject_and_issuer};
use crate::upstream_tls::CaBundle;

/// How hard a host asks (ingress-nginx's `auth-tls-verify-client`, and the Gateway API's
/// frontend validation modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum VerifyClient {
    /// No certificate is asked for; the backend is still told so (`ssl-client-verify: NONE`), and
    /// `match-cn` still applies.
    Off,
    /// A certificate from the host's CAs is required.
    On,
    /// A certificate is asked for; one that is sent must be from the host's CAs.
    Optional,
    /// A certificate is asked for and passed on, whoever issued it: the backend decides.
    OptionalNoCa,
    /// A certificate from the host's CAs is required by the handshake itself: a client without
    /// one gets a TLS alert, not an HTTP answer (Gateway API `AllowValidOnly`). Requests over
    /// plain HTTP are not the handshake's to judge, and pass.
    Require,
    /// A certificate is asked for, and neither required nor judged: the backend is told the
    /// verdict and decides (Gateway API `AllowInsecureFallback`).
    Fallback,
}

impl VerifyClient {
    /// Whether the handshake asks the client for a certificate.
    pub fn asks(self) -> bool {
        self != VerifyClient::Off
    }

    /// ingress-nginx's spelling.
    pub fn name(self) -> &'static str {
        match self {
            VerifyClient::Off => "off",
            VerifyClient::On => "on",
            VerifyClient::Optional => "optional",
            VerifyClient::OptionalNoCa => "optional_no_ca",
            VerifyClient::Require => "AllowValidOnly",
            VerifyClient::Fallback => "AllowInsecureFallback",
        }
    }

    /// A Gateway listener's validation: it judges connections over TLS only.
    pub fn tls_only(self) -> bool {
        matches!(self, VerifyClient::Require | VerifyClient::Fallback)
    }
}

/// What a connection's certificate came to, as nginx's `$ssl_client_verify` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Issued (directly or through the client's intermediates) by one of the host's CAs, valid now,
    /// not revoked, for client authentication.
    Success,
    /// The client sent none.
    None,
    /// Why it was not good, in OpenSSL's words (nginx prints them).
    Failed(&'static str),
}

/// OpenSSL's words for a chain whose issuer is not among the CAs (a self-signed certificate
/// included): the failure `optional_no_ca` lets through.
const UNKNOWN_ISSUER: &str = "unable to get local issuer certificate";

impl Verdict {
    /// The chain was fine but for its issuer, which is none of the host's CAs.
    pub fn issuer_unknown(&self) -> bool {
        *self == Verdict::Failed(UNKNOWN_ISSUER)
    }

    /// `SUCCESS`, `NONE` or `FAILED:<reason>`.
    pub fn as_field(&self) -> String {
        match self {
            Verdict::Success => "SUCCESS".into(),
            Verdict::None => "NONE".into(),
            Verdict::Failed(why) => format!("FAILED:{why}"),
        }
    }
}

/// A host's client-certificate authentication.
#[derive(serde::Serialize)]
pub struct ClientAuth {
    pub verify: VerifyClient,
    /// The CAs a certificate must come from (the Secret's `ca.crt`).
    #[serde(serialize_with = "bundle_id")]
    pub ca: Arc<CaBundle>,
    /// Revocation lists (the Secret's `ca.crl`), by their content's digest.
    pub crl_id: Option<[u8; 32]>,
    /// Parsed from what `crl_id` names.
    #[serde(skip)]
    pub(crate) crls: Box<[OwnedCertRevocationList]>,
    /// Most intermediate certificates between the client's own and one of the CAs (nginx's
    /// `ssl_verify_depth`, as OpenSSL 1.1 and later count it).
    pub depth: u8,
    /// Where a refused client is redirected (`302`), instead of a `400`.
    pub error_page: Option<Box<str>>,
    /// The backend gets the certificate itself (`ssl-client-cert`, URL-encoded PEM).
    pub pass_certificate: bool,
    /// The subject's distinguished name must match this, else `403`.
    pub match_cn: Option<Matcher>,
    /// The Secret it came from, for the audit trail.
    pub source: Box<str>,
}

fn bundle_id<S: serde::Serializer>(ca: &Arc<CaBundle>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(&ca.id)
}

/// Equal settings: the CAs and revocation lists by their content ids, as they are encoded.
impl PartialEq for ClientAuth {
    fn eq(&self, other: &Self) -> bool {
        self.verify == other.verify
            && self.ca.id == other.ca.id
            && self.crl_id == other.crl_id
            && self.depth == other.depth
            && self.error_page == other.error_page
            && self.pass_certificate == other.pass_certificate
            && self.match_cn == other.match_cn
            && self.source == other.source
    }
}

impl Eq for ClientAuth {}

/// What [`ClientAuth::new`] is given.
pub struct ClientAuthSpec {
    pub verify: VerifyClient,
    pub ca: Arc<CaBundle>,
    /// PEM or DER revocation lists, if any.
    pub crl: Option<Vec<u8>>,
    pub depth: u8,
    pub error_page: Option<String>,
    pub pass_certificate: bool,
    pub match_cn: Option<Matcher>,
    pub source: String,
}

impl ClientAuth {
    /// The host's authentication, or why its revocation list cannot be read.
    pub fn new(spec: ClientAuthSpec) -> Result<Self, String> {
        let (crls, crl_id) = match &spec.crl {
            None => (Vec::new(), None),
            Some(bytes) => (parse_crls(bytes)?, Some(CaBundle::id_of(bytes))),
        };
        Ok(ClientAuth {
            verify: spec.verify,
            ca: spec.ca,
            crl_id,
            crls: crls.into_boxed_slice(),
            depth: spec.depth,
            error_page: spec.error_page.map(Into::into),
            pass_certificate: spec.pass_certificate,
            match_cn: spec.match_cn,
            source: spec.source.into(),
        })
    }

    /// Checks a client's chain (its own certificate first) at `now`.
    pub fn check(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Verdict {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Verdict::None;
        };
        let Ok(leaf) = EndEntityCert::try_from(leaf) else {
            return Verdict::Failed("unable to decode issuer public key");
        };
        let lists: Vec<CertRevocationList<'_>> =
            self.crls.iter().map(|c| CertRevocationList::Owned(c.clone())).collect();
        let refs: Vec<&CertRevocationList<'_>> = lists.iter().collect();
        // As nginx with `ssl_crl`: every certificate of the chain is looked up, and one whose
        // issuer has no list, or whose list has expired, is not good.
        let revocation = RevocationOptionsBuilder::new(&refs).ok().map(|b| {
            b.with_depth(RevocationCheckDepth::Chain)
                .with_status_policy(UnknownStatusPolicy::Deny)
                .with_expiration_policy(ExpirationPolicy::Enforce)
                .build()
        });
        // OpenSSL's verify depth: the levels above the client's own certificate, the trust anchor
        // not counted, so depth 1 allows one intermediate.
        let most_intermediates = usize::from(self.depth);
        let depth = |path: &webpki::VerifiedPath<'_>| {
            if path.intermediate_certificates().count() > most_intermediates {
                Err(webpki::Error::MaximumPathDepthExceeded)
            } else {
                Ok(())
            }
        };
        let verified = leaf.verify_for_usage(
            rustls::crypto::ring::default_provider().signature_verification_algorithms.all,
            &self.ca.roots.roots,
            intermediates,
            now,
            KeyUsage::client_auth(),
            revocation,
            Some(&depth),
        );
        match verified {
            Ok(_) => Verdict::Success,
            Err(e) => Verdict::Failed(openssl_reason(&e)),
        }
    }
}

/// OpenSSL's text for why a chain was refused (`X509_verify_cert_error_string`), which nginx puts
/// after `FAILED:`.
fn openssl_reason(error: &webpki::Error) -> &'static str {
    use webpki::Error as E;
    match error {
        E::UnknownIssuer => UNKNOWN_ISSUER,
        E::CertExpired { .. } => "certificate has expired",
        E::CertNotValidYet { .. } => "certificate is not yet valid",
        E::CertRevoked => "certificate revoked",
        E::UnknownRevocationStatus => "unable to get certificate CRL",
        E::CrlExpired { .. } => "CRL has expired",
        E::MaximumPathDepthExceeded | E::MaximumPathBuildCallsExceeded => "certificate chain too long",
        E::RequiredEkuNotFoundContext(_) => "unsupported certificate purpose",
        E::InvalidSignatureForPublicKey
        | E::UnsupportedSignatureAlgorithmContext(_)
        | E::UnsupportedSignatureAlgorithmForPublicKeyContext(_) => "certificate signature failure",
        _ => "certificate verify failed",
    }
}

/// Revocation lists from PEM (`X509 CRL` blocks) or one DER list.
fn parse_crls(bytes: &[u8]) -> Result<Vec<OwnedCertRevocationList>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateRevocationListDer;
    let ders: Vec<CertificateRevocationListDer<'_>> = if bytes.trim_ascii_start().starts_with(b"-----") {
        CertificateRevocationListDer::pem_slice_iter(bytes)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("invalid PEM in the revocation list: {e}"))?
    } else {
        vec![CertificateRevocationListDer::from(bytes)]
    };
    if ders.is_empty() {
        return Err("no X509 CRL PEM block in the revocation list".into());
    }
    ders.iter()
        .enumerate()
        .map(|(i, der)| OwnedCertRevocationList::from_der(der).map_err(|e| format!("revocation list {}: {e}", i + 1)))
        .collect()
}

impl fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client certificate {} by {} (depth {}", self.verify.name(), self.source, self.depth)?;
        if self.crl_id.is_some() {
            f.write_str(", with CRL")?;
        }
        if let Some(cn) = &self.match_cn {
            write!(f, ", subject {cn}")?;
        }
        if self.pass_certificate {
            f.write_str(", passed upstream")?;
        }
        if let Some(page) = &self.error_page {
            write!(f, ", else to {page}")?;
        }
        f.write_str(")")
    }
}

/// A distinguished name (DER `Name`) as RFC 2253 writes it, which is how nginx shows
/// `$ssl_client_s_dn`: the last RDN first, `,` between them, `+` within one, short attribute names
/// (else the dotted OID and the value as `#` and hex), special characters escaped with `\`, bytes
/// outside printable ASCII as `\XX`. `None` when the DER is not a Name.
pub fn rfc2253(name: &[u8]) -> Option<String> {
    let (tag, body, _) = der(name)?;
    if tag != 0x30 {
        return None;
    }
    let mut rdns = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (tag, set, after) = der(rest)?;
        if tag != 0x31 {
            return None;
        }
        rdns.push(set);
        rest = after;
    }
    let mut out = String::new();
    for (i, set) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let mut rest = *set;
        let mut first = true;
        while !rest.is_empty() {
            let (tag, pair, after) = der(rest)?;
            if tag != 0x30 {
                return None;
            }
            rest = after;
            if !first {
                out.push('+');
            }
            first = false;
            let (oid_tag, oid, value) = der(pair)?;
            if oid_tag != 0x06 {
                return None;
            }
            let (value_tag, text, _) = der(value)?;
            match short_name(oid) {
                Some(short) if is_string(value_tag) => {
                    out.push_str(short);
                    out.push('=');
                    escape_value(text, value_tag, &mut out);
                }
                _ => {
                    out.push_str(&dotted(oid)?);
                    out.push_str("=#");
                    for b in &value[..der_len(value)?] {
                        out.push_str(&format!("{b:02X}"));
                    }
                }
            }
        }
    }
    Some(out)
}

/// The DER string types whose contents are text.
fn is_string(tag: u8) -> bool {
    // UTF8String, PrintableString, T61String, IA5String, BMPString, UniversalString.
    matches!(tag, 0x0c | 0x13 | 0x14 | 0x16 | 0x1e | 0x1c)
}

/// OpenSSL's short names for the attributes certificates use.
fn short_name(oid: &[u8]) -> Option<&'static str> {
    const X520: &[u8] = &[0x55, 0x04];
    if let Some([n]) = oid.strip_prefix(X520) {
        return Some(match n {
            3 => "CN",
            4 => "SN",
            5 => "serialNumber",
            6 => "C",
            7 => "L",
            8 => "ST",
            9 => "street",
            10 => "O",
            11 => "OU",
            12 => "title",
            42 => "GN",
            43 => "initials",
            46 => "dnQualifier",
            _ => return None,
        });
    }
    match oid {
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => Some("emailAddress"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => Some("DC"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => Some("UID"),
        _ => None,
    }
}

/// An OID in dotted form.
fn dotted(oid: &[u8]) -> Option<String> {
    let (&first, rest) = oid.split_first()?;
    let mut out = format!("{}.{}", first / 40, first % 40);
    let mut value: u64 = 0;
    for &b in rest {
        value = value.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            out.push_str(&format!(".{value}"));
            value = 0;
        }
    }
    Some(out)
}

/// A value as RFC 2253 escapes it. BMPString (UTF-16) and UniversalString (UTF-32) are decoded
/// first; the other string types are taken as their bytes.
fn escape_value(text: &[u8], tag: u8, out: &mut String) {
    let decoded: Vec<u8> = match tag {
        0x1e => String::from_utf16_lossy(
            &text.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect::<Vec<_>>(),
        )
        .into_bytes(),
        0x1c => text
            .chunks_exact(4)
            .filter_map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect::<String>()
            .into_bytes(),
        _ => text.to_vec(),
    };
    let last = decoded.len().saturating_sub(1);
    for (i, &b) in decoded.iter().enumerate() {
        let special = matches!(b, b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';')
            || (i == 0 && (b == b'#' || b == b' '))
            || (i == last && b == b' ');
        if special {
            out.push('\\');
            out.push(char::from(b));
        } else if (0x20..0x7f).contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\{b:02X}"));
        }
    }
}

/// A certificate as nginx's `$ssl_client_escaped_cert` gives it: its PEM, URL-encoded as a URI
/// component (every byte but letters, digits and `-._~` as `%XX`).
pub fn escaped_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::with_capacity(body.len() + body.len() / 64 + 64);
    pem.push_str("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    let mut out = String::with_capacity(pem.len() * 3 / 2);
    for b in pem.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(rdns: &[&[(&[u8], u8, &str)]]) -> Vec<u8> {
        fn wrap(tag: u8, body: &[u8]) -> Vec<u8> {
            let mut out = vec![tag];
            if body.len() < 0x80 {
                out.push(body.len() as u8);
            } else {
                out.extend_from_slice(&[0x81, body.len() as u8]);
            }
            out.extend_from_slice(body);
            out
        }
        let mut seq = Vec::new();
        for rdn in rdns {
            let mut set = Vec::new();
            for (oid, tag, value) in *rdn {
                let mut pair = wrap(0x06, oid);
                pair.extend(wrap(*tag, value.as_bytes()));
                set.extend(wrap(0x30, &pair));
            }
            seq.extend(wrap(0x31, &set));
        }
        wrap(0x30, &seq)
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];
    const C: &[u8] = &[0x55, 0x04, 0x06];

    #[test]
    fn names_are_written_last_rdn_first_as_rfc_2253_says() {
        let dn = name(&[&[(C, 0x13, "US")], &[(O, 0x0c, "Example, Inc.")], &[(CN, 0x0c, "client")]]);
        assert_eq!(rfc2253(&dn).unwrap(), r"CN=client,O=Example\, Inc.,C=US");
        let multi = name(&[&[(CN, 0x0c, "a"), (O, 0x0c, "b")]]);
        assert_eq!(rfc2253(&multi).unwrap(), "CN=a+O=b");
        let odd = name(&[&[(CN, 0x0c, "#lead trail ")]]);
        assert_eq!(rfc2253(&odd).unwrap(), r"CN=\#lead trail\ ");
        let utf8 = name(&[&[(CN, 0x0c, "é")]]);
        assert_eq!(rfc2253(&utf8).unwrap(), r"CN=\C3\A9");
        let unknown = name(&[&[(&[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x01], 0x0c, "x")]]);
        assert_eq!(rfc2253(&unknown).unwrap(), "1.3.6.1.4.1.311.1=#0C0178");
        assert_eq!(rfc2253(&[0x30, 0x05, 0x31]), None);
        assert_eq!(rfc2253(&name(&[])).unwrap(), "");
    }

    /// A CA, an intermediate under it, and helpers to issue client certificates.
    struct Chain {
        root: rcgen::Issuer<'static, rcgen::KeyPair>,
        root_der: CertificateDer<'static>,
        middle: rcgen::Issuer<'static, rcgen::KeyPair>,
        middle_der: CertificateDer<'static>,
    }

    fn ca(
        name: &str,
        issuer: Option<&rcgen::Issuer<'static, rcgen::KeyPair>>,
    ) -> (rcgen::Issuer<'static, rcgen::KeyPair>, CertificateDer<'static>) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = match issuer {
            Some(issuer) => params.signed_by(&key, issuer).unwrap(),
            None => params.self_signed(&key).unwrap(),
        };
        (rcgen::Issuer::new(params, key), cert.der().clone())
    }

    impl Chain {
        fn new() -> Chain {
            let (root, root_der) = ca("root", None);
            let (middle, middle_der) = ca("middle", Some(&root));
            Chain { root, root_der, middle, middle_der }
        }

        fn client(&self, by: &rcgen::Issuer<'static, rcgen::KeyPair>, serial: u64) -> CertificateDer<'static> {
            let mut params = rcgen::CertificateParams::new(vec!["client.test".to_string()]).unwrap();
            params.distinguished_name.push(rcgen::DnType::CommonName, "client");
            params.serial_number = Some(serial.into());
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
            params.signed_by(&rcgen::KeyPair::generate().unwrap(), by).unwrap().der().clone()
        }

        fn auth(&self, depth: u8, crl: Option<Vec<u8>>) -> ClientAuth {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.root_der.clone()).unwrap();
            let ca = Arc::new(CaBundle { id: [1; 32], roots: Arc::new(roots), source: "test".into() });
            let spec = ClientAuthSpec {
                verify: VerifyClient::On,
                ca,
                crl,
                depth,
                error_page: None,
                pass_certificate: false,
                match_cn: None,
                source: "test".into(),
            };
            ClientAuth::new(spec).unwrap()
        }

        /// A revocation list from `by` revoking these serial numbers.
        fn crl(by: &rcgen::Issuer<'static, rcgen::KeyPair>, revoked: &[u64]) -> Vec<u8> {
            let params = rcgen::CertificateRevocationListParams {
                this_update: rcgen::date_time_ymd(2025, 1, 1),
                next_update: rcgen::date_time_ymd(2099, 1, 1),
                crl_number: 1u64.into(),
                issuing_distribution_point: None,
                revoked_certs: revoked
                    .iter()
                    .map(|s| rcgen::RevokedCertParams {
                        serial_number: (*s).into(),
                        revocation_time: rcgen::date_time_ymd(2025, 1, 1),
                        reason_code: None,
                        invalidity_date: None,
                    })
                    .collect(),
                key_identifier_method: rcgen::KeyIdMethod::Sha256,
            };
            params.signed_by(by).unwrap().pem().unwrap().into_bytes()
        }
    }

    #[test]
    fn a_chain_is_checked_against_the_cas_the_depth_and_the_revocation_lists() {
        let chain = Chain::new();
        let now = UnixTime::now();
        let direct = chain.client(&chain.root, 7);
        let below_middle = chain.client(&chain.middle, 8);
        // Depth 1: the client's certificate and one intermediate (OpenSSL's count).
        let auth = chain.auth(1, None);
        assert_eq!(auth.check(std::slice::from_ref(&direct), now), Verdict::Success);
        assert_eq!(auth.check(&[below_middle.clone(), chain.middle_der.clone()], now), Verdict::Success);
        assert!(
            auth.check(std::slice::from_ref(&below_middle), now).issuer_unknown(),
            "the intermediate is the client's to send"
        );
        assert_eq!(auth.check(&[], now), Verdict::None);
        // Two intermediates need depth 2.
        let (lower, lower_der) = ca("lower", Some(&chain.middle));
        let deep = chain.client(&lower, 9);
        let path = [deep, lower_der, chain.middle_der.clone()];
        assert_eq!(auth.check(&path, now), Verdict::Failed("certificate chain too long"));
        assert_eq!(chain.auth(2, None).check(&path, now), Verdict::Success);
        // Another CA of another name: an unknown issuer, which optional_no_ca lets through.
        let (stranger, _) = ca("stranger", None);
        assert!(auth.check(&[chain.client(&stranger, 1)], now).issuer_unknown());
        // Revocation: the root's list revokes serial 7; every certificate of a chain needs a list.
        let revoking = chain.auth(1, Some(Chain::crl(&chain.root, &[7])));
        assert_eq!(revoking.check(&[direct], now), Verdict::Failed("certificate revoked"));
        assert_eq!(revoking.check(&[chain.client(&chain.root, 70)], now), Verdict::Success);
        let middle_unlisted = revoking.check(&[below_middle.clone(), chain.middle_der.clone()], now);
        assert_eq!(middle_unlisted, Verdict::Failed("unable to get certificate CRL"));
        let mut both = Chain::crl(&chain.root, &[]);
        both.extend(Chain::crl(&chain.middle, &[8]));
        let both = chain.auth(1, Some(both));
        assert_eq!(both.check(&[below_middle, chain.middle_der.clone()], now), Verdict::Failed("certificate revoked"));
        assert!(ClientAuth::new(ClientAuthSpec { crl: Some(b"not a list".to_vec()), ..spec_of(&chain) }).is_err());
    }

    fn spec_of(chain: &Chain) -> ClientAuthSpec {
        let auth = chain.auth(1, None);
        ClientAuthSpec {
            verify: auth.verify,
            ca: auth.ca.clone(),
            crl: None,
            depth: 1,
            error_page: None,
            pass_certificate: false,
            match_cn: None,
            source: "test".into(),
        }
    }

    /// OpenSSL is the reference (nginx prints names with it): `openssl x509 -noout -subject
    /// -nameopt RFC2253` on these certificates (the fuzz target's seeds) says what is asserted.
    #[test]
    fn names_are_written_as_openssl_writes_them() {
        let ec = include_bytes!("../../../fuzz/corpus/client_cert_names/ec-client.der");
        let (subject, issuer) = subject_and_issuer(ec).unwrap();
        assert_eq!(rfc2253(subject).unwrap(), r"CN=\#client \;1\ ,OU=a\<b\>c,O=Acme\, Inc.,C=US");
        assert_eq!(rfc2253(issuer), rfc2253(subject), "self-signed");
        let rsa = include_bytes!("../../../fuzz/corpus/client_cert_names/rsa-utf8.der");
        let (subject, _) = subject_and_issuer(rsa).unwrap();
        assert_eq!(rfc2253(subject).unwrap(), r"CN=\C3\A9 \C3\BCn\C3\AFcode,emailAddress=a@b.c,DC=com,DC=example");
    }

    #[test]
    fn the_escaped_certificate_is_a_url_encoded_pem() {
        let escaped = escaped_pem(&[0xfb, 0xff, 0x3e]);
        assert_eq!(escaped, "-----BEGIN%20CERTIFICATE-----%0A%2B%2F8%2B%0A-----END%20CERTIFICATE-----%0A");
    }
}
