//! TLS to backends (`protocol: HTTPS`) over real sockets, on both I/O drivers: the backend is a
//! rustls server with a certificate from a test CA. By default the connection is encrypted without
//! verifying and without SNI (ingress-nginx's `proxy-ssl-verify: off`, `proxy-ssl-server-name:
//! off`); with `verify` the certificate must chain to the CA bundle and carry the server name;
//! `sni` sends it; `subjectAltNames` verify by the names the certificate carries instead; a client
//! certificate is presented when given. Whatever fails the handshake is a 502, counted as a `tls`
//! upstream error, and connections are pooled per endpoint and settings.

use ramjet_test_support as support;
use ramjet_test_support::{h2client, tls_backend};

use h2client::H2Client;
use ramjet_shared::UpstreamErrorKind;
use support::backend::Backend;
use support::client::{get, Conn};
use support::pki::Pki;
use support::{daemon_with, routes_in, DRIVERS};
use tls_backend::TlsBackend;

#[test]
fn https_backends_are_encrypted_verified_named_and_pooled_as_configured() {
    ramjet::install_crypto();
    let pki = Pki::new("backend-tls");
    pki.leaf("api", &["api.internal"]);
    pki.leaf("client", &["ramjet.client"]);
    let other = Pki::new("backend-tls-other");
    let api = TlsBackend::start("api", &pki, "api", None);
    // A backend that wants ramjet's client certificate (issued by the same CA).
    let mtls = TlsBackend::start("mtls", &pki, "api", Some(pki.ca.clone()));
    let plain = Backend::start("plain");
    let other_ca = other.path("ca.pem");
    let yaml = format!(
        r#"
backends:
  default: {{ endpoints: ["{api}"], protocol: HTTPS }}
  verified: {{ endpoints: ["{api}"], protocol: https, tls: {{ verify: true, caFile: ca.pem, serverName: api.internal, sni: true }} }}
  wrongca: {{ endpoints: ["{api}"], protocol: HTTPS, tls: {{ verify: true, caFile: "{other_ca}", serverName: api.internal }} }}
  wrongname: {{ endpoints: ["{api}"], protocol: HTTPS, tls: {{ verify: true, caFile: ca.pem, serverName: other.internal }} }}
  byname: {{ endpoints: ["{api}"], protocol: HTTPS, tls: {{ verify: true, caFile: ca.pem, serverName: sni.internal, sni: true, subjectAltNames: [other.internal, api.internal] }} }}
  wrongnames: {{ endpoints: ["{api}"], protocol: HTTPS, tls: {{ verify: true, caFile: ca.pem, serverName: api.internal, subjectAltNames: [other.internal, "spiffe://c/ns/a/sa/api"] }} }}
  notls: {{ endpoints: ["{plain}"], protocol: HTTPS }}
  mtls: {{ endpoints: ["{mtls}"], protocol: HTTPS, tls: {{ certFile: client.crt, keyFile: client.key }} }}
  nocert: {{ endpoints: ["{mtls}"], protocol: HTTPS }}
routes:
  - {{ host: default.test, path: /, backend: default }}
  - {{ host: verified.test, path: /, backend: verified }}
  - {{ host: wrongca.test, path: /, backend: wrongca }}
  - {{ host: wrongname.test, path: /, backend: wrongname }}
  - {{ host: byname.test, path: /, backend: byname }}
  - {{ host: wrongnames.test, path: /, backend: wrongnames }}
  - {{ host: notls.test, path: /, backend: notls }}
  - {{ host: mtls.test, path: /, backend: mtls }}
  - {{ host: nocert.test, path: /, backend: nocert }}
"#,
        api = api.addr,
        mtls = mtls.addr,
        plain = plain.addr,
        other_ca = other_ca.display(),
    );
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&yaml, &pki.dir), driver, |c| c.workers = 1);
        let http = d.http_addr();

        // ingress-nginx's defaults: encrypted, not verified (the name would not even match), no SNI.
        let r = get(http, "default.test", "/a?b=1");
        assert_eq!((r.status, r.body.as_str()), (200, "api sni=- target=/a?b=1\n"), "{driver:?}");

        // Verified against the CA under the configured name, sent as SNI; one pooled connection
        // for keep-alive requests from HTTP/1.1 and HTTP/2 clients alike.
        let before = api.connections();
        let mut conn = Conn::open(http);
        for i in 0..5 {
            let r = conn.get("verified.test", &format!("/v{i}"));
            assert_eq!((r.status, r.body.clone()), (200, format!("api sni=api.internal target=/v{i}\n")), "{driver:?}");
        }
        let mut h2 = H2Client::connect(http);
        let r = h2.get("verified.test", "/over-h2");
        assert_eq!((r.status, r.text()), (200, "api sni=api.internal target=/over-h2\n".to_string()), "{driver:?}");
        assert_eq!(api.connections() - before, 1, "{driver:?}: TLS connections are pooled");
        assert!(api.snis().contains(&Some("api.internal".into())) && api.snis().contains(&None), "{:?}", api.snis());

        // Whatever fails the handshake is a 502 for the client, counted as a TLS error, and the
        // failed connection serves nobody afterwards.
        let tls_errors = d.stats.upstream_errors(UpstreamErrorKind::Tls);
        // Verified by the names the certificate may carry; the server name is then only the SNI.
        let r = get(http, "byname.test", "/n");
        assert_eq!((r.status, r.body.as_str()), (200, "api sni=sni.internal target=/n\n"), "{driver:?}");
        for host in ["wrongca.test", "wrongname.test", "wrongnames.test", "notls.test", "nocert.test"] {
            let r = get(http, host, "/");
            assert_eq!(r.status, 502, "{driver:?} {host}: {}", r.body);
            assert_eq!(h2.get(host, "/").status, 502, "{driver:?} {host} over HTTP/2");
        }
        assert!(d.stats.upstream_errors(UpstreamErrorKind::Tls) >= tls_errors + 8, "{driver:?}");
        assert_eq!(plain.requests(), 0, "{driver:?}: a plain backend never saw a request in clear");

        // A client certificate is presented to the backend that asks for one.
        let r = get(http, "mtls.test", "/m");
        let client = support::tls_backend::certificate_file_id(&pki.path("client.crt"));
        assert_eq!((r.status, r.body), (200, format!("mtls sni=- target=/m client={client}\n")), "{driver:?}");
        // And the verified backend still answers after all that.
        assert_eq!(get(http, "verified.test", "/").status, 200, "{driver:?}");
        d.shutdown();
    }
}

