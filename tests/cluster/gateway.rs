//! Gateway API: the standard-channel CRDs from the Go module sigs.k8s.io/gateway-api, routes served
//! and their status written by the leader, HTTPRoute canaries.

use super::*;

/// The Gateway API release whose standard-channel CRDs the tests install.
const GATEWAY_API: &str = "sigs.k8s.io/gateway-api@v1.6.1";

/// The module's directory in the Go module cache (`go mod download`, through the module proxy).
fn gateway_api_module() -> PathBuf {
    let out = Command::new("go")
        .args(["mod", "download", "-json", GATEWAY_API])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run go mod download");
    assert!(out.status.success(), "go mod download {GATEWAY_API}: {}", String::from_utf8_lossy(&out.stderr));
    let info: Value = serde_json::from_slice(&out.stdout).expect("go mod download -json");
    PathBuf::from(info["Dir"].as_str().expect("Dir"))
}

/// Installs the standard-channel CRDs (once per control plane; applying again changes nothing) and
/// waits until the API server serves them.
fn install_gateway_crds(admin: &Kube) {
    let dir = gateway_api_module().join("config/crd/standard");
    let kinds = ["gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants", "backendtlspolicies"];
    let layer4 = ["tcproutes", "udproutes", "tlsroutes"];
    for kind in kinds.into_iter().chain(layer4) {
        let yaml = std::fs::read_to_string(dir.join(format!("gateway.networking.k8s.io_{kind}.yaml"))).unwrap();
        admin.try_apply_as(&yaml, "test").unwrap_or_else(|e| panic!("installing the {kind} CRD: {e}"));
    }
    let kinds = ["GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant", "BackendTLSPolicy"];
    for kind in kinds.into_iter().chain(["TCPRoute", "UDPRoute", "TLSRoute"]) {
        assert!(eventually(PATIENCE, || admin.try_list(kind, None).is_ok()), "the {kind} CRD is never served");
    }
}

/// The conditions of a status (`conditions` list) as (type, status, reason).
fn conditions_of(status: &Value) -> BTreeSet<(String, String, String)> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (field("type"), field("status"), field("reason"))
        })
        .collect()
}

fn has(status: &Value, type_: &str, value: &str, reason: &str) -> bool {
    conditions_of(status).contains(&(type_.into(), value.into(), reason.into()))
}

/// The chart installed with its GatewayClass (as `helm install` creates it) and the standard
/// CRDs on the shared control plane: the admin's client, the install, the controller name.
fn gateway_install(name: &str) -> (Kube, Install, String) {
    let admin = Kube::new(&ControlPlane::shared().admin_kubeconfig);
    install_gateway_crds(&admin);
    let controller = format!("ramjet.dev/{name}-gateway");
    let values = json!({
        "ingressClass": { "name": name, "controllerValue": format!("ramjet.dev/{name}") },
        "gatewayAPI": { "controllerName": controller, "gatewayClass": { "create": true, "name": name } },
    });
    let mut docs = render(name, &format!("t-{name}"), &values);
    let class = docs.iter().find(|d| d["kind"] == "GatewayClass").expect("the chart renders the GatewayClass").clone();
    admin.apply_value(&class, "helm").unwrap();
    docs.retain(|d| d["kind"] != "GatewayClass");
    (admin, Install::apply(name, docs), controller)
}

#[test]
fn gateway_api_routes_serve_and_their_status_is_written_once_by_the_leader() {
    let name = "gw";
    let (admin, install, controller) = gateway_install(name);
    let ns = install.ns.clone();
    let (stable, beta, shadow) = (Backend::start("stable"), Backend::start("beta"), Backend::start("shadow"));
    install.service("stable", &[&stable]);
    install.service("beta", &[&beta]);
    install.service("shadow", &[&shadow]);
    admin.apply(&format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{ name: edge, namespace: {ns} }}
spec:
  gatewayClassName: {name}
  listeners:
    - {{ name: http, port: 80, protocol: HTTP, hostname: "*.gw.test" }}
    - {{ name: mqtt, port: 9000, protocol: example.com/mqtt }}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{ name: store, namespace: {ns} }}
spec:
  parentRefs: [{{ name: edge, sectionName: http }}, {{ name: elsewhere }}]
  hostnames: [shop.gw.test]
  rules:
    - matches: [{{ path: {{ type: PathPrefix, value: /cart }}, headers: [{{ name: x-beta, value: "yes" }}] }}]
      backendRefs: [{{ name: beta, port: 80 }}]
    - matches: [{{ path: {{ type: PathPrefix, value: / }} }}]
      backendRefs: [{{ name: stable, port: 80, weight: 9 }}, {{ name: beta, port: 80, weight: 1 }}]
      filters:
        - type: RequestMirror
          requestMirror: {{ backendRef: {{ name: shadow, port: 80 }} }}
    - matches: [{{ path: {{ type: PathPrefix, value: /old }} }}]
      filters:
        - type: RequestRedirect
          requestRedirect: {{ statusCode: 301, path: {{ type: ReplacePrefixMatch, replacePrefixMatch: /new }} }}
    - matches: [{{ path: {{ type: PathPrefix, value: /api }} }}]
      filters:
        - type: URLRewrite
          urlRewrite: {{ path: {{ type: ReplacePrefixMatch, replacePrefixMatch: /v2 }} }}
      backendRefs: [{{ name: stable, port: 80 }}]
