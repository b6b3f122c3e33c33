//! Just enough DER to read what rustls and webpki do not show of a certificate: its subject and
//! issuer names (client-certificate fields) and its URI subject alternative names (backend
//! verification by `subjectAltNames`). Every read is bounds-checked; malformed input gives `None`.

/// The subject and issuer names (DER) of a certificate.
pub fn subject_and_issuer(cert: &[u8]) -> Option<(&[u8], &[u8])> {
    let (_, cert, _) = der(cert)?;
    let (_, tbs, _) = der(cert)?;
    let mut rest = tbs;
    // [0] version, if present; then serial, signature algorithm, issuer, validity, subject.
    if rest.first() == Some(&0xa0) {
        rest = der(rest)?.2;
    }
    rest = der(rest)?.2;
    rest = der(rest)?.2;
    let issuer = &rest[..der_len(rest)?];
    rest = der(rest)?.2;
    rest = der(rest)?.2;
    let subject = &rest[..der_len(rest)?];
    Some((subject, issuer))
}

/// One DER element: its tag, its contents and what follows it.
pub(crate) fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let bytes = usize::from(first & 0x7f);
        if bytes == 0 || bytes > 4 {
            return None;
        }
        let mut len = 0usize;
        for b in input.get(2..2 + bytes)? {
            len = (len << 8) | usize::from(*b);
        }
        (len, 2 + bytes)
    };
    let end = header.checked_add(len)?;
    Some((tag, input.get(header..end)?, input.get(end..)?))
}

/// The length of the first DER element, header included.
pub(crate) fn der_len(input: &[u8]) -> Option<usize> {
    let (_, _, rest) = der(input)?;
    Some(input.len() - rest.len())
}

/// The URIs among a certificate's subject alternative names (`uniformResourceIdentifier`), as
/// written. Empty when it has none, or when the DER cannot be read.
pub fn subject_alt_uris(cert: &[u8]) -> Vec<&str> {
    subject_alt_names(cert).map(|names| uris_in(names)).unwrap_or_default()
}

/// The contents of the subjectAltName extension's `GeneralNames`.
fn subject_alt_names(cert: &[u8]) -> Option<&[u8]> {
    const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
    let (_, cert, _) = der(cert)?;
    let (_, tbs, _) = der(cert)?;
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = der(rest)?.2;
    }
    // serial, signature algorithm, issuer, validity, subject, subject public key info.
    for _ in 0..6 {
        rest = der(rest)?.2;
    }
    // issuerUniqueID [1], subjectUniqueID [2], then extensions [3].
    while let Some((tag, body, after)) = der(rest) {
        rest = after;
        if tag != 0xa3 {
            continue;
        }
        let (_, mut extensions, _) = der(body)?;
        while !extensions.is_empty() {
            let (_, extension, after) = der(extensions)?;
            extensions = after;
            let (tag, oid, mut value) = der(extension)?;
            if tag != 0x06 || oid != SUBJECT_ALT_NAME {
                continue;
            }
            if value.first() == Some(&0x01) {
                value = der(value)?.2; // critical
            }
            let (_, octets, _) = der(value)?;
            let (_, names, _) = der(octets)?;
            return Some(names);
        }
    }
    None
}

fn uris_in(mut names: &[u8]) -> Vec<&str> {
    let mut out = Vec::new();
    while let Some((tag, value, after)) = der(names) {
        names = after;
        // [6] IMPLICIT IA5String
        if tag == 0x86 {
            if let Ok(uri) = std::str::from_utf8(value) {
                out.push(uri);
            }
        }
    }
    out
}
