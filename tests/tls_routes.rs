//! TLSRoutes over real sockets: a Gateway's `TLS` listener in `Passthrough` mode beside an `HTTPS`
//! listener on ramjet's one TLS port (`--manifests`). A connection whose server name a TLSRoute has
//! reaches its backend unopened — the client sees the backend's own certificate and the backend
//! the client's SNI — while other names are terminated by ramjet and routed by their HTTPRoutes.
//! The cases follow the Gateway API conformance tests (`tlsroute-simple-same-namespace`,
//! `tlsroute-hostname-intersection`, v1.6.1).
//!
//! TLS listeners in `Terminate` mode on that port too, and weights there, beside HTTPS.
//!
//! And `TLS` listeners on a port of their own, as `tlsroute-mixed-termination-same-namespace` has
//! them: one port where some names are terminated by ramjet (the backend gets plain bytes) and
//! others passed through, each name's connections split across its route's backends by weight
//! (with rustls clients and `openssl s_client`);
//! and the same port without a cluster, from a static routes file's `tlsPorts:` entries.

use ramjet_test_support as support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use support::backend::Backend;
use support::client::tls_get;
use support::echo::EchoBackend;
use support::manifests::Service;
use support::pki::Pki;
use support::tls_backend::TlsBackend;
use support::{daemon_with, eventually, free_port, manifests_daemon, routes_in, temp_dir, DRIVERS, GATEWAY_CLASS};

fn tls_secret(pki: &Pki, file: &str) -> String {
    let b64 = |f: &str| support::control_plane::base64(&std::fs::read(pki.path(f)).unwrap());
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: {file}-cert, namespace: infra }}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
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
    for driver in DRIVERS {
        let dir = temp_dir("tlsroute");
        std::fs::write(dir.join("all.yaml"), &manifests).unwrap();
        let d = manifests_daemon(&dir, driver, 1);
        let https = d.https_addr().unwrap();
        let passed =
            || tls_get(https, backend_pki.client(rustls::DEFAULT_VERSIONS), "abc.example.com", "abc.example.com", "");
        assert!(eventually(Duration::from_secs(10), || passed().is_ok()), "{driver:?}: {:?}", passed());
        // The backend's certificate verified, and the backend saw the client's server name.
        assert_eq!(passed().unwrap(), (200, "api sni=abc.example.com target=/\n".to_string()), "{driver:?}");
        // Another name: terminated by ramjet with the listener's certificate, routed over HTTP.
        let terminated =
            tls_get(https, edge_pki.client(rustls::DEFAULT_VERSIONS), "www.other.test", "www.other.test", "").unwrap();
        assert_eq!(terminated.0, 200, "{driver:?}: {terminated:?}");
        assert!(terminated.1.contains("backend=web"), "{driver:?}: {terminated:?}");
        // A route hostname outside the listener's is not passed through (hostname intersection):
        // ramjet answers that handshake itself, which the backend's CA does not vouch for.
        let outside =
            tls_get(https, backend_pki.client(rustls::DEFAULT_VERSIONS), "abc.example.org", "abc.example.org", "");
        assert!(outside.is_err(), "{driver:?}: {outside:?}");
        // Nor a name of the listener's wildcard that no route has.
        let unrouted =
            tls_get(https, backend_pki.client(rustls::DEFAULT_VERSIONS), "other.example.com", "other.example.com", "");
        assert!(unrouted.is_err(), "{driver:?}: {unrouted:?}");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
    }
}

