//! Arbitrary htpasswd text (a Secret's `auth` key comes from the cluster) and an arbitrary
//! `Authorization` value (from any client): parsing and checking never panic, a check gives the
//! same answer twice, and a `{PLAIN}` line made from the decoded credentials lets exactly them in.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ramjet_shared::htpasswd::{basic_credentials, Htpasswd};

/// Bytes that an htpasswd line carries as they are (no separator, no space, no comment mark).
fn plain(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| b.is_ascii_graphic() && b != b':') && bytes[0] != b'#'
}

fuzz_target!(|input: (&str, &[u8])| {
    let (file, authorization) = input;
    let (users, _warnings) = Htpasswd::parse(file);
    let Some((user, password)) = basic_credentials(authorization) else { return };
    let first = users.verify(&user, &password);
    assert_eq!(first, users.verify(&user, &password), "the same answer twice");
    if plain(&user) && plain(&password) {
        let (u, p) = (String::from_utf8_lossy(&user), String::from_utf8_lossy(&password));
        let (own, warnings) = Htpasswd::parse(&format!("{u}:{{PLAIN}}{p}\n"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(own.verify(&user, &password), "{u}:{p}");
        let mut other = password.clone();
        other.push(b'x');
        assert!(!own.verify(&user, &other));
    }
});
