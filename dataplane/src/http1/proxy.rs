//! Forwarding one request to a backend and streaming the response back.

use std::net::SocketAddr;

use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use ramjet_shared::UpstreamErrorKind;

use super::chunked::ChunkedDecoder;
use super::head::{parse_response, Framing, RequestHead, ResponseHead, ResponsePlan};
use super::Next;
use crate::buf::{write_vec, ReadBuf};
use crate::error::ProxyError;
use crate::upstream::{self, pool::looks_alive, UpstreamConn};
use crate::worker::Worker;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The error, and whether the client had already been sent part of a response.
pub(crate) type Failure = (ProxyError, bool);

/// Proxies the request whose upstream head is in `out` to one of `endpoints`. Returns the status sent
/// and what to do with the client connection.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn forward<S>(
    worker: &Worker,
    client: &mut S,
    cbuf: &mut ReadBuf,
    out: &mut Vec<u8>,
    head: &RequestHead,
    slot: u32,
    endpoints: &[SocketAddr],
    keep_alive: bool,
) -> Result<(u16, Next), Failure>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    if endpoints.is_empty() {
        return Err((ProxyError::Upstream(UpstreamErrorKind::NoEndpoints), false));
    }
    let settings = &worker.settings;
    let mut index = worker.next_endpoint(slot, endpoints.len());
    // A request without a body can be sent again as it is.
    let replayable = head.body == Framing::None;
    let mut connect_retry = endpoints.len() > 1;
    let mut fresh_only = false;
    let plan = ResponsePlan { is_head: head.is_head, client_minor: head.minor, keep_alive };

    let (mut up, response, keep_client) = loop {
        let addr = endpoints[index];
        let pooled = if fresh_only { None } else { worker.pool.take(addr) };
        let mut up = match pooled {
            Some(conn) if replayable || looks_alive(&conn) => conn,
            _ => match upstream::connect(addr, settings.upstream_timeout, worker.upstream_buffers.take()).await {
                Ok(conn) => conn,
                Err(e) if connect_retry && e == ProxyError::Upstream(UpstreamErrorKind::Connect) => {
                    // Nothing was sent: try the next endpoint once.
                    worker.counters().upstream_error(UpstreamErrorKind::Connect);
                    worker.counters().upstream_retry();
                    connect_retry = false;
                    index = (index + 1) % endpoints.len();
                    continue;
                }
                Err(e) => return Err((e, false)),
            },
        };
        let sent = send_request(worker, client, cbuf, out, head, &mut up).await;
        let result = match sent {
            Ok(()) => read_response_head(worker, &mut up, &plan, out).await,
            Err(e) => Err(e),
        };
        match result {
            Ok((response, keep)) => break (up, response, keep),
            Err(ProxyError::StaleUpstream) if replayable => {
                // The pooled connection had been closed by the backend: once more, on a new one.
                worker.counters().upstream_retry();
                fresh_only = true;
            }
            Err(e) => {
                worker.upstream_buffers.give(up.buf.into_inner());
                return Err((e, false));
            }
        }
    };

    let status = response.status;
    if status == 101 {
        if !head.upgrade {
            return Err((ProxyError::Upstream(UpstreamErrorKind::Protocol), false));
        }
        up.buf.consume(response.head_len);
        write_vec(client, out).await.map_err(|_| (ProxyError::ClientGone, true))?;
        return Ok((status, Next::Tunnel(up)));
    }
    up.buf.consume(response.head_len);
    let complete = relay_body(worker, client, &mut up, out, &response, head.minor == 0).await?;
    if complete && response.reusable && up.buf.is_empty() {
        worker.pool.put(up);
    } else {
        worker.upstream_buffers.give(up.buf.into_inner());
    }
    let next = if keep_client && complete { Next::KeepAlive } else { Next::Close };
    Ok((status, next))
}

