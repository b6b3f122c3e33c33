//! The Gateway API compiler on real objects (YAML, read as `--manifests` reads them): what the
//! compiled table answers for a request, and what status says.

use ramjet_shared::{Generation, RequestView, Transport, VerifyClient};

use super::*;
use crate::canary::promotion::{AutoPromote, CanaryKind, CanaryPlan, STATE_ANNOTATION};
use crate::compile::{cluster, Compiler};
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
    - { name: mqtt, port: 9000, protocol: example.com/mqtt }
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
    let mut snapshot = ClusterSnapshot::default();
    manifests::parse(yaml, "test.yaml", &mut snapshot);
    assert!(snapshot.diagnostics.is_empty(), "{:?}", snapshot.diagnostics);
    let mut compiler = Compiler::new();
    let mut draft = cluster::compile(&snapshot, &mut compiler);
    let report = std::mem::take(&mut draft.gateway_status);
    (compiler.finish(draft).expect("a generation"), report)
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
    assert_eq!(reason(listener("mqtt"), "Accepted"), Some((false, "UnsupportedProtocol")));
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

/// [`compile`], with the plans of the auto-promoting canaries.
fn compile_with_plans(yaml: &str) -> (Generation, Report, Vec<CanaryPlan>) {
    let mut snapshot = ClusterSnapshot::default();
    manifests::parse(yaml, "test.yaml", &mut snapshot);
    assert!(snapshot.diagnostics.is_empty(), "{:?}", snapshot.diagnostics);
    let mut compiler = Compiler::new();
    let mut draft = cluster::compile(&snapshot, &mut compiler);
    let plans = std::mem::take(&mut draft.canaries);
    let report = std::mem::take(&mut draft.gateway_status);
    (compiler.finish(draft).expect("a generation"), report, plans)
}

/// `web` for web.test: a header match to the canary, and a split of `/` between `stable` (the
/// primary, first) and `beta` (the canary, second), with these annotations.
fn auto_route(annotations: &[(&str, &str)]) -> String {
    let annotations: Vec<String> = annotations.iter().map(|(k, v)| format!("{k}: '{v}'")).collect();
    format!(
        "{BASE}{}{}\n---\n{}",
        service("app", "stable", 1),
        service("app", "beta", 2),
        format_args!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: app
  annotations: {{ {} }}
spec:
  parentRefs: [{{ name: edge, namespace: infra }}]
  hostnames: [web.test]
  rules:
    - matches: [{{ path: {{ value: / }}, headers: [{{ name: x-beta, value: "yes" }}] }}]
      backendRefs: [{{ name: beta, port: 80 }}]
    - backendRefs: [{{ name: stable, port: 80, weight: 100 }}, {{ name: beta, port: 80, weight: 0 }}]
"#,
            annotations.join(", ")
        )
    )
}

/// The weights of the split of `/` (the rule without a header condition), and its total.
fn split_weights(g: &Generation) -> (u32, u32, u32) {
    let route = g.table.route("web.test", "/").unwrap();
    let rules = &route.policy.as_ref().unwrap().rules;
    let rule = rules.iter().find(|r| !r.conditions.iter().any(|c| matches!(c, Condition::Header { .. }))).unwrap();
    assert_eq!(rule.backends.len(), 2, "{rule:?}");
    assert_eq!((&*rule.backends[0].backend.name, &*rule.backends[1].backend.name), ("app/stable:80", "app/beta:80"));
    (rule.backends[0].weight, rule.backends[1].weight, rule.total)
}

/// The route's auto-promotion condition on its (one) parent.
fn promotion_condition(report: &Report) -> Option<StatusCondition> {
    let parent = &report.routes[0].parents[0];
    parent.conditions.iter().find(|c| c.type_ == AUTO_PROMOTE_CONDITION).cloned()
}

/// The diagnostics about HTTPRoutes (the base Gateway has listeners of its own to report).
fn route_diagnostics(g: &Generation) -> Vec<&str> {
    g.diagnostics.iter().filter(|d| d.object.kind == HTTP_ROUTE).map(|d| d.message.as_str()).collect()
}

