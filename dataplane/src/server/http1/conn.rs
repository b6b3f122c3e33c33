//! One HTTP/1.x client connection's state and its plain moves: reading more of a body, writing
//! answers within the write timeout, finishing, failing and accounting a request. The exchange
//! loop that drives it is in `super` (`serve`).

use std::sync::Arc;
use std::time::Instant;

use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use ramjet_shared::Generation;

use super::answer::render;
use crate::base::buf::{write_vec, ReadBuf};
use crate::base::watchdog::Watchdog;
use crate::codec::http1::body::Body;
use crate::codec::http1::head::RequestHead;
use crate::conn::ConnFacts;
use crate::error::{Failure, ProxyError};
use crate::observe::requests::{Done, RequestId, Served, Tally, CLIENT_CLOSED};
use crate::observe::trace::SpanRecord;
use crate::pipeline::answer::LocalAnswer;
use crate::upstream::connect::UpstreamConn;
use crate::worker::Worker;

/// What happens to the client connection after an exchange.
pub(crate) enum Next {
    KeepAlive,
    Close,
    /// The upstream agreed to switch protocols: relay bytes both ways.
    Tunnel(Box<UpstreamConn>),
    /// The connection opened with the HTTP/2 preface (h2c by prior knowledge).
    Http2,
    /// Quiet between requests: wait the rest (`left`) of the wait outside the exchange's state.
    Quiet(std::time::Duration),
}

/// A client connection: its stream, the bytes read and not yet consumed, the buffer heads are
/// written into, and the facts every upstream head carries. Every read and write on it has a
/// deadline from the worker's settings, kept by its `watch` (and so are the waits of its upstream
/// exchanges: the connection is one task).
pub(crate) struct ClientConn<'w, S> {
    pub worker: &'w Worker,
    pub watch: Watchdog<'w>,
    pub stream: S,
    pub buf: ReadBuf,
    pub out: Vec<u8>,
    pub facts: &'w ConnFacts,
    /// The current request has body bytes that have not been read yet: after an early answer the
    /// connection cannot carry another request.
    pub body_pending: bool,
    pub first: bool,
    /// The current request is a `HEAD`: answers made here say their length and send no body.
    pub is_head: bool,
    /// The current request: when its head was complete, what it did, the status sent (0: none
    /// yet), its id.
    pub start: Instant,
    pub tally: Tally,
    pub status: u16,
    /// The status is in the counters already.
    pub counted: bool,
    pub request_id: Option<RequestId>,
    /// The request's span, when it is traced.
    pub span: Option<Box<SpanRecord>>,
    /// The access-log record being written for the current request (begun: `logging`).
    pub record: Vec<u8>,
    pub logging: bool,
    /// Cancels a quiet connection's read so its buffers can go back to the pools (see `idle`).
    pub canceller: monoio::io::Canceller,
}

impl<S: AsyncReadRent + AsyncWriteRent> ClientConn<'_, S> {
    /// While idle: the read, head and record buffers go back to the worker's pools.
    pub fn release_buffers(&mut self) {
        self.worker.counters().idle_buffers_released();
        self.worker.client_buffers.give(self.buf.take_storage());
        self.worker.out_buffers.give(std::mem::take(&mut self.out));
        self.worker.give_record(std::mem::take(&mut self.record));
    }

    /// Bytes are coming: buffers from the pools again (the record's when a record is begun).
    pub fn reacquire_buffers(&mut self) {
        self.buf.restore(self.worker.client_buffers.take());
        self.out = self.worker.out_buffers.take();
    }
}

