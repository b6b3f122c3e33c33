//! BackendTLSPolicy over real sockets: HTTPRoutes in a `--manifests` directory whose Services a
//! policy targets are spoken to over TLS, verified against the CA in a ConfigMap, by the policy's
//! hostname or its subject alternative names; a policy that cannot be used makes its Services'
//! requests fail (502), never go out in clear. The cases follow the Gateway API conformance tests
//! (`backendtlspolicy*.go`, v1.6.1) on backends of our own; their status is checked against a
//! real API server in `tests/cluster/gateway.rs`.

use ramjet_test_support as support;

use std::path::Path;
use std::time::Duration;

use support::backend::Backend;
use support::client::{get, served_by};
use support::manifests::Service;
use support::pki::Pki;
use support::tls_backend::TlsBackend;
use support::{eventually, manifests_daemon, temp_dir, DRIVERS, GATEWAY_CLASS};

const SPIFFE_ID: &str = "spiffe://cluster.test/ns/shop/sa/api";

const GATEWAY: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: shop }
spec:
  gatewayClassName: ramjet
  listeners: [{ name: http, port: 80, protocol: HTTP }]
"#;

/// A policy on `service` (its port `section` when given), verified by `validation` (YAML flow).
fn policy(name: &str, service: &str, section: Option<&str>, validation: &str, created: &str) -> String {
    let section = section.map(|s| format!(", sectionName: {s}")).unwrap_or_default();
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{ name: {name}, namespace: shop, creationTimestamp: \"{created}\" }}\nspec:\n  targetRefs: [{{ group: \"\", kind: Service, name: {service}{section} }}]\n  validation: {validation}\n"
    )
}

fn config_map(name: &str, ca: &str) -> String {
    let ca = ca.replace('\n', "\n    ");
    format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: {name}, namespace: shop }}\ndata:\n  ca.crt: |\n    {ca}\n")
}

/// An HTTPRoute sending `/<path>` to Service `<path>` port 443.
fn route(paths: &[&str]) -> String {
    let rules: String = paths
        .iter()
        .map(|p| format!("    - matches: [{{ path: {{ type: PathPrefix, value: /{p} }} }}]\n      backendRefs: [{{ name: {p}, port: 443 }}]\n"))
        .collect();
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: api, namespace: shop }}\nspec:\n  parentRefs: [{{ name: edge }}]\n  hostnames: [api.shop.test]\n  rules:\n{rules}"
    )
}

fn write(path: &Path, text: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(temporary, path).unwrap();
}

