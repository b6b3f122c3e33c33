//! A worker's idle upstream connections, by endpoint. Worker-local: no lock, no sharing.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::connect::UpstreamConn;
use crate::base::buf::BufferPool;

/// Idle connections per endpoint that keep their read buffer: the ones steady traffic reuses, so a
/// keep-alive request moves no buffer. Those pooled beyond them (after a burst) give theirs to the
/// worker's buffer pool, which frees what stays unused.
const KEEP_BUFFERS: usize = 32;

/// Idle connections with the time each went idle.
type Idle = Vec<(UpstreamConn, Instant)>;

pub struct Pool {
    /// By endpoint and TLS settings (0: plain).
    idle: RefCell<FxHashMap<(SocketAddr, u64), Idle>>,
    idle_timeout: Duration,
    /// Idle connections kept per endpoint at most.
    keep: usize,
}

impl Pool {
    pub fn new(idle_timeout: Duration, keep: usize) -> Self {
        Pool { idle: RefCell::new(FxHashMap::default()), idle_timeout, keep }
    }

    /// The most recently used idle connection to `addr`, made with the TLS settings `tls_id` (0:
    /// plain), that has not been idle too long, with a read buffer from `buffers` if it gave its own
    /// back.
    pub fn take(&self, addr: SocketAddr, tls_id: u64, buffers: &BufferPool) -> Option<UpstreamConn> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(&(addr, tls_id))?;
        while let Some((mut conn, since)) = list.pop() {
            if since.elapsed() < self.idle_timeout {
                conn.reused = true;
                if !conn.buf.has_storage() {
                    conn.buf.restore(buffers.take());
                }
                return Some(conn);
            }
            buffers.give(conn.buf.into_inner());
        }
        None
    }

    /// Keeps a connection that finished an exchange cleanly (its buffer empty), up to the pool's
    /// size; closes it beyond.
    pub fn put(&self, mut conn: UpstreamConn, buffers: &BufferPool) {
        let mut idle = self.idle.borrow_mut();
        let list = idle.entry((conn.addr, conn.tls_id)).or_default();
        if list.len() >= self.keep {
            buffers.give(conn.buf.into_inner());
            return;
        }
        if list.len() >= KEEP_BUFFERS {
            buffers.give(conn.buf.take_storage());
        }
        list.push((conn, Instant::now()));
    }

    /// Drops connections idle longer than the timeout; run periodically by the worker.
    pub fn sweep(&self) {
        self.idle.borrow_mut().retain(|_, list| {
            list.retain(|(_, since)| since.elapsed() < self.idle_timeout);
            !list.is_empty()
        });
    }
}

/// Whether an idle connection still looks open: no EOF and no unexpected bytes waiting. One
/// non-blocking `recv(MSG_PEEK)`, used only before sending a request body that could not be
/// replayed if the connection turned out to be stale. On a TLS connection any waiting record (a
/// late session ticket, a close alert) counts as unexpected: a fresh connection is used instead.
#[allow(unsafe_code)]
pub fn looks_alive(conn: &UpstreamConn) -> bool {
    let mut byte = 0u8;
    // SAFETY: the fd is open for the lifetime of `conn`, the buffer is one valid byte, and
    // MSG_DONTWAIT keeps the call from blocking whatever the socket's mode.
    let n = unsafe { libc::recv(conn.fd, (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}
