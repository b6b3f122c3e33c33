//! The adapters that let the `h2` crate, written against tokio's poll-based I/O traits, run on the
//! worker's monoio runtime. A plain TCP connection becomes monoio's own poll-io stream (readiness
//! based, on either driver: h2 reads into and writes from its own buffers, nothing is copied on the
//! way). A TLS stream, which monoio-rustls offers only with owned-buffer I/O, goes through
//! monoio-compat's `StreamWrapper` (one read and one write buffer per connection, each monoio read
//! or write run as a boxed future). Either sits behind [`Prefixed`], which first replays the bytes
//! HTTP/1 detection already read, and yields to the worker's other tasks after every
//! [`READ_BUDGET`] bytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use monoio::io::IntoPollIo;
use monoio::net::tcp::stream_poll::TcpStreamPoll;
use monoio::net::TcpStream;
use monoio_compat::StreamWrapper;
use monoio_rustls::ServerTlsStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The owned-buffer adapter's buffers (TLS only): reads come in 8 KiB pieces (h2 reads frame by
/// frame), writes go out in up to 16 KiB pieces (a full DATA frame and its header).
const COMPAT_READ_BUFFER: usize = 8 * 1024;
const COMPAT_WRITE_BUFFER: usize = 16 * 1024 + 9;

/// A client stream as h2 takes it.
pub(crate) trait IntoH2Io: Sized {
    type Io: AsyncRead + AsyncWrite + Unpin + 'static;

    /// `None` when the stream cannot be switched (the connection is then closed).
    fn into_h2_io(self) -> Option<Self::Io>;
}

impl IntoH2Io for TcpStream {
    type Io = TcpStreamPoll;

    fn into_h2_io(self) -> Option<TcpStreamPoll> {
        self.into_poll_io().ok()
    }
}

impl IntoH2Io for ServerTlsStream<TcpStream> {
    type Io = StreamWrapper<ServerTlsStream<TcpStream>>;

    fn into_h2_io(self) -> Option<Self::Io> {
        Some(StreamWrapper::new_with_buffer_size(self, COMPAT_READ_BUFFER, COMPAT_WRITE_BUFFER))
    }
}

/// Bytes a connection may read before its task yields once. h2 reads and handles frames for as
/// long as bytes are there; without this a client that floods cheap frames (SETTINGS, PING, resets)
/// would keep every other connection of the worker waiting while its backlog is worked off.
pub(crate) const READ_BUDGET: usize = 64 * 1024;

/// A stream whose first bytes were read already: they are read again before the stream's own.
pub(crate) struct Prefixed<T> {
    prefix: Bytes,
    inner: T,
    /// Bytes left to read before yielding.
    budget: usize,
}

impl<T> Prefixed<T> {
    pub fn new(prefix: Bytes, inner: T) -> Self {
        Prefixed { prefix, inner, budget: READ_BUDGET }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        if this.budget == 0 {
            // Let the worker's other tasks run; this one is scheduled again at once.
            this.budget = READ_BUDGET;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.budget = this.budget.saturating_sub(buf.filled().len() - before);
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
