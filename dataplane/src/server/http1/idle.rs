//! Waiting for a client's next request without holding its buffers or the request's state.
//!
//! A connection that waits for a request (a new one, or a keep-alive one between requests) first
//! reads as usual, with its read buffer lent to the kernel: a client that sends soon costs nothing
//! extra. Once it has been quiet for [`crate::settings::Settings::idle_release_after`], the read is cancelled
//! (cancellation is awaited, so bytes that arrived at that instant are kept) and the exchange
//! reports [`Arrival::Quiet`]. [`super::serve`] then drops the state of its exchanges (6 KB, boxed
//! in pages outside the heap: [`crate::base::page_box`]), gives the read, head and record buffers back to
//! the worker's pools (which allocate in batches, see [`crate::base::buf::BufferPool`]), and waits for readiness
//! alone (io_uring poll, epoll readiness on the legacy driver) in [`wait_quietly`], on the
//! worker's [`crate::base::coarse_timer`] (a few dozen bytes, where monoio's `Sleep` is 640). Bytes
//! arriving take buffers from the pools and a new box for the exchanges. So an idle connection
//! holds its task's own state (0.8 KB) and a few small allocations: 1.9 KiB of RSS per idle
//! connection (`docs/benchmarks.md`). The rest of its keep-alive wait may end up to one timer tick
//! (10 ms) late.
//!
//! TLS connections do the same, and also free the TLS stream's two 16 KiB buffers (Ramjet's patch
//! of monoio-rustls, `vendor/monoio-rustls`). The read a quiet TLS connection cancels is the
//! socket read under the session, so a partial record read before it stays in the session. What
//! a quiet TLS connection keeps beyond a plain one is its rustls session: keys, state, and a
//! 4 KiB record buffer.

use std::io;
use std::time::Duration;

use monoio::io::{AsyncWriteRent, CancelableAsyncReadRent};
use monoio::net::TcpStream;
use monoio_rustls::ServerTlsStream;

use super::conn::ClientConn;

/// errno ECANCELED: what a cancelled read returns.
const CANCELED: i32 = 125;

/// What waiting for the next request's first bytes brought.
pub(crate) enum Arrival {
    /// This many bytes were read into the buffer (0: the client closed).
    Bytes(usize),
    /// Nothing came within the wait.
    Nothing,
    /// Quiet for `idle_release_after`: the read is cancelled and the buffer is empty. `left` is what
    /// remains of the wait, for [`wait_quietly`].
    Quiet { left: Duration },
}

/// A client stream that can wait for its next request without its buffers: plain TCP, or TLS over
/// it.
pub(crate) trait IdleWait: CancelableAsyncReadRent + AsyncWriteRent + Sized {
    /// Dropping a pending read loses nothing on the epoll driver: the read has not happened yet and
    /// the bytes stay in the socket. Not so over TLS, whose read may have taken part of a record.
    const READ_DROPS_CLEANLY_ON_EPOLL: bool;

    /// The socket, whose readiness a quiet connection waits for.
    fn socket(&self) -> &TcpStream;

    /// Gives back the buffers the stream keeps itself, if it holds nothing in them.
    fn release_own_buffers(&mut self);

    /// Ends the connection from ramjet's side before the stream is dropped: TLS sends its
    /// close_notify. Plain TCP needs nothing: closing the socket sends the FIN (a `shutdown` first
    /// would only cost a system call per connection).
    async fn finish(&mut self);
}

impl IdleWait for TcpStream {
    const READ_DROPS_CLEANLY_ON_EPOLL: bool = true;

    fn socket(&self) -> &TcpStream {
        self
    }

    fn release_own_buffers(&mut self) {}

    async fn finish(&mut self) {}
}

impl IdleWait for ServerTlsStream<TcpStream> {
    const READ_DROPS_CLEANLY_ON_EPOLL: bool = false;

    fn socket(&self) -> &TcpStream {
        self.get_ref()
    }

    /// The TLS stream's two 16 KiB buffers go; the rustls session keeps its keys and a 4 KiB
    /// record buffer.
    fn release_own_buffers(&mut self) {
        self.release_buffers();
    }

    async fn finish(&mut self) {
        // A peer that is gone already cannot be told: nothing to do about a failure here.
        let _ = self.shutdown().await;
    }
}

/// Reads the next bytes into `conn.buf` within `wait`, or reports the connection quiet.
pub(crate) async fn next_bytes<S: IdleWait>(conn: &mut ClientConn<'_, S>, wait: Duration) -> io::Result<Arrival> {
    let release_after = conn.worker.settings.idle_release_after;
    if wait <= release_after {
        return Ok(match conn.watch.bound(wait, conn.buf.fill(&mut conn.stream)).await {
            Ok(read) => Arrival::Bytes(read?),
            Err(_) => Arrival::Nothing,
        });
    }
    match read_unless_quiet(conn, release_after).await {
        Some(read) => read.map(Arrival::Bytes),
        None => Ok(Arrival::Quiet { left: wait - release_after }),
    }
}

/// After [`Arrival::Quiet`]: waits up to `left` with the buffers in the pools, then reads what came.
/// `Ok(None)`: nothing came in time.
pub(crate) async fn wait_quietly<S: IdleWait>(
    conn: &mut ClientConn<'_, S>,
    left: Duration,
) -> io::Result<Option<usize>> {
    conn.release_buffers();
    conn.stream.release_own_buffers();
    let deadline = std::time::Instant::now() + left;
    // The worker's coarse timer, not monoio's `Sleep`: 640 bytes less per idle connection, for a
    // keep-alive timeout that may end up to one tick late.
    let timer = &conn.worker.coarse_timer;
    let ready = monoio::select! {
        r = conn.stream.socket().readable(false) => Some(r),
        _ = timer.sleep(left) => None,
    };
    conn.reacquire_buffers();
    match ready {
        // On TLS the bytes may be a record that carries no data (an alert, a key update) or part of
        // one: the read keeps what is left of the wait.
        Some(Ok(())) => monoio::select! {
            r = conn.buf.fill(&mut conn.stream) => r.map(Some),
            _ = timer.sleep(deadline.saturating_duration_since(std::time::Instant::now())) => Ok(None),
        },
        Some(Err(e)) => Err(e),
        None => Ok(None),
    }
}

/// Reads with the buffer lent to the kernel for up to `quiet`; `None` when nothing came and the read
/// has been cancelled (the buffer is back and empty; on TLS, bytes of a partial record stay in the
/// session).
async fn read_unless_quiet<S: IdleWait>(conn: &mut ClientConn<'_, S>, quiet: Duration) -> Option<io::Result<usize>> {
    if S::READ_DROPS_CLEANLY_ON_EPOLL && !conn.worker.io_uring {
        // Nothing to cancel (a cancellable read costs its registration on every request): the
        // read is dropped with its buffer, which `release_buffers` then has none of to give back.
        return conn.watch.bound(quiet, conn.buf.fill(&mut conn.stream)).await.ok();
    }
    let handle = conn.canceller.handle();
    let mut read = std::pin::pin!(conn.buf.fill_cancelable(&mut conn.stream, handle));
    if let Ok(r) = conn.watch.bound(quiet, &mut read).await {
        return Some(r);
    }
    let canceller = std::mem::take(&mut conn.canceller);
    conn.canceller = canceller.cancel();
    match read.await {
        Err(e) if e.raw_os_error() == Some(CANCELED) => None,
        // Bytes that arrived as the read was being cancelled, or a real error.
        r => Some(r),
    }
}
