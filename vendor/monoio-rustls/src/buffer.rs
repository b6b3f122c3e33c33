//! The stream's two buffers of TLS bytes between the socket and the rustls session (Ramjet's
//! patch: these replace monoio-io-wrapper's, which are allocated for the stream's whole life).
//!
//! Each is allocated on first use and can be freed while empty (`Stream::release_buffers`), so an
//! idle connection holds neither. While an operation owns a buffer (lent to the kernel), its slot
//! says so: an operation dropped before it finished leaves the slot marked, and the next one fails
//! with an error instead of panicking or reading past lost bytes.

use std::future::Future;
use std::io;

use monoio::buf::{IoBuf, IoBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt, CancelHandle, CancelableAsyncReadRent};
use monoio::BufResult;

/// One TLS record and its header, as monoio-io-wrapper sized it.
const BUFFER_SIZE: usize = 16 * 1024;

/// Bytes between `read` and `write` are filled and not consumed yet.
pub(crate) struct Buffer {
    read: usize,
    write: usize,
    buf: Box<[u8]>,
}

impl Buffer {
    fn new() -> Self {
        Buffer { read: 0, write: 0, buf: vec![0; BUFFER_SIZE].into_boxed_slice() }
    }

    fn len(&self) -> usize {
        self.write - self.read
    }

    fn advance(&mut self, n: usize) {
        debug_assert!(self.read + n <= self.write);
        self.read += n;
        if self.read == self.write {
            self.read = 0;
            self.write = 0;
        }
    }
}

// SAFETY: the pointers stay inside the boxed slice, whose address does not move with the struct.
unsafe impl IoBuf for Buffer {
    fn read_ptr(&self) -> *const u8 {
        self.buf[self.read..].as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: as above; `set_init` is only called with what the kernel wrote after `write`.
unsafe impl IoBufMut for Buffer {
    fn write_ptr(&mut self) -> *mut u8 {
        self.buf[self.write..].as_mut_ptr()
    }

    fn bytes_total(&mut self) -> usize {
        self.buf.len() - self.write
    }

    unsafe fn set_init(&mut self, pos: usize) {
        self.write += pos;
    }
}

enum Slot {
    /// Not allocated (never used, or released while empty).
    Released,
    Ready(Buffer),
    /// Lent to an operation in flight.
    Lent,
    /// An operation was abandoned mid-flight or a write failed: the stream's bytes are no longer
    /// known, so every later operation fails.
    Broken(io::ErrorKind),
}

impl Slot {
    fn is_empty(&self) -> bool {
        match self {
            Slot::Ready(b) => b.len() == 0,
            Slot::Released => true,
            Slot::Lent | Slot::Broken(_) => false,
        }
    }

    /// Frees the buffer if it holds nothing.
    fn release(&mut self) -> bool {
        if let Slot::Ready(b) = self {
            if b.len() == 0 {
                *self = Slot::Released;
            }
        }
        matches!(self, Slot::Released)
    }

    /// The buffer, allocated if need be, marked lent.
    fn lend(&mut self) -> io::Result<Buffer> {
        match std::mem::replace(self, Slot::Lent) {
            Slot::Ready(b) => Ok(b),
            Slot::Released => Ok(Buffer::new()),
            Slot::Lent => {
                *self = Slot::Broken(io::ErrorKind::BrokenPipe);
                Err(abandoned())
            }
            Slot::Broken(kind) => {
                *self = Slot::Broken(kind);
                Err(kind.into())
            }
        }
    }

    /// The buffer in use in place, allocated if need be.
    fn ready(&mut self) -> io::Result<&mut Buffer> {
        if matches!(self, Slot::Released) {
            *self = Slot::Ready(Buffer::new());
        }
        match self {
            Slot::Ready(b) => Ok(b),
            Slot::Lent => {
                *self = Slot::Broken(io::ErrorKind::BrokenPipe);
                Err(abandoned())
            }
            Slot::Broken(kind) => Err((*kind).into()),
            Slot::Released => unreachable!("allocated above"),
        }
    }
}

fn abandoned() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "an earlier operation on this TLS stream was abandoned mid-flight")
}

/// How the socket is read: plainly, or so that a `Canceller` can stop the read.
pub(crate) trait ReadOp<IO> {
    fn read(&self, io: &mut IO, buf: Buffer) -> impl Future<Output = BufResult<usize, Buffer>>;
}

pub(crate) struct Plain;

impl<IO: AsyncReadRent> ReadOp<IO> for Plain {
    fn read(&self, io: &mut IO, buf: Buffer) -> impl Future<Output = BufResult<usize, Buffer>> {
        io.read(buf)
    }
}

pub(crate) struct Cancelable(pub CancelHandle);

impl<IO: CancelableAsyncReadRent> ReadOp<IO> for Cancelable {
    fn read(&self, io: &mut IO, buf: Buffer) -> impl Future<Output = BufResult<usize, Buffer>> {
        io.cancelable_read(buf, self.0.clone())
    }
}

/// TLS bytes read from the socket, not yet taken by the session.
pub(crate) struct ReadBuffer(Slot);

impl ReadBuffer {
    pub(crate) fn new() -> Self {
        ReadBuffer(Slot::Released)
    }

    /// Bytes are buffered for the session (false also when the buffer is lent or broken: the
    /// next `fill` says which).
    pub(crate) fn has_data(&self) -> bool {
        matches!(&self.0, Slot::Ready(b) if b.len() > 0)
    }

    pub(crate) fn release(&mut self) -> bool {
        self.0.release()
    }

    /// Reads once from the socket into the (empty) buffer; 0 is the end of the stream.
    pub(crate) async fn fill<IO, R: ReadOp<IO>>(&mut self, io: &mut IO, op: &R) -> io::Result<usize> {
        let buf = self.0.lend()?;
        let (result, buf) = op.read(io, buf).await;
        self.0 = Slot::Ready(buf);
        result
    }
}

/// What the session reads: the buffered bytes, or `WouldBlock` when there are none.
impl io::Read for ReadBuffer {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buf = match &mut self.0 {
            Slot::Ready(b) if b.len() > 0 => b,
            _ => return Err(io::ErrorKind::WouldBlock.into()),
        };
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf.buf[buf.read..buf.read + n]);
        buf.advance(n);
        Ok(n)
    }
}

/// TLS bytes the session wrote, on their way to the socket.
pub(crate) struct WriteBuffer(Slot);

impl WriteBuffer {
    pub(crate) fn new() -> Self {
        WriteBuffer(Slot::Released)
    }

    pub(crate) fn release(&mut self) -> bool {
        self.0.release()
    }

    /// Writes everything buffered to the socket. A failed write breaks the buffer for good: how
    /// much of it reached the peer is unknown.
    pub(crate) async fn flush_to<IO: AsyncWriteRent>(&mut self, io: &mut IO) -> io::Result<usize> {
        if self.0.is_empty() {
            return Ok(0);
        }
        let buf = self.0.lend()?;
        let (result, mut buf) = io.write_all(buf).await;
        match result {
            Ok(n) => {
                buf.advance(n);
                self.0 = Slot::Ready(buf);
                Ok(n)
            }
            Err(e) => {
                self.0 = Slot::Broken(e.kind());
                Err(e)
            }
        }
    }
}

/// What the session writes into: as much as fits, `WouldBlock` when full.
impl io::Write for WriteBuffer {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let buf = self.0.ready()?;
        let room = buf.buf.len() - buf.write;
        if room == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = room.min(data.len());
        buf.buf[buf.write..buf.write + n].copy_from_slice(&data[..n]);
        buf.write += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
