//! A real OpenTelemetry Collector for the tracing tests: the distribution in `tests/otel` (built by
//! `tests/otel/build.sh` once per machine, cached under `target/otel/<stamp>/`), started on
//! loopback ports chosen at run time, receiving OTLP over HTTP and gRPC and exporting traces with
//! `otlp_http` to a sink this module runs on a thread. The exporter sends JSON, uncompressed, so
//! [`Collector::spans`] is exactly what the collector decoded from what it was sent.
//!
//! OTLP JSON is not the plain protobuf JSON mapping, which matters when a test reads spans or
//! writes one by hand:
//! * `traceId` and `spanId` (and `parentSpanId`) are lowercase hex strings, not base64 (the
//!   receiver answers base64 with 400);
//! * enums are integers: `kind` 2 is SERVER, 3 CLIENT; `status.code` 1 is OK, 2 ERROR (the
//!   receiver also takes `"SPAN_KIND_SERVER"`, but the collector writes integers);
//! * 64-bit integers are decimal strings: `startTimeUnixNano`, `endTimeUnixNano`, an attribute's
//!   `intValue`;
//! * fields at their default value are left out: an unset status is `{}`, a span with no parent
//!   has no `parentSpanId`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::Conn;
use crate::free_port;

/// The collector binary, built on first use.
pub fn otelcol() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| crate::go_tools::go_build("tests/otel/build.sh", "the OpenTelemetry Collector")).join("otelcol")
}

/// A running collector and the sink it exports to; dropping it kills the collector (so does the
/// test binary's death).
pub struct Collector {
    child: Child,
    dir: PathBuf,
    http_port: u16,
    grpc_port: u16,
    sink: Sink,
}

impl Collector {
    /// Starts a collector and waits until its OTLP/HTTP receiver takes traces.
    pub fn start() -> Collector {
        let sink = Sink::start();
        let (http_port, grpc_port) = (free_port(), free_port());
        let dir = crate::temp_dir("otelcol");
        let config = dir.join("config.yaml");
        std::fs::write(&config, config_yaml(http_port, grpc_port, sink.addr)).unwrap();
        // Its log goes to a file: a pipe nobody reads would stall it once full.
        let log = std::fs::File::create(dir.join("otelcol.log")).unwrap();
        let mut command = Command::new(otelcol());
        command.arg("--config").arg(&config).stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        // Dies with the test binary, even one killed mid-run.
        let child = crate::control_plane::spawn(command, "the OpenTelemetry Collector");
        let mut collector = Collector { child, dir, http_port, grpc_port, sink };
        collector.wait_ready();
        collector
    }

    /// Where OTLP/HTTP goes, without the signal's path (`/v1/traces` is appended by a client).
    pub fn otlp_http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Where OTLP/gRPC goes.
    pub fn otlp_grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// Every span the collector exported so far, in arrival order: the span objects of
    /// `resourceSpans[].scopeSpans[].spans[]`, each with `"resource"` (its resource's attribute
    /// list) and `"scope"` (its instrumentation scope) added. Read attributes with [`attribute`].
    pub fn spans(&self) -> Vec<Value> {
        let bodies = self.sink.bodies.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut spans = Vec::new();
        for body in bodies {
            let export: Value = serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("the collector exported no JSON ({e}): {}", String::from_utf8_lossy(&body)));
            for resource_spans in array(&export["resourceSpans"]) {
                let resource = resource_spans["resource"]["attributes"].clone();
                for scope_spans in array(&resource_spans["scopeSpans"]) {
                    for span in array(&scope_spans["spans"]) {
                        let mut span = span.clone();
                        span["resource"] = resource.clone();
                        span["scope"] = scope_spans["scope"].clone();
                        spans.push(span);
                    }
                }
            }
        }
        spans
    }

    /// Waits until at least `n` spans arrived and returns them all; panics with what did arrive
    /// after `timeout`.
    pub fn wait_spans(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if spans.len() >= n {
                return spans;
            }
            if Instant::now() > deadline {
                panic!(
                    "{} span(s) after {timeout:?}, expected {n}: {}\ncollector log:\n{}",
                    spans.len(),
                    serde_json::to_string_pretty(&spans).unwrap(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The collector's own log (stdout and stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("otelcol.log")).unwrap_or_default()
    }

    /// Polls with an empty export (`{}`: no spans, so nothing reaches the sink) until the receiver
    /// answers 200. The collector starts its exporters before its receivers, so the pipeline is up
    /// by then. Generous: a loaded 2-core machine starts it slowly.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.http_port));
        loop {
            if post(addr, "/v1/traces", "{}") == Some(200) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the collector exited ({status}):\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "the collector not ready after 60 s:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The value of attribute `key` in an OTLP attribute list (a span's `attributes`, its `resource`),
/// out of its AnyValue wrapper: `{"stringValue": "x"}` gives `"x"`, `{"intValue": "200"}` gives
/// `"200"` (a string: 64-bit integers are strings in OTLP JSON).
pub fn attribute<'a>(attributes: &'a Value, key: &str) -> Option<&'a Value> {
    let value = array(attributes).iter().find(|kv| kv["key"] == key)?;
    value["value"].as_object()?.values().next()
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The collector's configuration: OTLP in on `http_port` and `grpc_port`, traces out to the sink
/// as JSON. No batch processor (it would hold spans back up to 200 ms) and no sending queue, so a
/// receiver's 200 means the sink has the spans; no retries, so a failed export shows as one. Its
/// own metrics are off: they would listen on 127.0.0.1:8888 and two collectors would clash.
fn config_yaml(http_port: u16, grpc_port: u16, sink: SocketAddr) -> String {
    format!(
        "\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{http_port}
      grpc:
        endpoint: 127.0.0.1:{grpc_port}
exporters:
  otlp_http:
    endpoint: http://{sink}
    encoding: json
    compression: none
    sending_queue:
      enabled: false
    retry_on_failure:
      enabled: false
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp_http]
"
    )
}

/// POSTs a JSON body on a fresh connection; the status, or None when nothing answered.
fn post(addr: SocketAddr, path: &str, body: &str) -> Option<u16> {
    let stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut conn = Conn::over(stream);
    conn.send(
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    Some(conn.read_response_to(false)?.status)
}

/// The OTLP/HTTP server the collector exports to: HTTP/1.1 with keep-alive, keeps each body POSTed
/// to `/v1/traces` and answers `{}` (an export response with no partial failure).
struct Sink {
    addr: SocketAddr,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Sink {
    fn start() -> Sink {
        // Bound here and kept, so an ephemeral port is safe.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stopped) = (bodies.clone(), stop.clone());
        std::thread::Builder::new()
            .name("otlp-sink".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopped.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let kept = kept.clone();
                    // Its connections end when the collector is killed.
                    std::thread::spawn(move || serve(stream, &kept));
                }
            })
            .unwrap();
        Sink { addr, bodies, stop }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Wakes the accept loop to see the flag.
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Serves one connection's requests until the peer closes it. Bodies come with a Content-Length:
/// Go's HTTP client sends one for the exporter's in-memory body, never chunks.
fn serve(stream: TcpStream, bodies: &Mutex<Vec<Vec<u8>>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let status = if path == "/v1/traces" {
            bodies.lock().unwrap_or_else(|e| e.into_inner()).push(body);
            "200 OK"
        } else {
            "404 Not Found"
        };
        write!(writer, "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}")?;
    }
}
