//! TLSRoutes over real sockets: a Gateway's `TLS` listener in `Passthrough` mode beside an `HTTPS`
//! listener on ramjet's one TLS port (`--manifests`). A connection whose server name a TLSRoute has
//! reaches its backend unopened — the client sees the backend's own certificate and the backend
//! the client's SNI — while other names are terminated by ramjet and routed by their HTTPRoutes.
//! The cases follow the Gateway API conformance tests (`tlsroute-simple-same-namespace`,
//! `tlsroute-hostname-intersection`, v1.6.1).

use ramjet_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use support::backend::Backend;
use support::client::tls_get;
use support::manifests::Service;
use support::pki::Pki;
use support::tls_backend::TlsBackend;
use support::{eventually, manifests_daemon, temp_dir, DRIVERS, GATEWAY_CLASS};

fn tls_secret(pki: &Pki, file: &str) -> String {
    let b64 = |f: &str| support::control_plane::base64(&std::fs::read(pki.path(f)).unwrap());
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: edge-cert, namespace: infra }}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(&format!("{file}.crt")),
        b64(&format!("{file}.key"))
    )
}

const OBJECTS: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners:
    - name: passthrough
      port: 443
      protocol: TLS
      hostname: "*.example.com"
      tls: { mode: Passthrough }
      allowedRoutes: { kinds: [{ kind: TLSRoute }] }
    - name: https
      port: 443
      protocol: HTTPS
      hostname: www.other.test
      tls: { certificateRefs: [{ name: edge-cert }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: api, namespace: infra }
spec:
  parentRefs: [{ name: edge, sectionName: passthrough }]
  hostnames: [abc.example.com, abc.example.org]
  rules: [{ backendRefs: [{ name: api, port: 8443 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: web, namespace: infra }
spec:
  parentRefs: [{ name: edge, sectionName: https }]
  rules: [{ backendRefs: [{ name: web, port: 80 }] }]
"#;

#[test]
fn a_tlsroute_passes_its_names_through_unopened_beside_terminated_https() {
    ramjet::install_crypto();
    // The backend's own certificate, from a CA only the client of a passed-through name trusts.
    let backend_pki = Pki::new("tlsroute-backend");
    backend_pki.leaf("api", &["abc.example.com"]);
    let api = TlsBackend::start("api", &backend_pki, "api", None);
    // Ramjet's certificate for the terminated listener.
    let edge_pki = Pki::new("tlsroute-edge");
    edge_pki.leaf("edge", &["www.other.test"]);
    let web = Backend::start("web");
    let manifests = [
        GATEWAY_CLASS.to_string(),
        OBJECTS.to_string(),
        tls_secret(&edge_pki, "edge"),
        "---\n".into(),
        Service::new("infra", "api").port("tls", 8443).endpoints(&[api.addr]).yaml(),
        "---\n".into(),
        Service::new("infra", "web").endpoints(&[web.addr]).yaml(),
    ]
    .concat();
    let trusting = |pki: &Pki| {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca.clone()).unwrap();
        Arc::new(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth())
    };
    for driver in DRIVERS {
        let dir = temp_dir("tlsroute");
        std::fs::write(dir.join("all.yaml"), &manifests).unwrap();
        let d = manifests_daemon(&dir, driver, 1);
        let https = d.https_addr().unwrap();
        let passed = || tls_get(https, trusting(&backend_pki), "abc.example.com", "abc.example.com", "");
        assert!(eventually(Duration::from_secs(10), || passed().is_ok()), "{driver:?}: {:?}", passed());
        // The backend's certificate verified, and the backend saw the client's server name.
        assert_eq!(passed().unwrap(), (200, "api sni=abc.example.com target=/\n".to_string()), "{driver:?}");
        // Another name: terminated by ramjet with the listener's certificate, routed over HTTP.
        let terminated = tls_get(https, trusting(&edge_pki), "www.other.test", "www.other.test", "").unwrap();
        assert_eq!(terminated.0, 200, "{driver:?}: {terminated:?}");
        assert!(terminated.1.contains("backend=web"), "{driver:?}: {terminated:?}");
        // A route hostname outside the listener's is not passed through (hostname intersection):
        // ramjet answers that handshake itself, which the backend's CA does not vouch for.
        let outside = tls_get(https, trusting(&backend_pki), "abc.example.org", "abc.example.org", "");
        assert!(outside.is_err(), "{driver:?}: {outside:?}");
        // Nor a name of the listener's wildcard that no route has.
        let unrouted = tls_get(https, trusting(&backend_pki), "other.example.com", "other.example.com", "");
        assert!(unrouted.is_err(), "{driver:?}: {unrouted:?}");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
    }
}
