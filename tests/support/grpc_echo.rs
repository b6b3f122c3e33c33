//! The Gateway API conformance suite's gRPC echo server (`conformance/echo-basic/grpc` in
//! sigs.k8s.io/gateway-api, service `gateway_api_conformance.echo_basic.grpcecho.GrpcEcho` of its
//! `grpcecho.proto`), re-made for tests so the suite's GRPCRoute tests can be translated: h2c
//! (prior knowledge) served with the `h2` crate on its own thread and tokio runtime, gRPC's
//! length-prefixed framing, and the little protobuf it needs encoded by hand.
//!
//! * `Echo` and `EchoTwo` answer an `EchoResponse` whose `assertions` say what arrived: the
//!   `fully_qualified_method` (`/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo`), the
//!   `authority`, every header as the Go server's metadata has it, and the `context` naming the
//!   deployment (`namespace`, `service_name`, `pod` = `<service>-0`, `ingress` empty).
//! * `EchoThree`, and any other path, get a trailers-only answer with `grpc-status: 12`
//!   (Unimplemented) and grpc-go's message for it.
//!
//! The headers are grpc-go's incoming metadata: lower-case names, `:authority` included (from
//! `host` when the request had no `:authority`), `host` and the other pseudo-headers left out, and
//! so are `te`, `grpc-timeout`, `grpc-encoding`, `grpc-status`, `grpc-message` and
//! `grpc-message-type`; `content-type`, `user-agent` and `grpc-accept-encoding` stay. As in grpc-go,
//! a request that is not `application/grpc` gets HTTP 415 (`grpc-status: 3`) and one that is not a
//! `POST` HTTP 405 (`grpc-status: 13`). Unlike it: no TLS, no server reflection (a client needs the
//! `.proto`), `-bin` metadata is reported as sent (still base64), and the order of the headers is
//! the request's (Go's map gives a random one).
//!
//! Dropping the [`GrpcEcho`] stops it: the listener and every connection close.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use tokio::sync::oneshot;

/// The service's full name, as paths and `fully_qualified_method` spell it.
pub const SERVICE: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";

/// Request headers grpc-go keeps out of the metadata it hands the server (besides the
/// pseudo-headers other than `:authority`, and `host`).
const NOT_METADATA: [&str; 6] =
    ["te", "grpc-timeout", "grpc-encoding", "grpc-status", "grpc-message", "grpc-message-type"];

pub struct GrpcEcho {
    pub addr: SocketAddr,
    pod: String,
    requests: Arc<AtomicUsize>,
    /// Dropped with the `GrpcEcho`, which ends the server's runtime and with it every connection.
    _stop: oneshot::Sender<()>,
}

impl GrpcEcho {
    /// A server on `127.0.0.1:<any port>` for the deployment `service` in `namespace`: its answers
    /// report the pod `<service>-0` (the suite checks that the pod's name starts with the
    /// backend's).
    pub fn start(namespace: &str, service: &str) -> GrpcEcho {
        Self::on_listener(namespace, service, std::net::TcpListener::bind("127.0.0.1:0").unwrap())
    }

    /// The same on a listener of the caller's (one on an address other than loopback).
    pub fn on_listener(namespace: &str, service: &str, listener: std::net::TcpListener) -> GrpcEcho {
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let pod = format!("{service}-0");
        let context: Bytes = pod_context(namespace, service, &pod).into();
        let requests = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = oneshot::channel();
        let answered = requests.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let serve = async {
                    loop {
                        let Ok((tcp, _)) = listener.accept().await else { continue };
                        tokio::spawn(connection(tcp, context.clone(), answered.clone()));
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime here drops every connection's task.
        });
        GrpcEcho { addr, pod, requests, _stop: stop }
    }

    /// The pod name the answers report.
    pub fn pod(&self) -> &str {
        &self.pod
    }

    /// Calls answered so far, whatever the answer (Unimplemented ones too).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

/// Serves one HTTP/2 connection until it ends.
async fn connection(tcp: tokio::net::TcpStream, context: Bytes, answered: Arc<AtomicUsize>) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else { return };
    while let Some(Ok((request, respond))) = conn.accept().await {
        tokio::spawn(answer(request, respond, context.clone(), answered.clone()));
    }
}