fn state(phase: &str, weight: u32, backend: &str) -> String {
    format!(
        r#"{{"phase":"{phase}","weight":{weight},"step":2,"failures":1,"last":"stepped","at":"2026-12-01T05:00:00Z","backend":"{backend}"}}"#
    )
}

#[test]
fn an_auto_promoting_route_is_planned_and_serves_the_weight_of_its_state() {
    let settings = [
        ("ramjet.dev/canary-auto-promote", "true"),
        ("ramjet.dev/canary-step-weight", "20"),
        ("ramjet.dev/canary-interval", "2s"),
    ];
    // No state yet: the plan, and the backendRefs' weights as written.
    let (g, report, plans) = compile_with_plans(&auto_route(&settings));
    assert!(route_diagnostics(&g).is_empty(), "{:?}", g.diagnostics);
    assert_eq!(
        plans,
        [CanaryPlan {
            kind: CanaryKind::HttpRoute,
            namespace: "app".into(),
            name: "web".into(),
            settings: AutoPromote {
                step_weight: 20,
                interval: std::time::Duration::from_secs(2),
                ..AutoPromote::default()
            },
            total: 100,
            backend: "app/beta:80".into(),
            series: vec![("app/web".into(), "app/beta:80".into())],
        }]
    );
    assert_eq!(split_weights(&g), (100, 0, 100));
    assert_eq!(answer(&g, "web.test", "/", "GET", &[("x-beta", "yes")]), "2", "the header rule is the user's");
    let pending = promotion_condition(&report).unwrap();
    assert_eq!((pending.status, pending.reason), (true, "Pending"), "{pending:?}");
    assert!(report.routes[0].parents[0].conditions.iter().all(|c| c.status), "{report:?}");

    // The state ramjet wrote decides the weight, out of the total; the plan stays the same.
    let progressing = state("Progressing", 30, "app/beta:80");
    let (g, report, again) =
        compile_with_plans(&auto_route(&[settings[0], settings[1], settings[2], (STATE_ANNOTATION, &progressing)]));
    assert_eq!(again, plans);
    assert_eq!(split_weights(&g), (70, 30, 100));
    let c = promotion_condition(&report).unwrap();
    assert_eq!((c.status, c.reason), (true, "Progressing"));
    assert_eq!(c.message, "app/beta:80 at weight 30/100 (step 2, 1 failed checks)");
    // Promoted: every request by weight to the canary; aborted: none.
    let promoted = state("Promoted", 50, "app/beta:80");
    let (g, report, _) = compile_with_plans(&auto_route(&[settings[0], (STATE_ANNOTATION, &promoted)]));
    assert_eq!(split_weights(&g), (0, 100, 100));
    assert_eq!(answer(&g, "web.test", "/", "GET", &[]), "2");
    assert_eq!(promotion_condition(&report).unwrap().reason, "Promoted");
    let aborted = state("Aborted", 0, "app/beta:80");
    let (g, report, _) = compile_with_plans(&auto_route(&[settings[0], (STATE_ANNOTATION, &aborted)]));
    assert_eq!(split_weights(&g), (100, 0, 100));
    assert_eq!(promotion_condition(&report).unwrap().reason, "Aborted");
    // A state about another canary (an older version) is not this one's: the weights as written.
    let other = state("Promoted", 100, "app/alpha:80");
    let (g, report, _) = compile_with_plans(&auto_route(&[settings[0], (STATE_ANNOTATION, &other)]));
    assert_eq!(split_weights(&g), (100, 0, 100));
    assert_eq!(promotion_condition(&report).unwrap().reason, "Pending");
    // Finer steps out of another total, as `canary-weight-total` on a canary Ingress.
    let fine = state("Progressing", 25, "app/beta:80");
    let yaml = auto_route(&[settings[0], ("ramjet.dev/canary-weight-total", "1000"), (STATE_ANNOTATION, &fine)]);
    let (g, _, plans) = compile_with_plans(&yaml);
    assert_eq!(plans[0].total, 1000);
    assert_eq!(split_weights(&g), (975, 25, 1000));
}

