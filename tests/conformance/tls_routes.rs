//! The suite's TLSRoute tests (v1.6.1): the status each waits for, then TLS connections to the
//! Gateway's listener. Their backends are the suite's: its TCP echo server (`tcp-backend`, on its
//! plain port and on its TLS one with the Secret its Deployment mounts) and its HTTP echo server
//! over TLS (`tls-backend`, `tls-backend-2`), with the CA and certificates of `tls_checks.rs`. A
//! name that is not served, or whose route has no usable backend, must be refused (the connection
//! closed during the handshake, as `MakeTLSConnectionAndExpectEventuallyConnectionRejection` wants).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::tcp_routes::{self, listener_status, WELCOME};
use super::{cluster, documents, split, support, Suite, CONSECUTIVE, INFRA, PATIENCE};

/// `MakeTLSConnectionAndExpectEventuallyConnectionRejection`: until a TLS handshake for
/// `server_name` ends with the connection closed or reset (not a certificate the client refuses).
fn expect_rejection(addr: SocketAddr, server_name: &str) {
    // No roots: a completed handshake, or one that ends on a certificate the client refuses, is
    // never taken for a rejection.
    let roots = rustls::RootCertStore::empty();
    let config = Arc::new(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth());
    handshake_until(addr, server_name, config, "was not refused", closed);
}

/// The suite's `isConnectionRejected`: EOF or a reset, during the handshake.
fn closed(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset)
}

/// TLS handshakes for `server_name` with `config`, a second apart, until one fails as `wanted`
/// says; `else_` says what went wrong if none does within [`PATIENCE`].
fn handshake_until(
    addr: SocketAddr,
    server_name: &str,
    config: Arc<rustls::ClientConfig>,
    else_: &str,
    wanted: impl Fn(&std::io::Error) -> bool,
) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).unwrap();
        let mut session = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let outcome = session.complete_io(&mut tcp);
        if outcome.as_ref().is_err_and(&wanted) {
            return;
        }
        assert!(Instant::now() < deadline, "{addr}: a handshake for {server_name} {else_}: {outcome:?}");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The address a client of a TLS listener on port 443 reaches: ramjet's HTTPS listener.
fn https_address(s: &Suite) -> SocketAddr {
    s.daemon().https_addr().unwrap()
}

/// `GatewayAndTLSRoutesMustBeAccepted`, and the route's hostnames.
fn accepted(s: &Suite, gateway: &str, route: &str) -> Vec<String> {
    s.accepted_on(gateway, &[None], &[route]);
    let (ns, name) = split(route);
    let route = cluster().get("TLSRoute", ns, name);
    route["spec"]["hostnames"].as_array().into_iter().flatten().filter_map(|h| h.as_str()).map(String::from).collect()
}

#[test]
fn tlsroute_invalid_backendref_nonexistent() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-invalid-backendref-nonexistent.yaml");
    let (gateway, route) = ("gateway-tlsroute-invalid-backend-ref-nonexistent", "invalid-backend-ref-nonexistent");
    let hostnames = accepted(&s, gateway, route);
    s.route_condition(route, gateway, "ResolvedRefs", "False", "BackendNotFound");
    expect_rejection(https_address(&s), &hostnames[0]);
}

#[test]
fn tlsroute_invalid_backendref_unknown_kind() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-invalid-backendref-unknown-kind.yaml");
    let (gateway, route) = ("gateway-tlsroute-invalid-backend-ref-unknown-kind", "invalid-backend-ref-unknown-kind");
    let hostnames = accepted(&s, gateway, route);
    s.route_condition(route, gateway, "ResolvedRefs", "False", "InvalidKind");
    expect_rejection(https_address(&s), &hostnames[0]);
}

#[test]
fn tlsroute_invalid_reference_grant() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-invalid-reference-grant.yaml");
    let (gateway, route) = ("gateway-tlsroute-referencegrant", "gateway-conformance-infra-test");
    accepted(&s, gateway, route);
    s.route_condition(route, gateway, "ResolvedRefs", "False", "RefNotPermitted");
}

