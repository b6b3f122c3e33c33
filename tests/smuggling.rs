//! The attacker's tests: each sends what a smuggling corpus or RFC 9112 rule says, over a real
//! socket, then a victim's request goes over the same pooled upstream connection (one worker), and
//! the test checks what each of them received and what the backend saw. Every test runs once per
//! I/O driver.

use ramjet_test_support as support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ramjet_dataplane::IoDriver;
use support::backend::{Backend, ScriptedBackend};
use support::client::{request, Conn, Response};
use support::{daemon_with, routes, DRIVERS};

fn each_driver(test: impl Fn(IoDriver)) {
    for driver in DRIVERS {
        test(driver);
    }
}

/// One worker, so that the attacker and the victim share the upstream pool.
fn one_worker_proxy(backend: std::net::SocketAddr, driver: IoDriver) -> ramjet::Daemon {
    proxy_with(backend, driver, |c| c.workers = 1)
}

/// Every request proxied to `backend`, with the daemon's configuration changed by `tweak`.
fn proxy_with(
    backend: std::net::SocketAddr,
    driver: IoDriver,
    tweak: impl FnOnce(&mut ramjet::DaemonConfig),
) -> ramjet::Daemon {
    let yaml = format!("backends:\n  b: {{ endpoints: [\"{backend}\"] }}\nroutes:\n  - {{ path: /, backend: b }}\n");
    daemon_with(routes(&yaml), driver, tweak)
}

/// The victim: an ordinary request with a secret, on its own connection.
fn victim(addr: std::net::SocketAddr) -> Response {
    request(addr, "GET /victim HTTP/1.1\r\nHost: localhost\r\nCookie: session=victim-secret\r\n\r\n")
}

fn assert_victim_served_alone(resp: &Response) {
    assert_eq!(resp.status, 200, "{resp:?}");
    // The backend echoes the request it parsed: the victim's own, with the victim's cookie.
    assert!(resp.body.contains("target=/victim"), "the victim got someone else's response: {}", resp.body);
    assert!(resp.body.contains("header=Cookie: session=victim-secret"), "{}", resp.body);
    assert!(!resp.body.contains("smuggled"), "{}", resp.body);
}

/// The start of a request the attacker hides in a body, to be completed by the next request on the
/// same upstream connection if the body's framing is lost on the way.
const SMUGGLED: &str = "GET /admin-smuggled HTTP/1.1\r\nHost: localhost\r\nX-Ignore: ";

/// Sends `attack` (whose body is [`SMUGGLED`]) and then a victim's request over the same pooled
/// upstream connection: the attacker's body must arrive as its body, the victim must be served alone.
fn attack_then_victim(attack: &str, driver: IoDriver) {
    let b = Backend::start("b");
    let d = one_worker_proxy(b.addr, driver);
    let resp = request(d.http_addr(), attack);
    assert_eq!(resp.status, 200, "{driver:?}");
    // The bytes arrived as the POST's body, framed by what ramjet wrote.
    assert!(resp.body.contains("body=GET /admin-smuggled"), "{driver:?}: {}", resp.body);
    assert_victim_served_alone(&victim(d.http_addr()));
    assert_eq!(b.connections(), 1, "{driver:?}: both went over one pooled connection");
    assert_eq!(b.requests(), 2, "{driver:?}: the backend parsed exactly two requests");
    d.shutdown();
}

#[test]
fn connection_cannot_remove_content_length() {
    let attack = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nConnection: Content-Length\r\nContent-Length: {}\r\n\r\n{SMUGGLED}",
        SMUGGLED.len()
    );
    each_driver(|driver| attack_then_victim(&attack, driver));
}

#[test]
fn connection_cannot_remove_transfer_encoding() {
    let attack = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{SMUGGLED}\r\n0\r\n\r\n",
        SMUGGLED.len()
    );
    each_driver(|driver| attack_then_victim(&attack, driver));
}

#[test]
fn connection_cannot_remove_host() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let resp = request(d.http_addr(), "GET /h HTTP/1.1\r\nHost: example.com\r\nConnection: Host\r\n\r\n");
        assert!(resp.body.contains("header=host: example.com"), "{driver:?}: {}", resp.body);
        d.shutdown();
    });
}

#[test]
fn absolute_form_replaces_host_and_userinfo_is_refused() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let resp = request(d.http_addr(), "GET http://real.example/p HTTP/1.1\r\nHost: fake.example\r\n\r\n");
        assert!(resp.body.contains("target=/p"), "{}", resp.body);
        assert!(resp.body.contains("header=host: real.example"), "{}", resp.body);
        assert!(!resp.body.contains("fake.example"), "{}", resp.body);
        let resp = request(d.http_addr(), "GET http://user:pw@real.example/ HTTP/1.1\r\nHost: real.example\r\n\r\n");
        assert_eq!(resp.status, 400);
        assert!(!b.received().contains("user:pw"), "{}", b.received());
        d.shutdown();
    });
}

