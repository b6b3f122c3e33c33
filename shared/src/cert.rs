//! The content-addressed certificate store.
//!
//! A certificate's id is the SHA-256 of its PEM chain and key, so re-applying an unchanged Secret yields
//! the same id, and successive generations share the parsed key by id instead of re-parsing it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use rustls::sign::CertifiedKey;
use sha2::{Digest as _, Sha256};

/// Content address of a certificate: SHA-256 over the chain bytes, a separator, and the key bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct CertId(#[serde(serialize_with = "crate::digest::as_bytes")] pub [u8; 32]);

impl CertId {
    /// The id of a chain + key pair, as they were read (PEM bytes).
    pub fn of(chain_pem: &[u8], key_pem: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update((chain_pem.len() as u64).to_be_bytes());
        hasher.update(chain_pem);
        hasher.update(key_pem);
        CertId(hasher.finalize().into())
    }

    /// The first 12 hex digits, enough to tell certificates apart in logs and the admin API.
    pub fn short(&self) -> String {
        self.0[..6].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for CertId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CertId({})", self.short())
    }
}

impl fmt::Display for CertId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

/// A parsed certificate, built once per content id and shared by every generation that names it.
pub struct Certificate {
    pub id: CertId,
    /// The chain and signing key, ready for rustls; built once, never per handshake.
    pub key: Arc<CertifiedKey>,
    /// Where it came from (a file path or `namespace/secret`), for diagnostics.
    pub source: String,
    /// End of validity of the leaf, when it could be read.
    pub not_after: Option<SystemTime>,
}

impl fmt::Debug for Certificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificate").field("id", &self.id).field("source", &self.source).finish()
    }
}

/// The set of certificates that workers may hand out, by id. Immutable once published: the applier
/// builds a new store (old ids plus new ones) and publishes it before any table that names them.
#[derive(Default, Debug, Clone)]
pub struct CertStore {
    certs: HashMap<CertId, Arc<Certificate>>,
}

impl CertStore {
    pub fn get(&self, id: &CertId) -> Option<&Arc<Certificate>> {
        self.certs.get(id)
    }

    pub fn contains(&self, id: &CertId) -> bool {
        self.certs.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.certs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.certs.is_empty()
    }

    pub fn ids(&self) -> impl Iterator<Item = &CertId> {
        self.certs.keys()
    }

    /// A new store with everything in `self` plus `added` (ids already present are kept as they are).
    pub fn with(&self, added: impl IntoIterator<Item = Arc<Certificate>>) -> CertStore {
        let mut certs = self.certs.clone();
        for cert in added {
            certs.entry(cert.id).or_insert(cert);
        }
        CertStore { certs }
    }

    /// A new store keeping only the ids for which `keep` is true.
    pub fn retain(&self, mut keep: impl FnMut(&CertId) -> bool) -> CertStore {
        let certs = self.certs.iter().filter(|(id, _)| keep(id)).map(|(k, v)| (*k, v.clone())).collect();
        CertStore { certs }
    }
}
