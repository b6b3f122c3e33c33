//! HTTP/1.x clients of a backend that speaks HTTP/2 (`H2C`, `GRPC`, `GRPCS`): each request becomes a
//! stream on the worker's multiplexed connection to the endpoint ([`crate::upstream::h2::H2Pool`]), and
//! the answer goes back to the client as an HTTP/1.1 response.
//!
//! The request carries the fields ramjet wrote into the upstream HTTP/1.1 head (forwarded fields,
//! the request id, the route's edits), re-read as HTTP/2 fields: `Host` becomes `:authority`, and
//! the connection-specific fields HTTP/2 forbids are left out. The body goes as DATA frames with
//! its HTTP/1.1 framing stripped, as the backend's flow-control window allows.
//!
//! **Framing is ramjet's**, both ways. Towards the client a response is delimited by the backend's
//! `content-length` when it sent one (the connection closes if the DATA frames disagree), else
//! chunked, with the backend's trailers as the chunked trailer section, else (an HTTP/1.0 client)
//! by closing. HTTP/2 frames every stream on its own, so nothing one client sends can reach another
//! client's stream on the shared connection.
//!
//! A backend may answer before it has read the whole request body: its answer is relayed, the rest
//! of the body is not read, and the client connection closes after the answer.

use std::cell::Cell;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use h2::{RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, TE};
use http::{Request, Uri};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use ramjet_shared::{UpstreamErrorKind, UpstreamTls};

use super::conn::{ClientConn, Next};
use super::respond::{body_error, finish_response_head};
use crate::base::coarse_timer::CoarseTimer;
use crate::base::deadline::Deadline;
use crate::codec::http1::body::Body;
use crate::codec::http1::head::{no_headers, push_decimal, push_framing, ContentLength, RequestHead, ResponsePlan};
use crate::codec::http1::Framing;
use crate::error::{Failure, ProxyError};
use crate::pipeline::route::{RouteExtras, Timeouts};
use crate::server::http2::relay::{grpc_timeout, send_bytes, Stalled};
use crate::upstream::h2::OpenStream;

/// Where the request goes, and how much of its body is buffered.
pub(super) struct Target<'a> {
    pub addr: SocketAddr,
    pub tls: Option<&'a UpstreamTls>,
    /// `Some(len)`: the whole body is the first `len` bytes of the client buffer (as the client
    /// framed it); `None`: it is streamed as it arrives.
    pub buffered: Option<usize>,
}

