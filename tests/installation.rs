//! A realistic ingress-nginx installation, moved over unchanged. In one directory, as `kubectl get
//! -o yaml` would give them: ingress-nginx's controller Deployment and ConfigMap (as its Helm chart
//! renders them, with the settings an edge sets), the IngressClass `nginx`, 50 Ingresses using the
//! annotations ingress-nginx users set most, the Services they name (real backends on loopback), an
//! ExternalName Service and an oauth2-proxy outside the cluster, both by DNS name (a real DNS server
//! started here).
//!
//! `ramjet migration-report` judges the directory and exits 0 with `--fail-on refused`. Then the
//! daemon serves the same directory, with the ConfigMap as its controller configuration plus what
//! the report says to add, and each Ingress's outcome in the report is what a client observes: every
//! Ingress's probe is a request and what ingress-nginx would answer; a `served` Ingress passes all of
//! it, a `partly` one passes all but what the report names, a `not-served` one is not served.

use ramjet_test_support as support;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ramjet::{ConfigFile, Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_control::dns::DnsSettings;
use ramjet_dataplane::IoDriver;
use serde_json::{json, Value};
use support::backend::Backend;
use support::client::{request, served_by, Response};
use support::dns_server::DnsServer;
use support::manifests::Service;
use support::{eventually, temp_dir};

const NGINX: &str = "nginx.ingress.kubernetes.io";
const NS: &str = "shop";

/// ingress-nginx's controller as its Helm chart renders it, with a default backend of its own.
const CONTROLLER: &str = "apiVersion: apps/v1
kind: Deployment
metadata: { name: ingress-nginx-controller, namespace: ingress-nginx }
spec:
  template:
    spec:
      containers:
      - name: controller
        image: registry.k8s.io/ingress-nginx/controller:v1.12.1
        args:
        - /nginx-ingress-controller
        - --publish-service=$(POD_NAMESPACE)/ingress-nginx-controller
        - --election-id=ingress-nginx-leader
        - --controller-class=k8s.io/ingress-nginx
        - --ingress-class=nginx
        - --configmap=$(POD_NAMESPACE)/ingress-nginx-controller
        - --validating-webhook=:8443
        - --validating-webhook-certificate=/usr/local/certificates/cert
        - --validating-webhook-key=/usr/local/certificates/key
        - --default-backend-service=ingress-nginx/default-http-backend
";

/// The controller ConfigMap: the global defaults an edge sets.
const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata: { name: ingress-nginx-controller, namespace: ingress-nginx }
data:
  allow-snippet-annotations: \"false\"
  hsts: \"true\"
  hsts-max-age: \"15724800\"
  hsts-include-subdomains: \"true\"
  ssl-redirect: \"true\"
  proxy-body-size: \"8m\"
  proxy-connect-timeout: \"10\"
  proxy-read-timeout: \"120\"
  proxy-send-timeout: \"120\"
  custom-http-errors: \"503\"
  global-allowed-response-headers: \"X-Frame-Options,X-Content-Type-Options\"
  log-format-escape-json: \"true\"
";

/// What a client sends an Ingress and what ingress-nginx answers.
#[derive(Clone)]
enum Probe {
    /// `GET path` (with these extra header lines) answered 200 by `backend`, which saw `target`.
    Served { path: &'static str, extra: String, backend: &'static str, target: &'static str },
    /// `GET path` answered `status`, with a `location` starting so (empty: none checked).
    Status { path: &'static str, extra: String, status: u16, location: String },
    /// `GET path` answered with field `name` containing `value`.
    Field { path: &'static str, extra: String, name: &'static str, value: String },
    /// `GET path` reaches `backend` with the request field `name: value`.
    Upstream { path: &'static str, backend: &'static str, name: &'static str, value: &'static str },
    /// A `POST` of `size` bytes answered `status`.
    Post { size: usize, status: u16 },
    /// Over HTTPS: 200 with `Strict-Transport-Security` containing `hsts`.
    Https { hsts: &'static str },
    /// `GET /` for another `host` answered 200 by `backend`.
    OtherHost { host: &'static str, backend: &'static str },
    /// Requests answered 503 among `n` quick ones: at least one (a rate limit).
    Limited { n: usize },
    /// The Ingress is not served: its host is the controller's default backend's.
    NotServed,
}

/// One Ingress of the installation.
struct Case {
    name: &'static str,
    annotations: Vec<(String, String)>,
    /// (path, pathType, Service)
    paths: Vec<(&'static str, &'static str, &'static str)>,
    tls: bool,
    probes: Vec<Probe>,
    /// What the report is expected to say: `served`, `partly` or `not-served`.
    outcome: &'static str,
}

fn a(name: &str, value: &str) -> (String, String) {
    (format!("{NGINX}/{name}"), value.to_string())
}

fn served(path: &'static str, backend: &'static str, target: &'static str) -> Probe {
    Probe::Served { path, extra: String::new(), backend, target }
}

fn status(path: &'static str, status: u16, location: &str) -> Probe {
    Probe::Status { path, extra: String::new(), status, location: location.into() }
}

fn case(name: &'static str, annotations: Vec<(String, String)>, probes: Vec<Probe>) -> Case {
    Case { name, annotations, paths: vec![("/", "Prefix", "web")], tls: false, probes, outcome: "served" }
}

fn host(name: &str) -> String {
    format!("{name}.shop.example")
}

/// The 50 Ingresses. `oauth` is the oauth2-proxy's port (outside the cluster, by DNS name).
fn cases(oauth: u16) -> Vec<Case> {
    let basic =
        || vec![a("auth-type", "basic"), a("auth-secret", "basic-auth"), a("auth-realm", "Authentication Required")];
    let oauth2 = |extra: &[(String, String)]| {
        let mut list = vec![
            a("auth-url", &format!("http://oauth2.partner.test:{oauth}/oauth2/auth")),
            a("auth-signin", "https://$host/oauth2/start?rd=$escaped_request_uri"),
            a("auth-response-headers", "X-Auth-Request-User,X-Auth-Request-Email"),
        ];
        list.extend_from_slice(extra);
        list
    };
    let signed_in = "cookie: _oauth2_proxy=alice\r\n".to_string();
    let cases = vec![
        // Rewrites, the most common annotation of all.
        Case {
            paths: vec![("/api(/|$)(.*)", "ImplementationSpecific", "api")],
            ..case(
                "rewrite",
                vec![a("rewrite-target", "/$2"), a("use-regex", "true")],
                vec![served("/api/orders?id=1", "api", "/orders?id=1"), served("/api", "api", "/")],
            )
        },
        Case {
            paths: vec![("/app(/|$)(.*)", "ImplementationSpecific", "web")],
            ..case(
                "rewrite-prefix",
                vec![a("rewrite-target", "/$2"), a("x-forwarded-prefix", "/app")],
                vec![Probe::Upstream { path: "/app/x", backend: "web", name: "x-forwarded-prefix", value: "/app" }],
            )
        },
        case(
            "app-root",
            vec![a("app-root", "/dashboard")],
            vec![status("/", 302, "http://app-root.shop.example/dashboard")],
        ),
        case(
            "force-https",
            vec![a("force-ssl-redirect", "true")],
            vec![status("/a", 308, "https://force-https.shop.example/a")],
        ),
        case(
            "permanent",
            vec![a("permanent-redirect", "https://new.shop.example/")],
            vec![status("/old", 301, "https://new.shop.example/")],
        ),
        case(
            "temporal",
            vec![a("temporal-redirect", "https://maintenance.shop.example")],
            vec![status("/", 302, "https://maintenance.shop.example")],
        ),
        case("www", vec![a("from-to-www-redirect", "true")], vec![served("/", "web", "/")]),
        case("body-small", vec![a("proxy-body-size", "1k")], vec![Probe::Post { size: 4096, status: 413 }]),
        case("body-default", vec![], vec![Probe::Post { size: 64 * 1024, status: 200 }]),
        case(
            "timeouts",
            vec![a("proxy-read-timeout", "1"), a("proxy-connect-timeout", "2"), a("proxy-send-timeout", "2")],
            vec![status("/slow/3000", 504, "")],
        ),
        case(
            "cors",
            vec![
                a("enable-cors", "true"),
                a("cors-allow-origin", "https://shop.example, https://*.shop.example"),
                a("cors-allow-credentials", "true"),
                a("cors-allow-methods", "GET, POST, OPTIONS"),
            ],
            vec![Probe::Field {
                path: "/",
                extra: "Origin: https://m.shop.example\r\n".into(),
                name: "access-control-allow-origin",
                value: "https://m.shop.example".into(),
            }],
        ),
        case(
            "cors-open",
            vec![a("enable-cors", "true")],
            vec![Probe::Field {
                path: "/",
                extra: String::new(),
                name: "access-control-allow-origin",
                value: "*".into(),
            }],
        ),
        case(
            "basic-auth",
            basic(),
            vec![
                status("/", 401, ""),
                Probe::Served {
                    path: "/",
                    extra: "authorization: Basic dXNlcjpwYXNz\r\n".into(),
                    backend: "web",
                    target: "/",
                },
            ],
        ),
        case(
            "oauth",
            oauth2(&[]),
            vec![
                status("/cart?x=1", 302, "https://oauth.shop.example/oauth2/start?rd=%2Fcart%3Fx%3D1"),
                Probe::Served { path: "/cart", extra: signed_in.clone(), backend: "web", target: "/cart" },
            ],
        ),
        case(
            "oauth-headers",
            oauth2(&[]),
            vec![
                Probe::Field { path: "/", extra: signed_in.clone(), name: "content-type", value: "text/plain".into() },
                Probe::Served { path: "/me", extra: signed_in.clone(), backend: "web", target: "/me" },
            ],
        ),
        case(
            "allow-office",
            vec![a("whitelist-source-range", "127.0.0.0/8, 10.0.0.0/8")],
            vec![served("/", "web", "/")],
        ),
        case("allow-vpn", vec![a("allowlist-source-range", "10.8.0.0/16")], vec![status("/", 403, "")]),
        case("deny", vec![a("denylist-source-range", "127.0.0.1/32")], vec![status("/", 403, "")]),
        case("rps", vec![a("limit-rps", "1"), a("limit-burst-multiplier", "2")], vec![Probe::Limited { n: 40 }]),
        // A burst of rpm × multiplier passes at once (nginx's `limit_req … burst nodelay`).
        case("rpm", vec![a("limit-rpm", "10"), a("limit-burst-multiplier", "1")], vec![Probe::Limited { n: 40 }]),
        case("connections", vec![a("limit-connections", "20")], vec![served("/", "web", "/")]),
        case(
            "sticky",
            vec![
                a("affinity", "cookie"),
                a("session-cookie-name", "route"),
                a("session-cookie-max-age", "172800"),
                a("session-cookie-samesite", "Lax"),
            ],
            vec![Probe::Field { path: "/", extra: String::new(), name: "set-cookie", value: "route=".into() }],
        ),
        case(
            "buffers",
            vec![
                a("proxy-buffer-size", "16k"),
                a("proxy-buffering", "on"),
                a("client-body-buffer-size", "1m"),
                a("proxy-request-buffering", "off"),
            ],
            vec![served("/", "web", "/")],
        ),
        case(
            "vhost",
            vec![a("upstream-vhost", "internal.shop.svc")],
            vec![Probe::Upstream { path: "/", backend: "web", name: "host", value: "internal.shop.svc" }],
        ),
        case("ewma", vec![a("load-balance", "ewma")], vec![served("/", "web", "/")]),
        case("hash", vec![a("upstream-hash-by", "$request_uri")], vec![served("/x", "web", "/x")]),
        case(
            "retries",
            vec![
                a("proxy-next-upstream", "error timeout http_502"),
                a("proxy-next-upstream-tries", "3"),
                a("proxy-next-upstream-timeout", "5"),
            ],
            vec![served("/", "web", "/")],
        ),
        case(
            "alias",
            vec![a("server-alias", "shop-alias.example")],
            vec![served("/", "web", "/"), Probe::OtherHost { host: "shop-alias.example", backend: "web" }],
        ),
        case("quiet", vec![a("enable-access-log", "false")], vec![served("/", "web", "/")]),
        case(
            "http11",
            vec![a("proxy-http-version", "1.1"), a("backend-protocol", "HTTP")],
            vec![served("/", "web", "/")],
        ),
        case(
            "error-pages",
            vec![a("custom-http-errors", "404,500"), a("default-backend", "errors")],
            vec![Probe::Upstream { path: "/nobody/404", backend: "errors", name: "x-code", value: "404" }],
        ),
        Case {
            paths: vec![("/", "Prefix", "drained")],
            ..case(
                "drained",
                vec![],
                vec![Probe::Upstream { path: "/", backend: "default-http-backend", name: "x-code", value: "503" }],
            )
        },
        case(
            "headers",
            vec![a("custom-headers", "shop/security-headers")],
            vec![Probe::Field { path: "/", extra: String::new(), name: "x-frame-options", value: "DENY".into() }],
        ),
        case("connection", vec![a("connection-proxy-header", "keep-alive")], vec![served("/", "web", "/")]),
        case(
            "mirror",
            vec![a("mirror-target", "http://static.shop.svc.cluster.local/$request_uri")],
            vec![served("/m", "web", "/m")],
        ),
        Case {
            paths: vec![("/", "Prefix", "partner")],
            ..case("partner", vec![a("upstream-vhost", "api.partner.test")], vec![served("/v1", "partner", "/v1")])
        },
        Case {
            paths: vec![("/", "Prefix", "clustered")],
            ..case("cluster-ip", vec![a("service-upstream", "true")], vec![served("/", "cluster", "/")])
        },
        Case {
            tls: true,
            ..case(
                "secure",
                vec![],
                vec![
                    status("/", 308, "https://secure.shop.example"),
                    Probe::Https { hsts: "max-age=15724800; includeSubDomains" },
                ],
            )
        },
        Case {
            tls: true,
            ..case(
                "secure-plain",
                vec![a("ssl-redirect", "false")],
                vec![served("/", "web", "/"), Probe::Https { hsts: "max-age=15724800" }],
            )
        },
        Case {
            tls: true,
            ..case("secure-oauth", oauth2(&[]), vec![status("/", 308, "https://secure-oauth.shop.example")])
        },
        Case {
            paths: vec![("/", "Prefix", "web"), ("/static", "Prefix", "static"), ("/api", "Prefix", "api")],
            ..case(
                "multi",
                vec![a("proxy-body-size", "50m")],
                vec![
                    served("/", "web", "/"),
                    served("/static/a.css", "static", "/static/a.css"),
                    served("/api/v2", "api", "/api/v2"),
                ],
            )
        },
        // A path no rule takes goes to the controller's default backend, as in ingress-nginx.
        Case {
            paths: vec![("/exact", "Exact", "web")],
            ..case(
                "exact",
                vec![],
                vec![served("/exact", "web", "/exact"), served("/exact/more", "default-http-backend", "/exact/more")],
            )
        },
        // Ingresses as most are: no annotations, or the everyday ones.
        case("plain-1", vec![], vec![served("/", "web", "/")]),
        // A partly served Ingress: its answers are not slowed to limit-rate (ignored), the rest is
        // served.
        Case {
            outcome: "partly",
            ..case(
                "plain-2",
                vec![a("proxy-read-timeout", "300"), a("limit-rate", "512")],
                vec![served("/reports", "web", "/reports")],
            )
        },
        case("plain-3", vec![a("proxy-body-size", "0")], vec![Probe::Post { size: 9 * 1024 * 1024, status: 200 }]),
        Case {
            paths: vec![("/", "Prefix", "static")],
            ..case("plain-4", vec![a("ssl-redirect", "false")], vec![served("/logo.png", "static", "/logo.png")])
        },
        // nginx's cookie rewrites, for an application that sets cookies for its own path.
        case(
            "cookies",
            vec![a("proxy-cookie-path", "/one/ /")],
            vec![Probe::Field {
                path: "/",
                extra: "X-Echo-Set-Header: Set-Cookie:sid=1; Path=/one/\r\n".into(),
                name: "set-cookie",
                value: "sid=1; Path=/".into(),
            }],
        ),
        // Not served: digest authentication, which ramjet cannot enforce, keeps the Ingress out
        // rather than serving it open.
        Case {
            outcome: "not-served",
            ..case("digest", vec![a("auth-type", "digest"), a("auth-secret", "basic-auth")], vec![Probe::NotServed])
        },
    ];
    cases
}

/// The Ingress objects: every case, a canary of `plain-1` by header, and one of `plain-4` parked
/// at weight 0 (no request goes there).
fn ingresses(cases: &[Case]) -> String {
    let mut docs = Vec::new();
    for c in cases {
        let paths: Vec<Value> = c
            .paths
            .iter()
            .map(|(path, kind, service)| {
                json!({ "path": path, "pathType": kind, "backend": { "service": { "name": service, "port": { "name": "http" } } } })
            })
            .collect();
        let annotations: BTreeMap<&str, &str> = c.annotations.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut spec =
            json!({ "ingressClassName": "nginx", "rules": [{ "host": host(c.name), "http": { "paths": paths } }] });
        if c.tls {
            spec["tls"] = json!([{ "hosts": [host(c.name)], "secretName": "shop-tls" }]);
        }
        docs.push(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": { "name": c.name, "namespace": NS, "annotations": annotations },
            "spec": spec,
        }));
    }
    for (name, primary, annotations) in [
        (
            "plain-1-canary",
            "plain-1",
            json!({ format!("{NGINX}/canary"): "true", format!("{NGINX}/canary-by-header"): "X-Canary" }),
        ),
        (
            "plain-4-parked",
            "plain-4",
            json!({ format!("{NGINX}/canary"): "true", format!("{NGINX}/canary-weight"): "0" }),
        ),
    ] {
        docs.push(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": { "name": name, "namespace": NS, "annotations": annotations },
            "spec": { "ingressClassName": "nginx", "rules": [{ "host": host(primary), "http": { "paths": [
                { "path": "/", "pathType": "Prefix", "backend": { "service": { "name": "api", "port": { "name": "http" } } } }
            ] } }] },
        }));
    }
    docs.iter().map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap())).collect()
}