"#
    ));
    // Another controller's entry for another Gateway, already in the route's status: ramjet must
    // leave it as it is (status.parents is an atomic list).
    let theirs = json!({
        "parentRef": { "group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "elsewhere" },
        "controllerName": "example.com/other",
        "conditions": [{ "type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                         "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z" }],
    });
    admin.apply_status("HTTPRoute", &ns, "store", "other-controller", json!({ "parents": [theirs] })).unwrap();

    let mut ramjet = install.ramjet_with("gw-0", &install.kubeconfig.clone(), &[]);
    ramjet.wait_ready();
    let mut second = install.ramjet_with("gw-1", &install.kubeconfig.clone(), &[]);
    second.wait_ready();
    // Traffic: the header match, the split, the redirect and the rewrite.
    let ask = |raw: &str| {
        let mut conn = support::client::Conn::open(ramjet.http);
        conn.send(raw.as_bytes());
        conn.read_response()
    };
    assert!(
        eventually(PATIENCE, || ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\nX-Beta: yes\r\n\r\n").status == 200),
        "never served; log:\n{}",
        ramjet.log()
    );
    for _ in 0..20 {
        assert_eq!(served_by(&ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\nX-Beta: yes\r\n\r\n")), "beta");
    }
    let to_beta =
        (0..1_000).filter(|_| served_by(&ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n")) == "beta").count();
    // n = 1,000, p = 0.1: mean 100, σ ≈ 9.5. The bounds are the exact binomial quantiles with at
    // most 5·10⁻⁷ of the distribution below 57 and above 149 (it is skewed: ±kσ is not), so a fair
    // split fails here about once in 1.2 million runs, as the other split tests do.
    assert!((57..=149).contains(&to_beta), "{to_beta} of 1,000 at weight 1 of 10");
    assert!(eventually(PATIENCE, || shadow.requests() >= 1_000), "the mirror got {}", shadow.requests());
    let moved = ask("GET /old/page HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n");
    assert_eq!((moved.status, moved.header("location")), (301, Some("http://shop.gw.test/new/page")));
    assert_eq!(ask("GET /api/items HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n").status, 200);
    assert!(
        stable.request_lines().contains(&"GET /v2/items HTTP/1.1".to_string()),
        "the rewrite never reached the backend"
    );

    // Status, on the real API server.
    let route_status = || admin.get("HTTPRoute", Some(&ns), "store").unwrap();
    let ours = |route: &Value| -> Option<Value> {
        route["status"]["parents"].as_array()?.iter().find(|p| p["controllerName"] == controller.as_str()).cloned()
    };
    assert!(
        eventually(PATIENCE, || ours(&route_status()).is_some_and(
            |p| has(&p, "Accepted", "True", "Accepted") && has(&p, "ResolvedRefs", "True", "ResolvedRefs")
        )),
        "route status: {:#}\nlog:\n{}",
        route_status()["status"],
        ramjet.log()
    );
    let route = route_status();
    let parents = route["status"]["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 2, "ours and theirs: {parents:#?}");
    assert!(parents.iter().any(|p| p == &theirs), "the other controller's entry is kept as it was: {parents:#?}");
    let mine = ours(&route).unwrap();
    assert_eq!(mine["parentRef"]["name"], "edge");
    assert_eq!(mine["parentRef"]["sectionName"], "http");
    assert!(mine["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["observedGeneration"] == route["metadata"]["generation"]));
    let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap();
    let status = &gateway["status"];
    assert!(has(status, "Accepted", "True", "ListenersNotValid"), "{status:#}");
    assert!(has(status, "Programmed", "True", "Programmed"), "{status:#}");
    assert_eq!(status["addresses"], json!([{ "type": "IPAddress", "value": LB_IP }]));
    let listener = |n: &str| status["listeners"].as_array().unwrap().iter().find(|l| l["name"] == n).unwrap().clone();
    assert!(has(&listener("http"), "Programmed", "True", "Programmed"));
    assert_eq!(listener("http")["attachedRoutes"], 1);
    assert!(has(&listener("mqtt"), "Accepted", "False", "UnsupportedProtocol"), "{:#}", listener("mqtt"));
    let class_status = admin.get("GatewayClass", None, name).unwrap();
    assert!(has(&class_status["status"], "Accepted", "True", "Accepted"), "{:#}", class_status["status"]);

    // A fixed point: with two replicas running, nothing more is written.
    let versions = || {
        let route = admin.get("HTTPRoute", Some(&ns), "store").unwrap();
        let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap();
        (route["metadata"]["resourceVersion"].clone(), gateway["metadata"]["resourceVersion"].clone())
    };
    let before = versions();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(versions(), before, "status was rewritten with nothing changed");
    let writers: BTreeSet<String> = ControlPlane::shared()
        .audit_entries()
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "httproutes" && e["objectRef"]["subresource"] == "status")
        .filter(|e| e["objectRef"]["namespace"] == ns.as_str() && e["verb"] == "update")
        .filter_map(|e| e["user"]["username"].as_str().map(String::from))
        .collect();
    assert_eq!(writers, [install.user()].into(), "only ramjet's ServiceAccount updates the route's status");

    // A new generation of the route: observedGeneration follows.
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: store, namespace: {ns} }}\n\
         spec:\n  parentRefs: [{{ name: edge, sectionName: http }}]\n  hostnames: [shop.gw.test]\n  \
         rules: [{{ backendRefs: [{{ name: nowhere, port: 80 }}] }}]\n"
    ));
    assert!(
        eventually(PATIENCE, || {
            let route = route_status();
            ours(&route).is_some_and(|p| {
                has(&p, "ResolvedRefs", "False", "BackendNotFound")
                    && p["conditions"][0]["observedGeneration"] == route["metadata"]["generation"]
            })
        }),
        "route status after the change: {:#}",
        route_status()["status"]
    );
    // The status may be the other replica's (the leader's): this one serves the change on its own watch.
    assert!(
        eventually(PATIENCE, || ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n").status == 500),
        "the route without backends never answered 500"
    );

    // A GRPCRoute on the same listener: its status too, with the spec's reasons.
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {{ name: rpc, namespace: {ns} }}\n\
         spec:\n  parentRefs: [{{ name: edge, sectionName: http }}]\n  hostnames: [rpc.gw.test]\n  \
         rules: [{{ matches: [{{ method: {{ service: demo.Echo }} }}], backendRefs: [{{ name: stable, port: 80 }}] }}]\n"
    ));
    let grpc_status = || admin.get("GRPCRoute", Some(&ns), "rpc").unwrap();
    assert!(
        eventually(PATIENCE, || ours(&grpc_status()).is_some_and(|p| has(&p, "Accepted", "True", "Accepted")
            && has(&p, "ResolvedRefs", "True", "ResolvedRefs")
            && p["conditions"][0]["observedGeneration"] == grpc_status()["metadata"]["generation"])),
        "GRPCRoute status: {:#}\nlog:\n{}",
        grpc_status()["status"],
        ramjet.log()
    );
    drop(second);
    admin.delete("GatewayClass", None, name);
}

/// A BackendTLSPolicy on the real API server: the Service behind an HTTPRoute is spoken to over
/// TLS verified by the CA in a ConfigMap, and the policy's `status.ancestors` entry for our
/// Gateway follows what it names (the conformance suite's `BackendTLSPolicy` reconcile case): a
/// ConfigMap that does not exist yet, then created, then emptied. A second policy on the same
/// Service is `Conflicted`.
#[test]
fn gateway_api_backend_tls_policy_status_follows_its_ca_configmap() {
    let name = "gwtls";
    let (admin, install, controller) = gateway_install(name);
    let ns = install.ns.clone();
    let pki = Pki::new("gw-backend-tls");
    pki.leaf("api", &["api.internal"]);
    let api = TlsBackend::serve("api", bind_backend(), &pki, "api", None);
    admin.apply(&Service::new(&ns, "api").target_port(api.addr.port()).service_yaml());
    admin.apply(&endpoint_slice(&ns, "api-1", "api", "http", &[api.addr]));
    let ca = std::fs::read_to_string(pki.path("ca.pem")).unwrap();
    let policy = |configmap: &str, hostname: &str, policy: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{ name: {policy}, namespace: {ns} }}\n\
             spec:\n  targetRefs: [{{ group: \"\", kind: Service, name: api }}]\n  \
             validation: {{ caCertificateRefs: [{{ group: \"\", kind: ConfigMap, name: {configmap} }}], hostname: {hostname} }}\n"
        )
    };
    admin.apply(&format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{ name: edge, namespace: {ns} }}
spec:
  gatewayClassName: {name}
  listeners: [{{ name: http, port: 80, protocol: HTTP }}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{ name: api, namespace: {ns} }}
spec:
  parentRefs: [{{ name: edge }}]
  hostnames: [api.gwtls.test]
  rules: [{{ backendRefs: [{{ name: api, port: 80 }}] }}]
"#
    ));
    admin.apply(&policy("api-ca", "api.internal", "api"));

    let mut ramjet = install.ramjet_with("gwtls-0", &install.kubeconfig.clone(), &[]);
    ramjet.wait_ready();
    let status_of = |policy: &str| -> Option<Value> {
        let object = admin.get("BackendTLSPolicy", Some(&ns), policy)?;
        let ancestors = object["status"]["ancestors"].as_array()?.clone();
        ancestors.into_iter().find(|a| a["controllerName"] == controller.as_str() && a["ancestorRef"]["name"] == "edge")
    };
    let holds = |policy: &str, accepted: (&str, &str), resolved: (&str, &str)| {
        status_of(policy).is_some_and(|s| {
            has(&s, "Accepted", accepted.0, accepted.1) && has(&s, "ResolvedRefs", resolved.0, resolved.1)
        })
    };
    let answer = || get(ramjet.http, "api.gwtls.test", "/x");

    // The ConfigMap does not exist yet: no valid CA, and the requests fail (never in clear).
    assert!(
        eventually(PATIENCE, || holds("api", ("False", "NoValidCACertificate"), ("False", "InvalidCACertificateRef"))),
        "policy status: {:#?}\nlog:\n{}",
        status_of("api"),
        ramjet.log()
    );
    assert_eq!(answer().status, 502);
    assert_eq!(api.connections(), 0, "no connection was made to the backend without its CA");
    let entry = status_of("api").unwrap();
    assert_eq!(
        entry["ancestorRef"],
        json!({ "group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": ns, "name": "edge" })
    );

    // Created: accepted, and the requests go over TLS with the hostname as SNI.
    admin.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: api-ca, namespace: {ns} }}\ndata:\n  ca.crt: {}\n",
        json!(ca)
    ));
    assert!(
        eventually(PATIENCE, || holds("api", ("True", "Accepted"), ("True", "ResolvedRefs"))),
        "policy status: {:#?}",
        status_of("api")
    );
    assert!(eventually(PATIENCE, || answer().status == 200), "{}", answer().body);
    assert_eq!(answer().body, "api sni=api.internal target=/x\n");
    let generation = admin.get("BackendTLSPolicy", Some(&ns), "api").unwrap()["metadata"]["generation"].clone();
    assert!(status_of("api").unwrap()["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["observedGeneration"] == generation));

    // A newer policy on the same Service: Conflicted, on the same Gateway, and not used.
    std::thread::sleep(Duration::from_millis(1_100)); // a later creationTimestamp (whole seconds)
    admin.apply(&policy("api-ca", "other.internal", "api-newer"));
    assert!(
        eventually(PATIENCE, || holds("api-newer", ("False", "Conflicted"), ("True", "ResolvedRefs"))),
        "policy status: {:#?}",
        status_of("api-newer")
    );
    assert_eq!(answer().status, 200);

    // The ConfigMap emptied: the policy has no valid CA again, and its requests fail.
    admin.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: api-ca, namespace: {ns} }}\ndata:\n  ca.crt: \"\"\n"
    ));
    assert!(
        eventually(PATIENCE, || holds("api", ("False", "NoValidCACertificate"), ("False", "InvalidCACertificateRef"))),
        "policy status: {:#?}",
        status_of("api")
    );
    assert!(eventually(PATIENCE, || answer().status == 502));
    admin.delete("GatewayClass", None, name);
}