#[test]
fn tlsroute_invalid_no_matching_listener() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-invalid-no-matching-listener.yaml");
    let refused = [
        ("tlsroute-not-allowed-protocol-http", "gateway-tlsroute-http-only", "NotAllowedByListeners"),
        ("tlsroute-not-allowed-protocol-https", "gateway-tlsroute-https-only", "NotAllowedByListeners"),
        ("tlsroute-no-matching-section-name", "gateway-tlsroute-tls-passthrough-only", "NoMatchingParent"),
    ];
    for (route, gateway, reason) in refused {
        s.route_condition(route, gateway, "Accepted", "False", reason);
    }
    for (route, _, _) in refused {
        s.no_accepted_parents(route);
    }
    s.zero_routes("gateway-tlsroute-http-only");
    s.zero_routes("gateway-tlsroute-https-only");
}

#[test]
fn tlsroute_invalid_no_matching_listener_hostname() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-invalid-no-matching-listener-hostname.yaml");
    let refused = [
        ("tlsroute-hostname-mismatch-1", "gateway-tls-exact-hostname"),
        ("tlsroute-hostname-mismatch-2", "gateway-tls-wildcard-hostname"),
    ];
    for (route, gateway) in refused {
        s.route_condition(route, gateway, "Accepted", "False", "NoMatchingListenerHostname");
    }
    for (route, gateway) in refused {
        s.no_accepted_parents(route);
        s.zero_routes(gateway);
    }
}

#[test]
fn tlsroute_listener_passthrough_supported_kinds() {
    let _s = Suite::start_l4_tls("TLSRoute", "tlsroute-listener-passthrough-supported-kinds.yaml");
    let gateway = "gateway-tlsroute-passthrough-supported-kind";
    listener_status(gateway, "tls-passthrough", ("TLSRoute", 0), ("ResolvedRefs", "False", "InvalidRouteKinds"));
}

#[test]
fn tlsroute_listener_terminate_supported_kinds() {
    let _s = Suite::start_l4_tls("TLSRoute", "tlsroute-listener-terminate-supported-kinds.yaml");
    let gateway = "gateway-tlsroute-terminate-supported";
    listener_status(gateway, "tls-terminate", ("TLSRoute", 0), ("Accepted", "True", "Accepted"));
}

/// The suite's `tcp.ExpectedResponse`: whether the backend saw TLS, the Deployment whose Pod
/// answered, and (unless empty) the server name the backend's handshake was given.
struct Expected<'a> {
    backend_is_tls: bool,
    backend: &'a str,
    hostname: &'a str,
}

/// One conversation of `WaitForValidTCPResponse` over TLS to `addr` for `server_name`, trusting
/// the suite's CA: the welcome line, `PING`, `IS_TLS` and `TEST`; what the last two answered.
fn tls_echo(addr: SocketAddr, server_name: &str) -> Result<(String, Value), String> {
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).map_err(|e| e.to_string())?;
    let session = rustls::ClientConnection::new(cluster().tls_checks.client(), name).map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(rustls::StreamOwned::new(session, tcp));
    let mut ask = |line: &str| -> Result<String, String> {
        if !line.is_empty() {
            let stream = reader.get_mut();
            stream.write_all(format!("{line}\n").as_bytes()).and_then(|_| stream.flush()).map_err(|e| e.to_string())?;
        }
        let mut answer = String::new();
        reader.read_line(&mut answer).map_err(|e| e.to_string())?;
        Ok(answer)
    };
    let welcome = ask("")?;
    if welcome != WELCOME {
        return Err(format!("welcome line {welcome:?}"));
    }
    let pong = ask("PING")?;
    if pong != "PONG\n" {
        return Err(format!("PING answered {pong:?}"));
    }
    let is_tls = ask("IS_TLS")?.trim_end().to_string();
    let test = ask("TEST")?;
    Ok((is_tls, serde_json::from_str(&test).map_err(|e| format!("TEST answered {test:?}: {e}"))?))
}

