//! Gateway API over real sockets: GatewayClass, Gateway, HTTPRoute and ReferenceGrant objects in a
//! `--manifests` directory, compiled into the same table as Ingresses, served to a real client by
//! real backends.

use ramjet_test_support as support;
use ramjet_test_support::{h2_echo, h2client};

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use h2client::H2Client;
use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::client::{served_by, Conn};
use support::manifests::{service, Service};
use support::{eventually, temp_dir, wait_serving, DRIVERS};

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
  listeners:
    - name: http
      port: 80
      protocol: HTTP
      hostname: "*.shop.test"
      allowedRoutes: { namespaces: { from: Selector, selector: { matchLabels: { edge: allowed } } } }
---
apiVersion: v1
kind: Namespace
metadata: { name: shop, labels: { edge: allowed } }
"#;

const ROUTE: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: store, namespace: shop }
spec:
  parentRefs: [{ name: edge, namespace: infra, sectionName: http }]
  hostnames: [www.shop.test, elsewhere.test]
  rules:
    - matches:
        - path: { type: PathPrefix, value: /cart }
          headers: [{ name: x-beta, value: "yes" }]
      backendRefs: [{ name: beta, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /cart } }]
      backendRefs: [{ name: stable, port: 80, weight: 3 }, { name: beta, port: 80, weight: 1 }]
      filters:
        - type: RequestMirror
          requestMirror: { backendRef: { name: shadow, port: 80 } }
    - matches: [{ path: { type: Exact, value: /about } }, { method: DELETE }]
      backendRefs: [{ name: stable, port: 80 }]
"#;

