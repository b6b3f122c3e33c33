//! Backends for Layer-4 routes: a TCP one that greets each connection with its name and echoes what
//! it reads, and a UDP one that answers each datagram with its name and the datagram.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A TCP backend: greets each connection with `<name>\n`, echoes what it reads, and closes once
/// the client has finished sending (so a half-close must reach it).
pub struct EchoBackend {
    pub addr: SocketAddr,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
}

impl EchoBackend {
    pub fn start(name: &'static str) -> EchoBackend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    if stream.write_all(format!("{name}\n").as_bytes()).is_err() {
                        return;
                    }
                    let mut reader = stream.try_clone().unwrap();
                    let _ = std::io::copy(&mut reader, &mut stream);
                    // EOF from the client: done; closing ends the relay's other direction.
                });
            }
        });
        EchoBackend { addr, connections }
    }
}

/// A UDP backend: answers each datagram with `<name>:` and the datagram, to where it came from.
pub fn udp_echo(name: &'static str) -> SocketAddr {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_535];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let mut answer = format!("{name}:").into_bytes();
            answer.extend_from_slice(&buf[..n]);
            let _ = socket.send_to(&answer, from);
        }
    });
    addr
}
