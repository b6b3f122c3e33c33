//! One HTTP/2 stream: one request, routed and answered like an HTTP/1.1 request, proxied to the
//! backend over HTTP/1.1 from the worker's pool.
//!
//! Memory stays bounded per stream in both directions: request body bytes are released to the
//! client's flow-control window only once written upstream (so at most one window is buffered),
//! and response bytes are read from the backend only once the client's window has room for the
//! previous ones. A client that opens no window for longer than the write timeout (a zero-window
//! stall) has its stream reset and the upstream connection closed.

use std::future::poll_fn;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::HeaderValue;
use http::{Method, Request, Response};
use monoio::io::AsyncWriteRentExt;
use ramjet_shared::{is_idempotent, Edits, HashInput, RouteTable, UpstreamErrorKind};

use super::answer::render;
use super::relay::{self, Stalled};
use super::request::StreamRequest;
use super::streams::StreamSlot;
use crate::base::buf::write_vec;
use crate::base::coarse_timer::CoarseTimer;
use crate::base::deadline::Deadline;
use crate::base::watchdog::Watchdog;
use crate::codec::forwarded::{forwarded_host, forwarded_https, request_client};
use crate::codec::grpc;
use crate::codec::http1::body::Body;
use crate::codec::http1::head::ResponseHead;
use crate::codec::http1::Framing;
use crate::codec::http2::fields::{host, push_chunk_size, response_head, upstream_head, values};
use crate::conn::ConnFacts;
use crate::error::{Failure, ProxyError};
use crate::observe::access_log::{FieldSource, RequestFields};
use crate::observe::requests::CLIENT_CLOSED;
use crate::observe::requests::{Done, RequestId, Served, Tally};
use crate::pipeline::admit::{admit, Admission, Gate};
use crate::pipeline::answer::LocalAnswer;
use crate::pipeline::exchange::{self, Attempt, Retry};
use crate::pipeline::external_auth::Asking;
use crate::pipeline::respond::edit_response;
use crate::pipeline::route::{decide, Addressed, Proxy, RouteExtras, Step};
use crate::pipeline::view::H2View;
use crate::upstream::connect::UpstreamConn;
use crate::worker::Worker;

const X_REQUEST_ID: &str = "x-request-id";
const TRACEPARENT: &str = "traceparent";

/// Request body pieces up to this size are copied behind their chunk framing and sent in one
/// write; larger ones are written as they are.
const COALESCE: usize = 16 * 1024;

/// What a stream did, for its accounting: the status sent (0: none), the route, the tally.
struct Seen<'t> {
    status: u16,
    served: Option<Served<'t>>,
    tally: Tally,
}

/// Serves one stream; `_slot` keeps its place among the connection's active streams until the
/// end, whatever the client did with the stream meanwhile.
pub(crate) async fn serve(
    worker: Rc<Worker>,
    facts: Rc<ConnFacts>,
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    _slot: StreamSlot,
) {
    let start = Instant::now();
    let (parts, body) = request.into_parts();
    // One generation for the whole life of this stream.
    let generation = worker.generation();
    let id = worker.request_id(parts.headers.get(X_REQUEST_ID).map(|v| v.as_bytes()), || {
        // Two `traceparent` fields are no context at all (W3C Trace Context): an empty value.
        let mut all = parts.headers.get_all(TRACEPARENT).iter();
        match (all.next(), all.next()) {
            (Some(one), None) => Some(one.as_bytes()),
            (Some(_), Some(_)) => Some(&[][..]),
            _ => None,
        }
    });
    // The client its fields name, where the peer is a trusted proxy (else nothing is looked at).
    let client = request_client(&facts, values(&parts.headers));
    let mut record = Vec::new();
    let (logging, span) = {
        let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
        let host_field = parts.headers.get(http::header::HOST).map(|h| h.as_bytes());
        let fields = RequestFields {
            client: client.unwrap_or(facts.peer),
            method: parts.method.as_str().as_bytes(),
            host: authority.or(host_field).unwrap_or_default(),
            path: parts.uri.path_and_query().map_or(b"/", |t| t.as_str().as_bytes()),
            protocol: "HTTP/2.0",
            user_agent: parts.headers.get(http::header::USER_AGENT).map_or(b"", |v| v.as_bytes()),
            referer: parts.headers.get(http::header::REFERER).map_or(b"", |v| v.as_bytes()),
            request_id: id.as_bytes(),
            trace_id: id.trace.trace_id(),
            generation: generation.number,
            tls: facts.tls_session.as_ref(),
            head: FieldSource::Http2(&parts.headers),
        };
        (worker.log_begin(&fields, &mut record), worker.span_begin(&id, &fields))
    };
    let mut seen = Seen { status: 0, served: None, tally: Tally::default() };
    let outcome = match host(&parts) {
        Ok(host) => {
            let req = StreamRequest { worker: &worker, facts: &facts, parts: &parts, host, id: &id, client };
            handle(req, &generation.table, body, &mut respond, &mut seen).await
        }
        Err(e) => Err(e.into()),
    };
    match outcome {
        Ok(status) => seen.status = status,
        Err(failure) => {
            let answer = worker.failed(&failure);
            match answer.status {
                Some(status) => {
                    let sent = if grpc::is_grpc(&parts.headers) {
                        let mut response = grpc::trailers_only(status);
                        with_id(&mut response, &id);
                        respond.send_response(response, true).is_ok()
                    } else {
                        answer_with(&worker, &mut respond, &LocalAnswer::Status(status), false, &id).await
                    };
                    seen.status = if sent { status } else { CLIENT_CLOSED };
                }
                // The response had started, or the client is gone: only a reset can say so.
                None => {
                    respond.send_reset(Reason::INTERNAL_ERROR);
                    if seen.status == 0 {
                        seen.status = CLIENT_CLOSED;
                    }
                }
            }
        }
    }
    let done = Done {
        status: seen.status,
        start,
        served: seen.served,
        generation: &generation,
        tally: &seen.tally,
        counted: false,
    };
    worker.request_done(&done, logging.then_some(&mut record), span);
    worker.give_record(record);
}

