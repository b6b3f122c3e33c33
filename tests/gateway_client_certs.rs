//! A Gateway's client-certificate validation (`spec.tls.frontend`) over real sockets: Gateways and
//! ConfigMaps in a `--manifests` directory, a rustls client with and without certificates, and a
//! backend that echoes what it was told. The cases are the Gateway API conformance tests'
//! (`gateway-with-clientcertificate-validation*.go`, `gateway-invalid-*`, v1.6.1): the default
//! validation and a per-port one (ramjet tells the two listeners apart by server name, as their
//! hostnames differ), the insecure fallback, and a validation without a usable CA.

use ramjet_test_support as support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::ExtendedKeyUsagePurpose;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use support::backend::Backend;
use support::manifests::Service;
use support::pki::Pki;
use support::{eventually, manifests_daemon, temp_dir, DRIVERS, GATEWAY_CLASS};

/// What a client got: the status and body, or why the exchange failed (a refused handshake).
type Answer = Result<(u16, String), String>;

/// `GET /` with `Host: host` over TLS to `addr`, sending `host` as SNI, presenting `cert` (files
/// `<name>.crt`/`.key` of `pki`) when the server asks.
fn ask(addr: SocketAddr, server: &Pki, host: &str, cert: Option<(&Pki, &str)>, extra: &str) -> Answer {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server.ca.clone()).unwrap();
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match cert {
        None => builder.with_no_client_auth(),
        Some((pki, name)) => {
            let chain = CertificateDer::pem_file_iter(pki.path(&format!("{name}.crt"))).unwrap();
            let chain: Vec<CertificateDer<'static>> = chain.map(|c| c.unwrap()).collect();
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    support::client::tls_get(addr, Arc::new(config), host, host, extra)
}

/// The value of a field the echo backend was sent (`header=<name>: <value>` in its answer).
fn told<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    let prefix = format!("header={name}: ");
    answer.as_ref().ok()?.1.lines().find_map(|l| l.strip_prefix(prefix.as_str()))
}

fn served_by(answer: &Answer) -> Option<&str> {
    answer.as_ref().ok().filter(|a| a.0 == 200)?.1.lines().find_map(|l| l.strip_prefix("backend="))
}

fn config_map(name: &str, ca: &Path) -> String {
    let pem = std::fs::read_to_string(ca).unwrap().replace('\n', "\n    ");
    format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: {name}, namespace: infra }}\ndata:\n  ca.crt: |\n    {pem}\n")
}

fn tls_secret(pki: &Pki) -> String {
    let b64 = |f: &str| support::control_plane::base64(&std::fs::read(pki.path(f)).unwrap());
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: server, namespace: infra }}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64("server.crt"),
        b64("server.key")
    )
}

/// A Gateway with an HTTP listener and HTTPS listeners (`name:port:hostname`) on the TLS
/// Secret `server`, its frontend TLS as given (YAML flow), and one HTTPRoute per HTTPS listener
/// to Service `<listener name>`, attached to it and to the HTTP listener.
fn gateway(name: &str, frontend: &str, listeners: &[(&str, u16, &str)]) -> String {
    let mut out = format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: {name}, namespace: infra }}\nspec:\n  gatewayClassName: ramjet\n  tls: {{ frontend: {frontend} }}\n  listeners:\n    - {{ name: http, port: 80, protocol: HTTP }}\n"
    );
    for (listener, port, host) in listeners {
        out += &format!("    - {{ name: {listener}, port: {port}, protocol: HTTPS, hostname: {host}, tls: {{ certificateRefs: [{{ name: server }}] }} }}\n");
    }
    for (listener, _, host) in listeners {
        out += &format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: {listener}, namespace: infra }}\nspec:\n  parentRefs: [{{ name: {name}, sectionName: {listener} }}, {{ name: {name}, sectionName: http }}]\n  hostnames: [{host}]\n  rules: [{{ backendRefs: [{{ name: {listener}, port: 80 }}] }}]\n"
        );
    }
    out
}

