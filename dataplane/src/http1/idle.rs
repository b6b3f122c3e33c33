//! Waiting for a client's next request without holding its buffers or the request's state.
//!
//! A connection that waits for a request (a new one, or a keep-alive one between requests) first
//! reads as usual, with its read buffer lent to the kernel: a client that sends soon costs nothing
//! extra. Once it has been quiet for [`crate::Settings::idle_release_after`], the read is cancelled
//! (cancellation is awaited, so bytes that arrived at that instant are kept) and the exchange
//! reports [`Arrival::Quiet`]. [`super::serve`] then drops the state of its exchanges (6 KB, boxed
//! in pages outside the heap: [`crate::page_box`]), gives the read, head and record buffers back to
//! the worker's pools (which allocate in batches, see [`crate::buf::BufferPool`]), and waits for readiness
//! alone (io_uring poll, epoll readiness on the legacy driver) in [`IdleWait::wait_quietly`], on the
//! worker's [`crate::coarse_timer`] (a few dozen bytes, where monoio's `Sleep` is 640). Bytes
//! arriving take buffers from the pools and a new box for the exchanges. So an idle connection
//! holds its task's own state (0.8 KB) and a few small allocations: 1.9 KiB of RSS per idle
//! connection (`docs/benchmarks.md`). The rest of its keep-alive wait may end up to one timer tick
//! (50 ms) late.
//! Only plain-TCP connections do this: a TLS stream keeps its own buffers inside the TLS session,
//! and so keeps waiting inside the exchange.

use std::io;
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::net::TcpStream;
use monoio_rustls::ServerTlsStream;

use super::ClientConn;

/// errno ECANCELED: what a cancelled read returns.
const CANCELED: i32 = 125;

/// What waiting for the next request's first bytes brought.
pub(crate) enum Arrival {
    /// This many bytes were read into the buffer (0: the client closed).
    Bytes(usize),
    /// Nothing came within the wait.
    Nothing,
    /// Quiet for `idle_release_after`: the read is cancelled and the buffer is empty. `left` is what
    /// remains of the wait, for [`IdleWait::wait_quietly`].
    Quiet { left: Duration },
}

/// How a client stream waits for the next request's first bytes.
pub(crate) trait IdleWait: AsyncReadRent + AsyncWriteRent + Sized {
    /// Reads the next bytes into `conn.buf` within `wait`, or reports the connection quiet.
    async fn next_bytes(conn: &mut ClientConn<'_, Self>, wait: Duration) -> io::Result<Arrival>;

    /// After [`Arrival::Quiet`]: waits up to `left` with the buffers in the pools, then reads what
    /// came. `Ok(None)`: nothing came in time.
    async fn wait_quietly(conn: &mut ClientConn<'_, Self>, left: Duration) -> io::Result<Option<usize>>;
}

/// A plain read with the buffer lent for all of `wait`.
async fn fill_within<S: IdleWait>(conn: &mut ClientConn<'_, S>, wait: Duration) -> io::Result<Option<usize>> {
    match monoio::time::timeout(wait, conn.buf.fill(&mut conn.stream)).await {
        Ok(read) => read.map(Some),
        Err(_) => Ok(None),
    }
}

impl IdleWait for ServerTlsStream<TcpStream> {
    async fn next_bytes(conn: &mut ClientConn<'_, Self>, wait: Duration) -> io::Result<Arrival> {
        Ok(fill_within(conn, wait).await?.map_or(Arrival::Nothing, Arrival::Bytes))
    }

    async fn wait_quietly(conn: &mut ClientConn<'_, Self>, left: Duration) -> io::Result<Option<usize>> {
        // Never reported quiet (above); a plain read is the right answer all the same.
        fill_within(conn, left).await
    }
}

impl IdleWait for TcpStream {
    async fn next_bytes(conn: &mut ClientConn<'_, Self>, wait: Duration) -> io::Result<Arrival> {
        let release_after = conn.worker.settings.idle_release_after;
        if wait <= release_after {
            return Ok(fill_within(conn, wait).await?.map_or(Arrival::Nothing, Arrival::Bytes));
        }
        match read_unless_quiet(conn, release_after).await {
            Some(read) => read.map(Arrival::Bytes),
            None => Ok(Arrival::Quiet { left: wait - release_after }),
        }
    }

    async fn wait_quietly(conn: &mut ClientConn<'_, Self>, left: Duration) -> io::Result<Option<usize>> {
        conn.release_buffers();
        // The worker's coarse timer, not monoio's `Sleep`: 640 bytes less per idle connection, for
        // a keep-alive timeout that may end up to one tick late.
        let ready = monoio::select! {
            r = conn.stream.readable(false) => Some(r),
            _ = conn.worker.idle_timer.sleep(left) => None,
        };
        conn.reacquire_buffers();
        match ready {
            Some(Ok(())) => conn.buf.fill(&mut conn.stream).await.map(Some),
            Some(Err(e)) => Err(e),
            None => Ok(None),
        }
    }
}

/// Reads with the buffer lent to the kernel for up to `quiet`; `None` when nothing came and the read
/// has been cancelled (the buffer is back and empty).
async fn read_unless_quiet(conn: &mut ClientConn<'_, TcpStream>, quiet: Duration) -> Option<io::Result<usize>> {
    let handle = conn.canceller.handle();
    let mut read = std::pin::pin!(conn.buf.fill_cancelable(&mut conn.stream, handle));
    monoio::select! {
        r = &mut read => return Some(r),
        _ = monoio::time::sleep(quiet) => {}
    }
    let canceller = std::mem::take(&mut conn.canceller);
    conn.canceller = canceller.cancel();
    match read.await {
        Err(e) if e.raw_os_error() == Some(CANCELED) => None,
        // Bytes that arrived as the read was being cancelled, or a real error.
        r => Some(r),
    }
}