fn start(dir: &Path, driver: IoDriver) -> Daemon {
    let mut config = DaemonConfig::with_source(Source::Manifests {
        dir: dir.to_path_buf(),
        options: IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    config.io_driver = driver;
    // One worker: every client shares one upstream pool (what the attack test needs).
    config.workers = 1;
    Daemon::start(config).expect("the daemon starts")
}

fn write(path: &Path, text: impl AsRef<[u8]>) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

/// Sends `count` requests over one keep-alive connection and counts the answers per backend
/// (`status` when not a 200).
fn tally(addr: SocketAddr, request: &str, count: usize) -> std::collections::BTreeMap<String, usize> {
    let mut conn = Conn::open(addr);
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..count {
        conn.send(request.as_bytes());
        let resp = conn.read_response();
        let who = if resp.status == 200 { served_by(&resp) } else { resp.status.to_string() };
        *seen.entry(who).or_insert(0) += 1;
    }
    seen
}

#[test]
fn an_httproute_with_header_matches_weights_and_a_mirror_serves_traffic() {
    let (stable, beta, shadow) = (Backend::start("stable"), Backend::start("beta"), Backend::start("shadow"));
    let objects = format!(
        "{GATEWAY}{}{}{}{ROUTE}",
        service("shop", "stable", stable.addr),
        service("shop", "beta", beta.addr),
        service("shop", "shadow", shadow.addr)
    );
    for driver in DRIVERS {
        let dir = temp_dir("gateway");
        write(&dir.join("shop.yaml"), &objects);
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let (mirrored_before, dropped_before) = (shadow.requests(), d.stats.mirrors_dropped());
        let one = |request: &str| tally(addr, request, 1).into_keys().next().unwrap();
        // The header match wins over the weighted rule for the same path.
        let beta_header = "GET /cart/items HTTP/1.1\r\nHost: www.shop.test\r\nX-Beta: yes\r\n\r\n";
        assert_eq!(tally(addr, beta_header, 50), [("beta".to_string(), 50)].into());
        // Weights 3:1. n = 2,000, p = 0.25: mean 500, σ ≈ 19.4; ±5σ.
        let split = tally(addr, "GET /cart HTTP/1.1\r\nHost: www.shop.test\r\n\r\n", 2_000);
        let to_beta = split.get("beta").copied().unwrap_or(0);
        assert!((403..=597).contains(&to_beta), "{driver:?}: {split:?}");
        assert_eq!(split.values().sum::<usize>(), 2_000, "{split:?}");
        // The weighted rule's mirror gets a copy of each request (the client never sees it), but
        // for copies over the in-flight bound, which are dropped and counted: on a busy machine the
        // mirror backend can fall behind.
        let accounted = || shadow.requests() - mirrored_before + (d.stats.mirrors_dropped() - dropped_before) as usize;
        assert!(
            eventually(Duration::from_secs(5), || accounted() == 2_000),
            "{driver:?}: the mirror got {} of 2,000 and {} were dropped",
            shadow.requests() - mirrored_before,
            d.stats.mirrors_dropped() - dropped_before
        );
        assert!(shadow.requests() - mirrored_before >= 1_000, "{driver:?}: most copies arrive");
        // Exact and method matches; a path no match claims within the host answers 404.
        assert_eq!(one("GET /about HTTP/1.1\r\nHost: www.shop.test\r\n\r\n"), "stable");
        assert_eq!(one("DELETE /anything HTTP/1.1\r\nHost: www.shop.test\r\n\r\n"), "stable");
        assert_eq!(one("GET /about/us HTTP/1.1\r\nHost: www.shop.test\r\n\r\n"), "404");
        // `elsewhere.test` is outside the listener's `*.shop.test`: not routed.
        assert_eq!(one("GET /cart HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n"), "404");
        d.shutdown();
    }
}

#[test]
fn a_route_from_a_namespace_the_listener_does_not_admit_is_not_served_and_the_rest_is() {
    let stable = Backend::start("stable");
    let dir = temp_dir("gateway-admit");
    let outsider = ROUTE.replace("name: store, namespace: shop", "name: store, namespace: elsewhere").replace(
        "backendRefs: [{ name: stable, port: 80 }]",
        "backendRefs: [{ name: stable, namespace: shop, port: 80 }]",
    );
    let objects = format!("{GATEWAY}{}{outsider}", service("shop", "stable", stable.addr));
    write(&dir.join("shop.yaml"), &objects);
    let d = start(&dir, IoDriver::Auto);
    wait_serving(&d, 1);
    let diagnostics = &d.published.current().diagnostics;
    assert!(
        diagnostics.iter().any(|d| d.object.to_string().contains("HTTPRoute elsewhere/store")
            && d.message.contains("do not admit this route")),
        "{diagnostics:?}"
    );
    assert_eq!(
        tally(d.http_addr(), "GET /about HTTP/1.1\r\nHost: www.shop.test\r\n\r\n", 1),
        [("404".into(), 1)].into()
    );
    // Labelling the route's namespace admits it: the file is re-read and the route served.
    let admitted = objects.replace(
        "metadata: { name: shop, labels: { edge: allowed } }",
        "metadata: { name: shop, labels: { edge: allowed } }\n---\napiVersion: v1\nkind: Namespace\n\
         metadata: { name: elsewhere, labels: { edge: allowed } }",
    );
    // The cross-namespace backend still needs a ReferenceGrant from `shop`.
    let granted = format!(
        "{admitted}---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
         metadata: {{ name: routes-from-elsewhere, namespace: shop }}\nspec:\n  from: [{{ group: \
         gateway.networking.k8s.io, kind: HTTPRoute, namespace: elsewhere }}]\n  to: [{{ group: \"\", kind: Service, \
         name: stable }}]\n"
    );
    write(&dir.join("shop.yaml"), &admitted);
    let request = "GET /about HTTP/1.1\r\nHost: www.shop.test\r\n\r\n";
    assert!(eventually(Duration::from_secs(5), || tally(d.http_addr(), request, 1).contains_key("500")));
    write(&dir.join("shop.yaml"), &granted);
    assert!(eventually(Duration::from_secs(5), || tally(d.http_addr(), request, 1).contains_key("stable")));
    d.shutdown();
}

const FILTERS: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: filters, namespace: shop }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [api.shop.test]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /old } }]
      filters:
        - type: RequestRedirect
          requestRedirect: { scheme: https, hostname: new.shop.test, statusCode: 301, path: { type: ReplacePrefixMatch, replacePrefixMatch: /new } }
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      filters:
        - type: URLRewrite
          urlRewrite: { hostname: internal.test, path: { type: ReplacePrefixMatch, replacePrefixMatch: /api } }
        - type: RequestHeaderModifier
          requestHeaderModifier:
            set: [{ name: X-Env, value: prod }]
            add: [{ name: X-Via-Gateway, value: ramjet }]
            remove: [x-secret]
        - type: ResponseHeaderModifier
          responseHeaderModifier: { add: [{ name: X-Served-By-Route, value: filters }] }
      backendRefs: [{ name: stable, port: 80 }]
    - matches: [{ path: { type: Exact, value: /framing } }]
      filters:
        - type: RequestHeaderModifier
          requestHeaderModifier: { set: [{ name: Content-Length, value: "0" }] }
      backendRefs: [{ name: stable, port: 80 }]
"#;

/// The last request head `backend` received.
fn last_head(backend: &Backend) -> String {
    let received = backend.received();
    let start = received.rfind("GET ").expect("a GET reached the backend");
    format!("{}\r\n", received[start..].split("\r\n\r\n").next().unwrap())
}

#[test]
fn redirects_rewrites_and_header_edits_apply_over_http1_and_http2() {
    let stable = Backend::start("stable");
    let dir = temp_dir("gateway-filters");
    write(&dir.join("shop.yaml"), format!("{GATEWAY}{}{FILTERS}", service("shop", "stable", stable.addr)));
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let mut conn = Conn::open(addr);
        conn.send(b"GET /old/page?x=1 HTTP/1.1\r\nHost: api.shop.test:8080\r\n\r\n");
        let resp = conn.read_response();
        assert_eq!(resp.status, 301, "{driver:?}");
        assert_eq!(resp.header("location"), Some("https://new.shop.test/new/page?x=1"));
        conn.send(b"GET /v1/items?id=7 HTTP/1.1\r\nHost: api.shop.test\r\nX-Env: dev\r\nX-Secret: s\r\n\r\n");
        let resp = conn.read_response();
        assert_eq!(resp.status, 200, "{driver:?}");
        assert_eq!(resp.header("x-served-by-route"), Some("filters"));
        let head = last_head(&stable);
        assert!(head.starts_with("GET /api/items?id=7 HTTP/1.1\r\n"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("\r\nhost: internal.test\r\n"), "{head}");
        assert!(lower.contains("\r\nx-env: prod\r\n") && !lower.contains("x-env: dev"), "{head}");
        assert!(lower.contains("\r\nx-via-gateway: ramjet\r\n") && !lower.contains("x-secret"), "{head}");
        assert!(lower.contains("x-forwarded-host: api.shop.test"), "the client's host is still forwarded: {head}");
        // A filter may not touch the framing: the rule answers 500 and says why.
        conn.send(b"GET /framing HTTP/1.1\r\nHost: api.shop.test\r\n\r\n");
        assert_eq!(conn.read_response().status, 500);
        let diagnostics = &d.published.current().diagnostics;
        assert!(
            diagnostics.iter().any(|d| d.message.contains("Content-Length is ramjet's to write")),
            "{diagnostics:?}"
        );

        // The same over HTTP/2 (h2c by prior knowledge).
        let mut h2 = H2Client::connect(addr);
        let resp = h2.get("api.shop.test", "/old/deep/page");
        assert_eq!(resp.status, 301);
        assert_eq!(resp.header("location"), Some("https://new.shop.test/new/deep/page"));
        let resp =
            h2.request("GET", "api.shop.test", "/v1/x", &[("x-secret", "s"), ("x-env", "dev")], b"", false).unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("x-served-by-route"), Some("filters"));
        let head = last_head(&stable).to_ascii_lowercase();
        assert!(head.starts_with("get /api/x http/1.1\r\n"), "{head}");
        assert!(
            head.contains("\r\nhost: internal.test\r\n") && head.contains("x-env: prod") && !head.contains("x-secret"),
            "{head}"
        );
        d.shutdown();
    }
}