/// Routes and answers the request; the status sent, or why it failed. The phases are the
/// pipeline's (`crate::pipeline`); this function reads them from the stream's fields and writes
/// their answers as HTTP/2.
async fn handle<'t>(
    req: StreamRequest<'_>,
    table: &'t RouteTable,
    body: RecvStream,
    respond: &mut SendResponse<Bytes>,
    seen: &mut Seen<'t>,
) -> Result<u16, Failure> {
    let StreamRequest { worker, facts, parts, host, id, .. } = req;
    let target = parts.uri.path_and_query().map_or("/", |t| t.as_str());
    let route_target = if target.starts_with('/') { target } else { "/" };
    let mut host_buf = [0u8; 256];
    let is_head = parts.method == Method::HEAD;
    // Over TLS to ramjet, or to a trusted proxy that says so.
    let tls = facts.tls || forwarded_https(facts, values(&parts.headers));
    let view = H2View(parts, tls);
    let peer = req.client_addr().ip();
    let forwarded_host = match facts.trusted_fields {
        true => forwarded_host(facts, values(&parts.headers)).and_then(|h| std::str::from_utf8(h).ok()),
        false => None,
    };
    let to = Addressed { host, target: route_target, tls, port: facts.local_port, forwarded_host };
    let decision = decide(table, host, route_target, tls, peer, &mut host_buf, &view, &mut || worker.random());
    let proxy = match decision.step(&to, &worker.rewrite) {
        Step::Proxy(proxy) => proxy,
        Step::Answer { answer, served } => {
            seen.served = served;
            if answer.status() >= 400 && matches!(answer, LocalAnswer::Direct { .. }) && grpc::is_grpc(&parts.headers) {
                // A configured error (no rule of the route matched, its backend unusable) is
                // answered the gRPC way, as ramjet's own failures are.
                let mut trailers = grpc::trailers_only(answer.status());
                with_id(&mut trailers, id);
                return match respond.send_response(trailers, true) {
                    Ok(_) => Ok(answer.status()),
                    Err(_) => Err(ProxyError::ClientGone.into()),
                };
            }
            return Ok(answer_or_gone(worker, respond, &answer, is_head, id).await?);
        }
        Step::Fail { error, served } => {
            seen.served = served;
            return Err(error.into());
        }
    };
    seen.served = Some(proxy.served);
    let Proxy { served, endpoints, rule, sticky, edits } = proxy;
    let input = || HashInput { target: target.as_bytes(), host: host.as_bytes(), peer, tls };
    let mut extras = RouteExtras::new(served.route, rule, sticky);
    extras.https = facts.tls;
    if facts.own_certificate {
        extras.hsts = table.hsts();
    }
    extras.choose_endpoint(&view, input, (&served, endpoints), || worker.random());
    let mut held = Admission::default();
    let gate = if extras.needs_admission() {
        let asking = Asking {
            method: parts.method.as_str().as_bytes(),
            target: target.as_bytes(),
            host: host.as_bytes(),
            peer,
            tls: facts.tls,
            request_id: id.as_bytes(),
        };
        admit(worker, table, (&asking, facts), &view, &extras, &mut held).await
    } else {
        Gate::Open
    };
    let answered = match gate {
        Gate::Open => None,
        Gate::Answer(answer) => {
            Some(answer_or_gone(worker, respond, &answer, is_head, id).await.map_err(Failure::from))
        }
        Gate::Fail(error) => Some(Err(error.into())),
    };
    let result = match answered {
        Some(result) => result,
        None => {
            held.grant(&mut extras);
            extras.response = edits.response;
            proxy_stream(req, (served, endpoints), body, respond, seen, &mut extras, edits).await
        }
    };
    held.release(worker);
    result
}

