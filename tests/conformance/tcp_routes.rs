//! The suite's TCPRoute tests (v1.6.1, `conformance/tests/tcproute-*`), translated as the HTTPRoute
//! ones are: the manifest applied, the status the test waits for read from the API server, then
//! connections to the Gateway's address and the listener's port. The backends are the suite's TCP
//! echo server (echo-basic with `TCP_ECHO_SERVER`): a welcome line, then `PING`, `IS_TLS` and
//! `TEST` (a JSON line naming its namespace and pod) answered line by line.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{cluster, has_condition, listener_until, netns, split, weighted_70_30, Suite, ADDRESS, INFRA, PATIENCE};

/// The suite's `tcpserver.WelcomeMessage`.
pub(super) const WELCOME: &str = "Gateway API Test TCP Server\n";
/// The suite's `WebBackendNamespace`.
const WEB_BACKEND: &str = "gateway-conformance-web-backend";

/// Starts the suite's TCP echo server for a Service (in the backend namespace) as a Pod of
/// `deployment` runs it; its port. With `tls`, the port is the server's TLS one: each connection
/// is a TLS session, and `TEST` also tells what the handshake agreed (the SNI above all).
pub(super) fn echo_server(service: &Value, deployment: &str, tls: Option<Arc<rustls::ServerConfig>>) -> u16 {
    let namespace = service["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    let name = service["metadata"]["name"].as_str().unwrap_or("").to_string();
    let listener = netns::bind_backend();
    let port = listener.local_addr().unwrap().port();
    // What the echo server of a Pod of this Deployment says of itself.
    let context = json!({
        "namespace": namespace, "ingress": "", "service": name, "pod": format!("{deployment}-0"),
        "tcpport": "3000", "tlsport": "8443", "isTLS": false,
    });
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (context, tls) = (context.clone(), tls.clone());
            std::thread::spawn(move || match tls {
                None => serve_echo(stream, context),
                Some(config) => {
                    let Ok(session) = rustls::ServerConnection::new(config) else { return };
                    let mut stream = rustls::StreamOwned::new(session, stream);
                    if stream.conn.complete_io(&mut stream.sock).is_err() {
                        return;
                    }
                    let context = with_tls_facts(context, &stream.conn);
                    serve_echo(stream, context)
                }
            });
        }
    });
    port
}

/// The context with `isTLS` and the suite's `TLSAssertions` of a completed handshake (its names
/// as Go's `tls.VersionName` and `tls.CipherSuiteName` write them).
fn with_tls_facts(mut context: Value, session: &rustls::ServerConnection) -> Value {
    let version = match session.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLS 1.3",
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLS 1.2",
        _ => "",
    };
    let suite = session.negotiated_cipher_suite().map(|s| format!("{:?}", s.suite())).unwrap_or_default();
    context["isTLS"] = json!(true);
    context["tls"] = json!({
        "version": version,
        "serverName": session.server_name().unwrap_or(""),
        "negotiatedProtocol": session.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned()),
        "cipherSuite": suite.replacen("TLS13_", "TLS_", 1),
    });
    context
}

/// The echo server's conversation: the welcome line, then an answer per line it knows.
fn serve_echo(stream: impl Read + Write, context: Value) {
    let is_tls = format!("{}\n", context["isTLS"]);
    let test = format!("{context}\n");
    let mut reader = BufReader::new(stream);
    if reader.get_mut().write_all(WELCOME.as_bytes()).and_then(|_| reader.get_mut().flush()).is_err() {
        return;
    }
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = match line.trim_end() {
            "TEST" => &test,
            "IS_TLS" => &is_tls,
            "PING" => "PONG\n",
            _ => continue,
        };
        let stream = reader.get_mut();
        if stream.write_all(answer.as_bytes()).and_then(|_| stream.flush()).is_err() {
            return;
        }
    }
}

/// The Gateway's address with a listener's port (`WaitForGatewayAddress` with a listener).
pub(super) fn address(gateway: &str, listener: &str) -> SocketAddr {
    let (ns, name) = split(gateway);
    let gw = cluster().get("Gateway", ns, name);
    let port = gw["spec"]["listeners"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == listener))
        .and_then(|l| l["port"].as_u64())
        .unwrap_or_else(|| panic!("Gateway {gateway} has no listener {listener}"));
    format!("{ADDRESS}:{port}").parse().unwrap()
}

