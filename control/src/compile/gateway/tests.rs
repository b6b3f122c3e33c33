//! The Gateway API compiler on real objects (YAML, read as `--manifests` reads them): what the
//! compiled table answers for a request, and what status says.

use ramjet_shared::{Generation, RequestView};

use super::*;
use crate::compile::{ingress, Compiler};
use crate::manifests;

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: ramjet }
spec: { controllerName: ramjet.dev/gateway-controller }
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: other }
spec: { controllerName: example.com/other }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: edge, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners:
    - { name: http, port: 80, protocol: HTTP, allowedRoutes: { namespaces: { from: All } } }
    - { name: tcp, port: 9000, protocol: TCP }
    - { name: odd-port, port: 81, protocol: HTTP }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: theirs, namespace: infra }
spec:
  gatewayClassName: other
  listeners: [{ name: http, port: 80, protocol: HTTP }]
"#;

/// A Service `name` in `namespace` with one port 80 and one ready endpoint whose port is `id`.
fn service(namespace: &str, name: &str, id: u16) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{ name: {name}, namespace: {namespace} }}\n\
         spec: {{ ports: [{{ name: http, port: 80 }}] }}\n---\napiVersion: discovery.k8s.io/v1\n\
         kind: EndpointSlice\nmetadata: {{ name: {name}-1, namespace: {namespace}, labels: \
         {{ kubernetes.io/service-name: {name} }} }}\naddressType: IPv4\nports: [{{ name: http, port: {id} }}]\n\
         endpoints: [{{ addresses: [\"127.0.0.1\"] }}]\n"
    )
}

fn compile(yaml: &str) -> (Generation, Report) {
    let mut snapshot = ingress::ClusterSnapshot::default();
    manifests::parse(yaml, "test.yaml", &mut snapshot);
    assert!(snapshot.diagnostics.is_empty(), "{:?}", snapshot.diagnostics);
    let mut compiler = Compiler::new();
    let draft = ingress::compile(&snapshot, &mut compiler);
    (compiler.finish(draft).expect("a generation"), report(&snapshot))
}

struct Request<'a> {
    method: &'a str,
    headers: &'a [(&'a str, &'a str)],
    path: &'a str,
    query: &'a str,
}

impl RequestView for Request<'_> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_bytes())
    }
    fn cookie(&self, _: &str) -> Option<&[u8]> {
        None
    }
    fn method(&self) -> &[u8] {
        self.method.as_bytes()
    }
    fn query(&self) -> &[u8] {
        self.query.as_bytes()
    }
    fn path(&self) -> &[u8] {
        self.path.as_bytes()
    }
    fn tls(&self) -> bool {
        false
    }
}

/// Which endpoint port (the test's backend id) or direct status answers the request.
fn answer(generation: &Generation, host: &str, path: &str, method: &str, headers: &[(&str, &str)]) -> String {
    let (path_only, query) = path.split_once('?').unwrap_or((path, ""));
    let req = Request { method, headers, path: path_only, query };
    let Some(route) = generation.table.route(host, path) else { return "404 (no route)".into() };
    let pick = route.pick(&req, &mut || 0);
    match &pick.backend.kind {
        BackendKind::Endpoints(e) => e[0].port().to_string(),
        BackendKind::Respond(r) => r.status.to_string(),
    }
}

fn get(generation: &Generation, host: &str, path: &str) -> String {
    answer(generation, host, path, "GET", &[])
}