#[test]
fn a_route_that_cannot_be_auto_promoted_says_why_and_serves_its_weights() {
    let on = ("ramjet.dev/canary-auto-promote", "true");
    let refused = |yaml: &str, why: &str| {
        let (g, report, plans) = compile_with_plans(yaml);
        assert!(plans.is_empty(), "{plans:?}");
        let c = promotion_condition(&report).expect("a condition");
        assert_eq!((c.status, c.reason), (false, "Invalid"), "{c:?}");
        assert!(c.message.starts_with("not auto-promoted: ") && c.message.contains(why), "{c:?}");
        assert!(
            g.diagnostics
                .iter()
                .any(|d| d.message.contains(why) && d.message.ends_with("the route is not auto-promoted")),
            "{:?}",
            g.diagnostics
        );
        g
    };
    // A setting that cannot be used, as on a canary Ingress.
    let g = refused(&auto_route(&[on, ("ramjet.dev/canary-step-weight", "0")]), "ramjet.dev/canary-step-weight: `0`");
    assert_eq!(split_weights(&g), (100, 0, 100));
    // Three backendRefs: which is the canary is not for ramjet to guess.
    let three = auto_route(&[on]).replace(
        "{ name: beta, port: 80, weight: 0 }]",
        "{ name: beta, port: 80, weight: 0 }, { name: stable, port: 80, weight: 1 }]",
    );
    refused(&three, "spec.rules[1] has 3 backendRefs");
    // No rule with two.
    let single = auto_route(&[on]).replace(", { name: beta, port: 80, weight: 0 }]", "]");
    refused(&single, "no rule that can be served has two backendRefs");
    // The canary of one rule is the primary of another.
    let crossed = format!(
        "{}    - matches: [{{ path: {{ value: /other }} }}]\n      backendRefs: [{{ name: beta, port: 80 }}, {{ name: stable, port: 80 }}]\n",
        auto_route(&[on])
    );
    refused(&crossed, "app/beta:80 is the canary of spec.rules[1] and the primary of spec.rules[2]");
    // An Ingress canary's annotation is reported and ignored; promotion goes on.
    let (g, report, plans) = compile_with_plans(&auto_route(&[on, ("ramjet.dev/canary-weight", "50")]));
    assert_eq!(plans.len(), 1);
    assert!(
        g.diagnostics.iter().any(|d| d.message.starts_with("ramjet.dev/canary-weight is not read on an HTTPRoute")),
        "{:?}",
        g.diagnostics
    );
    assert_eq!(promotion_condition(&report).unwrap().reason, "Pending");
    // Without the annotation (or with "false"), no plan and no condition.
    for annotations in [&[][..], &[("ramjet.dev/canary-auto-promote", "false")][..]] {
        let (g, report, plans) = compile_with_plans(&auto_route(annotations));
        assert!(plans.is_empty() && route_diagnostics(&g).is_empty(), "{plans:?} {:?}", g.diagnostics);
        assert_eq!(promotion_condition(&report), None);
    }
}

/// The canary rule's requests are counted under the table route that serves them: when a longer
/// prefix of another route falls back to the canary rule, that route's series is the canary's too.
#[test]
fn a_canary_rule_is_judged_on_every_table_route_that_serves_it() {
    let yaml = format!(
        "{}{}\n---\n{}",
        auto_route(&[("ramjet.dev/canary-auto-promote", "true")]),
        service("app", "api", 3),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: api, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [web.test]
  rules:
    - matches: [{ path: { value: /api }, method: POST }]
      backendRefs: [{ name: api, port: 80 }]
"#
    );
    let (_, _, plans) = compile_with_plans(&yaml);
    assert_eq!(
        plans[0].series,
        [("app/api".to_string(), "app/beta:80".to_string()), ("app/web".to_string(), "app/beta:80".to_string())]
    );
}