/// Proxies the request whose upstream head is in `conn.out` over HTTP/2 to `to`. Returns the
/// status sent and what to do with the client connection.
pub(super) async fn forward<S>(
    conn: &mut ClientConn<'_, S>,
    head: &RequestHead,
    to: Target<'_>,
    plan: ResponsePlan,
    extras: &RouteExtras<'_>,
    timeouts: Timeouts,
) -> Result<(u16, Next), Failure>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let worker = conn.worker;
    let Target { addr, tls, buffered } = to;
    let first = upstream_request(&conn.out, tls.is_some())?;
    let grpc = crate::codec::grpc::is_grpc(first.headers());
    // The client's gRPC deadline and the rule's, whichever ends first, bound the wait for the head.
    let grpc_deadline = if grpc { grpc_timeout(first.headers()) } else { None };
    let deadline = grpc_deadline.into_iter().chain(timeouts.deadline).min();
    // The buffered body without its HTTP/1.1 framing.
    let body = buffered.map(|len| payload(head.body, &conn.buf.data()[..len]));
    let end = matches!(&body, Some(b) if b.is_empty());
    conn.tally.upstream = Some(addr);
    let started = Instant::now();
    let first = Cell::new(Some(first));
    let out = &conn.out;
    let request = || first.take().map_or_else(|| upstream_request(out, tls.is_some()), Ok);
    let opened = worker.h2_pool.open_stream(addr, tls, worker.dial(timeouts.connect), request, end).await;
    let OpenStream { response, send, held: _held, connect, retried } = opened.map_err(|f| f.at(addr))?;
    if retried {
        worker.counters().upstream_retry();
    }
    conn.tally.upstream_connect = Some(connect);

    // The body goes up while the answer is awaited: a backend may answer first.
    let wait = deadline.map_or(timeouts.read, |d| d.min(timeouts.read));
    let mut streamed = 0;
    let response = {
        let mut pumped = end;
        let mut pump = pin!(send_body(conn, head.body, body, send, extras.max_body(), timeouts.send));
        let mut answer = pin!(worker.timeout(wait, response));
        loop {
            monoio::select! {
                sent = &mut pump, if !pumped => {
                    pumped = true;
                    match sent {
                        Ok(n) => streamed = n,
                        // The backend's side of the failure shows in its answer, or in the lack of one.
                        Err(f) if f.error.side() == crate::error::Side::Upstream => {}
                        Err(f) => return Err(f.at(addr)),
                    }
                }
                r = &mut answer => break r,
            }
        }
    };
    let response = match response {
        Err(_) => return Err(Failure::from(ProxyError::Upstream(UpstreamErrorKind::Timeout)).at(addr)),
        Ok(Err(e)) if e.is_io() || e.is_go_away() => return Err(worker.h2_pool.failed(addr, tls).at(addr)),
        Ok(Err(_)) => return Err(Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset)).at(addr)),
        Ok(Ok(response)) => response,
    };
    conn.tally.upstream_header = Some(started.elapsed());
    conn.tally.upstream_status = Some(response.status().as_u16());
    conn.tally.bytes_in += streamed;
    if let Some(len) = buffered {
        conn.buf.consume(len);
        conn.tally.bytes_in += len as u64;
        conn.body_pending = false;
    }

    let (parts, mut up_body) = response.into_parts();
    let status = parts.status.as_u16();
    // A body the client is still sending (the backend answered early) is not read: close after.
    let keep = plan.keep_alive && !conn.body_pending;
    let (framing, keep_client) = client_head(&parts, up_body.is_end_stream(), &plan, keep, &mut conn.out);
    finish_response_head(conn, extras, status);
    // From here the status is the one the client was sent, whatever happens to the body.
    conn.status = status;
    let relayed = relay_body(conn, &mut up_body, framing, timeouts.read).await;
    let complete = relayed.map_err(|f| f.at(addr).started())?;
    let next = if keep_client && complete { Next::KeepAlive } else { Next::Close };
    Ok((status, next))
}

/// The HTTP/2 request for the upstream HTTP/1.1 head ramjet wrote (`out`): its method, target and
/// fields, `Host` as the authority, without the fields HTTP/2 forbids (RFC 9113 §8.2.2). A gRPC
/// request gets `te: trailers`, which gRPC requires and HTTP/1.1 clients do not send.
fn upstream_request(out: &[u8], tls: bool) -> Result<Request<()>, ProxyError> {
    let invalid = ProxyError::BadRequest("request not expressible in HTTP/2");
    let mut headers = no_headers();
    let mut head = httparse::Request::new(&mut []);
    if !matches!(head.parse_with_uninit_headers(out, &mut headers), Ok(httparse::Status::Complete(_))) {
        return Err(invalid);
    }
    let mut host = "";
    let mut request = Request::new(());
    let fields = request.headers_mut();
    for h in head.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"host") {
            host = std::str::from_utf8(h.value).map_err(|_| invalid)?;
            continue;
        }
        if is_connection_specific(name) {
            continue;
        }
        let name = HeaderName::from_bytes(name).map_err(|_| invalid)?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| invalid)?;
        fields.append(name, value);
    }
    if crate::codec::grpc::is_grpc(fields) {
        fields.insert(TE, HeaderValue::from_static("trailers"));
    }
    *request.method_mut() = head.method.unwrap_or("GET").parse().map_err(|_| invalid)?;
    let target = head.path.unwrap_or("/");
    *request.uri_mut() = Uri::builder()
        .scheme(if tls { "https" } else { "http" })
        .authority(host)
        .path_and_query(target)
        .build()
        .map_err(|_| invalid)?;
    Ok(request)
}

