//! Arbitrary bytes as a client's certificate (`ramjet_shared::client_auth`): the subject and
//! issuer are read from any certificate a TLS client sends, checked or not, so:
//!
//! * `subject_and_issuer` and `rfc2253` never panic, whatever the DER;
//! * a name they write has no control byte and no byte outside ASCII (each is `\XX`), so it is
//!   always a valid field value for the backend (`ssl-client-subject-dn`);
//! * the escaped certificate (`ssl-client-cert`) is made of letters, digits, `-._~` and `%XX`;
//! * `subject_alt_uris` (a backend's URI names, for BackendTLSPolicy `subjectAltNames`) never
//!   panics and returns only what the DER holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ramjet_shared::client_auth::{escaped_pem, rfc2253, subject_and_issuer, subject_alt_uris};

fuzz_target!(|data: &[u8]| {
    let names = subject_and_issuer(data).map_or_else(|| vec![data], |(s, i)| vec![s, i]);
    for name in names {
        if let Some(text) = rfc2253(name) {
            assert!(text.bytes().all(|b| (0x20..0x7f).contains(&b)), "{text:?}");
        }
    }
    for uri in subject_alt_uris(data) {
        assert!(uri.len() < data.len(), "{uri:?}");
    }
    let escaped = escaped_pem(data);
    assert!(escaped.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)), "{escaped}");
});
