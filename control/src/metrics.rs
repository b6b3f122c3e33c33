//! `/metrics`: the control thread's own figures plus the data plane's per-worker counters, summed
//! at scrape time, in the Prometheus text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use ramjet_shared::{
    route_object, Exemplar, HistogramSnapshot, Published, RouteSnapshot, StatusClass, UpstreamErrorKind, WorkerStats,
    DURATION_BUCKETS,
};

/// Upper bounds of the publish-latency histogram, in seconds.
const PUBLISH_BUCKETS: [f64; 10] = [1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 1e-1];

/// Counters the control thread updates.
#[derive(Default)]
pub struct ControlMetrics {
    pub compiles: AtomicU64,
    pub generations_compiled: AtomicU64,
    generations_applied: AtomicU64,
    serving: AtomicU64,
    pinned: AtomicU64,
    publish_buckets: [AtomicU64; PUBLISH_BUCKETS.len()],
    publish_count: AtomicU64,
    publish_nanos: AtomicU64,
    pub diagnostics: AtomicU64,
    /// 1 while this replica holds the leader Lease (cluster mode).
    pub leader: AtomicU64,
}

impl ControlMetrics {
    pub fn applied(&self) {
        self.generations_applied.fetch_add(1, Relaxed);
    }

    pub fn set_pinned(&self, pinned: bool) {
        self.pinned.store(pinned as u64, Relaxed);
    }

    pub fn published(&self, took: Duration, generation: u64) {
        self.serving.store(generation, Relaxed);
        let secs = took.as_secs_f64();
        for (bucket, bound) in self.publish_buckets.iter().zip(PUBLISH_BUCKETS) {
            if secs <= bound {
                bucket.fetch_add(1, Relaxed);
            }
        }
        self.publish_count.fetch_add(1, Relaxed);
        self.publish_nanos.fetch_add(took.as_nanos() as u64, Relaxed);
    }
}

/// Everything `/metrics` reads.
pub struct MetricsSources {
    pub control: Arc<ControlMetrics>,
    pub workers: Arc<WorkerStats>,
    pub webhook: Option<(Arc<AtomicU64>, Arc<AtomicU64>)>,
    pub history_size: usize,
    /// The serving generation and certificate store (certificate expiry).
    pub published: Arc<Published>,
    /// `ramjet_build_info`'s labels: version, commit, commit date.
    pub build: BuildInfo,
}

/// Which build this is, for `ramjet_build_info`.
#[derive(Clone, Debug, Default)]
pub struct BuildInfo {
    pub version: String,
    pub commit: String,
    pub date: String,
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value with `\\`, `"` and newlines escaped, as the text format requires.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot, exemplar: Option<&Exemplar>) {
    // The exemplar goes on the bucket its duration falls in (OpenMetrics only).
    let at = exemplar.map(|e| {
        DURATION_BUCKETS.iter().position(|&b| e.duration_us as f64 / 1e6 <= b).unwrap_or(DURATION_BUCKETS.len())
    });
    let mut cumulative = 0;
    for (i, (n, bound)) in h.buckets.iter().zip(DURATION_BUCKETS).enumerate() {
        cumulative += n;
        let _ = write!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        push_exemplar(out, exemplar.filter(|_| at == Some(i)));
    }
    let count = h.count();
    let _ = write!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
    push_exemplar(out, exemplar.filter(|_| at == Some(DURATION_BUCKETS.len())));
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
}

/// ` # {trace_id="…"} value timestamp` and the line's end.
fn push_exemplar(out: &mut String, exemplar: Option<&Exemplar>) {
    if let Some(e) = exemplar {
        let _ = write!(out, " # {{trace_id=\"");
        for b in e.trace_id {
            let _ = write!(out, "{b:02x}");
        }
        let _ = write!(out, "\"}} {} {}.{:03}", e.duration_us as f64 / 1e6, e.unix_ms / 1000, e.unix_ms % 1000);
    }
    out.push('\n');
}