/// A Gateway's client-certificate validation on the real API server (v1.6.1 CRDs, where
/// `spec.tls.frontend` is standard): a listener whose CA reference cannot be used is refused in
/// its status with the spec's reasons, and a Gateway that allows insecure fallback says so (what
/// the handshakes do is `tests/gateway_client_certs.rs`).
#[test]
fn gateway_api_frontend_validation_status_is_written() {
    let name = "gwmtls";
    let (admin, install, _controller) = gateway_install(name);
    let ns = install.ns.clone();
    let server =
        rcgen::generate_simple_self_signed(vec!["ok.gwmtls.test".into(), "broken.gwmtls.test".into()]).unwrap();
    let ca = rcgen::generate_simple_self_signed(vec!["ca.gwmtls.test".into()]).unwrap();
    admin.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{ name: server, namespace: {ns} }}\ntype: kubernetes.io/tls\n\
         stringData: {{ tls.crt: {}, tls.key: {} }}\n---\napiVersion: v1\nkind: ConfigMap\n\
         metadata: {{ name: client-ca, namespace: {ns} }}\ndata: {{ ca.crt: {} }}\n",
        json!(server.cert.pem()),
        json!(server.signing_key.serialize_pem()),
        json!(ca.cert.pem())
    ));
    let gateway = |gateway: &str, host: &str, frontend: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: {gateway}, namespace: {ns} }}\n\
             spec:\n  gatewayClassName: {name}\n  tls: {{ frontend: {frontend} }}\n  listeners:\n    \
             - {{ name: https, port: 443, protocol: HTTPS, hostname: {host}, tls: {{ certificateRefs: [{{ name: server }}] }} }}\n"
        )
    };
    let validation = |map: &str, mode: &str| {
        format!("{{ default: {{ validation: {{ caCertificateRefs: [{{ group: \"\", kind: ConfigMap, name: {map} }}], mode: {mode} }} }} }}")
    };
    admin.apply(&gateway("ok", "ok.gwmtls.test", &validation("client-ca", "AllowInsecureFallback")));
    admin.apply(&gateway("broken", "broken.gwmtls.test", &validation("nowhere", "AllowValidOnly")));
    let mut ramjet = install.ramjet_with("gwmtls-0", &install.kubeconfig.clone(), &[]);
    ramjet.wait_ready();
    let status =
        |gateway: &str| admin.get("Gateway", Some(&ns), gateway).map(|g| g["status"].clone()).unwrap_or_default();
    let listener = |gateway: &str| status(gateway)["listeners"][0].clone();
    assert!(
        eventually(PATIENCE, || has(&listener("broken"), "Accepted", "False", "NoValidCACertificate")
            && has(&listener("broken"), "ResolvedRefs", "False", "InvalidCACertificateRef")
            && has(&listener("broken"), "Programmed", "False", "Invalid")),
        "broken: {:#}\nlog:\n{}",
        status("broken"),
        ramjet.log()
    );
    assert!(
        eventually(PATIENCE, || has(&status("ok"), "InsecureFrontendValidationMode", "True", "ConfigurationChanged")
            && has(&listener("ok"), "Programmed", "True", "Programmed")),
        "ok: {:#}",
        status("ok")
    );
    assert!(!conditions_of(&status("broken")).iter().any(|c| c.0 == "InsecureFrontendValidationMode"));
    admin.delete("GatewayClass", None, name);
}

