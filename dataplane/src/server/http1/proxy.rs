//! Forwarding one request to a backend and streaming the response back.
//!
//! A request body that fits the client buffer is read whole before an upstream connection is taken,
//! so a client that sends its body slowly holds no upstream connection, and the request can be sent
//! again on a fresh connection if a pooled one turns out to be stale. A larger body is streamed as
//! it arrives (each read within the body timeout).

use std::net::SocketAddr;
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRent};
use ramjet_shared::{is_idempotent, Backend, UpstreamErrorKind};

use super::conn::{ClientConn, Next};
use super::respond::{body_error, finish_response_head};
use crate::base::buf::write_vec;
use crate::base::deadline::Deadline;
use crate::codec::http1::body::{copy_body, Body, CopyError, Deadlines};
use crate::codec::http1::head::{parse_response, RequestHead, ResponseHead, ResponsePlan};
use crate::codec::http1::Framing;
use crate::error::{Failure, ProxyError};
use crate::observe::requests::Tally;
use crate::pipeline::exchange::{self, Attempt, Retry};
use crate::pipeline::route::RouteExtras;
use crate::upstream::connect::UpstreamConn;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Proxies the request whose upstream head is in `conn.out` to one of `endpoints`. Returns the
/// status sent and what to do with the client connection.
/// A backend that speaks HTTP/2 (`H2C`, `GRPC`, `GRPCS`) gets the request as a stream on the
/// worker's multiplexed connection to it ([`super::h2_backend`]).
pub(crate) async fn forward<S>(
    conn: &mut ClientConn<'_, S>,
    head: &RequestHead,
    backend: &Backend,
    endpoints: &[SocketAddr],
    keep_alive: bool,
    extras: &mut RouteExtras<'_>,
) -> Result<(u16, Next), Failure>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let tls = backend.tls.as_deref();
    if endpoints.is_empty() {
        return Err(ProxyError::Upstream(UpstreamErrorKind::NoEndpoints).into());
    }
    let worker = conn.worker;
    // ingress-nginx's `proxy-body-size`: a declared length over the limit is refused unread.
    let declared = if let Framing::Length(n) = head.body { Some(n) } else { None };
    if extras.too_large(declared) {
        return Err(ProxyError::BodyTooLarge.into());
    }
    let limit = extras.max_body();
    let timeouts = extras.timeouts(&worker.settings);
    // `Some(n)`: the whole body (n bytes) is buffered and the request can be sent again as it is.
    let buffered = buffer_body(conn, head, limit).await?;
    if let Some(rule) = extras.mirrors() {
        crate::pipeline::mirror::send_all(worker, rule, &conn.out, buffered.map(|len| &conn.buf.data()[..len]));
    }
    let index = extras.endpoint(worker, backend.slot, endpoints);
    let plan = ResponsePlan { is_head: head.is_head, client_minor: head.minor, keep_alive };
    if head.host.is_empty() && !extras.filters.is_some_and(crate::policy::filters::sets_host) {
        // HTTP/1.0 without a Host: name the endpoint, as nginx's default `$proxy_host` does.
        insert_host(&mut conn.out, endpoints[index]);
    }
    if backend.protocol.is_h2() {
        extras.served_by(endpoints[index], endpoints);
        let to = super::h2_backend::Target { addr: endpoints[index], tls, buffered };
        // Boxed: its state (~6 KB, the HTTP/2 client's) would otherwise be part of every HTTP/1.1
        // connection's future, idle or not, for the few requests that go to an HTTP/2 backend.
        return Box::pin(super::h2_backend::forward(conn, head, to, plan, extras, timeouts)).await;
    }
    let mut tally = Tally::default();
    let replayable = buffered.is_some();
    // The upstream head starts with the method.
    let method = conn.out.split(|&b| b == b' ').next().unwrap_or_default();
    let retry = Retry { next: extras.next_upstream(), idempotent: is_idempotent(method) };
    // A request that may go to another endpoint after an answer keeps its head: the answer's
    // head replaces it in `conn.out`.
    let request_head = (replayable && retry.next.is_some_and(|n| !n.is_off())).then(|| {
        let mut copy = worker.out_buffers.take();
        copy.clear();
        copy.extend_from_slice(&conn.out);
        copy
    });
    // The rule's deadline bounds every wait from here to the answer's last byte.
    let deadline = Deadline::from_now(timeouts.deadline);
    let to = Attempt { endpoints, tls, first: index, replayable, connect_timeout: timeouts.connect, deadline, retry };
    let attempted = exchange::attempt(worker, to, &mut tally, async |up: &mut UpstreamConn| {
        if let Some(copy) = &request_head {
            conn.out.clear();
            conn.out.extend_from_slice(copy);
        }
        match buffered {
            Some(len) => send_buffered(conn, len, up, deadline.limit(timeouts.send)).await?,
            None => {
                let sent = send_streaming(conn, head, up, limit, timeouts.send, deadline).await?;
                conn.tally.bytes_in += sent;
            }
        }
        let out = &mut conn.out;
        exchange::read_response_head(up, &conn.watch, timeouts.read, deadline, |data| parse_response(data, &plan, out))
            .await
    })
    .await;
    if let Some(copy) = request_head {
        worker.out_buffers.give(copy);
    }
    let streamed = conn.tally.bytes_in;
    conn.tally = Tally { bytes_in: streamed, ..tally };
    let (mut up, (mut response, mut keep_client)) = attempted?;
    extras.served_by(up.addr, endpoints);
    extras.answered(worker, up.addr, conn.tally.upstream_header);
    if let Some(len) = buffered {
        conn.buf.consume(len);
        conn.tally.bytes_in += len as u64;
        conn.body_pending = false;
    }
    if let (Some(pages), Some(error_head)) = (extras.error_pages(), extras.error_head) {
        if pages.intercepts(response.status) {
            // The backend's answer is dropped, body unread, and its connection with it.
            worker.upstream_buffers.give(up.buf.into_inner());
            (up, (response, keep_client)) = error_exchange(conn, pages, error_head, response.status, &plan).await?;
        }
    }
    let status = response.status;
    finish_response_head(conn, extras, status);
    // From here the status is the one the client was sent, whatever happens to the body.
    conn.status = status;
    up.buf.consume(response.head_len);
    if status == 101 {
        if !head.upgrade {
            return Err(Failure::from(ProxyError::Upstream(UpstreamErrorKind::Protocol)).at(up.addr));
        }
        conn.write_out().await.map_err(|e| Failure::from(e).started())?;
        return Ok((status, Next::Tunnel(Box::new(up))));
    }
    let relayed = relay_response(conn, &mut up, &response, head.minor == 0, timeouts.read, deadline).await;
    let complete = match relayed {
        Ok((complete, bytes)) => {
            conn.tally.bytes_out += bytes;
            complete
        }
        Err(failure) => {
            worker.upstream_buffers.give(up.buf.into_inner());
            return Err(failure);
        }
    };
    // A backend asked to close (`connection-proxy-header: close`) is not asked again.
    let reusable = complete && !crate::policy::filters::closes_upstream(extras.filters);
    exchange::release(worker, up, reusable, &response);
    let next = if keep_client && complete { Next::KeepAlive } else { Next::Close };
    Ok((status, next))
}

