//! An upstream byte stream: plain TCP or TLS over TCP, behind one type so that the HTTP/1.1
//! exchange, the pools and the protocol-switch tunnel need no second copy for TLS.

use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, Split};
use monoio::net::TcpStream;
use monoio::BufResult;
use monoio_rustls::ClientTlsStream;

pub enum UpstreamStream {
    Plain(TcpStream),
    /// Boxed: a TLS session is large, and most backends are plain.
    Tls(Box<ClientTlsStream<TcpStream>>),
}

// SAFETY: both variants are `Split` (monoio's `TcpStream`, and monoio-rustls' stream over a
// `Split` I/O, by its own declaration), and the enum only forwards to whichever it holds. The
// protocol-switch tunnel reads one half while it writes the other; the vendored monoio-rustls never
// writes from a read (vendor/monoio-rustls/README.md), so the halves never share its write buffer.
#[allow(unsafe_code)]
unsafe impl Split for UpstreamStream {}

impl AsyncReadRent for UpstreamStream {
    async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpstreamStream::Plain(s) => s.read(buf).await,
            UpstreamStream::Tls(s) => s.read(buf).await,
        }
    }

    async fn readv<T: IoVecBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpstreamStream::Plain(s) => s.readv(buf).await,
            UpstreamStream::Tls(s) => s.readv(buf).await,
        }
    }
}

impl AsyncWriteRent for UpstreamStream {
    async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpstreamStream::Plain(s) => s.write(buf).await,
            UpstreamStream::Tls(s) => s.write(buf).await,
        }
    }

    async fn writev<T: IoVecBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            UpstreamStream::Plain(s) => s.writev(buf).await,
            UpstreamStream::Tls(s) => s.writev(buf).await,
        }
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        match self {
            UpstreamStream::Plain(s) => s.flush().await,
            UpstreamStream::Tls(s) => s.flush().await,
        }
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            UpstreamStream::Plain(s) => s.shutdown().await,
            UpstreamStream::Tls(s) => s.shutdown().await,
        }
    }
}