const PATTERNS: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: patterns, namespace: shop }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [api.shop.test]
  rules:
    - matches: [{ path: { type: RegularExpression, value: "/orders/[0-9]+" } }]
      filters:
        - type: RequestMirror
          requestMirror: { backendRef: { name: shadow, port: 80 } }
        - type: RequestMirror
          requestMirror: { backendRef: { name: audit, port: 80 } }
      backendRefs: [{ name: beta, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: / } }]
      backendRefs: [{ name: stable, port: 80 }]
"#;

#[test]
fn a_regular_expression_path_routes_and_each_of_several_mirrors_gets_a_copy_over_http1_and_http2() {
    let backends = ["stable", "beta", "shadow", "audit"].map(Backend::start);
    let dir = temp_dir("gateway-patterns");
    let services: String = backends.iter().map(|b| service("shop", &b.name, b.addr)).collect();
    write(&dir.join("shop.yaml"), format!("{GATEWAY}{services}{PATTERNS}"));
    let [_, _, shadow, audit] = &backends;
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let copies = || (shadow.requests(), audit.requests());
        let before = copies();
        let mut conn = Conn::open(addr);
        for (target, want) in [
            ("/orders/42", "beta"),
            ("/orders/42?page=2", "beta"),
            ("/orders/42/items", "stable"),
            ("/orders/x", "stable"),
            ("/shop/orders/42", "stable"),
        ] {
            let resp = conn.get("api.shop.test", target);
            assert_eq!((resp.status, served_by(&resp)), (200, want.to_string()), "{driver:?} {target}");
        }
        let mut h2 = H2Client::connect(addr);
        for (target, want) in [("/orders/7", "beta"), ("/orders/7/items", "stable")] {
            let resp = h2.get("api.shop.test", target);
            assert_eq!((resp.status, served_by_h2(&resp)), (200, want.to_string()), "{driver:?} h2 {target}");
        }
        // Three requests matched the pattern (two over HTTP/1.1, one over HTTP/2): each mirror
        // gets a copy of each, and only of those.
        let want = (before.0 + 3, before.1 + 3);
        assert!(eventually(Duration::from_secs(5), || copies() == want), "{driver:?}: {:?}, want {want:?}", copies());
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(copies(), want, "{driver:?}: no copy of the other requests");
        assert!(last_head(shadow).starts_with("GET /orders/7 HTTP/1.1\r\n"), "{}", last_head(shadow));
        d.shutdown();
    }
}

