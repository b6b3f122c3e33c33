//! The client's real address behind a load balancer, through the real daemon over real sockets:
//! PROXY protocol v1 and v2 on a listener that expects it (and refusals of anything else), trusted
//! proxies' `X-Forwarded-For` / `Forwarded`, and the one client address that the backend
//! (`X-Forwarded-For`, `X-Real-IP`), the source ranges, the per-client limits, hashing, external
//! auth and the access log all see. Every test runs on both I/O drivers.
//!
//! All clients connect from 127.0.0.1; the addresses the tests name (203.0.113.0/24, 198.51.100.0/24,
//! 2001:db8::/32) can only have come from a header ramjet believed.

use ramjet_test_support as support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::access_log::{Destination, Format};
use ramjet_dataplane::{AccessLogSettings, AddressField, AddressRules, IoDriver};
use ramjet_shared::parse_ranges;
use serde_json::Value;
use support::backend::Backend;
use support::client::{counter, request, Conn, Response};
use support::h2client::H2Client;
use support::manifests::{ingress_class, service, Ingress, Service};
use support::{eventually, temp_dir, wait_serving, DRIVERS};

const NGINX: &str = "nginx.ingress.kubernetes.io";

/// `PROXY TCP4|TCP6 <source> <destination> <ports>\r\n`.
fn v1(source: &str, destination: &str) -> Vec<u8> {
    let (s, d): (SocketAddr, SocketAddr) = (source.parse().unwrap(), destination.parse().unwrap());
    let family = if s.is_ipv4() { "TCP4" } else { "TCP6" };
    format!("PROXY {family} {} {} {} {}\r\n", s.ip(), d.ip(), s.port(), d.port()).into_bytes()
}

/// A version 2 PROXY header for TCP, with `tlvs` after the addresses.
fn v2_with(source: &str, destination: &str, tlvs: &[u8]) -> Vec<u8> {
    let (s, d): (SocketAddr, SocketAddr) = (source.parse().unwrap(), destination.parse().unwrap());
    let mut block = Vec::new();
    let family = match (s.ip(), d.ip()) {
        (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) => {
            block.extend_from_slice(&a.octets());
            block.extend_from_slice(&b.octets());
            0x11
        }
        (std::net::IpAddr::V6(a), std::net::IpAddr::V6(b)) => {
            block.extend_from_slice(&a.octets());
            block.extend_from_slice(&b.octets());
            0x21
        }
        _ => panic!("one family"),
    };
    block.extend_from_slice(&s.port().to_be_bytes());
    block.extend_from_slice(&d.port().to_be_bytes());
    block.extend_from_slice(tlvs);
    v2_raw(0x21, family, &block)
}

fn v2(source: &str, destination: &str) -> Vec<u8> {
    v2_with(source, destination, &[])
}

/// The version 2 signature, then the given version/command and family bytes and block.
fn v2_raw(ver_cmd: u8, family: u8, block: &[u8]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.push(ver_cmd);
    h.push(family);
    h.extend_from_slice(&(block.len() as u16).to_be_bytes());
    h.extend_from_slice(block);
    h
}

/// A TLV: type, 16-bit length, value.
fn tlv(kind: u8, value: &[u8]) -> Vec<u8> {
    let mut t = vec![kind];
    t.extend_from_slice(&(value.len() as u16).to_be_bytes());
    t.extend_from_slice(value);
    t
}

fn connect(addr: SocketAddr) -> Conn {
    Conn::open(addr)
}

/// A new connection that sends `header`, then `raw` in the same write; its answer.
fn via(addr: SocketAddr, header: &[u8], raw: &str) -> Response {
    let mut c = connect(addr);
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(raw.as_bytes());
    c.send(&bytes);
    c.read_response()
}

