//! Gateway API conformance, translated: the HTTPRoute core test cases of
//! `sigs.k8s.io/gateway-api/conformance` (v1.4.0, from the Go module cache), each with the suite's own
//! base manifests and the test's own manifest, unchanged but for the GatewayClass name the suite
//! templates in. Ramjet reads them as `--manifests`; every Service they name is a real local backend
//! (named `namespace/service`) behind an EndpointSlice the harness writes, since there is no kubelet
//! to run the suite's echo Pods. The expectations are the ones in each test's `.go` file.
//!
//! `docs/gateway-api.md` lists what passes in the suite's vocabulary, and what is not translated.

#[path = "support/h2client.rs"]
#[allow(dead_code)]
mod h2client;
mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use serde_yaml::Value;
use support::backend::Backend;
use support::client::{served_by, Conn, Response};
use support::{temp_dir, wait_serving};

const MODULE: &str = "sigs.k8s.io/gateway-api@v1.4.0";
const CLASS: &str = "ramjet-conformance";
const INFRA: &str = "gateway-conformance-infra";

fn module_dir() -> PathBuf {
    let out = Command::new("go")
        .args(["mod", "download", "-json", MODULE])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run go mod download");
    assert!(out.status.success(), "go mod download {MODULE}: {}", String::from_utf8_lossy(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(info["Dir"].as_str().unwrap())
}

/// One test's cluster: the suite's base manifests and the test's manifest, served by ramjet.
struct Suite {
    daemon: Daemon,
    backends: BTreeMap<String, Backend>,
}

impl Suite {
    fn start(test: &str) -> Suite {
        let module = module_dir();
        let read = |path: &str| std::fs::read_to_string(module.join("conformance").join(path)).unwrap();
        let base = read("base/manifests.yaml").replace("{GATEWAY_CLASS_NAME}", CLASS);
        let test_yaml = read(&format!("tests/{test}"));
        let class = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{ name: {CLASS} }}\n\
             spec: {{ controllerName: ramjet.dev/gateway-controller }}\n"
        );
        // A backend and an EndpointSlice for every Service of the manifests.
        let mut backends = BTreeMap::new();
        let mut slices = String::new();
        for text in [&base, &test_yaml] {
            for doc in serde_yaml::Deserializer::from_str(text) {
                let Ok(doc) = <Value as serde::Deserialize>::deserialize(doc) else { continue };
                if doc["kind"] != "Service" {
                    continue;
                }
                let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
                let name = doc["metadata"]["name"].as_str().unwrap().to_string();
                let backend = Backend::start(&format!("{ns}/{name}"));
                let port_name = doc["spec"]["ports"][0]["name"].as_str().unwrap_or("");
                slices.push_str(&format!(
                    "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
                     metadata: {{ name: {name}-local, namespace: {ns}, labels: {{ kubernetes.io/service-name: {name} }} }}\n\
                     addressType: IPv4\nports: [{{ name: \"{port_name}\", port: {} }}]\n\
                     endpoints: [{{ addresses: [\"{}\"] }}]\n",
                    backend.addr.port(),
                    backend.addr.ip()
                ));
                backends.insert(format!("{ns}/{name}"), backend);
            }
        }
        let dir = temp_dir("conformance");
        std::fs::write(dir.join("0-base.yaml"), format!("{class}---\n{base}")).unwrap();
        std::fs::write(dir.join("1-test.yaml"), test_yaml).unwrap();
        std::fs::write(dir.join("2-endpoints.yaml"), slices).unwrap();
        let mut config = DaemonConfig::with_source(Source::Manifests {
            dir,
            options: IngressOptions::default(),
            interval: Duration::from_secs(3600),
        });
        config.io_driver = IoDriver::Auto;
        let daemon = Daemon::start(config).expect("the daemon starts");
        wait_serving(&daemon, 1);
        Suite { daemon, backends }
    }

    fn send(&self, method: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut conn = Conn::open(self.daemon.http_addr());
        let extra: String = headers.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
        conn.send(format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n").as_bytes());
        conn.read_response_to(method == "HEAD").expect("an answer")
    }

    /// Checks one case: `want` is `namespace/service` for a backend, or a status code.
    fn expect(&self, method: &str, host: &str, path: &str, headers: &[(&str, &str)], want: &str) {
        let resp = self.send(method, host, path, headers);
        let got = if resp.status == 200 { served_by(&resp) } else { resp.status.to_string() };
        let want = if want.contains('/') || want.parse::<u16>().is_ok() {
            want.to_string()
        } else {
            format!("{INFRA}/{want}")
        };
        assert_eq!(got, want, "{method} {host}{path} {headers:?}");
    }

    fn get(&self, path: &str, want: &str) {
        self.expect("GET", "example.com", path, &[], want);
    }

    /// The last request `infra/<backend>` received, as the suite's echo server reports it: the
    /// path, and each header's values joined with `,` (names lower case).
    fn seen_by(&self, backend: &str) -> (String, BTreeMap<String, String>) {
        let received = self.backends[&format!("{INFRA}/{backend}")].received();
        let start = received.rfind("GET ").expect("a request reached the backend");
        let head = received[start..].split("\r\n\r\n").next().unwrap();
        let mut lines = head.split("\r\n");
        let path = lines.next().unwrap().split(' ').nth(1).unwrap().to_string();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for line in lines {
            let (name, value) = line.split_once(':').unwrap();
            let entry = headers.entry(name.trim().to_ascii_lowercase()).or_default();
            if !entry.is_empty() {
                entry.push(',');
            }
            entry.push_str(value.trim());
        }
        (path, headers)
    }

    /// Sends a GET and checks what infra-backend-v1 received: the path, `want` headers, `absent` ones.
    fn expect_request(
        &self,
        path: &str,
        sent: &[(&str, &str)],
        want_path: &str,
        want: &[(&str, &str)],
        absent: &[&str],
    ) {
        let resp = self.send("GET", "example.com", path, sent);
        assert_eq!((resp.status, served_by(&resp)), (200, format!("{INFRA}/infra-backend-v1")), "{path}");
        let (seen, headers) = self.seen_by("infra-backend-v1");
        assert_eq!(seen, want_path, "{path}");
        for (name, value) in want {
            assert_eq!(
                headers.get(&name.to_ascii_lowercase()).map(String::as_str),
                Some(*value),
                "{path}: {name} in {headers:?}"
            );
        }
        for name in absent {
            assert!(!headers.contains_key(&name.to_ascii_lowercase()), "{path}: {name} in {headers:?}");
        }
    }

    /// Waits for a copy of a request for `path` to reach `infra/<backend>`, as the suite's
    /// `ExpectMirroredRequest` reads the mirror backend's log.
    fn expect_mirrored(&self, backend: &str, path: &str) {
        let backend = &self.backends[&format!("{INFRA}/{backend}")];
        let line = format!("GET {path} HTTP/1.1\r\n");
        let copied = support::eventually(Duration::from_secs(5), || backend.received().contains(&line));
        assert!(copied, "no copy of {path} reached the mirror; it received:\n{}", backend.received());
    }

    /// Sends a GET and checks the redirect: status and `Location` (`host` `None`: the request's).
    fn expect_redirect(&self, path: &str, status: u16, host: Option<&str>, want_path: &str) {
        self.expect_location(path, status, &format!("http://{}{want_path}", host.unwrap_or("example.com")));
    }

    /// Sends a GET and checks the redirect: status and the whole `Location`.
    fn expect_location(&self, path: &str, status: u16, location: &str) {
        let resp = self.send("GET", "example.com", path, &[]);
        assert_eq!((resp.status, resp.header("location")), (status, Some(location)), "{path}");
    }
}

#[test]
fn httproute_matching() {
    let s = Suite::start("httproute-matching.yaml");
    s.get("/", "infra-backend-v1");
    s.get("/example", "infra-backend-v1");
    s.expect("GET", "example.com", "/", &[("Version", "one")], "infra-backend-v1");
    s.get("/v2", "infra-backend-v2");
    s.get("/v2/example", "infra-backend-v2");
    s.expect("GET", "example.com", "/", &[("Version", "two")], "infra-backend-v2");
    s.get("/v2/", "infra-backend-v2");
    s.get("/v2example", "infra-backend-v1");
    s.get("/foo/v2/example", "infra-backend-v1");
}

#[test]
fn httproute_exact_path_matching() {
    let s = Suite::start("httproute-exact-path-matching.yaml");
    s.get("/one", "infra-backend-v1");
    s.get("/two", "infra-backend-v2");
    s.get("/", "404");
    s.get("/one/example", "404");
    s.get("/two/", "404");
    s.get("/Two", "404");
}

#[test]
fn httproute_method_matching() {
    let s = Suite::start("httproute-method-matching.yaml");
    let h = "example.com";
    s.expect("POST", h, "/", &[], "infra-backend-v1");
    s.expect("GET", h, "/", &[], "infra-backend-v2");
    s.expect("HEAD", h, "/", &[], "404");
    s.expect("GET", h, "/path1", &[], "infra-backend-v1");
    s.expect("PUT", h, "/", &[("version", "one")], "infra-backend-v2");
    s.expect("POST", h, "/path2", &[("version", "two")], "infra-backend-v3");
    s.expect("PATCH", h, "/path3", &[], "infra-backend-v1");
    s.expect("DELETE", h, "/path4", &[("version", "three")], "infra-backend-v1");
    s.expect("PUT", h, "/", &[], "404");
    s.expect("DELETE", h, "/path4", &[], "404");
    s.expect("PATCH", h, "/path5", &[], "infra-backend-v1");
    s.expect("PATCH", h, "/", &[("version", "four")], "infra-backend-v2");
}

#[test]
fn httproute_query_param_matching() {
    let s = Suite::start("httproute-query-param-matching.yaml");
    s.get("/?animal=whale", "infra-backend-v1");
    s.get("/?animal=dolphin", "infra-backend-v2");
    s.get("/?animal=dolphin&color=blue", "infra-backend-v3");
    s.get("/?ANIMAL=Whale", "infra-backend-v3");
    s.get("/?animal=whale&otherparam=irrelevant", "infra-backend-v1");
    s.get("/?animal=dolphin&color=yellow", "infra-backend-v2");
    s.get("/?color=blue", "404");
    s.get("/?animal=dog", "404");
    s.get("/?animal=whaledolphin", "404");
    s.get("/", "404");
    s.get("/path1?animal=whale", "infra-backend-v1");
    s.expect("GET", "example.com", "/?animal=whale", &[("version", "one")], "infra-backend-v2");
    s.expect("GET", "example.com", "/path2?animal=whale", &[("version", "two")], "infra-backend-v3");
    s.get("/path3?animal=shark", "infra-backend-v1");
}

#[test]
fn httproute_path_match_order() {
    let s = Suite::start("httproute-path-match-order.yaml");
    s.get("/match/exact/one", "infra-backend-v3");
    s.get("/match/exact", "infra-backend-v2");
    s.get("/match", "infra-backend-v1");
    s.get("/match/prefix/one/any", "infra-backend-v2");
    s.get("/match/prefix/any", "infra-backend-v1");
    s.get("/match/any", "infra-backend-v3");
}

#[test]
fn httproute_matching_across_routes() {
    let s = Suite::start("httproute-matching-across-routes.yaml");
    let (com, net) = ("example.com", "example.net");
    s.expect("GET", com, "/", &[], "infra-backend-v1");
    s.expect("GET", com, "/example", &[], "infra-backend-v1");
    s.expect("GET", net, "/example", &[], "infra-backend-v1");
    s.expect("GET", com, "/example", &[("Version", "one")], "infra-backend-v1");
    s.expect("GET", com, "/v2", &[], "infra-backend-v2");
    s.expect("GET", net, "/v2", &[], "infra-backend-v1");
    s.expect("GET", com, "/v2/example", &[], "infra-backend-v2");
    s.expect("GET", com, "/", &[("Version", "two")], "infra-backend-v2");
}

#[test]
fn httproute_header_matching() {
    let s = Suite::start("httproute-header-matching.yaml");
    let h = "example.com";
    s.expect("GET", h, "/", &[("Version", "one")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Version", "two")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Version", "two"), ("Color", "orange")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Version", "two"), ("Color", "blue")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Color", "orange")], "404");
    s.expect("GET", h, "/", &[("Some-Other-Header", "one")], "404");
    s.expect("GET", h, "/", &[("Color", "blue")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Color", "green")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Color", "red")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Color", "yellow")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Color", "purple")], "404");
}

