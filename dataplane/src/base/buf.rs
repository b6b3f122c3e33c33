//! Owned I/O buffers, reused per worker.
//!
//! monoio's I/O takes a buffer and gives it back (`BufResult`), so a connection's buffer moves into
//! each read and out again. [`ReadBuf`] keeps the bytes read but not yet consumed (`buf[start..]`),
//! reads append after them, and [`BufferPool`] recycles the allocations when connections close.

use std::cell::{Cell, RefCell};
use std::io;
use std::time::{Duration, Instant};

use monoio::buf::{IoBuf, IoBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt, CancelHandle, CancelableAsyncReadRent};

use super::coarse_timer::CoarseTimer;

/// Bytes read from a stream and not consumed yet.
pub struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
}

impl ReadBuf {
    pub fn new(buf: Vec<u8>) -> Self {
        ReadBuf { buf, start: 0 }
    }

    /// The unconsumed bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks `n` bytes as consumed.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.start += n;
        if self.start == self.buf.len() {
            self.start = 0;
            self.buf.clear();
        }
    }

    /// Room left for unconsumed bytes before the buffer is full (after compaction).
    pub fn room(&self) -> usize {
        self.buf.capacity() - self.len()
    }

    /// Reads once from `stream`, appending to the unconsumed bytes. `Ok(0)` is end of stream; a full
    /// buffer (no room) is the caller's business and is reported as `Ok(0)` never: callers check
    /// [`ReadBuf::room`] first.
    pub async fn fill<S: AsyncReadRent>(&mut self, stream: &mut S) -> io::Result<usize> {
        self.compact();
        let vec = std::mem::take(&mut self.buf);
        let filled = vec.len();
        let (res, slice) = stream.read(vec.slice_mut(filled..)).await;
        self.buf = slice.into_inner();
        res
    }

    /// [`ReadBuf::fill`] with a read that `cancel` can cancel; the buffer is back once the read has
    /// finished (with its bytes, or `ECANCELED`).
    pub async fn fill_cancelable<S: CancelableAsyncReadRent>(
        &mut self,
        stream: &mut S,
        cancel: CancelHandle,
    ) -> io::Result<usize> {
        self.compact();
        let vec = std::mem::take(&mut self.buf);
        let filled = vec.len();
        let (res, slice) = stream.cancelable_read(vec.slice_mut(filled..), cancel).await;
        self.buf = slice.into_inner();
        res
    }

    /// Moves the unconsumed bytes to the front, so a read cancelled with its buffer (timeouts,
    /// draining) leaves a consistent, empty state behind.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start.., 0);
            self.buf.truncate(self.buf.len() - self.start);
            self.start = 0;
        }
    }

    /// Gives the storage away while nothing is buffered (an idle connection); [`ReadBuf::restore`]
    /// puts storage back.
    pub fn take_storage(&mut self) -> Vec<u8> {
        debug_assert!(self.is_empty());
        self.start = 0;
        std::mem::take(&mut self.buf)
    }

    pub fn restore(&mut self, storage: Vec<u8>) {
        debug_assert!(self.buf.capacity() == 0 && storage.is_empty());
        self.buf = storage;
    }

    /// Whether it has storage (not given away by [`ReadBuf::take_storage`]).
    #[inline]
    pub fn has_storage(&self) -> bool {
        self.buf.capacity() > 0
    }

    /// Writes `n` unconsumed bytes to `stream` and consumes them.
    pub async fn forward<S: AsyncWriteRent>(&mut self, n: usize, stream: &mut S) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let vec = std::mem::take(&mut self.buf);
        let (res, slice) = stream.write_all(vec.slice(self.start..self.start + n)).await;
        self.buf = slice.into_inner();
        res?;
        self.consume(n);
        Ok(())
    }

    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }
}

/// Writes all of `out` to `stream`; `out` keeps its content (a failed request head can be retried).
pub async fn write_vec<S: AsyncWriteRent>(stream: &mut S, out: &mut Vec<u8>) -> io::Result<()> {
    let vec = std::mem::take(out);
    let (res, vec) = stream.write_all(vec).await;
    *out = vec;
    res.map(|_| ())
}

/// Buffers allocated at once when a pool runs dry.
const BATCH: usize = 16;

/// A worker's free list of buffers, so steady-state traffic allocates nothing. Buffers nobody took
/// for a whole [`BufferPool::trim`] period are freed, so memory follows the traffic back down.
pub struct BufferPool {
    free: RefCell<Vec<Vec<u8>>>,
    size: usize,
    keep: usize,
    /// The fewest free buffers since the last trim: that many were not needed all period.
    low: Cell<usize>,
}

impl BufferPool {
    pub fn new(size: usize, keep: usize) -> Self {
        BufferPool { free: RefCell::new(Vec::new()), size, keep, low: Cell::new(0) }
    }

    pub fn take(&self) -> Vec<u8> {
        let mut free = self.free.borrow_mut();
        if free.is_empty() {
            // A batch, allocated back to back: the buffers sit together in the heap, not between
            // the long-lived allocations of the connections that take them, so once freed they
            // leave whole pages the allocator can give back (memory of idle connections).
            free.extend((0..BATCH).map(|_| Vec::with_capacity(self.size)));
        }
        let buf = free.pop().unwrap_or_default();
        self.low.set(self.low.get().min(free.len()));
        buf
    }