fn get_req(host: &str, path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

/// A field the echo backend saw (the last one of the name).
fn seen_field(r: &Response, name: &str) -> Option<String> {
    r.body.lines().filter_map(|l| l.strip_prefix("header=")).rev().find_map(|h| {
        let (k, v) = h.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// Each field `name` reached the backend as `want`.
fn fields_seen(r: &Response, wanted: &[(&str, &str)]) {
    for (name, want) in wanted {
        assert_eq!(seen_field(r, name).as_deref(), Some(*want), "{name}: {}", r.body);
    }
}

fn seen_client(r: &Response) -> (Option<String>, Option<String>) {
    (seen_field(r, "x-forwarded-for"), seen_field(r, "x-real-ip"))
}

fn both(ip: &str) -> (Option<String>, Option<String>) {
    (Some(ip.to_string()), Some(ip.to_string()))
}

/// Ingresses: `open.test` and `allow.test` (allow-list 203.0.113.0/24 and 2001:db8::/32), both to
/// Service `a`.
fn manifests(a: &Backend) -> String {
    let mut text = [ingress_class("ramjet"), service("shop", "a", a.addr)].concat();
    text.push_str(&Ingress::new("shop", "open").host("open.test").port_number(80).path("/", "Prefix", "a").yaml());
    text.push_str(
        &Ingress::new("shop", "allow")
            .host("allow.test")
            .port_number(80)
            .annotation(&format!("{NGINX}/allowlist-source-range"), "203.0.113.0/24, 2001:db8::/32")
            .path("/", "Prefix", "a")
            .yaml(),
    );
    text
}

fn start(dir: &Path, text: &str, driver: IoDriver, tweak: impl FnOnce(&mut DaemonConfig)) -> Daemon {
    std::fs::write(dir.join("app.yaml"), text).unwrap();
    let mut config = DaemonConfig::with_source(Source::Manifests {
        dir: dir.to_path_buf(),
        options: IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    config.io_driver = driver;
    tweak(&mut config);
    let daemon = Daemon::start(config).expect("the daemon starts");
    wait_serving(&daemon, 1);
    daemon
}

fn trusted(list: &str) -> AddressRules {
    AddressRules { trusted: parse_ranges(list).unwrap().into(), ..AddressRules::default() }
}

fn json_log(file: &Path) -> Option<AccessLogSettings> {
    Some(AccessLogSettings::new(Destination::File(file.to_path_buf()), Format::Json))
}

fn records(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The `client` of the access-log record for `path`.
fn logged_client(records: &[Value], path: &str) -> String {
    let record =
        records.iter().find(|r| r["path"] == path).unwrap_or_else(|| panic!("no record of {path}: {records:#?}"));
    record["client"].as_str().unwrap().to_string()
}

/// Whether the server closed the connection without answering.
fn closed_without_a_word(c: &mut TcpStream) -> bool {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    matches!(c.read(&mut buf), Ok(0) | Err(_))
}

#[test]
fn proxy_headers_name_the_client_for_the_backend_the_allow_list_the_access_log_and_http2() {
    let a = Backend::start("a");
    for driver in DRIVERS {
        let dir = temp_dir("client-proxy");
        let file = dir.join("access.log");
        let d = start(&dir, &manifests(&a), driver, |c| {
            c.settings.client_address.proxy_protocol_http = true;
            c.access_log = json_log(&file);
        });
        let addr = d.http_addr();

        // Version 1: the client and the port it connected to on the balancer.
        let mut conn = connect(addr);
        let mut first = v1("203.0.113.7:51000", "10.0.0.1:80");
        first.extend_from_slice(b"GET /v1 HTTP/1.1\r\nHost: allow.test\r\n\r\n");
        conn.send(&first);
        let r = conn.read_response();
        assert_eq!(r.status, 200, "{driver:?}: {}", r.head);
        assert_eq!(seen_client(&r), both("203.0.113.7"), "{}", r.body);
        assert_eq!(seen_field(&r, "x-forwarded-port").as_deref(), Some("80"), "the balancer's port");
        // The next request on the connection is the same client's.
        let again = conn.get_with("allow.test", "/v1-again", "X-Forwarded-For: 6.6.6.6\r\n");
        assert_eq!(seen_client(&again), both("203.0.113.7"), "{}", again.body);

        // Version 2, IPv4: outside the allow-list, then on a host without one.
        let refused = via(addr, &v2("198.51.100.9:40000", "10.0.0.1:80"), &get_req("allow.test", "/v2-refused", ""));
        assert_eq!(refused.status, 403, "{driver:?}");
        let r = via(addr, &v2("198.51.100.9:40001", "10.0.0.1:80"), &get_req("open.test", "/v2", ""));
        assert_eq!(seen_client(&r), both("198.51.100.9"), "{}", r.body);

        // Version 2, IPv6, with TLVs the balancer added (skipped).
        let tlvs = [tlv(0x04, b""), tlv(0xEA, b"vpce-0123456789abcdef0")].concat();
        let header = v2_with("[2001:db8::7]:40000", "[2001:db8::1]:443", &tlvs);
        let r = via(addr, &header, &get_req("allow.test", "/v6", ""));
        assert_eq!(r.status, 200, "{}", r.head);
        assert_eq!(seen_client(&r), both("2001:db8::7"), "{}", r.body);
        assert_eq!(seen_field(&r, "x-forwarded-port").as_deref(), Some("443"));

        // LOCAL (a balancer's health check) and UNKNOWN: the connection's own address.
        let local = v2_raw(0x20, 0x00, b"");
        let r = via(addr, &local, &get_req("open.test", "/local", ""));
        assert_eq!(seen_client(&r), both("127.0.0.1"), "{}", r.body);
        let r = via(addr, b"PROXY UNKNOWN\r\n", &get_req("allow.test", "/unknown", ""));
        assert_eq!(r.status, 403, "an UNKNOWN header names nobody");

        // HTTP/2 by prior knowledge after the header: every stream is that client's.
        let mut h2 = H2Client::connect_after(addr, &v2("203.0.113.8:50000", "10.0.0.1:80"), |_| {});
        let r = h2.get("allow.test", "/h2");
        assert_eq!(r.status, 200, "{driver:?}");
        assert!(r.text().contains("header=x-forwarded-for: 203.0.113.8\n"), "{}", r.text());
        assert!(r.text().contains("header=x-real-ip: 203.0.113.8\n"), "{}", r.text());
        drop(h2);
        d.shutdown();

        let logged = records(&file);
        assert_eq!(logged_client(&logged, "/v1"), "203.0.113.7:51000");
        assert_eq!(logged_client(&logged, "/v2-refused"), "198.51.100.9:40000");
        assert_eq!(logged_client(&logged, "/v6"), "[2001:db8::7]:40000");
        assert_eq!(logged_client(&logged, "/h2"), "203.0.113.8:50000");
        assert!(logged_client(&logged, "/local").starts_with("127.0.0.1:"));
    }
}

/// settings/proxy_protocol.go, "should respect proto passed by the PROXY Protocol server port":
/// a PROXY header naming port 443 on the plain-HTTP listener means the balancer ended TLS; the
/// request counts as HTTPS (`X-Forwarded-Proto: https`, no redirect back to HTTPS, which would
/// loop), while one naming port 80 is redirected.
#[test]
fn a_proxy_header_for_port_443_counts_as_https() {
    let a = Backend::start("a");
    let dir = temp_dir("client-proxy-443");
    let mut text = manifests(&a);
    text.push_str(
        &Ingress::new("shop", "forced")
            .host("forced.test")
            .port_number(80)
            .annotation(&format!("{NGINX}/force-ssl-redirect"), "true")
            .path("/", "Prefix", "a")
            .yaml(),
    );
    // The balancer's client, trusted as a proxy or not (its own forwarded fields are then read).
    for rules in [AddressRules::default(), trusted("192.168.0.0/16")] {
        let d = start(&dir, &text, IoDriver::Auto, |c| {
            c.settings.client_address.proxy_protocol_http = true;
            c.settings.client_address.rules = rules;
        });
        let addr = d.http_addr();
        let r = via(addr, &v1("192.168.0.1:56324", "192.168.0.11:443"), &get_req("forced.test", "/", ""));
        assert_eq!(r.status, 200, "{}", r.head);
        assert_eq!(seen_field(&r, "x-forwarded-proto").as_deref(), Some("https"), "{}", r.body);
        assert_eq!(seen_field(&r, "x-forwarded-port").as_deref(), Some("443"));
        let r = via(addr, &v1("192.168.0.1:56325", "192.168.0.11:80"), &get_req("forced.test", "/x", ""));
        assert_eq!((r.status, r.header("location")), (308, Some("https://forced.test/x")));
        let r = via(addr, &v1("192.168.0.1:56326", "192.168.0.11:80"), &get_req("open.test", "/", ""));
        assert_eq!(seen_field(&r, "x-forwarded-proto").as_deref(), Some("http"));
        d.shutdown();
    }
}

/// settings/forwarded_headers.go, with `use-forwarded-headers` as `--trusted-proxies`: a trusted
/// proxy's `X-Forwarded-*` are the client's (its scheme as it says, its first `X-Forwarded-Host`
/// also as the upstream `Host`); with `--trusted-proxies-address-only` only the address; an
/// untrusted peer's are replaced by ramjet's own, and its
/// `X-Forwarded-For` and `-Host` reach the backend as `X-Original-Forwarded-For` and `-Host`, on
/// HTTP/1.1 and HTTP/2 alike.
#[test]
fn forwarded_headers_behave_as_in_ingress_nginx() {
    let a = Backend::start("a");
    let host = "forwarded-headers";
    let mut text = manifests(&a);
    text.push_str(&Ingress::new("shop", "fwd").host(host).port_number(80).path("/", "Prefix", "a").yaml());
    let theirs = |forwarded_host: &str| {
        format!(
            "X-Forwarded-Port: 1234\r\nX-Forwarded-Proto: myproto\r\nX-Forwarded-Scheme: myproto\r\n\
             X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Host: {forwarded_host}\r\n"
        )
    };
    let dir = temp_dir("client-forwarded-headers-trusted");
    let d = start(&dir, &text, IoDriver::Auto, |c| c.settings.client_address.rules = trusted("127.0.0.0/8, ::1"));
    let r = request(d.http_addr(), &get_req(host, "/", &theirs("myhost")));
    assert_eq!(r.status, 200);
    fields_seen(
        &r,
        &[
            ("host", "myhost"),
            ("x-forwarded-host", "myhost"),
            ("x-forwarded-proto", "myproto"),
            ("x-forwarded-scheme", "myproto"),
            ("x-forwarded-port", "1234"),
            ("x-forwarded-for", "1.2.3.4"),
        ],
    );
    let r = request(d.http_addr(), &get_req(host, "/", &theirs("myhost.com, another.host,example.net")));
    assert_eq!(seen_field(&r, "host").as_deref(), Some("myhost.com"), "the first entry: {}", r.body);
    assert_eq!(seen_field(&r, "x-forwarded-host").as_deref(), Some("myhost.com"));
    let mut h2 = H2Client::connect(d.http_addr());
    let r2 = h2.request("GET", host, "/h2", &[("x-forwarded-host", "myhost")], b"", false).unwrap();
    assert!(r2.text().contains("header=host: myhost\n"), "HTTP/2 alike: {}", r2.text());
    drop(h2);
    d.shutdown();

    // test/e2e/settings/enable_real_ip.go "trusts X-Forwarded-For header only when setting is
    // true": enable-real-ip without use-forwarded-headers believes the address alone.
    let dir = temp_dir("client-forwarded-headers-address-only");
    let d = start(&dir, &text, IoDriver::Auto, |c| {
        c.settings.client_address.rules = AddressRules { address_only: true, ..trusted("127.0.0.0/8, ::1") }
    });
    let port = d.http_addr().port().to_string();
    let r = request(d.http_addr(), &get_req(host, "/", &theirs("myhost")));
    fields_seen(
        &r,
        &[
            ("host", host),
            ("x-forwarded-host", host),
            ("x-forwarded-proto", "http"),
            ("x-forwarded-port", port.as_str()),
            ("x-forwarded-for", "1.2.3.4"),
        ],
    );
    let mut h2 = H2Client::connect(d.http_addr());
    let headers = [("x-forwarded-for", "1.2.3.4"), ("x-forwarded-host", "myhost")];
    let r2 = h2.request("GET", host, "/h2", &headers, b"", false).unwrap();
    assert!(r2.text().contains("header=host: forwarded-headers\n"), "{}", r2.text());
    assert!(r2.text().contains("header=x-forwarded-for: 1.2.3.4\n"), "{}", r2.text());
    drop(h2);
    d.shutdown();

    let dir = temp_dir("client-forwarded-headers-untrusted");
    let d = start(&dir, &text, IoDriver::Auto, |_| {});
    let port = d.http_addr().port().to_string();
    let r = request(d.http_addr(), &get_req(host, "/", &theirs("myhost")));
    fields_seen(
        &r,
        &[
            ("host", host),
            ("x-forwarded-host", host),
            ("x-forwarded-proto", "http"),
            ("x-forwarded-scheme", "http"),
            ("x-forwarded-port", port.as_str()),
            ("x-forwarded-for", "127.0.0.1"),
            ("x-original-forwarded-for", "1.2.3.4"),
            ("x-original-forwarded-host", "myhost"),
        ],
    );
    let mut h2 = H2Client::connect(d.http_addr());
    let headers = [("x-forwarded-for", "1.2.3.4"), ("x-forwarded-host", "myhost")];
    let r2 = h2.request("GET", host, "/h2", &headers, b"", false).unwrap();
    assert!(r2.text().contains("header=x-original-forwarded-for: 1.2.3.4\n"), "{}", r2.text());
    assert!(r2.text().contains("header=x-original-forwarded-host: myhost\n"), "{}", r2.text());
    assert!(r2.text().contains("header=host: forwarded-headers\n"), "{}", r2.text());
    drop(h2);
    // Without them, no X-Original-* at all; a client's own X-Original-* never pass (they would
    // be a second line, or the only one, naming whatever it likes).
    let r = request(d.http_addr(), &get_req(host, "/", ""));
    assert_eq!(seen_field(&r, "x-original-forwarded-for"), None, "{}", r.body);
    let forged = "X-Original-Forwarded-For: 6.6.6.6\r\nX-Original-Forwarded-Host: evil.test\r\n";
    let r = request(d.http_addr(), &get_req(host, "/", forged));
    assert!(!r.body.contains("6.6.6.6") && !r.body.contains("evil.test"), "{}", r.body);
    let r = request(d.http_addr(), &get_req(host, "/", &format!("{forged}X-Forwarded-For: 1.2.3.4\r\n")));
    assert_eq!(r.body.matches("x-original-forwarded-for").count(), 1, "{}", r.body);
    assert_eq!(seen_field(&r, "x-original-forwarded-for").as_deref(), Some("1.2.3.4"), "{}", r.body);
    d.shutdown();
}

#[test]
fn a_proxy_header_cut_into_packets_is_read_whole_and_not_a_byte_more() {
    let a = Backend::start("a");
    for driver in DRIVERS {
        let dir = temp_dir("client-split");
        let d = start(&dir, &manifests(&a), driver, |c| c.settings.client_address.proxy_protocol_http = true);
        let addr = d.http_addr();
        let pause = || std::thread::sleep(Duration::from_millis(30));

        // Version 1 in pieces, the last one carrying the start of the request.
        let mut c = connect(addr);
        for piece in
            [&b"PRO"[..], b"XY TCP4 203.0.11", b"3.7 10.0.0.1 5", b"1000 80\r", b"\nGET /split-v1 HTTP/1.1\r\n"]
        {
            c.send(piece);
            pause();
        }
        c.send(b"Host: allow.test\r\n\r\n");
        let r = c.read_response();
        assert_eq!(r.status, 200, "{driver:?}: {}", r.head);
        assert_eq!(seen_client(&r), both("203.0.113.7"));
        assert!(r.body.contains("target=/split-v1\n"), "the request's first bytes were not taken: {}", r.body);

        // Version 2 with TLVs, cut inside the signature, the length and a TLV.
        let tlvs = [tlv(0x04, b"padding"), tlv(0xE0, &[7; 40])].concat();
        let mut bytes = v2_with("198.51.100.3:1234", "10.0.0.1:80", &tlvs);
        let end = bytes.len();
        bytes.extend_from_slice(get_req("open.test", "/split-v2", "").as_bytes());
        let mut c = connect(addr);
        for (from, to) in [(0, 5), (5, 15), (15, 30), (30, end - 3), (end - 3, end + 4), (end + 4, bytes.len())] {
            c.send(&bytes[from..to]);
            pause();
        }
        let r = c.read_response();
        assert_eq!(seen_client(&r), both("198.51.100.3"), "{driver:?}: {}", r.body);
        assert!(r.body.contains("target=/split-v2\n"), "{}", r.body);

        // One byte at a time.
        let mut c = connect(addr);
        for b in v1("[2001:db8::9]:9", "[2001:db8::1]:80") {
            c.send(&[b]);
        }
        c.send(get_req("allow.test", "/bytes", "").as_bytes());
        let r = c.read_response();
        assert_eq!(seen_client(&r), both("2001:db8::9"), "{driver:?}: {}", r.body);
        d.shutdown();
    }
}

#[test]
fn a_listener_that_expects_a_proxy_header_refuses_anything_else() {
    let a = Backend::start("a");
    for driver in DRIVERS {
        let dir = temp_dir("client-refuse");
        let d = start(&dir, &manifests(&a), driver, |c| {
            c.settings.client_address.proxy_protocol_http = true;
            c.settings.client_address.proxy_protocol_timeout = Duration::from_millis(400);
        });
        let addr = d.http_addr();
        let before = a.requests();
        let mut too_long_v1 = b"PROXY UNKNOWN ".to_vec();
        too_long_v1.resize(200, b'x');
        let mut too_long_v2 = v2_raw(0x21, 0x11, &[0; 12]);
        too_long_v2[14..16].copy_from_slice(&5000u16.to_be_bytes());
        let attempts: Vec<(&str, Vec<u8>)> = vec![
            ("no header", get_req("open.test", "/", "").into_bytes()),
            ("a spoofed header's look-alike", b"X-Forwarded-For: 203.0.113.7\r\n".to_vec()),
            ("LF alone", b"PROXY TCP4 203.0.113.7 10.0.0.1 1 80\nGET / HTTP/1.1\r\n".to_vec()),
            ("two spaces", b"PROXY TCP4 203.0.113.7  10.0.0.1 1 80\r\n".to_vec()),
            ("family mismatch", b"PROXY TCP6 203.0.113.7 10.0.0.1 1 80\r\n".to_vec()),
            ("v1 over 107 bytes", too_long_v1),
            ("v2 length over the limit", too_long_v2[..16].to_vec()),
            ("v2 unknown family", v2_raw(0x21, 0x41, &[0; 12])),
            ("v2 unknown command", v2_raw(0x2F, 0x11, &[0; 12])),
            ("v2 version 3", v2_raw(0x31, 0x11, &[0; 12])),
            ("v2 TLV past the end", v2_raw(0x21, 0x11, &[[0u8; 12].as_slice(), &[0x04, 0x00, 0x09, 1]].concat())),
            ("a TLS ClientHello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03".to_vec()),
        ];
        for (what, bytes) in &attempts {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(bytes).unwrap();
            assert!(closed_without_a_word(&mut c), "{driver:?}: {what}");
        }
        // Half a header, then silence: closed once the timeout has passed.
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"PROXY TCP4 203.0.113.7 ").unwrap();
        let started = Instant::now();
        assert!(closed_without_a_word(&mut c), "{driver:?}: half a header");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(5), "{waited:?}");
        // And a client that sends nothing at all.
        let mut c = TcpStream::connect(addr).unwrap();
        assert!(closed_without_a_word(&mut c), "{driver:?}: silence");

        let refused = attempts.len() as u64 + 2;
        let admin = d.admin_addr();
        assert!(
            eventually(Duration::from_secs(5), || counter(admin, "ramjet_proxy_protocol_refused_total") == refused),
            "{driver:?}: {} refusals counted, {refused} expected",
            counter(admin, "ramjet_proxy_protocol_refused_total")
        );
        assert_eq!(a.requests(), before, "nothing reached the backend");
        // The listener still serves those who speak it.
        let r = via(addr, &v1("203.0.113.7:1", "10.0.0.1:80"), &get_req("allow.test", "/", ""));
        assert_eq!(r.status, 200, "{driver:?}");
        d.shutdown();
    }
}

#[test]
fn a_proxy_header_sent_to_a_listener_that_does_not_expect_it_is_not_believed() {
    let a = Backend::start("a");
    for driver in DRIVERS {
        let dir = temp_dir("client-unexpected");
        let d = start(&dir, &manifests(&a), driver, |c| c.settings.client_address.rules = trusted("127.0.0.0/8"));
        let addr = d.http_addr();
        let before = a.requests();
        let r = via(addr, &v1("203.0.113.7:1", "10.0.0.1:80"), &get_req("allow.test", "/", ""));
        assert_eq!(r.status, 400, "{driver:?}: the header is a malformed request line");
        let mut c = TcpStream::connect(addr).unwrap();
        let mut bytes = v2("203.0.113.7:1", "10.0.0.1:80");
        bytes.extend_from_slice(get_req("allow.test", "/", "").as_bytes());
        c.write_all(&bytes).unwrap();
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 400"), "{driver:?}: {answer}");
        assert_eq!(a.requests(), before, "nothing reached the backend");
        d.shutdown();
    }
}

#[test]
fn trusted_proxies_name_the_client_and_nobody_else_can() {
    let a = Backend::start("a");
    for driver in DRIVERS {
        // The peer (loopback) is a trusted proxy.
        let dir = temp_dir("client-trusted");
        let file = dir.join("access.log");
        let d = start(&dir, &manifests(&a), driver, |c| {
            c.settings.client_address.rules = trusted("127.0.0.0/8, ::1, 10.0.0.0/8");
            c.access_log = json_log(&file);
        });
        let addr = d.http_addr();
        let ask = |path: &str, extra: &str| request(addr, &get_req("allow.test", path, extra));
        let r = ask("/xff", "X-Forwarded-For: 6.6.6.6, 203.0.113.7, 10.1.1.1\r\n");
        assert_eq!(r.status, 200, "{driver:?}: {}", r.head);
        assert_eq!(seen_client(&r), both("203.0.113.7"), "{}", r.body);
        let r = ask("/two-fields", "X-Forwarded-For: 203.0.113.5\r\nX-Forwarded-For: 10.1.1.1\r\n");
        assert_eq!(seen_client(&r), both("203.0.113.5"), "{}", r.body);
        // The right-most untrusted entry decides: an address the attacker put left of its own is nothing.
        assert_eq!(ask("/spoof-left", "X-Forwarded-For: 203.0.113.7, 6.6.6.6\r\n").status, 403);
        assert_eq!(ask("/garbage", "X-Forwarded-For: 203.0.113.7, nonsense\r\n").status, 403, "the peer stands");
        assert_eq!(ask("/none", "").status, 403);
        assert_eq!(ask("/real-ip", "X-Real-IP: 203.0.113.7\r\n").status, 403, "not the configured field");
        let mut h2 = H2Client::connect(addr);
        let r = h2.request("GET", "allow.test", "/h2", &[("x-forwarded-for", "203.0.113.6")], b"", false).unwrap();
        assert_eq!(r.status, 200, "{driver:?}");
        assert!(r.text().contains("header=x-forwarded-for: 203.0.113.6\n"), "{}", r.text());
        assert!(r.text().contains("header=x-real-ip: 203.0.113.6\n"), "{}", r.text());
        drop(h2);
        d.shutdown();
        let logged = records(&file);
        assert_eq!(logged_client(&logged, "/xff"), "203.0.113.7");
        assert_eq!(logged_client(&logged, "/h2"), "203.0.113.6");
        assert!(logged_client(&logged, "/spoof-left").starts_with("6.6.6.6"));
        assert!(logged_client(&logged, "/none").starts_with("127.0.0.1:"));

        // The peer is not trusted: its fields change nothing.
        let dir = temp_dir("client-untrusted");
        let d = start(&dir, &manifests(&a), driver, |c| c.settings.client_address.rules = trusted("10.0.0.0/8"));
        let addr = d.http_addr();
        let spoof = "X-Forwarded-For: 203.0.113.7\r\nX-Real-IP: 203.0.113.7\r\nForwarded: for=203.0.113.7\r\n";
        assert_eq!(request(addr, &get_req("allow.test", "/", spoof)).status, 403, "{driver:?}");
        let r = request(addr, &get_req("open.test", "/", spoof));
        assert_eq!(seen_client(&r), both("127.0.0.1"), "{}", r.body);
        let mut h2 = H2Client::connect(addr);
        let r = h2.request("GET", "allow.test", "/", &[("x-forwarded-for", "203.0.113.7")], b"", false).unwrap();
        assert_eq!(r.status, 403, "{driver:?}");
        drop(h2);
        d.shutdown();

        // PROXY protocol, then the header: believed only when the address the PROXY header names is
        // a trusted proxy (an HTTP proxy in front of the TCP balancer).
        let dir = temp_dir("client-proxy-trusted");
        let d = start(&dir, &manifests(&a), driver, |c| {
            c.settings.client_address.proxy_protocol_http = true;
            c.settings.client_address.rules = trusted("10.0.0.0/8");
        });
        let addr = d.http_addr();
        let xff = "X-Forwarded-For: 203.0.113.7\r\n";
        let r = via(addr, &v1("10.1.1.1:5000", "10.0.0.1:80"), &get_req("allow.test", "/", xff));
        assert_eq!(r.status, 200, "{driver:?}");
        assert_eq!(seen_client(&r), both("203.0.113.7"), "{}", r.body);
        let refused = via(addr, &v1("198.51.100.1:5000", "10.0.0.1:80"), &get_req("allow.test", "/", xff));
        assert_eq!(refused.status, 403, "{driver:?}");
        let r = via(addr, &v1("198.51.100.1:5000", "10.0.0.1:80"), &get_req("open.test", "/", xff));
        assert_eq!(seen_client(&r), both("198.51.100.1"), "{}", r.body);
        d.shutdown();
    }
}

#[test]
fn the_configured_field_and_compute_full_forwarded_for() {
    let a = Backend::start("a");
    for driver in DRIVERS {
        // RFC 7239 `Forwarded`.
        let dir = temp_dir("client-forwarded");
        let d = start(&dir, &manifests(&a), driver, |c| {
            c.settings.client_address.rules =
                AddressRules { field: AddressField::new("Forwarded").unwrap(), ..trusted("127.0.0.1") };
        });
        let addr = d.http_addr();
        let r = request(
            addr,
            &get_req("allow.test", "/", "Forwarded: for=6.6.6.6, for=\"[2001:db8::5]:99\";proto=https\r\n"),
        );
        assert_eq!(r.status, 200, "{driver:?}: {}", r.head);
        assert_eq!(seen_client(&r), both("2001:db8::5"), "{}", r.body);
        assert_eq!(request(addr, &get_req("allow.test", "/", "X-Forwarded-For: 203.0.113.7\r\n")).status, 403);
        d.shutdown();

        // compute-full-forwarded-for: the client's list with the peer appended goes upstream.
        let dir = temp_dir("client-full");
        let d = start(&dir, &manifests(&a), driver, |c| {
            c.settings.client_address.rules = AddressRules { full_forwarded_for: true, ..trusted("127.0.0.1") };
        });
        let addr = d.http_addr();
        let r = request(addr, &get_req("allow.test", "/", "X-Forwarded-For: 6.6.6.6, 203.0.113.7\r\n"));
        assert_eq!(r.status, 200, "{driver:?}");
        assert_eq!(seen_field(&r, "x-forwarded-for").as_deref(), Some("6.6.6.6, 203.0.113.7, 127.0.0.1"));
        assert_eq!(seen_field(&r, "x-real-ip").as_deref(), Some("203.0.113.7"));
        let r = request(addr, &get_req("open.test", "/", ""));
        assert_eq!(seen_client(&r), both("127.0.0.1"));
        d.shutdown();
    }
}

/// The worst bug a proxy can have, for addresses: one client's address on another's request. The
/// attacker names itself 6.6.6.6 by PROXY header and tries 7.7.7.7 by `X-Forwarded-For` (which
/// reaches the backend only as its own claim, `X-Original-Forwarded-For`); the victim comes
/// through a trusted proxy. One worker and one upstream connection carry all of them.
#[test]
fn an_attacker_and_a_victim_on_one_pooled_upstream_connection_each_see_their_own_address() {
    for driver in DRIVERS {
        let a = Backend::start("a");
        let dir = temp_dir("client-pooled");
        let d = start(&dir, &manifests(&a), driver, |c| {
            c.workers = 1;
            c.settings.client_address.proxy_protocol_http = true;
            c.settings.client_address.rules = trusted("10.0.0.0/8");
        });
        let addr = d.http_addr();
        let mut attacker = connect(addr);
        let mut hello = v1("6.6.6.6:666", "10.0.0.1:80");
        hello.extend_from_slice(b"GET /attacker HTTP/1.1\r\nHost: open.test\r\nX-Forwarded-For: 7.7.7.7\r\n\r\n");
        attacker.send(&hello);
        let r = attacker.read_response();
        assert_eq!(seen_client(&r), both("6.6.6.6"), "{driver:?}: {}", r.body);
        let victim = via(
            addr,
            &v2("10.1.1.1:5000", "10.0.0.1:80"),
            &get_req("open.test", "/victim", "X-Forwarded-For: 203.0.113.7\r\n"),
        );
        assert_eq!(seen_client(&victim), both("203.0.113.7"), "{driver:?}: {}", victim.body);
        let r = attacker.get_with("open.test", "/attacker-again", "X-Forwarded-For: 203.0.113.7\r\n");
        assert_eq!(seen_client(&r), both("6.6.6.6"), "{driver:?}: {}", r.body);
        let third = via(addr, &v2("198.51.100.2:1", "10.0.0.1:80"), &get_req("open.test", "/third", ""));
        assert_eq!(seen_client(&third), both("198.51.100.2"), "{driver:?}: {}", third.body);
        assert_eq!(a.connections(), 1, "{driver:?}: every request went over the one pooled connection");
        let forwarded = a.received().to_ascii_lowercase();
        assert_eq!(forwarded.matches("x-forwarded-for:").count(), 4, "one line per request, no more");
        // The attacker's claim reaches the backend only as what it is, the client's own field
        // (ingress-nginx's X-Original-Forwarded-For), never as anyone's address.
        let claimed: Vec<&str> = forwarded.lines().map(str::trim_end).filter(|l| l.contains("7.7.7.7")).collect();
        assert_eq!(claimed, ["x-original-forwarded-for: 7.7.7.7"], "{forwarded}");
        d.shutdown();
    }
}

/// Per-client limits, consistent hashing on `$remote_addr` and external auth all key on the
/// address the PROXY header names, not on the balancer's.
#[test]
fn limits_hashing_and_external_auth_see_the_client_address() {
    let (a, b, auth) = (Backend::start("a"), Backend::start("b"), Backend::start("auth"));
    for driver in DRIVERS {
        let dir = temp_dir("client-policies");
        let mut text = manifests(&a);
        text.push_str(&service("shop", "auth", auth.addr));
        text.push_str(&Service::new("shop", "pair").slice_per_endpoint(&[a.addr, b.addr]).yaml());
        let routes = [
            ("limited", format!("{NGINX}/limit-rps: \"1\", {NGINX}/limit-burst-multiplier: \"1\""), "a"),
            ("hashed", format!("{NGINX}/upstream-hash-by: \"$remote_addr\""), "pair"),
            ("authed", format!("{NGINX}/auth-url: \"http://auth.shop.svc.cluster.local/verify\""), "a"),
        ];
        for (name, annotations, to) in &routes {
            text.push_str(
                &Ingress::new("shop", name)
                    .host(&format!("{name}.test"))
                    .port_number(80)
                    .annotations_yaml(annotations)
                    .path("/", "Prefix", to)
                    .yaml(),
            );
        }
        let d = start(&dir, &text, driver, |c| {
            c.workers = 1;
            c.settings.client_address.proxy_protocol_http = true;
        });
        let addr = d.http_addr();
        let from =
            |client: &str, host: &str, path: &str| via(addr, &v1(client, "10.0.0.1:80"), &get_req(host, path, ""));

        // The limit is per client (1 r/s, burst 1: nginx admits burst + 1 at once): a second client
        // is not held back by the first one's burst.
        let statuses: Vec<u16> =
            (1..=3).map(|port| from(&format!("203.0.113.1:{port}"), "limited.test", "/").status).collect();
        assert_eq!(statuses, [200, 200, 503], "{driver:?}: the same client, three times");
        assert_eq!(from("203.0.113.2:1", "limited.test", "/").status, 200, "{driver:?}: another client");

        // Hashing by the client: each client stays on one endpoint, and clients spread.
        let mut homes = std::collections::BTreeSet::new();
        for i in 1..=16 {
            let client = format!("198.51.100.{i}");
            let home = from(&format!("{client}:1"), "hashed.test", "/").body.lines().next().unwrap().to_string();
            for port in 2..4 {
                let again = from(&format!("{client}:{port}"), "hashed.test", "/");
                assert_eq!(again.body.lines().next().unwrap(), home, "{driver:?}: {client} moved");
            }
            homes.insert(home);
        }
        assert_eq!(homes.len(), 2, "{driver:?}: clients spread over both endpoints: {homes:?}");

        // External auth hears of the client, as ingress-nginx's auth location tells it.
        let r = from("203.0.113.9:1", "authed.test", "/page");
        assert_eq!(r.status, 200, "{driver:?}: {}", r.head);
        let asked = auth.received().to_ascii_lowercase();
        assert!(asked.contains("x-real-ip: 203.0.113.9\r\n"), "{asked}");
        assert!(asked.contains("x-forwarded-for: 203.0.113.9\r\n"), "{asked}");
        assert!(!asked.contains("127.0.0.1"), "{asked}");
        d.shutdown();
    }
}

/// On the HTTPS listener the header comes before the TLS ClientHello.
#[test]
fn a_proxy_header_before_the_tls_handshake_names_the_client() {
    use rustls::pki_types::ServerName;
    use rustls::{ClientConnection, StreamOwned};
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("client-tls");
    pki.leaf("example", &["example.com"]);
    let backend = Backend::start("b");
    for driver in DRIVERS {
        let yaml = format!(
            "backends:\n  b: {{ endpoints: [\"{}\"] }}\nroutes:\n  - {{ path: /, backend: b }}\ntls:\n  - {{ hosts: [example.com], certFile: example.crt, keyFile: example.key }}\n",
            backend.addr
        );
        let routes = support::routes_in(&yaml, &pki.dir);
        let d = support::daemon_with(routes, driver, |c| c.settings.client_address.proxy_protocol_https = true);
        let addr = d.https_addr().unwrap();
        let client = pki.client(&[&rustls::version::TLS13]);
        let https_get = |header: &[u8]| -> std::io::Result<String> {
            let mut tcp = TcpStream::connect(addr)?;
            tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
            tcp.write_all(header)?;
            let conn =
                ClientConnection::new(Arc::clone(&client), ServerName::try_from("example.com").unwrap()).unwrap();
            let mut tls = StreamOwned::new(conn, tcp);
            tls.write_all(b"GET /tls HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")?;
            let mut page = Vec::new();
            tls.read_to_end(&mut page)?;
            Ok(String::from_utf8_lossy(&page).to_string())
        };
        let page = https_get(&v2("203.0.113.7:4433", "10.0.0.1:443")).unwrap();
        assert!(page.starts_with("HTTP/1.1 200"), "{driver:?}: {page}");
        for line in [
            "x-forwarded-for: 203.0.113.7",
            "x-real-ip: 203.0.113.7",
            "x-forwarded-proto: https",
            "x-forwarded-port: 443",
        ] {
            assert!(page.contains(&format!("header={line}\n")), "{driver:?}: {line} in {page}");
        }
        let page = https_get(&v1("203.0.113.8:1", "10.0.0.1:443")).unwrap();
        assert!(page.contains("header=x-real-ip: 203.0.113.8\n"), "{driver:?}: {page}");
        assert!(https_get(b"").is_err(), "{driver:?}: a ClientHello without the header is refused");
        // The plain listener does not expect one.
        assert_eq!(request(d.http_addr(), &get_req("example.com", "/", "")).status, 200);
        d.shutdown();
    }
}

/// The daemon's flags: validated before anything is bound.
#[test]
fn the_daemon_refuses_bad_client_address_flags() {
    let dir = temp_dir("client-flags");
    let routes = dir.join("routes.yaml");
    std::fs::write(
        &routes,
        "backends:\n  hi: { respond: { status: 200, body: hi } }\nroutes:\n  - { path: /, backend: hi }\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ramjet"))
            .args(["--static-routes", routes.to_str().unwrap(), "--check"])
            .args(extra)
            .output()
            .unwrap()
    };
    let good = run(&[
        "--proxy-protocol",
        "http,https",
        "--trusted-proxies",
        "10.0.0.0/8,192.168.1.1,fd00::/8",
        "--forwarded-for-header",
        "Forwarded",
        "--compute-full-forwarded-for",
    ]);
    assert!(good.status.success(), "{}", String::from_utf8_lossy(&good.stderr));
    for (flags, says) in [
        (&["--trusted-proxies", "10.0.0.0/33"][..], "not an IP address or CIDR block"),
        (&["--trusted-proxies", "proxy.example"], "not an IP address or CIDR block"),
        (&["--forwarded-for-header", "X Forwarded"], "not an HTTP field name"),
        (&["--proxy-protocol", "tcp"], "invalid value"),
        (&["--proxy-protocol-timeout", "soon"], "not a duration"),
    ] {
        let out = run(flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{flags:?}: {stderr}");
    }
}

/// Behind a load balancer that terminates TLS: a trusted proxy's `X-Forwarded-Proto: https` means
/// the client came over HTTPS, so an HTTPS redirect does not send it round again, and its scheme,
/// port and host go upstream as the client's. Anyone else's are ramjet's own.
#[test]
fn a_trusted_proxys_scheme_port_and_host_are_the_clients() {
    let a = Backend::start("a");
    let mut text = manifests(&a);
    text.push_str(
        &Ingress::new("shop", "secure")
            .host("secure.test")
            .port_number(80)
            .annotation(&format!("{NGINX}/force-ssl-redirect"), "true")
            .path("/", "Prefix", "a")
            .yaml(),
    );
    let from_the_balancer = "X-Forwarded-Proto: https\r\nX-Forwarded-Port: 443\r\nX-Forwarded-Host: shop.example\r\n";
    for driver in DRIVERS {
        let dir = temp_dir("client-forwarded-proto");
        let d = start(&dir, &text, driver, |c| c.settings.client_address.rules = trusted("127.0.0.0/8, ::1"));
        let addr = d.http_addr();
        let r = request(addr, &get_req("secure.test", "/cart", from_the_balancer));
        assert_eq!(r.status, 200, "{driver:?}: an HTTPS client behind the balancer is not redirected: {}", r.head);
        assert_eq!(seen_field(&r, "x-forwarded-proto").as_deref(), Some("https"), "{}", r.body);
        assert_eq!(seen_field(&r, "x-forwarded-port").as_deref(), Some("443"), "{}", r.body);
        assert_eq!(seen_field(&r, "x-forwarded-host").as_deref(), Some("shop.example"), "{}", r.body);
        // Plain HTTP behind the balancer is redirected, as without one.
        let r = request(addr, &get_req("secure.test", "/cart", "X-Forwarded-Proto: http\r\n"));
        assert_eq!((r.status, r.header("location")), (308, Some("https://secure.test/cart")), "{driver:?}");
        // test/e2e/settings/tls.go: the redirect names the host the balancer's client asked for,
        // its port cut.
        let forwarded = "X-Forwarded-Proto: http\r\nX-Forwarded-Host: Example.com:80, other.test\r\n";
        let r = request(addr, &get_req("secure.test", "/", forwarded));
        assert_eq!((r.status, r.header("location")), (308, Some("https://example.com")), "{driver:?}");
        let mut h2 = H2Client::connect(addr);
        let r = h2.request("GET", "secure.test", "/h2", &[("x-forwarded-host", "example.com:80")], b"", false).unwrap();
        assert_eq!((r.status, r.header("location")), (308, Some("https://example.com/h2")), "{driver:?}");
        let r = h2.request("GET", "secure.test", "/h2", &[("x-forwarded-proto", "https")], b"", false).unwrap();
        assert_eq!(r.status, 200, "{driver:?}: HTTP/2 alike");
        assert!(r.text().contains("header=x-forwarded-proto: https\n"), "{}", r.text());
        drop(h2);
        d.shutdown();

        // Not a trusted proxy: its scheme changes nothing, and ramjet's own fields go upstream.
        let dir = temp_dir("client-forwarded-proto-untrusted");
        let d = start(&dir, &text, driver, |c| c.settings.client_address.rules = trusted("10.0.0.0/8"));
        let addr = d.http_addr();
        let r = request(addr, &get_req("secure.test", "/", from_the_balancer));
        assert_eq!((r.status, r.header("location")), (308, Some("https://secure.test")), "{driver:?}");
        let r = request(addr, &get_req("open.test", "/", from_the_balancer));
        assert_eq!(seen_field(&r, "x-forwarded-proto").as_deref(), Some("http"), "{}", r.body);
        assert_eq!(seen_field(&r, "x-forwarded-port"), Some(addr.port().to_string()), "{}", r.body);
        assert_eq!(seen_field(&r, "x-forwarded-host").as_deref(), Some("open.test"), "{}", r.body);
        d.shutdown();
    }
}