/// TCPRoutes, UDPRoutes and TLSRoutes from the real API server (the v1.6.1 CRDs serve them in v1):
/// watched, served (a TCP connection to the listener's port reaches the backend), and their
/// `status.parents` and the listeners' `attachedRoutes` written.
#[test]
fn gateway_api_tcp_udp_and_tls_routes_are_served_and_their_status_written() {
    let name = "gwl4";
    let (admin, install, controller) = gateway_install(name);
    let ns = install.ns.clone();
    let listener = bind_backend();
    let backend = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(b"l4\n");
        }
    });
    admin.apply(&Service::new(&ns, "db").port("db", 5432).target_port(backend.port()).service_yaml());
    admin.apply(&endpoint_slice(&ns, "db-1", "db", "db", &[backend]));
    let port = free_port();
    let route = |kind: &str, section: &str, hostnames: &str| {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata: {{ name: db, namespace: {ns} }}\n\
             spec:\n  parentRefs: [{{ name: edge, sectionName: {section} }}]\n{hostnames}  \
             rules: [{{ backendRefs: [{{ name: db, port: 5432 }}] }}]\n"
        )
    };
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: {ns} }}\n\
         spec:\n  gatewayClassName: {name}\n  listeners:\n\
         \x20   - {{ name: tcp, port: {port}, protocol: TCP }}\n\
         \x20   - {{ name: udp, port: {port}, protocol: UDP }}\n\
         \x20   - {{ name: tls, port: 443, protocol: TLS, hostname: \"*.gwl4.test\", tls: {{ mode: Passthrough }} }}\n{}{}{}",
        route("TCPRoute", "tcp", ""),
        route("UDPRoute", "udp", ""),
        route("TLSRoute", "tls", "  hostnames: [db.gwl4.test]\n"),
    ));
    let mut ramjet = install.ramjet_with("gwl4-0", &install.kubeconfig.clone(), &[]);
    ramjet.wait_ready();
    let accepted = |kind: &str| {
        let route = admin.get(kind, Some(&ns), "db").unwrap_or_default();
        let parents = route["status"]["parents"].as_array().cloned().unwrap_or_default();
        parents.iter().any(|p| {
            p["controllerName"] == controller.as_str()
                && has(p, "Accepted", "True", "Accepted")
                && has(p, "ResolvedRefs", "True", "ResolvedRefs")
                && p["conditions"][0]["observedGeneration"] == route["metadata"]["generation"]
        })
    };
    for kind in ["TCPRoute", "UDPRoute", "TLSRoute"] {
        assert!(
            eventually(PATIENCE, || accepted(kind)),
            "{kind} status: {:#}\nlog:\n{}",
            admin.get(kind, Some(&ns), "db").unwrap_or_default()["status"],
            ramjet.log()
        );
    }
    let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap();
    for listener in gateway["status"]["listeners"].as_array().unwrap() {
        assert_eq!(listener["attachedRoutes"], 1, "{listener:#}");
        assert!(has(listener, "Programmed", "True", "Programmed"), "{listener:#}");
    }
    // The TCP route, from the cluster, relays to its backend.
    let greeting = |port: u16| -> Option<String> {
        let mut stream = TcpStream::connect((ramjet.http.ip(), port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut line = [0u8; 3];
        stream.read_exact(&mut line).ok()?;
        Some(String::from_utf8_lossy(&line).to_string())
    };
    assert!(eventually(PATIENCE, || greeting(port).as_deref() == Some("l4\n")), "log:\n{}", ramjet.log());

    // A listener on a port another process holds: refused in status, saying why, until it is free.
    let blocked = free_port();
    let holder = std::net::TcpListener::bind((ramjet.http.ip(), blocked)).unwrap();
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: {ns} }}\n\
         spec:\n  gatewayClassName: {name}\n  listeners:\n\
         \x20   - {{ name: tcp, port: {port}, protocol: TCP }}\n\
         \x20   - {{ name: udp, port: {port}, protocol: UDP }}\n\
         \x20   - {{ name: tls, port: 443, protocol: TLS, hostname: \"*.gwl4.test\", tls: {{ mode: Passthrough }} }}\n\
         \x20   - {{ name: blocked, port: {blocked}, protocol: TCP }}\n{}",
        route("TCPRoute", "blocked", "").replacen("name: db,", "name: db-blocked,", 1),
    ));
    let listener_status = |wanted: &dyn Fn(&Value) -> bool| {
        let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap_or_default();
        let listeners = gateway["status"]["listeners"].as_array().cloned().unwrap_or_default();
        listeners.iter().any(|l| l["name"] == "blocked" && wanted(l))
    };
    let refused = |l: &Value| {
        has(l, "Accepted", "False", "PortUnavailable")
            && l["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["message"].as_str().unwrap().contains(&blocked.to_string()))
    };
    assert!(
        eventually(PATIENCE, || listener_status(&refused)),
        "{:#}\nlog:\n{}",
        admin.get("Gateway", Some(&ns), "edge").unwrap_or_default()["status"],
        ramjet.log()
    );
    assert_eq!(greeting(port).as_deref(), Some("l4\n"), "the other ports are served meanwhile");
    drop(holder);
    assert!(eventually(PATIENCE, || listener_status(&|l| has(l, "Programmed", "True", "Programmed"))));
    assert!(eventually(PATIENCE, || greeting(blocked).as_deref() == Some("l4\n")), "log:\n{}", ramjet.log());
    admin.delete("GatewayClass", None, name);
}

