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
//! connection (GOAWAY) after the answer. The `x-request-id` a call carried comes back in the
//! trailer `x-seen-request-id`. Connections are counted, opened and closed; `start_tls` serves
//! over TLS (GRPCS).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderMap, Request, Response};

pub struct GrpcBackend {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
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
        let (count, gone) = (connections.clone(), closed.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { continue };
                    count.fetch_add(1, Ordering::Relaxed);
                    let (tls, gone) = (tls.clone(), gone.clone());
                    tokio::spawn(async move {
                        match tls {
                            None => connection(tcp).await,
                            Some(tls) => {
                                if let Ok(stream) = tls.accept(tcp).await {
                                    connection(stream).await;
                                }
                            }
                        }
                        gone.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
        });
        GrpcBackend { addr, connections, closed }
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
async fn connection<T>(io: T)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut conn) = h2::server::handshake(io).await else { return };
    let goaway = Arc::new(tokio::sync::Notify::new());
    loop {
        tokio::select! {
            next = conn.accept() => match next {
                Some(Ok((request, respond))) => {
                    tokio::spawn(serve(request, respond, goaway.clone()));
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
    let _ = send.send_trailers(end);
    if header("x-goaway").is_some() {
        goaway.notify_one();
    }
}
