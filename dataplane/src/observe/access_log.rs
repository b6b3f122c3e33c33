//! The access log: one record per request (HTTP/1.1 exchange or HTTP/2 stream), JSON lines or text.
//!
//! ```text
//! worker: request head ─▶ begin (request fields) ─▶ … ─▶ end (status, bytes, timings) ─▶ keep? ─▶ ring
//!                                                                               (full: drop + count)
//! writer thread: every flush interval, each worker's ring ─▶ one buffered write ─▶ stdout/stderr/file
//! ```
//!
//! A worker formats the record into a buffer it owns and copies it into its own single-producer
//! single-consumer byte ring (`rtrb`): no lock, no syscall and no allocation per request. When the
//! ring has no room the record is dropped and counted (`ramjet_access_log_dropped_total`): the
//! worker never waits for the writer. The writer thread drains every ring on an interval and
//! writes what it found; on [`AccessLog::reopen`] (SIGHUP) it reopens a file destination, so
//! logrotate can move the file away.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::base::clock::civil;
use crate::codec::http1::head::push_decimal;
use crate::conn::TlsSession;
use crate::observe::log_template::LogTemplate;
use crate::observe::requests::MAX_REQUEST_ID;
use crate::observe::text::{json_escape, push_hex};
use ramjet_shared::{route_object, RouteOrigin};

/// Where records go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    Stderr,
    File(PathBuf),
}

/// How records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// One JSON object per line.
    #[default]
    Json,
    /// One line of `key=value` fields after the request line.
    Text,
    /// nginx's `combined` format, which log tools (GoAccess, Fluent Bit's nginx parser) read:
    /// `addr - - [time] "request" status bytes "referer" "user agent"`.
    Combined,
    /// ingress-nginx's default `log-format-upstream`: `combined`, then the request length and
    /// time, `[upstream name] []`, the upstream's address, response length, time and status, and
    /// the request id.
    NginxUpstream,
}

impl Format {
    fn is_nginx(self) -> bool {
        matches!(self, Format::Combined | Format::NginxUpstream)
    }
}

/// What is logged and how.
#[derive(Debug, Clone)]
pub struct AccessLogSettings {
    pub destination: Destination,
    pub format: Format,
    /// Requests for these paths (exact, the query ignored) are not logged: health checks.
    pub skip_paths: Vec<String>,
    /// Only requests answered with a status of 400 or more are logged.
    pub errors_only: bool,
    /// The share of successful requests (status below 400) that is logged, 0.0 to 1.0; errors are
    /// always logged.
    pub success_sample: f64,
    /// Size of each worker's ring, in bytes.
    pub buffer_bytes: usize,
    /// How often the writer thread drains the rings.
    pub flush_interval: Duration,
    /// A line of the operator's own (`--access-log-template`, ingress-nginx's
    /// `log-format-upstream`), in place of `format`.
    pub template: Option<Arc<LogTemplate>>,
}

impl AccessLogSettings {
    pub fn new(destination: Destination, format: Format) -> Self {
        AccessLogSettings {
            destination,
            format,
            skip_paths: Vec::new(),
            errors_only: false,
            success_sample: 1.0,
            buffer_bytes: 1024 * 1024,
            flush_interval: Duration::from_millis(20),
            template: None,
        }
    }
}

/// The open destination.
enum Sink {
    Stdout(io::Stdout),
    Stderr(io::Stderr),
    File(PathBuf, File),
}

fn open_file(path: &PathBuf) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Sink {
    fn open(destination: &Destination) -> io::Result<Sink> {
        Ok(match destination {
            Destination::Stdout => Sink::Stdout(io::stdout()),
            Destination::Stderr => Sink::Stderr(io::stderr()),
            Destination::File(path) => Sink::File(path.clone(), open_file(path)?),
        })
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Stdout(s) => s.lock().write_all(bytes),
            Sink::Stderr(s) => s.lock().write_all(bytes),
            Sink::File(_, f) => f.write_all(bytes),
        }
    }

    fn reopen(&mut self) {
        if let Sink::File(path, file) = self {
            match open_file(path) {
                Ok(f) => *file = f,
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot reopen the access log"),
            }
        }
    }
}

/// The running writer thread and the rings it drains.
pub struct AccessLog {
    reopen: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Disconnected when the writer thread has ended.
    ended: mpsc::Receiver<()>,
}