#[test]
fn a_grpcroute_compiles_to_grpc_backends_in_its_specs_precedence_and_reports_its_status() {
    let yaml = format!(
        "{BASE}{}{}{}\n---\n{}",
        service("app", "svc", 1),
        service("app", "unary", 2),
        service("app", "any", 3),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: { name: echo, namespace: app }
spec:
  parentRefs: [{ name: edge, namespace: infra }, { name: theirs, namespace: infra }]
  hostnames: [grpc.test]
  rules:
    - matches: [{ method: { method: Unary } }]
      backendRefs: [{ name: any, port: 80 }]
    - matches: [{ method: { service: demo.Echo } }]
      backendRefs: [{ name: svc, port: 80 }]
    - matches: [{ method: { service: demo.Echo, method: Unary } }, { method: {} }]
      backendRefs: [{ name: unary, port: 80 }]
    - matches: [{ method: { service: demo.Echo } }]
      filters: [{ type: RequestMirror, requestMirror: { backendRef: { name: any, port: 80 } } }]
      backendRefs: [{ name: svc, port: 80 }]
"#
    );
    let (g, report) = compile(&yaml);
    let post = |path: &str| answer(&g, "grpc.test", path, "POST", &[("content-type", "application/grpc")]);
    assert_eq!(post("/demo.Echo/Unary"), "2", "service and method before the service alone");
    assert_eq!(post("/demo.Echo/Stream"), "1");
    assert_eq!(post("/other.Svc/Unary"), "3", "the method of any service");
    assert_eq!(post("/other.Svc/Stream"), "404");
    let route = g.table.route("grpc.test", "/demo.Echo/Unary").unwrap();
    let rule = &route.policy.as_ref().unwrap().rules[0];
    assert_eq!(rule.backends[0].backend.protocol, ramjet_shared::BackendProtocol::Grpc, "gRPC backends");
    assert!(report.routes.is_empty(), "a GRPCRoute is reported as one");
    let parents = &report.grpc_routes[0].parents;
    assert_eq!(parents.len(), 1, "only our Gateway's parentRef gets an entry: {parents:?}");
    let accepted = parents[0].conditions.iter().find(|c| c.type_ == "Accepted").unwrap();
    assert!(accepted.status, "{parents:?}");
    let resolved = parents[0].conditions.iter().find(|c| c.type_ == "ResolvedRefs").unwrap();
    assert_eq!((resolved.status, resolved.reason), (false, "UnsupportedValue"), "the mirror is refused: {resolved:?}");
    let messages: Vec<&str> = g.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("spec.rules[2].matches[1]") && m.contains("needs a service")),
        "{messages:?}"
    );
    assert!(g.diagnostics.iter().all(|d| d.object.kind != "HTTPRoute"), "reported as a GRPCRoute: {:?}", g.diagnostics);
    assert_eq!(report.gateways[0].listeners[0].attached_routes, 1);
    assert!(report.gateways[0].listeners[0].supported_kinds.contains(&"GRPCRoute"));
}

/// A TLS Secret `server` in `infra`, and a ConfigMap `ca` holding a CA certificate.
fn tls_objects() -> String {
    let server = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).unwrap();
    let ca = rcgen::generate_simple_self_signed(vec!["ca.test".to_string()]).unwrap();
    let quoted = |s: &str| serde_json::to_string(s).unwrap();
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: server, namespace: infra }}\ntype: kubernetes.io/tls\n\
         stringData: {{ tls.crt: {}, tls.key: {} }}\n---\napiVersion: v1\nkind: ConfigMap\n\
         metadata: {{ name: ca, namespace: infra }}\ndata: {{ ca.crt: {} }}\n",
        quoted(&server.cert.pem()),
        quoted(&server.signing_key.serialize_pem()),
        quoted(&ca.cert.pem())
    )
}

/// A Gateway `name` with one HTTPS listener for `host` on `port` and this `spec.tls.frontend`.
fn validating_gateway(name: &str, frontend: &str, port: u16, host: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: {name}, namespace: infra }}\n\
         spec:\n  gatewayClassName: ramjet\n  tls: {{ frontend: {frontend} }}\n  listeners:\n    \
         - {{ name: https, port: {port}, protocol: HTTPS, hostname: {host}, tls: {{ certificateRefs: [{{ name: server }}] }} }}\n"
    )
}