/// The standard `process_*` families (as every Prometheus client library exports them), read
/// from /proc at scrape time.
fn render_process(out: &mut String) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return };
    // The fields after the command name, which is in parentheses and may hold spaces.
    let Some(fields) = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect::<Vec<_>>()) else {
        return;
    };
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf reads a constant of the system.
    #[allow(unsafe_code)]
    let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK) as f64, libc::sysconf(libc::_SC_PAGESIZE) as f64) };
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok()))
        .unwrap_or(0.0);
    let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the limit into `limit`.
    #[allow(unsafe_code)]
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit)
    };
    let samples = [
        (
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, in seconds.",
            (field(14) + field(15)) / ticks,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since the Unix epoch, in seconds.",
            boot + field(22) / ticks,
        ),
        ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field(23)),
        ("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", field(24) * page),
        ("process_open_fds", "gauge", "Open file descriptors.", fds as f64),
        ("process_max_fds", "gauge", "Maximum open file descriptors.", limit.rlim_cur as f64),
        ("process_threads", "gauge", "Threads of the process.", field(20)),
    ];
    for (name, kind, help, value) in samples {
        family(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
}

/// When each TLS host's certificate in the serving generation expires (hosts whose certificate
/// could not be read for a date are left out).
fn render_certificates(out: &mut String, published: &Published) {
    family(
        out,
        "ramjet_ssl_certificate_expiry_timestamp_seconds",
        "gauge",
        "End of validity (notAfter) of the certificate served for each TLS host, in Unix seconds; secret is its source.",
    );
    let table = &published.generation().load().table;
    let certs = published.certs().load();
    for (host, id) in table.tls_hosts() {
        let Some(cert) = certs.get(id) else { continue };
        let Some(secs) = cert.not_after.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()) else { continue };
        let _ = writeln!(
            out,
            "ramjet_ssl_certificate_expiry_timestamp_seconds{{host=\"{}\",secret=\"{}\"}} {}",
            label(host),
            label(&cert.source),
            secs.as_secs()
        );
    }
}

/// A series' labels: the route and backend as ramjet names them (`namespace/name`,
/// `namespace/service:port`), the route's kind, and split out for queries and ingress-nginx's
/// dashboards: the object's namespace and name (`ingress`, whatever the kind) and the backend's
/// Service. A static route has no namespace, object or Service, so those labels are left out.
fn route_labels(s: &RouteSnapshot) -> String {
    let mut out =
        format!("route=\"{}\",backend=\"{}\",route_kind=\"{}\"", label(&s.route), label(&s.backend), s.origin.label());
    if let Some((namespace, name, service)) = route_object(s.origin, &s.route, &s.backend) {
        let _ = write!(out, ",namespace=\"{}\",ingress=\"{}\"", label(namespace), label(name));
        if let Some(service) = service {
            let _ = write!(out, ",service=\"{}\"", label(service));
        }
    }
    out
}

/// The per route and backend families (each family's samples together, as the format requires).
fn render_routes(out: &mut String, series: &[RouteSnapshot], openmetrics: bool) {
    let labels: Vec<String> = series.iter().map(route_labels).collect();
    family(out, "ramjet_route_requests_total", "counter", "Requests answered per route and backend, by status class.");
    for (s, l) in series.iter().zip(&labels) {
        for class in StatusClass::ALL {
            let _ = writeln!(
                out,
                "ramjet_route_requests_total{{{l},class=\"{}\"}} {}",
                class.label(),
                s.requests[class as usize]
            );
        }
    }
    if series.iter().any(|s| !s.codes.is_empty()) {
        family(
            out,
            "ramjet_route_responses_total",
            "counter",
            "Requests answered per route and backend, by status code (--metrics-status-codes).",
        );
        for (s, l) in series.iter().zip(&labels) {
            for (code, n) in &s.codes {
                let _ = writeln!(out, "ramjet_route_responses_total{{{l},status=\"{code}\"}} {n}");
            }
        }
    }
    family(
        out,
        "ramjet_route_request_duration_seconds",
        "histogram",
        "Time from the complete request head to the end of the response, per route and backend.",
    );
    for (s, l) in series.iter().zip(&labels) {
        let exemplar = s.exemplar.as_ref().filter(|_| openmetrics);
        histogram(out, "ramjet_route_request_duration_seconds", l, &s.duration, exemplar);
    }
    family(
        out,
        "ramjet_route_upstream_response_seconds",
        "histogram",
        "Time from the start of the upstream exchange (connect included) to the response head.",
    );
    for (s, l) in series.iter().zip(&labels) {
        histogram(out, "ramjet_route_upstream_response_seconds", l, &s.upstream, None);
    }
    family(out, "ramjet_route_request_bytes_total", "counter", "Request bytes received (head and body).");
    for (s, l) in series.iter().zip(&labels) {
        let _ = writeln!(out, "ramjet_route_request_bytes_total{{{l}}} {}", s.bytes_in);
    }
    family(out, "ramjet_route_response_bytes_total", "counter", "Response bytes sent (head and body).");
    for (s, l) in series.iter().zip(&labels) {
        let _ = writeln!(out, "ramjet_route_response_bytes_total{{{l}}} {}", s.bytes_out);
    }
    family(
        out,
        "ramjet_route_upstream_connect_errors_total",
        "counter",
        "Connects to the backend's endpoints that failed (refused, unreachable, timed out).",
    );
    for (s, l) in series.iter().zip(&labels) {
        let _ = writeln!(out, "ramjet_route_upstream_connect_errors_total{{{l}}} {}", s.connect_errors);
    }
}

