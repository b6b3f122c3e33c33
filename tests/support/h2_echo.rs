//! An h2c (prior knowledge) backend for tests that tells what it received: every request is
//! answered 200 with the body `<method> <path and query>\nauthority=<authority>\n` followed by each
//! field it got as `<name>: <value>\n`, in order. Every answer carries the fields `x-env: backend`
//! and `x-backend-secret: s` (for response edits to change) and `x-echo-path: <path and query>`.
//! The `h2` crate on its own thread and tokio runtime; connections are counted and every request's
//! `<method> <path and query>` is kept, in order.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{Request, Response};

pub struct H2Echo {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl H2Echo {
    pub fn start() -> H2Echo {
        Self::on_listener(std::net::TcpListener::bind("127.0.0.1:0").unwrap())
    }

    /// The same on a listener of the caller's (one on an address other than loopback).
    pub fn on_listener(listener: std::net::TcpListener) -> H2Echo {
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (count, seen) = (connections.clone(), requests.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { continue };
                    count.fetch_add(1, Ordering::Relaxed);
                    let seen = seen.clone();
                    tokio::spawn(async move {
                        let Ok(mut conn) = h2::server::handshake(tcp).await else { return };
                        while let Some(Ok((request, respond))) = conn.accept().await {
                            let target = request.uri().path_and_query().map_or("", |t| t.as_str());
                            seen.lock().unwrap().push(format!("{} {target}", request.method()));
                            tokio::spawn(echo(request, respond));
                        }
                    });
                }
            });
        });
        H2Echo { addr, connections, requests }
    }

    /// `<method> <path and query>` of every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
}

async fn echo(request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
    let (parts, mut body) = request.into_parts();
    while let Some(Ok(data)) = body.data().await {
        let _ = body.flow_control().release_capacity(data.len());
    }
    let target = parts.uri.path_and_query().map_or("", |t| t.as_str());
    let authority = parts.uri.authority().map_or("", |a| a.as_str());
    let mut text = format!("{} {target}\nauthority={authority}\n", parts.method);
    for (name, value) in &parts.headers {
        text.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes())));
    }
    let response = Response::builder()
        .header("x-env", "backend")
        .header("x-backend-secret", "s")
        .header("x-echo-path", target)
        .body(())
        .unwrap();
    let Ok(mut send) = respond.send_response(response, false) else { return };
    let _ = send.send_data(Bytes::from(text), true);
}