#[test]
fn httproute_cross_namespace() {
    let s = Suite::start("httproute-cross-namespace.yaml");
    s.get("/", "gateway-conformance-web-backend/web-backend");
}

#[test]
fn httproute_weight() {
    let s = Suite::start("httproute-weight.yaml");
    // As the suite: a sample of 500 requests must fall within 5 points either way of 70/30/0, and
    // a sample that misses is taken again, up to 10 times (5 points is about 2.4 standard
    // deviations of a 500-request sample, so one sample in 70 misses by chance). Backend v3, with
    // weight 0, must never answer in any sample.
    let mut conn = Conn::open(s.daemon.http_addr());
    let mut samples = Vec::new();
    for _ in 0..10 {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..500 {
            let resp = conn.get("example.com", "/");
            assert_eq!(resp.status, 200);
            *seen.entry(served_by(&resp)).or_default() += 1;
        }
        let share = |b: &str| seen.get(&format!("{INFRA}/{b}")).copied().unwrap_or(0) as f64 / 500.0;
        assert_eq!(share("infra-backend-v3"), 0.0, "{seen:?}");
        let within = (share("infra-backend-v1") - 0.7).abs() <= 0.05 && (share("infra-backend-v2") - 0.3).abs() <= 0.05;
        samples.push(seen);
        if within {
            return;
        }
    }
    panic!("no sample within 5 points of 70/30: {samples:?}");
}

