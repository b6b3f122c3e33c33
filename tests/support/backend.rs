//! A real HTTP/1.1 backend on loopback (std threads), answering with its name and what it saw.
//!
//! Paths: `/slow/<ms>` sleeps first, as does any path with a `delay=<n>ms` or `delay=<n>s` query
//! parameter (the Gateway API conformance echo server's); `/chunked` answers chunked; `/close` answers without a length
//! and closes; `/ws` accepts a WebSocket-style upgrade and echoes bytes; `/nobody/<status>` answers
//! that status with no body; anything else answers 200 with `name`, the method, the target, the
//! headers and the request body, with the response fields an `X-Echo-Set-Header: Name:value,…`
//! field asks for (as the Gateway API conformance echo server does). `/big/<bytes>` answers that
//! many bytes. Every byte a backend
//! receives is recorded ([`Backend::received`]), so attack tests can see exactly what went upstream.
//!
//! [`ScriptedBackend`] answers each request head with the next response of a script, byte for byte,
//! for tests of what ramjet does with malformed responses.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Backend {
    pub addr: SocketAddr,
    pub name: String,
    connections: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    received: Arc<Mutex<Vec<u8>>>,
}

/// Reads from a stream and keeps a copy of every byte.
struct Recorder {
    stream: TcpStream,
    log: Arc<Mutex<Vec<u8>>>,
}