/// How long after the CRDs are served an HTTPRoute may take to reach traffic when ramjet started
/// without them: its re-check of discovery comes every 10 s (`control/src/cluster/watch/gateway.rs`),
/// and 30 s more covers the first lists, the compile and the publish on a loaded 2-core machine.
const PICK_UP: Duration = Duration::from_secs(40);

#[test]
fn gateway_api_crds_installed_after_start_are_picked_up_without_a_restart() {
    // An API server of its own: the shared one may already serve the CRDs (other tests install them).
    let plane = ControlPlane::start("gw-late");
    let name = "gw-late";
    let controller = format!("ramjet.dev/{name}-gateway");
    let values = json!({
        "ingressClass": { "name": name, "controllerValue": format!("ramjet.dev/{name}") },
        "gatewayAPI": { "controllerName": controller },
    });
    let install = Install::apply_on(&plane, name, render(name, &format!("t-{name}"), &values));
    let (ns, admin) = (install.ns.clone(), &install.admin);
    let web = Backend::start("web");
    install.service("web", &[&web]);
    install.ingress("web", "web.gw-late.test", "web");

    // No Gateway API at start: one warning, and Ingresses are served as usual.
    let mut ramjet = install.ramjet("gw-late-0");
    ramjet.wait_ready();
    ramjet.wait_served("web.gw-late.test", "web");
    let log = ramjet.full_log();
    assert!(log.contains("gateway.networking.k8s.io/v1) is not served"), "no warning at start:\n{log}");
    assert!(!log.contains("until ramjet restarts"), "the warning still asks for a restart:\n{log}");
    assert!(!log.contains("Gateway API CRDs found"), "picked up with no CRDs:\n{log}");
    // Past the first re-check (2 s after start): the pick-up comes from the periodic one.
    std::thread::sleep(Duration::from_secs(3));

    let installed_since = Instant::now();
    install_gateway_crds(admin);
    let served_since = Instant::now();
    let crds_served = installed_since.elapsed();
    admin.apply(&format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{ name: {name} }}
spec: {{ controllerName: {controller} }}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{ name: edge, namespace: {ns} }}
spec:
  gatewayClassName: {name}
  listeners: [{{ name: http, port: 80, protocol: HTTP, hostname: "*.gw-late.test" }}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{ name: store, namespace: {ns} }}
