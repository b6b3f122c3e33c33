//! HTTP/2 clients for tests: [`H2Client`], the `h2` crate on a tokio current-thread runtime (a real,
//! well-behaved client whose knobs can be turned: windows, concurrency, resets), and [`RawH2`], a
//! frame writer for what no well-behaved client sends (floods, CONTINUATION storms, HPACK bombs,
//! stream ids out of order).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http::{HeaderMap, Method, Request};
use tokio::runtime::Runtime;

/// What came back on one stream.
#[derive(Debug)]
pub struct H2Response {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl H2Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One h2c connection (prior knowledge), driven on its own runtime while a call runs.
pub struct H2Client {
    pub rt: Runtime,
    pub send: SendRequest<Bytes>,
    /// The connection task: finished when the server closed the connection.
    pub conn: tokio::task::JoinHandle<Result<(), h2::Error>>,
}

impl H2Client {
    pub fn connect(addr: SocketAddr) -> H2Client {
        Self::connect_with(addr, |_| {})
    }

    pub fn connect_with(addr: SocketAddr, tweak: impl FnOnce(&mut h2::client::Builder)) -> H2Client {
        Self::connect_after(addr, b"", tweak)
    }

    /// [`H2Client::connect_with`], sending `prefix` (a PROXY protocol header) before the preface.
    pub fn connect_after(addr: SocketAddr, prefix: &[u8], tweak: impl FnOnce(&mut h2::client::Builder)) -> H2Client {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut builder = h2::client::Builder::new();
        tweak(&mut builder);
        let (send, conn) = rt.block_on(async {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            tokio::io::AsyncWriteExt::write_all(&mut tcp, prefix).await.unwrap();
            let (send, conn) = builder.handshake::<_, Bytes>(tcp).await.unwrap();
            (send, tokio::spawn(conn))
        });
        H2Client { rt, send, conn }
    }

    /// Sends a request (`body` empty: no DATA frame; `content_length` says whether to declare it)
    /// and reads the whole response.
    pub fn request(
        &mut self,
        method: &str,
        authority: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        content_length: bool,
    ) -> Result<H2Response, h2::Error> {
        let request = build(method, authority, path, headers, body.len(), content_length);
        let send = self.send.clone();
        let body = Bytes::copy_from_slice(body);
        self.rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(20), exchange(send, request, body)).await })
            .expect("the stream finishes within 20 s")
    }

    pub fn get(&mut self, authority: &str, path: &str) -> H2Response {
        self.request("GET", authority, path, &[], b"", false).unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// Runs `n` GETs at once on this connection; their statuses and bodies, in order.
    pub fn concurrent_gets(&mut self, authority: &str, paths: &[String]) -> Vec<Result<H2Response, h2::Error>> {
        let send = self.send.clone();
        let requests: Vec<_> = paths.iter().map(|p| build("GET", authority, p, &[], 0, false)).collect();
        self.rt.block_on(async move {
            let tasks: Vec<_> =
                requests.into_iter().map(|r| tokio::spawn(exchange(send.clone(), r, Bytes::new()))).collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(tokio::time::timeout(Duration::from_secs(30), t).await.expect("in time").unwrap());
            }
            out
        })
    }

    /// Whether the server has closed this connection (waits up to `within`).
    pub fn closed_within(&mut self, within: Duration) -> bool {
        let conn = &mut self.conn;
        self.rt.block_on(async { tokio::time::timeout(within, conn).await.is_ok() })
    }
}

