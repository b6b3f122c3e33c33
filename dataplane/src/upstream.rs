//! Upstream connections: per-worker keep-alive pools and connecting with a deadline.

pub mod exchange;
pub mod h2;
pub mod pool;

pub use self::h2::H2Pool;
pub use pool::Pool;

use std::net::SocketAddr;
use std::time::Duration;

use monoio::net::TcpStream;
use ramjet_shared::UpstreamErrorKind;

use crate::buf::ReadBuf;
use crate::error::ProxyError;

/// A connection to one endpoint with its read buffer.
pub struct UpstreamConn {
    pub stream: TcpStream,
    pub buf: ReadBuf,
    pub addr: SocketAddr,
    /// Taken from the pool rather than freshly connected.
    pub reused: bool,
}

/// Connects to `addr` within `timeout`.
pub async fn connect(addr: SocketAddr, timeout: Duration, buf: Vec<u8>) -> Result<UpstreamConn, ProxyError> {
    match monoio::time::timeout(timeout, TcpStream::connect_addr(addr)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(UpstreamConn { stream, buf: ReadBuf::new(buf), addr, reused: false })
        }
        Ok(Err(_)) => Err(ProxyError::Upstream(UpstreamErrorKind::Connect)),
        Err(_) => Err(ProxyError::Upstream(UpstreamErrorKind::Timeout)),
    }
}