/// Sends the admitted stream to its backend, over HTTP/2 when the backend speaks it, else over
/// HTTP/1.1 from the worker's pool.
async fn proxy_stream<'t>(
    req: StreamRequest<'_>,
    (served, endpoints): (Served<'t>, &'t [std::net::SocketAddr]),
    body: RecvStream,
    respond: &mut SendResponse<Bytes>,
    seen: &mut Seen<'t>,
    extras: &mut RouteExtras<'_>,
    edits: Edits<'_>,
) -> Result<u16, Failure> {
    let worker = req.worker;
    if endpoints.is_empty() {
        return Err(ProxyError::Upstream(UpstreamErrorKind::NoEndpoints).into());
    }
    let index = extras.endpoint(worker, served.backend.slot, endpoints);
    let tls = served.backend.tls.as_deref();
    if served.backend.protocol.is_h2() {
        let grpc = grpc::is_grpc(&req.parts.headers);
        let to = relay::Target { endpoints, index, tls, grpc, extras, edits };
        return relay::forward(req, body, respond, to, &mut seen.tally).await;
    }
    let to = Upstream { endpoints, tls, index };
    forward(req, body, respond, to, seen, extras, edits).await
}

/// Sends `request` (an error request, complete) to the error backend and reads its response
/// head: its answer is the client's. The endpoint is picked in turn; a refused connection moves
/// on once.
async fn error_exchange(
    worker: &Worker,
    pages: &ramjet_shared::ErrorPages,
    request: &mut Vec<u8>,
    is_head: bool,
    tally: &mut Tally,
) -> Result<(UpstreamConn, (ResponseHead, Response<()>)), Failure> {
    let to = Attempt::own_request(worker, &pages.backend)?;
    let timeout = to.connect_timeout;
    let none = Deadline::NONE;
    exchange::attempt(worker, to, tally, async |up: &mut UpstreamConn| {
        match worker.timeout(timeout, write_vec(&mut up.stream, request)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(exchange::write_failed(up, Some(e.kind()))),
            Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
        }
        let watch = Watchdog::new(&worker.coarse_timer);
        exchange::read_response_head(up, &watch, timeout, none, |data| response_head(data, is_head)).await
    })
    .await
}

async fn answer_or_gone(
    worker: &Worker,
    respond: &mut SendResponse<Bytes>,
    answer: &LocalAnswer<'_>,
    is_head: bool,
    id: &RequestId,
) -> Result<u16, ProxyError> {
    let status = answer.status();
    if answer_with(worker, respond, answer, is_head, id).await {
        Ok(status)
    } else {
        Err(ProxyError::ClientGone)
    }
}

/// Adds the request's id to a response for the client.
fn with_id(response: &mut Response<()>, id: &RequestId) {
    if let Ok(value) = HeaderValue::from_bytes(id.as_bytes()) {
        response.headers_mut().insert(X_REQUEST_ID, value);
    }
}

/// Sends an answer ramjet writes itself; `false` when the client is gone.
async fn answer_with(
    worker: &Worker,
    respond: &mut SendResponse<Bytes>,
    answer: &LocalAnswer<'_>,
    is_head: bool,
    id: &RequestId,
) -> bool {
    let (mut response, body) = render(answer, &worker.clock.date());
    with_id(&mut response, id);
    let empty = is_head || body.is_empty();
    let Ok(mut send) = respond.send_response(response, empty) else { return false };
    if empty {
        return true;
    }
    let mut body = BytesMut::from(body);
    send_chunk(&worker.coarse_timer, &mut send, &mut body, true, worker.settings.client_write_timeout, Deadline::NONE)
        .await
        .is_ok()
}

