//! The suite's TLS set-up (v1.6.1 `suite.go`, "programmatic resources"): a CA in the ConfigMap
//! `tls-checks-ca-certificate` and the server certificates it signs, in the Secrets the suite's TLS
//! backends mount and its TLS listeners name. A Deployment of echo-basic that mounts one of those
//! Secrets serves TLS with it on 8443, so the harness does too.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{string::Ia5String, SanType};
use serde_json::{json, Value};
use support::pki::Pki;
use support::tls_backend;

use super::{base64, support, Kube, INFRA};

/// The suite's `AppBackendNamespace`.
const APP_BACKEND: &str = "gateway-conformance-app-backend";
/// The ConfigMap of the CA that signs every certificate below.
pub(super) const CA_CONFIG_MAP: &str = "tls-checks-ca-certificate";

/// Each Secret the CA signs: its name, its DNS names, and the namespaces it is created in.
const SIGNED: [(&str, &[&str], &[&str]); 3] = [
    // Also `spiffe://abc.example.com/test-identity`, as a URI name (see `create`).
    ("tls-checks-certificate", &["abc.example.com", "other.example.com"], &[INFRA]),
    // The certificate of the TCP echo server's TLS port (`tcp-backend`).
    ("tls-passthrough-checks-certificate", &["abc.example.com"], &[INFRA, APP_BACKEND]),
    // The certificate of TLS listeners in `mode: Terminate`.
    ("tls-terminate-checks-certificate", &["tls.example.com"], &[INFRA]),
];

/// The CAs of client certificates (frontend validation): the ConfigMap of each CA, and the Secret
/// of the client certificate it signs.
const CLIENT_CAS: [(&str, &str); 2] = [
    ("tls-validity-checks-ca-certificate", "tls-validity-checks-client-certificate"),
    ("tls-validity-checks-per-port-ca-certificate", "tls-validity-checks-per-port-client-certificate"),
];
/// The client certificate the CA signs for Gateways to present to backends.
pub(super) const BACKEND_CLIENT: &str = "tls-checks-client-certificate";
/// The suite's `WebBackendNamespace`, where a CA ConfigMap sits that no ReferenceGrant shares.
const WEB_BACKEND: &str = "gateway-conformance-web-backend";

/// The CA and the certificates it signed, as files (`<secret>.crt` / `.key`), and the CAs of
/// client certificates with the client certificate each signed (`client.crt` / `.key`).
pub(super) struct TlsChecks {
    pub pki: Pki,
    client_cas: Vec<Pki>,
}

impl TlsChecks {
    /// Makes the CA and its certificates (files).
    pub fn new() -> TlsChecks {
        let pki = Pki::new("conformance-tls-checks");
        for (secret, names, _) in SIGNED {
            pki.leaf_with(secret, names, |params| {
                if secret == "tls-checks-certificate" {
                    let spiffe = Ia5String::try_from("spiffe://abc.example.com/test-identity").unwrap();
                    params.subject_alt_names.push(SanType::URI(spiffe));
                }
            });
        }
        // The client certificate Gateways present to backends (`spec.tls.backend`).
        pki.leaf_with(BACKEND_CLIENT, &["tls-checks-client"], |params| {
            params.subject_alt_names.clear();
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        });
        let client_cas = CLIENT_CAS
            .iter()
            .map(|(ca, _)| {
                let client = Pki::new(ca);
                client.leaf_with("client", &["client"], |params| {
                    params.subject_alt_names.clear();
                    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
                });
                client
            })
            .collect();
        TlsChecks { pki, client_cas }
    }

    /// The client certificate the CA of ConfigMap `ca` signed: its certificate and key files.
    pub fn client_certificate(&self, ca: &str) -> (PathBuf, PathBuf) {
        let i = CLIENT_CAS.iter().position(|(c, _)| *c == ca).unwrap_or_else(|| panic!("no client CA {ca}"));
        (self.client_cas[i].path("client.crt"), self.client_cas[i].path("client.key"))
    }