/// Sends the error request for an answer with status `code` to the error backend (`error_head`
/// completed with `x-code`) and reads its response head into `conn.out`: its answer is the
/// client's. The endpoint is picked in turn; a refused connection moves on once.
async fn error_exchange<S>(
    conn: &mut ClientConn<'_, S>,
    pages: &ramjet_shared::ErrorPages,
    error_head: &[u8],
    code: u16,
    plan: &ResponsePlan,
) -> Result<(UpstreamConn, (ResponseHead, bool)), Failure> {
    let worker = conn.worker;
    let to = Attempt::own_request(worker, &pages.backend)?;
    let timeout = to.connect_timeout;
    let mut request = worker.out_buffers.take();
    request.clear();
    request.extend_from_slice(error_head);
    crate::policy::error_pages::finish(&mut request, code);
    let mut tally = Tally::default();
    let none = Deadline::NONE;
    let exchanged = exchange::attempt(worker, to, &mut tally, async |up| {
        conn.out.clear();
        conn.out.extend_from_slice(&request);
        send_buffered(conn, 0, up, timeout).await?;
        let out = &mut conn.out;
        exchange::read_response_head(up, &conn.watch, timeout, none, |data| parse_response(data, plan, out)).await
    })
    .await;
    worker.out_buffers.give(request);
    conn.tally.upstream = tally.upstream;
    conn.tally.upstream_connect = tally.upstream_connect;
    conn.tally.upstream_header = tally.upstream_header;
    conn.tally.connect_errors += tally.connect_errors;
    exchanged
}

/// Adds `host: <endpoint>` after the request line of the upstream head in `out`.
fn insert_host(out: &mut Vec<u8>, addr: SocketAddr) {
    let line_end = out.iter().position(|&b| b == b'\n').map_or(out.len(), |i| i + 1);
    let line = format!("host: {addr}\r\n");
    out.splice(line_end..line_end, line.into_bytes());
}

/// Reads the request body into the client buffer when all of it fits (answering
/// `Expect: 100-continue` first); `Some(len)` when it is all there, `None` when it must be streamed.
pub(super) async fn buffer_body<S>(
    conn: &mut ClientConn<'_, S>,
    head: &RequestHead,
    limit: Option<u64>,
) -> Result<Option<usize>, Failure>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    if !head.body.has_body() {
        return Ok(Some(0));
    }
    let mut probe = Body::with_limit(head.body, limit);
    let mut scanned = 0;
    let mut continued = false;
    loop {
        scanned += probe.advance(&conn.buf.data()[scanned..], |_, _| {}).map_err(body_error)?;
        if probe.is_done() {
            return Ok(Some(scanned));
        }
        if conn.buf.room() == 0 {
            return Ok(None);
        }
        if head.expect_continue && !continued {
            continued = true;
            conn.write_static(CONTINUE).await?;
        }
        conn.fill_body().await?;
    }
}

