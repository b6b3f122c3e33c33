//! gRPC through ramjet over real sockets. When ramjet answers a gRPC request itself (no route, no
//! endpoints, the backend refusing or too slow), the client gets a trailers-only response: HTTP 200,
//! `content-type: application/grpc`, the `grpc-status` a gRPC client reports and a short
//! `grpc-message`, and no body. Checked with the h2 crate (the exact frames' fields) and with
//! grpcurl (what a user of a gRPC client sees), over h2c and TLS, on both I/O drivers.
//!
//! Backends with `protocol: GRPC` are reached over HTTP/2, one multiplexed connection per endpoint
//! per worker: grpcurl calls each streaming mode of the test service through ramjet, trailers
//! come back, a backend's trailers-only error is relayed as it is, and `grpc-timeout` bounds the
//! wait for an answer.

use ramjet_test_support as support;
use ramjet_test_support::{go_tools, grpc_backend, h2client, tls_backend};

use std::process::Command;
use std::time::Duration;

use grpc_backend::GrpcBackend;
use h2client::H2Client;
use ramjet_dataplane::access_log::{Destination, Format};
use ramjet_dataplane::AccessLogSettings;
use support::backend::Backend;
use support::{daemon_with, dead_addr, eventually, routes_in, temp_dir, DRIVERS};

const GRPC: &[(&str, &str)] = &[("content-type", "application/grpc"), ("te", "trailers")];

fn config(slow: &Backend) -> String {
    format!(
        r#"
backends:
  dead: {{ endpoints: ["{dead}"] }}
  empty: {{ endpoints: [] }}
  slow: {{ endpoints: ["{slow}"] }}
routes:
  - {{ host: dead.test, path: /, backend: dead }}
  - {{ host: empty.test, path: /, backend: empty }}
  - {{ host: slow.test, path: /, backend: slow }}
tls:
  - {{ hosts: [nowhere.test, empty.test, dead.test], certFile: grpc.crt, keyFile: grpc.key }}
"#,
        dead = dead_addr(),
        slow = slow.addr
    )
}