#[test]
fn http10_without_host_gets_one_upstream() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let resp = request(d.http_addr(), "GET /old HTTP/1.0\r\n\r\n");
        assert_eq!(resp.status, 200);
        assert!(resp.body.contains(&format!("header=host: {}", b.addr)), "{}", resp.body);
        d.shutdown();
    });
}

#[test]
fn invalid_hosts_and_transfer_codings_are_refused_before_any_backend() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let cases = [
            ("GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost:\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ,chunked\r\n\r\n0\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
            ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
        ];
        for (raw, status) in cases {
            let resp = request(d.http_addr(), raw);
            assert_eq!((resp.status, resp.header("connection")), (status, Some("close")), "{driver:?} {raw:?}");
            assert!(resp.header("date").is_some(), "{raw:?}");
        }
        assert_eq!(b.requests(), 0, "{driver:?}: nothing reached the backend: {}", b.received());
        d.shutdown();
    });
}

#[test]
fn equal_content_lengths_are_sent_once() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let resp =
            request(d.http_addr(), "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!(resp.status, 200);
        assert!(resp.body.contains("body=abc"));
        assert_eq!(b.received().to_ascii_lowercase().matches("content-length").count(), 1, "{}", b.received());
        d.shutdown();
    });
}

#[test]
fn malformed_trailers_are_refused_and_the_victim_is_safe() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        for trailer in
            ["X: a\r\n folded\r\n", "GET /admin-smuggled HTTP/1.1\r\n", "Content-Length: 40\r\n", "X : a\r\n"]
        {
            let attack = format!("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n{trailer}\r\n");
            let before = b.requests();
            let resp = request(d.http_addr(), &attack);
            assert_eq!(resp.status, 400, "{driver:?} {trailer:?}");
            assert_victim_served_alone(&victim(d.http_addr()));
            assert!(b.requests() - before <= 2, "{driver:?} {trailer:?}: a request was smuggled");
        }
        // A well-formed trailer passes.
        let resp = request(
            d.http_addr(),
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n",
        );
        assert!(resp.body.contains("body=abc"), "{}", resp.body);
        d.shutdown();
    });
}

#[test]
fn ambiguous_responses_get_502_and_never_desync_the_pool() {
    each_driver(|driver| {
        let scripted = |first: &str| {
            ScriptedBackend::start(vec![
                first.as_bytes().to_vec(),
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nvictim".to_vec(),
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nvictim".to_vec(),
            ])
        };
        for first in [
            // Read by Content-Length, the rest of the chunked body would answer the next request.
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\nfirstHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nEVIL!!",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nfirst",
        ] {
            let b = scripted(first);
            let d = one_worker_proxy(b.addr, driver);
            let resp = request(d.http_addr(), "GET /attacker HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!(resp.status, 502, "{driver:?} {first:?}");
            let resp = request(d.http_addr(), "GET /victim HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!((resp.status, resp.body.as_str()), (200, "victim"), "{driver:?} {first:?}");
            assert_eq!(b.connections(), 2, "the refused response's connection was not reused");
            d.shutdown();
        }
    });
}

#[test]
fn h2c_upgrades_are_not_forwarded() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let resp = request(
            d.http_addr(),
            "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
        );
        // Served as a plain request: the backend never saw an upgrade.
        assert_ne!(resp.status, 101, "{driver:?}");
        let seen = b.received().to_ascii_lowercase();
        assert!(!seen.contains("upgrade") && !seen.contains("http2-settings"), "{seen}");
        d.shutdown();
    });
}

#[test]
fn a_client_that_stops_reading_is_cut_off() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = proxy_with(b.addr, driver, |c| {
            c.workers = 1;
            c.settings.client_write_timeout = Duration::from_millis(300);
        });
        let size = 64 << 20;
        let mut stalled = Conn::open(d.http_addr());
        stalled.send(format!("GET /big/{size} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        // Read nothing while socket buffers fill and the write timeout passes.
        std::thread::sleep(Duration::from_millis(1500));
        let mut received = 0usize;
        let mut chunk = vec![0u8; 1 << 20];
        let started = Instant::now();
        loop {
            match stalled.stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => received += n,
            }
            assert!(started.elapsed() < Duration::from_secs(20), "the stalled connection was never closed");
        }
        assert!(received < size, "{driver:?}: the whole response arrived ({received} bytes)");
        // The worker keeps serving others.
        let resp = request(d.http_addr(), "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(resp.body.contains("target=/after"));
        d.shutdown();
    });
}

