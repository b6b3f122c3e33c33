//! HTTP/1.1 clients of a backend that speaks only HTTP/2 (`protocol: H2C`), over real sockets on both
//! I/O drivers: each request becomes a stream on the worker's one multiplexed connection to the
//! backend, and the answer comes back as HTTP/1.1 with framing ramjet writes — the backend's
//! `content-length` when it sent one, else chunked with its trailers, else (HTTP/1.0) until close.
//!
//! The attacker's tests: what a client can put in a request (a body that looks like a request, a
//! body the backend never reads, framing that cannot be trusted) never reaches the backend as a
//! request of its own, and another client's request on the same upstream connection gets exactly
//! its own answer.

use ramjet_test_support as support;
use ramjet_test_support::grpc_backend;

use std::io::Read;
use std::time::Duration;

use grpc_backend::GrpcBackend;
use support::client::Conn;
use support::{daemon_with, routes_in, DRIVERS};

fn routes(backend: &GrpcBackend) -> String {
    format!(
        "backends:\n  h2: {{ endpoints: [\"{}\"], protocol: H2C }}\nroutes:\n  - {{ host: h2.test, path: /, backend: h2 }}\n",
        backend.addr
    )
}

fn post(path: &str, body: &str, framing: &str) -> Vec<u8> {
    let (field, payload) = match framing {
        "chunked" => ("transfer-encoding: chunked".to_string(), format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())),
        _ => (format!("content-length: {}", body.len()), body.to_string()),
    };
    format!("POST {path} HTTP/1.1\r\nHost: h2.test\r\n{field}\r\n\r\n{payload}").into_bytes()
}