fn served_by_h2(resp: &h2client::H2Response) -> String {
    let text = resp.text();
    text.lines().find_map(|l| l.strip_prefix("backend=")).unwrap_or(text.trim()).to_string()
}

/// The usual pair: a route on the HTTP listener redirects to HTTPS, the route on the HTTPS listener
/// serves. Both are for the same host, so each must answer only on its own listener's port.
const SCOPED: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: both, namespace: shop }
spec:
  gatewayClassName: ramjet
  listeners:
    - { name: http, port: 80, protocol: HTTP, hostname: secure.test }
    - name: https
      port: 443
      protocol: HTTPS
      hostname: secure.test
      tls: { certificateRefs: [{ name: secure-cert }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: to-https, namespace: shop, creationTimestamp: "2026-01-01T00:00:00Z" }
spec:
  parentRefs: [{ name: both, sectionName: http }]
  rules:
    - filters: [{ type: RequestRedirect, requestRedirect: { scheme: https, statusCode: 301 } }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: app, namespace: shop, creationTimestamp: "2026-01-02T00:00:00Z" }
spec:
  parentRefs: [{ name: both, sectionName: https }]
  rules:
    - backendRefs: [{ name: stable, port: 80 }]
"#;

#[test]
fn a_route_attached_to_one_listener_answers_only_on_that_listeners_port() {
    use std::io::{Read, Write};
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("gateway-scoped");
    pki.leaf("secure", &["secure.test"]);
    // The PEM files as YAML block scalars (`stringData`, as a user would write them).
    let block = |f: &str| {
        std::fs::read_to_string(pki.path(f)).unwrap().lines().map(|l| format!("    {l}\n")).collect::<String>()
    };
    let secret = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: secure-cert, namespace: shop }}\n\
         type: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        block("secure.crt"),
        block("secure.key")
    );
    let stable = Backend::start("stable");
    let dir = temp_dir("gateway-scoped");
    write(&dir.join("shop.yaml"), format!("{GATEWAY}{}{secret}{SCOPED}", service("shop", "stable", stable.addr)));
    let client = pki.client(&[&rustls::version::TLS13]);
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let mut conn = Conn::open(d.http_addr());
        let resp = conn.get("secure.test", "/cart?id=1");
        assert_eq!(resp.status, 301, "{driver:?}: plain HTTP is redirected");
        assert_eq!(resp.header("location"), Some("https://secure.test/cart?id=1"));

        let https = d.https_addr().expect("an HTTPS listener");
        let name = rustls::pki_types::ServerName::try_from("secure.test").unwrap();
        let tcp = std::net::TcpStream::connect(https).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut tls = rustls::StreamOwned::new(rustls::ClientConnection::new(client.clone(), name).unwrap(), tcp);
        write!(tls, "GET /cart?id=1 HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let _ = tls.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{driver:?}: HTTPS is served, not redirected again:\n{answer}");
        assert!(answer.contains("backend=stable"), "{answer}");
        d.shutdown();
    }
}

const TIMED: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: timed, namespace: shop }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [api.shop.test]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /slow } }]
      timeouts: { request: 300ms }
      backendRefs: [{ name: stable, port: 80 }]
    - backendRefs: [{ name: stable, port: 80 }]
"#;

/// A rule's `timeouts`: a late answer is 504 (over HTTP/1.1 and HTTP/2), and the late answer that
/// arrives afterwards on the upstream connection never reaches the next request, whoever sends it.
#[test]
fn a_rule_timeout_answers_504_and_the_late_answer_reaches_nobody() {
    let stable = Backend::start("stable");
    let dir = temp_dir("gateway-timeouts");
    write(&dir.join("shop.yaml"), format!("{GATEWAY}{}{TIMED}", service("shop", "stable", stable.addr)));
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let mut attacker = Conn::open(addr);
        let started = std::time::Instant::now();
        let resp = attacker.get("api.shop.test", "/slow/900");
        let waited = started.elapsed();
        assert_eq!(resp.status, 504, "{driver:?}");
        assert!(waited < Duration::from_millis(800), "{driver:?}: 504 after {waited:?}");
        assert_eq!(attacker.get("api.shop.test", "/slow/10").status, 200, "{driver:?}: within the deadline");
        // The backend answers the first request ~600 ms later; the victim's requests on the one
        // worker's pool meanwhile and after get their own answers.
        let mut victim = Conn::open(addr);
        for i in 0..12 {
            let resp = victim.get("api.shop.test", &format!("/victim/{i}"));
            assert_eq!(resp.status, 200, "{driver:?}");
            assert!(resp.body.contains(&format!("/victim/{i}")), "{driver:?}: someone else's answer: {}", resp.body);
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut h2 = H2Client::connect(addr);
        assert_eq!(h2.get("api.shop.test", "/slow/900").status, 504, "{driver:?} h2");
        assert_eq!(h2.get("api.shop.test", "/after").status, 200, "{driver:?} h2");
        d.shutdown();
    }
}