#[test]
fn a_stalled_request_body_gets_408_naming_the_body() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = proxy_with(b.addr, driver, |c| c.settings.client_body_timeout = Duration::from_millis(300));
        let mut conn = Conn::open(d.http_addr());
        conn.send(b"POST /slow-body HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
        let resp = conn.read_response();
        assert_eq!((resp.status, resp.body.as_str()), (408, "request timeout\n"), "{driver:?}");
        assert!(conn.is_closed());
        assert_eq!(b.requests(), 0, "a small body is read whole before the backend is involved");
        d.shutdown();
    });
}

#[test]
fn slow_small_bodies_hold_no_upstream_connection() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let mut slow: Vec<Conn> = (0..20).map(|_| Conn::open(d.http_addr())).collect();
        for c in &mut slow {
            c.send(b"POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nab");
        }
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(b.connections(), 0, "{driver:?}: slow senders hold upstream connections");
        for c in &mut slow {
            c.send(b"cd");
        }
        for c in &mut slow {
            let resp = c.read_response();
            assert!(resp.body.contains("body=abcd"), "{}", resp.body);
        }
        d.shutdown();
    });
}

#[test]
fn answers_ramjet_writes_carry_a_date() {
    each_driver(|driver| {
        let d = daemon_with(
            routes("backends:\n  hi: { respond: { status: 200, body: \"hi\" } }\n  dead: { endpoints: [\"127.0.0.1:1\"] }\nroutes:\n  - { host: a, path: /, backend: hi }\n  - { host: a, path: /dead, backend: dead }\n"),
            driver,
            |_| {},
        );
        for (host, path, status) in [("a", "/", 200), ("b", "/", 404), ("a", "/dead", 502)] {
            let resp = request(d.http_addr(), &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"));
            assert_eq!(resp.status, status);
            let date = resp.header("date").unwrap_or_else(|| panic!("no Date on {status}: {}", resp.head));
            assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
        }
        d.shutdown();
    });
}

#[test]
fn pipelined_attack_after_a_refusal_never_reaches_the_backend() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        let mut conn = Conn::open(d.http_addr());
        conn.send(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin-smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
        );
        let resp = conn.read_response();
        assert_eq!(resp.status, 400);
        assert!(conn.is_closed(), "a refused request closes the connection with whatever follows it");
        let _ = conn.stream.write_all(b"x");
        assert!(!b.received().contains("admin-smuggled"));
        d.shutdown();
    });
}

/// The 2025 "funky chunks" findings (chunk-extension and line-terminator handling that two
/// parsers read differently): bare LF where CRLF belongs, a LF or other control byte inside a
/// chunk extension, an oversized extension, and sizes with whitespace, signs, `0x` or more digits
/// than fit. Each request body is refused with 400 before any of it is forwarded whole, and a victim
/// on the same pooled upstream connection is served alone.
#[test]
fn funky_chunks_in_request_bodies_are_refused_and_the_victim_is_safe() {
    let long_extension = format!("3;{}\r\nabc\r\n0\r\n\r\n", "x".repeat(5000));
    let vectors: Vec<(&str, String)> = vec![
        ("bare LF after the size", "3\nabc\r\n0\r\n\r\n".into()),
        ("bare LF after the data", "3\r\nabc\n0\r\n\r\n".into()),
        ("bare LF ends the last chunk", "0\n\r\n".into()),
        ("LF inside an extension", "3;a=\nb\r\nabc\r\n0\r\n\r\n".into()),
        ("CR alone inside an extension", "3;a=\rb\r\nabc\r\n0\r\n\r\n".into()),
        ("a control byte inside an extension", "3;a=\x01\r\nabc\r\n0\r\n\r\n".into()),
        ("an oversized extension", long_extension),
        ("whitespace before the size", " 3\r\nabc\r\n0\r\n\r\n".into()),
        ("a sign before the size", "+3\r\nabc\r\n0\r\n\r\n".into()),
        ("0x before the size", "0x3\r\nabc\r\n0\r\n\r\n".into()),
        ("a size that overflows 64 bits", "10000000000000003\r\nabc\r\n0\r\n\r\n".into()),
        ("data longer than its size", "3\r\nabcd\r\n0\r\n\r\n".into()),
        ("an underscore in the size", "1_0\r\nabcdefghijklmnop\r\n0\r\n\r\n".into()),
    ];
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = one_worker_proxy(b.addr, driver);
        for (what, body) in &vectors {
            let attack =
                format!("POST /attacker HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n{body}{SMUGGLED}");
            let before = b.requests();
            let resp = request(d.http_addr(), &attack);
            assert_eq!(resp.status, 400, "{driver:?}: {what}: {resp:?}");
            assert_victim_served_alone(&victim(d.http_addr()));
            // At most the attacker's own (cut short) and the victim's: nothing smuggled between.
            assert!(b.requests() - before <= 2, "{driver:?}: {what}: a request was smuggled");
            assert!(!b.received().contains("admin-smuggled HTTP"), "{driver:?}: {what}: {}", b.received());
        }
        // A well-formed extension is allowed, and the body arrives whole.
        let resp = request(
            d.http_addr(),
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;name=\"v a\"\r\nabc\r\n0\r\n\r\n",
        );
        assert!(resp.status == 200 && resp.body.contains("body=abc"), "{driver:?}: {resp:?}");
        d.shutdown();
    });
}