spec:
  parentRefs: [{{ name: edge, sectionName: http }}]
  hostnames: [shop.gw-late.test]
  rules: [{{ backendRefs: [{{ name: web, port: 80 }}] }}]
"#
    ));
    // Served through ramjet's real HTTP port, with no restart.
    assert!(
        eventually(PICK_UP, || ramjet.served("shop.gw-late.test") == "web"),
        "the HTTPRoute was not served within {PICK_UP:?} of the CRDs being served (now: {}); log:\n{}",
        ramjet.served("shop.gw-late.test"),
        ramjet.log()
    );
    let picked_up = (served_since.elapsed(), installed_since.elapsed());
    ramjet.assert_running();

    // And its status is written, by the status writer that had nothing to watch at start.
    let ours = || -> Option<Value> {
        let route = admin.get("HTTPRoute", Some(&ns), "store")?;
        route["status"]["parents"].as_array()?.iter().find(|p| p["controllerName"] == controller.as_str()).cloned()
    };
    assert!(
        eventually(PATIENCE, || ours().is_some_and(
            |p| has(&p, "Accepted", "True", "Accepted") && has(&p, "ResolvedRefs", "True", "ResolvedRefs")
        )),
        "route status: {:?}\nlog:\n{}",
        ours(),
        ramjet.log()
    );
    let status_written = served_since.elapsed();
    let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap();
    assert!(has(&gateway["status"], "Programmed", "True", "Programmed"), "{:#}", gateway["status"]);
    let class = admin.get("GatewayClass", None, name).unwrap();
    assert!(has(&class["status"], "Accepted", "True", "Accepted"), "{:#}", class["status"]);

    let found = ramjet.full_log().matches("Gateway API CRDs found: watching Gateways and HTTPRoutes").count();
    assert_eq!(found, 1, "the pick-up is logged once; log:\n{}", ramjet.log());
    assert_eq!(ramjet.served("web.gw-late.test"), "web", "the Ingress is still served");
    eprintln!(
        "Gateway API CRDs installed after start: served by the API server {crds_served:.1?} after they were \
         applied; the HTTPRoute served {:.1?} after that ({:.1?} after the CRDs were applied), its status \
         written {status_written:.1?} after",
        picked_up.0, picked_up.1
    );
}