/// Where a stream is proxied: `endpoints[index]` (or the next one), with the request's id.
struct Upstream<'a> {
    endpoints: &'a [std::net::SocketAddr],
    tls: Option<&'a ramjet_shared::UpstreamTls>,
    index: usize,
}

/// Proxies the stream to `endpoints[index]` (or the next one) over HTTP/1.1.
async fn forward(
    req: StreamRequest<'_>,
    mut body: RecvStream,
    respond: &mut SendResponse<Bytes>,
    to: Upstream<'_>,
    seen: &mut Seen<'_>,
    extras: &mut RouteExtras<'_>,
    edits: Edits<'_>,
) -> Result<u16, Failure> {
    let StreamRequest { worker, facts, parts, host, id, client } = req;
    let Upstream { endpoints, tls, index } = to;
    let mut out = worker.out_buffers.take();
    let framing = match upstream_head(parts, host, (facts, client), body.is_end_stream(), &mut out) {
        Ok(framing) => framing,
        Err(e) => {
            worker.out_buffers.give(out);
            return Err(e.into());
        }
    };
    id.insert_before_end(&mut out);
    let declared = if let Framing::Length(n) = framing { Some(n) } else { None };
    if extras.too_large(declared) {
        worker.out_buffers.give(out);
        return Err(ProxyError::BodyTooLarge.into());
    }
    let timeouts = extras.timeouts(&worker.settings);
    let limit = extras.max_body();
    if let Some(policy) = extras.filters {
        let target = parts.uri.path_and_query().map_or("/", |t| t.as_str());
        crate::policy::filters::apply(&mut out, policy, target.as_bytes(), &mut worker.rewrite.borrow_mut());
    }
    if edits.changes_request() {
        let mut edited = worker.out_buffers.take();
        let scratch = &mut worker.rewrite.borrow_mut();
        crate::policy::edit::edit_head(&out, edits.request, edits.rewrite, scratch, &mut edited);
        worker.out_buffers.give(std::mem::replace(&mut out, edited));
    }
    extras.set_auth_fields(&mut out);
    // Without a body the request can be sent again as it is, should a pooled connection be stale.
    let replayable = !framing.has_body();
    if let Some(rule) = extras.mirrors() {
        // An HTTP/2 body is streamed, never buffered whole: only a request without one is copied whole.
        crate::pipeline::mirror::send_all(worker, rule, &out, replayable.then_some(&[][..]));
    }
    let is_head = parts.method == Method::HEAD;
    let mut sent = 0u64;
    let tally = &mut seen.tally;
    let connect = timeouts.connect;
    let retry = Retry { next: extras.next_upstream(), idempotent: is_idempotent(parts.method.as_str().as_bytes()) };
    // The rule's deadline bounds every wait from here to the answer's last byte.
    let deadline = Deadline::from_now(timeouts.deadline);
    let to = Attempt { endpoints, tls, first: index, replayable, connect_timeout: connect, deadline, retry };
    let upstream = exchange::attempt(worker, to, tally, async |up: &mut UpstreamConn| {
        let to = Sending { framing, limit, timeout: timeouts.send, until: deadline };
        send_request(worker, up, &mut out, &mut body, to, &mut sent).await?;
        let watch = Watchdog::new(&worker.coarse_timer);
        exchange::read_response_head(up, &watch, timeouts.read, deadline, |data| response_head(data, is_head)).await
    });
    // A client that resets the stream ends the exchange (and the upstream connection) at once.
    let result = monoio::select! {
        r = upstream => r,
        _ = poll_fn(|cx| respond.poll_reset(cx)) => Err(ProxyError::ClientGone.into()),
    };
    seen.tally.bytes_in += sent;
    let intercepted = match &result {
        Ok((_, (head, _))) => extras.error_pages().filter(|p| p.intercepts(head.status)),
        Err(_) => None,
    };
    let result = match (intercepted, result) {
        (Some(pages), Ok((dropped, (head, _)))) => {
            // The backend's answer is dropped, body unread, and its connection with it.
            worker.upstream_buffers.give(dropped.buf.into_inner());
            let mut request = worker.out_buffers.take();
            let accept = parts.headers.get(http::header::ACCEPT).map(|v| v.as_bytes());
            let original = parts.uri.path_and_query().map_or("/", |t| t.as_str());
            crate::policy::error_pages::request_head(&out, original.as_bytes(), accept, pages, &mut request);
            crate::policy::error_pages::finish(&mut request, head.status);
            let answered = error_exchange(worker, pages, &mut request, is_head, &mut seen.tally).await;
            worker.out_buffers.give(request);
            answered
        }
        (_, result) => result,
    };
    worker.out_buffers.give(out);
    let (mut up, (head, mut response)) = result?;
    extras.served_by(up.addr, endpoints);
    extras.answered(worker, up.addr, seen.tally.upstream_header);
    edit_response(extras, head.status, response.headers_mut());
    up.buf.consume(head.head_len);
    if head.status == 101 {
        // No protocol switch over HTTP/2 (RFC 9113 §8.6).
        worker.upstream_buffers.give(up.buf.into_inner());
        return Err(Failure::from(ProxyError::Upstream(UpstreamErrorKind::Protocol)).at(up.addr));
    }
    let status = head.status;
    let end = head.body == Framing::None;
    with_id(&mut response, id);
    let mut send = match respond.send_response(response, end) {
        Ok(send) => send,
        Err(_) => {
            worker.upstream_buffers.give(up.buf.into_inner());
            return Err(ProxyError::ClientGone.into());
        }
    };
    let complete = if end {
        true
    } else {
        seen.status = status;
        let relayed = &mut seen.tally.bytes_out;
        match relay_body(worker, &mut up, head.body, &mut send, relayed, timeouts.read, deadline).await {
            Ok(complete) => complete,
            Err(failure) => {
                let addr = up.addr;
                worker.upstream_buffers.give(up.buf.into_inner());
                return Err(failure.at(addr).started());
            }
        }
    };
    // A backend asked to close (`connection-proxy-header: close`) is not asked again.
    let reusable = complete && !crate::policy::filters::closes_upstream(extras.filters);
    exchange::release(worker, up, reusable, &head);
    Ok(status)
}