/// Sends the head in `conn.out` and the `len` buffered body bytes in one write. Both stay where they
/// are, so the request can be sent again.
async fn send_buffered<S>(
    conn: &mut ClientConn<'_, S>,
    len: usize,
    up: &mut UpstreamConn,
    timeout: Duration,
) -> Result<(), Failure> {
    let head_len = conn.out.len();
    conn.out.extend_from_slice(&conn.buf.data()[..len]);
    let written = conn.watch.bound(timeout, write_vec(&mut up.stream, &mut conn.out)).await;
    conn.out.truncate(head_len);
    match written {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(exchange::write_failed(up, Some(e.kind()))),
        Err(_) => Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
    }
}

/// Sends the head in `conn.out` and streams the body as it arrives; never buffered whole. Returns
/// the body bytes sent. Each wait lasts at most `deadline`'s rest too; its cut is the upstream's
/// timeout, even while the client's body was awaited.
async fn send_streaming<S>(
    conn: &mut ClientConn<'_, S>,
    head: &RequestHead,
    up: &mut UpstreamConn,
    limit: Option<u64>,
    timeout: Duration,
    deadline: Deadline,
) -> Result<u64, Failure>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let settings = &conn.worker.settings;
    let deadlines =
        Deadlines { read: settings.client_body_timeout, write: timeout, until: deadline, watch: &conn.watch };
    // Over the limit mid-stream, the backend has part of the body: its connection is closed, never
    // reused, and the client gets 413.
    let mut body = Body::with_limit(head.body, limit);
    let copied =
        copy_body(&mut body, &mut conn.stream, &mut conn.buf, &mut up.stream, &mut conn.out, false, deadlines).await;
    match copied {
        Ok(bytes) => {
            conn.body_pending = false;
            Ok(bytes)
        }
        Err((error, _)) => Err(match error {
            CopyError::SourceClosed(io) => Failure { io, ..Failure::from(ProxyError::ClientGone) },
            CopyError::SourceTimeout => ProxyError::BodyTimeout.into(),
            CopyError::Framing(why) => body_error(why).into(),
            CopyError::SinkFailed(io) => {
                Failure { io: Some(io), ..Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset)) }
            }
            CopyError::SinkTimeout | CopyError::Deadline => ProxyError::Upstream(UpstreamErrorKind::Timeout).into(),
        }),
    }
}

/// Writes the response head in `conn.out` and streams the body. `Ok((true, _))` when the body was
/// delimited and relayed completely; the second value counts the bytes written (head and body).
/// Each wait lasts at most `deadline`'s rest too; its cut closes the client connection (part of the
/// answer may be out).
async fn relay_response<S>(
    conn: &mut ClientConn<'_, S>,
    up: &mut UpstreamConn,
    response: &ResponseHead,
    dechunk: bool,
    read_timeout: Duration,
    deadline: Deadline,
) -> Result<(bool, u64), Failure>
where
    S: AsyncWriteRent,
{
    let settings = &conn.worker.settings;
    let head_len = conn.out.len() as u64;
    let deadlines =
        Deadlines { read: read_timeout, write: settings.client_write_timeout, until: deadline, watch: &conn.watch };
    let mut body = Body::new(response.body);
    let dechunk = dechunk && response.body == Framing::Chunked;
    let copied =
        copy_body(&mut body, &mut up.stream, &mut up.buf, &mut conn.stream, &mut conn.out, dechunk, deadlines).await;
    match copied {
        Ok(bytes) => Ok((body.is_done(), head_len + bytes)),
        Err((error, started)) => {
            let failure = match error {
                CopyError::SourceClosed(io) => {
                    Failure { io, ..Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset)) }
                }
                CopyError::SourceTimeout => ProxyError::Upstream(UpstreamErrorKind::Timeout).into(),
                CopyError::Framing(_) => ProxyError::Upstream(UpstreamErrorKind::Protocol).into(),
                CopyError::SinkFailed(io) => Failure { io: Some(io), ..Failure::from(ProxyError::ClientGone) },
                CopyError::SinkTimeout => ProxyError::ClientWriteTimeout.into(),
                CopyError::Deadline => {
                    return Err(Failure::from(ProxyError::Upstream(UpstreamErrorKind::Timeout)).at(up.addr).started())
                }
            };
            let failure = failure.at(up.addr);
            Err(if started { failure.started() } else { failure })
        }
    }
}
