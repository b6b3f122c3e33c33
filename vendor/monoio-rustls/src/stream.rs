use std::{
    io::{self, Read, Write},
    ops::{Deref, DerefMut},
};

use monoio::{
    buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut, RawBuf},
    io::{AsyncReadRent, AsyncWriteRent, CancelHandle, CancelableAsyncReadRent, Split},
    BufResult,
};
use rustls::{ClientConnection, ConnectionCommon, ServerConnection, SideData};

use crate::buffer::{Cancelable, Plain, ReadBuffer, ReadOp, WriteBuffer};

pub struct Stream<IO, C> {
    pub(crate) io: IO,
    pub(crate) session: C,
    r_buffer: ReadBuffer,
    w_buffer: WriteBuffer,
}

impl<IO: std::fmt::Debug, C: std::fmt::Debug> std::fmt::Debug for Stream<IO, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("io", &self.io).field("session", &self.session).finish()
    }
}

impl<IO> Stream<IO, ServerConnection> {
    #[inline]
    pub fn alpn_protocol(&self) -> Option<Vec<u8>> {
        self.session.alpn_protocol().map(|s| s.to_vec())
    }
}

impl<IO> Stream<IO, ClientConnection> {
    #[inline]
    pub fn alpn_protocol(&self) -> Option<Vec<u8>> {
        self.session.alpn_protocol().map(|s| s.to_vec())
    }
}

unsafe impl<IO: Split, C> Split for Stream<IO, C> {}

impl<IO, C> Stream<IO, C> {
    pub fn new(io: IO, session: C) -> Self {
        Self {
            io,
            session,
            r_buffer: ReadBuffer::new(),
            w_buffer: WriteBuffer::new(),
        }
    }

    /// The socket under the TLS session.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    pub fn into_parts(self) -> (IO, C) {
        (self.io, self.session)
    }

    pub(crate) fn map_conn<C2, F: FnOnce(C) -> C2>(self, f: F) -> Stream<IO, C2> {
        Stream {
            io: self.io,
            session: f(self.session),
            r_buffer: self.r_buffer,
            w_buffer: self.w_buffer,
        }
    }
}

impl<IO: AsyncReadRent + AsyncWriteRent, C, SD: SideData> Stream<IO, C>
where
    C: DerefMut + Deref<Target = ConnectionCommon<SD>>,
{
    /// `alert_on_error`: write the alert for a record that fails here, inside the read. Only the
    /// handshake may: after it, a write of the application's can be in flight on the same stream
    /// (a split stream, or a poll adapter with a read and a write pending), and that write holds
    /// the write buffer. The alert stays queued in the session, and `shutdown` sends it.
    pub(crate) async fn read_io<R: ReadOp<IO>>(&mut self, alert_on_error: bool, op: &R) -> io::Result<usize> {
        // The session is handed bytes only when some are buffered: its own buffer is sized on each
        // hand-over, so asking it to read from nothing would allocate for nothing.
        let n = loop {
            if !self.r_buffer.has_data() && self.r_buffer.fill(&mut self.io, op).await? == 0 {
                // The end of the stream: rustls learns of it from an empty read.
                break self.session.read_tls(&mut io::empty())?;
            }
            match self.session.read_tls(&mut self.r_buffer) {
                Ok(n) => break n,
                Err(ref err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(err) => return Err(err),
            }
        };

        let state = match self.session.process_new_packets() {
            Ok(state) => state,
            Err(err) => {
                if alert_on_error {
                    let _ = self.write_io().await;
                }
                return Err(io::Error::new(io::ErrorKind::InvalidData, err));
            }
        };

        if state.peer_has_closed() && self.session.is_handshaking() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "tls handshake alert",
            ));
        }

        Ok(n)
    }

    /// Moves what the session has to send (up to one buffer) to the socket.
    pub(crate) async fn write_io(&mut self) -> io::Result<usize> {
        let n = self.session.write_tls(&mut self.w_buffer)?;
        self.w_buffer.flush_to(&mut self.io).await?;
        Ok(n)
    }

    /// Frees the two buffers and shrinks the session's own to its minimum, if nothing is pending
    /// in either direction: for a connection about to wait a long time for its next bytes. True
    /// when both are free; the next read or write allocates them again.
    pub fn release_buffers(&mut self) -> bool {
        if self.session.wants_write() {
            return false;
        }
        // rustls resizes its record buffer when it is asked to read; a reader with nothing to give
        // makes it shrink a buffer left large by a big record, and changes nothing else.
        let _ = self.session.read_tls(&mut NothingYet);
        let read = self.r_buffer.release();
        let write = self.w_buffer.release();
        read && write
    }

    pub(crate) async fn handshake(&mut self) -> io::Result<(usize, usize)> {
        let mut wrlen = 0;
        let mut rdlen = 0;
        let mut eof = false;

        loop {
            while self.session.wants_write() && self.session.is_handshaking() {
                wrlen += self.write_io().await?;
            }
            while !eof && self.session.wants_read() && self.session.is_handshaking() {
                let n = self.read_io(true, &Plain).await?;
                rdlen += n;
                if n == 0 {
                    eof = true;
                }
            }

            match (eof, self.session.is_handshaking()) {
                (true, true) => {
                    let err = io::Error::new(io::ErrorKind::UnexpectedEof, "tls handshake eof");
                    return Err(err);
                }
                (false, true) => (),
                (_, false) => {
                    break;
                }
            };
        }

        // flush buffer
        while self.session.wants_write() {
            wrlen += self.write_io().await?;
        }

        Ok((rdlen, wrlen))
    }

    pub(crate) async fn read_inner<T: IoBufMut, R: ReadOp<IO>>(&mut self, mut buf: T, op: &R) -> BufResult<usize, T> {
        let slice = unsafe { std::slice::from_raw_parts_mut(buf.write_ptr(), buf.bytes_total()) };
        loop {
            // read from rustls to buffer
            match self.session.reader().read(slice) {
                Ok(n) => {
                    unsafe { buf.set_init(n) };
                    return (Ok(n), buf);
                }
                // we need more data, read something.
                Err(ref err) if err.kind() == io::ErrorKind::WouldBlock => (),
                Err(e) => {
                    return (Err(e), buf);
                }
            }

            // now we need data, read something into rustls
            if let Err(e) = self.read_io(false, op).await {
                return (Err(e), buf);
            }
        }
    }
}