/// How long [`AccessLog::finish`] waits for the writer: a destination that accepts nothing (a pipe
/// nobody reads) must not hold up the shutdown.
const FINISH_WAIT: Duration = Duration::from_secs(5);

/// What a worker needs to log: its end of its ring and the settings.
pub(crate) struct WorkerLog {
    pub settings: Arc<AccessLogSettings>,
    producer: Producer<u8>,
}

impl AccessLog {
    /// Opens the destination (an error names it) and starts the writer thread; returns one
    /// [`WorkerLog`] per worker.
    pub(crate) fn start(settings: AccessLogSettings, workers: usize) -> io::Result<(AccessLog, Vec<WorkerLog>)> {
        let mut sink = Sink::open(&settings.destination).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot open the access log {:?}: {e}", settings.destination))
        })?;
        let settings = Arc::new(settings);
        let mut consumers = Vec::with_capacity(workers);
        let mut logs = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (producer, consumer) = RingBuffer::new(settings.buffer_bytes.max(1024));
            consumers.push(consumer);
            logs.push(WorkerLog { settings: settings.clone(), producer });
        }
        let reopen = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (reopen_flag, stop_flag, interval) = (reopen.clone(), stop.clone(), settings.flush_interval);
        let (end, ended) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new().name("ramjet-access-log".into()).spawn(move || {
            let _end = end;
            loop {
                let stopping = stop_flag.load(Ordering::Acquire);
                if reopen_flag.swap(false, Ordering::AcqRel) {
                    sink.reopen();
                }
                drain(&mut consumers, &mut sink);
                if stopping {
                    return;
                }
                std::thread::park_timeout(interval);
            }
        })?;
        Ok((AccessLog { reopen, stop, thread: Some(thread), ended }, logs))
    }

    /// Reopens a file destination before the next write (SIGHUP, after logrotate moved it).
    pub fn reopen(&self) {
        self.reopen.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    /// Writes what the rings still hold and stops the writer (after the workers have stopped).
    /// Waits at most a few seconds: a writer blocked on its destination is left behind.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            match self.ended.recv_timeout(FINISH_WAIT) {
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    tracing::warn!("the access log's destination accepts nothing; its last records are lost")
                }
                _ => {
                    if t.join().is_err() {
                        tracing::warn!("the access log's writer panicked");
                    }
                }
            }
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Moves every complete record from the rings to the sink, one write per ring.
fn drain(consumers: &mut [Consumer<u8>], sink: &mut Sink) {
    for consumer in consumers.iter_mut() {
        let n = consumer.slots();
        if n == 0 {
            continue;
        }
        let Ok(chunk) = consumer.read_chunk(n) else { continue };
        let (a, b) = chunk.as_slices();
        let written = sink.write_all(a).and_then(|()| sink.write_all(b));
        chunk.commit_all();
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot write the access log");
        }
    }
}

impl WorkerLog {
    /// Whether a request for `target` is logged at all (the skip list).
    #[inline]
    pub fn wants(&self, target: &[u8]) -> bool {
        let path = target.iter().position(|&b| b == b'?').map_or(target, |q| &target[..q]);
        !self.settings.skip_paths.iter().any(|p| p.as_bytes() == path)
    }

    /// Whether a finished request with `status` is kept; `random` is uniform in [0, 1).
    #[inline]
    pub fn keeps(&self, status: u16, random: f64) -> bool {
        if status >= 400 {
            return true;
        }
        !self.settings.errors_only && random < self.settings.success_sample
    }

    /// Copies one record into the ring; `false` (dropped) when it has no room.
    #[inline]
    pub fn push(&mut self, record: &[u8]) -> bool {
        match self.producer.write_chunk_uninit(record.len()) {
            Ok(chunk) => {
                chunk.fill_from_iter(record.iter().copied());
                true
            }
            Err(_) => false,
        }
    }
}

/// The request side of a record, known when the head has been read.
pub(crate) struct RequestFields<'a> {
    pub client: SocketAddr,
    pub method: &'a [u8],
    pub host: &'a [u8],
    pub path: &'a [u8],
    pub protocol: &'static str,
    pub user_agent: &'a [u8],
    pub referer: &'a [u8],
    pub request_id: &'a [u8],
    /// The request's trace, when it is traced or its client's trace is known.
    pub trace_id: Option<&'a [u8; 16]>,
    pub generation: u64,
    pub tls: Option<&'a TlsSession>,
    /// The request's other fields, for a line template's `$http_<name>`.
    pub head: FieldSource<'a>,
}