/// One exchange (`tcp.EchoSendOnce`): the welcome line, then `TEST`; the pod that answered.
fn echo_once(addr: SocketAddr) -> Result<Value, String> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    if line != WELCOME {
        return Err(format!("welcome {line:?}"));
    }
    writer.write_all(b"TEST\n").map_err(|e| e.to_string())?;
    line.clear();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| format!("{e}: {line:?}"))
}

/// `MakeTCPRequestAndExpectEventuallyValidResponse` without TLS: until a connection gets the
/// welcome, `PONG`, `false` for `IS_TLS`, and a `TEST` answer from a Pod of `backend` in `namespace`.
fn expect_backend(addr: SocketAddr, backend: &str, namespace: &str) {
    let exchange = || -> Result<Value, String> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
        let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(stream);
        let mut ask = |question: &str| -> Result<String, String> {
            if !question.is_empty() {
                writer.write_all(question.as_bytes()).map_err(|e| e.to_string())?;
            }
            let mut line = String::new();
            reader.read_line(&mut line).map_err(|e| e.to_string())?;
            Ok(line)
        };
        let welcome = ask("")?;
        let (pong, tls, test) = (ask("PING\n")?, ask("IS_TLS\n")?, ask("TEST\n")?);
        if (welcome.as_str(), pong.as_str(), tls.as_str()) != (WELCOME, "PONG\n", "false\n") {
            return Err(format!("{welcome:?} {pong:?} {tls:?}"));
        }
        serde_json::from_str(&test).map_err(|e| format!("{e}: {test:?}"))
    };
    let deadline = Instant::now() + PATIENCE;
    loop {
        match exchange() {
            Ok(answer) => {
                assert_eq!(answer["namespace"], namespace, "{answer}");
                let pod = answer["pod"].as_str().unwrap_or("");
                assert!(pod.starts_with(&format!("{backend}-")), "{pod} is not a Pod of {backend}");
                return;
            }
            Err(e) => assert!(Instant::now() < deadline, "{addr}: never a valid answer: {e}"),
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `GatewayStatusMustHaveListeners` for one listener: `kind` its only supported kind, `attached`
/// routes, and the condition.
pub(super) fn listener_status(
    gateway: &str,
    listener: &str,
    (kind, attached): (&str, u64),
    (type_, status, reason): (&str, &str, &str),
) {
    let what = format!("{kind}, {attached} routes, {type_}={status} ({reason})");
    listener_until(gateway, listener, &what, |l| {
        l["attachedRoutes"] == attached
            && l["supportedKinds"].as_array().is_some_and(|k| k.len() == 1 && k[0]["kind"] == kind)
            && has_condition(&l["conditions"], type_, status, reason)
    });
}

#[test]
fn tcproute_invalid_backendref_nonexistent() {
    let s = Suite::start_l4("TCPRoute", "tcproute-invalid-backendref-nonexistent.yaml");
    let route = "tcp-route-invalid-backend-ref-nonexistent";
    s.route_condition(route, "tcp-gateway-invalid-backend", "ResolvedRefs", "False", "BackendNotFound");
}

#[test]
fn tcproute_invalid_cross_namespace_backend_ref() {
    let s = Suite::start_l4("TCPRoute", "tcproute-invalid-cross-namespace-backend-ref.yaml");
    let (gateway, route) =
        ("tcp-invalid-cross-namespace-backend-ref-gateway", "tcp-invalid-cross-namespace-backend-ref");
    s.accepted_on(gateway, &[Some("tcp")], &[route]);
    s.route_condition(route, gateway, "ResolvedRefs", "False", "RefNotPermitted");
}

#[test]
fn tcproute_invalid_non_tcp_listener() {
    let s = Suite::start_l4("TCPRoute", "tcproute-invalid-non-tcp-listener.yaml");
    s.route_condition("tcp-route", "tcp-mixed-protocol-gateway", "Accepted", "False", "NotAllowedByListeners");
    s.zero_routes("tcp-mixed-protocol-gateway");
}

#[test]
fn tcproute_parentref_attach_all() {
    let s = Suite::start_l4("TCPRoute", "tcproute-parentref-attach-all.yaml");
    let gateway = "tcp-attach-all-gateway";
    s.route_parents("tcp-route-attach-all", gateway, 1, false, ("Accepted", "True", "Accepted"));
    for listener in ["one", "two", "three", "four"] {
        expect_backend(address(gateway, listener), "tcp-echo-attach-all", INFRA);
    }
}

#[test]
fn tcproute_parentref_port_and_section_name() {
    let s = Suite::start_l4("TCPRoute", "tcproute-parentref-port-and-section-name.yaml");
    let gateway = "tcp-multi-listener-gateway";
    for (route, listener, backend) in [
        ("tcp-route-by-port", "one", "tcp-echo-one"),
        ("tcp-route-by-section", "two", "tcp-echo-two"),
        ("tcp-route-by-section-and-port", "three", "tcp-echo-three"),
    ] {
        s.route_parents(route, gateway, 1, false, ("Accepted", "True", "Accepted"));
        expect_backend(address(gateway, listener), backend, INFRA);
    }
}

#[test]
fn tcproute_reference_grant() {
    let s = Suite::start_l4("TCPRoute", "tcproute-reference-grant.yaml");
    let (gateway, route) = ("tcp-reference-grant-gateway", "tcp-reference-grant");
    s.accepted_on(gateway, &[Some("tcp")], &[route]);
    expect_backend(address(gateway, "tcp"), "tcp-reference-grant-backend", WEB_BACKEND);
    cluster().admin.delete("ReferenceGrant", Some(WEB_BACKEND), "tcp-reference-grant");
    s.route_condition(route, gateway, "ResolvedRefs", "False", "RefNotPermitted");
}

#[test]
fn tcproute_multiple_routes_attachment() {
    let mut s = Suite::start_l4("TCPRoute", "tcproute-multiple-routes-attachment.yaml");
    let (gateway, older, newer) = ("tcp-multi-route-attach-gateway", "tcproute-attach-older", "tcproute-attach-newer");
    s.accepted_on(gateway, &[Some("tcp")], &[older]);
    // Creation times have second precision: the newer route is strictly newer.
    std::thread::sleep(Duration::from_secs(1));
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
        "metadata": { "name": newer, "namespace": INFRA },
        "spec": {
            "parentRefs": [{ "name": gateway, "sectionName": "tcp" }],
            "rules": [{ "backendRefs": [{ "name": "tcp-attach-backend-2", "port": 3000 }] }],
        },
    });
    s.applied.extend(cluster().apply(std::slice::from_ref(&route)));
    for route in [older, newer] {
        s.route_condition(route, gateway, "Accepted", "True", "Accepted");
    }
    listener_status(gateway, "tcp", ("TCPRoute", 2), ("Accepted", "True", "Accepted"));
    let addr = address(gateway, "tcp");
    expect_backend(addr, "tcp-attach-backend-1", INFRA);
    for i in 0..100 {
        let answer = echo_once(addr).unwrap_or_else(|e| panic!("request {i}: {e}"));
        let pod = answer["pod"].as_str().unwrap_or("");
        assert!(pod.starts_with("tcp-attach-backend-1-"), "request {i} reached {pod}: only the oldest route is bound");
    }
}

#[test]
fn tcproute_weighted_routing() {
    let s = Suite::start_l4("TCPRoute", "tcproute-weighted-routing.yaml");
    let (gateway, route) = ("tcp-weighted-gateway", "tcp-weighted-route");
    s.accepted_on(gateway, &[Some("tcp")], &[route]);
    let addr = address(gateway, "tcp");
    // `ExpectAddressBeAvailable`: the port takes connections.
    let available = Instant::now() + PATIENCE;
    while echo_once(addr).is_err() {
        assert!(Instant::now() < available, "{addr} never answers");
        std::thread::sleep(Duration::from_millis(500));
    }
    // 70/30 between v1 and v2, and nothing to v3 (weight 0).
    weighted_70_30(|| {
        let answer = echo_once(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
        let pod = answer["pod"].as_str().unwrap_or("").to_string();
        pod.strip_prefix("tcp-backend-").and_then(|p| p.strip_suffix("-0")).unwrap_or(&pod).to_string()
    });
}
