//! TLS termination over real handshakes: SNI selection from the serving generation, the default
//! certificate, TLS 1.2 and 1.3, resumption, rotation under a handshake loop, redirects.

use ramjet_test_support as support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ramjet_control::certs::parse_certificate;
use ramjet_dataplane::IoDriver;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use support::backend::Backend;
use support::client::{counter, get, Conn};
use support::pki::Pki;
use support::{daemon_with, routes_in, temp_dir, DRIVERS};

const BOTH: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

struct Handshake {
    peer: CertificateDer<'static>,
    version: rustls::ProtocolVersion,
    resumed: bool,
    stream: StreamOwned<ClientConnection, TcpStream>,
}

fn handshake(addr: SocketAddr, config: &Arc<ClientConfig>, sni: &str) -> Result<Handshake, std::io::Error> {
    let name = ServerName::try_from(sni.to_string()).unwrap();
    let conn = ClientConnection::new(config.clone(), name).unwrap();
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut stream = StreamOwned::new(conn, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(Handshake {
        peer: stream.conn.peer_certificates().unwrap()[0].clone(),
        version: stream.conn.protocol_version().unwrap(),
        resumed: stream.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        stream,
    })
}

/// A `Connection: close` request; the answer ends with ramjet's close_notify, so the client can tell
/// its end from a cut (rustls reports a missing close_notify as `UnexpectedEof`).
fn https_get(h: &mut Handshake, host: &str, path: &str) -> String {
    write!(h.stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let ended = h.stream.read_to_end(&mut out);
    let page = String::from_utf8_lossy(&out).to_string();
    assert!(ended.is_ok(), "{ended:?} after {page:.200}");
    page
}

fn config(pki: &Pki, backend: &Backend, example: &str, redirect: bool) -> String {
    format!(
        "backends:\n  b: {{ endpoints: [\"{}\"] }}\nroutes:\n  - {{ path: /, backend: b }}\ntls:\n  - {{ hosts: [example.com], certFile: {example}.crt, keyFile: {example}.key, sslRedirect: {redirect} }}\n  - {{ hosts: [\"*.example.com\"], certFile: wild.crt, keyFile: wild.key }}\n",
        backend.addr
    )
    .replace("{dir}", &pki.dir.display().to_string())
}

fn default_cert(pki: &Pki) -> Arc<rustls::sign::CertifiedKey> {
    let chain = std::fs::read(pki.path("default.crt")).unwrap();
    let key = std::fs::read(pki.path("default.key")).unwrap();
    parse_certificate(&chain, &key, "default").unwrap().key.clone()
}

#[test]
fn sni_picks_the_certificate_and_the_default_covers_the_rest() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-sni");
    let exact = pki.leaf("example", &["example.com"]);
    let wild = pki.leaf("wild", &["*.example.com"]);
    let default = pki.leaf("default", &["default.test", "other.org", "a.b.example.com"]);
    let backend = Backend::start("b");
    for driver in DRIVERS {
        let routes = routes_in(&config(&pki, &backend, "example", false), &pki.dir);
        let d = daemon_with(routes, driver, |c| c.default_certificate = Some(default_cert(&pki)));
        let addr = d.https_addr().unwrap();
        for versions in [&[&rustls::version::TLS13][..], &[&rustls::version::TLS12][..]] {
            let client = pki.client(versions);
            let mut h = handshake(addr, &client, "example.com").unwrap();
            assert_eq!(h.peer, exact, "{driver:?}");
            assert_eq!(h.version, versions[0].version);
            assert_eq!(h.stream.conn.alpn_protocol(), Some(&b"http/1.1"[..]), "ALPN offers only what is served");
            let page = https_get(&mut h, "example.com", "/hello");
            assert!(page.contains("header=x-forwarded-proto: https"), "{page}");
            assert_eq!(handshake(addr, &client, "www.example.com").unwrap().peer, wild);
            assert_eq!(handshake(addr, &client, "a.b.example.com").unwrap().peer, default);
            assert_eq!(handshake(addr, &client, "other.org").unwrap().peer, default);
        }
        d.shutdown();
    }
}

#[test]
fn the_access_log_names_the_negotiated_version_and_the_sni_name() {
    use ramjet_dataplane::access_log::{Destination, Format};
    ramjet::install_crypto();
    let pki = Pki::new("tls-log");
    pki.leaf("example", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    pki.leaf("default", &["default.test"]);
    let backend = Backend::start("b");
    for driver in DRIVERS {
        let file = temp_dir("tls-log").join("access.log");
        let routes = routes_in(&config(&pki, &backend, "example", false), &pki.dir);
        let d = daemon_with(routes, driver, |c| {
            c.default_certificate = Some(default_cert(&pki));
            c.access_log =
                Some(ramjet_dataplane::AccessLogSettings::new(Destination::File(file.clone()), Format::Json));
        });
        let addr = d.https_addr().unwrap();
        for (versions, path) in [(&[&rustls::version::TLS13][..], "/v13"), (&[&rustls::version::TLS12][..], "/v12")] {
            let mut h = handshake(addr, &pki.client(versions), "www.example.com").unwrap();
            assert!(https_get(&mut h, "www.example.com", path).starts_with("HTTP/1.1 200"));
        }
        // A client that sends no SNI gets the default certificate, and its record says so.
        let mut no_sni = (*pki.client(BOTH)).clone();
        no_sni.enable_sni = false;
        let mut h = handshake(addr, &Arc::new(no_sni), "default.test").unwrap();
        assert!(https_get(&mut h, "default.test", "/no-sni").starts_with("HTTP/1.1 200"));
        assert!(get(d.http_addr(), "example.com", "/plain").status < 500);
        d.shutdown();

        let records: Vec<serde_json::Value> =
            std::fs::read_to_string(&file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let find =
            |path: &str| records.iter().find(|r| r["path"] == path).unwrap_or_else(|| panic!("{path}: {records:#?}"));
        let tls_of = |path: &str| {
            let r = find(path);
            (r["tls"].as_bool(), r["tls_version"].as_str().map(str::to_string), r["sni"].as_str().map(str::to_string))
        };
        let sni = Some("www.example.com".to_string());
        assert_eq!(tls_of("/v13"), (Some(true), Some("TLSv1.3".into()), sni.clone()), "{driver:?}");
        assert_eq!(tls_of("/v12"), (Some(true), Some("TLSv1.2".into()), sni), "{driver:?}");
        assert_eq!(tls_of("/no-sni"), (Some(true), Some("TLSv1.3".into()), None), "{driver:?}");
        assert_eq!(tls_of("/plain"), (Some(false), None, None), "{driver:?}");
    }
}

/// The client's request rides in the same flight as its Finished (rustls sends buffered data the
/// moment the handshake allows), with a body far larger than one handshake read: nothing is lost.
#[test]
fn a_request_sent_with_the_end_of_the_handshake_arrives_whole() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-early");
    pki.leaf("example", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    let backend = Backend::start("b");
    let body = "x".repeat(100_000);
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&config(&pki, &backend, "example", false), &pki.dir), driver, |_| {});
        for versions in [&[&rustls::version::TLS13][..], &[&rustls::version::TLS12][..]] {
            let name = ServerName::try_from("example.com").unwrap();
            let mut conn = ClientConnection::new(pki.client(versions), name).unwrap();
            let request = format!(
                "POST /early HTTP/1.1\r\nHost: example.com\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            conn.set_buffer_limit(None);
            conn.writer().write_all(request.as_bytes()).unwrap();
            let tcp = TcpStream::connect(d.https_addr().unwrap()).unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut stream = StreamOwned::new(conn, tcp);
            let mut out = Vec::new();
            let _ = stream.read_to_end(&mut out);
            let page = String::from_utf8_lossy(&out);
            assert!(page.starts_with("HTTP/1.1 200"), "{driver:?} {versions:?}: {page:.200}");
            assert!(page.contains(&body), "{driver:?} {versions:?}: the whole body reached the backend");
        }
        d.shutdown();
    }
}

#[test]
fn a_name_without_a_certificate_fails_verification_and_resumption_works() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-resume");
    pki.leaf("example", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    let backend = Backend::start("b");
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&config(&pki, &backend, "example", false), &pki.dir), driver, |_| {});
        let addr = d.https_addr().unwrap();
        let client = pki.client(BOTH);
        assert!(
            handshake(addr, &client, "unknown.org").is_err(),
            "no certificate for the name: the fallback one, which a verifying client refuses"
        );
        for versions in [&[&rustls::version::TLS13][..], &[&rustls::version::TLS12][..]] {
            let client = pki.client(versions);
            let mut first = handshake(addr, &client, "example.com").unwrap();
            assert!(!first.resumed);
            https_get(&mut first, "example.com", "/");
            let second = handshake(addr, &client, "example.com").unwrap();
            assert!(second.resumed, "{driver:?} {:?}: session resumed", versions[0].version);
        }
        d.shutdown();
    }
}