/// Where a record finds a request's fields by name.
#[derive(Clone, Copy)]
pub(crate) enum FieldSource<'a> {
    None,
    /// An HTTP/1.1 head as received.
    Http1(&'a [u8]),
    Http2(&'a http::HeaderMap),
}

impl<'a> RequestFields<'a> {
    /// The value of field `name` (lower case), if the request has one.
    pub fn field(&self, name: &str) -> Option<&'a [u8]> {
        match self.head {
            FieldSource::None => None,
            FieldSource::Http2(fields) => fields.get(name).map(http::HeaderValue::as_bytes),
            FieldSource::Http1(head) => head.split(|&b| b == b'\n').skip(1).find_map(|line| {
                let colon = line.iter().position(|&b| b == b':')?;
                line[..colon].eq_ignore_ascii_case(name.as_bytes()).then(|| line[colon + 1..].trim_ascii())
            }),
        }
    }
}

/// The response side of a record.
pub(crate) struct ResponseFields<'a> {
    pub status: u16,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub duration: Duration,
    pub upstream: Option<SocketAddr>,
    pub upstream_connect: Option<Duration>,
    pub upstream_header: Option<Duration>,
    pub upstream_status: Option<u16>,
    pub route: Option<&'a str>,
    pub backend: Option<&'a str>,
    /// The kind of object the route came from.
    pub origin: Option<RouteOrigin>,
}

/// Writes the request fields of a record into `out` (emptied first); [`end`] completes it.
pub(crate) fn begin(format: Format, f: &RequestFields<'_>, out: &mut Vec<u8>) {
    out.clear();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    match format {
        Format::Combined | Format::NginxUpstream => begin_nginx(format, f, now, out),
        Format::Json => {
            out.extend_from_slice(b"{\"time\":\"");
            push_time(out, now);
            out.extend_from_slice(b"\",\"client\":\"");
            push_addr(out, f.client);
            out.push(b'"');
            json_field(out, b"method", f.method);
            json_field(out, b"host", f.host);
            json_field(out, b"path", f.path);
            json_field(out, b"protocol", f.protocol.as_bytes());
            json_field(out, b"user_agent", f.user_agent);
            match f.referer.is_empty() {
                true => out.extend_from_slice(b",\"referer\":null"),
                false => json_field(out, b"referer", f.referer),
            }
            json_field(out, b"request_id", f.request_id);
            match f.trace_id {
                Some(id) => {
                    out.extend_from_slice(b",\"trace_id\":\"");
                    push_hex(out, id);
                    out.push(b'"');
                }
                None => out.extend_from_slice(b",\"trace_id\":null"),
            }
            out.extend_from_slice(b",\"generation\":");
            push_decimal(out, f.generation);
            match f.tls {
                Some(tls) => {
                    out.extend_from_slice(b",\"tls\":true");
                    json_field(out, b"tls_version", tls.version.as_bytes());
                    match tls.sni.is_empty() {
                        true => out.extend_from_slice(b",\"sni\":null"),
                        false => json_field(out, b"sni", tls.sni.as_bytes()),
                    }
                }
                None => out.extend_from_slice(b",\"tls\":false,\"tls_version\":null,\"sni\":null"),
            }
        }
        Format::Text => {
            push_time(out, now);
            out.push(b' ');
            push_addr(out, f.client);
            out.extend_from_slice(b" \"");
            text_value(out, f.method);
            out.push(b' ');
            text_value(out, f.host);
            out.push(b' ');
            text_value(out, f.path);
            out.push(b' ');
            out.extend_from_slice(f.protocol.as_bytes());
            out.extend_from_slice(b"\" gen=");
            push_decimal(out, f.generation);
            out.extend_from_slice(b" id=");
            text_value(out, if f.request_id.is_empty() { b"-" } else { f.request_id });
            out.extend_from_slice(b" trace=");
            match f.trace_id {
                Some(id) => push_hex(out, id),
                None => out.push(b'-'),
            }
            out.extend_from_slice(b" tls=");
            match f.tls {
                Some(tls) => {
                    out.extend_from_slice(tls.version.as_bytes());
                    out.extend_from_slice(b" sni=");
                    text_value(out, if tls.sni.is_empty() { b"-" } else { tls.sni.as_bytes() });
                }
                None => out.extend_from_slice(b"- sni=-"),
            }
            out.extend_from_slice(b" ua=\"");
            text_value(out, f.user_agent);
            out.extend_from_slice(b"\" ref=");
            match f.referer.is_empty() {
                true => out.push(b'-'),
                false => {
                    out.push(b'"');
                    text_value(out, f.referer);
                    out.push(b'"');
                }
            }
            out.extend_from_slice(b" ->");
        }
    }
}