/// A backend that answers every request with `backend=stalling`, the connection's number and the
/// target, on keep-alive connections; for `/slow-body` it sends the head and half the body at once
/// and the other half 900 ms later.
fn stalling_backend() -> SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
                    loop {
                        let mut field = String::new();
                        if reader.read_line(&mut field).unwrap_or(0) == 0 {
                            return;
                        }
                        if field.trim_end().is_empty() {
                            break;
                        }
                    }
                    let body = format!("backend=stalling\nconn={n}\ntarget={target}\n");
                    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                    let (first, rest) = body.split_at(body.len() / 2);
                    if writer.write_all(format!("{head}{first}").as_bytes()).is_err() {
                        return;
                    }
                    if target == "/slow-body" {
                        std::thread::sleep(Duration::from_millis(900));
                    }
                    if writer.write_all(rest.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

const TIMED_BODY: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: timed-body, namespace: shop }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [body.shop.test]
  rules:
    - timeouts: { request: 300ms }
      backendRefs: [{ name: stalling, port: 80 }]
"#;

/// A rule's deadline that ends while the answer's body is relayed: the client has the head and
/// part of the body, and its connection is closed at the deadline (HTTP/1.1) or its stream reset
/// (HTTP/2, the connection stays). The upstream connection is never pooled: the next request goes
/// on a new one, and the rest of the late body reaches nobody.
#[test]
fn a_rule_timeout_during_the_body_closes_the_client_connection_and_pools_nothing() {
    use std::io::Read;
    let stalling = stalling_backend();
    let dir = temp_dir("gateway-timed-body");
    write(&dir.join("shop.yaml"), format!("{GATEWAY}{}{TIMED_BODY}", service("shop", "stalling", stalling)));
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let mut warm = Conn::open(addr);
        let first = warm.get("body.shop.test", "/warm");
        assert_eq!(first.status, 200, "{driver:?}");

        let mut attacker = Conn::open(addr);
        let started = std::time::Instant::now();
        attacker.send(b"GET /slow-body HTTP/1.1\r\nHost: body.shop.test\r\n\r\n");
        let mut answer = Vec::new();
        let _ = attacker.stream.read_to_end(&mut answer);
        let waited = started.elapsed();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{driver:?}: the head went out: {answer}");
        assert!(answer.contains("backend=stalling"), "{driver:?}: part of the body went out: {answer}");
        assert!(!answer.contains("target=/slow-body"), "{driver:?}: the late half is cut: {answer}");
        assert!(waited < Duration::from_millis(800), "{driver:?}: closed after {waited:?}");

        // The cut connection is not pooled: the victim gets its own, complete answer, never the late
        // half of the cut one in front of it.
        let mut victim = Conn::open(addr);
        for i in 0..4 {
            let resp = victim.get("body.shop.test", &format!("/victim/{i}"));
            assert_eq!(resp.status, 200, "{driver:?}");
            assert!(resp.body.starts_with("backend=stalling\n"), "{driver:?}: {}", resp.body);
            assert!(resp.body.contains(&format!("target=/victim/{i}\n")), "{driver:?}: {}", resp.body);
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(warm.get("body.shop.test", "/again").status, 200, "{driver:?}");

        let mut h2 = H2Client::connect(addr);
        let cut = h2.request("GET", "body.shop.test", "/slow-body", &[], b"", false);
        assert!(cut.is_err(), "{driver:?} h2: the stream is reset, not ended: {cut:?}");
        let after = h2.get("body.shop.test", "/after");
        assert_eq!(after.status, 200, "{driver:?} h2: the connection stays");
        assert!(after.text().contains("target=/after\n"), "{driver:?} h2: {}", after.text());
        d.shutdown();
    }
}