#[test]
fn a_gateways_frontend_validation_requires_certificates_from_its_cas_in_the_handshake() {
    ramjet::install_crypto();
    let server = Pki::new("gw-mtls-server");
    let names = ["example.org", "second-example.org", "fallback.example.org", "invalid.example.org"];
    server.leaf("server", &names);
    let client = |pki: &Pki, name: &str| {
        pki.leaf_with(name, &[&format!("{name}.client")], |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        });
    };
    let (default_ca, per_port_ca) = (Pki::new("gw-mtls-default"), Pki::new("gw-mtls-per-port"));
    client(&default_ca, "default");
    client(&per_port_ca, "per-port");
    let backends: Vec<Backend> = ["https", "https-with-hostname", "fallback", "invalid"].map(Backend::start).into();

    let mut manifests = String::from(GATEWAY_CLASS);
    manifests += &tls_secret(&server);
    manifests += &config_map("default-ca", &default_ca.path("ca.pem"));
    manifests += &config_map("per-port-ca", &per_port_ca.path("ca.pem"));
    let validation = |map: &str, mode: &str| {
        format!("{{ validation: {{ caCertificateRefs: [{{ group: \"\", kind: ConfigMap, name: {map} }}]{mode} }} }}")
    };
    manifests += &gateway(
        "validating",
        &format!(
            "{{ default: {}, perPort: [{{ port: 8443, tls: {} }}] }}",
            validation("default-ca", ""),
            validation("per-port-ca", "")
        ),
        &[("https", 443, "example.org"), ("https-with-hostname", 8443, "second-example.org")],
    );
    let fallback = validation("default-ca", ", mode: AllowInsecureFallback");
    manifests +=
        &gateway("insecure", &format!("{{ default: {fallback} }}"), &[("fallback", 443, "fallback.example.org")]);
    manifests += &gateway(
        "broken",
        &format!("{{ default: {} }}", validation("nowhere", "")),
        &[("invalid", 443, "invalid.example.org")],
    );
    for backend in &backends {
        manifests += "---\n";
        manifests += &Service::new("infra", &backend.name).endpoints(&[backend.addr]).yaml();
    }

    for driver in DRIVERS {
        let dir = temp_dir("gw-mtls");
        std::fs::write(dir.join("all.yaml"), &manifests).unwrap();
        let d = manifests_daemon(&dir, driver, 1);
        let https = d.https_addr().unwrap();
        let get = |host: &str, cert: Option<(&Pki, &str)>| ask(https, &server, host, cert, "");
        let default = Some((&default_ca, "default"));
        let per_port = Some((&per_port_ca, "per-port"));
        assert!(
            eventually(Duration::from_secs(10), || served_by(&get("example.org", default)) == Some("https")),
            "{driver:?}: {:?}",
            get("example.org", default)
        );

        // The default validation: a certificate from its CA passes, and the backend is told so.
        let answer = get("example.org", default);
        assert_eq!(told(&answer, "ssl-client-verify"), Some("SUCCESS"), "{driver:?}: {answer:?}");
        assert_eq!(told(&answer, "ssl-client-subject-dn"), Some("CN=default.client"), "{driver:?}");
        // One from the per-port CA, or none: the handshake itself refuses (no HTTP answer at all).
        for cert in [per_port, None] {
            let answer = get("example.org", cert);
            assert!(answer.is_err(), "{driver:?}: {answer:?}");
        }
        // The per-port validation (port 8443, hostname second-example.org): the other way round.
        assert_eq!(served_by(&get("second-example.org", per_port)), Some("https-with-hostname"), "{driver:?}");
        for cert in [default, None] {
            let answer = get("second-example.org", cert);
            assert!(answer.is_err(), "{driver:?}: {answer:?}");
        }
        // The HTTP listener has no validation; a forged field does not reach the backend.
        let plain = support::client::Conn::open(d.http_addr()).get_with(
            "example.org",
            "/",
            "ssl-client-verify: SUCCESS\r\nssl-client-subject-dn: CN=admin\r\n",
        );
        assert_eq!(plain.status, 200, "{driver:?}: {}", plain.body);
        assert!(!plain.body.contains("SUCCESS") && !plain.body.contains("CN=admin"), "{driver:?}: {}", plain.body);

        // Insecure fallback: any certificate or none gets through, and the backend is told the verdict.
        let none = get("fallback.example.org", None);
        assert_eq!(
            (served_by(&none), told(&none, "ssl-client-verify")),
            (Some("fallback"), Some("NONE")),
            "{driver:?}"
        );
        let stranger = get("fallback.example.org", per_port);
        assert_eq!(served_by(&stranger), Some("fallback"), "{driver:?}: {stranger:?}");
        assert!(
            told(&stranger, "ssl-client-verify").is_some_and(|v| v.starts_with("FAILED:")),
            "{driver:?}: {stranger:?}"
        );
        let good = get("fallback.example.org", default);
        assert_eq!(told(&good, "ssl-client-verify"), Some("SUCCESS"), "{driver:?}: {good:?}");

        // No usable CA: its name refuses every handshake, and the Gateway says why.
        for cert in [default, per_port, None] {
            let answer = get("invalid.example.org", cert);
            assert!(answer.is_err(), "{driver:?}: {answer:?}");
        }
        assert_eq!(backends[3].requests(), 0, "{driver:?}");
        let diagnostics = d.published.current().diagnostics.clone();
        assert!(
            diagnostics
                .iter()
                .any(|x| x.object.name == "broken" && x.message.contains("ConfigMap infra/nowhere does not exist")),
            "{driver:?}: {diagnostics:#?}"
        );
        d.shutdown();
    }
}