/// How a request goes upstream: its body's framing and size limit, each write's timeout, and the
/// exchange's deadline, which bounds each write and each wait for the client's body (its cut is
/// the upstream's timeout).
struct Sending {
    framing: Framing,
    limit: Option<u64>,
    timeout: Duration,
    until: Deadline,
}

/// Writes the head in `out` and the request body as it arrives from the client, framed as
/// `framing` says. Each piece of body is released to the client's window once written upstream.
/// A body that grows past the limit ends the exchange with 413 (the backend has part of it; its
/// connection is closed).
async fn send_request(
    worker: &Worker,
    up: &mut UpstreamConn,
    out: &mut Vec<u8>,
    body: &mut RecvStream,
    sending: Sending,
    sent: &mut u64,
) -> Result<(), Failure> {
    let settings = &worker.settings;
    let Sending { framing, limit, timeout, until } = sending;
    if !framing.has_body() {
        return match write(worker, up, out, until.limit(timeout)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(exchange::write_failed(up, Some(e.kind()))),
            Err(_) => Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
        };
    }
    let chunked = framing == Framing::Chunked;
    // The head waits in `out` for the first piece of body, to go out in one write with it.
    loop {
        let (wait, cut) = until.clamp(settings.client_body_timeout);
        let piece = match worker.timeout(wait, body.data()).await {
            Err(_) if cut => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
            Err(_) => return Err(ProxyError::BodyTimeout.into()),
            Ok(None) => None,
            Ok(Some(Ok(piece))) => Some(piece),
            Ok(Some(Err(e))) => {
                return Err(if e.is_reset() || e.is_io() || e.is_go_away() {
                    ProxyError::ClientGone.into()
                } else {
                    ProxyError::BadRequest("invalid request body").into()
                })
            }
        };
        let Some(piece) = piece else {
            if chunked {
                out.extend_from_slice(b"0\r\n\r\n");
            }
            return flush(write(worker, up, out, until.limit(timeout)).await, up, out);
        };
        let len = piece.len();
        if len == 0 {
            continue;
        }
        *sent += len as u64;
        if limit.is_some_and(|max| *sent > max) {
            return Err(ProxyError::BodyTooLarge.into());
        }
        if chunked {
            push_chunk_size(out, len);
        }
        if len <= COALESCE {
            out.extend_from_slice(&piece);
        } else {
            flush(write(worker, up, out, until.limit(timeout)).await, up, out)?;
            let written = worker.timeout(until.limit(timeout), up.stream.write_all(piece)).await;
            flush(written.map(|(r, _)| r.map(|_| ())), up, out)?;
        }
        if chunked {
            out.extend_from_slice(b"\r\n");
        }
        flush(write(worker, up, out, until.limit(timeout)).await, up, out)?;
        // Written upstream: the client may send that much more.
        let _ = body.flow_control().release_capacity(len);
    }
}