#[test]
fn http1_clients_are_served_by_an_h2c_backend_over_one_multiplexed_connection() {
    for driver in DRIVERS {
        let backend = GrpcBackend::start();
        let d = daemon_with(routes_in(&routes(&backend), std::path::Path::new(".")), driver, |c| c.workers = 1);
        let mut c = Conn::open(d.http_addr());

        // The backend's content-length frames the answer; ramjet's fields go up and come back.
        let r = c.get("h2.test", "/plain/a?length");
        assert_eq!(r.status, 200, "{driver:?}: {r:?}");
        assert_eq!(r.body, "GET /plain/a authority=h2.test body=", "{driver:?}");
        assert_eq!(r.header("content-length"), Some("36"), "{driver:?}: {r:?}");
        assert_eq!(r.header("x-seen-x-forwarded-for"), Some("127.0.0.1"), "{driver:?}: {r:?}");
        let id = r.header("x-request-id").expect("a request id").to_string();
        assert_eq!(r.header("x-seen-x-request-id"), Some(id.as_str()), "{driver:?}: the id went up as well");
        assert!(r.header("transfer-encoding").is_none(), "{driver:?}: {r:?}");

        // Without one, chunked, and the backend's trailers become the chunked trailer section.
        let r = c.get("h2.test", "/plain/b");
        assert_eq!((r.status, r.body.as_str()), (200, "GET /plain/b authority=h2.test body="), "{driver:?}");
        assert_eq!(r.header("transfer-encoding"), Some("chunked"), "{driver:?}: {r:?}");
        let r = c.get("h2.test", "/plain/t?trailers");
        assert_eq!(r.body, "GET /plain/t authority=h2.test body=", "{driver:?}");
        assert_eq!(r.trailers, "x-trailer: relayed\r\n", "{driver:?}: {r:?}");

        // Bodies go up as DATA frames, whichever framing the client used.
        c.send(&post("/plain/p", "hello", "length"));
        let r = c.read_response();
        assert_eq!(r.body, "POST /plain/p authority=h2.test body=hello", "{driver:?}");
        assert_eq!(r.header("x-seen-content-length"), Some("5"), "{driver:?}: {r:?}");
        c.send(&post("/plain/p", "chunked hello", "chunked"));
        let r = c.read_response();
        assert_eq!(r.body, "POST /plain/p authority=h2.test body=chunked hello", "{driver:?}");
        assert!(r.header("x-seen-content-length").is_none() && r.header("x-seen-te").is_none(), "{driver:?}: {r:?}");
        // Larger than the client buffer: streamed as it arrives, within the backend's window.
        let big: String = (0..200_000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        c.send(&post("/plain/big?length", &big, "chunked"));
        let r = c.read_response();
        assert_eq!(r.body.len(), "POST /plain/big authority=h2.test body=".len() + big.len(), "{driver:?}");
        assert!(r.body.ends_with(&big), "{driver:?}: the body arrived whole and in order");

        // HEAD keeps the length and sends no body; 204 carries neither.
        c.send(b"HEAD /plain/h?length HTTP/1.1\r\nHost: h2.test\r\n\r\n");
        let r = c.read_response_to(true).unwrap();
        assert_eq!(r.status, 200, "{driver:?}: {r:?}");
        let r = c.get("h2.test", "/plain/n?status=204");
        assert_eq!((r.status, r.header("content-length")), (204, None), "{driver:?}: {r:?}");
        // The connection stayed in step through all of it.
        let r = c.get("h2.test", "/plain/last?length");
        assert_eq!(r.body, "GET /plain/last authority=h2.test body=", "{driver:?}");

        // HTTP/1.0 has no chunked framing: the answer ends when the connection does.
        let mut old = Conn::open(d.http_addr());
        old.send(b"GET /plain/old HTTP/1.0\r\nHost: h2.test\r\n\r\n");
        let r = old.read_response();
        assert_eq!(r.body, "GET /plain/old authority=h2.test body=", "{driver:?}");
        assert!(r.header("transfer-encoding").is_none(), "{driver:?}: {r:?}");
        assert_eq!(r.header("connection"), Some("close"), "{driver:?}: {r:?}");

        assert_eq!(backend.connections(), 1, "{driver:?}: every request shared one HTTP/2 connection");
        d.shutdown();
    }
}

/// An HTTP/2 backend that is down is a 502 for HTTP/1.1 clients, as an HTTP/1.1 backend is.
#[test]
fn a_down_h2c_backend_is_a_502_for_http1_clients() {
    for driver in DRIVERS {
        let yaml = format!(
            "backends:\n  h2: {{ endpoints: [\"{}\"], protocol: H2C }}\nroutes:\n  - {{ host: h2.test, path: /, backend: h2 }}\n",
            support::dead_addr()
        );
        let d = daemon_with(routes_in(&yaml, std::path::Path::new(".")), driver, |c| c.workers = 1);
        let r = support::client::get(d.http_addr(), "h2.test", "/plain/x");
        assert_eq!(r.status, 502, "{driver:?}: {r:?}");
        d.shutdown();
    }
}

/// The attacker's test over the shared HTTP/2 upstream connection. The attacker sends, on its own
/// connection: a body that is itself a request; framing ramjet refuses (Content-Length with
/// Transfer-Encoding, a broken chunk); and a large body the backend answers without reading, with
/// a request hidden at its end. The victim, on another connection, is served over the same
/// upstream connection after each and gets exactly its own answer; the backend never sees a
/// request the attacker hid.
#[test]
fn an_http1_attacker_cannot_reach_another_clients_stream_on_the_shared_h2_upstream() {
    for driver in DRIVERS {
        let backend = GrpcBackend::start();
        let d = daemon_with(routes_in(&routes(&backend), std::path::Path::new(".")), driver, |c| c.workers = 1);
        let victim = || {
            let r = support::client::get(d.http_addr(), "h2.test", "/plain/victim?length");
            assert_eq!((r.status, r.body.as_str()), (200, "GET /plain/victim authority=h2.test body="), "{driver:?}");
        };
        victim();
        let smuggled = "GET /plain/smuggled HTTP/1.1\r\nHost: h2.test\r\n\r\n";

        // A body that looks like a request is a body.
        let mut a = Conn::open(d.http_addr());
        a.send(&post("/plain/attack", smuggled, "length"));
        let r = a.read_response();
        assert_eq!(r.body, format!("POST /plain/attack authority=h2.test body={smuggled}"), "{driver:?}");
        victim();

        // Ambiguous or broken framing is refused before anything goes up, and the connection closes.
        for attack in [
            format!("POST /plain/attack HTTP/1.1\r\nHost: h2.test\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}"),
            format!("POST /plain/attack HTTP/1.1\r\nHost: h2.test\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n{smuggled}"),
        ] {
            let mut a = Conn::open(d.http_addr());
            a.send(attack.as_bytes());
            let r = a.read_response();
            assert_eq!(r.status, 400, "{driver:?}: {r:?}");
            assert!(a.is_closed(), "{driver:?}: nothing after a refusal is read as a request");
            victim();
        }

        // The backend answers before reading a large body: the answer is relayed, the rest of the
        // body (with a request at its end) is never read, and the connection closes.
        let mut a = Conn::open(d.http_addr());
        let filler = "x".repeat(300_000);
        let body = format!("{filler}{smuggled}");
        let head = format!(
            "POST /plain/early?early&length HTTP/1.1\r\nHost: h2.test\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        a.send(head.as_bytes());
        // Enough of the body to be streamed; the rest may or may not be accepted by the kernel.
        a.send(&body.as_bytes()[..100_000]);
        let r = a.read_response();
        assert_eq!((r.status, r.body.as_str()), (200, "POST /plain/early authority=h2.test body="), "{driver:?}");
        assert_eq!(r.header("connection"), Some("close"), "{driver:?}: {r:?}");
        let _ = std::io::Write::write_all(&mut a.stream, &body.as_bytes()[100_000..]);
        a.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        let _ = a.stream.read_to_end(&mut rest);
        assert!(!String::from_utf8_lossy(&rest).contains("HTTP/1.1"), "{driver:?}: no second answer");
        victim();

        let requests = backend.requests();
        assert!(!requests.iter().any(|r| r.contains("smuggled")), "{driver:?}: {requests:?}");
        assert_eq!(backend.connections(), 1, "{driver:?}: the victim shared the attacker's upstream connection");
        d.shutdown();
    }
}