/// One response-side value of a record.
enum Value<'a> {
    Number(u64),
    Millis(Option<Duration>),
    Addr(Option<SocketAddr>),
    Text(Option<&'a str>),
    Status(Option<u16>),
}

/// Completes the record begun in `out` with the response fields and a newline.
pub(crate) fn end(format: Format, f: &ResponseFields<'_>, out: &mut Vec<u8>) {
    if format.is_nginx() {
        return end_nginx(format, f, out);
    }
    // (JSON name, text name, value); absent values are `null` in JSON and `-` in text.
    let fields = [
        ("status", "", Value::Number(u64::from(f.status))),
        ("bytes_in", "in", Value::Number(f.bytes_in)),
        ("bytes_out", "out", Value::Number(f.bytes_out)),
        ("duration_ms", "ms", Value::Millis(Some(f.duration))),
        ("upstream_addr", "upstream", Value::Addr(f.upstream)),
        ("upstream_connect_ms", "connect_ms", Value::Millis(f.upstream_connect)),
        ("upstream_header_ms", "header_ms", Value::Millis(f.upstream_header)),
        ("upstream_status", "upstream_status", Value::Status(f.upstream_status)),
        ("route", "route", Value::Text(f.route)),
        ("backend", "backend", Value::Text(f.backend)),
    ];
    for (json, text, value) in fields {
        match format {
            Format::Json => {
                out.extend_from_slice(b",\"");
                out.extend_from_slice(json.as_bytes());
                out.extend_from_slice(b"\":");
            }
            _ => {
                out.push(b' ');
                if !text.is_empty() {
                    out.extend_from_slice(text.as_bytes());
                    out.push(b'=');
                }
            }
        }
        let absent: &[u8] = if format == Format::Json { b"null" } else { b"-" };
        let quote = format == Format::Json;
        match value {
            Value::Number(n) => push_decimal(out, n),
            Value::Status(Some(n)) => push_decimal(out, u64::from(n)),
            Value::Millis(Some(d)) => push_millis(out, d),
            Value::Addr(Some(a)) => {
                if quote {
                    out.push(b'"');
                }
                push_addr(out, a);
                if quote {
                    out.push(b'"');
                }
            }
            Value::Text(Some(t)) if quote => {
                out.push(b'"');
                json_escape(out, t.as_bytes());
                out.push(b'"');
            }
            Value::Text(Some(t)) => text_value(out, t.as_bytes()),
            Value::Millis(None) | Value::Addr(None) | Value::Text(None) | Value::Status(None) => {
                out.extend_from_slice(absent)
            }
        }
    }
    if format == Format::Json {
        // The object the route came from, split out as the metrics' labels are.
        let object =
            f.origin.zip(f.route).and_then(|(origin, route)| route_object(origin, route, f.backend.unwrap_or("")));
        let (namespace, name, service) = object.map_or((None, None, None), |(n, i, s)| (Some(n), Some(i), s));
        for (key, value) in [("namespace", namespace), ("ingress", name), ("service", service)] {
            match value {
                Some(v) => json_field(out, key.as_bytes(), v.as_bytes()),
                None => {
                    out.extend_from_slice(b",\"");
                    out.extend_from_slice(key.as_bytes());
                    out.extend_from_slice(b"\":null");
                }
            }
        }
    }
    out.extend_from_slice(if format == Format::Json { b"}\n" } else { b"\n" });
}

/// Marks, in a record begun in an nginx format, where the status goes (`STATUS_AT`) and where the
/// request id kept for the end starts (`ID_AT`): neither byte can be in a record, whose values are
/// escaped.
const STATUS_AT: u8 = 0;
const ID_AT: u8 = 1;