/// One TLS port of its own (`{PORT}`): `tls.example.com` terminated with the listener's
/// certificate and relayed in plain to two echo backends at weights 3:1, `abc.example.com` passed
/// through to a TLS backend.
const MIXED: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: mixed, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners:
    - name: tls-terminate
      port: {PORT}
      protocol: TLS
      hostname: tls.example.com
      tls: { mode: Terminate, certificateRefs: [{ name: terminate-cert }] }
      allowedRoutes: { kinds: [{ kind: TLSRoute }] }
    - name: tls-passthrough
      port: {PORT}
      protocol: TLS
      hostname: abc.example.com
      tls: { mode: Passthrough }
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: plain, namespace: infra }
spec:
  parentRefs: [{ name: mixed, sectionName: tls-terminate }]
  hostnames: [tls.example.com]
  rules: [{ backendRefs: [{ name: echo-a, port: 80, weight: 3 }, { name: echo-b, port: 80, weight: 1 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: api, namespace: infra }
spec:
  parentRefs: [{ name: mixed, sectionName: tls-passthrough }]
  hostnames: [abc.example.com]
  rules: [{ backendRefs: [{ name: api, port: 8443 }] }]
"#;

/// Over TLS to `port` with server name `sni`: reads the echo backend's greeting, sends `payload`
/// (from another thread, while the echo comes back) and reads it back whole. The backend's name
/// and what came back.
fn tls_exchange(
    port: u16,
    roots: Arc<rustls::ClientConfig>,
    sni: &str,
    payload: &[u8],
) -> std::io::Result<(String, Vec<u8>)> {
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let session = rustls::ClientConnection::new(roots, name).map_err(std::io::Error::other)?;
    let tcp = TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = BufReader::new(rustls::StreamOwned::new(session, tcp));
    let mut greeting = String::new();
    tls.read_line(&mut greeting)?;
    // The session is one object: write in pieces between reads so neither side's buffers fill.
    let mut echoed = vec![0u8; payload.len()];
    for (sent, back) in payload.chunks(16 * 1024).zip(echoed.chunks_mut(16 * 1024)) {
        tls.get_mut().write_all(sent)?;
        tls.read_exact(back)?;
    }
    Ok((greeting.trim().to_string(), echoed))
}

/// `openssl s_client` to `port` for `sni`, trusting `ca`: sends `input`, waits a second for what
/// comes back, and returns what it printed (standard output, then standard error).
fn s_client(port: u16, sni: &str, ca: &std::path::Path, input: &[u8]) -> (String, String) {
    use std::process::{Command, Stdio};
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-servername", sni, "-verify_return_error"])
        .args(["-verify_hostname", sni, "-ign_eof", "-CAfile"])
        .arg(ca)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl");
    child.stdin.as_mut().unwrap().write_all(input).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_tls_port_of_its_own_terminates_some_names_passes_others_through_and_splits_by_weight() {
    ramjet::install_crypto();
    let backend_pki = Pki::new("tlsport-backend");
    backend_pki.leaf("api", &["abc.example.com"]);
    let api = TlsBackend::start("api", &backend_pki, "api", None);
    let edge_pki = Pki::new("tlsport-edge");
    edge_pki.leaf("terminate", &["tls.example.com"]);
    let (a, b) = (EchoBackend::start("echo-a"), EchoBackend::start("echo-b"));
    let payload: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    let mut total = 0;
    for driver in DRIVERS {
        let port = free_port();
        let manifests = [
            GATEWAY_CLASS.to_string(),
            MIXED.replace("{PORT}", &port.to_string()),
            tls_secret(&edge_pki, "terminate"),
            "---\n".into(),
            Service::new("infra", "api").port("tls", 8443).endpoints(&[api.addr]).yaml(),
            "---\n".into(),
            Service::new("infra", "echo-a").endpoints(&[a.addr]).yaml(),
            "---\n".into(),
            Service::new("infra", "echo-b").endpoints(&[b.addr]).yaml(),
        ]
        .concat();
        let dir = temp_dir("tlsport");
        std::fs::write(dir.join("all.yaml"), &manifests).unwrap();
        let d = manifests_daemon(&dir, driver, 2);
        let terminated = || tls_exchange(port, edge_pki.client(rustls::DEFAULT_VERSIONS), "tls.example.com", &payload);
        assert!(eventually(Duration::from_secs(10), || terminated().is_ok()), "{driver:?}: {:?}", terminated().err());
        // Terminated by ramjet's certificate for the name; the backend got the plain bytes, and
        // what it echoed came back whole.
        let (name, echoed) = terminated().unwrap();
        assert!(name == "echo-a" || name == "echo-b", "{driver:?}: {name}");
        assert!(echoed == payload, "{driver:?}: the echo differs");
        // Weights 3:1 over 200 connections: 50 expected on echo-b, σ ≈ 6.1.
        let mut on_b = 0;
        for _ in 0..200 {
            let (name, _) =
                tls_exchange(port, edge_pki.client(rustls::DEFAULT_VERSIONS), "tls.example.com", b"x").unwrap();
            on_b += usize::from(name == "echo-b");
        }
        assert!((25..=75).contains(&on_b), "{driver:?}: {on_b} of 200 on echo-b at weights 3:1");
        // The other name of the same port: passed through, the backend's own certificate
        // verified and the client's server name seen by the backend.
        let passed = tls_get(
            ([127, 0, 0, 1], port).into(),
            backend_pki.client(rustls::DEFAULT_VERSIONS),
            "abc.example.com",
            "abc.example.com",
            "",
        );
        assert_eq!(passed, Ok((200, "api sni=abc.example.com target=/\n".to_string())), "{driver:?}");
        // OpenSSL's client sees the same: ramjet's certificate verified for the terminated name and
        // the echo of its line; the backend's own certificate for the name passed through.
        let (out, err) = s_client(port, "tls.example.com", &edge_pki.path("ca.pem"), b"openssl says hi\n");
        assert!(
            out.contains("Verify return code: 0 (ok)") && out.contains("openssl says hi"),
            "{driver:?}: {out}{err}"
        );
        assert!(out.contains(" 0 s:CN = tls.example.com"), "{driver:?}: {out}");
        let (out, err) = s_client(port, "abc.example.com", &backend_pki.path("ca.pem"), b"");
        assert!(out.contains("Verify return code: 0 (ok)"), "{driver:?}: {out}{err}");
        assert!(out.contains(" 0 s:CN = abc.example.com"), "{driver:?}: {out}");
        // A name the port does not serve: refused in the handshake, nothing relayed.
        let before = a.connections.load(Ordering::SeqCst) + b.connections.load(Ordering::SeqCst);
        let unknown = tls_exchange(port, edge_pki.client(rustls::DEFAULT_VERSIONS), "other.example.com", b"x");
        assert!(unknown.is_err(), "{driver:?}: {unknown:?}");
        // A client that trusts only the backend's CA cannot be passed a terminated name.
        let wrong = tls_exchange(port, backend_pki.client(rustls::DEFAULT_VERSIONS), "tls.example.com", b"x");
        assert!(wrong.is_err(), "{driver:?}: {wrong:?}");
        // Not TLS at all: closed, nothing relayed.
        let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
        plain.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        plain.write_all(b"GET / HTTP/1.1\r\nHost: tls.example.com\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let closed = std::time::Instant::now();
        let _ = plain.read_to_end(&mut answer);
        assert!(!answer.starts_with(b"HTTP"), "{driver:?}: {answer:?}");
        assert!(closed.elapsed() < Duration::from_secs(5), "{driver:?}: not refused at once");
        let after = a.connections.load(Ordering::SeqCst) + b.connections.load(Ordering::SeqCst);
        assert_eq!(after, before, "{driver:?}: a refused handshake reached a backend");
        // A ClientHello dribbled a byte at a time is read whole, for either kind of name.
        let slow = Dribble::start(port);
        let (name, echoed) =
            tls_exchange(slow.port, edge_pki.client(rustls::DEFAULT_VERSIONS), "tls.example.com", b"slow").unwrap();
        assert!(name.starts_with("echo-") && echoed == b"slow", "{driver:?}: {name} {echoed:?}");
        let passed = tls_get(
            ([127, 0, 0, 1], slow.port).into(),
            backend_pki.client(rustls::DEFAULT_VERSIONS),
            "abc.example.com",
            "abc.example.com",
            "",
        );
        assert_eq!(passed.map(|(status, _)| status), Ok(200), "{driver:?}");
        total += 1;
        total += 203;
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
        // A daemon that stopped holds no socket of the port.
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "{driver:?}: the port is still open");
    }
    assert_eq!(a.connections.load(Ordering::SeqCst) + b.connections.load(Ordering::SeqCst), total);
}

/// On ramjet's HTTPS port, beside an HTTPS listener: `tls.example.com` terminated with its TLS
/// listener's certificate and relayed in plain to two echo backends at weights 3:1, and
/// `abc.example.com` passed through to two TLS backends at weights 1:1.
const ON_HTTPS: &str = r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners:
    - name: tls-terminate
      port: 443
      protocol: TLS
      hostname: tls.example.com
      tls: { mode: Terminate, certificateRefs: [{ name: terminate-cert }] }
    - name: tls-passthrough
      port: 443
      protocol: TLS
      hostname: abc.example.com
      tls: { mode: Passthrough }
    - name: https
      port: 443
      protocol: HTTPS
      hostname: www.other.test
      tls: { certificateRefs: [{ name: edge-cert }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: plain, namespace: infra }
spec:
  parentRefs: [{ name: edge, sectionName: tls-terminate }]
  rules: [{ backendRefs: [{ name: echo-a, port: 80, weight: 3 }, { name: echo-b, port: 80, weight: 1 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: api, namespace: infra }
spec:
  parentRefs: [{ name: edge, sectionName: tls-passthrough }]
  rules: [{ backendRefs: [{ name: api-a, port: 8443 }, { name: api-b, port: 8443 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: web, namespace: infra }
spec:
  parentRefs: [{ name: edge, sectionName: https }]
  rules: [{ backendRefs: [{ name: web, port: 80 }] }]
"#;

#[test]
fn on_the_https_port_tls_routes_terminate_or_pass_through_by_weight_beside_https() {
    ramjet::install_crypto();
    let backend_pki = Pki::new("tlshttps-backend");
    backend_pki.leaf("api", &["abc.example.com"]);
    let (api_a, api_b) =
        (TlsBackend::start("api-a", &backend_pki, "api", None), TlsBackend::start("api-b", &backend_pki, "api", None));
    let edge_pki = Pki::new("tlshttps-edge");
    edge_pki.leaf("terminate", &["tls.example.com"]);
    edge_pki.leaf("edge", &["www.other.test"]);
    let (a, b) = (EchoBackend::start("echo-a"), EchoBackend::start("echo-b"));
    let web = Backend::start("web");
    let manifests = [
        GATEWAY_CLASS.to_string(),
        ON_HTTPS.to_string(),
        tls_secret(&edge_pki, "terminate"),
        tls_secret(&edge_pki, "edge"),
        "---\n".into(),
        Service::new("infra", "api-a").port("tls", 8443).endpoints(&[api_a.addr]).yaml(),
        "---\n".into(),
        Service::new("infra", "api-b").port("tls", 8443).endpoints(&[api_b.addr]).yaml(),
        "---\n".into(),
        Service::new("infra", "echo-a").endpoints(&[a.addr]).yaml(),
        "---\n".into(),
        Service::new("infra", "echo-b").endpoints(&[b.addr]).yaml(),
        "---\n".into(),
        Service::new("infra", "web").endpoints(&[web.addr]).yaml(),
    ]
    .concat();
    let payload: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
    for driver in DRIVERS {
        let dir = temp_dir("tlshttps");
        std::fs::write(dir.join("all.yaml"), &manifests).unwrap();
        let d = manifests_daemon(&dir, driver, 2);
        let https = d.https_addr().unwrap();
        let edge = edge_pki.client(rustls::DEFAULT_VERSIONS);
        let terminated = || tls_exchange(https.port(), edge.clone(), "tls.example.com", &payload);
        assert!(eventually(Duration::from_secs(10), || terminated().is_ok()), "{driver:?}: {:?}", terminated().err());
        // Terminated with the TLS listener's certificate: the echo backend got plain bytes.
        let (name, echoed) = terminated().unwrap();
        assert!(name.starts_with("echo-") && echoed == payload, "{driver:?}: {name}");
        // Weights 3:1 over 200 connections: 50 expected on echo-b, σ ≈ 6.1.
        let mut on_b = 0;
        for _ in 0..200 {
            let (name, _) = tls_exchange(https.port(), edge.clone(), "tls.example.com", b"x").unwrap();
            on_b += usize::from(name == "echo-b");
        }
        assert!((25..=75).contains(&on_b), "{driver:?}: {on_b} of 200 on echo-b at weights 3:1");
        // Passed through unopened to both TLS backends (1:1 over 100 connections: 50 expected,
        // σ = 5), each seeing the client's server name.
        let backend = backend_pki.client(rustls::DEFAULT_VERSIONS);
        let mut on_api_b = 0;
        for _ in 0..100 {
            let (status, body) = tls_get(https, backend.clone(), "abc.example.com", "abc.example.com", "").unwrap();
            assert_eq!(status, 200, "{driver:?}");
            assert!(body.ends_with(" sni=abc.example.com target=/\n"), "{driver:?}: {body}");
            on_api_b += usize::from(body.starts_with("api-b "));
        }
        assert!((25..=75).contains(&on_api_b), "{driver:?}: {on_api_b} of 100 on api-b at weights 1:1");
        // The HTTPS listener's name is still HTTPS, routed over HTTP.
        let (status, body) = tls_get(https, edge.clone(), "www.other.test", "www.other.test", "").unwrap();
        assert!(status == 200 && body.contains("backend=web"), "{driver:?}: {status} {body}");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
    }
}

/// Without a cluster: a static routes file's `tlsPorts:` entries share one port, one name
/// terminated with the file's certificate (relayed in plain to an HTTP backend), another passed
/// through to a TLS backend; any other name is refused, and no backend hears of it.
#[test]
fn a_static_tls_port_terminates_one_name_and_passes_another_through() {
    ramjet::install_crypto();
    let backend_pki = Pki::new("static-tlsport-backend");
    backend_pki.leaf("api", &["abc.example.com"]);
    let api = TlsBackend::start("api", &backend_pki, "api", None);
    // Ramjet's certificate, next to the routes file (its paths are relative to the file).
    let edge_pki = Pki::new("static-tlsport-edge");
    edge_pki.leaf("edge", &["tls.example.com"]);
    let web = Backend::start("web");
    for driver in DRIVERS {
        let port = free_port();
        let yaml = format!(
            "backends:\n  web: {{ endpoints: [\"{}\"] }}\n  api: {{ endpoints: [\"{}\"] }}\n\
             tlsPorts:\n\
             \x20 - port: {port}\n    hostnames: [tls.example.com]\n    mode: Terminate\n    certFile: edge.crt\n    keyFile: edge.key\n    backend: web\n\
             \x20 - port: {port}\n    hostnames: [abc.example.com]\n    mode: Passthrough\n    backend: api\n",
            web.addr, api.addr
        );
        let d = daemon_with(routes_in(&yaml, &edge_pki.dir), driver, |c| c.workers = 2);
        let at = ([127, 0, 0, 1], port).into();
        let terminated =
            || tls_get(at, edge_pki.client(rustls::DEFAULT_VERSIONS), "tls.example.com", "tls.example.com", "");
        assert!(eventually(Duration::from_secs(10), || terminated().is_ok()), "{driver:?}: {:?}", terminated());
        // Ramjet's certificate verified by the client; the backend got the request in plain, as
        // the client wrote it (relayed bytes, not proxied: no header added).
        let (status, body) = terminated().unwrap();
        assert_eq!(status, 200, "{driver:?}: {body}");
        assert!(body.starts_with("backend=web\nmethod=GET\ntarget=/\n"), "{driver:?}: {body}");
        assert!(!body.to_ascii_lowercase().contains("x-forwarded"), "{driver:?}: {body}");
        let plain = "GET / HTTP/1.1\r\nHost: tls.example.com\r\nConnection: close\r\n\r\n";
        assert!(web.received().contains(plain), "{driver:?}: {:?}", web.received());
        // The other name: passed through, the backend's own certificate verified and the
        // client's server name seen by the backend.
        let passed =
            tls_get(at, backend_pki.client(rustls::DEFAULT_VERSIONS), "abc.example.com", "abc.example.com", "");
        assert_eq!(passed, Ok((200, "api sni=abc.example.com target=/\n".to_string())), "{driver:?}");
        // Each name is served as its own entry says: a client trusting only ramjet's CA cannot be
        // passed through, nor one trusting only the backend's be terminated.
        let wrong = tls_get(at, edge_pki.client(rustls::DEFAULT_VERSIONS), "abc.example.com", "abc.example.com", "");
        assert!(wrong.is_err(), "{driver:?}: {wrong:?}");
        let wrong = tls_get(at, backend_pki.client(rustls::DEFAULT_VERSIONS), "tls.example.com", "tls.example.com", "");
        assert!(wrong.is_err(), "{driver:?}: {wrong:?}");
        // A name no entry has, and no name at all: refused in the handshake, nothing relayed.
        let before = (web.connections(), api.connections());
        let unknown =
            tls_get(at, edge_pki.client(rustls::DEFAULT_VERSIONS), "other.example.com", "other.example.com", "");
        assert!(unknown.is_err(), "{driver:?}: {unknown:?}");
        let nameless = tls_get(at, edge_pki.client(rustls::DEFAULT_VERSIONS), "127.0.0.1", "tls.example.com", "");
        assert!(nameless.is_err(), "{driver:?}: {nameless:?}");
        assert_eq!((web.connections(), api.connections()), before, "{driver:?}: a refused name reached a backend");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "{driver:?}: the port is still open");
    }
    assert!(api.snis().iter().all(|sni| sni.as_deref() == Some("abc.example.com")), "{:?}", api.snis());
}

/// A TCP proxy in front of `port` that forwards each connection's first 600 bytes from the
/// client one at a time, 1 ms apart (a ClientHello split across as many packets), then the rest
/// as it comes.
struct Dribble {
    port: u16,
}

impl Dribble {
    fn start(port: u16) -> Dribble {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let own = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { continue };
                let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", port)) else { continue };
                let (mut from_up, mut to_client) = (upstream.try_clone().unwrap(), client.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_up, &mut to_client);
                    let _ = to_client.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    upstream.set_nodelay(true).unwrap();
                    let mut byte = [0u8; 1];
                    for _ in 0..600 {
                        if client.read_exact(&mut byte).is_err() || upstream.write_all(&byte).is_err() {
                            let _ = upstream.shutdown(std::net::Shutdown::Both);
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let _ = std::io::copy(&mut client, &mut upstream);
                    let _ = upstream.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Dribble { port: own }
    }
}
