//! The same routing as an Ingress pair with ingress-nginx's canary and mirror annotations and as one
//! HTTPRoute (header match, 90/10 weights, a mirror), both compiled by the real compilers from YAML,
//! measured in the same run: route lookup plus the pick a worker makes for a request with and without
//! the header. Nothing in the data plane knows which API a route came from, so the two should cost
//! the same.
//!
//! `cargo bench --bench gateway_route`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use ramjet_control::compile::cluster;
use ramjet_control::compile::snapshot::ClusterSnapshot;
use ramjet_control::compile::Compiler;
use ramjet_control::manifests;
use ramjet_shared::{cookie_value, Generation, RequestView};

const SERVICES: &str = r#"
apiVersion: v1
kind: Service
metadata: { name: stable, namespace: shop }
spec: { ports: [{ name: http, port: 80 }] }
---
apiVersion: v1
kind: Service
metadata: { name: beta, namespace: shop }
spec: { ports: [{ name: http, port: 80 }] }
---
apiVersion: v1
kind: Service
metadata: { name: shadow, namespace: shop }
spec: { ports: [{ name: http, port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: stable-1, namespace: shop, labels: { kubernetes.io/service-name: stable } }
addressType: IPv4
ports: [{ name: http, port: 8080 }]
endpoints: [{ addresses: ["10.0.0.1"] }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: beta-1, namespace: shop, labels: { kubernetes.io/service-name: beta } }
addressType: IPv4
ports: [{ name: http, port: 8080 }]
endpoints: [{ addresses: ["10.0.0.2"] }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: shadow-1, namespace: shop, labels: { kubernetes.io/service-name: shadow } }
addressType: IPv4
ports: [{ name: http, port: 8080 }]
endpoints: [{ addresses: ["10.0.0.3"] }]
"#;

const INGRESSES: &str = r#"
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: { name: ramjet }
spec: { controller: ramjet.dev/ingress-controller }
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
  annotations: { nginx.ingress.kubernetes.io/mirror-target: "http://shadow.shop.svc/$request_uri" }
spec:
  ingressClassName: ramjet
  rules: [{ host: shop.example.com, http: { paths: [{ path: /, pathType: Prefix, backend: { service: { name: stable, port: { number: 80 } } } }] } }]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop-canary
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/canary: "true"
    nginx.ingress.kubernetes.io/canary-by-header: x-beta
    nginx.ingress.kubernetes.io/canary-by-header-value: "yes"
    nginx.ingress.kubernetes.io/canary-weight: "10"
spec:
  ingressClassName: ramjet
  rules: [{ host: shop.example.com, http: { paths: [{ path: /, pathType: Prefix, backend: { service: { name: beta, port: { number: 80 } } } }] } }]
"#;

const HTTPROUTE: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: ramjet }
spec: { controllerName: ramjet.dev/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: shop }
spec: { gatewayClassName: ramjet, listeners: [{ name: http, port: 80, protocol: HTTP }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: shop, namespace: shop }
spec:
  parentRefs: [{ name: edge }]
  hostnames: [shop.example.com]
  rules:
    - matches: [{ path: { value: / }, headers: [{ name: x-beta, value: "yes" }] }]
      backendRefs: [{ name: beta, port: 80 }]
      filters: [{ type: RequestMirror, requestMirror: { backendRef: { name: shadow, port: 80 } } }]
    - matches: [{ path: { value: / } }]
      backendRefs: [{ name: stable, port: 80, weight: 90 }, { name: beta, port: 80, weight: 10 }]
      filters: [{ type: RequestMirror, requestMirror: { backendRef: { name: shadow, port: 80 } } }]
"#;

fn compile(yaml: &str) -> Generation {
    let mut snapshot = ClusterSnapshot::default();
    manifests::parse(yaml, "bench.yaml", &mut snapshot);
    let mut compiler = Compiler::new();
    let draft = cluster::compile(&snapshot, &mut compiler);
    let generation = compiler.finish(draft).expect("a table");
    assert!(generation.diagnostics.is_empty(), "{:?}", generation.diagnostics);
    generation
}

/// A request's fields as a worker sees them (five fields, one a cookie).
struct Fields(&'static [(&'static str, &'static str)]);

impl RequestView for Fields {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.0.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_bytes())
    }
    fn cookie(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .find_map(|(_, v)| cookie_value(v.as_bytes(), name))
    }
    fn method(&self) -> &[u8] {
        b"GET"
    }
    fn query(&self) -> &[u8] {
        b""
    }
    fn path(&self) -> &[u8] {
        b"/"
    }
    fn tls(&self) -> bool {
        false
    }
}

const PLAIN: Fields = Fields(&[
    ("host", "shop.example.com"),
    ("user-agent", "bench"),
    ("accept", "*/*"),
    ("cookie", "a=1"),
    ("x-other", "1"),
]);
const BETA: Fields = Fields(&[
    ("host", "shop.example.com"),
    ("user-agent", "bench"),
    ("accept", "*/*"),
    ("cookie", "a=1"),
    ("x-beta", "yes"),
]);

fn same_run(c: &mut Criterion) {
    let mut group = c.benchmark_group("ingress_vs_httproute");
    for (name, generation) in [
        ("ingress", compile(&format!("{SERVICES}{INGRESSES}"))),
        ("httproute", compile(&format!("{SERVICES}{HTTPROUTE}"))),
    ] {
        let table = &generation.table;
        let mut draw = 0u32;
        for (which, req) in [("weighted", &PLAIN), ("header", &BETA)] {
            group.bench_function(format!("{name}/{which}"), |b| {
                b.iter(|| {
                    let route = table.route("shop.example.com", "/cart/items?id=7").unwrap();
                    let pick = route.pick(req, &mut || {
                        draw = draw.wrapping_add(0x9E37_79B9);
                        draw
                    });
                    black_box((pick.backend.slot, pick.rule.map(|r| r.has_mirrors())))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, same_run);
criterion_main!(benches);
