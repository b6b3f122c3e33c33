//! A stream proxied to a backend over HTTP/2 (`H2C`, `GRPC`, `GRPCS`): the request and the response are
//! relayed frame by frame on one of the worker's multiplexed upstream connections
//! ([`crate::upstream::h2::H2Pool`]), both directions at once (so gRPC's client, server and
//! bidirectional streaming work), with trailers both ways. The rule's header edits and rewrite
//! apply as on HTTP/1.1: to the request's fields, `:path` and `:authority`, and to the response's
//! fields.
//!
//! Memory stays bounded as on the HTTP/1.1 path: a piece of body is released to the sender's
//! flow-control window only once the other side's window took it. A gRPC request's `grpc-timeout`
//! bounds the wait for the response head: past it the client gets `DEADLINE_EXCEEDED`.

use std::cell::Cell;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue, HOST};
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{Request, Response, Uri};
use ramjet_shared::{Edits, UpstreamErrorKind, UpstreamTls};

use super::request::StreamRequest;
use crate::base::coarse_timer::CoarseTimer;
use crate::base::deadline::Deadline;
use crate::codec::forwarded::{push_address_lines, push_originals};
use crate::codec::http2::fields::values;
use crate::conn::ConnFacts;
use crate::error::{Failure, ProxyError};
use crate::observe::requests::{RequestId, Tally};
use crate::pipeline::route::RouteExtras;
use crate::upstream::h2::OpenStream;
use crate::worker::Worker;

/// The request id's field, both ways.
const X_REQUEST_ID: &str = "x-request-id";

/// Where a relayed stream goes: an endpoint, over TLS with `tls` (`GRPCS`) or not, and whether
/// the client speaks gRPC (its deadline applies).
pub(super) struct Target<'a> {
    /// The backend's endpoints, and the one chosen (a sticky session's, a hash's, or the next).
    pub endpoints: &'a [SocketAddr],
    pub index: usize,
    pub tls: Option<&'a UpstreamTls>,
    pub grpc: bool,
    /// The route's request fields (`proxy_set_header`-style filters) and the external auth
    /// service's: set on the request, or removed when empty.
    pub extras: &'a RouteExtras<'a>,
    /// The rule's header edits (request and response) and its rewrite of `:path` and `:authority`.
    pub edits: Edits<'a>,
}

/// Body bytes relayed each way, counted as they go (the pumps run concurrently).
#[derive(Default)]
struct Relayed {
    to_backend: Cell<u64>,
    to_client: Cell<u64>,
}

/// Proxies the stream to `to` over HTTP/2; the status relayed, or why it failed. `tally` learns
/// the endpoint, the times and the body bytes each way; the request carries the request id `id`.
pub(super) async fn forward(
    req: StreamRequest<'_>,
    body: RecvStream,
    respond: &mut SendResponse<Bytes>,
    to: Target<'_>,
    tally: &mut Tally,
) -> Result<u16, Failure> {
    let StreamRequest { worker, facts, parts, host, id, client } = req;
    let extras = to.extras;
    // The client's gRPC deadline and the rule's, whichever ends first, bound the wait for the head.
    let grpc = if to.grpc { grpc_timeout(&parts.headers) } else { None };
    let deadline = grpc.into_iter().chain(extras.rule.and_then(|r| r.deadline)).min();
    let edits = to.edits;
    let target = parts.uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
    // The rule's rewrite, made once: the request may be made again on a fresh connection.
    let (authority, target) = match edits.rewrite {
        None => (host, target),
        Some(rewrite) => {
            let target = match &rewrite.path {
                None => target,
                Some(path) => {
                    let mut buf = worker.out_buffers.take();
                    let rewritten = crate::policy::edit::rewrite_path(
                        target.as_str(),
                        path,
                        &mut worker.rewrite.borrow_mut(),
                        &mut buf,
                    );
                    worker.out_buffers.give(buf);
                    rewritten.ok_or(ProxyError::BadRequest("invalid :path"))?
                }
            };
            (rewrite.host.as_deref().unwrap_or(host), target)
        }
    };
    let upstream = Upstream { authority, target: &target, forwarded_host: host };
    let request = || {
        upstream_request(parts, &upstream, (facts, client), id).map(|mut r| {
            set_fields(r.headers_mut(), extras);
            if let Some(edits) = edits.request {
                crate::policy::edit::edit_fields(r.headers_mut(), edits);
            }
            r
        })
    };
    let addr = to.endpoints[to.index];
    tally.upstream = Some(addr);
    let relayed = Relayed::default();
    let result = exchange(worker, &to, request, body, respond, deadline, id, &relayed, tally).await;
    tally.bytes_in += relayed.to_backend.get();
    tally.bytes_out += relayed.to_client.get();
    result.map_err(|f| f.at(addr))
}