/// `addr - - [time] "request" ` STATUS_AT `"referer" "user agent"` [ID_AT id]: the request side of
/// an nginx-format record, the status and bytes to be put at the mark by [`end_nginx`].
fn begin_nginx(format: Format, f: &RequestFields<'_>, now: Duration, out: &mut Vec<u8>) {
    // Port 0: the address alone, as nginx's `$remote_addr`.
    push_addr(out, SocketAddr::new(f.client.ip(), 0));
    out.extend_from_slice(b" - - [");
    push_local_time(out, now);
    out.extend_from_slice(b"] \"");
    nginx_value(out, f.method);
    out.push(b' ');
    nginx_value(out, f.path);
    out.push(b' ');
    out.extend_from_slice(f.protocol.as_bytes());
    out.extend_from_slice(b"\" ");
    out.push(STATUS_AT);
    out.extend_from_slice(b" \"");
    nginx_value(out, if f.referer.is_empty() { b"-" } else { f.referer });
    out.extend_from_slice(b"\" \"");
    nginx_value(out, if f.user_agent.is_empty() { b"-" } else { f.user_agent });
    out.push(b'"');
    if format == Format::NginxUpstream {
        out.push(ID_AT);
        nginx_value(out, f.request_id);
    }
}

/// Completes an nginx-format record: status and bytes at the mark, and for `nginx-upstream` the
/// request's and the upstream's figures, then the request id.
fn end_nginx(format: Format, f: &ResponseFields<'_>, out: &mut Vec<u8>) {
    let mut id = [0u8; 4 * MAX_REQUEST_ID];
    let mut id_len = 0;
    if let Some(at) = out.iter().rposition(|&b| b == ID_AT) {
        id_len = (out.len() - at - 1).min(id.len());
        id[..id_len].copy_from_slice(&out[at + 1..at + 1 + id_len]);
        out.truncate(at);
    }
    let mut status = Vec::with_capacity(24);
    push_decimal(&mut status, u64::from(f.status));
    status.push(b' ');
    push_decimal(&mut status, f.bytes_out);
    if let Some(at) = out.iter().position(|&b| b == STATUS_AT) {
        out.splice(at..at + 1, status);
    }
    if format == Format::NginxUpstream {
        out.push(b' ');
        push_decimal(out, f.bytes_in);
        out.push(b' ');
        push_seconds(out, Some(f.duration));
        // ingress-nginx names an upstream `namespace-service-port`.
        out.extend_from_slice(b" [");
        if let Some(backend) = f.backend {
            let name: Vec<u8> = backend.bytes().map(|b| if b == b'/' || b == b':' { b'-' } else { b }).collect();
            nginx_value(out, &name);
        }
        out.extend_from_slice(b"] [] ");
        match f.upstream {
            Some(addr) => push_addr(out, addr),
            None => out.push(b'-'),
        }
        out.push(b' ');
        match f.upstream_status {
            Some(_) => push_decimal(out, f.bytes_out),
            None => out.push(b'-'),
        }
        out.push(b' ');
        push_seconds(out, f.upstream_header);
        out.push(b' ');
        match f.upstream_status {
            Some(s) => push_decimal(out, u64::from(s)),
            None => out.push(b'-'),
        }
        out.push(b' ');
        out.extend_from_slice(&id[..id_len]);
    }
    out.push(b'\n');
}

/// Seconds with millisecond precision, as nginx writes times: `0.012`; `-` when absent.
pub(super) fn push_seconds(out: &mut Vec<u8>, d: Option<Duration>) {
    match d {
        Some(d) => push_thousandths(out, d.as_millis() as u64),
        None => out.push(b'-'),
    }
}

/// nginx's `$time_local`, in UTC: `05/Dec/2026:16:30:44 +0000`.
pub(super) fn push_local_time(out: &mut Vec<u8>, since_epoch: Duration) {
    const MONTHS: [&[u8; 3]; 12] =
        [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil(secs / 86_400);
    let rem = secs % 86_400;
    let two = push_two_digits;
    two(out, day);
    out.push(b'/');
    out.extend_from_slice(MONTHS[(month as usize).clamp(1, 12) - 1]);
    out.push(b'/');
    two(out, year / 100);
    two(out, year % 100);
    out.push(b':');
    two(out, rem / 3600);
    out.push(b':');
    two(out, rem % 3600 / 60);
    out.push(b':');
    two(out, rem % 60);
    out.extend_from_slice(b" +0000");
}

fn json_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name);
    out.extend_from_slice(b"\":\"");
    json_escape(out, value);
    out.push(b'"');
}