/// Answers one call, as the Go server would.
async fn answer(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    context: Bytes,
    answered: Arc<AtomicUsize>,
) {
    answered.fetch_add(1, Ordering::Relaxed);
    let (parts, mut body) = request.into_parts();
    let content_type = parts.headers.get("content-type").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let is_grpc = content_type.as_deref().is_some_and(|t| {
        t == "application/grpc" || t.starts_with("application/grpc+") || t.starts_with("application/grpc;")
    });
    if !is_grpc {
        let message = format!("invalid gRPC request content-type \"{}\"", content_type.unwrap_or_default());
        return fail(respond, StatusCode::UNSUPPORTED_MEDIA_TYPE, 3, &message);
    }
    if parts.method != Method::POST {
        let message = format!("Received a HEADERS frame with :method \"{}\" which should be POST", parts.method);
        return fail(respond, StatusCode::METHOD_NOT_ALLOWED, 13, &message);
    }
    let path = parts.uri.path();
    let Some((service, method)) = path.strip_prefix('/').unwrap_or(path).rsplit_once('/') else {
        return fail(respond, StatusCode::OK, 12, &format!("malformed method name: \"{path}\""));
    };
    match (service, method) {
        (SERVICE, "Echo" | "EchoTwo") => {}
        (SERVICE, "EchoThree") => return fail(respond, StatusCode::OK, 12, "method EchoThree not implemented"),
        (SERVICE, _) => {
            return fail(respond, StatusCode::OK, 12, &format!("unknown method {method} for service {service}"))
        }
        _ => return fail(respond, StatusCode::OK, 12, &format!("unknown service {service}")),
    }
    // A unary call: the answer comes once the request's one message is in (`EchoRequest` is
    // empty, so what it holds does not matter).
    let mut buf = BytesMut::new();
    while !has_message(&buf) {
        match body.data().await {
            Some(Ok(data)) => {
                let _ = body.flow_control().release_capacity(data.len());
                buf.extend_from_slice(&data);
            }
            _ => return fail(respond, StatusCode::OK, 13, "grpc: the request carried no message"),
        }
    }

    let authority = parts
        .uri
        .authority()
        .map(|a| a.to_string())
        .or_else(|| parts.headers.get("host").map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()))
        .unwrap_or_default();
    let mut headers = vec![(":authority".to_string(), authority.clone())];
    for (name, value) in &parts.headers {
        if name == "host" || NOT_METADATA.contains(&name.as_str()) {
            continue;
        }
        headers.push((name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()));
    }
    let answer = echo_response(path, &headers, &authority, &context);
    let Ok(mut send) = respond.send_response(grpc_head(StatusCode::OK), false) else { return };
    let _ = send.send_data(frame(&answer), false);
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let _ = send.send_trailers(trailers);
}

/// A trailers-only answer: `status`, `grpc-status: code` and `grpc-message`, then the end.
fn fail(mut respond: SendResponse<Bytes>, status: StatusCode, code: u32, message: &str) {
    let mut head = grpc_head(status);
    head.headers_mut().insert("grpc-status", code.into());
    head.headers_mut().insert("grpc-message", percent_encode(message).parse().unwrap());
    let _ = respond.send_response(head, true);
}

fn grpc_head(status: StatusCode) -> Response<()> {
    let mut head = Response::new(());
    *head.status_mut() = status;
    head.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
    head
}

/// `grpc-message` encoding: bytes outside printable ASCII, and `%`, as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    for &b in text.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `buf` starts with a whole gRPC message (flag byte, 4-byte big-endian length, message).
fn has_message(buf: &[u8]) -> bool {
    buf.len() >= 5 && buf.len() >= 5 + u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize
}

/// `message` as an uncompressed gRPC message frame.
fn frame(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

// The protobuf wire format, as much as `EchoResponse` needs: every field is a string or a message,
// both length-delimited (wire type 2). Empty strings are left out, as proto3 does; messages are
// always written.

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Field `number` holding `bytes` (an encoded message, or a string's UTF-8).
fn message(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, u64::from(number) << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn string(out: &mut Vec<u8>, number: u32, text: &str) {
    if !text.is_empty() {
        message(out, number, text.as_bytes());
    }
}

/// `Context { namespace = 1, ingress = 2, service_name = 3, pod = 4 }`; no ingress.
fn pod_context(namespace: &str, service: &str, pod: &str) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, namespace);
    string(&mut out, 3, service);
    string(&mut out, 4, pod);
    out
}

/// `EchoResponse { assertions = 1: Assertions { fully_qualified_method = 1,
/// repeated headers = 2: Header { key = 1, value = 2 }, authority = 3, context = 4 } }`, with
/// `context` already encoded. (`request = 2` would be an empty `EchoRequest`: left out, as the Go
/// server does.)
fn echo_response(method: &str, headers: &[(String, String)], authority: &str, context: &[u8]) -> Vec<u8> {
    let mut assertions = Vec::new();
    string(&mut assertions, 1, method);
    for (key, value) in headers {
        let mut header = Vec::new();
        string(&mut header, 1, key);
        string(&mut header, 2, value);
        message(&mut assertions, 2, &header);
    }
    string(&mut assertions, 3, authority);
    message(&mut assertions, 4, context);
    let mut response = Vec::new();
    message(&mut response, 1, &assertions);
    response
}