#[test]
fn matches_follow_the_specs_precedence() {
    let yaml = format!(
        "{BASE}{}{}{}{}{}{}\n---\n{}",
        service("app", "root", 1),
        service("app", "prefix", 2),
        service("app", "exact", 3),
        service("app", "method", 4),
        service("app", "headers", 5),
        service("app", "query", 6),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: web, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [web.test]
  rules:
    - backendRefs: [{ name: root, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /api } }]
      backendRefs: [{ name: prefix, port: 80 }]
    - matches: [{ path: { type: Exact, value: /api/v1 } }]
      backendRefs: [{ name: exact, port: 80 }]
    - matches:
        - path: { value: /api }
          headers: [{ name: X-Env, value: canary }, { name: X-Team, type: RegularExpression, value: "a.c" }]
      backendRefs: [{ name: headers, port: 80 }]
    - matches: [{ path: { value: /api }, headers: [{ name: x-env, value: canary }], method: POST }]
      backendRefs: [{ name: method, port: 80 }]
    - matches: [{ path: { value: /api }, queryParams: [{ name: v, value: "2" }] }]
      backendRefs: [{ name: query, port: 80 }]
"#
    );
    let (g, report) = compile(&yaml);
    assert_eq!(get(&g, "web.test", "/"), "1");
    assert_eq!(get(&g, "web.test", "/apis"), "1", "a prefix matches whole path elements");
    assert_eq!(get(&g, "web.test", "/api/x"), "2");
    assert_eq!(get(&g, "web.test", "/api/v1"), "3", "Exact before any prefix");
    assert_eq!(get(&g, "web.test", "/api/x?v=2"), "6");
    let canary = [("x-env", "canary"), ("x-team", "abc")];
    assert_eq!(answer(&g, "web.test", "/api/x", "GET", &canary), "5", "most headers");
    assert_eq!(answer(&g, "web.test", "/api/x", "POST", &canary), "4", "a method before more headers");
    assert_eq!(answer(&g, "web.test", "/api/x", "GET", &[("x-env", "canary"), ("x-team", "abcd")]), "2", "full match");
    assert_eq!(get(&g, "other.test", "/"), "404 (no route)", "the route's hostnames only");
    let parents = &report.routes[0].parents;
    assert_eq!(parents.len(), 1);
    assert!(parents[0].conditions.iter().all(|c| c.status), "{parents:?}");
    assert_eq!(report.gateways.len(), 1, "the other class's Gateway is not ours: {:?}", report.gateways);
    assert_eq!(report.gateways[0].listeners[0].attached_routes, 1);
}

#[test]
fn a_regular_expression_path_matches_the_whole_path_between_exact_and_prefix_matches() {
    let yaml = format!(
        "{BASE}{}{}{}{}\n---\n{}",
        service("app", "prefix", 1),
        service("app", "exact", 2),
        service("app", "pattern", 3),
        service("app", "longer", 4),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: web, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [web.test]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /orders } }]
      backendRefs: [{ name: prefix, port: 80 }]
    - matches: [{ path: { type: Exact, value: /orders/42 } }]
      backendRefs: [{ name: exact, port: 80 }]
    - matches: [{ path: { type: RegularExpression, value: "/orders/[0-9]+" } }]
      backendRefs: [{ name: pattern, port: 80 }]
    - matches: [{ path: { type: RegularExpression, value: "/orders/[0-9]+/items" } }]
      backendRefs: [{ name: longer, port: 80 }]
    - matches: [{ path: { type: RegularExpression, value: "/broken(" } }]
      backendRefs: [{ name: prefix, port: 80 }]
"#
    );
    let (g, _) = compile(&yaml);
    let warnings: Vec<&str> = g.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(get(&g, "web.test", "/orders/42"), "2", "Exact before a pattern");
    assert_eq!(get(&g, "web.test", "/orders/7"), "3", "a pattern before a prefix");
    assert_eq!(get(&g, "web.test", "/orders/7?x=1"), "3", "the query is not part of the path");
    assert_eq!(get(&g, "web.test", "/orders/7/items"), "4", "the longer pattern first");
    assert_eq!(get(&g, "web.test", "/orders/7x"), "1", "the whole path must match");
    assert_eq!(get(&g, "web.test", "/shop/orders/7"), "404", "anchored at the start too");
    assert_eq!(get(&g, "web.test", "/orders"), "1");
    assert!(
        warnings.iter().any(|w| w.contains("spec.rules[4].matches[0]") && w.contains("regular expression")),
        "the bad pattern is reported: {warnings:?}"
    );
}

