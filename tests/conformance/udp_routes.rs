//! The suite's UDPRoute tests (v1.6.1, `conformance/tests/udproute-*`), translated as the TCPRoute
//! ones are. The backends are the suite's UDP echo server (echo-basic with `UDP_ECHO_SERVER`: each
//! datagram answered with a JSON line naming the request, the namespace, the Service and the Pod),
//! and, for the base manifests' CoreDNS, a DNS server that answers every query (NXDOMAIN: there is
//! no upstream to forward to here).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::tcp_routes::{address, listener_status};
use super::{cluster, netns, weighted_70_30, Suite, INFRA, PATIENCE};

/// The suite's `AppBackendNamespace`.
const APP_BACKEND: &str = "gateway-conformance-app-backend";

/// Starts the suite's UDP echo server for a Service (in the backend namespace); its port.
pub(super) fn echo_server(service: &Value) -> u16 {
    let namespace = service["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    let name = service["metadata"]["name"].as_str().unwrap_or("").to_string();
    serve(move |request| {
        let request = String::from_utf8_lossy(request);
        let answer = json!({
            "request": request, "namespace": namespace, "ingress": "", "service": name, "pod": format!("{name}-0"),
        });
        Some(answer.to_string().into_bytes())
    })
}

/// A DNS server that answers every query: its header and question back, NXDOMAIN.
pub(super) fn dns_server() -> u16 {
    serve(|query| {
        let question_end = 12 + query.get(12..)?.iter().position(|&b| b == 0)? + 1 + 4;
        let mut answer = query.get(..question_end)?.to_vec();
        // QR, the query's RD, RA; NXDOMAIN; one question, no records.
        answer[2] = 0x80 | (query[2] & 0x01);
        answer[3] = 0x80 | 3;
        answer[4..12].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
        Some(answer)
    })
}

/// A UDP server in the backend namespace answering each datagram with `answer`'s; its port.
fn serve(answer: impl Fn(&[u8]) -> Option<Vec<u8>> + Send + 'static) -> u16 {
    let socket = netns::bind_backend_udp();
    let port = socket.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_535];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            if let Some(reply) = answer(&buf[..n]) {
                let _ = socket.send_to(&reply, from);
            }
        }
    });
    port
}

/// One probe from a socket of its own (a flow of its own): the echo's JSON, if it came.
fn probe(addr: SocketAddr, payload: &[u8]) -> Result<Value, String> {
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    socket.set_read_timeout(Some(Duration::from_secs(2))).map_err(|e| e.to_string())?;
    socket.connect(addr).map_err(|e| e.to_string())?;
    socket.send(payload).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 1024];
    let n = socket.recv(&mut buf).map_err(|e| e.to_string())?;
    serde_json::from_slice(&buf[..n]).map_err(|e| e.to_string())
}