#[test]
fn frontend_validation_reports_each_reference_it_cannot_use_on_the_listener() {
    let refs = |r: &str| format!("{{ default: {{ validation: {{ caCertificateRefs: [{r}] }} }} }}");
    let cm = |name: &str, ns: &str| format!("{{ group: \"\", kind: ConfigMap, name: {name}, namespace: {ns} }}");
    let yaml = [
        BASE.to_string(),
        tls_objects(),
        validating_gateway("good", &refs(&cm("ca", "infra")), 443, "good.test"),
        validating_gateway("missing", &refs(&cm("nowhere", "infra")), 443, "missing.test"),
        validating_gateway("kind", &refs("{ group: \"\", kind: Service, name: ca }"), 443, "kind.test"),
        validating_gateway("grant", &refs(&cm("ca", "app")), 443, "grant.test"),
        validating_gateway("partly", &refs(&format!("{}, {}", cm("ca", "infra"), cm("nowhere", "infra"))), 443, "partly.test"),
        // The per-port entry replaces the default for its port only.
        validating_gateway(
            "per-port",
            &format!(
                "{{ default: {{ validation: {{ caCertificateRefs: [{}] }} }}, perPort: [{{ port: 8443, tls: {{ validation: {{ caCertificateRefs: [{}], mode: AllowInsecureFallback }} }} }}] }}",
                cm("nowhere", "infra"),
                cm("ca", "infra")
            ),
            8443,
            "per-port.test",
        ),
    ]
    .concat();
    let (generation, report) = compile(&yaml);
    let listener = |gateway: &str| {
        let g = report.gateways.iter().find(|g| g.name == gateway).unwrap();
        let conditions: BTreeMap<&str, (bool, &str)> =
            g.listeners[0].conditions.iter().map(|c| (c.type_, (c.status, c.reason))).collect();
        (conditions["Accepted"], conditions["ResolvedRefs"], conditions["Programmed"].0)
    };
    assert_eq!(listener("good"), ((true, "Accepted"), (true, "ResolvedRefs"), true));
    assert_eq!(listener("missing"), ((false, "NoValidCACertificate"), (false, "InvalidCACertificateRef"), false));
    assert_eq!(listener("kind"), ((false, "NoValidCACertificate"), (false, "InvalidCACertificateKind"), false));
    assert_eq!(listener("grant"), ((false, "NoValidCACertificate"), (false, "RefNotPermitted"), false));
    assert_eq!(listener("partly"), ((true, "Accepted"), (false, "InvalidCACertificateRef"), true));
    assert_eq!(listener("per-port"), ((true, "Accepted"), (true, "ResolvedRefs"), true));
    let insecure = |gateway: &str| {
        let g = report.gateways.iter().find(|g| g.name == gateway).unwrap();
        g.conditions.iter().find(|c| c.type_ == "InsecureFrontendValidationMode").map(|c| (c.status, c.reason))
    };
    assert_eq!(insecure("per-port"), Some((true, "ConfigurationChanged")));
    assert_eq!(insecure("good"), None);

    // What the handshake of each name gets: the mode, and whether any CA can pass.
    let table = &generation.table;
    let auth = |host: &str| table.client_auth_for(host).map(|a| (a.verify, a.ca.roots.is_empty()));
    assert_eq!(auth("good.test"), Some((VerifyClient::Require, false)));
    assert_eq!(auth("missing.test"), Some((VerifyClient::Require, true)), "no usable CA: nothing passes");
    assert_eq!(auth("per-port.test"), Some((VerifyClient::Fallback, false)));
}