#[test]
fn a_failed_condition_falls_back_to_a_shorter_prefix_and_then_404() {
    let yaml = format!(
        "{BASE}{}{}\n---\n{}",
        service("app", "a", 1),
        service("app", "b", 2),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: web, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra, sectionName: http }]
  rules:
    - matches: [{ path: { value: /shop }, headers: [{ name: x-beta, value: "1" }] }]
      backendRefs: [{ name: b, port: 80 }]
    - matches: [{ path: { value: / }, method: GET }]
      backendRefs: [{ name: a, port: 80 }]
"#
    );
    let (g, _) = compile(&yaml);
    assert_eq!(answer(&g, "any.test", "/shop/cart", "GET", &[("x-beta", "1")]), "2");
    assert_eq!(get(&g, "any.test", "/shop/cart"), "1");
    assert_eq!(answer(&g, "any.test", "/shop/cart", "PUT", &[]), "404");
}

#[test]
fn weights_split_and_invalid_backends_answer_500() {
    let yaml = format!(
        "{BASE}{}{}\n---\n{}",
        service("app", "a", 1),
        service("other", "far", 2),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: web, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [web.test]
  rules:
    - matches: [{ path: { value: /split } }]
      backendRefs: [{ name: a, port: 80, weight: 3 }, { name: far, namespace: other, port: 80, weight: 1 }]
    - matches: [{ path: { value: /missing } }]
      backendRefs: [{ name: nothing, port: 80 }]
"#
    );
    let (g, report) = compile(&yaml);
    // Without a ReferenceGrant the cross-namespace backend is refused: the rule answers 500.
    assert_eq!(get(&g, "web.test", "/split"), "500");
    assert_eq!(get(&g, "web.test", "/missing"), "500");
    let resolved = report.routes[0].parents[0].conditions.iter().find(|c| c.type_ == "ResolvedRefs").unwrap();
    assert_eq!((resolved.status, resolved.reason), (false, "RefNotPermitted"));
    assert!(g.diagnostics.iter().any(|d| d.message.contains("no ReferenceGrant in other")), "{:?}", g.diagnostics);

    let granted = format!(
        "{yaml}---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
         metadata: {{ name: let-app-in, namespace: other }}\nspec:\n  from: [{{ group: gateway.networking.k8s.io, \
         kind: HTTPRoute, namespace: app }}]\n  to: [{{ group: \"\", kind: Service }}]\n"
    );
    let (g, report) = compile(&granted);
    let route = g.table.route("web.test", "/split").unwrap();
    let rule = &route.policy.as_ref().unwrap().rules[0];
    assert_eq!((rule.backends[0].weight, rule.backends[1].weight, rule.total), (3, 1, 4));
    assert_eq!(answer(&g, "web.test", "/split", "GET", &[]), "1");
    let req = Request { method: "GET", headers: &[], path: "/", query: "" };
    assert_eq!(route.pick(&req, &mut || u32::MAX).backend.name.as_ref(), "other/far:80");
    let resolved = report.routes[0].parents[0].conditions.iter().find(|c| c.type_ == "ResolvedRefs").unwrap();
    assert_eq!((resolved.status, resolved.reason), (false, "BackendNotFound"), "/missing still");
}

#[test]
fn listeners_ramjet_cannot_serve_are_reported_and_routes_attach_only_where_allowed() {
    let yaml = format!(
        "{BASE}{}\n---\n{}",
        service("app", "a", 1),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: named, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners: [{ name: http, port: 80, protocol: HTTP, hostname: "*.example.com" }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: same-only, namespace: app }
spec:
  parentRefs: [{ name: named, namespace: infra }]
  rules: [{ backendRefs: [{ name: a, port: 80 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: wrong-section, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra, sectionName: nope }, { name: theirs, namespace: infra }]
  rules: [{ backendRefs: [{ name: a, port: 80 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: hosts, namespace: infra }
spec:
  parentRefs: [{ name: named }]
  hostnames: [shop.example.com, "*.example.com", other.test]
  rules: [{ backendRefs: [{ name: a, namespace: app, port: 80 }] }]
"#
    );
    let (_, report) = compile(&yaml);
    let edge = report.gateways.iter().find(|g| g.name == "edge").unwrap();
    let listener = |name: &str| edge.listeners.iter().find(|l| l.name == name).unwrap();
    let reason = |l: &ListenerReport, t: &str| l.conditions.iter().find(|c| c.type_ == t).map(|c| (c.status, c.reason));
    assert_eq!(reason(listener("tcp"), "Accepted"), Some((false, "UnsupportedProtocol")));
    assert_eq!(reason(listener("odd-port"), "Accepted"), Some((false, "PortUnavailable")));
    assert_eq!(reason(listener("http"), "Programmed"), Some((true, "Programmed")));
    assert_eq!(edge.conditions[0].reason, "ListenersNotValid");
    let route = |name: &str| report.routes.iter().find(|r| r.name == name).unwrap();
    let accepted = |r: &RouteReport| {
        r.parents
            .iter()
            .map(|p| (p.parent_ref.name.clone(), p.conditions[0].status, p.conditions[0].reason))
            .collect::<Vec<_>>()
    };
    assert_eq!(accepted(route("same-only")), [("named".to_string(), false, "NotAllowedByListeners")]);
    // The other controller's Gateway gets no entry from ramjet.
    assert_eq!(accepted(route("wrong-section")), [("edge".to_string(), false, "NoMatchingParent")]);
    assert_eq!(accepted(route("hosts")), [("named".to_string(), true, "Accepted")]);
    assert_eq!(
        intersect(Some("*.example.com"), &["shop.example.com".into(), "*.example.com".into(), "other.test".into()]),
        ["*.example.com", "shop.example.com"]
    );
    assert_eq!(intersect(Some("shop.example.com"), &["*.example.com".into()]), ["shop.example.com"]);
    assert_eq!(intersect(None, &[]), [""]);
}

#[test]
fn timeouts_become_one_deadline_and_bad_ones_are_reported() {
    use std::time::Duration;
    assert_eq!(gateway_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(gateway_duration("1h2m3s4ms"), Some(Duration::from_millis(3_723_004)));
    assert_eq!(gateway_duration("0s"), Some(Duration::ZERO));
    for bad in ["", "1", "1.5s", "100000s", "1s1s1s1s1s", "-1s", "1d", "s"] {
        assert_eq!(gateway_duration(bad), None, "{bad:?}");
    }
    let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let deadline = |pairs: &[(&str, &str)]| rule_deadline(Some(&map(pairs)));
    assert_eq!(deadline(&[]), Ok(None));
    assert_eq!(deadline(&[("request", "2s")]), Ok(Some(Duration::from_secs(2))));
    assert_eq!(deadline(&[("request", "2s"), ("backendRequest", "500ms")]), Ok(Some(Duration::from_millis(500))));
    assert_eq!(deadline(&[("request", "0s")]), Ok(None), "0s turns it off");
    assert_eq!(deadline(&[("request", "0s"), ("backendRequest", "1s")]), Ok(Some(Duration::from_secs(1))));
    assert!(deadline(&[("request", "1s"), ("backendRequest", "2s")]).is_err());
    assert!(deadline(&[("request", "soon")]).is_err());
    assert!(deadline(&[("idle", "1s")]).is_err());

    // On a route: the rule carries it; a bad one is reported and the rule still serves.
    let yaml = format!(
        "{BASE}{}\n---\n{}",
        service("app", "a", 1),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: web, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [web.test]
  rules:
    - matches: [{ path: { value: /quick } }]
      timeouts: { request: 1s, backendRequest: 250ms }
      backendRefs: [{ name: a, port: 80 }]
    - matches: [{ path: { value: /odd } }]
      timeouts: { request: soon }
      backendRefs: [{ name: a, port: 80 }]
"#
    );
    let (g, _) = compile(&yaml);
    let rule = |path: &str| g.table.route("web.test", path).unwrap().policy.as_ref().unwrap().rules[0].clone();
    assert_eq!(rule("/quick").deadline, Some(Duration::from_millis(250)));
    assert_eq!(rule("/odd").deadline, None);
    assert_eq!(get(&g, "web.test", "/odd"), "1");
    assert!(
        g.diagnostics.iter().any(|d| d.message.contains("spec.rules[1].timeouts: request `soon`")),
        "{:?}",
        g.diagnostics
    );
}