/// Fields of an HTTP/1.1 head that have no place in HTTP/2: the connection's own, and the framing
/// that DATA frames replace (a `content-length` stays: HTTP/2 allows it, and it matches the body).
fn is_connection_specific(name: &[u8]) -> bool {
    let eq = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
    eq("connection")
        || eq("keep-alive")
        || eq("proxy-connection")
        || eq("transfer-encoding")
        || eq("upgrade")
        || eq("te")
        || eq("http2-settings")
}

/// The payload of a body that is all in `framed`, as the client framed it.
fn payload(framing: Framing, framed: &[u8]) -> Bytes {
    match framing {
        Framing::Chunked => {
            let mut payload = BytesMut::with_capacity(framed.len());
            // Validated when it was buffered.
            let _ = Body::new(framing).advance(framed, |a, b| payload.extend_from_slice(&framed[a..b]));
            payload.freeze()
        }
        _ => Bytes::copy_from_slice(framed),
    }
}

/// Sends the request body up: `buffered` (its payload) when the whole body was read already, else
/// the body as it arrives from the client, with its framing stripped and within the route's
/// `limit`. Returns the body bytes read from the client while streaming.
async fn send_body<S>(
    conn: &mut ClientConn<'_, S>,
    framing: Framing,
    buffered: Option<Bytes>,
    mut up: SendStream<Bytes>,
    limit: Option<u64>,
    wait: Duration,
) -> Result<u64, Failure>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    if let Some(payload) = buffered {
        return send_piece(&conn.worker.coarse_timer, &mut up, payload, true, wait).await.map(|_| 0);
    }
    let mut body = Body::with_limit(framing, limit);
    let mut read = 0u64;
    loop {
        let data = conn.buf.data();
        let mut piece = BytesMut::new();
        let n = body
            .advance(data, |a, b| piece.extend_from_slice(&data[a..b]))
            .map_err(|why| Failure::from(body_error(why)))?;
        if framing != Framing::Chunked {
            piece.extend_from_slice(&data[..n]);
        }
        conn.buf.consume(n);
        read += n as u64;
        let done = body.is_done();
        send_piece(&conn.worker.coarse_timer, &mut up, piece.freeze(), done, wait).await?;
        if done {
            conn.body_pending = false;
            return Ok(read);
        }
        conn.fill_body().await?;
    }
}

/// Sends `data` (which may be empty) on the request's stream, ending it when `end`.
async fn send_piece(
    timer: &CoarseTimer,
    up: &mut SendStream<Bytes>,
    data: Bytes,
    end: bool,
    wait: Duration,
) -> Result<(), Failure> {
    let upstream = |kind| Failure::from(ProxyError::Upstream(kind));
    if data.is_empty() {
        if end {
            up.send_data(data, true).map_err(|_| upstream(UpstreamErrorKind::Reset))?;
        }
        return Ok(());
    }
    send_bytes(timer, up, data, end, wait, Deadline::NONE).await.map_err(|stalled| match stalled {
        Stalled::Gone => upstream(UpstreamErrorKind::Reset),
        Stalled::Timeout | Stalled::Deadline => upstream(UpstreamErrorKind::Timeout),
    })
}