/// A client asking for a name ramjet has no certificate for gets ramjet's self-signed one (as
/// ingress-nginx serves its "Fake Certificate") and then an HTTP answer, not a TLS alert; `curl`
/// without verification shows both. With verification the handshake fails, as it should.
#[test]
fn a_name_without_a_certificate_gets_the_fallback_certificate_and_an_http_answer() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-fallback");
    pki.leaf("example", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    let backend = Backend::start("b");
    let yaml = config(&pki, &backend, "example", false)
        .replace("routes:\n  - { path: /, backend: b }", "routes:\n  - { host: example.com, path: /, backend: b }");
    let d = daemon_with(routes_in(&yaml, &pki.dir), IoDriver::Auto, |_| {});
    let port = d.https_addr().unwrap().port();
    let seen = support::client::curl_https(port, "unknown.org", true);
    assert_eq!(seen.status, "404", "{}", seen.log);
    assert!(seen.subject.contains(ramjet_control::certs::FALLBACK_SUBJECT), "{}", seen.log);
    let verified = support::client::curl_https(port, "unknown.org", false);
    assert_eq!(verified.status, "000", "a verifying client refuses the fallback certificate: {}", verified.log);
    d.shutdown();
}

#[test]
fn rotation_under_a_handshake_loop_never_fails_a_handshake() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-rotate");
    let old = pki.leaf("example", &["example.com"]);
    let new = pki.leaf("example2", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    let backend = Backend::start("b");
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&config(&pki, &backend, "example", false), &pki.dir), driver, |_| {});
        let addr = d.https_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (seen_old, seen_new, failed) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut client = (*pki.client(BOTH)).clone();
        client.resumption = rustls::client::Resumption::disabled();
        let client = Arc::new(client);
        let loops: Vec<_> = (0..2)
            .map(|_| {
                let (stop, seen_old, seen_new, failed) =
                    (stop.clone(), seen_old.clone(), seen_new.clone(), failed.clone());
                let (client, old, new) = (client.clone(), old.clone(), new.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match handshake(addr, &client, "example.com") {
                            Ok(h) if h.peer == old => seen_old.fetch_add(1, Ordering::Relaxed),
                            Ok(h) if h.peer == new => seen_new.fetch_add(1, Ordering::Relaxed),
                            _ => failed.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        // Rotate back and forth several times while handshakes run.
        for round in 0..6 {
            let file = if round % 2 == 0 { "example2" } else { "example" };
            d.submit(routes_in(&config(&pki, &backend, file, false), &pki.dir));
            support::wait_serving(&d, round + 2);
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        for l in loops {
            l.join().unwrap();
        }
        let (o, n, f) =
            (seen_old.load(Ordering::Relaxed), seen_new.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
        assert_eq!(f, 0, "{driver:?}: failed handshakes (old {o}, new {n})");
        assert!(o > 0 && n > 0, "{driver:?}: both certificates served (old {o}, new {n})");
        d.shutdown();
    }
}

#[test]
fn ssl_redirect_sends_plain_http_to_https() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-redirect");
    pki.leaf("example", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    let backend = Backend::start("b");
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&config(&pki, &backend, "example", true), &pki.dir), driver, |_| {});
        let r = get(d.http_addr(), "Example.com:8080", "/path?q=1");
        assert_eq!((r.status, r.header("location")), (308, Some("https://example.com/path?q=1")));
        // Other hosts are served over plain HTTP as before.
        assert_eq!(get(d.http_addr(), "www.example.com", "/").status, 200);
        // An ACME HTTP-01 challenge reaches its route over plain HTTP (cert-manager renews the
        // certificate of a host that redirects); the rest of `.well-known` is still redirected.
        let r = get(d.http_addr(), "example.com", "/.well-known/acme-challenge/tok3n");
        assert_eq!((r.status, r.header("location")), (200, None), "{driver:?}");
        assert!(r.body.contains("target=/.well-known/acme-challenge/tok3n"), "{}", r.body);
        let r = get(d.http_addr(), "example.com", "/.well-known/security.txt");
        assert_eq!((r.status, r.header("location")), (308, Some("https://example.com/.well-known/security.txt")));
        // The admin API says the same.
        let route = |q: &str| {
            let raw = format!("GET /admin/route?{q} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
            let body = support::client::request(d.admin_addr(), &raw).body;
            serde_json::from_str::<serde_json::Value>(&body).unwrap()["answer"].as_str().unwrap().to_string()
        };
        assert_eq!(route("host=example.com&path=/x"), "https_redirect");
        assert_eq!(route("host=example.com&path=/x&tls=true"), "route");
        assert_eq!(route("host=example.com&path=/.well-known/acme-challenge/t"), "route");
        d.shutdown();
    }
}

#[test]
fn an_invalid_key_refuses_to_start_naming_the_file() {
    let pki = Pki::new("tls-invalid");
    pki.leaf("example", &["example.com"]);
    pki.leaf("other", &["other.org"]);
    pki.leaf("wild", &["*.example.com"]);
    let yaml = |cert: &str, key: &str| {
        format!("backends:\n  h: {{ respond: {{ status: 200 }} }}\nroutes:\n  - {{ path: /, backend: h }}\ntls:\n  - {{ hosts: [example.com], certFile: {cert}, keyFile: {key} }}\n")
    };
    let check = |text: String| -> String {
        let file = pki.path("routes.yaml");
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ramjet"))
            .args(["--check", "--static-routes"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = check(yaml("example.crt", "other.key"));
    assert!(
        err.contains("routes.yaml:6:")
            && err.contains("example.crt / other.key: the private key does not match the certificate"),
        "{err}"
    );
    std::fs::write(pki.path("garbage.key"), "not a key").unwrap();
    let err = check(yaml("example.crt", "garbage.key"));
    assert!(err.contains("no PRIVATE KEY PEM block"), "{err}");
    let err = check(yaml("example.key", "example.key"));
    assert!(err.contains("no CERTIFICATE PEM block"), "{err}");
}

#[test]
fn curl_gets_a_page_over_https() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-curl");
    pki.leaf("example", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    let backend = Backend::start("b");
    let d = daemon_with(
        routes_in(&config(&pki, &backend, "example", false), &pki.dir),
        ramjet_dataplane::IoDriver::IoUring,
        |_| {},
    );
    let port = d.https_addr().unwrap().port();
    let out = std::process::Command::new("curl")
        .args(["-sS", "--http1.1", "--cacert"])
        .arg(pki.path("ca.pem"))
        .args(["--resolve", &format!("example.com:{port}:127.0.0.1"), &format!("https://example.com:{port}/via-curl")])
        .output()
        .expect("curl is installed");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(body.contains("target=/via-curl") && body.contains("x-forwarded-proto: https"), "{body}");
    d.shutdown();
}

#[test]
fn an_expired_certificate_is_a_warning_not_a_refusal() {
    let pki = Pki::new("tls-expired");
    pki.leaf_with("old", &["example.com"], |p| {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let file = pki.path("routes.yaml");
    std::fs::write(
        &file,
        "backends:\n  h: { respond: { status: 200 } }\nroutes:\n  - { path: /, backend: h }\ntls:\n  - { hosts: [example.com], certFile: old.crt, keyFile: old.key }\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ramjet"))
        .args(["--check", "--static-routes"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("old.crt has expired"), "{err}");
}

/// `plaintext` as the TLS records the client would send, to be written to the socket by hand.
fn sealed(conn: &mut ClientConnection, plaintext: &[u8]) -> Vec<u8> {
    conn.writer().write_all(plaintext).unwrap();
    let mut records = Vec::new();
    conn.write_tls(&mut records).unwrap();
    records
}

/// Quiet TLS connections give their buffers back, the TLS stream's own included, and take them
/// again when they speak. Requests just before, at and after the release instant, a record split
/// across it, and a key update that arrives while quiet all come through whole; a client that stops
/// inside a record is still closed at the keep-alive timeout.
#[test]
fn quiet_tls_connections_release_their_buffers_and_lose_no_byte() {
    ramjet::install_crypto();
    let pki = Pki::new("tls-quiet");
    pki.leaf("example", &["example.com"]);
    pki.leaf("wild", &["*.example.com"]);
    let backend = Backend::start("b");
    let tls13 = &[&rustls::version::TLS13][..];
    let tls12 = &[&rustls::version::TLS12][..];
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&config(&pki, &backend, "example", false), &pki.dir), driver, |c| {
            c.settings.idle_release_after = Duration::from_millis(40);
            c.settings.keepalive_timeout = Duration::from_millis(1500);
        });
        let addr = d.https_addr().unwrap();
        let open = |versions| Conn::over(handshake(addr, &pki.client(versions), "example.com").unwrap().stream);
        let clients: Vec<_> = (0..12u64)
            .map(|i| {
                let mut conn = open(if i % 2 == 0 { tls13 } else { tls12 });
                std::thread::spawn(move || {
                    conn.post_around_the_release(i, 5, "example.com");
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }

        // A record split across the release: its first bytes, quiet, then the rest.
        for versions in [tls13, tls12] {
            let mut conn = open(versions);
            assert_eq!(conn.get("example.com", "/before").status, 200);
            let tls = &mut conn.stream;
            let record = sealed(&mut tls.conn, b"GET /split HTTP/1.1\r\nHost: example.com\r\n\r\n");
            tls.sock.write_all(&record[..7]).unwrap();
            std::thread::sleep(Duration::from_millis(150));
            tls.sock.write_all(&record[7..]).unwrap();
            let resp = conn.read_response();
            assert!(resp.body.contains("target=/split"), "{driver:?} {versions:?}: {}", resp.body);
        }

        // A key update while quiet: a record with no data in it; the next request uses the new keys.
        let mut conn = open(tls13);
        assert_eq!(conn.get("example.com", "/before").status, 200);
        std::thread::sleep(Duration::from_millis(100));
        conn.stream.conn.refresh_traffic_keys().unwrap();
        conn.stream.conn.complete_io(&mut conn.stream.sock).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(conn.get("example.com", "/rekeyed").body.contains("target=/rekeyed"), "{driver:?}");

        // Quiet, then the first bytes of a record and nothing more: closed at the keep-alive timeout.
        let mut stalled = open(tls13);
        assert_eq!(stalled.get("example.com", "/before").status, 200);
        std::thread::sleep(Duration::from_millis(100));
        let tls = &mut stalled.stream;
        let record = sealed(&mut tls.conn, b"GET /never HTTP/1.1\r\n");
        tls.sock.write_all(&record[..4]).unwrap();
        tls.sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let closed_at = std::time::Instant::now();
        let mut byte = [0u8; 1];
        match tls.read(&mut byte) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            other => panic!("{driver:?}: a stalled record is closed at the keep-alive timeout, got {other:?}"),
        }
        assert!(closed_at.elapsed() < Duration::from_secs(3), "{driver:?}: {:?}", closed_at.elapsed());

        let releases = counter(d.admin_addr(), "ramjet_idle_buffer_releases_total");
        assert!(releases >= 5, "{driver:?}: quiet TLS connections released their buffers ({releases})");
        d.shutdown();
    }
}