/// Sends the head in `out` and the request body. Errors: `StaleUpstream` when a reused connection
/// fails before the backend could have seen the request, `ClientGone` when the body stops coming.
async fn send_request<S>(
    worker: &Worker,
    client: &mut S,
    cbuf: &mut ReadBuf,
    out: &mut Vec<u8>,
    head: &RequestHead,
    up: &mut UpstreamConn,
) -> Result<(), ProxyError>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let upstream_failed = |up: &UpstreamConn| {
        if up.reused {
            ProxyError::StaleUpstream
        } else {
            ProxyError::Upstream(UpstreamErrorKind::Reset)
        }
    };
    let head_len = out.len();
    // The head and whatever of the body is already here go out in one write.
    let mut remaining = 0u64;
    let mut decoder = None;
    match head.body {
        Framing::None | Framing::UntilClose => {}
        Framing::Length(n) => {
            let take = (n as usize).min(cbuf.len());
            out.extend_from_slice(&cbuf.data()[..take]);
            cbuf.consume(take);
            remaining = n - take as u64;
        }
        Framing::Chunked => {
            let mut d = ChunkedDecoder::new();
            let n = d.feed(cbuf.data(), |_, _| {}).map_err(|e| ProxyError::BadRequest(e.0))?;
            out.extend_from_slice(&cbuf.data()[..n]);
            cbuf.consume(n);
            decoder = Some(d);
        }
    }
    let timeout = worker.settings.upstream_timeout;
    let written = monoio::time::timeout(timeout, write_vec(&mut up.stream, out)).await;
    out.truncate(head_len);
    match written {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err(upstream_failed(up)),
        Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout)),
    }
    let body_pending = remaining > 0 || decoder.as_ref().is_some_and(|d| !d.is_done());
    if !body_pending {
        return Ok(());
    }
    if head.expect_continue {
        if let (Err(_), _) = client.write_all(CONTINUE).await {
            return Err(ProxyError::ClientGone);
        }
    }
    // Stream the rest of the body as it arrives; never buffered whole.
    loop {
        let read = monoio::time::timeout(worker.settings.keepalive_timeout, cbuf.fill(client)).await;
        match read {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) => return Err(ProxyError::ClientGone),
            Err(_) => return Err(ProxyError::HeaderTimeout),
        }
        let n = match &mut decoder {
            Some(d) => d.feed(cbuf.data(), |_, _| {}).map_err(|e| ProxyError::BadRequest(e.0))?,
            None => {
                let n = (remaining.min(usize::MAX as u64) as usize).min(cbuf.len());
                remaining -= n as u64;
                n
            }
        };
        let sent = monoio::time::timeout(timeout, cbuf.forward(n, &mut up.stream)).await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(ProxyError::Upstream(UpstreamErrorKind::Reset)),
            Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout)),
        }
        let done = match &decoder {
            Some(d) => d.is_done(),
            None => remaining == 0,
        };
        if done {
            return Ok(());
        }
    }
}

/// Reads the response head (skipping interim 1xx responses other than 101) and renders the head for
/// the client into `out`.
async fn read_response_head(
    worker: &Worker,
    up: &mut UpstreamConn,
    plan: &ResponsePlan,
    out: &mut Vec<u8>,
) -> Result<(ResponseHead, bool), ProxyError> {
    let mut received = false;
    loop {
        if !up.buf.is_empty() {
            received = true;
            if let Some((response, keep)) = parse_response(up.buf.data(), plan, out)? {
                if (100..200).contains(&response.status) && response.status != 101 {
                    up.buf.consume(response.head_len);
                    continue;
                }
                return Ok((response, keep));
            }
            if up.buf.room() == 0 {
                return Err(ProxyError::Upstream(UpstreamErrorKind::Protocol));
            }
        }
        match monoio::time::timeout(worker.settings.upstream_timeout, up.buf.fill(&mut up.stream)).await {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) if up.reused && !received => return Err(ProxyError::StaleUpstream),
            Ok(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Reset)),
            Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout)),
        }
    }
}

/// Writes the response head in `out` and streams the body. `Ok(true)` when the body was delimited
/// and relayed completely.
async fn relay_body<S>(
    worker: &Worker,
    client: &mut S,
    up: &mut UpstreamConn,
    out: &mut Vec<u8>,
    response: &ResponseHead,
    dechunk: bool,
) -> Result<bool, Failure>
where
    S: AsyncWriteRent,
{
    let timeout = worker.settings.upstream_timeout;
    let mut decoder = ChunkedDecoder::new();
    let mut remaining = match response.body {
        Framing::Length(n) => n,
        _ => 0,
    };
    let mut started = false;
    loop {
        // How much of the buffer belongs to the body; a decoding HTTP/1.0 relay copies payload
        // ranges into `out` instead.
        let protocol = |_| (ProxyError::Upstream(UpstreamErrorKind::Protocol), started);
        let (n, done) = match response.body {
            Framing::None => (0, true),
            Framing::Length(_) => {
                let n = (remaining.min(usize::MAX as u64) as usize).min(up.buf.len());
                remaining -= n as u64;
                (n, remaining == 0)
            }
            Framing::Chunked if dechunk => {
                let data = up.buf.data();
                let n = decoder.feed(data, |a, b| out.extend_from_slice(&data[a..b])).map_err(protocol)?;
                up.buf.consume(n);
                (0, decoder.is_done())
            }
            Framing::Chunked => (decoder.feed(up.buf.data(), |_, _| {}).map_err(protocol)?, decoder.is_done()),
            Framing::UntilClose => (up.buf.len(), false),
        };
        if !started || !out.is_empty() {
            // The head and the first part of the body go out in one write.
            out.extend_from_slice(&up.buf.data()[..n]);
            up.buf.consume(n);
            write_vec(client, out).await.map_err(|_| (ProxyError::ClientGone, true))?;
            out.clear();
            started = true;
        } else {
            up.buf.forward(n, client).await.map_err(|_| (ProxyError::ClientGone, true))?;
        }
        if done {
            return Ok(true);
        }
        match monoio::time::timeout(timeout, up.buf.fill(&mut up.stream)).await {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) if response.body == Framing::UntilClose => return Ok(false),
            Ok(_) => return Err((ProxyError::Upstream(UpstreamErrorKind::Reset), started)),
            Err(_) => return Err((ProxyError::Upstream(UpstreamErrorKind::Timeout), started)),
        }
    }
}