/// Text values: bytes that would break the line or its quoting (spaces too: the fields are
/// separated by them) become `\xXX`.
fn text_value(out: &mut Vec<u8>, value: &[u8]) {
    escape(out, value, false, b"0123456789abcdef");
}

/// `value` with `"`, `\`, control bytes, bytes above 0x7e and (unless `keep_spaces`) spaces
/// written as `\xXX`, in `hex`'s digits.
fn escape(out: &mut Vec<u8>, value: &[u8], keep_spaces: bool, hex: &[u8; 16]) {
    for &b in value {
        let plain = match b {
            b'"' | b'\\' | 0..=0x1f | 0x7f.. => false,
            b' ' => keep_spaces,
            _ => true,
        };
        if plain {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'\\', b'x', hex[(b >> 4) as usize], hex[(b & 0xf) as usize]]);
        }
    }
}

/// Values of the nginx formats, escaped as nginx's access log escapes them: `"`, `\`, control bytes
/// and bytes above 0x7e become `\xXX` (capital hex); spaces stay.
pub(super) fn nginx_value(out: &mut Vec<u8>, value: &[u8]) {
    escape(out, value, true, b"0123456789ABCDEF");
}

/// Milliseconds with microsecond precision: `12.345`.
fn push_millis(out: &mut Vec<u8>, d: Duration) {
    push_thousandths(out, d.as_micros() as u64);
}

/// `n` thousandths as a decimal with three places: `12345` is `12.345`.
fn push_thousandths(out: &mut Vec<u8>, n: u64) {
    push_decimal(out, n / 1000);
    out.push(b'.');
    let frac = n % 1000;
    out.extend_from_slice(&[b'0' + (frac / 100) as u8]);
    push_two_digits(out, frac % 100);
}

/// The last two decimal digits of `v`.
fn push_two_digits(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&[b'0' + (v / 10 % 10) as u8, b'0' + (v % 10) as u8]);
}

/// An address with its port; port 0 is a client address a forwarded field gave without one, written
/// as the address alone.
pub(super) fn push_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    use std::io::Write as _;
    let addr = SocketAddr::new(addr.ip().to_canonical(), addr.port());
    // Writing into a Vec cannot fail, and a socket address fits the capacity kept from earlier
    // records: no allocation in steady state.
    let _ = match addr.port() {
        0 => write!(out, "{}", addr.ip()),
        _ => write!(out, "{addr}"),
    };
}

