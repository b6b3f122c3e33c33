//! A raw HTTP/1.1 client: sends bytes as given and parses what comes back, so tests see exactly
//! what a client would.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
    /// The trailer section of a chunked body, as sent (`name: value` lines, CRLF each).
    pub trailers: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A client connection: plain TCP, or any stream that reads and writes (TLS over TCP).
pub struct Conn<S = TcpStream> {
    pub stream: S,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.set_nodelay(true).unwrap();
        Conn::over(stream)
    }
}

impl<S: Read + Write> Conn<S> {
    pub fn over(stream: S) -> Conn<S> {
        Conn { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).unwrap();
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16384];
        match self.stream.read(&mut chunk) {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            Err(_) => 0,
        }
    }

    /// Reads one response; `head_request` for answers to HEAD (no body whatever the headers say).
    pub fn read_response_to(&mut self, head_request: bool) -> Option<Response> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if self.fill() == 0 {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
        self.buf.drain(..end);
        let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
        let mut resp = Response { status, head, body: String::new(), trailers: String::new() };
        if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
            return Some(resp);
        }
        if let Some(len) = resp.header("content-length").map(|l| l.parse::<usize>().unwrap()) {
            while self.buf.len() < len {
                if self.fill() == 0 {
                    return None;
                }
            }
            resp.body = String::from_utf8_lossy(&self.buf[..len]).to_string();
            self.buf.drain(..len);
        } else if resp.header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            let mut body = Vec::new();
            loop {
                let line_end = loop {
                    if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        break i;
                    }
                    if self.fill() == 0 {
                        return None;
                    }
                };
                let size =
                    usize::from_str_radix(std::str::from_utf8(&self.buf[..line_end]).unwrap().trim(), 16).unwrap();
                self.buf.drain(..line_end + 2);
                if size == 0 {
                    // The trailer section, up to the empty line that ends the message.
                    let end = loop {
                        if self.buf.starts_with(b"\r\n") {
                            break 0;
                        }
                        if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 2;
                        }
                        if self.fill() == 0 {
                            return None;
                        }
                    };
                    resp.trailers = String::from_utf8_lossy(&self.buf[..end]).to_string();
                    self.buf.drain(..end + 2);
                    break;
                }
                while self.buf.len() < size + 2 {
                    if self.fill() == 0 {
                        return None;
                    }
                }
                body.extend_from_slice(&self.buf[..size]);
                self.buf.drain(..size + 2);
            }
            resp.body = String::from_utf8_lossy(&body).to_string();
        } else {
            while self.fill() > 0 {}
            resp.body = String::from_utf8_lossy(&self.buf).to_string();
            self.buf.clear();
        }
        Some(resp)
    }

    pub fn read_response(&mut self) -> Response {
        self.read_response_to(false).expect("a response")
    }

    /// True when the server closed the connection (EOF) with nothing more to read.
    pub fn is_closed(&mut self) -> bool {
        self.buf.is_empty() && self.fill() == 0
    }

    /// `rounds` POSTs, each after 0..=80 ms of silence (on both sides of a 40 ms
    /// `idle_release_after`, and on it), each answered by the echo backend with its own target and
    /// body: client `client`'s bytes, none lost and none another's.
    pub fn post_around_the_release(&mut self, client: u64, rounds: u64, host: &str) {
        for round in 0..rounds {
            std::thread::sleep(Duration::from_millis((client * 7 + round * 13) % 81));
            let body = format!("client{client}-round{round}");
            self.send(
                format!(
                    "POST /c{client}/r{round} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
            let resp = self.read_response();
            assert_eq!(resp.status, 200, "client {client} round {round}");
            assert!(resp.body.contains(&format!("target=/c{client}/r{round}")), "{}", resp.body);
            assert!(resp.body.contains(&format!("body={body}")), "{}", resp.body);
        }
    }

    /// GET `path` with `Host: host` on this connection.
    pub fn get(&mut self, host: &str, path: &str) -> Response {
        self.get_with(host, path, "")
    }

    /// GET `path` with `Host: host` and `extra` field lines (each ending in CRLF).
    pub fn get_with(&mut self, host: &str, path: &str, extra: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n").as_bytes());
        self.read_response()
    }
}

/// One request on a new connection.
pub fn request(addr: SocketAddr, raw: &str) -> Response {
    let mut c = Conn::open(addr);
    c.send(raw.as_bytes());
    c.read_response()
}

pub fn get(addr: SocketAddr, host: &str, path: &str) -> Response {
    Conn::open(addr).get(host, path)
}

/// The sum of a plain counter in the admin listener's `/metrics`.
pub fn counter(admin: SocketAddr, name: &str) -> u64 {
    let text = request(admin, "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").body;
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or_else(|| panic!("{name}"))
}

/// The backend name an answer came from (`backend=NAME` line), or the body of a direct response.
pub fn served_by(resp: &Response) -> String {
    resp.body.lines().find_map(|l| l.strip_prefix("backend=")).unwrap_or(resp.body.trim()).to_string()
}

/// What `curl`, a real TLS client, gets for `https://{name}:{port}/` on 127.0.0.1.
pub struct CurlAnswer {
    /// The HTTP status, `000` when there was no answer (a refused certificate, a failed handshake).
    pub status: String,
    /// The subject of the certificate the server presented (empty when none was).
    pub subject: String,
    /// curl's verbose log, for failure messages.
    pub log: String,
}

/// Asks `https://{name}:{port}/` of 127.0.0.1 with curl, verifying the certificate unless
/// `insecure`.
pub fn curl_https(port: u16, name: &str, insecure: bool) -> CurlAnswer {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sv", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"])
        .args(["--resolve", &format!("{name}:{port}:127.0.0.1")])
        .arg(format!("https://{name}:{port}/"));
    if insecure {
        cmd.arg("-k");
    }
    let out = cmd.output().expect("curl is installed");
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    let subject = log.lines().find(|l| l.contains("subject:")).unwrap_or_default().to_string();
    CurlAnswer { status: String::from_utf8_lossy(&out.stdout).to_string(), subject, log }
}

/// `GET path` with `Host: host` over TLS to `addr`, `sni` sent as the server name, with `config`
/// (its roots decide whom the client trusts; its client certificate, if any, is presented when
/// asked), `Connection: close` so the answer is whole: the status and body, or why the exchange
/// failed (a refused handshake, an untrusted certificate).
pub fn tls_get(
    addr: SocketAddr,
    config: std::sync::Arc<rustls::ClientConfig>,
    sni: &str,
    host: &str,
    extra: &str,
) -> Result<(u16, String), String> {
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).map_err(|e| e.to_string())?;
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}\r\n");
    tls.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    // To the end of the body its Content-Length gives (a server may keep the connection), else EOF.
    let mut text = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let whole = std::str::from_utf8(&text).ok().and_then(|t| {
            let (head, body) = t.split_once("\r\n\r\n")?;
            let length = head.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<usize>().ok()).flatten()
            })?;
            Some(body.len() >= length)
        });
        if whole == Some(true) {
            break;
        }
        match tls.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !text.is_empty() => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    let text = String::from_utf8_lossy(&text).to_string();
    let status =
        text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("no answer: {text:?}"))?;
    Ok((status, text.split_once("\r\n\r\n").map_or("", |p| p.1).to_string()))
}
