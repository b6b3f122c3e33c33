//! HTTP/2 towards clients: h2c by prior knowledge on the plain listener (the connection preface is
//! recognised in the bytes HTTP/1 detection read), ALPN `h2` on TLS. One connection belongs to
//! one worker with all its streams; each stream is a request.
//!
//! ```text
//! preface + SETTINGS (header timeout) ─▶ accept stream ─▶ spawn ─▶ load generation ─▶ route ─┬─ reply
//!        ▲                                                                                  └─ proxy over
//!        └── idle (keep-alive timeout) / drain ─▶ GOAWAY                     HTTP/1.1 (pooled upstream)
//! ```
//!
//! The `h2` crate does the framing, HPACK and flow control, driven on the worker's monoio runtime
//! through [`io`]'s adapter. Each stream runs as its own task ([`stream`]) and goes through the same
//! decision ([`crate::pipeline::route`]), upstream exchange ([`crate::pipeline::exchange`]), failure
//! mapping ([`crate::error::rescue`]) and counters as an HTTP/1.1 request.
//!
//! Streams count against the concurrency limit until ramjet has finished with them, not only until
//! the client resets them: while the limit is reached the connection is driven (so responses go
//! out) but no new stream is taken up, and streams the client opens and resets meanwhile pile up
//! in h2's pending-accept count, which closes the connection with ENHANCE_YOUR_CALM past its limit.
//! That is the Rapid Reset defence (CVE-2023-44487), as Go's and nginx's.

mod answer;
pub(crate) mod relay;
mod request;
mod respond;
mod stream;
mod streams;

use streams::Streams;

use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::base::buf::ReadBuf;
pub(crate) use crate::codec::http2::io::IntoH2Io;
use crate::conn::ConnFacts;
use crate::settings::Http2Settings;
use crate::worker::Worker;

/// The client connection preface (RFC 9113 §3.4).
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// After GOAWAY, how often the connection looks whether its last stream has ended (the first look
/// also gives the GOAWAY frame time to be written).
const GOAWAY_FLUSH: Duration = Duration::from_millis(50);

/// Whether `data` starts with the connection preface: `None` while what is there matches but is
/// shorter.
#[inline]
pub(crate) fn preface(data: &[u8]) -> Option<bool> {
    let n = data.len().min(PREFACE.len());
    if data[..n] != PREFACE[..n] {
        Some(false)
    } else if n == PREFACE.len() {
        Some(true)
    } else {
        None
    }
}

fn builder(limits: &Http2Settings) -> h2::server::Builder {
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_header_list_size(limits.max_header_list_size)
        .initial_window_size(limits.initial_stream_window)
        .initial_connection_window_size(limits.initial_connection_window)
        .max_frame_size(limits.max_frame_size)
        .max_send_buffer_size(limits.max_send_buffer)
        .max_pending_accept_reset_streams(limits.max_pending_accept_reset_streams)
        .max_local_error_reset_streams(Some(limits.max_local_error_reset_streams));
    builder
}

/// Serves one HTTP/2 connection until it closes, is idle too long, or the worker drains. `read`
/// holds what HTTP/1 detection read already (the preface, perhaps more).
pub(crate) async fn serve<S: IntoH2Io>(worker: Rc<Worker>, stream: S, read: Option<ReadBuf>, facts: Rc<ConnFacts>) {
    let prefix = match read {
        Some(buf) => {
            let prefix = Bytes::copy_from_slice(buf.data());
            worker.client_buffers.give(buf.into_inner());
            prefix
        }
        None => Bytes::new(),
    };
    let Some(io) = stream.into_h2_io() else {
        tracing::debug!(worker = worker.id, "cannot switch the connection to poll-based I/O");
        return;
    };
    let io = crate::codec::http2::io::Prefixed::new(prefix, io);
    let settings = &worker.settings;
    let handshake = builder(&settings.http2).handshake::<_, Bytes>(io);
    let mut conn = match worker.timeout(settings.header_timeout, handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            tracing::debug!(worker = worker.id, error = %e, "HTTP/2 handshake failed");
            return;
        }
        Err(_) => return,
    };
    let streams = Rc::new(Streams::default());
    let limit = settings.http2.max_concurrent_streams as usize;
    // Until the next look at the clock: idle, or once shutting down, the next check for the end.
    let mut deadline = Instant::now() + settings.header_timeout;
    // Once GOAWAY is sent: the connection closes when no stream is left, or at this instant.
    let mut shutting: Option<Instant> = None;
    loop {
        let drive = poll_fn(|cx| loop {
            if streams.active.get() >= limit {
                // Take up no new stream until one finishes; keep the connection moving.
                streams.parked.set(Some(cx.waker().clone()));
                return conn.poll_closed(cx);
            }
            match conn.poll_accept(cx) {
                Poll::Ready(Some(Ok((request, respond)))) => {
                    let slot = streams.enter();
                    // Boxed: a task's future (10 KB here) is copied when monoio spawns it and
                    // again when it finishes; a box is cheaper (`docs/benchmarks.md`, run 10).
                    let serve = Box::pin(stream::serve(worker.clone(), facts.clone(), request, respond, slot));
                    crate::server::contain::spawn(&worker, "HTTP/2 stream", serve);
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        });
        monoio::select! {
            closed = drive => {
                if let Err(e) = closed {
                    tracing::debug!(worker = worker.id, error = %e, "HTTP/2 connection failed");
                }
                break;
            }
            _ = worker.drain.wait(), if shutting.is_none() => {
                // GOAWAY: streams in flight finish, no new ones start, within the drain timeout.
                conn.graceful_shutdown();
                shutting = Some(Instant::now() + settings.drain_timeout);
                deadline = Instant::now() + GOAWAY_FLUSH;
            }
            _ = worker.sleep(deadline.saturating_duration_since(Instant::now())) => {
                if let Some(end) = shutting {
                    // h2 would wait for the client to acknowledge GOAWAY; a connection with no
                    // stream left is closed now (as nginx does), one with streams when they end.
                    if streams.active.get() == 0 || Instant::now() >= end {
                        // What the last streams wrote may still be in h2's buffers: the connection
                        // is driven a moment longer to write it, or a loaded worker could drop the
                        // end of a response that had finished.
                        let _ = worker.timeout(GOAWAY_FLUSH, poll_fn(|cx| conn.poll_closed(cx))).await;
                        break;
                    }
                    deadline = Instant::now() + GOAWAY_FLUSH;
                    continue;
                }
                let idle = if streams.seen.get() { settings.keepalive_timeout } else { settings.header_timeout };
                let now = Instant::now();
                let quiet = streams.last_done.get().map_or(idle, |done| now.duration_since(done));
                if streams.active.get() == 0 && quiet >= idle {
                    conn.graceful_shutdown();
                    shutting = Some(Instant::now() + settings.header_timeout);
                    deadline = Instant::now() + GOAWAY_FLUSH;
                } else {
                    let left = if streams.active.get() == 0 { idle - quiet } else { idle };
                    deadline = Instant::now() + left;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
