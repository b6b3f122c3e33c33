//! Traces: one OpenTelemetry server span per sampled request (HTTP/1.1 exchange or HTTP/2 stream),
//! exported over OTLP/HTTP as JSON by a thread off the workers.
//!
//! ```text
//! worker: request head ─▶ `traceparent` in (W3C) ─▶ sample? ─▶ span begun ─▶ upstream gets a
//!         `traceparent` naming ramjet's span ─▶ end (status, route, backend, timings) ─▶ ring
//!                                                                        (full: drop + count)
//! exporter thread: every interval, each worker's ring ─▶ batches of ≤ 512 ─▶ POST /v1/traces
//! ```
//!
//! The design is the access log's: a worker moves a finished span into its own single-producer
//! single-consumer ring and never waits; the exporter drains the rings, encodes and sends. A span
//! the ring has no room for, or a batch the collector refused, is dropped and counted.
//!
//! Sampling is parent-based by default (OpenTelemetry's default): a request whose valid
//! `traceparent` says "sampled" is traced, one that says "not sampled" is not, and a request
//! without one (or with an invalid one) is traced with `sample_ratio`. An unsampled request costs a
//! look at its `traceparent` and a random draw; its `traceparent` and `tracestate` pass on
//! untouched. A sampled one costs a span id, a `traceparent` rewritten for the upstream, two
//! allocations (the record, and the request's texts in one buffer), and its place in the ring.

use ramjet_shared::operation_name::{NamePart, OperationName};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ramjet_shared::WorkerStats;
use rtrb::{Consumer, Producer, RingBuffer};

use crate::codec::http1::head::push_decimal;
use crate::codec::trace_context::{self, SpanContext, TRACEPARENT_LEN};
use crate::observe::text::{json_escape, push_hex};

/// Where spans go and which requests are traced.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// The collector's OTLP/HTTP traces endpoint.
    pub endpoint: OtlpEndpoint,
    /// `service.name` of the spans' resource.
    pub service_name: String,
    /// More resource attributes (`service.instance.id`, `k8s.pod.name`, …).
    pub resource: Vec<(String, String)>,
    /// The share of requests without a sampled parent that are traced, 0.0 to 1.0.
    pub sample_ratio: f64,
    /// Follow the parent's sampled flag when the request has a valid `traceparent`.
    pub parent_based: bool,
    /// Room in each worker's ring, in spans.
    pub queue_spans: usize,
    /// How often the exporter drains the rings.
    pub export_interval: Duration,
    /// The spans' name, a template of nginx variables (ingress-nginx's
    /// `opentelemetry-operation-name`); `None`: the request's method, as OpenTelemetry's HTTP
    /// conventions name a server span without a route template.
    pub operation_name: Option<OperationName>,
}

/// The name `name` gives span `s`, JSON-escaped into `out`.
fn push_name(name: &OperationName, out: &mut Vec<u8>, s: &SpanRecord) {
    let target = s.request_text(RequestText::Target);
    for part in name.parts() {
        match part {
            NamePart::Text(t) => json_escape(out, t.as_bytes()),
            NamePart::Method => json_escape(out, s.request_text(RequestText::Method)),
            NamePart::RequestUri => json_escape(out, target),
            NamePart::Uri => json_escape(out, target.split(|&b| b == b'?').next().unwrap_or_default()),
            NamePart::Host => {
                let host = s.request_text(RequestText::Host);
                let port_at = host.iter().rposition(|&b| b == b':').filter(|_| !host.ends_with(b"]"));
                json_escape(out, port_at.map_or(host, |i| &host[..i]));
            }
            NamePart::Scheme => out.extend_from_slice(if s.tls { b"https" } else { b"http" }),
        }
    }
}

impl TraceSettings {
    pub fn new(endpoint: OtlpEndpoint) -> Self {
        TraceSettings {
            endpoint,
            service_name: "ramjet".into(),
            resource: Vec::new(),
            sample_ratio: 1.0,
            parent_based: true,
            queue_spans: 2048,
            export_interval: Duration::from_secs(1),
            operation_name: None,
        }
    }
}