    /// Frees the buffers that stayed unused since the last call; returns how many.
    pub fn trim(&self) -> usize {
        let mut free = self.free.borrow_mut();
        let unused = self.low.get().min(free.len());
        free.drain(..unused);
        if free.is_empty() {
            *free = Vec::new();
        }
        self.low.set(free.len());
        unused
    }

    /// Buffers on the free list now.
    #[cfg(test)]
    pub fn free_len(&self) -> usize {
        self.free.borrow().len()
    }

    pub fn give(&self, mut buf: Vec<u8>) {
        let mut free = self.free.borrow_mut();
        if free.len() < self.keep && buf.capacity() >= self.size {
            buf.clear();
            free.push(buf);
        }
    }
}

#[allow(dead_code)]
fn _assert_bufs() {
    fn io_buf<T: IoBuf>() {}
    fn io_buf_mut<T: IoBufMut>() {}
    io_buf::<Vec<u8>>();
    io_buf_mut::<Vec<u8>>();
}

/// Copies bytes both ways between two connections until either direction's source closes, then
/// shuts the other side's writing down: a WebSocket tunnel, a TLS passthrough, a TCP route. With
/// `idle` (a timer and a time), both directions end once neither has moved a byte for that long.
pub(crate) async fn splice<A, B>(a: A, b: B, idle: Option<(&CoarseTimer, Duration)>)
where
    A: monoio::io::Split + AsyncReadRent + AsyncWriteRent,
    B: monoio::io::Split + AsyncReadRent + AsyncWriteRent,
{
    use monoio::io::Splitable;
    let (mut a_read, mut a_write) = a.into_split();
    let (mut b_read, mut b_write) = b.into_split();
    let last = Cell::new(Instant::now());
    let moved = idle.map(|_| &last);
    let to_b = async {
        let _ = copy(&mut a_read, &mut b_write, moved).await;
        let _ = b_write.shutdown().await;
    };
    let to_a = async {
        let _ = copy(&mut b_read, &mut a_write, moved).await;
        let _ = a_write.shutdown().await;
    };
    let both = async {
        monoio::join!(to_b, to_a);
    };
    let Some((timer, idle)) = idle else { return both.await };
    // One wait per quiet period, not one per read: it wakes when the time since the last byte
    // could have run out, and ends the relay (both connections dropped) only if it has.
    let watchdog = async {
        loop {
            let quiet = last.get().elapsed();
            if quiet >= idle {
                return;
            }
            timer.sleep(idle - quiet).await;
        }
    };
    monoio::select! {
        _ = both => {},
        _ = watchdog => {},
    }
}

/// A direction's buffer starts at 4 KiB (a quiet WebSocket holds no more) and doubles, up to this,
/// each time a read fills it: a bulk transfer moves 64 KiB per system call, not 4.
const COPY_MAX: usize = 64 * 1024;

/// Copies `from` to `to` until `from` ends, noting when bytes last moved (in `moved`, when the relay
/// has an idle timeout); each read waits for the write before it (backpressure).
async fn copy<R, W>(from: &mut R, to: &mut W, moved: Option<&Cell<Instant>>) -> std::io::Result<()>
where
    R: AsyncReadRent,
    W: AsyncWriteRent,
{
    let mut buf = Vec::with_capacity(4 * 1024);
    loop {
        let (read, filled) = from.read(buf).await;
        if let Some(moved) = moved {
            moved.set(Instant::now());
        }
        if read? == 0 {
            return Ok(());
        }
        let full = filled.len() == filled.capacity();
        let (written, mut spent) = to.write_all(filled).await;
        written?;
        spent.clear();
        if full && spent.capacity() < COPY_MAX {
            spent.reserve_exact(spent.capacity() * 2);
        }
        buf = spent;
    }
}

#[cfg(test)]
mod tests {
    use super::{BufferPool, BATCH};

    #[test]
    fn trim_frees_only_what_a_whole_period_left_unused() {
        let pool = BufferPool::new(64, 100);
        let taken: Vec<_> = (0..10).map(|_| pool.take()).collect();
        assert_eq!(pool.free_len(), BATCH - 10, "a dry pool allocates a batch");
        taken.into_iter().for_each(|b| pool.give(b));
        assert_eq!(pool.trim(), 0, "the first period started with an empty pool");
        assert_eq!(pool.free_len(), BATCH);
        // Next period: at most 4 in use at once, so the rest stayed free all along.
        let busy: Vec<_> = (0..4).map(|_| pool.take()).collect();
        busy.into_iter().for_each(|b| pool.give(b));
        assert_eq!(pool.trim(), BATCH - 4);
        assert_eq!(pool.free_len(), 4);
        // An idle period frees the rest.
        assert_eq!(pool.trim(), 4);
        assert_eq!(pool.free_len(), 0);
        assert_eq!(pool.take().capacity(), 64, "an empty pool still hands out buffers");
    }
}