#[test]
fn services_with_a_backend_tls_policy_are_verified_by_its_hostname_or_names_and_fail_closed_otherwise() {
    ramjet::install_crypto();
    let pki = Pki::new("btls-policy");
    // The backend's certificate: a DNS name and a SPIFFE id, issued by the policy's CA.
    pki.leaf_with("api", &["abc.example.com"], |params| {
        let uri = rcgen::string::Ia5String::try_from(SPIFFE_ID).unwrap();
        params.subject_alt_names.push(rcgen::SanType::URI(uri));
    });
    let other = Pki::new("btls-policy-other");
    let api = TlsBackend::start("api", &pki, "api", None);
    let plain = Backend::start("plain");
    let ca = std::fs::read_to_string(pki.path("ca.pem")).unwrap();
    let other_ca = std::fs::read_to_string(other.path("ca.pem")).unwrap();

    // Each case is a Service of its own to the same backend, targeted by the policy named after it.
    let cases = [
        ("valid", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: ca }], hostname: abc.example.com }"),
        ("host-mismatch", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: ca }], hostname: abc.example.org }"),
        ("cert-mismatch", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: other-ca }], hostname: abc.example.com }"),
        ("san-dns", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: ca }], hostname: sni.example.com, subjectAltNames: [{ type: Hostname, hostname: abc.example.com }] }"),
        ("san-dns-mismatch", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: ca }], hostname: abc.example.com, subjectAltNames: [{ type: Hostname, hostname: other.example.com }] }"),
        ("san-uri", &format!("{{ caCertificateRefs: [{{ group: \"\", kind: ConfigMap, name: ca }}], hostname: sni.example.com, subjectAltNames: [{{ type: URI, uri: \"{SPIFFE_ID}\" }}] }}")),
        ("san-uri-mismatch", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: ca }], hostname: abc.example.com, subjectAltNames: [{ type: URI, uri: \"spiffe://cluster.test/ns/shop/sa/other\" }] }"),
        ("missing-ca", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: nowhere }], hostname: abc.example.com }"),
        ("invalid-kind", "{ caCertificateRefs: [{ group: \"\", kind: Pod, name: ca }], hostname: abc.example.com }"),
        ("system", "{ wellKnownCACertificates: System, hostname: abc.example.com }"),
        ("reconciled", "{ caCertificateRefs: [{ group: \"\", kind: ConfigMap, name: changing }], hostname: abc.example.com }"),
    ];
    let mut paths: Vec<&str> = cases.iter().map(|c| c.0).collect();
    paths.extend(["conflicted", "by-port", "no-policy"]);
    let mut manifests = format!("{GATEWAY_CLASS}{GATEWAY}");
    manifests += &config_map("ca", &ca);
    manifests += &config_map("other-ca", &other_ca);
    manifests += &route(&paths);
    for (name, validation) in &cases {
        manifests += &policy(name, name, None, validation, "2026-01-01T00:00:00Z");
    }
    // Two policies on one Service: the older one holds it; the newer (wrong CA) is not used.
    let valid = cases[0].1;
    manifests += &policy("conflicted-old", "conflicted", None, valid, "2026-01-01T00:00:00Z");
    manifests += &policy("conflicted-new", "conflicted", None, cases[2].1, "2026-01-02T00:00:00Z");
    // A port's own policy (by its name) comes before the Service's.
    manifests += &policy("by-port-service", "by-port", None, cases[2].1, "2026-01-01T00:00:00Z");
    manifests += &policy("by-port-port", "by-port", Some("https"), valid, "2026-01-02T00:00:00Z");
    for path in &paths {
        let endpoint = if *path == "no-policy" { plain.addr } else { api.addr };
        manifests += "---\n";
        manifests += &Service::new("shop", path).port("https", 443).endpoints(&[endpoint]).yaml();
    }
    let with_ca = |changing: &str| format!("{manifests}{}", config_map("changing", changing));

    for driver in DRIVERS {
        let dir = temp_dir("btls-policy-manifests");
        let file = dir.join("all.yaml");
        write(&file, &with_ca(&ca));
        let d = manifests_daemon(&dir, driver, 1);
        let http = d.http_addr();
        assert!(
            eventually(Duration::from_secs(10), || get(http, "api.shop.test", "/valid").status == 200),
            "{driver:?}"
        );

        // Verified by the hostname, which is the SNI; by a DNS or URI name the certificate carries,
        // the hostname then only the SNI.
        for (path, sni) in
            [("valid", "abc.example.com"), ("san-dns", "sni.example.com"), ("san-uri", "sni.example.com")]
        {
            let r = get(http, "api.shop.test", &format!("/{path}"));
            assert_eq!(
                (r.status, r.body.as_str()),
                (200, format!("api sni={sni} target=/{path}\n").as_str()),
                "{driver:?}"
            );
        }
        // A name or CA the certificate does not match, and every policy that cannot be used: 502,
        // the request never reaching the backend in clear either.
        let before = plain.requests();
        for path in [
            "host-mismatch",
            "cert-mismatch",
            "san-dns-mismatch",
            "san-uri-mismatch",
            "missing-ca",
            "invalid-kind",
            "system",
        ] {
            let r = get(http, "api.shop.test", &format!("/{path}"));
            assert_eq!(r.status, 502, "{driver:?} /{path}: {}", r.body);
        }
        assert_eq!(plain.requests(), before, "{driver:?}");
        // The older of two policies decides; a port's policy comes before its Service's.
        for path in ["conflicted", "by-port"] {
            let r = get(http, "api.shop.test", &format!("/{path}"));
            assert_eq!(
                (r.status, r.body.as_str()),
                (200, format!("api sni=abc.example.com target=/{path}\n").as_str()),
                "{driver:?}"
            );
        }
        // A Service no policy targets is spoken to in clear, as before.
        let r = get(http, "api.shop.test", "/no-policy");
        assert_eq!((r.status, served_by(&r)), (200, "plain".to_string()), "{driver:?}");

        // What is wrong is told, policy by policy.
        let diagnostics = d.published.current().diagnostics.clone();
        let told = |name: &str, words: &str| {
            diagnostics
                .iter()
                .any(|x| x.object.name == name && x.object.kind == "BackendTLSPolicy" && x.message.contains(words))
        };
        assert!(told("missing-ca", "ConfigMap shop/nowhere does not exist"), "{diagnostics:#?}");
        assert!(told("invalid-kind", "only ConfigMaps and Secrets"), "{diagnostics:#?}");
        assert!(
            told("conflicted-new", "already targeted by the older BackendTLSPolicy conflicted-old"),
            "{diagnostics:#?}"
        );

        // The CA's ConfigMap emptied, then filled again: the policy follows it.
        write(&file, &with_ca(""));
        assert!(
            eventually(Duration::from_secs(10), || get(http, "api.shop.test", "/reconciled").status == 502),
            "{driver:?}"
        );
        write(&file, &with_ca(&ca));
        assert!(
            eventually(Duration::from_secs(10), || get(http, "api.shop.test", "/reconciled").status == 200),
            "{driver:?}"
        );
        d.shutdown();
    }
}