/// Renders the exposition: Prometheus text (0.0.4), or OpenMetrics 1.0 — the same samples, the
/// counters' families named without `_total`, the duration histograms carrying the trace of their
/// last traced request as an exemplar, and `# EOF`.
pub fn render(m: &MetricsSources, openmetrics: bool) -> String {
    let mut out = String::with_capacity(4096);
    let c = &m.control;
    let w = &m.workers;

    family(&mut out, "ramjet_requests_total", "counter", "Requests answered, by status class.");
    for class in StatusClass::ALL {
        let _ = writeln!(out, "ramjet_requests_total{{class=\"{}\"}} {}", class.label(), w.requests(class));
    }
    family(&mut out, "ramjet_upstream_errors_total", "counter", "Failed upstream exchanges, by kind.");
    for kind in UpstreamErrorKind::ALL {
        let _ = writeln!(out, "ramjet_upstream_errors_total{{kind=\"{}\"}} {}", kind.label(), w.upstream_errors(kind));
    }
    family(
        &mut out,
        "ramjet_upstream_retries_total",
        "counter",
        "Requests sent again on another endpoint or a fresh connection.",
    );
    let _ = writeln!(out, "ramjet_upstream_retries_total {}", w.upstream_retries());
    family(&mut out, "ramjet_connections_active", "gauge", "Client connections open now.");
    let _ = writeln!(out, "ramjet_connections_active {}", w.active_connections());
    family(&mut out, "ramjet_connections_total", "counter", "Client connections accepted.");
    let _ = writeln!(out, "ramjet_connections_total {}", w.connections_accepted());
    family(&mut out, "ramjet_tls_handshake_failures_total", "counter", "TLS handshakes that failed or timed out.");
    let _ = writeln!(out, "ramjet_tls_handshake_failures_total {}", w.tls_handshake_failures());
    family(
        &mut out,
        "ramjet_proxy_protocol_refused_total",
        "counter",
        "Connections to a listener that expects a PROXY protocol header closed without a valid one.",
    );
    let _ = writeln!(out, "ramjet_proxy_protocol_refused_total {}", w.proxy_protocol_refusals());
    family(
        &mut out,
        "ramjet_idle_buffer_releases_total",
        "counter",
        "Times a quiet client connection gave its buffers back to its worker while waiting for a request.",
    );
    let _ = writeln!(out, "ramjet_idle_buffer_releases_total {}", w.idle_buffer_releases());
    family(
        &mut out,
        "ramjet_task_panics_total",
        "counter",
        "Connection or stream tasks that panicked and were ended; the worker went on. A bug: please report it.",
    );
    let _ = writeln!(out, "ramjet_task_panics_total {}", w.task_panics());
    family(
        &mut out,
        "ramjet_access_log_dropped_total",
        "counter",
        "Access-log records dropped because a worker's buffer was full.",
    );
    let _ = writeln!(out, "ramjet_access_log_dropped_total {}", w.access_log_dropped());
    family(
        &mut out,
        "ramjet_trace_spans_total",
        "counter",
        "Spans of sampled requests: exported, failed (the collector did not take them) or dropped (a worker's queue was full).",
    );
    let (exported, failed, dropped) = w.spans();
    let _ = writeln!(out, "ramjet_trace_spans_total{{outcome=\"exported\"}} {exported}");
    let _ = writeln!(out, "ramjet_trace_spans_total{{outcome=\"failed\"}} {failed}");
    let _ = writeln!(out, "ramjet_trace_spans_total{{outcome=\"dropped\"}} {dropped}");
    render_routes(&mut out, &w.route_series(), openmetrics);
    family(
        &mut out,
        "ramjet_mirror_requests_total",
        "counter",
        "Mirrored copies of requests: answered (sent), or dropped (bound reached, body not buffered, mirror down or slow).",
    );
    let _ = writeln!(out, "ramjet_mirror_requests_total{{outcome=\"sent\"}} {}", w.mirrors_sent());
    let _ = writeln!(out, "ramjet_mirror_requests_total{{outcome=\"dropped\"}} {}", w.mirrors_dropped());

    family(&mut out, "ramjet_build_info", "gauge", "Always 1; the labels say which build is running.");
    let b = &m.build;
    let _ = writeln!(
        out,
        "ramjet_build_info{{version=\"{}\",commit=\"{}\",date=\"{}\"}} 1",
        label(&b.version),
        label(&b.commit),
        label(&b.date)
    );
    family(&mut out, "ramjet_leader", "gauge", "1 while this replica holds the leader Lease and writes status.");
    let _ = writeln!(out, "ramjet_leader {}", c.leader.load(Relaxed));
    render_process(&mut out);
    family(&mut out, "ramjet_pinned", "gauge", "1 while an operator pin (rollback) holds the configuration.");
    let _ = writeln!(out, "ramjet_pinned {}", c.pinned.load(Relaxed));
    family(&mut out, "ramjet_serving_generation", "gauge", "Number of the generation serving traffic.");
    let _ = writeln!(out, "ramjet_serving_generation {}", c.serving.load(Relaxed));
    family(&mut out, "ramjet_compiles_total", "counter", "Compiles run, including those that changed nothing.");
    let _ = writeln!(out, "ramjet_compiles_total {}", c.compiles.load(Relaxed));
    family(&mut out, "ramjet_generations_compiled_total", "counter", "Compiles that produced a new generation.");
    let _ = writeln!(out, "ramjet_generations_compiled_total {}", c.generations_compiled.load(Relaxed));
    family(
        &mut out,
        "ramjet_generations_applied_total",
        "counter",
        "Generations taken by the applier (published or held back).",
    );
    let _ = writeln!(out, "ramjet_generations_applied_total {}", c.generations_applied.load(Relaxed));
    family(&mut out, "ramjet_config_diagnostics", "gauge", "Problems reported by the last compile.");
    let _ = writeln!(out, "ramjet_config_diagnostics {}", c.diagnostics.load(Relaxed));
    family(&mut out, "ramjet_history_size", "gauge", "Generations the history ring keeps.");
    let _ = writeln!(out, "ramjet_history_size {}", m.history_size);

    family(
        &mut out,
        "ramjet_publish_duration_seconds",
        "histogram",
        "Time to publish a generation (certificate store, then table).",
    );
    for (bucket, bound) in c.publish_buckets.iter().zip(PUBLISH_BUCKETS) {
        let _ = writeln!(out, "ramjet_publish_duration_seconds_bucket{{le=\"{bound}\"}} {}", bucket.load(Relaxed));
    }
    let count = c.publish_count.load(Relaxed);
    let _ = writeln!(out, "ramjet_publish_duration_seconds_bucket{{le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "ramjet_publish_duration_seconds_sum {}", c.publish_nanos.load(Relaxed) as f64 / 1e9);
    let _ = writeln!(out, "ramjet_publish_duration_seconds_count {count}");

    render_certificates(&mut out, &m.published);

    if let Some((delivered, failed)) = &m.webhook {
        family(&mut out, "ramjet_audit_webhook_deliveries_total", "counter", "Audit webhook POSTs, by outcome.");
        let _ =
            writeln!(out, "ramjet_audit_webhook_deliveries_total{{outcome=\"delivered\"}} {}", delivered.load(Relaxed));
        let _ = writeln!(out, "ramjet_audit_webhook_deliveries_total{{outcome=\"failed\"}} {}", failed.load(Relaxed));
    }
    if openmetrics {
        out = as_openmetrics(&out);
    }
    out
}

/// OpenMetrics names a counter's family without the `_total` its samples carry, and ends with
/// `# EOF`; everything else is written alike.
fn as_openmetrics(text: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.lines() {
        let meta = ["# HELP ", "# TYPE "].into_iter().find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = match counters.contains(name) {
                    true => name.strip_suffix("_total").unwrap_or(name),
                    false => name,
                };
                let _ = writeln!(out, "{prefix}{name} {tail}");
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out.push_str("# EOF\n");
    out
}