/// `ExpectEchoResponseFromBackend`: until a probe is answered, by `service` in `namespace` when
/// given (`ExpectEchoResponse` without).
fn expect_echo(addr: SocketAddr, service: Option<&str>, namespace: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = probe(addr, b"gateway-api-conformance-udp-echo");
        let from = |a: &Value| service.is_none_or(|s| a["service"] == s && a["namespace"] == namespace);
        match &answer {
            Ok(a) if from(a) => return,
            _ => assert!(Instant::now() < deadline, "{addr}: never the answer expected; last {answer:?}"),
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn udproute_simple() {
    let s = Suite::start_l4("UDPRoute", "udproute-simple.yaml");
    let (gateway, route) = ("udp-gateway", "udp-coredns");
    s.accepted_on(gateway, &[None], &[route]);
    // `dns.Exchange` of an A query for foo.bar.com.: any answer to it.
    let mut query = vec![0x4a, 0x17, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["foo", "bar", "com"] {
        query.push(label.len() as u8);
        query.extend_from_slice(label.as_bytes());
    }
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    let addr = address(gateway, "coredns");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        socket.send_to(&query, addr).unwrap();
        let mut buf = [0u8; 512];
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            assert_eq!(from, addr, "the answer comes from the Gateway's port");
            assert!(n >= 12 && buf[..2] == query[..2] && buf[2] & 0x80 != 0, "not an answer: {:?}", &buf[..n]);
            return;
        }
        assert!(Instant::now() < deadline, "{addr}: no DNS answer");
    }
}

#[test]
fn udproute_invalid_backendref_nonexistent() {
    let s = Suite::start_l4("UDPRoute", "udproute-invalid-backendref-nonexistent.yaml");
    let route = "udp-route-invalid-backend-ref-nonexistent";
    s.route_condition(route, "udp-gateway-invalid-backend", "ResolvedRefs", "False", "BackendNotFound");
}

#[test]
fn udproute_invalid_cross_namespace_backend_ref() {
    let s = Suite::start_l4("UDPRoute", "udproute-invalid-cross-namespace-backend-ref.yaml");
    let (gateway, route) =
        ("udp-gateway-invalid-cross-namespace-backend-ref", "udp-route-invalid-cross-namespace-backend-ref");
    s.accepted_on(gateway, &[None], &[route]);
    s.route_condition(route, gateway, "ResolvedRefs", "False", "RefNotPermitted");
}

#[test]
fn udproute_not_allowed_by_listeners() {
    let s = Suite::start_l4("UDPRoute", "udproute-not-allowed-by-listeners.yaml");
    let gateway = "udproute-tls-only-gateway";
    s.route_condition("udproute-not-allowed-by-listeners", gateway, "Accepted", "False", "NotAllowedByListeners");
    s.zero_routes(gateway);
}

#[test]
fn udproute_parentref_attach_all_listeners() {
    let s = Suite::start_l4("UDPRoute", "udproute-parentref-attach-all-listeners.yaml");
    let gateway = "udp-attach-all-listeners-gateway";
    s.route_parents("udp-route-attach-all", gateway, 1, false, ("Accepted", "True", "Accepted"));
    for listener in ["udp-1", "udp-2", "udp-3"] {
        listener_status(gateway, listener, ("UDPRoute", 1), ("Accepted", "True", ""));
        listener_status(gateway, listener, ("UDPRoute", 1), ("ResolvedRefs", "True", ""));
    }
    for listener in ["udp-1", "udp-2", "udp-3"] {
        expect_echo(address(gateway, listener), Some("udp-echo-attach-all"), INFRA);
    }
}

#[test]
fn udproute_parentref_port_and_section_name() {
    let s = Suite::start_l4("UDPRoute", "udproute-parentref-port-and-section-name.yaml");
    let gateway = "udp-multi-listener-gateway";
    let listeners: Vec<String> = cluster().get("Gateway", INFRA, gateway)["spec"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    for (i, (route, backend)) in [
        ("udp-route-by-port", "udp-echo-by-port"),
        ("udp-route-by-section", "udp-echo-by-section"),
        ("udp-route-by-section-and-port", "udp-echo-by-section-and-port"),
    ]
    .into_iter()
    .enumerate()
    {
        s.route_parents(route, gateway, 1, false, ("Accepted", "True", "Accepted"));
        expect_echo(address(gateway, &listeners[i]), Some(backend), INFRA);
    }
}

#[test]
fn udproute_reference_grant() {
    let s = Suite::start_l4("UDPRoute", "udproute-reference-grant.yaml");
    let (gateway, route) = ("udp-gateway-reference-grant", "udp-route-reference-grant");
    s.accepted_on(gateway, &[None], &[route]);
    s.route_condition(route, gateway, "ResolvedRefs", "True", "ResolvedRefs");
    let listener =
        cluster().get("Gateway", INFRA, gateway)["spec"]["listeners"][0]["name"].as_str().unwrap().to_string();
    expect_echo(address(gateway, &listener), None, INFRA);
    cluster().admin.delete("ReferenceGrant", Some(APP_BACKEND), "udp-reference-grant");
    s.route_condition(route, gateway, "ResolvedRefs", "False", "RefNotPermitted");
}

#[test]
fn udproute_multiple_routes_attachment() {
    let mut s = Suite::start_l4("UDPRoute", "udproute-multiple-routes-attachment.yaml");
    let (gateway, older, newer) = ("udp-multi-route-attach-gateway", "udproute-attach-older", "udproute-attach-newer");
    s.accepted_on(gateway, &[Some("udp")], &[older]);
    std::thread::sleep(Duration::from_secs(1));
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "UDPRoute",
        "metadata": { "name": newer, "namespace": INFRA },
        "spec": {
            "parentRefs": [{ "name": gateway, "sectionName": "udp" }],
            "rules": [{ "backendRefs": [{ "name": "udp-attach-backend-2", "port": 8080 }] }],
        },
    });
    s.applied.extend(cluster().apply(std::slice::from_ref(&route)));
    for route in [older, newer] {
        s.route_condition(route, gateway, "Accepted", "True", "Accepted");
    }
    listener_status(gateway, "udp", ("UDPRoute", 2), ("Accepted", "True", "Accepted"));
    let addr = address(gateway, "udp");
    expect_echo(addr, Some("udp-attach-backend-1"), INFRA);
    for i in 0..100 {
        let answer = probe(addr, b"gateway-api-conformance-udp-echo").unwrap_or_else(|e| panic!("probe {i}: {e}"));
        assert_eq!(answer["service"], "udp-attach-backend-1", "probe {i}: only the oldest route is bound");
    }
}

#[test]
fn udproute_weighted_routing() {
    let s = Suite::start_l4("UDPRoute", "udproute-weighted-routing.yaml");
    let (gateway, route) = ("udp-weighted-gateway", "udp-weighted-route");
    s.accepted_on(gateway, &[Some("udp")], &[route]);
    let addr = address(gateway, "udp");
    expect_echo(addr, None, INFRA);
    // Each probe a flow of its own: 70/30 between v1 and v2, nothing to v3 (weight 0).
    weighted_70_30(|| {
        let answer = probe(addr, b"gateway-api-conformance-udp-weight\n").unwrap_or_else(|e| panic!("{addr}: {e}"));
        let service = answer["service"].as_str().unwrap_or("").to_string();
        service.strip_prefix("udp-backend-").unwrap_or(&service).to_string()
    });
}
