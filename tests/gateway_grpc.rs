//! GRPCRoutes over real sockets: GatewayClass, Gateway and GRPCRoute objects in a `--manifests`
//! directory, real gRPC backends (h2c) behind EndpointSlices, called with grpcurl (what a user's
//! gRPC client sees) and with the h2 crate (the exact answer), on both I/O drivers.

use ramjet_test_support as support;
use ramjet_test_support::{go_tools, grpc_backend, h2client};

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use grpc_backend::GrpcBackend;
use h2client::H2Client;
use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use support::manifests::Service;
use support::{temp_dir, wait_serving, DRIVERS};

const GATEWAY: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: ramjet }
spec: { controllerName: ramjet.dev/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners: [{ name: http, port: 80, protocol: HTTP, allowedRoutes: { namespaces: { from: All } } }]
"#;

/// Rules in an order the spec's precedence rearranges: the exact method before the whole
/// service, a header match on top of the same service, a method of any service last.
const ROUTE: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: { name: echo, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [grpc.test]
  rules:
    - matches: [{ method: { method: Bidi } }]
      backendRefs: [{ name: any-service, port: 50051 }]
    - matches: [{ method: { service: ramjet.test.Echo } }]
      backendRefs: [{ name: service, port: 50051 }]
    - matches: [{ method: { service: ramjet.test.Echo }, headers: [{ name: x-canary, value: "yes" }] }]
      backendRefs: [{ name: canary, port: 50051 }]
    - matches: [{ method: { service: ramjet.test.Echo, method: Unary } }]
      filters:
        - type: RequestHeaderModifier
          requestHeaderModifier: { add: [{ name: x-route, value: echo-unary }] }
      backendRefs: [{ name: unary, port: 50051 }]
"#;

fn start(dir: &Path, driver: IoDriver) -> Daemon {
    let mut config = DaemonConfig::with_source(Source::Manifests {
        dir: dir.to_path_buf(),
        options: IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    config.io_driver = driver;
    config.workers = 1;
    Daemon::start(config).expect("the daemon starts")
}

/// grpcurl calling `ramjet.test.Echo/<method>` through `addr` for `grpc.test`: its output.
fn grpcurl(addr: SocketAddr, method: &str, data: &str, extra: &[&str]) -> String {
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpc");
    let out = Command::new(go_tools::grpcurl())
        .args(["-import-path", proto_dir, "-proto", "echo.proto", "-max-time", "10", "-d", data, "-plaintext"])
        .args(extra)
        .args(["-authority", "grpc.test", &addr.to_string(), &format!("ramjet.test.Echo/{method}")])
        .output()
        .expect("grpcurl runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_grpcroute_routes_calls_by_service_method_and_header_to_h2_backends() {
    let names = ["any-service", "service", "canary", "unary"];
    let backends = names.map(|_| GrpcBackend::start());
    let dir = temp_dir("gateway-grpc");
    let services: String = names
        .iter()
        .zip(&backends)
        .map(|(n, b)| Service::new("app", n).port("grpc", 50051).endpoints(&[b.addr]).yaml())
        .collect();
    std::fs::write(dir.join("grpc.yaml"), format!("{GATEWAY}{services}{ROUTE}")).unwrap();
    let calls = |b: &GrpcBackend| b.requests().into_iter().filter(|r| r.starts_with("POST ")).count();
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let before: Vec<usize> = backends.iter().map(calls).collect();
        let answered_by = |before: &[usize]| -> Vec<&str> {
            names.iter().zip(&backends).zip(before).filter(|((_, b), n)| calls(b) > **n).map(|((n, _), _)| *n).collect()
        };

        // Service and method, exactly: the longest match wins, whatever the rule order.
        let out = grpcurl(addr, "Unary", r#"{"text":"hi"}"#, &[]);
        assert!(out.contains(r#"{ "text": "hi" }"#), "{driver:?}: {out}");
        assert_eq!(answered_by(&before), ["unary"], "{driver:?}");
        // The rest of the service, streaming too.
        let before: Vec<usize> = backends.iter().map(calls).collect();
        let out = grpcurl(addr, "ServerStream", r#"{"text":"s"}"#, &[]);
        assert!(out.contains(r#"{ "text": "s#3" }"#), "{driver:?}: {out}");
        assert_eq!(answered_by(&before), ["service"], "{driver:?}");
        // The same service with the header: the match with more header matches.
        let before: Vec<usize> = backends.iter().map(calls).collect();
        let out = grpcurl(addr, "ClientStream", r#"{"text":"a"} {"text":"b"}"#, &["-H", "x-canary: yes"]);
        assert!(out.contains(r#"{ "text": "a,b" }"#), "{driver:?}: {out}");
        assert_eq!(answered_by(&before), ["canary"], "{driver:?}");
        // A service match has more characters than a method-only match: Bidi of this service
        // goes to the service's backend; the method of another service to the method's.
        let before: Vec<usize> = backends.iter().map(calls).collect();
        let out = grpcurl(addr, "Bidi", r#"{"text":"x"}"#, &[]);
        assert!(out.contains(r#"{ "text": "echo:x" }"#), "{driver:?}: {out}");
        assert_eq!(answered_by(&before), ["service"], "{driver:?}");

        let mut client = H2Client::connect(addr);
        let grpc = [("content-type", "application/grpc"), ("te", "trailers")];
        let frame = grpc_backend::frame("other");
        let before: Vec<usize> = backends.iter().map(calls).collect();
        let r = client.request("POST", "grpc.test", "/other.Service/Bidi", &grpc, &frame, false).unwrap();
        assert_eq!(r.status, 200, "{driver:?}: {r:?}");
        assert_eq!(answered_by(&before), ["any-service"], "{driver:?}");
        // No rule matches: the gRPC way (trailers-only, UNIMPLEMENTED), not an HTML 404.
        let r = client.request("POST", "grpc.test", "/other.Service/Unary", &grpc, &frame, false).unwrap();
        assert_eq!((r.status, r.header("content-type")), (200, Some("application/grpc")), "{driver:?}: {r:?}");
        assert_eq!(r.header("grpc-status"), Some("12"), "{driver:?}: {r:?}");
        d.shutdown();
    }
}