#[test]
fn httproute_rewrite_path() {
    let s = Suite::start("httproute-rewrite-path.yaml");
    s.expect_request("/prefix/one/two", &[], "/one/two", &[], &[]);
    s.expect_request("/strip-prefix/three", &[], "/three", &[], &[]);
    s.expect_request("/strip-prefix", &[], "/", &[], &[]);
    s.expect_request("/full/one/two", &[], "/one", &[], &[]);
    s.expect_request(
        "/full/rewrite-path-and-modify-headers/test",
        &[("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1"), ("X-Header-Set", "set-val")],
        "/test",
        &[
            ("X-Header-Add", "header-val-1"),
            ("X-Header-Add-Append", "append-val-1,header-val-2"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &["X-Header-Remove"],
    );
}

#[test]
fn httproute_request_header_modifier() {
    let s = Suite::start("httproute-request-header-modifier.yaml");
    let other = ("Some-Other-Header", "val");
    s.expect_request("/set", &[other], "/set", &[other, ("X-Header-Set", "set-overwrites-values")], &[]);
    s.expect_request(
        "/set",
        &[other, ("X-Header-Set", "some-other-value")],
        "/set",
        &[other, ("X-Header-Set", "set-overwrites-values")],
        &[],
    );
    s.expect_request("/add", &[other], "/add", &[other, ("X-Header-Add", "add-appends-values")], &[]);
    s.expect_request(
        "/add",
        &[other, ("X-Header-Add", "some-other-value")],
        "/add",
        &[other, ("X-Header-Add", "some-other-value,add-appends-values")],
        &[],
    );
    s.expect_request("/remove", &[("X-Header-Remove", "val")], "/remove", &[], &["X-Header-Remove"]);
    s.expect_request(
        "/multiple",
        &[
            ("X-Header-Set-2", "set-val-2"),
            ("X-Header-Add-2", "add-val-2"),
            ("X-Header-Remove-2", "remove-val-2"),
            ("Another-Header", "another-header-val"),
        ],
        "/multiple",
        &[
            ("X-Header-Set-1", "header-set-1"),
            ("X-Header-Set-2", "header-set-2"),
            ("X-Header-Add-1", "header-add-1"),
            ("X-Header-Add-2", "add-val-2,header-add-2"),
            ("X-Header-Add-3", "header-add-3"),
            ("Another-Header", "another-header-val"),
        ],
        &["X-Header-Remove-1", "X-Header-Remove-2"],
    );
    s.expect_request(
        "/case-insensitivity",
        &[
            ("x-header-set", "original-val-set"),
            ("x-header-add", "original-val-add"),
            ("x-header-remove", "original-val-remove"),
            ("Another-Header", "another-header-val"),
        ],
        "/case-insensitivity",
        &[
            ("X-Header-Set", "header-set"),
            ("X-Header-Add", "original-val-add,header-add"),
            ("Another-Header", "another-header-val"),
        ],
        &["x-header-remove"],
    );
}

#[test]
fn httproute_redirect_path() {
    let s = Suite::start("httproute-redirect-path.yaml");
    s.expect_redirect("/original-prefix/lemon", 302, None, "/replacement-prefix/lemon");
    s.expect_redirect("/full/path/original", 302, None, "/full-path-replacement");
    s.expect_redirect("/path-and-host", 302, Some("example.org"), "/replacement-prefix");
    s.expect_redirect("/path-and-status", 301, None, "/replacement-prefix");
    s.expect_redirect("/full-path-and-host", 302, Some("example.org"), "/replacement-full");
    s.expect_redirect("/full-path-and-status", 301, None, "/replacement-full");
}

#[test]
fn httproute_request_multiple_mirrors() {
    let s = Suite::start("httproute-request-multiple-mirrors.yaml");
    s.expect_request("/multi-mirror", &[], "/multi-mirror", &[], &[]);
    for mirror in ["infra-backend-v2", "infra-backend-v3"] {
        s.expect_mirrored(mirror, "/multi-mirror");
    }
    let path = "/multi-mirror-and-modify-request-headers";
    s.expect_request(
        path,
        &[("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1")],
        path,
        &[
            ("X-Header-Add", "header-val-1"),
            ("X-Header-Add-Append", "append-val-1,header-val-2"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &["X-Header-Remove"],
    );
    for mirror in ["infra-backend-v2", "infra-backend-v3"] {
        s.expect_mirrored(mirror, path);
    }
}

#[test]
fn httproute_redirect_host_and_status() {
    let s = Suite::start("httproute-redirect-host-and-status.yaml");
    s.expect_redirect("/hostname-redirect", 302, Some("example.org"), "/hostname-redirect");
    s.expect_redirect("/host-and-status", 301, Some("example.org"), "/host-and-status");
}

/// The suite's `http-listener-on-80` cases; the route on the 8080 listener and the one on the
/// HTTPS listener need a listener port ramjet does not have here and the suite's certificates.
#[test]
fn httproute_redirect_port_and_scheme_on_the_port_80_listener() {
    let s = Suite::start("httproute-redirect-port-and-scheme.yaml");
    for (path, location) in [
        ("/scheme-nil-and-port-nil", "http://example.org/scheme-nil-and-port-nil"),
        ("/scheme-nil-and-port-80", "http://example.org/scheme-nil-and-port-80"),
        ("/scheme-nil-and-port-8080", "http://example.org:8080/scheme-nil-and-port-8080"),
        ("/scheme-https-and-port-nil", "https://example.org/scheme-https-and-port-nil"),
        ("/scheme-https-and-port-443", "https://example.org/scheme-https-and-port-443"),
        ("/scheme-https-and-port-8443", "https://example.org:8443/scheme-https-and-port-8443"),
    ] {
        s.expect_location(path, 302, location);
    }
}

#[test]
fn httproute_request_timeout() {
    let s = Suite::start("httproute-timeout-request.yaml");
    s.get("/request-timeout", "infra-backend-v1");
    s.get("/request-timeout?delay=1s", "504");
    s.get("/disable-request-timeout?delay=1s", "infra-backend-v1");
}

#[test]
fn httproute_backend_request_timeout() {
    let s = Suite::start("httproute-timeout-backend-request.yaml");
    s.get("/backend-timeout", "infra-backend-v1");
    s.get("/backend-timeout?delay=1s", "504");
    s.get("/disable-backend-timeout?delay=1s", "infra-backend-v1");
}