#[test]
fn an_attacker_on_an_edited_route_cannot_reach_the_next_request_on_the_pooled_upstream() {
    let stable = Backend::start("stable");
    let dir = temp_dir("gateway-attack");
    write(&dir.join("shop.yaml"), format!("{GATEWAY}{}{FILTERS}", service("shop", "stable", stable.addr)));
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        // Warm the pool, then the attacks, each on the rewritten and header-edited route.
        let mut conn = Conn::open(addr);
        conn.send(b"GET /v1/warm HTTP/1.1\r\nHost: api.shop.test\r\n\r\n");
        assert_eq!(conn.read_response().status, 200);
        let attacks: [&[u8]; 4] = [
            // Ambiguous framing: refused before anything goes upstream.
            b"POST /v1/a HTTP/1.1\r\nHost: api.shop.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v1/smuggled HTTP/1.1\r\nHost: api.shop.test\r\n\r\n",
            // A body that looks like a request: it stays a body.
            b"POST /v1/b HTTP/1.1\r\nHost: api.shop.test\r\nContent-Length: 47\r\n\r\nGET /v1/smuggled HTTP/1.1\r\nHost: api.shop.test\r\n\r\n",
            // A field the filter removes, folded onto the next line (obs-fold is refused).
            b"GET /v1/c HTTP/1.1\r\nHost: api.shop.test\r\nX-Secret: a\r\n x-env: dev\r\n\r\n",
            // A header the filter sets, sent twice with framing-looking values.
            b"GET /v1/d HTTP/1.1\r\nHost: api.shop.test\r\nX-Env: 0\r\nX-Env: Content-Length: 0\r\n\r\n",
        ];
        for attack in attacks {
            let mut attacker = Conn::open(addr);
            attacker.send(attack);
            let _ = attacker.read_response_to(false);
            let mut victim = Conn::open(addr);
            victim.send(b"GET /v1/victim HTTP/1.1\r\nHost: api.shop.test\r\n\r\n");
            let answer = victim.read_response();
            assert_eq!((answer.status, served_by(&answer)), (200, "stable".to_string()), "{driver:?}");
            assert_eq!(answer.header("x-served-by-route"), Some("filters"));
            let head = last_head(&stable);
            assert!(head.starts_with("GET /api/victim HTTP/1.1\r\n"), "{driver:?}: the victim's request: {head}");
        }
        let received = stable.received();
        // A request ramjet took for one would have been rewritten to /api/...; a body stays as sent.
        assert!(!received.contains("/api/smuggled"), "{driver:?}: a smuggled request went upstream as a request");
        assert!(!received.to_ascii_lowercase().contains("x-secret"), "{driver:?}");
        d.shutdown();
    }
}

/// A rule with every edit, one with a full-path rewrite only, and one without edits, all to the
/// same Service, whose endpoint speaks h2c.
const H2_EDITS: &str = r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: h2-edits, namespace: shop }
spec:
  parentRefs: [{ name: edge, namespace: infra }]
  hostnames: [h2.shop.test]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      filters:
        - type: URLRewrite
          urlRewrite: { hostname: internal.test, path: { type: ReplacePrefixMatch, replacePrefixMatch: /api } }
        - type: RequestHeaderModifier
          requestHeaderModifier:
            set: [{ name: X-Env, value: prod }]
            add: [{ name: X-Via-Gateway, value: ramjet }]
            remove: [x-secret]
        - type: ResponseHeaderModifier
          responseHeaderModifier:
            set: [{ name: X-Env, value: edge }]
            add: [{ name: X-Served-By-Route, value: h2-edits }]
            remove: [x-backend-secret]
      backendRefs: [{ name: echo, port: 80 }]
    - matches: [{ path: { type: Exact, value: /full } }]
      filters:
        - type: URLRewrite
          urlRewrite: { path: { type: ReplaceFullPath, replaceFullPath: /replaced } }
      backendRefs: [{ name: echo, port: 80 }]
    - backendRefs: [{ name: echo, port: 80 }]
"#;

/// What the h2c echo backend received (the answer's body) and the answer's fields, over either
/// client protocol: checks the edits of the `/v1` rule of [`H2_EDITS`] for `GET /v1/items?id=7`
/// sent with `x-secret: s`, `x-env: dev` and `x-via-gateway: client`.
fn assert_edited(seen: &str, header: impl Fn(&str) -> Option<String>, how: &str) {
    assert!(seen.starts_with("GET /api/items?id=7\nauthority=internal.test\n"), "{how}: {seen}");
    assert!(seen.contains("\nx-env: prod\n") && !seen.contains("x-env: dev"), "{how}: {seen}");
    assert!(!seen.contains("x-secret"), "{how}: {seen}");
    // `add` appends to the client's own field.
    assert!(seen.contains("\nx-via-gateway: client\n") && seen.contains("\nx-via-gateway: ramjet\n"), "{how}: {seen}");
    assert!(seen.contains("\nx-forwarded-host: h2.shop.test\n"), "{how}: the client's host is forwarded: {seen}");
    assert!(!seen.contains("\nhost:"), "{how}: HTTP/2 has no Host field: {seen}");
    assert_eq!(header("x-echo-path").as_deref(), Some("/api/items?id=7"), "{how}");
    assert_eq!(header("x-env").as_deref(), Some("edge"), "{how}: set replaces the backend's");
    assert_eq!(header("x-served-by-route").as_deref(), Some("h2-edits"), "{how}");
    assert_eq!(header("x-backend-secret"), None, "{how}: removed");
}