/// `MakeTCPRequestAndExpectEventuallyValidResponse` with TLS: until one conversation succeeds, then
/// what it answered must be what the test expects.
fn expect_tls_echo(addr: SocketAddr, server_name: &str, want: Expected) {
    let deadline = Instant::now() + PATIENCE;
    let (is_tls, payload) = loop {
        match tls_echo(addr, server_name) {
            Ok(answer) => break answer,
            Err(e) => assert!(Instant::now() < deadline, "{addr} for {server_name}: {e}"),
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    assert_eq!(is_tls, want.backend_is_tls.to_string(), "{server_name}: IS_TLS");
    assert_eq!(payload["namespace"], INFRA, "{server_name}: {payload}");
    let pod = payload["pod"].as_str().unwrap_or_default();
    assert!(pod.starts_with(&format!("{}-", want.backend)), "{server_name}: pod {pod}, not of {}", want.backend);
    if !want.hostname.is_empty() {
        assert_eq!(payload["tls"]["serverName"], want.hostname, "{server_name}: {payload}");
    }
}

/// `MakeTLSRequestAndExpectEventuallyConsistentResponse` (no client certificate): a GET of `/` over
/// TLS for `server_name` (SNI and `Host`), trusting the suite's CA, answers `200` from a Pod of
/// `backend`, [`CONSECUTIVE`] times in a row.
fn expect_https(addr: SocketAddr, server_name: &str, backend: &str) {
    let client = cluster().tls_checks.client();
    let (deadline, mut in_a_row) = (Instant::now() + PATIENCE, 0);
    while in_a_row < CONSECUTIVE {
        let answer = support::client::tls_get(addr, client.clone(), server_name, server_name, "");
        let good = matches!(&answer, Ok((200, body)) if body.starts_with(&format!("{backend}-0 ")));
        in_a_row = if good { in_a_row + 1 } else { 0 };
        assert!(good || Instant::now() < deadline, "{addr} for {server_name}: {answer:?}, want 200 from {backend}");
        if !good {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[test]
fn tlsroute_simple_same_namespace() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-simple-same-namespace.yaml");
    let hostnames = accepted(&s, "gateway-tlsroute", "gateway-conformance-infra-test");
    let want = Expected { backend_is_tls: true, backend: "tcp-backend", hostname: &hostnames[0] };
    expect_tls_echo(https_address(&s), &hostnames[0], want);
}

#[test]
fn tlsroute_terminate_simple_same_namespace() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-terminate-simple-same-namespace.yaml");
    let gateway = "gateway-tlsroute-terminate";
    let hostnames = accepted(&s, gateway, "tlsroute-terminated-test");
    // Terminated at the Gateway: the backend's plain port sees no TLS, hence no server name.
    let want = Expected { backend_is_tls: false, backend: "tcp-backend", hostname: "" };
    expect_tls_echo(tcp_routes::address(gateway, "tlsterminate"), &hostnames[0], want);
}

#[test]
fn tlsroute_mixed_termination_same_namespace() {
    let s = Suite::start_l4_tls("TLSRoute", "tlsroute-mixed-termination-same-namespace.yaml");
    let gateway = "gateway-tlsroute-mixed-termination";
    let passthrough = accepted(&s, gateway, "gateway-conformance-mixed-passthroughroute");
    let terminate = accepted(&s, gateway, "gateway-conformance-mixed-terminateroute");
    for listener in ["tls-terminate", "tls-passthrough"] {
        listener_status(gateway, listener, ("TLSRoute", 1), ("Accepted", "True", "Accepted"));
    }
    // Both listeners are on 8883.
    let addr = tcp_routes::address(gateway, "tls-terminate");
    expect_tls_echo(addr, &terminate[0], Expected { backend_is_tls: false, backend: "tcp-backend", hostname: "" });
    let want = Expected { backend_is_tls: true, backend: "tcp-backend", hostname: &passthrough[0] };
    expect_tls_echo(addr, &passthrough[0], want);
}

/// The rejection cases of `TLSRouteHostnameIntersection`, as far as one address allows: a name
/// that no TLSRoute of the port serves is never passed through to a backend. The suite wants the
/// connection closed, which a Gateway with an address of its own can do; on ramjet's HTTPS port,
/// shared by every Gateway and Ingress, such a name is an HTTPS host like any other, answered with
/// the default certificate (as ingress-nginx does) or a catch-all HTTPS listener's. So the check is
/// that the handshake is refused, or ends on a certificate the suite's CA did not sign (every
/// backend's is signed by it).
fn expect_not_passed_through(addr: SocketAddr, server_name: &str) {
    let unknown_issuer = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
    let refused = |e: &std::io::Error| {
        closed(e) || e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) == Some(&unknown_issuer)
    };
    handshake_until(addr, server_name, cluster().tls_checks.client(), "reached a backend", refused);
}

/// A case of `TLSRouteHostnameIntersection`: its Gateway, the routes attached to it, the names it
/// serves with the backend each reaches, and a name it must not pass through.
type IntersectionCase = (&'static str, &'static [&'static str], &'static [(&'static str, &'static str)], &'static str);

/// `TLSRouteHostnameIntersection`, one Gateway at a time. The suite gives each of its four
/// Gateways an address of its own; ramjet serves every Gateway's port 443 on one listener, where
/// the fourth Gateway's `*.com` route would take the names the first three must not serve. So each
/// case applies its Gateway with the routes attached to it, alone.
#[test]
fn tlsroute_hostname_intersection() {
    let manifest = cluster().l4_tests.join("tlsroute-hostname-intersection.yaml");
    let docs = documents(&std::fs::read_to_string(manifest).unwrap());
    let cases: [IntersectionCase; 4] = [
        (
            "gw-tlsroute-exact-hostname-x-1",
            &["tlsroute-more-specific-wc-hostname-x-1"],
            &[("abc.example.com", "tls-backend")],
            "non.matching.com",
        ),
        (
            "gw-tlsroute-more-specific-wc-hostname-x-2",
            &["tlsroute-exact-hostname-x-2", "tlsroute-less-specific-wc-hostname-x-2"],
            &[("abc.example.com", "tls-backend"), ("other.example.com", "tls-backend-2")],
            "non.matching.com",
        ),
        (
            "gw-tlsroute-less-specific-wc-hostname-x-3",
            &["tlsroute-exact-hostname-x-3", "tlsroute-more-specific-wc-hostname-x-3"],
            &[("abc.example.com", "tls-backend"), ("other.example.com", "tls-backend-2")],
            "non.matching.com",
        ),
        (
            "gw-tlsroute-empty-hostname-x-4",
            &["tlsroute-exact-hostname-x-4", "tlsroute-less-specific-wc-hostname-x-4"],
            &[("abc.example.com", "tls-backend"), ("other.example.com", "tls-backend-2")],
            "non.matching.org",
        ),
    ];
    for (gateway, routes, served, refused) in cases {
        let parent =
            |doc: &Value| doc["spec"]["parentRefs"].as_array().is_some_and(|p| p.iter().any(|p| p["name"] == gateway));
        let case: Vec<Value> = docs
            .iter()
            .filter(|d| (d["kind"] == "Gateway" && d["metadata"]["name"] == gateway) || parent(d))
            .cloned()
            .collect();
        assert_eq!(case.len(), 1 + routes.len(), "{gateway}: {case:#?}");
        let s = Suite::start_docs("TLSRoute", gateway, &case, &[443]);
        s.accepted_on(gateway, &[None], routes);
        for route in routes {
            s.route_condition(route, gateway, "ResolvedRefs", "True", "ResolvedRefs");
        }
        for (name, backend) in served {
            expect_https(https_address(&s), name, backend);
        }
        expect_not_passed_through(https_address(&s), refused);
    }
}