/// A WebSocket to an `HTTPS` backend: the protocol switch is tunnelled over the backend's TLS
/// session, and a megabyte each way, sent while the echo comes back, arrives whole and in order
/// (the tunnel reads and writes that session at once). Then the tunnel closes with the client.
#[test]
fn websockets_tunnel_to_https_backends() {
    use std::io::{Read, Write};
    ramjet::install_crypto();
    let pki = Pki::new("backend-tls-ws");
    pki.leaf("api", &["api.internal"]);
    let api = TlsBackend::start("api", &pki, "api", None);
    let yaml = format!(
        "backends:\n  ws: {{ endpoints: [\"{}\"], protocol: HTTPS }}\nroutes:\n  - {{ host: ws.test, path: /, backend: ws }}\n",
        api.addr
    );
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&yaml, &pki.dir), driver, |c| c.workers = 1);
        let mut conn = Conn::open(d.http_addr());
        conn.send(b"GET /chat HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
        let r = conn.read_response();
        assert_eq!(r.status, 101, "{driver:?}: {}", r.body);
        let payload: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let mut writer = conn.stream.try_clone().unwrap();
        let sent = payload.clone();
        let sender = std::thread::spawn(move || writer.write_all(&sent).unwrap());
        let mut echoed = vec![0; payload.len()];
        conn.stream.read_exact(&mut echoed).unwrap();
        sender.join().unwrap();
        assert!(echoed == payload, "{driver:?}: the echo differs from what was sent");
        drop(conn);
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        assert_eq!(get(d.http_addr(), "ws.test", "/after").status, 200, "{driver:?}");
        d.shutdown();
    }
}
