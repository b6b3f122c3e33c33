//! Connecting to an endpoint with a deadline, in plain TCP or over TLS (the handshake runs on the
//! worker, within the same deadline as the connect), and the connection with its read buffer.

use crate::base::coarse_timer::CoarseTimer;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use monoio::net::TcpStream;
use monoio_rustls::TlsConnector;
use ramjet_shared::{UpstreamErrorKind, UpstreamTls};

use super::stream::UpstreamStream;
use crate::base::buf::ReadBuf;
use crate::error::ProxyError;

/// A connection to one endpoint with its read buffer.
pub struct UpstreamConn {
    pub stream: UpstreamStream,
    pub buf: ReadBuf,
    pub addr: SocketAddr,
    /// The TLS settings' id (0: plain TCP): part of the pool's key, so a connection made for one
    /// backend's TLS settings never serves a backend with others.
    pub tls_id: u64,
    /// Taken from the pool rather than freshly connected.
    pub reused: bool,
    /// The TCP socket under the stream, for [`super::pool::looks_alive`]'s peek.
    pub fd: RawFd,
}

/// Connects to `addr` within `timeout`, then handshakes TLS with `tls`'s HTTP/1.1 settings when
/// given (within what is left of `timeout`).
pub async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    timer: &CoarseTimer,
    buf: Vec<u8>,
    tls: Option<&UpstreamTls>,
) -> Result<UpstreamConn, ProxyError> {
    let connecting = async {
        let stream = connect_tcp(addr).await?;
        let fd = stream.as_raw_fd();
        match tls {
            None => Ok((UpstreamStream::Plain(stream), fd)),
            Some(tls) => {
                let connector = TlsConnector::from(tls.http1.clone());
                handshake(&connector, tls, stream).await.map(|s| (UpstreamStream::Tls(Box::new(s)), fd))
            }
        }
    };
    match crate::base::watchdog::timeout(timer, timeout, connecting).await {
        Ok(Ok((stream, fd))) => Ok(UpstreamConn {
            stream,
            buf: ReadBuf::new(buf),
            addr,
            tls_id: tls.map_or(0, |t| t.id),
            reused: false,
            fd,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ProxyError::Upstream(UpstreamErrorKind::Timeout)),
    }
}

/// A TCP connection to `addr`, without Nagle's delay.
pub(crate) async fn connect_tcp(addr: SocketAddr) -> Result<TcpStream, ProxyError> {
    let stream = TcpStream::connect_addr(addr).await.map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Connect))?;
    // Best effort: a socket that refuses it still works, only with Nagle's delay.
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// The client side of a TLS handshake with a backend. A failure (certificate not verified, a
/// backend that does not speak TLS) is [`UpstreamErrorKind::Tls`].
async fn handshake(
    connector: &TlsConnector,
    tls: &UpstreamTls,
    stream: TcpStream,
) -> Result<monoio_rustls::ClientTlsStream<TcpStream>, ProxyError> {
    connector.connect(tls.server_name.clone(), stream).await.map_err(|e| {
        tracing::debug!(error = %e, "TLS handshake with a backend failed");
        ProxyError::Upstream(UpstreamErrorKind::Tls)
    })
}
