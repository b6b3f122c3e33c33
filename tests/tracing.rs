//! Traces end to end: ramjet sends its spans over OTLP/HTTP to a real OpenTelemetry Collector
//! (built from source, `ramjet_test_support::otel_collector`), and the backends see the W3C trace
//! context ramjet passes on. What is asserted is what the collector decoded: a span per sampled
//! request with the client's trace and parent, the HTTP attributes and ramjet's route and backend;
//! the upstream's `traceparent` names ramjet's span; an unsampled request's context passes on
//! untouched; a collector that is down costs requests nothing and is counted.

use ramjet_test_support as support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ramjet_dataplane::access_log::{Destination, Format};
use ramjet_dataplane::{AccessLogSettings, IoDriver, TraceSettings};
use serde_json::Value;
use support::backend::Backend;
use support::client::{counter, Conn};
use support::h2_echo::H2Echo;
use support::h2client::H2Client;
use support::otel_collector::{attribute, Collector};
use support::{daemon_with, dead_addr, eventually, routes, temp_dir};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn yaml(app: SocketAddr, h2: SocketAddr) -> String {
    format!(
        "backends:\n  app: {{ endpoints: [\"{app}\"] }}\n  h2: {{ endpoints: [\"{h2}\"], protocol: H2C }}\n  \
         dead: {{ endpoints: [\"{}\"] }}\nroutes:\n  - {{ host: app.test, path: /, backend: app }}\n  \
         - {{ host: h2.test, path: /, backend: h2 }}\n  - {{ host: dead.test, path: /, backend: dead }}\n",
        dead_addr()
    )
}

fn traces_to(collector: &Collector, ratio: f64) -> TraceSettings {
    let mut settings = TraceSettings::new(collector.otlp_http_endpoint().parse().unwrap());
    settings.sample_ratio = ratio;
    settings.export_interval = Duration::from_millis(50);
    settings.resource.push(("k8s.pod.name".into(), "ramjet-0".into()));
    settings
}