#[allow(clippy::too_many_arguments)]
async fn exchange(
    worker: &Worker,
    to: &Target<'_>,
    request: impl Fn() -> Result<Request<()>, ProxyError>,
    mut body: RecvStream,
    respond: &mut SendResponse<Bytes>,
    deadline: Option<Duration>,
    id: &RequestId,
    relayed: &Relayed,
    tally: &mut Tally,
) -> Result<u16, Failure> {
    let settings = &worker.settings;
    let (addr, tls) = (to.endpoints[to.index], to.tls);
    let upstream_failed = |_| worker.h2_pool.failed(addr, tls);
    let started = Instant::now();
    let end = body.is_end_stream();
    let opened = worker.h2_pool.open_stream(addr, tls, worker.dial(settings.upstream_timeout), request, end).await?;
    let OpenStream { response, send: up_send, held: _held, connect, retried } = opened;
    if retried {
        worker.counters().upstream_retry();
    }
    // As on HTTP/1.1: the time spent opening a connection, zero on a shared one.
    tally.upstream_connect = Some(connect);
    let mut pump = pin!(async move {
        if end {
            return Ok(());
        }
        pump_request(worker, &mut body, up_send, &relayed.to_backend).await
    });
    // The response head, within the upstream timeout and the gRPC deadline.
    let wait = deadline.map_or(settings.upstream_timeout, |d| d.min(settings.upstream_timeout));
    let mut head = pin!(worker.timeout(wait, response));
    let mut pumped = false;
    let response = loop {
        monoio::select! {
            r = &mut pump, if !pumped => { client_side(r)?; pumped = true; }
            r = &mut head => break r,
            _ = poll_fn(|cx| respond.poll_reset(cx)) => return Err(ProxyError::ClientGone.into()),
        }
    };
    let response = match response {
        Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
        Ok(Err(e)) if e.is_io() || e.is_go_away() => return Err(upstream_failed(e)),
        Ok(Err(_)) => return Err(ProxyError::Upstream(UpstreamErrorKind::Reset).into()),
        Ok(Ok(response)) => response,
    };
    tally.upstream_header = Some(started.elapsed());
    tally.upstream_status = Some(response.status().as_u16());
    let (head, mut up_body) = response.into_parts();
    let status = head.status.as_u16();
    let mut out = Response::new(());
    *out.status_mut() = head.status;
    *out.headers_mut() = head.headers;
    let mut extras = *to.extras;
    extras.served_by(addr, to.endpoints);
    extras.answered(worker, addr, tally.upstream_header);
    crate::pipeline::respond::edit_response(&extras, status, out.headers_mut());
    // The client learns the request's id, as on every other path.
    if let Ok(value) = HeaderValue::from_bytes(id.as_bytes()) {
        out.headers_mut().insert(X_REQUEST_ID, value);
    }
    let end = up_body.is_end_stream();
    let mut client = respond.send_response(out, end).map_err(|_| Failure::from(ProxyError::ClientGone))?;
    if end {
        // A trailers-only answer (a gRPC error, say): all there is to say was in the head.
        return Ok(status);
    }
    let relay = pin!(relay_response(worker, &mut up_body, &mut client, &relayed.to_client));
    let mut relay = relay;
    loop {
        monoio::select! {
            r = &mut pump, if !pumped => {
                // A request that fails now cannot be answered any more: reset.
                client_side(r).map_err(Failure::started)?;
                pumped = true;
            }
            r = &mut relay => return r.map(|_| status).map_err(Failure::started),
        }
    }
}

/// The end of the request pump, for the exchange: the client's failures end it; the backend's
/// do not, since a backend may answer without reading the whole request and reset that half of
/// the stream (RFC 9113 §8.1) — its answer, or the lack of one, tells how the exchange went.
fn client_side(pumped: Result<(), Failure>) -> Result<(), Failure> {
    match pumped {
        Err(f) if f.error.side() != crate::error::Side::Upstream => Err(f),
        _ => Ok(()),
    }
}