/// The same for a request on the rule without edits, `GET <path>` with `x-secret: s`: it goes as
/// it came, and its answer too.
fn assert_unedited(seen: &str, header: impl Fn(&str) -> Option<String>, path: &str, how: &str) {
    assert!(seen.starts_with(&format!("GET {path}\nauthority=h2.shop.test\n")), "{how}: {seen}");
    assert!(seen.contains("\nx-secret: s\n"), "{how}: {seen}");
    for edited in ["x-env", "x-via-gateway", "internal.test", "/api/"] {
        assert!(!seen.contains(edited), "{how}: {edited} in {seen}");
    }
    assert_eq!(header("x-echo-path").as_deref(), Some(path), "{how}: its own answer");
    assert_eq!(header("x-env").as_deref(), Some("backend"), "{how}");
    assert_eq!(header("x-backend-secret").as_deref(), Some("s"), "{how}");
    assert_eq!(header("x-served-by-route"), None, "{how}");
}

/// A rule's RequestHeaderModifier, URLRewrite (hostname, ReplacePrefixMatch, ReplaceFullPath) and
/// ResponseHeaderModifier reach an HTTP/2 (h2c) backend over `:authority`, `:path` and HTTP/2
/// fields, whether the client speaks HTTP/2 (relayed stream) or HTTP/1.1 (a stream made from the
/// upstream head); a rule without edits changes nothing.
#[test]
fn a_rules_header_edits_and_rewrite_reach_an_h2c_backend_from_http2_and_http1_clients() {
    let echo = h2_echo::H2Echo::start();
    let dir = temp_dir("gateway-h2-edits");
    write(
        &dir.join("shop.yaml"),
        format!(
            "{GATEWAY}{}{H2_EDITS}",
            Service::new("shop", "echo").app_protocol("kubernetes.io/h2c").endpoints(&[echo.addr]).yaml()
        ),
    );
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let before = echo.connections();

        let mut h2 = H2Client::connect(addr);
        let fields = [("x-secret", "s"), ("x-env", "dev"), ("x-via-gateway", "client")];
        let resp = h2.request("GET", "h2.shop.test", "/v1/items?id=7", &fields, b"", false).unwrap();
        assert_eq!(resp.status, 200, "{driver:?}");
        assert_edited(&resp.text(), |n| resp.header(n).map(str::to_string), &format!("{driver:?} h2"));
        let resp = h2.get("h2.shop.test", "/full?q=1");
        assert!(resp.text().starts_with("GET /replaced?q=1\nauthority=h2.shop.test\n"), "{}", resp.text());
        let resp = h2.request("GET", "h2.shop.test", "/other?x=1", &[("x-secret", "s")], b"", false).unwrap();
        assert_unedited(&resp.text(), |n| resp.header(n).map(str::to_string), "/other?x=1", &format!("{driver:?} h2"));

        let mut conn = Conn::open(addr);
        conn.send(
            b"GET /v1/items?id=7 HTTP/1.1\r\nHost: h2.shop.test\r\nX-Secret: s\r\nX-Env: dev\r\n\
              X-Via-Gateway: client\r\n\r\n",
        );
        let resp = conn.read_response();
        assert_eq!(resp.status, 200, "{driver:?}");
        assert_edited(&resp.body, |n| resp.header(n).map(str::to_string), &format!("{driver:?} h1"));
        let resp = conn.get("h2.shop.test", "/full?q=1");
        assert!(resp.body.starts_with("GET /replaced?q=1\nauthority=h2.shop.test\n"), "{}", resp.body);
        let resp = conn.get_with("h2.shop.test", "/other?x=1", "X-Secret: s\r\n");
        assert_unedited(&resp.body, |n| resp.header(n).map(str::to_string), "/other?x=1", &format!("{driver:?} h1"));
        assert_eq!(echo.connections() - before, 1, "{driver:?}: one HTTP/2 connection carried every request");
        d.shutdown();
    }
}

