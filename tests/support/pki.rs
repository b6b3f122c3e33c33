//! A test certificate authority and leaf certificates written as PEM files (rcgen), and rustls
//! clients that trust it.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

pub struct Pki {
    pub dir: PathBuf,
    pub ca: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        Pki::with_subject(name, "ramjet test CA")
    }

    /// A CA whose subject is `CN=<subject>`.
    pub fn with_subject(name: &str, subject: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, subject);
        let key = KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        let dir = crate::temp_dir(name);
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca: ca.der().clone(), issuer: Issuer::new(params, key) }
    }

    /// Writes `<file>.crt` / `<file>.key` for these names; returns the leaf DER.
    pub fn leaf(&self, file: &str, names: &[&str]) -> CertificateDer<'static> {
        self.leaf_with(file, names, |_| {})
    }

    pub fn leaf_with(
        &self,
        file: &str,
        names: &[&str],
        tweak: impl FnOnce(&mut CertificateParams),
    ) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        // A subject of its own, or OpenSSL-based clients take the leaf for self-signed.
        params.distinguished_name.push(rcgen::DnType::CommonName, names[0]);
        tweak(&mut params);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(self.dir.join(format!("{file}.crt")), cert.pem()).unwrap();
        std::fs::write(self.dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
        cert.der().clone()
    }

    pub fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }

    pub fn client(&self, versions: &[&'static rustls::SupportedProtocolVersion]) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.clone()).unwrap();
        let mut config =
            ClientConfig::builder_with_protocol_versions(versions).with_root_certificates(roots).with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}