/// The field `name` the echo backend saw (`header=name: value` lines).
fn seen(body: &str, name: &str) -> Option<String> {
    body.lines().filter_map(|l| l.strip_prefix("header=")).find_map(|h| {
        let (k, v) = h.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

fn attr(span: &Value, key: &str) -> String {
    match attribute(&span["attributes"], key) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => panic!("no {key} on {span:#}"),
    }
}

fn span_with(spans: &[Value], path: &str) -> Value {
    spans
        .iter()
        .find(|s| attribute(&s["attributes"], "url.path").and_then(Value::as_str) == Some(path))
        .unwrap_or_else(|| panic!("no span of {path} in {spans:#?}"))
        .clone()
}

fn records(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn spans_reach_a_real_collector_and_the_backend_gets_ramjets_span_as_parent() {
    let collector = Collector::start();
    let app = Backend::start("app");
    let h2 = H2Echo::start();
    let log = temp_dir("tracing").join("access.log");
    let d = daemon_with(routes(&yaml(app.addr, h2.addr)), IoDriver::Auto, |c| {
        c.traces = Some(traces_to(&collector, 1.0));
        c.access_log = Some(AccessLogSettings::new(Destination::File(log.clone()), Format::Json));
    });
    let http = d.http_addr();

    // 1. A client in a sampled trace: ramjet's span is a child of the client's, and the backend's
    // parent is ramjet's span.
    let incoming = format!("00-{TRACE}-{PARENT}-01");
    let joined = Conn::open(http).get_with(
        "app.test",
        "/joined?q=1",
        &format!("traceparent: {incoming}\r\ntracestate: k=v\r\n"),
    );
    assert_eq!(joined.status, 200);
    // 2. No traceparent, ratio 1: a new trace, ramjet's span its root.
    let root = Conn::open(http).get_with("app.test", "/root", "");
    // 3. An unsampled parent: no span; the context passes on as it came.
    let unsampled = format!("00-{TRACE}-{PARENT}-00");
    let passed = Conn::open(http).get_with("app.test", "/unsampled", &format!("traceparent: {unsampled}\r\n"));
    // 4. HTTP/2 to an HTTP/2 backend, with a parent.
    let mut client = H2Client::connect(http);
    let over_h2 = client
        .request("GET", "h2.test", "/over-h2", &[("traceparent", incoming.as_str())], b"", false)
        .expect("an HTTP/2 answer");
    assert_eq!(over_h2.status, 200);
    // 5. A backend that is down: the span says so.
    assert_eq!(Conn::open(http).get_with("dead.test", "/down", "").status, 502);

    let spans = collector.wait_spans(4, Duration::from_secs(20));
    assert_eq!(spans.len(), 4, "one span per sampled request, none for the unsampled one: {spans:#?}");

    let span = span_with(&spans, "/joined");
    assert_eq!(span["traceId"], TRACE);
    assert_eq!(span["parentSpanId"], PARENT);
    assert_eq!(span["kind"], 2, "a server span");
    assert_eq!(span["name"], "GET");
    assert_eq!(attr(&span, "http.request.method"), "GET");
    assert_eq!(attr(&span, "url.query"), "q=1");
    assert_eq!(attr(&span, "server.address"), "app.test");
    assert_eq!(attr(&span, "http.response.status_code"), "200");
    assert_eq!(attr(&span, "network.protocol.version"), "1.1");
    assert_eq!(attr(&span, "client.address"), "127.0.0.1");
    assert_eq!(attr(&span, "ramjet.route"), "routes[0]");
    assert_eq!(attr(&span, "ramjet.backend"), "app");
    assert_eq!(attr(&span, "ramjet.upstream.address"), app.addr.to_string());
    assert_eq!(attr(&span, "ramjet.upstream.status_code"), "200");
    assert_eq!(span["status"], serde_json::json!({}), "a 200 leaves the status unset");
    let start: u64 = span["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
    let end: u64 = span["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
    assert!(end >= start && end - start < 10_000_000_000, "{start}..{end}");
    assert_eq!(attribute(&span["resource"], "service.name").unwrap(), "ramjet");
    assert_eq!(attribute(&span["resource"], "k8s.pod.name").unwrap(), "ramjet-0");
    let span_id = span["spanId"].as_str().unwrap();
    assert_eq!(
        seen(&joined.body, "traceparent"),
        Some(format!("00-{TRACE}-{span_id}-01")),
        "the backend's parent is ramjet's span: {}",
        joined.body
    );
    assert_eq!(seen(&joined.body, "tracestate").as_deref(), Some("k=v"), "tracestate passes on");
    assert_eq!(joined.body.matches("header=traceparent").count(), 1, "the client's traceparent is replaced");

    let span = span_with(&spans, "/root");
    assert!(span.get("parentSpanId").is_none(), "a root span: {span:#}");
    let (trace, id) = (span["traceId"].as_str().unwrap(), span["spanId"].as_str().unwrap());
    assert_ne!(trace, TRACE);
    assert_eq!(seen(&root.body, "traceparent"), Some(format!("00-{trace}-{id}-01")));

    assert_eq!(seen(&passed.body, "traceparent"), Some(unsampled.clone()), "an unsampled context passes untouched");

    let span = span_with(&spans, "/over-h2");
    assert_eq!((span["traceId"].as_str(), span["parentSpanId"].as_str()), (Some(TRACE), Some(PARENT)));
    assert_eq!(attr(&span, "network.protocol.version"), "2");
    let id = span["spanId"].as_str().unwrap();
    assert!(
        over_h2.text().contains(&format!("traceparent: 00-{TRACE}-{id}-01")),
        "the HTTP/2 backend's parent is ramjet's span: {}",
        over_h2.text()
    );

    let span = span_with(&spans, "/down");
    assert_eq!(attr(&span, "http.response.status_code"), "502");
    assert_eq!(span["status"]["code"], 2, "a 5xx is an error");

    // The access log names each request's trace: the sampled ones' and the unsampled client's.
    assert!(eventually(Duration::from_secs(5), || records(&log).len() == 5));
    let records = records(&log);
    let logged = |path: &str| {
        records.iter().find(|r| r["path"].as_str().is_some_and(|p| p.starts_with(path))).unwrap()["trace_id"].clone()
    };
    assert_eq!(logged("/joined"), TRACE);
    assert_eq!(logged("/unsampled"), TRACE);
    assert_eq!(logged("/root"), trace);

    assert_eq!(counter(d.admin_addr(), "ramjet_trace_spans_total{outcome=\"exported\"}"), 4);
    assert_eq!(counter(d.admin_addr(), "ramjet_trace_spans_total{outcome=\"dropped\"}"), 0);
    d.shutdown();
}

#[test]
fn the_ratio_samples_roots_and_a_down_collector_costs_requests_nothing() {
    let collector = Collector::start();
    let app = Backend::start("app");
    let h2 = H2Echo::start();
    // Ratio 0: requests without a parent are not traced, and get no traceparent; a sampled parent
    // is still followed.
    let d =
        daemon_with(routes(&yaml(app.addr, h2.addr)), IoDriver::Auto, |c| c.traces = Some(traces_to(&collector, 0.0)));
    for _ in 0..20 {
        let r = Conn::open(d.http_addr()).get_with("app.test", "/plain", "");
        assert_eq!(seen(&r.body, "traceparent"), None);
    }
    let r =
        Conn::open(d.http_addr()).get_with("app.test", "/parent", &format!("traceparent: 00-{TRACE}-{PARENT}-01\r\n"));
    assert_eq!(r.status, 200);
    let spans = collector.wait_spans(1, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(collector.spans().len(), 1, "only the sampled parent's request: {spans:#?}");
    assert_eq!(attr(&spans[0], "url.path"), "/parent");
    d.shutdown();

    // A collector nobody listens on: requests are served as ever; the spans are counted failed.
    let d = daemon_with(routes(&yaml(app.addr, h2.addr)), IoDriver::Auto, |c| {
        let mut settings = TraceSettings::new(format!("http://{}", dead_addr()).parse().unwrap());
        settings.export_interval = Duration::from_millis(50);
        c.traces = Some(settings);
    });
    for _ in 0..10 {
        assert_eq!(Conn::open(d.http_addr()).get_with("app.test", "/", "").status, 200);
    }
    assert!(
        eventually(Duration::from_secs(10), || counter(d.admin_addr(), "ramjet_trace_spans_total{outcome=\"failed\"}")
            == 10),
        "{}",
        counter(d.admin_addr(), "ramjet_trace_spans_total{outcome=\"failed\"}")
    );
    d.shutdown();
}

/// Two `traceparent` fields are no context at all (W3C Trace Context, `test_traceparent_duplicated`):
/// over HTTP/1.1 and HTTP/2 alike the request starts a trace of its own, and the backend gets one
/// `traceparent`, ramjet's.
#[test]
fn duplicated_traceparents_start_a_new_trace() {
    let collector = Collector::start();
    let app = Backend::start("app");
    let h2 = H2Echo::start();
    let d =
        daemon_with(routes(&yaml(app.addr, h2.addr)), IoDriver::Auto, |c| c.traces = Some(traces_to(&collector, 1.0)));
    let (first, second) =
        (format!("00-{TRACE}-{PARENT}-01"), "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01");
    let over_h1 = Conn::open(d.http_addr()).get_with(
        "app.test",
        "/h1",
        &format!("traceparent: {first}\r\ntraceparent: {second}\r\n"),
    );
    assert_eq!(over_h1.body.matches("header=traceparent").count(), 1, "{}", over_h1.body);
    let mut client = H2Client::connect(d.http_addr());
    let over_h2 = client
        .request("GET", "h2.test", "/h2", &[("traceparent", first.as_str()), ("traceparent", second)], b"", false)
        .expect("an HTTP/2 answer");
    assert_eq!(over_h2.text().matches("traceparent:").count(), 1, "{}", over_h2.text());
    let spans = collector.wait_spans(2, Duration::from_secs(20));
    for path in ["/h1", "/h2"] {
        let span = span_with(&spans, path);
        let trace = span["traceId"].as_str().unwrap();
        assert!(trace != TRACE && !second.contains(trace), "{path}: {span:#}");
        assert!(span.get("parentSpanId").is_none(), "{path}: a root span: {span:#}");
    }
    d.shutdown();
}

/// ingress-nginx's `opentelemetry-operation-name` as `--trace-operation-name`
/// (test/e2e/settings/opentelemetry.go): the spans a real collector receives are named by the
/// template, its variables filled from each request.
#[test]
fn spans_are_named_by_the_operation_name_template() {
    let collector = Collector::start();
    let app = Backend::start("app");
    let h2 = H2Echo::start();
    let d = daemon_with(routes(&yaml(app.addr, h2.addr)), IoDriver::Auto, |c| {
        let mut traces = traces_to(&collector, 1.0);
        traces.operation_name = Some(ramjet_dataplane::OperationName::parse("HTTP $request_method $uri").unwrap());
        c.traces = Some(traces);
    });
    assert_eq!(Conn::open(d.http_addr()).get_with("app.test", "/named?q=1", "").status, 200);
    let spans = collector.wait_spans(1, Duration::from_secs(20));
    assert_eq!(span_with(&spans, "/named")["name"], "HTTP GET /named", "{spans:#?}");
    d.shutdown();
}
