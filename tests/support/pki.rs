//! A test certificate authority and leaf certificates written as PEM files (rcgen).

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

pub struct TestPki {
    pub dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl TestPki {
    /// A new CA in a fresh directory (`ca.pem`).
    pub fn new(name: &str) -> TestPki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "ramjet test CA");
        let key = KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        let dir = crate::support::temp_dir(name);
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        TestPki { dir, issuer: Issuer::new(params, key) }
    }

    /// Writes `<file>.crt` and `<file>.key` for these names.
    pub fn leaf(&self, file: &str, names: &[&str]) {
        let mut params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, names[0]);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(self.dir.join(format!("{file}.crt")), cert.pem()).unwrap();
        std::fs::write(self.dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
}