/// grpcurl's answer for `Echo/Unary` at `authority` through `addr`: its output, trimmed.
fn grpcurl(addr: std::net::SocketAddr, authority: &str, tls: Option<&std::path::Path>) -> String {
    grpcurl_call(addr, authority, tls, "Unary", r#"{"text":"hi"}"#, &[])
}

/// grpcurl calling `ramjet.test.Echo/<method>` with the JSON messages `data`: its output (stdout
/// and stderr), whitespace collapsed.
fn grpcurl_call(
    addr: std::net::SocketAddr,
    authority: &str,
    tls: Option<&std::path::Path>,
    method: &str,
    data: &str,
    extra: &[&str],
) -> String {
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpc");
    let mut cmd = Command::new(go_tools::grpcurl());
    cmd.args(["-import-path", proto_dir, "-proto", "echo.proto", "-max-time", "10", "-d", data]);
    cmd.args(extra);
    match tls {
        // The authority is also the TLS server name.
        Some(ca) => cmd.args(["-cacert", ca.to_str().unwrap()]),
        None => cmd.arg("-plaintext"),
    };
    cmd.args(["-authority", authority, &addr.to_string(), &format!("ramjet.test.Echo/{method}")]);
    let out = cmd.output().expect("grpcurl runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn ramjet_answers_grpc_failures_with_trailers_only_responses() {
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("grpc-failures");
    pki.leaf("grpc", &["nowhere.test", "empty.test", "dead.test"]);
    let slow = Backend::start("slow");
    for driver in DRIVERS {
        let d = daemon_with(routes_in(&config(&slow), &pki.dir), driver, |c| {
            c.settings.upstream_timeout = Duration::from_millis(300)
        });
        let mut client = H2Client::connect(d.http_addr());
        for (host, path, code, message) in [
            ("nowhere.test", "/ramjet.test.Echo/Unary", "12", "not found"),
            ("empty.test", "/ramjet.test.Echo/Unary", "14", "service unavailable"),
            ("dead.test", "/ramjet.test.Echo/Unary", "14", "bad gateway"),
            ("slow.test", "/slow/2000", "4", "gateway timeout"),
        ] {
            let r = client.request("POST", host, path, GRPC, b"\0\0\0\0\0", true).unwrap();
            let fields = (r.status, r.header("content-type"), r.header("grpc-status"), r.header("grpc-message"));
            assert_eq!(fields, (200, Some("application/grpc"), Some(code), Some(message)), "{driver:?} {host}: {r:?}");
            assert!(r.body.is_empty() && r.header("content-length").is_none(), "{driver:?} {host}: {r:?}");
            // The same failure for a client that is not gRPC stays an HTTP answer.
            let plain = client.request("POST", host, path, &[("content-type", "application/grpc-web")], b"x", true);
            let plain = plain.unwrap();
            assert!(plain.status >= 404 && plain.header("grpc-status").is_none(), "{driver:?} {host}: {plain:?}");
        }

        // What a gRPC client's user sees, over h2c and over TLS.
        let ca = pki.path("ca.pem");
        let https = d.https_addr().unwrap();
        for (authority, want) in [
            ("nowhere.test", "Code: Unimplemented Message: not found"),
            ("empty.test", "Code: Unavailable Message: service unavailable"),
            ("dead.test", "Code: Unavailable Message: bad gateway"),
        ] {
            let plain = grpcurl(d.http_addr(), authority, None);
            assert!(plain.contains(want), "{driver:?} h2c {authority}: {plain}");
            let tls = grpcurl(https, authority, Some(&ca));
            assert!(tls.contains(want), "{driver:?} TLS {authority}: {tls}");
        }
        d.shutdown();
    }
}

#[test]
fn grpc_calls_of_every_streaming_mode_go_to_an_h2_backend_over_one_connection_per_worker() {
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("grpc-backend");
    pki.leaf("grpc", &["grpc.test"]);
    for driver in DRIVERS {
        let backend = GrpcBackend::start();
        let yaml = format!(
            "backends:\n  echo: {{ endpoints: [\"{}\"], protocol: GRPC }}\nroutes:\n  - {{ host: grpc.test, path: /, backend: echo }}\ntls:\n  - {{ hosts: [grpc.test], certFile: grpc.crt, keyFile: grpc.key }}\n",
            backend.addr
        );
        let d = daemon_with(routes_in(&yaml, &pki.dir), driver, |c| c.workers = 1);
        let ca = pki.path("ca.pem");
        for (addr, tls) in [(d.http_addr(), None), (d.https_addr().unwrap(), Some(ca.as_path()))] {
            let call =
                |method: &str, data: &str, extra: &[&str]| grpcurl_call(addr, "grpc.test", tls, method, data, extra);
            let what = format!("{driver:?} tls={}", tls.is_some());
            let out = call("Unary", r#"{"text":"hi"}"#, &["-v"]);
            assert!(out.contains(r#"{ "text": "hi" }"#), "{what} unary: {out}");
            assert!(
                out.contains("Response trailers received:") && out.contains("x-trailer: relayed"),
                "{what} trailers: {out}"
            );
            let out = call("ServerStream", r#"{"text":"s"}"#, &[]);
            assert!(
                out.contains(r#"{ "text": "s#1" } { "text": "s#2" } { "text": "s#3" }"#),
                "{what} server streaming: {out}"
            );
            let out = call("ClientStream", r#"{"text":"a"} {"text":"b"} {"text":"c"}"#, &[]);
            assert!(out.contains(r#"{ "text": "a,b,c" }"#), "{what} client streaming: {out}");
            let out = call("Bidi", r#"{"text":"x"} {"text":"y"}"#, &[]);
            assert!(out.contains(r#"{ "text": "echo:x" } { "text": "echo:y" }"#), "{what} bidi: {out}");
            // A backend's own error (trailers-only) reaches the client as the backend said it.
            let out = call("Unary", r#"{"text":"hi"}"#, &["-H", "x-fail: 7"]);
            assert!(out.contains("Code: PermissionDenied Message: denied"), "{what} error: {out}");
        }
        // Every call of the worker went over one multiplexed connection.
        assert_eq!(backend.connections(), 1, "{driver:?}");
        // A backend that closes the connection (GOAWAY) costs nothing: the next call opens another.
        let out = grpcurl_call(d.http_addr(), "grpc.test", None, "Unary", r#"{"text":"bye"}"#, &["-H", "x-goaway: 1"]);
        assert!(out.contains(r#"{ "text": "bye" }"#), "{driver:?}: {out}");
        for _ in 0..3 {
            let out = grpcurl(d.http_addr(), "grpc.test", None);
            assert!(out.contains(r#"{ "text": "hi" }"#), "{driver:?} after GOAWAY: {out}");
        }
        assert_eq!(backend.connections(), 2, "{driver:?}");

        // grpc-timeout bounds the wait for the answer: DEADLINE_EXCEEDED, long before the
        // upstream timeout (60 s) or the backend's answer (3 s).
        let mut client = H2Client::connect(d.http_addr());
        let started = std::time::Instant::now();
        let headers = [GRPC[0], GRPC[1], ("grpc-timeout", "300m"), ("x-sleep-ms", "3000")];
        let frame = grpc_backend::frame("late");
        let r = client.request("POST", "grpc.test", "/ramjet.test.Echo/Unary", &headers, &frame, false).unwrap();
        let elapsed = started.elapsed();
        assert_eq!((r.status, r.header("grpc-status")), (200, Some("4")), "{driver:?}: {r:?}");
        assert!(elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2), "{driver:?}: {elapsed:?}");
        // Without one, the same call is answered.
        let headers = [GRPC[0], GRPC[1], ("x-sleep-ms", "100")];
        let r = client.request("POST", "grpc.test", "/ramjet.test.Echo/Unary", &headers, &frame, false).unwrap();
        assert_eq!((r.status, r.header("content-type")), (200, Some("application/grpc")), "{driver:?}: {r:?}");
        let mut body = bytes::BytesMut::from(&r.body[..]);
        assert_eq!(grpc_backend::take_messages(&mut body), ["late"], "{driver:?}");
        d.shutdown();
    }
}

/// The attacker's test for the multiplexed upstream: one client's stream that is cut off half-way
/// through a message (reset, then its whole connection dropped) must leave nothing behind on the
/// shared HTTP/2 connection to the backend. The victim's call on another client connection, over
/// that same upstream connection, gets exactly its own answer.
#[test]
fn a_cut_off_grpc_stream_leaves_nothing_for_the_next_caller_on_the_shared_upstream() {
    for driver in DRIVERS {
        let backend = GrpcBackend::start();
        let yaml = format!(
            "backends:\n  echo: {{ endpoints: [\"{}\"], protocol: GRPC }}\nroutes:\n  - {{ host: grpc.test, path: /, backend: echo }}\n",
            backend.addr
        );
        let d = daemon_with(routes_in(&yaml, std::path::Path::new(".")), driver, |c| c.workers = 1);
        let victim = |text: &str| {
            let mut client = H2Client::connect(d.http_addr());
            let frame = grpc_backend::frame(text);
            let r = client.request("POST", "grpc.test", "/ramjet.test.Echo/ClientStream", GRPC, &frame, false).unwrap();
            let mut body = bytes::BytesMut::from(&r.body[..]);
            (r.status, grpc_backend::take_messages(&mut body))
        };
        // The upstream connection exists before the attack.
        assert_eq!(victim("first"), (200, vec!["first".to_string()]), "{driver:?}");

        for cut in ["reset", "drop"] {
            let attacker = H2Client::connect(d.http_addr());
            let send = attacker.send.clone();
            attacker.rt.block_on(async move {
                let mut request = http::Request::post("http://grpc.test/ramjet.test.Echo/ClientStream");
                for (name, value) in GRPC {
                    request = request.header(*name, *value);
                }
                let (_response, mut stream) =
                    send.ready().await.unwrap().send_request(request.body(()).unwrap(), false).unwrap();
                // Half a message: a length prefix that promises more than is sent.
                let whole = grpc_backend::frame("attacker-attacker-attacker");
                stream.send_data(whole.slice(..whole.len() / 2), false).unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
                if cut == "reset" {
                    stream.send_reset(h2::Reason::CANCEL);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
            drop(attacker);
            assert_eq!(victim("victim"), (200, vec!["victim".to_string()]), "{driver:?} after a {cut}");
        }
        assert_eq!(backend.connections(), 1, "{driver:?}: the victims shared the attacker's upstream connection");
        d.shutdown();
    }
}

/// `protocol: GRPCS`: the calls go to the backend over TLS (ALPN `h2`), verified against the CA
/// and named as configured, over one multiplexed connection per worker; a backend whose
/// certificate does not verify is `UNAVAILABLE` for the gRPC client.
#[test]
fn grpcs_backends_are_called_over_verified_tls_and_a_bad_certificate_is_unavailable() {
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("grpcs");
    pki.leaf("backend", &["echo.internal"]);
    let other = support::pki::Pki::new("grpcs-other");
    let (config, snis) = tls_backend::server_config(&pki, "backend", None, &[b"h2"]);
    for driver in DRIVERS {
        let backend = GrpcBackend::start_tls(config.clone());
        let yaml = format!(
            r#"
backends:
  echo: {{ endpoints: ["{addr}"], protocol: GRPCS, tls: {{ verify: true, caFile: ca.pem, serverName: echo.internal, sni: true }} }}
  unverified: {{ endpoints: ["{addr}"], protocol: GRPCS, tls: {{ verify: true, caFile: "{other}" }} }}
routes:
  - {{ host: grpc.test, path: /, backend: echo }}
  - {{ host: bad.test, path: /, backend: unverified }}
"#,
            addr = backend.addr,
            other = other.path("ca.pem").display()
        );
        let d = daemon_with(routes_in(&yaml, &pki.dir), driver, |c| c.workers = 1);
        let call = |host: &str, method: &str, data: &str, extra: &[&str]| {
            grpcurl_call(d.http_addr(), host, None, method, data, extra)
        };
        let out = call("grpc.test", "Unary", r#"{"text":"hi"}"#, &["-v"]);
        assert!(out.contains(r#"{ "text": "hi" }"#), "{driver:?} unary: {out}");
        assert!(out.contains("Response trailers received: x-seen-request-id"), "{driver:?} trailers: {out}");
        let out = call("grpc.test", "Bidi", r#"{"text":"x"} {"text":"y"}"#, &[]);
        assert!(out.contains(r#"{ "text": "echo:x" } { "text": "echo:y" }"#), "{driver:?} bidi: {out}");
        assert_eq!(backend.connections(), 1, "{driver:?}: one TLS connection for every call");
        assert!(snis.lock().unwrap().contains(&Some("echo.internal".to_string())), "{driver:?}");

        let out = call("bad.test", "Unary", r#"{"text":"hi"}"#, &[]);
        assert!(out.contains("Code: Unavailable Message: bad gateway"), "{driver:?} bad certificate: {out}");
        d.shutdown();
    }
}

/// An upstream HTTP/2 connection that carries no stream for the upstream idle timeout is
/// closed; one that carries a stream longer than that is not; the next call opens a new one.
#[test]
fn an_idle_upstream_h2_connection_is_closed_after_the_idle_timeout() {
    for driver in DRIVERS {
        let backend = GrpcBackend::start();
        let yaml = format!(
            "backends:\n  echo: {{ endpoints: [\"{}\"], protocol: GRPC }}\nroutes:\n  - {{ host: grpc.test, path: /, backend: echo }}\n",
            backend.addr
        );
        let d = daemon_with(routes_in(&yaml, std::path::Path::new(".")), driver, |c| {
            c.workers = 1;
            c.settings.upstream_idle_timeout = Duration::from_millis(300);
        });
        // A call that lasts well past the idle timeout: its connection is in use, not idle.
        let mut client = H2Client::connect(d.http_addr());
        let headers = [GRPC[0], GRPC[1], ("x-sleep-ms", "1500")];
        let frame = grpc_backend::frame("slow");
        let r = client.request("POST", "grpc.test", "/ramjet.test.Echo/Unary", &headers, &frame, false).unwrap();
        let mut body = bytes::BytesMut::from(&r.body[..]);
        assert_eq!(grpc_backend::take_messages(&mut body), ["slow"], "{driver:?}: {r:?}");
        assert_eq!(backend.connections(), 1, "{driver:?}");
        // Idle now: closed by ramjet (the client connection stays open meanwhile).
        assert!(eventually(Duration::from_secs(10), || backend.closed() == 1), "{driver:?}: never closed");
        assert_eq!(backend.connections(), 1, "{driver:?}");
        let frame = grpc_backend::frame("again");
        let r = client.request("POST", "grpc.test", "/ramjet.test.Echo/Unary", GRPC, &frame, false).unwrap();
        let mut body = bytes::BytesMut::from(&r.body[..]);
        assert_eq!(grpc_backend::take_messages(&mut body), ["again"], "{driver:?}: {r:?}");
        assert_eq!(backend.connections(), 2, "{driver:?}: a new connection for the next call");
        d.shutdown();
    }
}

/// A stream relayed to an HTTP/2 backend is logged with its body bytes each way, and carries the
/// request id upstream (the client's own, else ramjet's) and back to the client, as HTTP/1.1 does.
#[test]
fn relayed_streams_log_their_bytes_and_carry_the_request_id_upstream() {
    for driver in DRIVERS {
        let backend = GrpcBackend::start();
        let yaml = format!(
            "backends:\n  echo: {{ endpoints: [\"{}\"], protocol: GRPC }}\nroutes:\n  - {{ host: grpc.test, path: /, backend: echo }}\n",
            backend.addr
        );
        let file = temp_dir("grpc-log").join("access.log");
        let d = daemon_with(routes_in(&yaml, std::path::Path::new(".")), driver, |c| {
            c.access_log = Some(AccessLogSettings::new(Destination::File(file.clone()), Format::Json));
        });
        let mut client = H2Client::connect(d.http_addr());
        let frame = grpc_backend::frame("hello, log");
        let headers = [GRPC[0], GRPC[1], ("x-request-id", "grpc-id-1")];
        let r = client.request("POST", "grpc.test", "/ramjet.test.Echo/ClientStream", &headers, &frame, false).unwrap();
        assert_eq!((r.status, r.body.len()), (200, frame.len()), "{driver:?}: {r:?}");
        assert_eq!(r.header("x-request-id"), Some("grpc-id-1"), "{driver:?}");

        // The backend saw the client's id, or ramjet's own when the client sent none.
        let out = grpcurl_call(
            d.http_addr(),
            "grpc.test",
            None,
            "Unary",
            r#"{"text":"id"}"#,
            &["-v", "-H", "x-request-id: grpc-id-2"],
        );
        assert!(out.contains("x-seen-request-id: grpc-id-2"), "{driver:?}: {out}");
        let out = grpcurl_call(d.http_addr(), "grpc.test", None, "Unary", r#"{"text":"id"}"#, &["-v"]);
        let seen = out.split("x-seen-request-id: ").nth(1).and_then(|s| s.split_whitespace().next());
        assert!(seen.is_some_and(|id| id.len() >= 16), "{driver:?}: {out}");

        let record = |id: &str| -> Option<serde_json::Value> {
            std::fs::read_to_string(&file).unwrap_or_default().lines().find_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                (v["request_id"] == id).then_some(v)
            })
        };
        assert!(eventually(Duration::from_secs(10), || record("grpc-id-1").is_some()), "{driver:?}: no record");
        let logged = record("grpc-id-1").unwrap();
        assert_eq!(logged["status"], 200, "{logged}");
        assert_eq!(logged["bytes_in"].as_u64(), Some(frame.len() as u64), "{logged}");
        assert_eq!(logged["bytes_out"].as_u64(), Some(frame.len() as u64), "{logged}");
        assert_eq!(logged["upstream_addr"].as_str(), Some(backend.addr.to_string().as_str()), "{logged}");
        assert!(eventually(Duration::from_secs(10), || seen.is_some_and(|id| record(id).is_some())), "{driver:?}");
        d.shutdown();
    }
}