/// An `http://host:port/path` OTLP/HTTP endpoint (the path defaults to `/v1/traces`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpEndpoint {
    /// `host:port`, resolved at every export (a Service name follows its changes).
    pub authority: String,
    pub path: String,
}

impl std::str::FromStr for OtlpEndpoint {
    type Err = String;

    /// The base URL an OpenTelemetry SDK takes (`http://collector:4318`, to which `/v1/traces` is
    /// added) or a full traces URL (`http://collector:4318/v1/traces`).
    fn from_str(url: &str) -> Result<Self, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err("https is not supported yet: send spans to a collector over http (a node agent or a sidecar), which can forward them over TLS".into())
            }
            _ => return Err(format!("{url:?} is not an http:// URL")),
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("{url:?} has no host, or has credentials"));
        }
        let authority = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
            authority.to_string()
        } else if authority.ends_with(']') || !authority.contains(':') {
            format!("{authority}:4318")
        } else {
            return Err(format!("{url:?}: the port is not a number"));
        };
        let path = match path.trim_end_matches('/') {
            "" => "/v1/traces".to_string(),
            p => p.to_string(),
        };
        Ok(OtlpEndpoint { authority, path })
    }
}

/// Where a request stands in tracing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Trace {
    /// Tracing is off, or the request has no trace.
    #[default]
    None,
    /// Not sampled, but part of the client's trace: its id is logged; its `traceparent` passes on.
    Joined([u8; 16]),
    /// Traced: ramjet's span, and the client's span it is a child of. `replaces`: the client sent
    /// a `traceparent` field (valid or not), which the upstream's replaces.
    Sampled { span: SpanContext, parent: Option<[u8; 8]>, replaces: bool },
}

impl Trace {
    /// The trace id to log.
    pub fn trace_id(&self) -> Option<&[u8; 16]> {
        match self {
            Trace::None => None,
            Trace::Joined(id) => Some(id),
            Trace::Sampled { span, .. } => Some(&span.trace_id),
        }
    }

    /// The `traceparent` the upstream gets, when ramjet's span is its parent.
    pub fn traceparent(&self) -> Option<[u8; TRACEPARENT_LEN]> {
        let Trace::Sampled { span, .. } = self else { return None };
        Some(trace_context::format(span))
    }
}

/// Adds `value` as the `traceparent` of the HTTP/1 head in `out`, before the blank line that ends
/// it; `replaces`: first removes the client's (every field of that name).
pub(crate) fn set_traceparent(out: &mut Vec<u8>, value: &[u8], replaces: bool) {
    const NAME: &[u8] = b"traceparent:";
    // Line by line from the request line's end, `memchr` finding each: only the lines' first
    // bytes are compared.
    let mut at = memchr::memchr(b'\n', out).map_or(out.len(), |i| i + 1);
    while replaces && at < out.len() {
        let end = memchr::memchr(b'\n', &out[at..]).map_or(out.len(), |i| at + i + 1);
        let line = &out[at..end];
        if line.len() > NAME.len() && line[..NAME.len()].eq_ignore_ascii_case(NAME) {
            out.drain(at..end);
        } else {
            at = end;
        }
    }
    debug_assert!(out.ends_with(b"\r\n\r\n"));
    out.truncate(out.len() - 2);
    out.extend_from_slice(b"traceparent: ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n\r\n");
}

/// A worker's part: the sampling decision, span ids, and its end of the ring.
pub(crate) struct WorkerTracer {
    pub settings: Arc<TraceSettings>,
    producer: Producer<Box<SpanRecord>>,
    /// Random span and trace ids: SplitMix64 over a per-worker random key and a counter.
    key: u64,
    counter: u64,
}

impl WorkerTracer {
    /// Where a request with this `traceparent` (if any) stands; `random` is uniform in [0, 1).
    pub fn decide(&mut self, traceparent: Option<&[u8]>, random: f64) -> Trace {
        let parent = traceparent.and_then(trace_context::parse);
        let sampled = match parent {
            Some(p) if self.settings.parent_based => p.sampled,
            _ => random < self.settings.sample_ratio,
        };
        match (parent, sampled) {
            (Some(p), false) => Trace::Joined(p.trace_id),
            (None, false) => Trace::None,
            (parent, true) => {
                let trace_id = match parent {
                    Some(p) => p.trace_id,
                    None => {
                        let (a, b) = (self.next_id(), self.next_id());
                        let mut id = [0u8; 16];
                        id[..8].copy_from_slice(&a.to_be_bytes());
                        id[8..].copy_from_slice(&b.to_be_bytes());
                        id
                    }
                };
                let span = SpanContext { trace_id, span_id: self.next_id().to_be_bytes(), sampled: true };
                Trace::Sampled { span, parent: parent.map(|p| p.span_id), replaces: traceparent.is_some() }
            }
        }
    }