    /// Writes the CA's ConfigMap and the Secrets to the API server (their namespaces exist).
    pub fn write_to(&self, admin: &Kube) {
        let pki = &self.pki;
        let ca = std::fs::read_to_string(pki.path("ca.pem")).unwrap();
        let config_map = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": CA_CONFIG_MAP, "namespace": INFRA },
            "data": { "ca.crt": ca },
        });
        admin.apply_value(&config_map, "test").unwrap();
        // A CA that signed none of them, for the policies that must fail validation.
        let mismatch = Pki::new("conformance-mismatch-ca");
        let config_map = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "mismatch-ca-certificate", "namespace": INFRA },
            "data": { "ca.crt": std::fs::read_to_string(mismatch.path("ca.pem")).unwrap() },
        });
        admin.apply_value(&config_map, "test").unwrap();
        let mut config_maps: Vec<(&str, &str, &Pki)> = vec![(WEB_BACKEND, "web-backend-cm", &self.client_cas[0])];
        config_maps.extend(CLIENT_CAS.iter().zip(&self.client_cas).map(|((ca, _), pki)| (INFRA, *ca, pki)));
        for (namespace, name, ca) in config_maps {
            let config_map = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": name, "namespace": namespace },
                "data": { "ca.crt": std::fs::read_to_string(ca.path("ca.pem")).unwrap() },
            });
            admin.apply_value(&config_map, "test").unwrap();
        }
        for ((_, secret), ca) in CLIENT_CAS.iter().zip(&self.client_cas) {
            let (crt, key) =
                (std::fs::read(ca.path("client.crt")).unwrap(), std::fs::read(ca.path("client.key")).unwrap());
            let object = json!({
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": { "name": secret, "namespace": INFRA },
                "data": { "tls.crt": base64(&crt), "tls.key": base64(&key) },
            });
            admin.apply_value(&object, "test").unwrap();
        }
        let signed = SIGNED.iter().map(|(secret, _, namespaces)| (*secret, *namespaces));
        for (secret, namespaces) in signed.chain([(BACKEND_CLIENT, &[INFRA][..])]) {
            let crt = std::fs::read(pki.path(&format!("{secret}.crt"))).unwrap();
            let key = std::fs::read(pki.path(&format!("{secret}.key"))).unwrap();
            for namespace in namespaces {
                let object = json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": { "name": secret, "namespace": namespace },
                    "data": { "tls.crt": base64(&crt), "tls.key": base64(&key) },
                });
                admin.apply_value(&object, "test").unwrap();
            }
        }
    }

    /// The server configuration of a backend that mounts `secret` (no ALPN, as echo-basic).
    pub fn server_config(&self, secret: &str) -> Arc<rustls::ServerConfig> {
        assert!(SIGNED.iter().any(|(s, _, _)| *s == secret), "the suite creates no Secret {secret}");
        tls_backend::server_config(&self.pki, secret, None, &[]).0
    }

    /// The CA of a CA ConfigMap the suite makes.
    pub fn ca_of(&self, config_map: &str) -> rustls::pki_types::CertificateDer<'static> {
        assert_eq!(config_map, CA_CONFIG_MAP, "only the CA of {CA_CONFIG_MAP} signs client certificates for backends");
        self.pki.ca.clone()
    }

    /// A client that trusts the CA (the suite's clients trust `ca.crt` of the ConfigMap).
    pub fn client(&self) -> Arc<rustls::ClientConfig> {
        self.pki.client(rustls::DEFAULT_VERSIONS)
    }
}

/// The Secret a Deployment's echo-basic serves TLS with on 8443: the one its volume mounts, when
/// its container is given `TLS_SERVER_CERT`.
pub(super) fn served_secret(deployment: &Value) -> Option<String> {
    let spec = &deployment["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array()?;
    let env = containers.iter().flat_map(|c| c["env"].as_array().into_iter().flatten());
    if !env.clone().any(|e| e["name"] == "TLS_SERVER_CERT") {
        return None;
    }
    let volumes = spec["volumes"].as_array()?;
    volumes.iter().find_map(|v| v["secret"]["secretName"].as_str()).map(String::from)
}

/// The CA ConfigMap whose CAs a Deployment's echo-basic requires client certificates from: the
/// one its volume mounts, when its container is given `TLS_CLIENT_CACERTS`.
pub(super) fn required_client_ca(deployment: &Value) -> Option<String> {
    let spec = &deployment["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array()?;
    let mut env = containers.iter().flat_map(|c| c["env"].as_array().into_iter().flatten());
    if !env.any(|e| e["name"] == "TLS_CLIENT_CACERTS") {
        return None;
    }
    let volumes = spec["volumes"].as_array()?;
    volumes.iter().find_map(|v| v["configMap"]["name"].as_str()).map(String::from)
}

/// The port echo-basic serves TLS on (`TLS_PORT`'s default).
pub(super) const TLS_PORT: u64 = 8443;