/// Writes the client's HTTP/1.1 response head for the backend's `response` into `out`. Returns the
/// framing of the body that follows and whether the client connection may stay open (`keep`
/// permitting). A HEAD or 304 answer keeps the length the backend gave; 1xx and 204 carry none.
fn client_head(
    response: &http::response::Parts,
    end_of_stream: bool,
    plan: &ResponsePlan,
    keep: bool,
    out: &mut Vec<u8>,
) -> (Framing, bool) {
    let status = response.status.as_u16();
    let mut length = ContentLength::default();
    let valid = response.headers.get_all(CONTENT_LENGTH).iter().all(|v| length.add(v.as_bytes()));
    let length = if valid { length.0 } else { None };
    let bodiless = plan.is_head || status == 204 || status == 304 || status < 200;
    let (framing, advertised) = if bodiless {
        let advertised = if status == 204 || status < 200 { None } else { length };
        (Framing::None, advertised.map_or(Framing::None, Framing::Length))
    } else if end_of_stream {
        (Framing::None, Framing::Length(0))
    } else if let Some(n) = length {
        (Framing::Length(n), Framing::Length(n))
    } else if plan.client_minor == 0 {
        (Framing::UntilClose, Framing::None)
    } else {
        (Framing::Chunked, Framing::Chunked)
    };
    let keep_client = keep && framing != Framing::UntilClose;
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    push_decimal(out, status.into());
    out.push(b' ');
    out.extend_from_slice(response.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &response.headers {
        // ramjet writes the framing and returns the request's id itself.
        if name == CONTENT_LENGTH || name.as_str() == "x-request-id" || is_connection_specific(name.as_ref()) {
            continue;
        }
        push_field(out, name, value);
    }
    push_framing(out, advertised);
    if !keep_client {
        out.extend_from_slice(b"connection: close\r\n");
    } else if plan.client_minor == 0 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (framing, keep_client)
}

fn push_field(out: &mut Vec<u8>, name: &HeaderName, value: &HeaderValue) {
    out.extend_from_slice(name.as_str().as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Writes the head in `conn.out` and relays the backend's body (and, chunked, its trailers) in
/// `framing`. `Ok(true)` when the body ended as framed, so the client connection can carry another
/// request.
async fn relay_body<S>(
    conn: &mut ClientConn<'_, S>,
    up_body: &mut RecvStream,
    framing: Framing,
    read: Duration,
) -> Result<bool, Failure>
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let reset = || Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset));
    let timeout = || Failure::from(ProxyError::Upstream(UpstreamErrorKind::Timeout));
    if framing == Framing::None {
        conn.tally.bytes_out += conn.out.len() as u64;
        conn.write_out().await?;
        return Ok(true);
    }
    let mut remaining = if let Framing::Length(n) = framing { n } else { u64::MAX };
    loop {
        // The head goes with the first piece of the body.
        let piece = match conn.watch.bound(read, up_body.data()).await {
            Err(_) => return Err(timeout()),
            Ok(None) => break,
            Ok(Some(Err(_))) => return Err(reset()),
            Ok(Some(Ok(piece))) => piece,
        };
        let len = piece.len();
        if len as u64 > remaining {
            // More than the backend's own content-length: the client's framing would break.
            return Err(Failure::from(ProxyError::Upstream(UpstreamErrorKind::Protocol)));
        }
        if framing == Framing::Chunked {
            if len == 0 {
                continue;
            }
            push_hex(&mut conn.out, len);
            conn.out.extend_from_slice(b"\r\n");
            conn.out.extend_from_slice(&piece);
            conn.out.extend_from_slice(b"\r\n");
        } else {
            remaining -= len as u64;
            conn.out.extend_from_slice(&piece);
        }
        conn.tally.bytes_out += conn.out.len() as u64;
        conn.write_out().await?;
        conn.out.clear();
        let _ = up_body.flow_control().release_capacity(len);
    }
    match framing {
        Framing::Chunked => {
            let trailers = match conn.watch.bound(read, up_body.trailers()).await {
                Err(_) => return Err(timeout()),
                Ok(Err(_)) => return Err(reset()),
                Ok(Ok(trailers)) => trailers,
            };
            conn.out.extend_from_slice(b"0\r\n");
            for (name, value) in trailers.iter().flatten() {
                push_field(&mut conn.out, name, value);
            }
            conn.out.extend_from_slice(b"\r\n");
            conn.tally.bytes_out += conn.out.len() as u64;
            conn.write_out().await?;
            Ok(true)
        }
        Framing::Length(_) if !conn.out.is_empty() => {
            // The body was empty: the head is still to be written.
            conn.tally.bytes_out += conn.out.len() as u64;
            conn.write_out().await?;
            Ok(remaining == 0)
        }
        Framing::Length(_) => Ok(remaining == 0),
        _ => {
            if !conn.out.is_empty() {
                conn.tally.bytes_out += conn.out.len() as u64;
                conn.write_out().await?;
            }
            Ok(false)
        }
    }
}