    fn next_id(&mut self) -> u64 {
        loop {
            self.counter = self.counter.wrapping_add(1);
            let mut z = self.key ^ self.counter.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            if z != 0 {
                return z;
            }
        }
    }

    /// Hands a finished span to the exporter; `false` (dropped) when the ring is full.
    pub fn push(&mut self, span: Box<SpanRecord>) -> bool {
        self.producer.push(span).is_ok()
    }
}

/// One finished server span, as the exporter encodes it.
#[derive(Debug, Default)]
pub(crate) struct SpanRecord {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    /// The request's method, host, target, user agent and request id, one after the other (one
    /// allocation): [`SpanRecord::request_text`] gives each.
    pub text: Vec<u8>,
    /// Where each of those ends in `text`.
    pub ends: [u16; 5],
    /// `1.0`, `1.1` or `2`.
    pub protocol_version: &'static str,
    pub tls: bool,
    pub client: Option<SocketAddr>,
    pub generation: u64,
    pub status: u16,
    pub route: Option<Arc<str>>,
    pub backend: Option<Arc<str>>,
    pub upstream: Option<SocketAddr>,
    pub upstream_status: Option<u16>,
    pub upstream_connect: Option<Duration>,
    pub upstream_header: Option<Duration>,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// The request's texts a span keeps, in [`SpanRecord::text`]'s order.
#[derive(Clone, Copy)]
pub(crate) enum RequestText {
    Method = 0,
    Host = 1,
    Target = 2,
    UserAgent = 3,
    RequestId = 4,
}

impl SpanRecord {
    /// Keeps the request's texts, in [`RequestText`]'s order.
    pub fn keep_request_text(&mut self, texts: [&[u8]; 5]) {
        self.text = Vec::with_capacity(texts.iter().map(|t| t.len().min(u16::MAX as usize / 8)).sum());
        for (i, t) in texts.iter().enumerate() {
            // Long enough for any sane value; a longer one is cut (the span stays valid).
            let t = &t[..t.len().min(u16::MAX as usize / 8)];
            self.text.extend_from_slice(t);
            self.ends[i] = self.text.len() as u16;
        }
    }

    pub fn request_text(&self, which: RequestText) -> &[u8] {
        let i = which as usize;
        let start = if i == 0 { 0 } else { usize::from(self.ends[i - 1]) };
        self.text.get(start..usize::from(self.ends[i])).unwrap_or_default()
    }
}

/// The running exporter thread.
pub struct TraceExport {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    ended: mpsc::Receiver<()>,
}

/// Spans per POST.
const BATCH: usize = 512;
/// How long one export may take (connect, send, answer).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

impl TraceExport {
    /// Starts the exporter thread; returns one [`WorkerTracer`] per worker.
    pub(crate) fn start(
        settings: TraceSettings,
        workers: usize,
        stats: Arc<WorkerStats>,
    ) -> io::Result<(TraceExport, Vec<WorkerTracer>)> {
        let settings = Arc::new(settings);
        let mut consumers = Vec::with_capacity(workers);
        let mut tracers = Vec::with_capacity(workers);
        for worker in 0..workers {
            let (producer, consumer) = RingBuffer::new(settings.queue_spans.max(16));
            consumers.push(consumer);
            tracers.push(WorkerTracer { settings: settings.clone(), producer, key: random_key(worker), counter: 0 });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (stop_flag, settings_for_thread) = (stop.clone(), settings.clone());
        let (end, ended) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new().name("ramjet-otlp".into()).spawn(move || {
            let _end = end;
            let mut exporter = Exporter::new(&settings_for_thread, stats);
            loop {
                let stopping = stop_flag.load(Ordering::Acquire);
                exporter.drain(&mut consumers);
                if stopping {
                    return;
                }
                std::thread::park_timeout(settings_for_thread.export_interval);
            }
        })?;
        Ok((TraceExport { stop, thread: Some(thread), ended }, tracers))
    }

    /// Exports what the rings still hold and stops (after the workers have stopped); waits at most
    /// one export's time.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            match self.ended.recv_timeout(EXPORT_TIMEOUT + Duration::from_secs(1)) {
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    tracing::warn!("the trace collector is slow; its last spans are lost")
                }
                _ => {
                    let _ = t.join();
                }
            }
        }
    }
}