/// An oauth2-proxy's `/oauth2/auth`: 202 with the user's fields for a request with its cookie,
/// else 401.
fn oauth2_proxy() -> support::backend::HeadServer {
    support::backend::HeadServer::start(|head| {
        if head.to_ascii_lowercase().contains("_oauth2_proxy=alice") {
            "HTTP/1.1 202 Accepted\r\nx-auth-request-user: alice\r\nx-auth-request-email: alice@shop.example\r\ncontent-length: 0\r\n\r\n"
        } else {
            "HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n"
        }
    })
}

fn report(dir: &Path, dns: SocketAddr) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ramjet"))
        .args(["migration-report", "--manifests"])
        .arg(dir)
        .args(["--ingress-class", "nginx", "--nginx-controller", "ingress-nginx/ingress-nginx-controller"])
        .args(["--dns-server", &dns.to_string(), "--fail-on", "refused", "--format", "json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let json =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), json, String::from_utf8_lossy(&out.stderr).to_string())
}

/// Whether `probe` holds for the Ingress `name` (why not, when it does not).
fn check(probe: &Probe, name: &str, http: SocketAddr, https: SocketAddr) -> Result<(), String> {
    let host = host(name);
    let ask = |path: &str, extra: &str| {
        request(http, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}connection: close\r\n\r\n"))
    };
    let seen = |r: &Response, key: &str| r.body.lines().find_map(|l| l.strip_prefix(key)).unwrap_or("").to_string();
    let fail =
        |what: &str, r: &Response| Err(format!("{what}: {} {}", r.head, r.body.chars().take(300).collect::<String>()));
    match probe {
        Probe::Served { path, extra, backend, target } => {
            let r = ask(path, extra);
            if r.status != 200 || served_by(&r) != *backend || seen(&r, "target=") != *target {
                return fail(&format!("GET {path}: 200 from {backend} for {target}"), &r);
            }
        }
        Probe::Status { path, extra, status, location } => {
            let r = ask(path, extra);
            if r.status != *status || !r.header("location").unwrap_or("").starts_with(location.as_str()) {
                return fail(&format!("GET {path}: {status} {location}"), &r);
            }
        }
        Probe::Field { path, extra, name, value } => {
            let r = ask(path, extra);
            if !r.header(name).is_some_and(|v| v.contains(value.as_str())) {
                return fail(&format!("GET {path}: {name} has {value}"), &r);
            }
        }
        Probe::Upstream { path, backend, name, value } => {
            let r = ask(path, "");
            let field = r.body.lines().filter_map(|l| l.strip_prefix("header=")).find_map(|h| {
                let (k, v) = h.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            });
            if served_by(&r) != *backend || field.as_deref() != Some(*value) {
                return fail(&format!("GET {path}: {backend} sees {name}: {value}"), &r);
            }
        }
        Probe::Post { size, status } => {
            let body = "x".repeat(*size);
            let raw =
                format!("POST / HTTP/1.1\r\nHost: {host}\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n{body}");
            let r = request(http, &raw);
            if r.status != *status {
                return fail(&format!("POST {size} bytes: {status}"), &r);
            }
        }
        Probe::Https { hsts } => {
            let port = https.port();
            let out = Command::new("curl")
                .args(["-sk", "--http1.1", "--max-time", "10", "-o", "/dev/null", "-D", "-"])
                .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
                .arg(format!("https://{host}:{port}/"))
                .output()
                .unwrap();
            let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200")
                || !head.contains(&format!("strict-transport-security: {}", hsts.to_ascii_lowercase()))
            {
                return Err(format!("HTTPS: 200 with HSTS {hsts}: {head}"));
            }
        }
        Probe::OtherHost { host, backend } => {
            let r = request(http, &format!("GET / HTTP/1.1\r\nHost: {host}\r\nconnection: close\r\n\r\n"));
            if r.status != 200 || served_by(&r) != *backend {
                return fail(&format!("GET / as {host}: 200 from {backend}"), &r);
            }
        }
        Probe::Limited { n } => {
            let limited = (0..*n).filter(|_| ask("/", "").status == 503).count();
            if limited == 0 {
                return Err(format!("{n} quick requests: none limited"));
            }
        }
        Probe::NotServed => {
            let r = ask("/", "authorization: Basic dXNlcjpwYXNz\r\n");
            if served_by(&r) != "default-http-backend" {
                return fail("not served: the default backend answers", &r);
            }
        }
    }
    Ok(())
}

#[test]
fn a_realistic_ingress_nginx_installation_moves_over_as_the_report_says() {
    let dir = temp_dir("installation");
    let (web, api, statics) = (Backend::start("web"), Backend::start("api"), Backend::start("static"));
    let (errors, default_backend) = (Backend::start("errors"), Backend::start("default-http-backend"));
    let (partner, cluster) = (Backend::start("partner"), Backend::start("cluster"));
    let oauth = oauth2_proxy();
    let dns = DnsServer::start();
    dns.set("oauth2.partner.test", &[IpAddr::from([127, 0, 0, 1])], 30);
    dns.set("api.partner.test", &[IpAddr::from([127, 0, 0, 1])], 30);

    let cases = cases(oauth.addr.port());
    assert_eq!(cases.len() + 2, 50, "50 Ingresses, the two canaries included");
    let pki = support::pki::Pki::new("installation-pki");
    let names: Vec<String> = cases.iter().filter(|c| c.tls).map(|c| host(c.name)).collect();
    pki.leaf("shop", &names.iter().map(String::as_str).collect::<Vec<_>>());
    let b64 = |f: &str| support::control_plane::base64(&std::fs::read(pki.path(f)).unwrap());
    let service = |name: &str, backend: &Backend| {
        Service::new(NS, name).target_port(backend.addr.port()).endpoints(&[backend.addr]).yaml()
    };
    let objects = [
        // ingress-nginx's IngressClass, which ramjet takes over with --controller-name.
        "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: nginx }\nspec: { controller: k8s.io/ingress-nginx }\n".to_string(),
        service("web", &web),
        service("api", &api),
        service("static", &statics),
        service("errors", &errors),
        Service::new("ingress-nginx", "default-http-backend").target_port(default_backend.addr.port()).endpoints(&[default_backend.addr]).yaml(),
        Service::new(NS, "drained").yaml(),
        // Its cluster IP and port are where `cluster` listens; its endpoint is `web`.
        Service::new(NS, "clustered").port("http", cluster.addr.port()).cluster_ip("127.0.0.1").endpoints(&[web.addr]).yaml(),
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{ name: partner, namespace: {NS} }}\nspec:\n  type: ExternalName\n  \
             externalName: api.partner.test\n  ports: [{{ name: http, port: 80, targetPort: {} }}]\n",
            partner.addr.port()
        ),
        format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: shop-tls, namespace: {NS} }}\ntype: kubernetes.io/tls\n\
             data:\n  tls.crt: {}\n  tls.key: {}\n",
            b64("shop.crt"),
            b64("shop.key")
        ),
        format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: basic-auth, namespace: {NS} }}\ntype: Opaque\n\
             stringData:\n  auth: \"user:{}\"\n",
            "$apr1$yYNSU3pK$9FnhfFpSQda7B41NwMsDZ."
        ),
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: security-headers, namespace: {NS} }}\n\
             data:\n  X-Frame-Options: DENY\n  X-Content-Type-Options: nosniff\n"
        ),
        ingresses(&cases),
    ]
    .concat();
    std::fs::write(dir.join("shop.yaml"), objects).unwrap();
    std::fs::write(dir.join("controller.yaml"), CONTROLLER).unwrap();
    std::fs::write(dir.join("controller-configmap.yaml"), CONFIGMAP).unwrap();

    // The report, as a CI would run it.
    let (code, json, stderr) = report(&dir, dns.addr);
    assert_eq!(code, Some(0), "--fail-on refused passes: {json:#}\n{stderr}");
    let outcomes: BTreeMap<String, String> = json["ingresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].as_str().unwrap().to_string(), i["outcome"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(outcomes.len(), 50, "{outcomes:?}");
    let flag =
        json["controller"]["findings"].as_array().unwrap().iter().find(|f| f["key"] == "default-backend-service");
    let advice = flag.map(|f| f["detail"].as_str().unwrap_or("").to_string()).unwrap_or_default();
    assert!(advice.contains("`default-backend-service: ingress-nginx/default-http-backend`"), "{advice}");

    // The daemon, with the ConfigMap as its controller configuration and the report's advice.
    let config_dir = temp_dir("installation-config");
    let data = CONFIGMAP.split_once("data:\n").unwrap().1;
    let config = config_dir.join("config.yaml");
    std::fs::write(
        &config,
        format!("{}default-backend-service: ingress-nginx/default-http-backend\n", data.replace("  ", "")),
    )
    .unwrap();
    let mut daemon = DaemonConfig::with_source(Source::Manifests {
        dir: dir.clone(),
        options: IngressOptions {
            ingress_class: "nginx".into(),
            controller_name: "k8s.io/ingress-nginx".into(),
            ..IngressOptions::default()
        },
        interval: Duration::from_millis(50),
    });
    daemon.io_driver = IoDriver::Auto;
    daemon.config = Some(ConfigFile::read(&config).expect("the configuration reads"));
    daemon.dns = DnsSettings {
        servers: Some(vec![dns.addr]),
        min_ttl: Duration::from_secs(1),
        max_ttl: Duration::from_secs(30),
    };
    let d = Daemon::start(daemon).expect("the daemon starts");
    let (http, https) = (d.http_addr(), d.https_addr().expect("an HTTPS listener"));
    // Served once the names outside the cluster have their answers.
    assert!(
        eventually(Duration::from_secs(10), || served_by(&request(
            http,
            "GET / HTTP/1.1\r\nHost: partner.shop.example\r\nconnection: close\r\n\r\n"
        )) == "partner"),
        "the ExternalName Service resolves"
    );

    let mut mismatches = Vec::new();
    for c in &cases {
        let reported = outcomes.get(c.name).map(String::as_str).unwrap_or("missing");
        if reported != c.outcome {
            let found = json["ingresses"].as_array().unwrap().iter().find(|i| i["name"] == c.name).cloned();
            mismatches.push(format!(
                "{}: the report says {reported}, expected {}: {}",
                c.name,
                c.outcome,
                found.unwrap_or_default()
            ));
        }
        for probe in &c.probes {
            if let Err(why) = check(probe, c.name, http, https) {
                mismatches.push(format!("{} ({reported}): {why}", c.name));
            }
        }
    }
    // The canaries: a header sends a request to the canary's Service; without it, the primary.
    for (name, extra, backend) in [("plain-1", "X-Canary: always\r\n", "api"), ("plain-1", "", "web")] {
        let probe = Probe::Served { path: "/c", extra: extra.into(), backend, target: "/c" };
        if let Err(why) = check(&probe, name, http, https) {
            mismatches.push(format!("canary of {name}: {why}"));
        }
    }
    for canary in ["plain-1-canary", "plain-4-parked"] {
        let reported = outcomes.get(canary).map(String::as_str).unwrap_or("missing");
        if reported != "served" {
            let found = json["ingresses"].as_array().unwrap().iter().find(|i| i["name"] == canary).cloned();
            mismatches.push(format!("{canary}: the report says {reported}: {}", found.unwrap_or_default()));
        }
    }
    let last =
        errors.requests() + default_backend.requests() + cluster.requests() + statics.requests() + api.requests();
    assert!(last > 0);
    d.shutdown();
    assert!(mismatches.is_empty(), "{} mismatches:\n{}", mismatches.len(), mismatches.join("\n"));
}
