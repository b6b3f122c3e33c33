//! The adapter that lets the `h2` crate, written against tokio's poll-based I/O traits, run over
//! monoio's owned-buffer streams on the worker: monoio-compat's `StreamWrapper` (which keeps one
//! read and one write buffer per connection and runs each monoio read or write as a boxed future),
//! behind [`Prefixed`], which first replays the bytes HTTP/1 detection already read, and yields to
//! the worker's other tasks after every [`READ_BUDGET`] bytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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
