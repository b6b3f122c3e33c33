//! The adapters that let the `h2` crate, written against tokio's poll-based I/O traits, run on the
//! worker's monoio runtime. A plain TCP connection becomes monoio's own poll-io stream (readiness
//! based, on either driver: h2 reads into and writes from its own buffers, nothing is copied on the
//! way). A TLS stream, which monoio-rustls offers only with owned-buffer I/O, goes through
//! monoio-compat's `StreamWrapper` (one read and one write buffer per connection, each monoio read
//! or write run as a boxed future). Either sits behind [`Prefixed`], which first replays the bytes
//! HTTP/1 detection already read, yields to the worker's other tasks after every [`READ_BUDGET`]
//! bytes, and watches the frames go by for a flood h2 itself does not bound ([`FrameWatch`]).

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
    watch: FrameWatch,
}

impl<T> Prefixed<T> {
    pub fn new(prefix: Bytes, inner: T) -> Self {
        Prefixed { prefix, inner, budget: READ_BUDGET, watch: FrameWatch::new() }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            this.watch.scan(&buf.filled()[before..])?;
            return Poll::Ready(Ok(()));
        }
        if this.budget == 0 {
            // Let the worker's other tasks run; this one is scheduled again at once.
            this.budget = READ_BUDGET;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.budget = this.budget.saturating_sub(buf.filled().len() - before);
        if let Poll::Ready(Ok(())) = read {
            this.watch.scan(&buf.filled()[before..])?;
        }
        read
    }
}

/// The client's connection preface, before its first frame.
const PREFACE_LEN: usize = 24;
/// Empty DATA frames in a row (without END_STREAM) a client may send; one more ends the connection.
pub(crate) const MAX_EMPTY_DATA_RUN: u32 = 16;

/// Follows the frames a client sends, from their 9-byte headers, to refuse the empty-DATA flood
/// (CVE-2019-9518): a DATA frame without payload or END_STREAM costs the sender nothing and no
/// flow-control window, and h2 queues each one for the stream's reader. As Envoy does, a run of
/// such frames with nothing else between them ends the connection; a legitimate client sends at
/// most one (to end a stream it sends END_STREAM, which does not count).
pub(crate) struct FrameWatch {
    /// Bytes still to skip: the preface, then the rest of the current frame's payload.
    skip: usize,
    /// The current frame header while it arrives in pieces.
    head: [u8; 9],
    have: usize,
    empty_run: u32,
}

impl FrameWatch {
    pub fn new() -> Self {
        FrameWatch { skip: PREFACE_LEN, head: [0; 9], have: 0, empty_run: 0 }
    }

    /// Follows `bytes`, the next ones the client sent; an error ends the connection.
    pub fn scan(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have < 9 {
                return Ok(());
            }
            self.have = 0;
            let len = usize::from(self.head[0]) << 16 | usize::from(self.head[1]) << 8 | usize::from(self.head[2]);
            let (kind, flags) = (self.head[3], self.head[4]);
            const DATA: u8 = 0;
            const END_STREAM: u8 = 1;
            if kind == DATA && len == 0 && flags & END_STREAM == 0 {
                self.empty_run += 1;
                if self.empty_run > MAX_EMPTY_DATA_RUN {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "a flood of empty DATA frames"));
                }
            } else if len > 0 {
                self.empty_run = 0;
            }
            self.skip = len;
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags, 0, 0, 0, 1];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_run_of_empty_data_frames_is_refused_in_any_pieces() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(4, 0, &[0, 4, 0, 1, 0, 0]));
        for _ in 0..MAX_EMPTY_DATA_RUN {
            bytes.extend(frame(0, 0, b""));
        }
        // One frame with a payload starts the count again; END_STREAM never counts.
        bytes.extend(frame(0, 0, b"x"));
        for _ in 0..MAX_EMPTY_DATA_RUN {
            bytes.extend(frame(0, 0, b""));
        }
        bytes.extend(frame(0, 1, b""));
        for piece in [1, 2, 5, 9, 10, 4096] {
            let mut watch = FrameWatch::new();
            assert!(bytes.chunks(piece).all(|c| watch.scan(c).is_ok()), "pieces of {piece}");
            assert!(watch.scan(&frame(0, 0, b"")).is_err(), "pieces of {piece}: one too many");
        }
    }
}
