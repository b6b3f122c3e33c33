//! Client certificates per request (ingress-nginx's `auth-tls-*`), in nginx's order: a request
//! whose `Host` is not the name its TLS client asked for is misdirected (`421`); then the verdict on
//! the connection's certificate decides (`400`, or a redirect to the host's error page); then the
//! subject must match `match-cn` (`403`). An admitted request carries the certificate's fields to
//! its backend.

use std::sync::Arc;

use ramjet_shared::{normalize_host, ClientAuth, Verdict, VerifyClient};

use crate::conn::{no_certificate_fields, CertFields, ConnFacts};

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CertRefusal {
    /// The client named another host in its handshake than in its request (`421`).
    Misdirected,
    /// No certificate, where one is required (`400`).
    NoCertificate,
    /// A certificate that is not good for this host (`400`).
    BadCertificate,
    /// The subject does not match `match-cn` (`403`).
    Unauthorized,
}

/// Admits a request for `host` (as sent) on the connection `facts` to a host with `auth`.
pub(crate) fn admit(auth: &Arc<ClientAuth>, facts: &ConnFacts, host: &[u8]) -> Result<CertFields, CertRefusal> {
    let sni = facts.tls_session.as_ref().map_or("", |s| &s.sni);
    if auth.verify.asks() && !sni.is_empty() {
        let mut buf = [0u8; 256];
        let host = std::str::from_utf8(host).ok().and_then(|h| normalize_host(h, &mut buf));
        if host.is_some_and(|h| !h.eq_ignore_ascii_case(sni)) {
            return Err(CertRefusal::Misdirected);
        }
    }
    // A Gateway listener's validation is its handshake's: the host's plain-HTTP listener has none.
    if auth.verify.tls_only() && facts.tls_session.is_none() {
        return Ok(no_certificate_fields());
    }
    // A plain-HTTP request, or a handshake that did not ask (no server name, or a name whose host
    // asks for none), has no certificate.
    let checked = facts.client_cert.as_ref().filter(|_| auth.verify.asks()).map(|c| c.checked_by(auth));
    let verdict = checked.as_ref().map_or(&Verdict::None, |c| &c.verdict);
    let refused = match (auth.verify, verdict) {
        (VerifyClient::Off | VerifyClient::Fallback, _) | (_, Verdict::Success) => None,
        (VerifyClient::On | VerifyClient::Require, Verdict::None) => Some(CertRefusal::NoCertificate),
        (VerifyClient::Optional | VerifyClient::OptionalNoCa, Verdict::None) => None,
        (VerifyClient::OptionalNoCa, failed) if failed.issuer_unknown() => None,
        (_, Verdict::Failed(_)) => Some(CertRefusal::BadCertificate),
    };
    if let Some(refusal) = refused {
        return Err(refusal);
    }
    let subject = checked.as_ref().map_or("", |c| &c.subject);
    if auth.match_cn.as_ref().is_some_and(|m| !m.matches(subject.as_bytes())) {
        return Err(CertRefusal::Unauthorized);
    }
    Ok(match checked {
        Some(c) if auth.verify.asks() => c.fields,
        _ => no_certificate_fields(),
    })
}