async fn write(
    worker: &Worker,
    up: &mut UpstreamConn,
    out: &mut Vec<u8>,
    timeout: Duration,
) -> Result<std::io::Result<()>, crate::base::watchdog::Elapsed> {
    worker.timeout(timeout, write_vec(&mut up.stream, out)).await
}

/// The outcome of one upstream write; `out` is emptied once written.
fn flush(
    written: Result<std::io::Result<()>, crate::base::watchdog::Elapsed>,
    up: &UpstreamConn,
    out: &mut Vec<u8>,
) -> Result<(), Failure> {
    match written {
        Ok(Ok(())) => {
            out.clear();
            Ok(())
        }
        Ok(Err(e)) => Err(exchange::write_failed(up, Some(e.kind()))),
        Err(_) => Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
    }
}

/// Streams the response body from the backend to the client in its window. `Ok(true)` when the
/// body was delimited and relayed completely. Each wait lasts at most what is left of `until` too
/// (its cut is the upstream's timeout).
async fn relay_body(
    worker: &Worker,
    up: &mut UpstreamConn,
    framing: Framing,
    send: &mut SendStream<Bytes>,
    relayed: &mut u64,
    read_timeout: Duration,
    until: Deadline,
) -> Result<bool, Failure> {
    let settings = &worker.settings;
    let mut body = Body::new(framing);
    let mut chunk = BytesMut::new();
    loop {
        let data = up.buf.data();
        let advanced = if framing == Framing::Chunked {
            body.advance(data, |a, b| chunk.extend_from_slice(&data[a..b]))
        } else {
            body.advance(data, |_, _| {}).inspect(|&n| chunk.extend_from_slice(&data[..n]))
        };
        let n = advanced.map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Protocol))?;
        up.buf.consume(n);
        *relayed += chunk.len() as u64;
        let done = body.is_done();
        send_chunk(&worker.coarse_timer, send, &mut chunk, done, settings.client_write_timeout, until).await?;
        if done {
            return Ok(true);
        }
        // A read cut by the deadline is the upstream's timeout too.
        let read = monoio::select! {
            r = worker.timeout(until.limit(read_timeout), up.buf.fill(&mut up.stream)) => r,
            _ = poll_fn(|cx| send.poll_reset(cx)) => return Err(ProxyError::ClientGone.into()),
        };
        match read {
            Ok(Ok(n)) if n > 0 => {}
            Ok(Ok(_)) if framing == Framing::UntilClose => {
                send_chunk(&worker.coarse_timer, send, &mut chunk, true, settings.client_write_timeout, until).await?;
                return Ok(true);
            }
            Ok(Ok(_)) => return Err(ProxyError::Upstream(UpstreamErrorKind::Reset).into()),
            Ok(Err(e)) => {
                return Err(Failure { io: Some(e.kind()), ..ProxyError::Upstream(UpstreamErrorKind::Reset).into() })
            }
            Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
        }
    }
}

/// Sends all of `chunk` as the client's window allows (`end`: and ends the stream), waiting at
/// most `wait` (and what is left of `until`) each time for the window to open.
async fn send_chunk(
    timer: &CoarseTimer,
    send: &mut SendStream<Bytes>,
    chunk: &mut BytesMut,
    end: bool,
    wait: Duration,
    until: Deadline,
) -> Result<(), Failure> {
    let sent = if chunk.is_empty() {
        if !end {
            return Ok(());
        }
        send.send_data(Bytes::new(), true).map_err(|_| Stalled::Gone)
    } else {
        relay::send_bytes(timer, send, chunk.split().freeze(), end, wait, until).await
    };
    sent.map_err(|e| match e {
        Stalled::Gone => Failure::from(ProxyError::ClientGone),
        Stalled::Timeout => Failure::from(ProxyError::ClientWriteTimeout),
        Stalled::Deadline => Failure::from(ProxyError::Upstream(UpstreamErrorKind::Timeout)),
    })
}