impl<S: AsyncReadRent + AsyncWriteRent> ClientConn<'_, S> {
    /// Reads more of the request (its body) within the body timeout.
    pub async fn fill_body(&mut self) -> Result<(), ProxyError> {
        match self.watch.bound(self.worker.settings.client_body_timeout, self.buf.fill(&mut self.stream)).await {
            Ok(Ok(n)) if n > 0 => Ok(()),
            Ok(_) => Err(ProxyError::ClientGone),
            Err(_) => Err(ProxyError::BodyTimeout),
        }
    }

    /// Writes `out` to the client within the write timeout.
    pub async fn write_out(&mut self) -> Result<(), ProxyError> {
        match self
            .watch
            .bound(self.worker.settings.client_write_timeout, write_vec(&mut self.stream, &mut self.out))
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(ProxyError::ClientGone),
            Err(_) => Err(ProxyError::ClientWriteTimeout),
        }
    }

    /// Writes `bytes` to the client within the write timeout.
    pub async fn write_static(&mut self, bytes: &'static [u8]) -> Result<(), ProxyError> {
        match self.watch.bound(self.worker.settings.client_write_timeout, self.stream.write_all(bytes)).await {
            Ok((Ok(_), _)) => Ok(()),
            Ok((Err(_), _)) => Err(ProxyError::ClientGone),
            Err(_) => Err(ProxyError::ClientWriteTimeout),
        }
    }

    /// Consumes the request body (the head is consumed already) if all of it is in the buffer, so
    /// that an early answer can keep the connection.
    pub fn discard_buffered_body(&mut self, head: &RequestHead) {
        if let Some(n) = buffered_body_len(head, self.buf.data()) {
            self.buf.consume(n);
            self.tally.bytes_in += n as u64;
            self.body_pending = false;
        }
    }

    /// Writes an answer made here, rendered into `out` by [`render_local`]; consumes what of the
    /// request it answered.
    pub async fn finish_local(&mut self, head: &RequestHead, local: Rendered) -> Next {
        self.buf.consume(local.consumed);
        let body = (local.consumed - head.head_len) as u64;
        self.tally.bytes_in += body;
        if local.keep {
            self.body_pending = false;
        }
        self.finish(local.status, local.keep).await
    }

    /// Fails a request before anything went upstream: its head is consumed, and its body too when
    /// all of it is buffered (so the connection can carry the next request).
    pub async fn fail_request(&mut self, head: &RequestHead, error: ProxyError, keep_alive: bool) -> Next {
        self.buf.consume(head.head_len);
        self.discard_buffered_body(head);
        self.fail(error.into(), keep_alive).await
    }

    /// Writes the answer in `out`; the request is accounted by [`exchange`].
    pub async fn finish(&mut self, status: u16, keep: bool) -> Next {
        self.status = status;
        // Counted before it is written: a client that has the answer sees it counted.
        self.worker.counters().request(status);
        self.counted = true;
        self.tally.bytes_out += self.out.len() as u64;
        match self.write_out().await {
            Ok(()) if keep => Next::KeepAlive,
            _ => Next::Close,
        }
    }

    /// The one way out of a failed request: counted and logged once, answered as
    /// [`crate::error::rescue`] says.
    pub async fn fail(&mut self, failure: Failure, keep_alive: bool) -> Next {
        let worker = self.worker;
        let answer = worker.failed(&failure);
        match answer.status {
            Some(status) => {
                let keep = keep_alive && answer.keep && !self.body_pending;
                let date = worker.clock.date();
                let id = self.request_id.as_ref().map_or(&[][..], |id| id.as_bytes());
                render(&LocalAnswer::Status(status), self.is_head, !keep, &date, id, &mut self.out);
                self.finish(status, keep).await
            }
            None => {
                if self.status == 0 {
                    self.status = CLIENT_CLOSED;
                }
                Next::Close
            }
        }
    }

    /// Accounts the request that just ended: counters, its (route, backend) series, its record.
    pub fn done(&mut self, served: Option<Served<'_>>, generation: &Arc<Generation>) {
        // Taken whatever happens: the next request begins without one.
        let span = self.span.take();
        if self.status == 0 {
            return;
        }
        let done = Done {
            status: self.status,
            start: self.start,
            served,
            generation,
            tally: &self.tally,
            counted: self.counted,
        };
        let record = if self.logging { Some(&mut self.record) } else { None };
        self.worker.request_done(&done, record, span);
    }
}

/// An answer made here, rendered: its status, whether the connection stays open, and the bytes of
/// the request it consumes (the head, and the body when all of it is buffered).
pub(super) struct Rendered {
    pub status: u16,
    pub keep: bool,
    pub consumed: usize,
}

/// The length of the request body if `data` (what follows the head) holds all of it.
pub(super) fn buffered_body_len(head: &RequestHead, data: &[u8]) -> Option<usize> {
    let mut probe = Body::new(head.body);
    let n = probe.advance(data, |_, _| {}).ok()?;
    probe.is_done().then_some(n)
}
