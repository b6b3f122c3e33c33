//! Message bodies, both directions: where a body ends ([`Body`]) and moving it from one stream to
//! the other ([`copy_body`]) with a timeout on every read and every write.
//!
//! Request bodies (client → upstream) and response bodies (upstream → client) share this code, so
//! the bookkeeping of lengths, chunked framing and end-of-stream exists once.

use std::io;
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRent};

use super::chunked::ChunkedDecoder;
use super::head::Framing;
use crate::base::buf::{write_vec, ReadBuf};
use crate::base::deadline::Deadline;
use crate::base::watchdog::Watchdog;

/// How much of a body is left, in its framing.
pub(crate) struct Body {
    framing: Framing,
    remaining: u64,
    chunked: ChunkedDecoder,
    /// Payload bytes of a chunked body so far, and the most allowed.
    payload: u64,
    limit: u64,
}

/// The error [`Body::advance`] gives when a chunked body grows past its limit.
pub(crate) const BODY_TOO_LARGE: &str = "request body larger than the route allows";

impl Body {
    pub fn new(framing: Framing) -> Self {
        Self::with_limit(framing, None)
    }

    /// A body whose chunked payload may not exceed `limit` bytes (a declared length is checked
    /// before reading, by the caller).
    pub fn with_limit(framing: Framing, limit: Option<u64>) -> Self {
        let remaining = if let Framing::Length(n) = framing { n } else { 0 };
        Body { framing, remaining, chunked: ChunkedDecoder::new(), payload: 0, limit: limit.unwrap_or(u64::MAX) }
    }

    /// How many of the leading bytes of `data` belong to the body; `on_payload(start, end)` sees the
    /// payload ranges of a chunked body (to strip its framing).
    pub fn advance(&mut self, data: &[u8], on_payload: impl FnMut(usize, usize)) -> Result<usize, &'static str> {
        match self.framing {
            Framing::None => Ok(0),
            Framing::Length(_) => {
                let n = (self.remaining.min(usize::MAX as u64) as usize).min(data.len());
                self.remaining -= n as u64;
                Ok(n)
            }
            Framing::Chunked if self.limit == u64::MAX => self.chunked.feed(data, on_payload).map_err(|e| e.0),
            Framing::Chunked => {
                let mut on_payload = on_payload;
                let mut payload = 0u64;
                let n = self
                    .chunked
                    .feed(data, |a, b| {
                        payload += (b - a) as u64;
                        on_payload(a, b)
                    })
                    .map_err(|e| e.0)?;
                self.payload += payload;
                if self.payload > self.limit {
                    return Err(BODY_TOO_LARGE);
                }
                Ok(n)
            }
            Framing::UntilClose => Ok(data.len()),
        }
    }

    /// Whether the body has ended (a close-delimited body ends only with its stream).
    pub fn is_done(&self) -> bool {
        match self.framing {
            Framing::None => true,
            Framing::Length(_) => self.remaining == 0,
            Framing::Chunked => self.chunked.is_done(),
            Framing::UntilClose => false,
        }
    }
}

/// Why a body could not be copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyError {
    /// The source closed before the body ended.
    SourceClosed(Option<io::ErrorKind>),
    /// The source sent nothing within the read timeout.
    SourceTimeout,
    /// The source's chunked framing is invalid.
    Framing(&'static str),
    /// The destination failed.
    SinkFailed(io::ErrorKind),
    /// The destination accepted nothing within the write timeout.
    SinkTimeout,
    /// The exchange's deadline ended a read or a write.
    Deadline,
}

/// Timeouts of one copy: each read from the source, each write to the destination, and the
/// exchange's deadline, which bounds every one of them; `watch` (the copying task's) keeps them.
#[derive(Clone, Copy)]
pub(crate) struct Deadlines<'w> {
    pub read: Duration,
    pub write: Duration,
    pub until: Deadline,
    pub watch: &'w Watchdog<'w>,
}

/// Copies the body from `src` (starting with what `buf` holds) to `dst` until it ends, and returns
/// how many body bytes (as framed by the source) it moved; on failure, whether anything was written. `pending` holds bytes to send first (a head), written together
/// with the first body bytes; `dechunk` strips the chunked framing (for HTTP/1.0 clients). The
/// body's bytes are consumed from `buf`; bytes after the body stay there.
pub(crate) async fn copy_body<R, W>(
    body: &mut Body,
    src: &mut R,
    buf: &mut ReadBuf,
    dst: &mut W,
    pending: &mut Vec<u8>,
    dechunk: bool,
    deadlines: Deadlines<'_>,
) -> Result<u64, (CopyError, bool)>
where
    R: AsyncReadRent,
    W: AsyncWriteRent,
{
    let mut wrote = false;
    let mut moved = 0u64;
    loop {
        let n = if dechunk {
            let data = buf.data();
            let n = body
                .advance(data, |a, b| pending.extend_from_slice(&data[a..b]))
                .map_err(|e| (CopyError::Framing(e), wrote))?;
            buf.consume(n);
            moved += n as u64;
            0
        } else {
            body.advance(buf.data(), |_, _| {}).map_err(|e| (CopyError::Framing(e), wrote))?
        };
        moved += n as u64;
        let writes = n > 0 || !pending.is_empty();
        let (wait, cut) = deadlines.until.clamp(deadlines.write);
        let write = if !pending.is_empty() {
            // A pending head goes out in one write with the body bytes that are here already.
            pending.extend_from_slice(&buf.data()[..n]);
            buf.consume(n);
            let r = deadlines.watch.bound(wait, write_vec(dst, pending)).await;
            pending.clear();
            r
        } else {
            deadlines.watch.bound(wait, buf.forward(n, dst)).await
        };
        match write {
            Ok(Ok(())) => wrote |= writes,
            Ok(Err(e)) => return Err((CopyError::SinkFailed(e.kind()), wrote)),
            Err(_) if cut => return Err((CopyError::Deadline, wrote)),
            Err(_) => return Err((CopyError::SinkTimeout, wrote)),
        }
        if body.is_done() {
            return Ok(moved);
        }
        let (wait, cut) = deadlines.until.clamp(deadlines.read);
        match deadlines.watch.bound(wait, buf.fill(src)).await {
            Ok(Ok(n)) if n > 0 => {}
            Ok(Ok(_)) if body.framing == Framing::UntilClose => return Ok(moved),
            Ok(Ok(_)) => return Err((CopyError::SourceClosed(None), wrote)),
            Ok(Err(e)) => return Err((CopyError::SourceClosed(Some(e.kind())), wrote)),
            Err(_) if cut => return Err((CopyError::Deadline, wrote)),
            Err(_) => return Err((CopyError::SourceTimeout, wrote)),
        }
    }
}