/// Sets the route's request fields, the external auth service's and the client certificate's on
/// `fields`: each replaces the client's, and an empty value removes it (basic auth's `Authorization`). The upstream
/// `Host` is the authority, not a field: `upstream-vhost` is not applied here, nor is the HTTP/1.1
/// `Connection`.
fn set_fields(fields: &mut http::HeaderMap, extras: &RouteExtras<'_>) {
    let route = extras.filters.into_iter().flat_map(|p| p.filters.iter()).filter_map(|f| match f {
        // HTTP/2 has no `Connection` (`connection-proxy-header` is for HTTP/1.1 backends).
        ramjet_shared::Filter::SetRequestHeader { name, value } if &**name != "host" && &**name != "connection" => {
            Some((&**name, value.as_bytes()))
        }
        _ => None,
    });
    for (name, value) in route.chain(extras.upstream_fields()) {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else { continue };
        fields.remove(&name);
        if let Ok(value) = HeaderValue::from_bytes(value) {
            if !value.is_empty() {
                fields.insert(name, value);
            }
        }
    }
}

/// Where the upstream request points: its `:authority` and `:path` (the routed host and the
/// client's target, or the rule's rewrite of them), and the client's host for `x-forwarded-host`.
struct Upstream<'a> {
    authority: &'a str,
    target: &'a PathAndQuery,
    forwarded_host: &'a str,
}

/// The request for the backend: the client's method and fields, the `:authority` and `:path` of
/// `to`, the forwarded fields ramjet writes (a client's own `x-forwarded-*` and `x-real-ip` are
/// dropped, as on HTTP/1.1) and the request id (the client's own when it sent one).
fn upstream_request(
    parts: &Parts,
    to: &Upstream<'_>,
    (facts, client): (&ConnFacts, Option<SocketAddr>),
    id: &RequestId,
) -> Result<Request<()>, ProxyError> {
    let uri = Uri::builder()
        .scheme("http")
        .authority(to.authority)
        .path_and_query(to.target.clone())
        .build()
        .map_err(|_| ProxyError::BadRequest("invalid :path"))?;
    let mut request = Request::new(());
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = uri;
    let fields = request.headers_mut();
    for (name, value) in &parts.headers {
        let n = name.as_str();
        let ours = n.starts_with("x-forwarded-") || n.starts_with("x-original-forwarded-");
        if name == HOST || ours || n == "x-real-ip" || n == "x-scheme" || n == X_REQUEST_ID {
            continue;
        }
        fields.append(name.clone(), value.clone());
    }
    // The forwarded lines (rendered once per connection unless address rules apply to it):
    // `name: value\r\n` each.
    let mut rendered = Vec::new();
    let originals = parts.headers.contains_key("x-forwarded-for") || parts.headers.contains_key("x-forwarded-host");
    let lines = match (facts.rules.is_some(), originals) {
        (false, false) => &facts.forwarded[..],
        (trusted_or_full, _) => {
            if trusted_or_full {
                push_address_lines(&mut rendered, facts, client, values(&parts.headers));
            } else {
                rendered.extend_from_slice(&facts.forwarded);
            }
            if originals {
                push_originals(&mut rendered, values(&parts.headers));
            }
            &rendered[..]
        }
    };
    for line in lines.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(line[colon + 1..].trim_ascii()))
        {
            fields.append(name, value);
        }
    }
    if let Ok(value) = HeaderValue::from_str(to.forwarded_host) {
        fields.append("x-forwarded-host", value);
    }
    if let Ok(value) = HeaderValue::from_bytes(id.as_bytes()) {
        fields.insert(X_REQUEST_ID, value);
    }
    // A traced request: ramjet's span is the upstream's parent (the client's field is replaced).
    if let Some(traceparent) = id.trace.traceparent() {
        if let Ok(value) = HeaderValue::from_bytes(&traceparent) {
            fields.insert("traceparent", value);
        }
    }
    Ok(request)
}