fn build(method: &str, authority: &str, path: &str, headers: &[(&str, &str)], len: usize, cl: bool) -> Request<()> {
    let mut request = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri(format!("http://{authority}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if cl {
        request = request.header("content-length", len.to_string());
    }
    request.body(()).unwrap()
}

async fn exchange(mut send: SendRequest<Bytes>, request: Request<()>, body: Bytes) -> Result<H2Response, h2::Error> {
    send = send.ready().await?;
    let (response, mut stream) = send.send_request(request, body.is_empty())?;
    if !body.is_empty() {
        let mut rest = body;
        while !rest.is_empty() {
            stream.reserve_capacity(rest.len());
            let cap = std::future::poll_fn(|cx| stream.poll_capacity(cx)).await.expect("capacity")?;
            let piece = rest.split_to(cap.min(rest.len()));
            stream.send_data(piece, rest.is_empty())?;
        }
    }
    let response = response.await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut recv = response.into_body();
    let mut body = Vec::new();
    while let Some(piece) = recv.data().await {
        let piece = piece?;
        recv.flow_control().release_capacity(piece.len())?;
        body.extend_from_slice(&piece);
    }
    Ok(H2Response { status, headers, body })
}

/// HTTP/2 frame types.
pub mod frame {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
    pub const END_STREAM: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
}

/// A raw HTTP/2 connection over a blocking socket: writes frames exactly as told.
pub struct RawH2 {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawH2 {
    /// Connects and sends the preface and an empty SETTINGS frame.
    pub fn connect(addr: SocketAddr) -> RawH2 {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut raw = RawH2 { stream, buf: Vec::new() };
        raw.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        raw.frame(frame::SETTINGS, 0, 0, &[]);
        raw
    }

    /// Writes bytes; `false` once the server has closed the connection.
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok()
    }

    pub fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> bool {
        let bytes = encode_frame(kind, flags, stream, payload);
        self.write(&bytes)
    }

    /// A GET with the given extra header block fields, all on one HEADERS frame.
    pub fn get(&mut self, stream: u32, authority: &str, path: &str, end_stream: bool) -> bool {
        let block = request_block(authority, path, &[]);
        let flags = frame::END_HEADERS | if end_stream { frame::END_STREAM } else { 0 };
        self.frame(frame::HEADERS, flags, stream, &block)
    }

    /// Reads the next frame: (type, flags, stream id, payload); `None` when the connection closed.
    pub fn read_frame(&mut self) -> Option<(u8, u8, u32, Vec<u8>)> {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let kind = self.buf[3];
                    let flags = self.buf[4];
                    let id = u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]]) & 0x7fff_ffff;
                    let payload = self.buf[9..9 + len].to_vec();
                    self.buf.drain(..9 + len);
                    return Some((kind, flags, id, payload));
                }
            }
            let mut chunk = [0u8; 16384];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads frames until a GOAWAY (its error code) or the end of the connection (`None`).
    pub fn goaway(&mut self) -> Option<u32> {
        while let Some((kind, _, _, payload)) = self.read_frame() {
            if kind == frame::GOAWAY && payload.len() >= 8 {
                return Some(u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]));
            }
        }
        None
    }

    /// Reads until the HEADERS of `stream` (true) or a GOAWAY / the end (false).
    pub fn response_on(&mut self, stream: u32) -> bool {
        while let Some((kind, _, id, _)) = self.read_frame() {
            if kind == frame::HEADERS && id == stream {
                return true;
            }
            if kind == frame::GOAWAY {
                return false;
            }
        }
        false
    }
}

pub fn encode_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK integer with an `n`-bit prefix, the first byte's high bits set to `high`.
pub fn hpack_int(out: &mut Vec<u8>, high: u8, n: u8, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

fn hpack_string(out: &mut Vec<u8>, s: &[u8]) {
    hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// A literal field without indexing, new name, no Huffman coding.
pub fn hpack_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    hpack_string(out, name);
    hpack_string(out, value);
}

/// A literal field with incremental indexing (it enters the dynamic table), new name.
pub fn hpack_indexed_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x40);
    hpack_string(out, name);
    hpack_string(out, value);
}

/// A header block for a GET (`:method GET`, `:scheme http` from the static table).
pub fn request_block(authority: &str, path: &str, extra: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut block = vec![0x82, 0x86]; // :method GET, :scheme http
    hpack_literal(&mut block, b":path", path.as_bytes());
    hpack_literal(&mut block, b":authority", authority.as_bytes());
    for (name, value) in extra {
        hpack_literal(&mut block, name, value);
    }
    block
}

/// The resident memory of this process, in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