impl Drop for TraceExport {
    fn drop(&mut self) {
        self.finish();
    }
}

fn random_key(worker: usize) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    worker.hash(&mut h);
    SystemTime::now().hash(&mut h);
    h.finish()
}

/// The exporter thread's state: the encoded resource and the counters.
struct Exporter {
    endpoint: OtlpEndpoint,
    name: Option<OperationName>,
    /// `{"resourceSpans":[{"resource":{…},"scopeSpans":[{"scope":{…},"spans":[` — what every
    /// request body starts with.
    prefix: Vec<u8>,
    stats: Arc<WorkerStats>,
    /// The spans as the rings hand them over (boxed so a worker moves a pointer, not the span).
    #[allow(clippy::vec_box)]
    batch: Vec<Box<SpanRecord>>,
    body: Vec<u8>,
    /// When the last failure was logged (one warning a minute at most).
    warned: Option<Instant>,
}

impl Exporter {
    fn new(settings: &TraceSettings, stats: Arc<WorkerStats>) -> Self {
        let mut prefix = b"{\"resourceSpans\":[{\"resource\":{\"attributes\":[".to_vec();
        let mut first = true;
        let service = ("service.name".to_string(), settings.service_name.clone());
        for (key, value) in std::iter::once(&service).chain(&settings.resource) {
            push_attribute(&mut prefix, &mut first, key, AttributeValue::Text(value.as_bytes()));
        }
        prefix.extend_from_slice(b"]},\"scopeSpans\":[{\"scope\":{\"name\":\"ramjet\",\"version\":\"");
        prefix.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        prefix.extend_from_slice(b"\"},\"spans\":[");
        Exporter {
            endpoint: settings.endpoint.clone(),
            name: settings.operation_name.clone(),
            prefix,
            stats,
            batch: Vec::with_capacity(BATCH),
            body: Vec::new(),
            warned: None,
        }
    }

    /// Takes every span from the rings and exports them in batches.
    fn drain(&mut self, consumers: &mut [Consumer<Box<SpanRecord>>]) {
        for consumer in consumers.iter_mut() {
            while let Ok(span) = consumer.pop() {
                self.batch.push(span);
                if self.batch.len() == BATCH {
                    self.export();
                }
            }
        }
        if !self.batch.is_empty() {
            self.export();
        }
    }

    fn export(&mut self) {
        self.body.clear();
        self.body.extend_from_slice(&self.prefix);
        for (i, span) in self.batch.iter().enumerate() {
            if i > 0 {
                self.body.push(b',');
            }
            encode_span(&mut self.body, span, self.name.as_ref());
        }
        self.body.extend_from_slice(b"]}]}]}");
        let n = self.batch.len() as u64;
        self.batch.clear();
        match post(&self.endpoint, &self.body) {
            Ok(()) => self.stats.trace_spans_exported(n),
            Err(e) => {
                self.stats.trace_spans_failed(n);
                if self.warned.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    self.warned = Some(Instant::now());
                    tracing::warn!(endpoint = %self.endpoint.authority, error = %e, spans = n, "cannot export spans; they are dropped");
                }
            }
        }
    }
}