#[test]
fn tcp_listeners_take_ports_of_their_own_and_the_oldest_route_of_a_listener_is_relayed() {
    let yaml = format!(
        "{BASE}{}{}{}",
        service("db", "pg", 5432),
        service("db", "pg-new", 5433),
        r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: data, namespace: db, creationTimestamp: "2026-01-01T00:00:00Z" }
spec:
  gatewayClassName: ramjet
  listeners:
    - { name: pg, port: 15432, protocol: TCP, allowedRoutes: { namespaces: { from: Same } } }
    - { name: on-http-port, port: 80, protocol: TCP }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: late, namespace: db, creationTimestamp: "2026-01-02T00:00:00Z" }
spec:
  gatewayClassName: ramjet
  listeners: [{ name: pg, port: 15432, protocol: TCP }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: { name: old, namespace: db, creationTimestamp: "2026-01-01T00:00:00Z" }
spec:
  parentRefs: [{ name: data, sectionName: pg }]
  rules: [{ backendRefs: [{ name: pg, port: 80 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: { name: new, namespace: db, creationTimestamp: "2026-01-02T00:00:00Z" }
spec:
  parentRefs: [{ name: data, sectionName: pg }, { name: edge, namespace: infra, sectionName: http }]
  rules: [{ backendRefs: [{ name: pg-new, port: 80 }, { name: nowhere, port: 80 }] }]
"#
    );
    let (generation, report) = compile(&yaml);
    let gateway = |name: &str| report.gateways.iter().find(|g| g.name == name).unwrap();
    let condition =
        |l: &ListenerReport, t: &str| l.conditions.iter().find(|c| c.type_ == t).map(|c| (c.status, c.reason));
    let data = gateway("data");
    assert_eq!(condition(&data.listeners[0], "Programmed"), Some((true, "Programmed")));
    assert_eq!(data.listeners[0].supported_kinds, ["TCPRoute"]);
    assert_eq!(data.listeners[0].attached_routes, 2, "both routes are attached, as the spec has it");
    assert_eq!(condition(&data.listeners[1], "Accepted"), Some((false, "PortUnavailable")), "ramjet's own HTTP port");
    // Another Gateway's TCP listener on a port already taken.
    assert_eq!(condition(&gateway("late").listeners[0], "Accepted"), Some((false, "PortUnavailable")));
    assert_eq!(gateway("late").conditions[0].reason, "ListenersNotValid");

    let route = |name: &str| report.tcp_routes.iter().find(|r| r.name == name).unwrap();
    let parents = |r: &RouteReport| {
        r.parents
            .iter()
            .map(|p| p.conditions.iter().map(|c| (c.type_, c.status, c.reason)).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    assert_eq!(parents(route("old")), [[("Accepted", true, "Accepted"), ("ResolvedRefs", true, "ResolvedRefs")]]);
    assert_eq!(
        parents(route("new")),
        [
            vec![("Accepted", true, "Accepted"), ("ResolvedRefs", false, "BackendNotFound")],
            vec![("Accepted", false, "NotAllowedByListeners"), ("ResolvedRefs", false, "BackendNotFound")],
        ]
    );
    // The port relays to the oldest route's backend; no port for the refused listeners.
    let ports: Vec<(Transport, u16)> = generation.table.route_ports().collect();
    assert_eq!(ports, [(Transport::Tcp, 15432)]);
    let relayed = generation.table.port_route(Transport::Tcp, 15432).unwrap();
    assert_eq!((relayed.source.as_ref(), relayed.rule.backends[0].backend.name.as_ref()), ("db/old", "db/pg:80"));
}

#[test]
fn tls_listeners_pass_names_through_or_terminate_them_on_the_https_port_and_their_own() {
    let yaml = format!(
        "{BASE}{}{}",
        service("infra", "api", 8443),
        r#"---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: tls, namespace: infra }
spec:
  gatewayClassName: ramjet
  listeners:
    - { name: pass, port: 443, protocol: TLS, hostname: "*.example.com", tls: { mode: Passthrough } }
    - { name: terminate, port: 443, protocol: TLS, hostname: t.example.net, tls: { mode: Terminate } }
    - { name: own-port, port: 9443, protocol: TLS, tls: { mode: Passthrough } }
    - { name: clash, port: 9443, protocol: TCP }
    - { name: no-cert, port: 9444, protocol: TLS, tls: { mode: Terminate } }
    - { name: named, port: 9445, protocol: TLS, hostname: a.test, tls: { mode: Passthrough } }
    - { name: tcp-after, port: 9445, protocol: TCP }
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: split, namespace: infra }
spec:
  parentRefs: [{ name: tls, sectionName: own-port }]
  rules: [{ backendRefs: [{ name: api, port: 80, weight: 3 }, { name: api, port: 80, weight: 1 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: api, namespace: infra }
spec:
  parentRefs: [{ name: tls, sectionName: pass }]
  hostnames: [abc.example.com, "*.example.com", abc.example.org]
  rules: [{ backendRefs: [{ name: api, port: 80 }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: { name: elsewhere, namespace: infra }
spec:
  parentRefs: [{ name: tls, sectionName: pass }]
  hostnames: [abc.example.org]
  rules: [{ backendRefs: [{ name: api, port: 80 }] }]
"#
    );
    let (generation, report) = compile(&yaml);
    let gateway = report.gateways.iter().find(|g| g.name == "tls").unwrap();
    let condition =
        |l: &ListenerReport, t: &str| l.conditions.iter().find(|c| c.type_ == t).map(|c| (c.status, c.reason));
    assert_eq!(condition(&gateway.listeners[0], "Programmed"), Some((true, "Programmed")));
    assert_eq!(gateway.listeners[0].supported_kinds, ["TLSRoute"]);
    // Terminate on the HTTPS port as on a port of its own: with the listener's certificate.
    assert_eq!(condition(&gateway.listeners[1], "ResolvedRefs"), Some((false, "InvalidCertificateRef")));
    assert_eq!(condition(&gateway.listeners[1], "Programmed"), Some((false, "Invalid")));
    // A port of its own: Passthrough there too, and not shared with a TCP listener.
    assert_eq!(condition(&gateway.listeners[2], "Programmed"), Some((true, "Programmed")));
    assert_eq!(condition(&gateway.listeners[3], "Conflicted"), Some((true, "ProtocolConflict")));
    assert_eq!(condition(&gateway.listeners[3], "Programmed"), Some((false, "Invalid")));
    // Terminate needs the listener's certificate.
    assert_eq!(condition(&gateway.listeners[4], "ResolvedRefs"), Some((false, "InvalidCertificateRef")));
    assert_eq!(condition(&gateway.listeners[4], "Programmed"), Some((false, "Invalid")));
    assert_eq!(condition(&gateway.listeners[6], "Accepted"), Some((false, "ProtocolConflict")));
    let route = |name: &str| report.tls_routes.iter().find(|r| r.name == name).unwrap();
    let first = |r: &RouteReport| (r.parents[0].conditions[0].status, r.parents[0].conditions[0].reason);
    assert_eq!(first(route("api")), (true, "Accepted"));
    assert_eq!(first(route("elsewhere")), (false, "NoMatchingListenerHostname"));
    // The names both have in common, a wildcard at any depth as the Gateway API has it.
    let table = &generation.table;
    let passed = |name: &str| {
        let target = table.passthrough(name)?;
        assert_eq!(target.terminate, None);
        Some(target.route.rule.backends[0].backend.name.to_string())
    };
    assert_eq!(passed("abc.example.com").as_deref(), Some("infra/api:80"));
    assert_eq!(passed("x.y.example.com").as_deref(), Some("infra/api:80"));
    assert_eq!(passed("abc.example.org"), None);
    // The route on the port of its own: any name, split 3:1, passed through.
    let ports: Vec<(Transport, u16)> = table.route_ports().collect();
    assert_eq!(ports, [(Transport::Tls, 9443)]);
    let target = table.tls_port(9443).unwrap().target(Some("anything.test")).unwrap();
    assert_eq!(target.terminate, None);
    let weights: Vec<u32> = target.route.rule.backends.iter().map(|b| b.weight).collect();
    assert_eq!(weights, [3, 1]);
    assert!(table.tls_port(9443).unwrap().target(None).is_some(), "a client without SNI gets the any-name entry");
}