/// Appends `n` in lower-case hexadecimal (a chunk size).
fn push_hex(out: &mut Vec<u8>, n: usize) {
    let digits = (usize::BITS - n.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[(n >> (i * 4)) & 0xf]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_hexadecimal() {
        for (n, want) in [(0, "0"), (1, "1"), (15, "f"), (16, "10"), (16384, "4000"), (0xabc, "abc")] {
            let mut out = Vec::new();
            push_hex(&mut out, n);
            assert_eq!(out, want.as_bytes(), "{n}");
        }
    }

    #[test]
    fn the_upstream_head_becomes_an_http2_request_without_connection_fields() {
        let head = b"POST /pkg.Svc/Call?x=1 HTTP/1.1\r\nhost: api.example\r\ncontent-type: application/grpc\r\n\
                     transfer-encoding: chunked\r\nconnection: upgrade\r\nupgrade: websocket\r\nx-forwarded-for: 10.0.0.1\r\n\r\n";
        let request = upstream_request(head, false).unwrap();
        assert_eq!(request.method(), http::Method::POST);
        assert_eq!(request.uri().to_string(), "http://api.example/pkg.Svc/Call?x=1");
        let fields = request.headers();
        for gone in ["host", "transfer-encoding", "connection", "upgrade"] {
            assert!(!fields.contains_key(gone), "{gone}");
        }
        assert_eq!(fields["te"], "trailers");
        assert_eq!(fields["x-forwarded-for"], "10.0.0.1");
        let tls = upstream_request(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n", true).unwrap();
        assert_eq!(tls.uri().to_string(), "https://a/");
        assert!(!tls.headers().contains_key("te"));
    }

    #[test]
    fn the_client_head_frames_the_body_as_ramjet_relays_it() {
        let head = |status: u16, length: Option<&str>, end: bool, minor: u8, is_head: bool| {
            let mut response = http::Response::builder().status(status);
            if let Some(l) = length {
                response = response.header("content-length", l);
            }
            let (parts, ()) = response.header("x-request-id", "theirs").body(()).unwrap().into_parts();
            let plan = ResponsePlan { is_head, client_minor: minor, keep_alive: true };
            let mut out = Vec::new();
            let (framing, keep) = client_head(&parts, end, &plan, true, &mut out);
            (framing, keep, String::from_utf8(out).unwrap())
        };
        let (f, keep, text) = head(200, Some("5"), false, 1, false);
        assert_eq!((f, keep), (Framing::Length(5), true));
        assert_eq!(text, "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n");
        let (f, _, text) = head(200, None, false, 1, false);
        assert_eq!(f, Framing::Chunked);
        assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
        let (f, keep, text) = head(200, None, false, 0, false);
        assert_eq!((f, keep), (Framing::UntilClose, false));
        assert!(text.contains("connection: close\r\n") && !text.contains("chunked"), "{text}");
        let (f, _, text) = head(200, None, true, 1, false);
        assert_eq!(f, Framing::None);
        assert!(text.contains("content-length: 0\r\n"), "{text}");
        let (f, _, text) = head(200, Some("42"), true, 1, true);
        assert_eq!(f, Framing::None);
        assert!(text.contains("content-length: 42\r\n"), "{text}");
        let (f, _, text) = head(204, Some("3"), true, 1, false);
        assert_eq!(f, Framing::None);
        assert!(!text.contains("content-length"), "{text}");
        // Conflicting lengths are not trusted: chunked instead.
        let (f, _, _) = head(200, Some("1, 2"), false, 1, false);
        assert_eq!(f, Framing::Chunked);
    }
}