/// `grpc-timeout`: up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
pub(crate) fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.as_bytes();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The client's body and trailers, to the backend.
async fn pump_request(
    worker: &Worker,
    body: &mut RecvStream,
    mut up: SendStream<Bytes>,
    sent: &Cell<u64>,
) -> Result<(), Failure> {
    let settings = &worker.settings;
    loop {
        let piece = match worker.timeout(settings.client_body_timeout, body.data()).await {
            Err(_) => return Err(ProxyError::BodyTimeout.into()),
            Ok(None) => break,
            Ok(Some(Ok(piece))) => piece,
            Ok(Some(Err(_))) => return Err(ProxyError::ClientGone.into()),
        };
        let len = piece.len();
        send_bytes(&worker.coarse_timer, &mut up, piece, false, settings.upstream_timeout, Deadline::NONE)
            .await
            .map_err(|e| match e {
                Stalled::Gone => Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset)),
                Stalled::Timeout | Stalled::Deadline => Failure::from(ProxyError::Upstream(UpstreamErrorKind::Timeout)),
            })?;
        sent.set(sent.get() + len as u64);
        // Taken by the backend's window: the client may send that much more.
        let _ = body.flow_control().release_capacity(len);
    }
    let trailers = match worker.timeout(settings.client_body_timeout, body.trailers()).await {
        Err(_) => return Err(ProxyError::BodyTimeout.into()),
        Ok(Err(_)) => return Err(ProxyError::ClientGone.into()),
        Ok(Ok(trailers)) => trailers,
    };
    let sent = match trailers {
        Some(trailers) => up.send_trailers(trailers),
        None => up.send_data(Bytes::new(), true),
    };
    sent.map_err(|_| Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset)))
}

/// The backend's body and trailers, to the client.
async fn relay_response(
    worker: &Worker,
    up_body: &mut RecvStream,
    client: &mut SendStream<Bytes>,
    sent: &Cell<u64>,
) -> Result<(), Failure> {
    let settings = &worker.settings;
    loop {
        let next = monoio::select! {
            r = worker.timeout(settings.upstream_timeout, up_body.data()) => r,
            _ = poll_fn(|cx| client.poll_reset(cx)) => return Err(ProxyError::ClientGone.into()),
        };
        let piece = match next {
            Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
            Ok(None) => break,
            Ok(Some(Ok(piece))) => piece,
            Ok(Some(Err(_))) => return Err(ProxyError::Upstream(UpstreamErrorKind::Reset).into()),
        };
        let len = piece.len();
        send_bytes(&worker.coarse_timer, client, piece, false, settings.client_write_timeout, Deadline::NONE)
            .await
            .map_err(|e| match e {
                Stalled::Gone => Failure::from(ProxyError::ClientGone),
                Stalled::Timeout | Stalled::Deadline => Failure::from(ProxyError::ClientWriteTimeout),
            })?;
        sent.set(sent.get() + len as u64);
        let _ = up_body.flow_control().release_capacity(len);
    }
    let trailers = match worker.timeout(settings.upstream_timeout, up_body.trailers()).await {
        Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
        Ok(Err(_)) => return Err(ProxyError::Upstream(UpstreamErrorKind::Reset).into()),
        Ok(Ok(trailers)) => trailers,
    };
    let sent = match trailers {
        Some(trailers) => client.send_trailers(trailers),
        None => client.send_data(Bytes::new(), true),
    };
    sent.map_err(|_| Failure::from(ProxyError::ClientGone))
}

/// Why a send did not finish: the peer reset the stream (or is gone), or its window stayed shut
/// (for the wait's own timeout, or until the exchange's deadline).
pub(crate) enum Stalled {
    Gone,
    Timeout,
    Deadline,
}

/// Sends `data` as the peer's window allows, waiting at most `wait` (and what is left of `until`)
/// each time for it to open.
pub(crate) async fn send_bytes(
    timer: &CoarseTimer,
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    wait: Duration,
    until: Deadline,
) -> Result<(), Stalled> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let capacity = loop {
            let capacity = send.capacity();
            if capacity > 0 {
                break capacity;
            }
            let (wait, cut) = until.clamp(wait);
            match crate::base::watchdog::timeout(timer, wait, poll_fn(|cx| send.poll_capacity(cx))).await {
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) => return Err(Stalled::Gone),
                Err(_) if cut => return Err(Stalled::Deadline),
                Err(_) => return Err(Stalled::Timeout),
            }
        };
        let piece = data.split_to(capacity.min(data.len()));
        send.send_data(piece, end && data.is_empty()).map_err(|_| Stalled::Gone)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse() {
        let t = |v: &'static str| {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-timeout", HeaderValue::from_static(v));
            grpc_timeout(&h)
        };
        assert_eq!(t("200m"), Some(Duration::from_millis(200)));
        assert_eq!(t("3S"), Some(Duration::from_secs(3)));
        assert_eq!(t("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(t("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["m", "123456789m", "10x", "-1S", "1.5S"] {
            assert_eq!(t(bad), None, "{bad}");
        }
    }
}
