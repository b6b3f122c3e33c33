//! Moving over from ingress-nginx through the real API server: its IngressClass taken over, its
//! annotations reported, TLS to backends and basic auth from Secrets as its annotations ask.

use super::*;

/// Moving over from ingress-nginx without touching an Ingress: ramjet installed by its chart to take
/// over ingress-nginx's IngressClass (`ingressClass.create: false`, its name, controller
/// `k8s.io/ingress-nginx`). `ramjet migration-report` first says what will differ; then the daemon
/// serves the class's Ingresses, refuses the snippet with a warning Event, and keeps an Ingress whose
/// authentication it cannot enforce out of the table, with an Event saying why.
#[test]
fn takes_over_ingress_nginx_and_reports_its_annotations() {
    let name = "takeover";
    let ns = format!("t-{name}");
    let plane = ControlPlane::shared();
    let admin = Kube::new(&plane.admin_kubeconfig);
    // ingress-nginx's IngressClass, as its own chart made it.
    admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{ name: {name} }}\n\
         spec: {{ controller: k8s.io/ingress-nginx }}\n"
    ));
    let values =
        json!({ "ingressClass": { "create": false, "name": name, "controllerValue": "k8s.io/ingress-nginx" } });
    let install = Install::apply(name, render(name, &ns, &values));
    let a = Backend::start("a");
    install.service("web", &[&a]);
    let annotated = |ingress: &str, host: &str, annotations: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\n\
             metadata: {{ name: {ingress}, namespace: {ns}, annotations: {{ {annotations} }} }}\n\
             spec:\n  ingressClassName: {name}\n  rules: [{{ host: {host}, http: {{ paths: [{{ path: /, pathType: Prefix, \
             backend: {{ service: {{ name: web, port: {{ name: http }} }} }} }}] }} }}]\n"
        )
    };
    admin.apply(&annotated("plain", "plain.test", "nginx.ingress.kubernetes.io/proxy-buffering: \"off\""));
    admin.apply(&annotated(
        "snippet",
        "snippet.test",
        "nginx.ingress.kubernetes.io/configuration-snippet: \"more_set_headers 'X-A: b';\", \
         nginx.ingress.kubernetes.io/limit-rate: \"1024\"",
    ));
    admin.apply(&annotated("private", "private.test", "nginx.ingress.kubernetes.io/auth-type: digest"));

    // Before switching: the report, from the API server.
    let report = |format: &str| {
        let kubeconfig = plane.admin_kubeconfig.display().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_ramjet"))
            .args(["migration-report", "--kubeconfig", &kubeconfig, "-n", &ns, "--format", format])
            .output()
            .expect("run ramjet migration-report");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, text, stderr) = report("text");
    assert_eq!(code, Some(1), "a report with refusals is not clean:\n{text}{stderr}");
    for line in [
        format!("Ingress {ns}/plain (class {name})"),
        "honoured         nginx.ingress.kubernetes.io/proxy-buffering=\"off\"".to_string(),
        "refused          nginx.ingress.kubernetes.io/configuration-snippet=".to_string(),
        "its directives (more_set_headers) are not applied".to_string(),
        "ignored          nginx.ingress.kubernetes.io/limit-rate=\"1024\": response bandwidth is not limited"
            .to_string(),
        "refused-to-serve nginx.ingress.kubernetes.io/auth-type=".to_string(),
        "3 Ingresses, 4 findings: 1 honoured, 1 refused, 1 ignored, 1 refused-to-serve".to_string(),
    ] {
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
    let (code, json, _) = report("json");
    assert_eq!(code, Some(1));
    let json: Value = serde_json::from_str(&json).expect("JSON report");
    assert_eq!(json["totals"], json!({ "honoured": 1, "refused": 1, "ignored": 1, "refused-to-serve": 1 }), "{json:#}");
    // Each Ingress compiled with its Service from the API server: what the switch below shows.
    let outcomes: Vec<(String, String)> = json["ingresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].as_str().unwrap().to_string(), i["outcome"].as_str().unwrap().to_string()))
        .collect();
    let want = [("plain", "served"), ("private", "not-served"), ("snippet", "partly")];
    assert_eq!(outcomes, want.map(|(a, b)| (a.to_string(), b.to_string())), "{json:#}");

    // The switch: the class's Ingresses are served; the one with authentication is not.
    let mut ramjet = install.ramjet(name);
    ramjet.wait_ready();
    ramjet.wait_served("plain.test", "a");
    ramjet.wait_served("snippet.test", "a");
    assert_eq!(ramjet.served("private.test"), "404", "an Ingress asking for authentication is never served open");
    let note_of = |reason: &str, ingress: &str| {
        install.events(reason, ingress).first().and_then(|e| e["note"].as_str().map(String::from))
    };
    assert!(
        eventually(PATIENCE, || note_of("ConfigIgnored", "snippet")
            .is_some_and(|n| n.contains("configuration-snippet is refused"))),
        "no warning Event for the snippet: {:#?}\nlog:\n{}",
        install.events("ConfigIgnored", "snippet"),
        ramjet.log()
    );
    assert!(
        eventually(PATIENCE, || note_of("CompileFailed", "private").is_some_and(|n| n.contains("auth-type"))),
        "no Event for the Ingress left out: {:#?}",
        install.events("CompileFailed", "private")
    );
    admin.delete("IngressClass", None, name);
}

// ---------------------------------------------------------------------------------------------
// TLS to backends, as ingress-nginx's annotations ask.
// ---------------------------------------------------------------------------------------------

/// `ramjet_upstream_errors_total{kind="tls"}` on the admin listener's /metrics.
fn tls_upstream_errors(ramjet: &Ramjet) -> u64 {
    let (_, text) = http(ramjet.admin, "localhost", "/metrics").expect("admin listener");
    text.lines()
        .find_map(|l| l.strip_prefix("ramjet_upstream_errors_total{kind=\"tls\"} "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no TLS upstream error count in /metrics:\n{text}")) as u64
}

/// An Ingress with ingress-nginx's `backend-protocol: HTTPS` and `proxy-ssl-secret` /
/// `proxy-ssl-verify` / `proxy-ssl-name`, its `kubernetes.io/tls` Secret written through the real
/// API server: the backend's certificate is verified against the Secret's `ca.crt` under the
/// configured name, and the Secret's certificate is presented to the backend (which asks for one).
/// With another CA in the Secret that route answers 502 (a failed handshake) while a plain Ingress
/// beside it keeps serving; with the CA restored it answers 200 again.
#[test]
fn ingress_nginx_backend_tls_annotations_verify_the_backend_through_the_real_api_server() {
    ramjet::install_crypto();
    let pki = Pki::new("cluster-backend-tls");
    pki.leaf("backend", &["orders.internal"]);
    pki.leaf("client", &["ramjet.client"]);
    let other = Pki::new("cluster-backend-tls-other");
    // In the backends' network namespace, wanting a client certificate from the same CA.
    let orders = TlsBackend::serve("orders", bind_backend(), &pki, "backend", Some(pki.ca.clone()));
    let plain = Backend::start("plain");
    let install = Install::new("backend-tls");
    let ns = install.ns.clone();
    let read = |p: &Pki, f: &str| base64(&std::fs::read(p.path(f)).unwrap());
    // tls.crt / tls.key: ramjet's client certificate; ca.crt: the CA the backend's must chain to.
    let secret = |ca: &Pki| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{ name: orders-upstream, namespace: {ns} }}\n\
             type: kubernetes.io/tls\ndata: {{ tls.crt: {}, tls.key: {}, ca.crt: {} }}\n",
            read(&pki, "client.crt"),
            read(&pki, "client.key"),
            read(ca, "ca.pem")
        )
    };
    install.admin.apply(&secret(&pki));
    install.admin.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{ name: orders, namespace: {ns} }}\n\
         spec: {{ ports: [{{ name: https, port: 443, targetPort: 8443 }}] }}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{ name: orders-1, namespace: {ns}, labels: {{ kubernetes.io/service-name: orders }} }}\n\
         addressType: IPv4\nports: [{{ name: https, port: {port}, protocol: TCP }}]\n\
         endpoints: [{{ addresses: [\"{ip}\"], conditions: {{ ready: true }} }}]\n---\n\
         apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: orders\n  namespace: {ns}\n  \
         annotations:\n    nginx.ingress.kubernetes.io/backend-protocol: HTTPS\n    \
         nginx.ingress.kubernetes.io/proxy-ssl-secret: {ns}/orders-upstream\n    \
         nginx.ingress.kubernetes.io/proxy-ssl-verify: \"on\"\n    \
         nginx.ingress.kubernetes.io/proxy-ssl-name: orders.internal\n\
         spec:\n  ingressClassName: {class}\n  rules: [{{ host: orders.test, http: {{ paths: [{{ path: /, \
         pathType: Prefix, backend: {{ service: {{ name: orders, port: {{ name: https }} }} }} }}] }} }}]\n",
        port = orders.addr.port(),
        ip = orders.addr.ip(),
        class = install.class,
    ));
    install.service("plain", &[&plain]);
    install.ingress("plain", "plain.test", "plain");
    let mut ramjet = install.ramjet("backend-tls");
    ramjet.wait_ready();
    let orders_answer = || {
        let r = get(ramjet.http, "orders.test", "/orders?id=7");
        (r.status, r.body)
    };
    // Verified, and without SNI (ingress-nginx's default, `proxy-ssl-server-name: off`); the
    // Secret's client certificate presented.
    let client = tls_backend::certificate_file_id(&pki.path("client.crt"));
    let verified = (200, format!("orders sni=- target=/orders?id=7 client={client}\n"));
    assert!(
        eventually(PATIENCE, || orders_answer() == verified),
        "the HTTPS backend never answered through ramjet (now: {:?}); log:\n{}",
        orders_answer(),
        ramjet.log()
    );
    ramjet.wait_served("plain.test", "plain");

    // Another CA in the Secret: the backend's certificate no longer verifies. The route answers
    // 502, counted as a TLS error; the plain Ingress beside it is untouched.
    let tls_errors = tls_upstream_errors(&ramjet);
    install.admin.apply(&secret(&other));
    assert!(
        eventually(PATIENCE, || orders_answer().0 == 502),
        "a backend certificate from a CA no longer in ca.crt is still accepted (now: {:?}); log:\n{}",
        orders_answer(),
        ramjet.log()
    );
    assert!(tls_upstream_errors(&ramjet) > tls_errors, "the 502 was not a failed TLS handshake");
    for _ in 0..5 {
        assert_eq!(orders_answer().0, 502, "a connection verified under the old CA is still used");
        assert_eq!(ramjet.served("plain.test"), "plain", "one bad backend took down another Ingress");
    }

    // The CA restored: verified again.
    install.admin.apply(&secret(&pki));
    assert!(
        eventually(PATIENCE, || orders_answer() == verified),
        "the restored CA never verified the backend again (now: {:?}); log:\n{}",
        orders_answer(),
        ramjet.log()
    );
    ramjet.wait_served("plain.test", "plain");
    ramjet.assert_running();
}

/// ingress-nginx's basic authentication against the real API server: the users come from an
/// Opaque Secret (as `kubectl create secret generic --from-file=auth` makes it), a change to the
/// Secret changes who gets in, and a deleted Secret denies the paths (503) while the Ingress beside
/// it is untouched. The hashes are openssl's (`openssl passwd -apr1`).
#[test]
fn basic_auth_reads_its_users_from_an_opaque_secret_through_the_real_api_server() {
    let web = Backend::start("web");
    let install = Install::new("basic-auth");
    let ns = install.ns.clone();
    install.service("web", &[&web]);
    install.ingress("plain", "plain.test", "web");
    let secret = |file: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{ name: basic-auth, namespace: {ns} }}\ntype: Opaque\n\
             data: {{ auth: {} }}\n",
            base64(file.as_bytes())
        )
    };
    // foo:bar
    install.admin.apply(&secret("foo:$apr1$Qw3rTy12$ToV8Fflyor2TzTiUbMX9G.\n"));
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: private\n  namespace: {ns}\n  \
         annotations:\n    nginx.ingress.kubernetes.io/auth-type: basic\n    \
         nginx.ingress.kubernetes.io/auth-secret: basic-auth\n    \
         nginx.ingress.kubernetes.io/auth-realm: \"Authentication Required - foo\"\n\
         spec:\n  ingressClassName: {class}\n  rules: [{{ host: private.test, http: {{ paths: [{{ path: /, \
         pathType: Prefix, backend: {{ service: {{ name: web, port: {{ name: http }} }} }} }}] }} }}]\n",
        class = install.class,
    ));
    let mut ramjet = install.ramjet("basic-auth");
    ramjet.wait_ready();
    let http = ramjet.http;
    let as_user = |authorization: &str| {
        let r = request(
            http,
            &format!(
                "GET / HTTP/1.1\r\nHost: private.test\r\nauthorization: {authorization}\r\nconnection: close\r\n\r\n"
            ),
        );
        if r.status == 200 {
            served_by(&r)
        } else {
            r.status.to_string()
        }
    };
    const FOO_BAR: &str = "Basic Zm9vOmJhcg==";
    const FOO_NEW: &str = "Basic Zm9vOm5ldw==";
    assert!(
        eventually(PATIENCE, || as_user(FOO_BAR) == "web"),
        "foo never got in (now: {}); log:\n{}",
        as_user(FOO_BAR),
        ramjet.log()
    );
    let challenged = get(http, "private.test", "/");
    assert_eq!(challenged.status, 401);
    assert_eq!(challenged.header("www-authenticate"), Some("Basic realm=\"Authentication Required - foo\""));
    assert_eq!(as_user(FOO_NEW), "401");
    ramjet.wait_served("plain.test", "web");

    // A new password in the Secret: the old one no longer opens the door, the new one does.
    install.admin.apply(&secret("foo:$apr1$Nw8sAlt1$q5k8mBCyohmfHUDQR1y6m0\n"));
    assert!(
        eventually(PATIENCE, || as_user(FOO_NEW) == "web" && as_user(FOO_BAR) == "401"),
        "the changed Secret was not applied (new: {}, old: {}); log:\n{}",
        as_user(FOO_NEW),
        as_user(FOO_BAR),
        ramjet.log()
    );

    // The Secret deleted: nobody gets in (503, as ingress-nginx denies the location).
    install.admin.delete("Secret", Some(&ns), "basic-auth");
    assert!(
        eventually(PATIENCE, || as_user(FOO_NEW) == "503"),
        "a deleted Secret still lets users in (now: {}); log:\n{}",
        as_user(FOO_NEW),
        ramjet.log()
    );
    assert_eq!(ramjet.served("private.test"), "503");
    ramjet.wait_served("plain.test", "web");
    ramjet.assert_running();
}