/// POSTs one OTLP/HTTP JSON body; an answer other than 2xx is an error.
fn post(endpoint: &OtlpEndpoint, body: &[u8]) -> io::Result<()> {
    let addrs: Vec<SocketAddr> = endpoint.authority.to_socket_addrs()?.collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, EXPORT_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let mut stream = stream.ok_or(last)?;
    stream.set_read_timeout(Some(EXPORT_TIMEOUT))?;
    stream.set_write_timeout(Some(EXPORT_TIMEOUT))?;
    let mut head = Vec::with_capacity(200);
    head.extend_from_slice(b"POST ");
    head.extend_from_slice(endpoint.path.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    head.extend_from_slice(endpoint.authority.as_bytes());
    head.extend_from_slice(b"\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ");
    push_decimal(&mut head, body.len() as u64);
    head.extend_from_slice(b"\r\n\r\n");
    stream.write_all(&head)?;
    stream.write_all(body)?;
    // The status line is all that matters; the body (a partial-success report, if any) is not read.
    let mut answer = [0u8; 32];
    let mut got = 0;
    while got < 12 {
        match stream.read(&mut answer[got..])? {
            0 => break,
            n => got += n,
        }
    }
    match answer.get(9) {
        Some(b'2') if answer.starts_with(b"HTTP/1.") => Ok(()),
        _ => Err(io::Error::other(format!(
            "the collector answered {:?}",
            String::from_utf8_lossy(&answer[..got.min(answer.len())]).lines().next().unwrap_or("nothing")
        ))),
    }
}

/// One attribute value in OTLP JSON: 64-bit integers are strings there.
enum AttributeValue<'a> {
    Text(&'a [u8]),
    Int(u64),
    Float(f64),
    Bool(bool),
}

fn push_attribute(out: &mut Vec<u8>, first: &mut bool, key: &str, value: AttributeValue<'_>) {
    if !std::mem::take(first) {
        out.push(b',');
    }
    out.extend_from_slice(b"{\"key\":\"");
    json_escape(out, key.as_bytes());
    out.extend_from_slice(b"\",\"value\":{");
    match value {
        AttributeValue::Text(t) => {
            out.extend_from_slice(b"\"stringValue\":\"");
            json_escape(out, t);
            out.push(b'"');
        }
        AttributeValue::Int(n) => {
            out.extend_from_slice(b"\"intValue\":\"");
            push_decimal(out, n);
            out.push(b'"');
        }
        AttributeValue::Float(f) => {
            use std::io::Write as _;
            let _ = write!(out, "\"doubleValue\":{f}");
        }
        AttributeValue::Bool(b) => {
            out.extend_from_slice(if b { b"\"boolValue\":true" } else { b"\"boolValue\":false" })
        }
    }
    out.extend_from_slice(b"}}");
}

/// A span in OTLP JSON (ids as hex, kind 2 = SERVER, status code 2 = ERROR for a 5xx), with the
/// attributes of OpenTelemetry's HTTP server conventions and ramjet's own.
fn encode_span(out: &mut Vec<u8>, s: &SpanRecord, name: Option<&OperationName>) {
    use AttributeValue::*;
    out.extend_from_slice(b"{\"traceId\":\"");
    push_hex(out, &s.trace_id);
    out.extend_from_slice(b"\",\"spanId\":\"");
    push_hex(out, &s.span_id);
    out.push(b'"');
    if let Some(parent) = &s.parent {
        out.extend_from_slice(b",\"parentSpanId\":\"");
        push_hex(out, parent);
        out.push(b'"');
    }
    let text = |which| s.request_text(which);
    let method = text(RequestText::Method);
    out.extend_from_slice(b",\"name\":\"");
    match name {
        Some(name) => push_name(name, out, s),
        None => json_escape(out, method),
    }
    out.extend_from_slice(b"\",\"kind\":2,\"startTimeUnixNano\":\"");
    push_decimal(out, s.start_unix_nanos);
    out.extend_from_slice(b"\",\"endTimeUnixNano\":\"");
    push_decimal(out, s.end_unix_nanos);
    out.extend_from_slice(b"\",\"attributes\":[");
    let target = text(RequestText::Target);
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], Some(&target[q + 1..])),
        None => (target, None),
    };
    let mut first = true;
    let a = &mut first;
    push_attribute(out, a, "http.request.method", Text(method));
    push_attribute(out, a, "url.scheme", Text(if s.tls { b"https" } else { b"http" }));
    push_attribute(out, a, "url.path", Text(path));
    if let Some(q) = query {
        push_attribute(out, a, "url.query", Text(q));
    }
    let host = text(RequestText::Host);
    let port_at = host.iter().rposition(|&b| b == b':').filter(|&i| !host.ends_with(b"]") && i > 0);
    let port = port_at.and_then(|i| std::str::from_utf8(&host[i + 1..]).ok()?.parse::<u16>().ok());
    let host = match (port_at, port) {
        (Some(i), Some(_)) => &host[..i],
        _ => host,
    };
    push_attribute(out, a, "server.address", Text(host));
    if let Some(port) = port {
        push_attribute(out, a, "server.port", Int(u64::from(port)));
    }
    push_attribute(out, a, "network.protocol.version", Text(s.protocol_version.as_bytes()));
    if let Some(client) = s.client {
        let ip = client.ip().to_canonical().to_string();
        push_attribute(out, a, "client.address", Text(ip.as_bytes()));
    }
    let user_agent = text(RequestText::UserAgent);
    if !user_agent.is_empty() {
        push_attribute(out, a, "user_agent.original", Text(user_agent));
    }
    push_attribute(out, a, "http.response.status_code", Int(u64::from(s.status)));
    push_attribute(out, a, "http.request.body.size", Int(s.bytes_in));
    push_attribute(out, a, "http.response.body.size", Int(s.bytes_out));
    push_attribute(out, a, "ramjet.request_id", Text(text(RequestText::RequestId)));
    push_attribute(out, a, "ramjet.generation", Int(s.generation));
    if let Some(route) = &s.route {
        push_attribute(out, a, "ramjet.route", Text(route.as_bytes()));
    }
    if let Some(backend) = &s.backend {
        push_attribute(out, a, "ramjet.backend", Text(backend.as_bytes()));
    }
    if let Some(upstream) = s.upstream {
        let text = upstream.to_string();
        push_attribute(out, a, "ramjet.upstream.address", Text(text.as_bytes()));
    }
    if let Some(status) = s.upstream_status {
        push_attribute(out, a, "ramjet.upstream.status_code", Int(u64::from(status)));
    }
    if let Some(d) = s.upstream_connect {
        push_attribute(out, a, "ramjet.upstream.connect_ms", Float(d.as_secs_f64() * 1000.0));
    }
    if let Some(d) = s.upstream_header {
        push_attribute(out, a, "ramjet.upstream.header_ms", Float(d.as_secs_f64() * 1000.0));
    }
    push_attribute(out, a, "ramjet.tls", Bool(s.tls));
    out.extend_from_slice(b"],\"status\":{");
    if s.status >= 500 {
        out.extend_from_slice(b"\"code\":2");
    }
    out.extend_from_slice(b"}}");
}

