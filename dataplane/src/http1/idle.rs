//! Waiting for a client's next request without holding its buffers.
//!
//! A connection that waits for a request (a new one, or a keep-alive one between requests) first
//! reads as usual, with its read buffer lent to the kernel: a client that sends soon costs nothing
//! extra. Once it has been quiet for [`crate::Settings::idle_release_after`], the read is cancelled
//! (cancellation is awaited, so bytes that arrived at that instant are kept), the read, head and
//! record buffers go back to the worker's pools, and the connection waits for readiness alone
//! (io_uring poll, epoll readiness on the legacy driver). Bytes arriving take buffers from the pools
//! again. So thousands of idle connections hold no buffers; only plain-TCP connections do this: a
//! TLS stream keeps its own buffers inside the TLS session.

use std::io;
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::net::TcpStream;
use monoio_rustls::ServerTlsStream;

use super::ClientConn;

/// errno ECANCELED: what a cancelled read returns.
const CANCELED: i32 = 125;

/// How a client stream waits for the next request's first bytes.
pub(crate) trait IdleWait: AsyncReadRent + AsyncWriteRent + Sized {
    /// Reads the next bytes into `conn.buf` within `wait`. `Ok(None)`: nothing came in time.
    async fn next_bytes(conn: &mut ClientConn<'_, Self>, wait: Duration) -> io::Result<Option<usize>>;
}

/// A plain read with the buffer lent for all of `wait`.
async fn fill_within<S: IdleWait>(conn: &mut ClientConn<'_, S>, wait: Duration) -> io::Result<Option<usize>> {
    match monoio::time::timeout(wait, conn.buf.fill(&mut conn.stream)).await {
        Ok(read) => read.map(Some),
        Err(_) => Ok(None),
    }
}

impl IdleWait for ServerTlsStream<TcpStream> {
    async fn next_bytes(conn: &mut ClientConn<'_, Self>, wait: Duration) -> io::Result<Option<usize>> {
        fill_within(conn, wait).await
    }
}

impl IdleWait for TcpStream {
    async fn next_bytes(conn: &mut ClientConn<'_, Self>, wait: Duration) -> io::Result<Option<usize>> {
        let release_after = conn.worker.settings.idle_release_after;
        if wait <= release_after {
            return fill_within(conn, wait).await;
        }
        if let Some(read) = read_unless_quiet(conn, release_after).await {
            return read.map(Some);
        }
        conn.release_buffers();
        let ready = monoio::time::timeout(wait - release_after, conn.stream.readable(false)).await;
        conn.reacquire_buffers();
        match ready {
            Ok(Ok(())) => conn.buf.fill(&mut conn.stream).await.map(Some),
            Ok(Err(e)) => Err(e),
            Err(_) => Ok(None),
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
