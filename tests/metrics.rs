//! `/metrics` is valid Prometheus text: parsed by the Prometheus project's own Python parser (a
//! virtualenv under `target/`, created on first use), and by `promtool check metrics` (taken from
//! Debian's `prometheus` package into `target/` when it is not installed). The per route and
//! backend series count what the requests did, and the series of a route that left the
//! configuration go away after the grace period.

use ramjet_test_support as support;

use std::path::Path;
use std::process::{Command, Stdio};

use std::time::Duration;

use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::client::{get, request};
use support::{daemon, daemon_with, dead_addr, eventually, routes, wait_serving};

/// `promtool`: on the PATH, or extracted from Debian's `prometheus` package under `target/`.
fn promtool() -> String {
    // The tests of this file run in parallel: one of them installs.
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if Command::new("promtool").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return "promtool".into();
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = format!("{root}/target/promtool");
    let binary = format!("{dir}/usr/bin/promtool");
    if !Path::new(&binary).exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let fetched = Command::new("apt-get").args(["download", "prometheus"]).current_dir(&dir).status();
        assert!(fetched.is_ok_and(|s| s.success()), "promtool is missing and `apt-get download prometheus` failed");
        let deb = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .expect("the downloaded package");
        let extracted = Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&dir).status();
        assert!(extracted.is_ok_and(|s| s.success()), "cannot extract {}", deb.display());
    }
    binary
}

fn check_with_promtool(text: &str) {
    let mut promtool = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(promtool.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let out = promtool.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics:\n{said}\n{text}");
}

fn metrics(admin: std::net::SocketAddr) -> String {
    request(admin, "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").body
}

/// The value of one sample of `/metrics` (`series` as written, labels included).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A Python with `prometheus-client`, created once per test binary. The venv is built under a
/// private name and renamed into place, so tests (or binaries) racing to create it never see half of one.
fn venv_python() -> String {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let root = env!("CARGO_MANIFEST_DIR");
            let venv = format!("{root}/target/metrics-venv");
            let python = format!("{venv}/bin/python");
            if Path::new(&python).exists() {
                return python;
            }
            let building = format!("{venv}.building-{}", std::process::id());
            let _ = std::fs::remove_dir_all(&building);
            let built = Command::new("python3").args(["-m", "venv", &building]).status().is_ok_and(|s| s.success())
                && Command::new(format!("{building}/bin/python"))
                    .args(["-m", "pip", "install", "-q", "prometheus-client==0.21.1"])
                    .status()
                    .is_ok_and(|s| s.success());
            assert!(built, "could not create {venv} with prometheus-client (python3-venv and PyPI are needed)");
            // Another binary may have finished first; then its venv is used and ours is dropped.
            if std::fs::rename(&building, &venv).is_err() {
                let _ = std::fs::remove_dir_all(&building);
            }
            assert!(Path::new(&python).exists(), "{python} is missing after creating the venv");
            python
        })
        .clone()
}

#[test]
fn metrics_parse_as_prometheus_text() {
    let d = daemon(
        "backends:\n  hi: { respond: { status: 200, body: \"hi\" } }\nroutes:\n  - { path: /, backend: hi }\n",
        IoDriver::IoUring,
    );
    for _ in 0..3 {
        assert_eq!(get(d.http_addr(), "h", "/").status, 200);
    }
    let text = request(d.admin_addr(), "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").body;
    assert!(text.contains("ramjet_requests_total{class=\"2xx\"} 3"), "{text}");
    // Which build, whether it leads (never, without a cluster), and the process's own figures.
    let build = text.lines().find(|l| l.starts_with("ramjet_build_info{")).expect("ramjet_build_info");
    assert!(build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))) && build.ends_with(" 1"), "{build}");
    assert_eq!(value(&text, "ramjet_leader"), Some(0.0));
    assert!(value(&text, "process_resident_memory_bytes").is_some_and(|b| b > 1e6), "{text}");
    assert!(value(&text, "process_open_fds").is_some_and(|n| n >= 3.0), "{text}");
    let started = value(&text, "process_start_time_seconds").unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(started <= now + 1.0 && started > now - 3600.0, "started {started}, now {now}");
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
families = {f.name: f for f in text_string_to_metric_families(sys.stdin.read())}
for name in ["ramjet_requests", "ramjet_upstream_errors", "ramjet_connections_active", "ramjet_pinned",
             "ramjet_serving_generation", "ramjet_publish_duration_seconds", "ramjet_build_info", "ramjet_leader",
             "process_cpu_seconds", "process_resident_memory_bytes", "process_start_time_seconds"]:
    assert name in families, name