/// The same findings in a backend's chunked response: ramjet's upstream parser refuses the
/// response (502 to its client, the connection dropped), so the bytes after the lost framing never
/// answer the next request on the pooled connection.
#[test]
fn funky_chunks_in_responses_get_502_and_never_desync_the_pool() {
    let evil = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL";
    let vectors = [
        ("bare LF after the size", format!("5\nfirst\r\n0\r\n\r\n{evil}")),
        ("LF inside an extension", format!("5;a\nb\r\nfirst\r\n0\r\n\r\n{evil}")),
        ("an oversized extension", format!("5;{}\r\nfirst\r\n0\r\n\r\n{evil}", "x".repeat(5000))),
        ("0x before the size", format!("0x5\r\nfirst\r\n0\r\n\r\n{evil}")),
        ("data longer than its size", format!("5\r\nfirst!\r\n0\r\n\r\n{evil}")),
    ];
    each_driver(|driver| {
        for (what, body) in &vectors {
            let first = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{body}");
            let b = ScriptedBackend::start(vec![
                first.into_bytes(),
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nvictim".to_vec(),
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nvictim".to_vec(),
            ]);
            let d = one_worker_proxy(b.addr, driver);
            let resp = request(d.http_addr(), "GET /attacker HTTP/1.1\r\nHost: h\r\n\r\n");
            // The head was good and may have been sent on: the client sees a 502 or a cut body,
            // never a complete answer from the bytes after the bad chunk.
            assert!(resp.status == 502 || !resp.body.contains("EVIL"), "{driver:?}: {what}: {resp:?}");
            let resp = request(d.http_addr(), "GET /victim HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!((resp.status, resp.body.as_str()), (200, "victim"), "{driver:?}: {what}");
            assert_eq!(b.connections(), 2, "{driver:?}: {what}: the broken response's connection was reused");
            d.shutdown();
        }
    });
}

/// With tracing on, ramjet rewrites a traced request's upstream head: the client's `traceparent`
/// lines are removed and its own added. An attacker that sends several of them, in other cases, one
/// with a CR/LF-looking value and a body hiding a request, still gets exactly one `traceparent`
/// upstream — in a new trace, since two are no context at all (W3C Trace Context's
/// `test_traceparent_duplicated`) — and its body as a body; a victim on the same pooled upstream
/// connection is served alone.
#[test]
fn a_rewritten_traceparent_never_shifts_the_upstream_framing() {
    each_driver(|driver| {
        let b = Backend::start("b");
        let d = proxy_with(b.addr, driver, |c| {
            c.workers = 1;
            // Spans go nowhere; every request is traced.
            c.traces =
                Some(ramjet_dataplane::TraceSettings::new(format!("http://{}", support::dead_addr()).parse().unwrap()));
        });
        let body = SMUGGLED;
        let attack = format!(
            "POST / HTTP/1.1\r\nHost: h\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\
             TRACEPARENT: 00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01\r\nTraceParent: x\\r\\ny: z\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let resp = request(d.http_addr(), &attack);
        assert_eq!(resp.status, 200, "{driver:?}: {resp:?}");
        assert!(resp.body.contains("body=GET /admin-smuggled"), "{driver:?}: {}", resp.body);
        let traceparents: Vec<&str> =
            resp.body.lines().filter(|l| l.to_ascii_lowercase().starts_with("header=traceparent")).collect();
        assert_eq!(traceparents.len(), 1, "{driver:?}: {traceparents:?}");
        for client in ["4bf92f3577b34da6a3ce929d0e0e4736", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"] {
            assert!(!traceparents[0].contains(client), "{driver:?}: duplicates are no context: {traceparents:?}");
        }
        assert_victim_served_alone(&victim(d.http_addr()));
        assert_eq!(b.connections(), 1, "{driver:?}: both went over one pooled connection");
        assert_eq!(b.requests(), 2, "{driver:?}: the backend parsed exactly two requests");
        d.shutdown();
    });
}