/// Two auto-promoting HTTPRoutes on one Gateway, through the real API server with the chart's
/// RBAC: `shop` (its canary `beta` healthy) steps 25 → 50 → 75 and is promoted, every request then
/// going to `beta`; `cart` (its canary answering 500) fails its checks and is aborted, every
/// request going back to the primary. The state is `ramjet.dev/canary-state` on each HTTPRoute,
/// written by server-side apply (ramjet owns that annotation alone, the user's re-apply leaves it),
/// and read back by the compile that serves the weight. The decisions are Events regarding the
/// HTTPRoutes and audit records, and the route's status says where promotion stands. Once both
/// are done, nothing more is written.
#[test]
fn gateway_api_httproute_canaries_promote_or_abort_themselves() {
    let name = "gw-canary";
    let plane = ControlPlane::shared();
    let (admin, install, controller) = gateway_install(name);
    let ns = install.ns.clone();
    let (stable, beta, broken) = (Backend::start("stable"), Backend::start("beta"), Backend::answering("broken", 500));
    install.service("stable", &[&stable]);
    install.service("beta", &[&beta]);
    install.service("broken", &[&broken]);
    let route_yaml = |route: &str, canary: &str, settings: &[(&str, &str)]| {
        let mut annotations = vec!["team: shop".to_string(), "ramjet.dev/canary-auto-promote: \"true\"".to_string()];
        annotations.extend(settings.iter().map(|(k, v)| format!("ramjet.dev/canary-{k}: \"{v}\"")));
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {route}\n  namespace: {ns}\n  \
             annotations: {{ {} }}\nspec:\n  parentRefs: [{{ name: edge, sectionName: http }}]\n  \
             hostnames: [{route}.{name}.test]\n  rules:\n    - backendRefs: [{{ name: stable, port: 80, weight: 100 }}, \
             {{ name: {canary}, port: 80, weight: 0 }}]\n",
            annotations.join(", ")
        )
    };
    let shop_settings =
        [("step-weight", "25"), ("max-weight", "75"), ("interval", "2s"), ("min-requests", "5"), ("max-p99", "5s")];
    let shop = route_yaml("shop", "beta", &shop_settings);
    let cart_settings = [("step-weight", "50"), ("interval", "1s"), ("min-requests", "3"), ("failure-threshold", "2")];
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: {ns} }}\n\
         spec:\n  gatewayClassName: {name}\n  listeners: [{{ name: http, port: 80, protocol: HTTP, hostname: \
         \"*.{name}.test\" }}]\n---\n{shop}---\n{}",
        route_yaml("cart", "broken", &cart_settings)
    ));
    let webhook = Webhook::start();
    let extra = [format!("--audit-webhook={}", webhook.url), "--access-log-errors-only".to_string()];
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut ramjet = install.ramjet_with(name, &install.kubeconfig, &extra);
    ramjet.wait_ready();
    let (shop_host, cart_host) = (format!("shop.{name}.test"), format!("cart.{name}.test"));
    ramjet.wait_served(&shop_host, "stable");

    // Requests to both hosts until dropped, one connection each; what answered, by host.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let traffic = {
        let (stop, seen, addr) = (stop.clone(), seen.clone(), ramjet.http);
        let hosts = [shop_host.clone(), cart_host.clone()];
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for host in &hosts {
                    let answer = match http(addr, host, "/") {
                        Some((status, body)) => format!("{status} {}", body.trim()),
                        None => "down".to_string(),
                    };
                    seen.lock().unwrap().push((host.clone(), answer));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    // Waits until the last 20 answers for `host` since the call are all `want`.
    let all_answers = |host: &str, want: &str| {
        seen.lock().unwrap().clear();
        let mut last = Vec::new();
        let ok = eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(300));
            last = seen.lock().unwrap().drain(..).filter(|(h, _)| h == host).map(|(_, a)| a).collect();
            last.len() >= 20 && last.iter().all(|a| a == want)
        });
        assert!(ok, "{host}: never all `{want}`; the last answers: {last:?}");
    };
    let state = |route: &str| -> Option<Value> {
        let object = admin.get("HTTPRoute", Some(&ns), route)?;
        serde_json::from_str(object["metadata"]["annotations"]["ramjet.dev/canary-state"].as_str()?).ok()
    };

    // shop: from the start weight to promoted, one step per window.
    let mut weights = Vec::new();
    let mut reapplied = false;
    let promoted = eventually(PATIENCE, || {
        std::thread::sleep(Duration::from_millis(100));
        let now = state("shop");
        let w = now.as_ref().and_then(|s| s["weight"].as_u64());
        if w.is_some() && weights.last() != Some(&w) {
            weights.push(w);
        }
        if w.is_some() && !reapplied {
            // The user re-applies their route (their field manager, without ramjet's annotation).
            admin.apply(&shop);
            reapplied = true;
        }
        now.is_some_and(|s| s["phase"] == "Promoted")
    });
    assert!(promoted, "shop never promoted: {weights:?} {:?}; log:\n{}", state("shop"), ramjet.log());
    assert_eq!(weights, [Some(25), Some(50), Some(75), Some(100)], "the weights written, in order");
    all_answers(&shop_host, "200 backend=beta");
    let route = admin.get("HTTPRoute", Some(&ns), "shop").unwrap();
    assert_eq!(route["metadata"]["annotations"]["team"], "shop", "{route:#}");
    assert_eq!(route["spec"]["rules"][0]["backendRefs"][1]["weight"], 0, "the user's weights are theirs: {route:#}");
    let owned = annotations_owned_by_ramjet(&route);
    assert_eq!(owned, ["f:ramjet.dev/canary-state"], "ramjet owns exactly its annotation: {route:#}");
    assert_eq!(install.events("CanaryStarted", "shop").len(), 1, "{:#?}", install.events("CanaryStarted", "shop"));
    let stepped = install.events("CanaryStepped", "shop");
    assert_eq!(stepped.len(), 2, "{stepped:#?}");
    assert_eq!(stepped[0]["regarding"]["kind"], "HTTPRoute");
    assert_eq!(stepped[0]["regarding"]["apiVersion"], "gateway.networking.k8s.io/v1");
    assert!(stepped[0]["note"].as_str().unwrap().contains("requests, success rate 100.00%, p99"), "{stepped:#?}");
    let promoted = install.events("CanaryPromoted", "shop");
    assert_eq!(promoted.len(), 1, "{promoted:#?}");
    assert!(promoted[0]["note"].as_str().unwrap().contains("Make the canary the only backendRef"), "{promoted:#?}");

    // cart: its canary fails the checks and is aborted to weight 0.
    assert!(
        eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(100));
            state("cart").is_some_and(|s| s["phase"] == "Aborted")
        }),
        "cart never aborted: {:?}; log:\n{}",
        state("cart"),
        ramjet.log()
    );
    assert_eq!(state("cart").unwrap()["weight"], 0);
    assert_eq!(state("cart").unwrap()["backend"], format!("{ns}/broken:80"));
    let failed = install.events("CanaryCheckFailed", "cart");
    assert_eq!((failed.len(), &failed[0]["type"]), (1, &json!("Warning")), "{failed:#?}");
    assert!(failed[0]["note"].as_str().unwrap().contains("success rate 0.00% is below 99%"), "{failed:#?}");
    let aborted = install.events("CanaryAborted", "cart");
    assert_eq!(aborted.len(), 1, "{aborted:#?}");
    assert!(aborted[0]["note"].as_str().unwrap().contains("aborted to weight 0 after 2 failed checks"));
    all_answers(&cart_host, "200 backend=stable");

    // Status says where each stands.
    let condition = |route: &str| -> Option<(String, String)> {
        let object = admin.get("HTTPRoute", Some(&ns), route)?;
        let parents = object["status"]["parents"].as_array()?.clone();
        let ours = parents.iter().find(|p| p["controllerName"] == controller.as_str())?;
        let c = ours["conditions"].as_array()?.iter().find(|c| c["type"] == "ramjet.dev/CanaryAutoPromote")?.clone();
        Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
    };
    let want = |status: &str, reason: &str| Some((status.to_string(), reason.to_string()));
    assert!(
        eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(100));
            condition("shop") == want("True", "Promoted") && condition("cart") == want("True", "Aborted")
        }),
        "status: {:?} {:?}",
        condition("shop"),
        condition("cart")
    );

    // The same decisions went down the audit webhook, naming each route.
    let records: Vec<(String, String)> = webhook
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b["event"] == "canary")
        .map(|b| (b["ingress"].as_str().unwrap().to_string(), b["reason"].as_str().unwrap().to_string()))
        .collect();
    for (route, reason) in [
        ("shop", "CanaryStarted"),
        ("shop", "CanaryStepped"),
        ("shop", "CanaryPromoted"),
        ("cart", "CanaryCheckFailed"),
        ("cart", "CanaryAborted"),
    ] {
        assert!(records.contains(&(format!("{ns}/{route}"), reason.to_string())), "{route} {reason}: {records:?}");
    }

    // Done: with traffic still flowing, ramjet writes the routes no more.
    let since = audit_len(plane);
    std::thread::sleep(Duration::from_secs(3));
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w.contains("httproutes")).collect();
    assert!(writes.is_empty(), "{writes:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    traffic.join().unwrap();
    ramjet.assert_running();
    admin.delete("GatewayClass", None, name);
}