/// Attackers on the edited rule and victims on the same worker's one HTTP/2 connection to the
/// backend, interleaved: whatever an attacker sends (fields the rule removes or sets, repeated,
/// folded, framing-looking values, a body that is a request), a victim's request carries none of
/// the edits nor the attacker's fields, and the victim gets its own answer.
#[test]
fn an_attacker_on_an_edited_route_cannot_reach_a_victim_on_the_shared_h2c_upstream() {
    let echo = h2_echo::H2Echo::start();
    let dir = temp_dir("gateway-h2-attack");
    write(
        &dir.join("shop.yaml"),
        format!(
            "{GATEWAY}{}{H2_EDITS}",
            Service::new("shop", "echo").app_protocol("kubernetes.io/h2c").endpoints(&[echo.addr]).yaml()
        ),
    );
    for driver in DRIVERS {
        let d = start(&dir, driver);
        wait_serving(&d, 1);
        let addr = d.http_addr();
        let before = echo.connections();
        let attacks: [&[u8]; 4] = [
            // A field the filter removes, folded onto the next line (obs-fold is refused).
            b"GET /v1/a HTTP/1.1\r\nHost: h2.shop.test\r\nX-Secret: a\r\n x-env: dev\r\n\r\n",
            // A header the filter sets, twice, with framing-looking values.
            b"GET /v1/b HTTP/1.1\r\nHost: h2.shop.test\r\nX-Env: 0\r\nX-Env: Content-Length: 0\r\nX-Attacker: 1\r\n\r\n",
            // A body that looks like a request: on HTTP/2 it is DATA, never a request.
            b"POST /v1/c HTTP/1.1\r\nHost: h2.shop.test\r\nX-Attacker: 1\r\nContent-Length: 52\r\n\r\nGET /other/smuggled HTTP/1.1\r\nHost: h2.shop.test\r\n\r\n",
            // Ambiguous framing: refused before anything goes upstream.
            b"POST /v1/d HTTP/1.1\r\nHost: h2.shop.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /other/smuggled HTTP/1.1\r\nHost: h2.shop.test\r\n\r\n",
        ];
        let mut h2_attacker = H2Client::connect(addr);
        let mut h2_victim = H2Client::connect(addr);
        for (i, attack) in attacks.iter().enumerate() {
            let mut attacker = Conn::open(addr);
            attacker.send(attack);
            let answer = attacker.read_response_to(false);
            if attack.starts_with(b"POST /v1/c") {
                let body = answer.map(|a| a.body).unwrap_or_default();
                assert!(body.starts_with("POST /api/c\n"), "{driver:?}: the body stayed a body: {body}");
            }
            let fields = [("x-secret", "a"), ("x-secret", "b"), ("x-env", "0"), ("x-attacker", "1")];
            let resp = h2_attacker.request("GET", "h2.shop.test", "/v1/h2", &fields, b"", false).unwrap();
            assert_eq!(resp.header("x-served-by-route"), Some("h2-edits"), "{driver:?}");

            let path = format!("/other/victim-{i}");
            let resp = Conn::open(addr).get_with("h2.shop.test", &path, "X-Secret: s\r\n");
            assert_eq!(resp.status, 200, "{driver:?}");
            assert!(!resp.body.contains("x-attacker"), "{driver:?}: {}", resp.body);
            assert_unedited(&resp.body, |n| resp.header(n).map(str::to_string), &path, &format!("{driver:?} h1 {i}"));
            let resp = h2_victim.request("GET", "h2.shop.test", &path, &[("x-secret", "s")], b"", false).unwrap();
            assert!(!resp.text().contains("x-attacker"), "{driver:?}: {}", resp.text());
            let how = format!("{driver:?} h2 {i}");
            assert_unedited(&resp.text(), |n| resp.header(n).map(str::to_string), &path, &how);
            // A victim on the edited rule gets its own request edited, nothing of the attacker's.
            let resp = h2_victim.get("h2.shop.test", &format!("/v1/victim-{i}"));
            let seen = resp.text();
            assert!(seen.starts_with(&format!("GET /api/victim-{i}\nauthority=internal.test\n")), "{how}: {seen}");
            assert!(!seen.contains("x-attacker") && !seen.contains("x-secret"), "{how}: {seen}");
            assert_eq!(seen.matches("x-env:").count(), 1, "{how}: {seen}");
        }
        // Concurrent attacker streams while the victim's requests go.
        let attacker = std::thread::spawn(move || {
            let paths: Vec<String> = (0..40).map(|i| format!("/v1/flood-{i}")).collect();
            h2_attacker.concurrent_gets("h2.shop.test", &paths).iter().filter(|r| r.is_ok()).count()
        });
        for i in 0..20 {
            let path = format!("/other/during-{i}");
            let resp = h2_victim.request("GET", "h2.shop.test", &path, &[("x-secret", "s")], b"", false).unwrap();
            let how = format!("{driver:?} during {i}");
            assert_unedited(&resp.text(), |n| resp.header(n).map(str::to_string), &path, &how);
        }
        assert_eq!(attacker.join().unwrap(), 40, "{driver:?}");
        assert_eq!(echo.connections() - before, 1, "{driver:?}: attackers and victims shared one upstream connection");
        let requests = echo.requests();
        assert!(!requests.iter().any(|r| r.contains("smuggled")), "{driver:?}: {requests:?}");
        d.shutdown();
    }
}
