//! gRPC through ramjet over real sockets. When ramjet answers a gRPC request itself (no route, no
//! endpoints, the backend refusing or too slow), the client gets a trailers-only response: HTTP 200,
//! `content-type: application/grpc`, the `grpc-status` a gRPC client reports and a short
//! `grpc-message`, and no body. Checked with the h2 crate (the exact frames' fields) and with
//! grpcurl (what a user of a gRPC client sees), over h2c and TLS, on both I/O drivers.

#[path = "support/go_tools.rs"]
mod go_tools;
#[allow(dead_code)]
#[path = "support/h2client.rs"]
mod h2client;
mod support;

use std::process::Command;
use std::time::Duration;

use h2client::H2Client;
use support::backend::Backend;
use support::{daemon_with, dead_addr, routes_in, DRIVERS};

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
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpc");
    let mut cmd = Command::new(go_tools::grpcurl());
    cmd.args(["-import-path", proto_dir, "-proto", "echo.proto", "-max-time", "10", "-d", r#"{"text":"hi"}"#]);
    match tls {
        // The authority is also the TLS server name.
        Some(ca) => cmd.args(["-cacert", ca.to_str().unwrap()]),
        None => cmd.arg("-plaintext"),
    };
    cmd.args(["-authority", authority, &addr.to_string(), "ramjet.test.Echo/Unary"]);
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
