//! A gRPC backend for tests: the `ramjet.test.Echo` service of `tests/grpc/echo.proto`, served over
//! h2c (prior knowledge) with the `h2` crate on its own thread and tokio runtime, speaking gRPC's
//! wire format (length-prefixed protobuf messages, `grpc-status` in trailers).
//!
//! * `Unary`: answers the message it got, with the trailer `x-trailer: relayed`;
//! * `ServerStream`: answers the message three times, as `<text>#1`, `#2`, `#3`;
//! * `ClientStream`: answers one message, the texts it got joined with `,`;
//! * `Bidi`: answers each message as soon as it arrives, as `echo:<text>`.
//!
//! Metadata `x-fail: <code>` gets a trailers-only answer with that `grpc-status` and the message
//! `denied`; `x-sleep-ms: <n>` waits that long before answering; `x-goaway: 1` closes the
//! connection (GOAWAY) after the answer. The `x-request-id` and `authorization` a call carried
//! come back in the trailers `x-seen-request-id` and `x-seen-authorization`. Connections are counted, opened and closed; `start_tls` serves
//! over TLS (GRPCS).
//!
//! Paths under `/plain` are plain HTTP over HTTP/2 instead (an `H2C` backend): the answer's body is
//! `<method> <path> authority=<authority> body=<request body>`, sent in two DATA frames, and the
//! request's `x-request-id`, `x-forwarded-for`, `te`, `content-length` and `authorization` come back as
//! `x-seen-<name>`. In the query, `length` adds a `content-length`, `trailers` ends the answer with
//! the trailer `x-trailer: relayed`, `status=N` answers N, and `early` answers without reading the
//! request body. Every request's `<method> <path>` is kept, in order ([`GrpcBackend::requests`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderMap, Request, Response};

pub struct GrpcBackend {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl GrpcBackend {
    pub fn start() -> GrpcBackend {
        Self::start_with(None)
    }

    /// Over TLS with `config` (ALPN `h2` is the test's to set); a failed handshake counts as a
    /// connection accepted and closed.
    pub fn start_tls(config: Arc<rustls::ServerConfig>) -> GrpcBackend {
        Self::start_with(Some(tokio_rustls::TlsAcceptor::from(config)))
    }

    fn start_with(tls: Option<tokio_rustls::TlsAcceptor>) -> GrpcBackend {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (count, gone, seen) = (connections.clone(), closed.clone(), requests.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { continue };
                    count.fetch_add(1, Ordering::Relaxed);
                    let (tls, gone, seen) = (tls.clone(), gone.clone(), seen.clone());
                    tokio::spawn(async move {
                        match tls {
                            None => connection(tcp, seen).await,
                            Some(tls) => {
                                if let Ok(stream) = tls.accept(tcp).await {
                                    connection(stream, seen).await;
                                }
                            }
                        }
                        gone.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
        });
        GrpcBackend { addr, connections, closed, requests }
    }

    /// `<method> <path>` of every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Connections that have ended (closed by either side).
    pub fn closed(&self) -> usize {
        self.closed.load(Ordering::Relaxed)
    }
}

/// Serves one HTTP/2 connection until it ends.
async fn connection<T>(io: T, seen: Arc<Mutex<Vec<String>>>)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut conn) = h2::server::handshake(io).await else { return };
    let goaway = Arc::new(tokio::sync::Notify::new());
    loop {
        tokio::select! {
            next = conn.accept() => match next {
                Some(Ok((request, respond))) => {
                    seen.lock().unwrap().push(format!("{} {}", request.method(), request.uri().path()));
                    if request.uri().path().starts_with("/plain") {
                        tokio::spawn(serve_plain(request, respond));
                    } else {
                        tokio::spawn(serve(request, respond, goaway.clone()));
                    }
                }
                _ => break,
            },
            _ = goaway.notified() => conn.graceful_shutdown(),
        }
    }
}

/// A gRPC message frame holding `Msg { text }`.
pub fn frame(text: &str) -> Bytes {
    let mut msg = vec![0x0a];
    let mut n = text.len();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            msg.push(byte);
            break;
        }
        msg.push(byte | 0x80);
    }
    msg.extend_from_slice(text.as_bytes());
    let mut out = vec![0];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(&msg);
    out.into()
}

/// The texts of the complete message frames at the front of `buf` (consumed).
pub fn take_messages(buf: &mut BytesMut) -> Vec<String> {
    let mut texts = Vec::new();
    while buf.len() >= 5 {
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        if buf.len() < 5 + len {
            break;
        }
        buf.advance(5);
        let msg = buf.split_to(len);
        // Field 1, length-delimited; a short varint length is enough for tests.
        let text = if msg.len() >= 2 && msg[0] == 0x0a {
            let mut i = 1;
            let mut n = 0usize;
            let mut shift = 0;
            while i < msg.len() {
                n |= ((msg[i] & 0x7f) as usize) << shift;
                shift += 7;
                i += 1;
                if msg[i - 1] & 0x80 == 0 {
                    break;
                }
            }
            String::from_utf8_lossy(&msg[i..(i + n).min(msg.len())]).into_owned()
        } else {
            String::new()
        };
        texts.push(text);
    }
    texts
}