impl Read for Recorder {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stream.read(buf)?;
        self.log.lock().unwrap().extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl Backend {
    pub fn start(name: &str) -> Self {
        Self::start_with(name, None)
    }

    /// A backend that closes idle keep-alive connections after `idle` (to exercise stale pooled
    /// connections).
    pub fn start_with(name: &str, idle: Option<Duration>) -> Self {
        Self::on_listener(name, TcpListener::bind("127.0.0.1:0").unwrap(), idle)
    }

    /// A backend on a listener of the caller's (one on an address other than loopback).
    pub fn on_listener(name: &str, listener: TcpListener, idle: Option<Duration>) -> Self {
        let addr = listener.local_addr().unwrap();
        let backend = Backend {
            addr,
            name: name.to_string(),
            connections: Arc::default(),
            open: Arc::default(),
            requests: Arc::default(),
            stop: Arc::default(),
            received: Arc::default(),
        };
        let (name, connections, open, requests, stop, received) = (
            backend.name.clone(),
            backend.connections.clone(),
            backend.open.clone(),
            backend.requests.clone(),
            backend.stop.clone(),
            backend.received.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                connections.fetch_add(1, Ordering::Relaxed);
                open.fetch_add(1, Ordering::Relaxed);
                let (name, requests, open) = (name.clone(), requests.clone(), open.clone());
                let recorder = Recorder { stream, log: received.clone() };
                std::thread::spawn(move || {
                    serve(recorder, &name, &requests, idle);
                    open.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        backend
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// TCP connections accepted and not yet closed by either side.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    /// Every byte received so far, on all connections, as text.
    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: Recorder, name: &str, requests: &AtomicUsize, idle: Option<Duration>) {
    let _ = stream.stream.set_nodelay(true);
    let mut writer = stream.stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let _ = reader.get_ref().stream.set_read_timeout(idle);
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let _ = reader.get_ref().stream.set_read_timeout(None);
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end().to_string();
            if h.is_empty() {
                break;
            }
            headers.push(h);
        }
        requests.fetch_add(1, Ordering::Relaxed);
        let header = |n: &str| {
            headers.iter().find_map(|h| {
                let (k, v) = h.split_once(':')?;
                k.eq_ignore_ascii_case(n).then(|| v.trim().to_string())
            })
        };
        let mut body = Vec::new();
        if let Some(len) = header("content-length") {
            body.resize(len.parse().unwrap(), 0);
            if reader.read_exact(&mut body).is_err() {
                return;
            }
        } else if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let mut size = String::new();
                reader.read_line(&mut size).unwrap();
                // A chunk extension (`;name=value`) says nothing about the size.
                let digits = size.split(';').next().unwrap_or_default();
                let n = usize::from_str_radix(digits.trim(), 16).unwrap();
                let mut chunk = vec![0; n + 2];
                reader.read_exact(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        }
        if let Some(ms) = target.strip_prefix("/slow/") {
            std::thread::sleep(Duration::from_millis(ms.parse().unwrap_or(100)));
        }
        if let Some(delay) =
            target.split_once('?').and_then(|(_, q)| q.split('&').find_map(|p| p.strip_prefix("delay=")))
        {
            let ms = match delay.strip_suffix("ms") {
                Some(ms) => ms.parse().unwrap_or(0),
                None => delay.strip_suffix('s').and_then(|s| s.parse::<u64>().ok()).unwrap_or(0) * 1000,
            };
            std::thread::sleep(Duration::from_millis(ms));
        }
        if let Some(size) = target.strip_prefix("/big/") {
            let size: usize = size.parse().unwrap_or(0);
            if writer.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n").as_bytes()).is_err() {
                return;
            }
            let block = vec![b'x'; 64 * 1024];
            let mut left = size;
            while left > 0 {
                let n = left.min(block.len());
                if writer.write_all(&block[..n]).is_err() {
                    return;
                }
                left -= n;
            }
            continue;
        }
        if target == "/ws" {
            let _ = writer
                .write_all(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
            // Echo whatever arrives until the client closes.
            let mut buf = [0u8; 4096];
            let mut rest = reader.buffer().to_vec();
            if !rest.is_empty() {
                let _ = writer.write_all(&rest);
                rest.clear();
            }
            let mut raw = reader.into_inner();
            loop {
                match raw.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if writer.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                }
            }
        }
        let mut text = format!("backend={name}\nmethod={method}\ntarget={target}\n");
        for h in &headers {
            text.push_str(&format!("header={h}\n"));
        }
        text.push_str(&format!("body={}\n", String::from_utf8_lossy(&body)));
        let response = if target == "/chunked" {
            let mut r = String::from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            for piece in [text.as_str(), "and more\n"] {
                r.push_str(&format!("{:x}\r\n{piece}\r\n", piece.len()));
            }
            r.push_str("0\r\n\r\n");
            r
        } else if target == "/close" {
            let r = format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{text}");
            let _ = writer.write_all(r.as_bytes());
            return;
        } else if let Some(status) = target.strip_prefix("/nobody/") {
            format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n")
        } else {
            // `X-Echo-Set-Header: Name:value,Name:value`: the conformance echo server's response headers.
            let echoed: String = header("x-echo-set-header")
                .into_iter()
                .flat_map(|v| {
                    v.split(',')
                        .filter_map(|f| f.split_once(':'))
                        .map(|(n, v)| format!("{n}: {v}\r\n"))
                        .collect::<Vec<_>>()
                })
                .collect();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n{echoed}Content-Length: {}\r\n\r\n{text}",
                text.len()
            )
        };
        if method == "HEAD" {
            let head_only = response.split("\r\n\r\n").next().unwrap().to_string() + "\r\n\r\n";
            let _ = writer.write_all(head_only.as_bytes());
        } else if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// A backend that answers each request head it reads with the next response of its script, as
/// raw bytes (and closes when the script runs out). It records what it received.
pub struct ScriptedBackend {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<u8>>>,
}

impl ScriptedBackend {
    pub fn start(script: Vec<Vec<u8>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections: Arc<AtomicUsize> = Arc::default();
        let received: Arc<Mutex<Vec<u8>>> = Arc::default();
        let script = Arc::new(Mutex::new(script.into_iter()));
        let (conns, log) = (connections.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                conns.fetch_add(1, Ordering::Relaxed);
                let (script, log) = (script.clone(), log.clone());
                std::thread::spawn(move || {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        // One response per request head (bodies are not expected here).
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let Some(response) = script.lock().unwrap().next() else { return };
                            if stream.write_all(&response).is_err() {
                                return;
                            }
                        }
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                log.lock().unwrap().extend_from_slice(&buf[..n]);
                                seen.extend_from_slice(&buf[..n]);
                            }
                        }
                    }
                });
            }
        });
        ScriptedBackend { addr, connections, received }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }
}

/// A server that answers each request head (bodies are not expected) with what `answer` makes of
/// it, keeping connections open: an authentication service, say. It records every head it reads
/// and counts its connections.
pub struct HeadServer {
    pub addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

impl HeadServer {
    pub fn start(answer: impl Fn(&str) -> &'static str + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads: Arc<Mutex<Vec<String>>> = Arc::default();
        let connections: Arc<AtomicUsize> = Arc::default();
        let (seen, counted, answer) = (heads.clone(), connections.clone(), Arc::new(answer));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::Relaxed);
                let (seen, answer) = (seen.clone(), answer.clone());
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    let mut reader = BufReader::new(stream);
                    loop {
                        let mut head = String::new();
                        loop {
                            let mut line = String::new();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            head.push_str(&line);
                            if line == "\r\n" {
                                break;
                            }
                        }
                        let reply = answer(&head);
                        seen.lock().unwrap().push(head);
                        if writer.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        HeadServer { addr, heads, connections }
    }

    /// The last head it read.
    pub fn last(&self) -> String {
        self.heads.lock().unwrap().last().cloned().unwrap_or_default()
    }

    /// How many heads it answered.
    pub fn asked(&self) -> usize {
        self.heads.lock().unwrap().len()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
}
