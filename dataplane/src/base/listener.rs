//! Listening sockets (TCP, and UDP for UDP routes): one SO_REUSEPORT socket per worker, and a
//! refusal to share a port with another copy of the daemon.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Why the listeners could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Another process holds the address. SO_REUSEPORT would let a second daemon bind it silently
    /// and steal half the connections, so this is checked before binding.
    #[error("{addr} is already in use (is another ramjet running?)")]
    InUse { addr: SocketAddr, source: io::Error },
    /// Any other failure to bind or listen.
    #[error("cannot listen on {addr}")]
    Bind { addr: SocketAddr, source: io::Error },
}

fn socket(addr: SocketAddr, reuse_port: bool) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    // Accepted connections inherit TCP_NODELAY from their listener (Linux): set once here, not
    // with a system call per connection.
    socket.set_nodelay(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// Binds `count` listeners sharing `addr` with SO_REUSEPORT, after checking with a plain bind that
/// no other process listens there. With port 0 the kernel picks one port for all of them.
pub fn bind_shared(addr: SocketAddr, count: usize) -> Result<Vec<TcpListener>, ListenError> {
    let probe = socket(addr, false).map_err(|source| match source.kind() {
        io::ErrorKind::AddrInUse => ListenError::InUse { addr, source },
        _ => ListenError::Bind { addr, source },
    })?;
    let bound = probe.local_addr().ok().and_then(|a| a.as_socket()).unwrap_or(addr);
    drop(probe);
    (0..count)
        .map(|_| {
            let s = socket(bound, true)?;
            s.listen(1024)?;
            Ok(TcpListener::from(s))
        })
        .collect::<io::Result<Vec<_>>>()
        .map_err(|source| ListenError::Bind { addr: bound, source })
}

/// Binds `count` UDP sockets sharing `addr` with SO_REUSEPORT (the kernel keeps each client's
/// datagrams on one of them), after checking with a plain bind that no other process holds it.
pub fn bind_shared_udp(addr: SocketAddr, count: usize) -> Result<Vec<std::net::UdpSocket>, ListenError> {
    let udp = |reuse_port: bool| -> io::Result<Socket> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_reuse_address(true)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        Ok(socket)
    };
    let probe = udp(false).map_err(|source| match source.kind() {
        io::ErrorKind::AddrInUse => ListenError::InUse { addr, source },
        _ => ListenError::Bind { addr, source },
    })?;
    drop(probe);
    (0..count)
        .map(|_| udp(true).map(std::net::UdpSocket::from))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|source| ListenError::Bind { addr, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // A test thread, not a worker: a blocking connect is fine here.
    #[allow(clippy::disallowed_methods)]
    fn accepted_connections_inherit_tcp_nodelay() {
        let listeners = bind_shared("127.0.0.1:0".parse().unwrap(), 1).unwrap();
        let addr = listeners[0].local_addr().unwrap();
        listeners[0].set_nonblocking(false).unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let (accepted, _) = listeners[0].accept().unwrap();
        assert!(accepted.nodelay().unwrap(), "the accepted socket has TCP_NODELAY without setting it");
    }
}