fn grpc_head() -> Response<()> {
    let mut response = Response::new(());
    response.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
    response
}

fn trailers(status: u32) -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", status.to_string().parse().unwrap());
    t.insert("x-trailer", "relayed".parse().unwrap());
    t
}

async fn next_messages(body: &mut RecvStream, buf: &mut BytesMut) -> Option<Vec<String>> {
    loop {
        let texts = take_messages(buf);
        if !texts.is_empty() {
            return Some(texts);
        }
        let data = body.data().await?.ok()?;
        let _ = body.flow_control().release_capacity(data.len());
        buf.extend_from_slice(&data);
    }
}

async fn serve(request: Request<RecvStream>, mut respond: SendResponse<Bytes>, goaway: Arc<tokio::sync::Notify>) {
    let (parts, mut body) = request.into_parts();
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(ms) = header("x-sleep-ms").and_then(|v| v.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(code) = header("x-fail") {
        let mut response = grpc_head();
        response.headers_mut().insert("grpc-status", code.parse().unwrap());
        response.headers_mut().insert("grpc-message", "denied".parse().unwrap());
        let _ = respond.send_response(response, true);
        return;
    }
    let method = parts.uri.path().rsplit('/').next().unwrap_or("").to_string();
    let mut buf = BytesMut::new();
    let Ok(mut send) = respond.send_response(grpc_head(), false) else { return };
    match method.as_str() {
        "Bidi" => {
            while let Some(texts) = next_messages(&mut body, &mut buf).await {
                for text in texts {
                    let _ = send.send_data(frame(&format!("echo:{text}")), false);
                }
            }
        }
        "ServerStream" => {
            let text = next_messages(&mut body, &mut buf).await.unwrap_or_default().join(",");
            for i in 1..=3 {
                let _ = send.send_data(frame(&format!("{text}#{i}")), false);
            }
        }
        _ => {
            let mut all = Vec::new();
            while let Some(texts) = next_messages(&mut body, &mut buf).await {
                all.extend(texts);
            }
            let _ = send.send_data(frame(&all.join(",")), false);
        }
    }
    let mut end = trailers(0);
    if let Some(id) = parts.headers.get("x-request-id") {
        end.insert("x-seen-request-id", id.clone());
    }
    if let Some(authorization) = parts.headers.get("authorization") {
        end.insert("x-seen-authorization", authorization.clone());
    }
    let _ = send.send_trailers(end);
    if header("x-goaway").is_some() {
        goaway.notify_one();
    }
}

/// Plain HTTP over HTTP/2 (paths under `/plain`; see the module's doc).
async fn serve_plain(request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
    let (parts, mut body) = request.into_parts();
    let query = parts.uri.query().unwrap_or("").to_string();
    let has = |key: &str| query.split('&').any(|p| p == key);
    let mut received = Vec::new();
    if !has("early") {
        while let Some(Ok(data)) = body.data().await {
            let _ = body.flow_control().release_capacity(data.len());
            received.extend_from_slice(&data);
        }
    }
    let status: u16 =
        query.split('&').find_map(|p| p.strip_prefix("status=")).and_then(|s| s.parse().ok()).unwrap_or(200);
    let authority = parts.uri.authority().map_or("", |a| a.as_str());
    let text = format!(
        "{} {} authority={authority} body={}",
        parts.method,
        parts.uri.path(),
        String::from_utf8_lossy(&received)
    );
    let mut response = Response::builder().status(status);
    for name in ["x-request-id", "x-forwarded-for", "te", "content-length", "authorization"] {
        if let Some(value) = parts.headers.get(name) {
            response = response.header(format!("x-seen-{name}"), value);
        }
    }
    if has("length") {
        response = response.header("content-length", text.len());
    }
    let bodiless = parts.method == http::Method::HEAD || status == 204 || status == 304;
    let Ok(mut send) = respond.send_response(response.body(()).unwrap(), bodiless) else { return };
    if bodiless {
        return;
    }
    let (first, second) = text.as_bytes().split_at(text.len() / 2);
    let _ = send.send_data(Bytes::copy_from_slice(first), false);
    let _ = send.send_data(Bytes::copy_from_slice(second), !has("trailers"));
    if has("trailers") {
        let mut end = HeaderMap::new();
        end.insert("x-trailer", "relayed".parse().unwrap());
        let _ = send.send_trailers(end);
    }
}