print(len(families))
"#;
    let mut child =
        Command::new(venv_python()).args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the Prometheus parser refused /metrics:\n{text}");
    check_with_promtool(&text);
    d.shutdown();
}

#[test]
fn route_series_count_what_requests_did() {
    let backend = Backend::start("app");
    let dead = dead_addr();
    let yaml = format!(
        "backends:\n  app: {{ endpoints: [\"{}\"] }}\n  hi: {{ respond: {{ status: 200, body: \"hi\" }} }}\n  dead: {{ endpoints: [\"{dead}\"] }}\nroutes:\n  - {{ host: app.test, path: /, backend: app }}\n  - {{ host: hi.test, path: /, backend: hi }}\n  - {{ host: dead.test, path: /, backend: dead }}\n",
        backend.addr
    );
    let d = daemon_with(routes(&yaml), IoDriver::IoUring, |c| c.settings.metrics_grace = Duration::from_secs(2));
    let http = d.http_addr();
    for _ in 0..5 {
        assert_eq!(get(http, "app.test", "/ok").status, 200);
    }
    assert_eq!(get(http, "app.test", "/slow/300").status, 200);
    assert_eq!(get(http, "app.test", "/nobody/503").status, 503);
    for _ in 0..3 {
        assert_eq!(get(http, "hi.test", "/").status, 200);
    }
    for _ in 0..2 {
        assert_eq!(get(http, "dead.test", "/").status, 502);
    }
    assert_eq!(get(http, "nowhere.test", "/").status, 404);
    // A request's series is updated once its response has been written: the scrape may come first.
    let all_done = [
        r#"ramjet_route_requests_total{route="routes[0]",backend="app",route_kind="static",class="2xx"} 6"#,
        r#"ramjet_route_requests_total{route="routes[0]",backend="app",route_kind="static",class="5xx"} 1"#,
        r#"ramjet_route_requests_total{route="routes[1]",backend="hi",route_kind="static",class="2xx"} 3"#,
        r#"ramjet_route_requests_total{route="routes[2]",backend="dead",route_kind="static",class="5xx"} 2"#,
    ];
    assert!(eventually(Duration::from_secs(5), || {
        let text = metrics(d.admin_addr());
        all_done.iter().all(|s| text.contains(s))
    }));
    let text = metrics(d.admin_addr());
    let app = r#"route="routes[0]",backend="app",route_kind="static""#;
    let v = |series: &str| value(&text, series).unwrap_or_else(|| panic!("no sample {series}:\n{text}"));
    assert_eq!(v(&format!("ramjet_route_requests_total{{{app},class=\"2xx\"}}")), 6.0);
    assert_eq!(v(&format!("ramjet_route_requests_total{{{app},class=\"5xx\"}}")), 1.0);
    assert_eq!(v(&format!("ramjet_route_request_duration_seconds_count{{{app}}}")), 7.0);
    // The 300 ms request lies above the 0.25 s bound and within 0.5 s; the rest below 0.25 s.
    assert_eq!(v(&format!("ramjet_route_request_duration_seconds_bucket{{{app},le=\"0.25\"}}")), 6.0);
    assert_eq!(v(&format!("ramjet_route_upstream_response_seconds_bucket{{{app},le=\"0.5\"}}")), 7.0);
    assert!(v(&format!("ramjet_route_request_duration_seconds_sum{{{app}}}")) >= 0.3);
    assert!(v(&format!("ramjet_route_request_bytes_total{{{app}}}")) >= 7.0 * 30.0);
    assert!(v(&format!("ramjet_route_response_bytes_total{{{app}}}")) > 6.0 * 100.0);
    let hi = r#"route="routes[1]",backend="hi",route_kind="static""#;
    assert_eq!(v(&format!("ramjet_route_requests_total{{{hi},class=\"2xx\"}}")), 3.0);
    assert_eq!(
        v(&format!("ramjet_route_upstream_response_seconds_count{{{hi}}}")),
        0.0,
        "no upstream for a direct answer"
    );
    let dead_labels = r#"route="routes[2]",backend="dead",route_kind="static""#;
    assert_eq!(v(&format!("ramjet_route_requests_total{{{dead_labels},class=\"5xx\"}}")), 2.0);
    assert_eq!(v(&format!("ramjet_route_upstream_connect_errors_total{{{dead_labels}}}")), 2.0);
    assert!(!text.contains("nowhere"), "no series without a route, and never a host or path label");
    check_with_promtool(&text);

    // The same counters as JSON, for ramjet-top.
    let traffic = request(d.admin_addr(), "GET /admin/traffic HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_eq!(traffic.status, 200);
    let traffic: ramjet_shared::admin::Traffic = serde_json::from_str(&traffic.body).unwrap();
    assert_eq!(traffic.bounds.len(), 11);
    let app_traffic = traffic.routes.iter().find(|r| r.backend == "app").expect("the app route");
    assert_eq!((app_traffic.route.as_str(), app_traffic.requests, app_traffic.server_errors), ("routes[0]", 7, 1));
    assert_eq!(app_traffic.duration_buckets.iter().sum::<u64>(), 7);
    assert_eq!(
        ramjet_shared::admin::RouteTraffic::quantile_bound(&traffic.bounds, &app_traffic.duration_buckets, 0.99),
        Some(0.5),
        "the slowest of 7 requests took 300 ms"
    );
    let dead_traffic = traffic.routes.iter().find(|r| r.backend == "dead").unwrap();
    assert_eq!(dead_traffic.upstream_connect_errors, 2);

    // The `hi` route leaves the configuration: its series goes after the grace period, the others stay.
    let without_hi = yaml.replace("  - { host: hi.test, path: /, backend: hi }\n", "");
    d.submit(routes(&without_hi));
    wait_serving(&d, 2);
    assert!(metrics(d.admin_addr()).contains(hi), "kept during the grace period");
    assert!(
        eventually(Duration::from_secs(15), || !metrics(d.admin_addr())
            .contains(r#"backend="hi",route_kind="static""#)),
        "the vanished route's series is dropped after the grace period"
    );
    let text = metrics(d.admin_addr());
    assert!(text.contains(app), "{text}");
    d.shutdown();
}

/// Each TLS host's certificate expiry, from the serving generation: what an alert on renewals that
/// did not happen (cert-manager's, or a file that was not replaced) reads.
#[test]
fn certificate_expiry_is_exported_per_host() {
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("metrics-expiry");
    let not_after = rcgen::date_time_ymd(2031, 7, 1);
    pki.leaf_with("example", &["example.com"], |p| p.not_after = not_after);
    pki.leaf("wild", &["*.example.com"]);
    let yaml = "backends:\n  hi: { respond: { status: 200 } }\nroutes:\n  - { path: /, backend: hi }\n\
                tls:\n  - { hosts: [example.com], certFile: example.crt, keyFile: example.key }\n  \
                - { hosts: [\"*.example.com\"], certFile: wild.crt, keyFile: wild.key }\n";
    let d = daemon_with(support::routes_in(yaml, &pki.dir), IoDriver::Auto, |_| {});
    let text = metrics(d.admin_addr());
    let example = pki.path("example.crt").display().to_string();
    let series =
        format!("ramjet_ssl_certificate_expiry_timestamp_seconds{{host=\"example.com\",secret=\"{example}\"}}");
    assert_eq!(value(&text, &series), Some(not_after.unix_timestamp() as f64), "{text}");
    let wild = format!(
        "ramjet_ssl_certificate_expiry_timestamp_seconds{{host=\"*.example.com\",secret=\"{}\"}}",
        pki.path("wild.crt").display()
    );
    assert!(value(&text, &wild).is_some_and(|t| t > 1.7e9), "{text}");
    check_with_promtool(&text);
    d.shutdown();
}

/// An Ingress's series name its namespace, Ingress and Service in labels of their own, and with
/// `--metrics-status-codes` count each status code: what queries and ingress-nginx's dashboards
/// select on, without taking `route` apart.
#[test]
fn ingress_series_have_namespace_ingress_service_and_status_code_labels() {
    use ramjet::{DaemonConfig, Source};
    use ramjet_control::compile::ingress::IngressOptions;
    use support::manifests::{ingress_class, service, Ingress};

    let a = Backend::start("a");
    let dir = support::temp_dir("metrics-labels");
    let mut text = [ingress_class("ramjet"), service("shop", "web", a.addr)].concat();
    text.push_str(
        &Ingress::new("shop", "storefront").host("shop.test").port_number(80).path("/", "Prefix", "web").yaml(),
    );
    std::fs::write(dir.join("app.yaml"), text).unwrap();
    let mut config = DaemonConfig::with_source(Source::Manifests {
        dir: dir.clone(),
        options: IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    config.settings.metrics_status_codes = true;
    let d = ramjet::Daemon::start(config).expect("the daemon starts");
    wait_serving(&d, 1);
    for _ in 0..3 {
        assert_eq!(get(d.http_addr(), "shop.test", "/").status, 200);
    }
    assert_eq!(get(d.http_addr(), "shop.test", "/nobody/404").status, 404);
    assert_eq!(get(d.http_addr(), "shop.test", "/nobody/503").status, 503);

    let labels = r#"route="shop/storefront",backend="shop/web:80",route_kind="ingress",namespace="shop",ingress="storefront",service="web""#;
    let wanted = [
        format!("ramjet_route_requests_total{{{labels},class=\"2xx\"}} 3"),
        format!("ramjet_route_requests_total{{{labels},class=\"4xx\"}} 1"),
        format!("ramjet_route_responses_total{{{labels},status=\"200\"}} 3"),
        format!("ramjet_route_responses_total{{{labels},status=\"404\"}} 1"),
        format!("ramjet_route_responses_total{{{labels},status=\"503\"}} 1"),
    ];
    assert!(
        eventually(Duration::from_secs(5), || {
            let text = metrics(d.admin_addr());
            wanted.iter().all(|w| text.contains(w.as_str()))
        }),
        "want {wanted:#?} in\n{}",
        metrics(d.admin_addr())
    );
    let text = metrics(d.admin_addr());
    assert!(!text.contains(r#"status="500""#), "only the codes answered have samples");
    check_with_promtool(&text);
    d.shutdown();
}

/// Asked for OpenMetrics (as Prometheus asks by default), `/metrics` is valid
/// OpenMetrics by the Prometheus project's own parser, and a route's duration histogram points to
/// its last traced request: the trace id an operator follows from a slow bucket to the trace.
#[test]
fn openmetrics_carries_the_last_traced_request_as_an_exemplar() {
    let backend = Backend::start("app");
    let yaml = format!(
        "backends:\n  app: {{ endpoints: [\"{}\"] }}\nroutes:\n  - {{ path: /, backend: app }}\n",
        backend.addr
    );
    // Spans go nowhere (the exemplar needs only the sampling): a collector that is down.
    let d = daemon_with(routes(&yaml), IoDriver::Auto, |c| {
        let mut traces = ramjet_dataplane::TraceSettings::new(format!("http://{}", dead_addr()).parse().unwrap());
        traces.sample_ratio = 0.0;
        c.traces = Some(traces);
    });
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traced = format!("traceparent: 00-{trace}-00f067aa0ba902b7-01\r\n");
    assert_eq!(support::client::Conn::open(d.http_addr()).get_with("a", "/traced", &traced).status, 200);
    assert_eq!(get(d.http_addr(), "a", "/untraced").status, 200);
    let scrape = |accept: &str| {
        request(
            d.admin_addr(),
            &format!("GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"),
        )
    };
    let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    assert!(eventually(Duration::from_secs(5), || scrape(om).body.contains(trace)), "{}", scrape(om).body);
    let answer = scrape(om);
    assert!(answer.header("content-type").is_some_and(|t| t.starts_with("application/openmetrics-text")));
    let text = answer.body;
    let script = r#"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
families = {f.name: f for f in text_string_to_metric_families(sys.stdin.read())}
assert families["ramjet_requests"].type == "counter", families["ramjet_requests"].type
hist = families["ramjet_route_request_duration_seconds"]
exemplars = [s.exemplar for s in hist.samples if s.exemplar is not None]
assert len(exemplars) == 1, exemplars
print(exemplars[0].labels["trace_id"])
"#;
    let mut child =
        Command::new(venv_python()).args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the OpenMetrics parser refused /metrics:\n{text}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), trace);
    // Prometheus text as before for a scraper that asks for nothing else, without exemplars.
    let plain = scrape("text/plain");
    assert!(plain.header("content-type").is_some_and(|t| t.starts_with("text/plain; version=0.0.4")));
    assert!(!plain.body.contains(trace) && !plain.body.contains("# EOF"));
    check_with_promtool(&plain.body);
    d.shutdown();
}