/// A rollback pin pauses an HTTPRoute's promotion as it does an Ingress's: one CanaryPaused Event
/// about the route, no step and no write while it holds; after the release it goes on.
#[test]
fn gateway_api_a_pin_pauses_httproute_promotion() {
    let name = "gw-pause";
    let plane = ControlPlane::shared();
    let (admin, install, _) = gateway_install(name);
    let ns = install.ns.clone();
    let (stable, beta) = (Backend::start("stable"), Backend::start("beta"));
    install.service("stable", &[&stable]);
    install.service("beta", &[&beta]);
    let settings =
        [("step-weight", "10"), ("max-weight", "90"), ("interval", "1s"), ("min-requests", "1"), ("max-p99", "5s")];
    let annotations: Vec<String> = std::iter::once("ramjet.dev/canary-auto-promote: \"true\"".to_string())
        .chain(settings.iter().map(|(k, v)| format!("ramjet.dev/canary-{k}: \"{v}\"")))
        .collect();
    let host = format!("shop.{name}.test");
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: {ns} }}\n\
         spec:\n  gatewayClassName: {name}\n  listeners: [{{ name: http, port: 80, protocol: HTTP }}]\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: shop\n  namespace: {ns}\n  \
         annotations: {{ {} }}\nspec:\n  parentRefs: [{{ name: edge }}]\n  hostnames: [{host}]\n  rules:\n    - \
         backendRefs: [{{ name: stable, port: 80, weight: 100 }}, {{ name: beta, port: 80, weight: 0 }}]\n",
        annotations.join(", ")
    ));
    let mut ramjet = install.ramjet(name);
    ramjet.wait_ready();
    ramjet.wait_served(&host, "stable");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let traffic = {
        let (stop, addr, host) = (stop.clone(), ramjet.http, host.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = http(addr, &host, "/");
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let state = || -> Option<Value> {
        let route = admin.get("HTTPRoute", Some(&ns), "shop")?;
        serde_json::from_str(route["metadata"]["annotations"]["ramjet.dev/canary-state"].as_str()?).ok()
    };
    let weight = || state().and_then(|s| s["weight"].as_u64());
    assert!(eventually(PATIENCE, || weight() >= Some(20)), "never stepped: {:?}; log:\n{}", state(), ramjet.log());
    let serving = ramjet.generations()["serving"].as_u64().unwrap();
    let (status, body) =
        ramjet.admin_request("POST", "/admin/rollback", &format!("{{\"generation\": {serving}}}")).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(PATIENCE, || install.events("CanaryPaused", "shop").len() == 1),
        "no CanaryPaused about the route"
    );
    let held = state();
    let since = audit_len(plane);
    // Several intervals with traffic flowing: nothing moves, nothing is written.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(state(), held, "the state moved under a pin");
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w.starts_with("patch httproutes")).collect();
    assert!(writes.is_empty(), "ramjet wrote the route while pinned: {writes:?}");
    assert_eq!(install.events("CanaryPaused", "shop").len(), 1);
    let (status, body) = ramjet.admin_request("DELETE", "/admin/rollback", "").unwrap();
    assert_eq!(status, 200, "{body}");
    let before = held.as_ref().and_then(|s| s["weight"].as_u64());
    assert!(eventually(PATIENCE, || weight() > before), "never went on after the release");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    traffic.join().unwrap();
    ramjet.assert_running();
    admin.delete("GatewayClass", None, name);
}
