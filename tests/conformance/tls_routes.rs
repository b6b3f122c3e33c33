//! The suite's TLSRoute tests (v1.6.1) that need no TLS backend of the suite's: the status it
//! waits for, and that a name whose route has no usable backend is refused (the connection closed
//! during the handshake, as `MakeTLSConnectionAndExpectEventuallyConnectionRejection` wants). The
//! ones that reach the suite's TLS echo servers (`TLSRouteSimpleSameNamespace`,
//! `TLSRouteHostnameIntersection`, the mixed and terminate ones) are not translated yet:
//! `tests/tls_routes.rs` covers them on backends of our own.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tcp_routes::listener_status;
use super::{cluster, split, Suite, PATIENCE};

/// `MakeTLSConnectionAndExpectEventuallyConnectionRejection`: until a TLS handshake for
/// `server_name` ends with the connection closed or reset (not a certificate the client refuses).
fn expect_rejection(addr: SocketAddr, server_name: &str) {
    let config = Arc::new(
        rustls::ClientConfig::builder()
            // No roots: a completed handshake, or one that ends on a certificate the client
            // refuses, is never taken for a rejection.
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
    );
    let deadline = Instant::now() + PATIENCE;
    loop {
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).unwrap();
        let mut session = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // The suite's `isConnectionRejected`: EOF or a reset, during the handshake.
        let rejected = session.complete_io(&mut tcp).is_err_and(|e| {
            matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset)
        });
        if rejected {
            return;
        }
        assert!(Instant::now() < deadline, "{addr}: a handshake for {server_name} was not refused");
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