impl<IO: AsyncReadRent + AsyncWriteRent, C, SD: SideData + 'static> AsyncReadRent for Stream<IO, C>
where
    C: DerefMut + Deref<Target = ConnectionCommon<SD>>,
{
    async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        self.read_inner(buf, &Plain).await
    }

    async fn readv<T: IoVecBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        let n = match unsafe { RawBuf::new_from_iovec_mut(&mut buf) } {
            Some(raw_buf) => self.read(raw_buf).await.0,
            None => Ok(0),
        };
        if let Ok(n) = n {
            unsafe { buf.set_init(n) };
        }
        (n, buf)
    }
}

/// A read that a `Canceller` can stop while it waits for the socket; the bytes read before it
/// stopped stay in the session, none are lost.
impl<IO: CancelableAsyncReadRent + AsyncWriteRent, C, SD: SideData + 'static> CancelableAsyncReadRent for Stream<IO, C>
where
    C: DerefMut + Deref<Target = ConnectionCommon<SD>>,
{
    async fn cancelable_read<T: IoBufMut>(&mut self, buf: T, c: CancelHandle) -> BufResult<usize, T> {
        self.read_inner(buf, &Cancelable(c)).await
    }

    async fn cancelable_readv<T: IoVecBufMut>(&mut self, mut buf: T, c: CancelHandle) -> BufResult<usize, T> {
        let n = match unsafe { RawBuf::new_from_iovec_mut(&mut buf) } {
            Some(raw_buf) => self.cancelable_read(raw_buf, c).await.0,
            None => Ok(0),
        };
        if let Ok(n) = n {
            unsafe { buf.set_init(n) };
        }
        (n, buf)
    }
}

/// A reader with nothing to give yet.
struct NothingYet;

impl Read for NothingYet {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

impl<IO: AsyncReadRent + AsyncWriteRent, C, SD: SideData + 'static> AsyncWriteRent for Stream<IO, C>
where
    C: DerefMut + Deref<Target = ConnectionCommon<SD>>,
{
    async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        // construct slice
        let slice = unsafe { std::slice::from_raw_parts(buf.read_ptr(), buf.bytes_init()) };

        // flush rustls inner write buffer to make sure there is space for new data
        if self.session.wants_write() {
            if let Err(e) = self.write_io().await {
                return (Err(e), buf);
            }
        }

        // write slice to rustls
        let n = match self.session.writer().write(slice) {
            Ok(n) => n,
            Err(e) => return (Err(e), buf),
        };

        // write from rustls to connection
        while self.session.wants_write() {
            match self.write_io().await {
                Ok(0) => {
                    break;
                }
                Ok(_) => (),
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(n), buf)
    }

    // TODO: use real writev
    async fn writev<T: IoVecBuf>(&mut self, buf_vec: T) -> BufResult<usize, T> {
        let n = match unsafe { RawBuf::new_from_iovec(&buf_vec) } {
            Some(raw_buf) => self.write(raw_buf).await.0,
            None => Ok(0),
        };
        (n, buf_vec)
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.session.writer().flush()?;
        while self.session.wants_write() {
            self.write_io().await?;
        }
        self.io.flush().await
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        self.session.send_close_notify();

        while self.session.wants_write() {
            self.write_io().await?;
        }
        self.io.shutdown().await
    }
}