/// RFC 3339 in UTC with milliseconds: `2026-12-01T02:45:00.123Z`.
pub(super) fn push_time(out: &mut Vec<u8>, since_epoch: Duration) {
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil(secs / 86_400);
    let rem = secs % 86_400;
    let two = push_two_digits;
    two(out, year / 100);
    two(out, year % 100);
    out.push(b'-');
    two(out, month);
    out.push(b'-');
    two(out, day);
    out.push(b'T');
    two(out, rem / 3600);
    out.push(b':');
    two(out, rem % 3600 / 60);
    out.push(b':');
    two(out, rem % 60);
    out.push(b'.');
    let ms = u64::from(since_epoch.subsec_millis());
    out.extend_from_slice(&[b'0' + (ms / 100) as u8, b'0' + (ms / 10 % 10) as u8, b'0' + (ms % 10) as u8]);
    out.push(b'Z');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RequestFields<'static> {
        RequestFields {
            client: "[::ffff:10.0.0.1]:5000".parse().unwrap(),
            method: b"GET",
            host: b"example.com",
            path: b"/a?q=\"x\"",
            protocol: "HTTP/1.1",
            user_agent: b"curl/8 \xff",
            referer: b"https://example.com/from here",
            request_id: b"abc",
            trace_id: Some(&[0xab; 16]),
            generation: 7,
            tls: None,
            head: FieldSource::None,
        }
    }

    fn response() -> ResponseFields<'static> {
        ResponseFields {
            status: 200,
            bytes_in: 10,
            bytes_out: 20,
            duration: Duration::from_micros(1234),
            upstream: Some("127.0.0.1:8080".parse().unwrap()),
            upstream_connect: None,
            upstream_header: Some(Duration::from_micros(56)),
            upstream_status: Some(503),
            route: Some("default/web"),
            backend: Some("default/web:80"),
            origin: Some(RouteOrigin::Ingress),
        }
    }

    #[test]
    fn json_records_are_one_escaped_object_per_line() {
        let mut out = Vec::new();
        begin(Format::Json, &request(), &mut out);
        end(Format::Json, &response(), &mut out);
        let line = String::from_utf8(out).unwrap();
        assert!(line.ends_with("}\n") && line.matches('\n').count() == 1, "{line}");
        assert!(line.contains(r#""client":"10.0.0.1:5000""#), "{line}");
        assert!(line.contains(r#""path":"/a?q=\"x\"""#), "{line}");
        assert!(line.contains(r#""user_agent":"curl/8 \u00ff""#), "{line}");
        assert!(line.contains(r#""user_agent":"curl/8 \u00ff","referer":"https://example.com/from here""#), "{line}");
        assert!(line.contains(r#""duration_ms":1.234,"upstream_addr":"127.0.0.1:8080","upstream_connect_ms":null,"upstream_header_ms":0.056,"upstream_status":503"#), "{line}");
        assert!(line.contains(r#""trace_id":"abababababababababababababababab""#), "{line}");
        assert!(
            line.ends_with(
                r#""namespace":"default","ingress":"web","service":"web"}
"#
            ),
            "{line}"
        );
        // A request without a Referer, answered by ramjet itself.
        let mut out = Vec::new();
        begin(Format::Json, &RequestFields { referer: b"", ..request() }, &mut out);
        end(Format::Json, &ResponseFields { upstream_status: None, ..response() }, &mut out);
        let line = String::from_utf8(out).unwrap();
        assert!(line.contains(r#""referer":null"#) && line.contains(r#""upstream_status":null"#), "{line}");
    }

    #[test]
    fn text_records_keep_one_line() {
        let mut out = Vec::new();
        begin(Format::Text, &request(), &mut out);
        end(Format::Text, &response(), &mut out);
        let line = String::from_utf8(out).unwrap();
        let expected = r#" 10.0.0.1:5000 "GET example.com /a?q=\x22x\x22 HTTP/1.1" gen=7 id=abc trace=abababababababababababababababab tls=- sni=- ua="curl/8\x20\xff" ref="https://example.com/from\x20here" -> 200 in=10 out=20 ms=1.234 upstream=127.0.0.1:8080 connect_ms=- header_ms=0.056 upstream_status=503 route=default/web backend=default/web:80
"#;
        assert!(line.ends_with(expected), "{line}");
    }

    #[test]
    fn nginx_formats_read_as_nginx_writes_them() {
        let mut out = Vec::new();
        begin(Format::Combined, &request(), &mut out);
        end(Format::Combined, &response(), &mut out);
        let line = String::from_utf8(out).unwrap();
        let (time, rest) = line.split_once("] ").unwrap();
        assert!(time.starts_with("10.0.0.1 - - [") && time.ends_with(" +0000"), "{line}");
        assert_eq!(
            rest,
            "\"GET /a?q=\\x22x\\x22 HTTP/1.1\" 200 20 \"https://example.com/from here\" \"curl/8 \\xFF\"\n"
        );
        let mut out = Vec::new();
        begin(Format::NginxUpstream, &request(), &mut out);
        end(Format::NginxUpstream, &response(), &mut out);
        let line = String::from_utf8(out).unwrap();
        assert!(
            line.ends_with("\"curl/8 \\xFF\" 10 0.001 [default-web-80] [] 127.0.0.1:8080 20 0.000 503 abc\n"),
            "{line}"
        );
        // Answered by ramjet itself: no upstream figures.
        let mut out = Vec::new();
        begin(Format::NginxUpstream, &RequestFields { referer: b"", ..request() }, &mut out);
        let own = ResponseFields {
            upstream: None,
            upstream_header: None,
            upstream_status: None,
            backend: None,
            ..response()
        };
        end(Format::NginxUpstream, &own, &mut out);
        let line = String::from_utf8(out).unwrap();
        assert!(line.ends_with("\" 200 20 \"-\" \"curl/8 \\xFF\" 10 0.001 [] [] - - - - abc\n"), "{line}");
    }

    #[test]
    fn local_time_is_nginxs() {
        let mut out = Vec::new();
        push_local_time(&mut out, Duration::from_millis(1_798_761_599_007));
        assert_eq!(out, b"31/Dec/2026:23:59:59 +0000");
    }

    #[test]
    fn formats_times_in_utc() {
        let mut out = Vec::new();
        push_time(&mut out, Duration::from_millis(1_798_761_599_007));
        assert_eq!(out, b"2026-12-31T23:59:59.007Z");
    }
}