/// Nanoseconds since the Unix epoch now.
pub(crate) fn unix_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn tracer(ratio: f64, parent_based: bool) -> WorkerTracer {
        let mut settings = TraceSettings::new("http://127.0.0.1:4318".parse().unwrap());
        settings.sample_ratio = ratio;
        settings.parent_based = parent_based;
        let (producer, _) = RingBuffer::new(4);
        WorkerTracer { settings: Arc::new(settings), producer, key: 7, counter: 0 }
    }

    #[test]
    fn sampling_follows_the_parent_then_the_ratio() {
        let mut t = tracer(0.0, true);
        // A sampled parent is followed whatever the ratio; ramjet's span is its child.
        let Trace::Sampled { span, parent, replaces: true } = t.decide(Some(VALID), 0.5) else { panic!() };
        assert_eq!(span.trace_id, trace_context::parse(VALID).unwrap().trace_id);
        assert_eq!(parent, Some(trace_context::parse(VALID).unwrap().span_id));
        let tp = Trace::Sampled { span, parent, replaces: true }.traceparent().unwrap();
        assert_eq!(trace_context::parse(&tp), Some(span));
        let mut hex = Vec::new();
        push_hex(&mut hex, &span.span_id);
        assert_eq!(&tp[36..52], &hex[..]);
        // An unsampled parent: joined (logged), not traced.
        let unsampled = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert!(matches!(t.decide(Some(unsampled), 0.0), Trace::Joined(_)));
        // No parent: the ratio.
        assert_eq!(t.decide(None, 0.0), Trace::None);
        let mut all = tracer(1.0, true);
        let Trace::Sampled { span, parent: None, replaces: true } = all.decide(Some(b"garbage"), 0.99) else {
            panic!()
        };
        assert_ne!(span.trace_id, [0; 16]);
        assert!(matches!(all.decide(None, 0.5), Trace::Sampled { replaces: false, .. }));
        // Not parent-based: the ratio decides, in the parent's trace.
        let mut none = tracer(0.0, false);
        assert!(matches!(none.decide(Some(VALID), 0.5), Trace::Joined(_)));
    }

    #[test]
    fn the_clients_traceparent_is_replaced() {
        let mut head = b"GET / HTTP/1.1\r\nhost: a\r\nTraceParent: 00-x\r\ntracestate: k=v\r\n\r\n".to_vec();
        set_traceparent(&mut head, VALID, true);
        let text = String::from_utf8(head).unwrap();
        assert_eq!(
            text,
            "GET / HTTP/1.1\r\nhost: a\r\ntracestate: k=v\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n"
        );
        let mut head = b"GET / HTTP/1.1\r\nhost: a\r\n\r\n".to_vec();
        set_traceparent(&mut head, VALID, false);
        assert!(
            head.ends_with(b"host: a\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n")
        );
    }

    #[test]
    fn endpoints_take_a_base_or_a_full_url() {
        let e: OtlpEndpoint = "http://collector.observability:4318".parse().unwrap();
        assert_eq!((e.authority.as_str(), e.path.as_str()), ("collector.observability:4318", "/v1/traces"));
        let e: OtlpEndpoint = "http://10.0.0.1/custom/traces".parse().unwrap();
        assert_eq!((e.authority.as_str(), e.path.as_str()), ("10.0.0.1:4318", "/custom/traces"));
        let e: OtlpEndpoint = "http://[::1]:9999/".parse().unwrap();
        assert_eq!((e.authority.as_str(), e.path.as_str()), ("[::1]:9999", "/v1/traces"));
        assert!("https://c:4318".parse::<OtlpEndpoint>().unwrap_err().contains("not supported"));
        assert!("c:4318".parse::<OtlpEndpoint>().is_err());
        assert!("http://c:port".parse::<OtlpEndpoint>().is_err());
    }

    #[test]
    fn spans_encode_as_otlp_json() {
        let mut span = SpanRecord {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: Some([3; 8]),
            start_unix_nanos: 1_700_000_000_000_000_000,
            end_unix_nanos: 1_700_000_000_001_000_000,
            protocol_version: "1.1",
            status: 503,
            route: Some("shop/web".into()),
            ..SpanRecord::default()
        };
        span.keep_request_text([b"GET", b"shop.test:8080", b"/cart?id=\"7\"", b"", b"r1"]);
        assert_eq!(span.request_text(RequestText::Target), b"/cart?id=\"7\"");
        assert_eq!(span.request_text(RequestText::RequestId), b"r1");
        let mut out = Vec::new();
        encode_span(&mut out, &span, None);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(r#"{"traceId":"01010101010101010101010101010101","spanId":"0202020202020202","parentSpanId":"0303030303030303","name":"GET","kind":2,"startTimeUnixNano":"1700000000000000000""#), "{text}");
        assert!(text.contains(r#"{"key":"url.query","value":{"stringValue":"id=\"7\""}}"#), "{text}");
        assert!(text.contains(r#"{"key":"server.address","value":{"stringValue":"shop.test"}},{"key":"server.port","value":{"intValue":"8080"}}"#), "{text}");
        assert!(text.ends_with(r#""status":{"code":2}}"#), "{text}");
    }

    #[test]
    fn an_operation_name_template_names_the_span() {
        let name = OperationName::parse("HTTP $request_method $uri on $host ($scheme)").unwrap();
        let mut span = SpanRecord::default();
        span.keep_request_text([b"GET", b"shop.test:8080", b"/cart?id=7", b"", b"r1"]);
        let mut out = Vec::new();
        push_name(&name, &mut out, &span);
        assert_eq!(String::from_utf8(out).unwrap(), "HTTP GET /cart on shop.test (http)");
    }
}
