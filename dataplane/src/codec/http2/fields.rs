//! Heads across the protocol boundary: the HTTP/1.1 request head ramjet writes upstream for an
//! HTTP/2 request, and the HTTP/2 response fields for an HTTP/1.1 response head. The same rule as
//! for HTTP/1.1 clients holds: **framing is ramjet's** — `Host`, `Content-Length` and
//! `Transfer-Encoding` upstream are written from what ramjet parsed, never copied.

use std::net::SocketAddr;

use http::header::{HeaderName, HeaderValue, ValueIter, CONTENT_LENGTH, COOKIE, HOST};
use http::request::Parts;
use http::{HeaderMap, Method, Response, StatusCode};

use crate::codec::forwarded::{forwarded_host, push_forwarded, push_originals};
use crate::codec::http1::head::{
    ensure, inspect, is_consumed_request, no_headers, push_framing, valid_host, ContentLength, ResponseHead,
};
use crate::codec::http1::Framing;
use crate::conn::ConnFacts;
use crate::error::ProxyError;

/// The host a stream is routed by and forwarded with: `:authority`, else the `Host` field
/// (RFC 9113 §8.3.1), validated as HTTP/1.1's is.
pub(crate) fn host(parts: &Parts) -> Result<&str, ProxyError> {
    let host = match parts.uri.authority() {
        Some(authority) => authority.as_str(),
        None => match parts.headers.get(HOST).map(|h| h.to_str()) {
            Some(Ok(h)) => h.trim(),
            Some(Err(_)) => return Err(ProxyError::BadRequest("invalid Host")),
            None => return Err(ProxyError::BadRequest("missing :authority and Host")),
        },
    };
    ensure(valid_host(host.as_bytes()), ProxyError::BadRequest("invalid Host"))?;
    Ok(host)
}

/// The values of a stream's fields of one (lower-case) name, as `codec::forwarded` reads them.
pub(crate) type Values<'a> = std::iter::Map<ValueIter<'a, HeaderValue>, fn(&'a HeaderValue) -> &'a [u8]>;

/// Finds a stream's fields by name, for `codec::forwarded`.
pub(crate) fn values<'a>(headers: &'a HeaderMap) -> impl Fn(&str) -> Values<'a> + Copy + 'a {
    move |name| headers.get_all(name).iter().map(HeaderValue::as_bytes as fn(&HeaderValue) -> &[u8])
}

/// Writes the HTTP/1.1 head for `parts` into `out` and returns the framing of the body that
/// follows: the client's `content-length` when it gave one, none when the stream ended with its
/// headers, else chunked. Connection-specific and proxy-written fields are dropped (as for
/// HTTP/1.1 clients); `cookie` fields, which HTTP/2 may split, are joined (RFC 9113 §8.2.3).
/// `client` is the client the stream's fields named (`None`: the connection's peer).
pub(crate) fn upstream_head(
    parts: &Parts,
    host: &str,
    (facts, client): (&ConnFacts, Option<SocketAddr>),
    end_of_stream: bool,
    out: &mut Vec<u8>,
) -> Result<Framing, ProxyError> {
    if parts.method == Method::CONNECT {
        return Err(ProxyError::BadRequest("CONNECT is not supported"));
    }
    let mut content_length = ContentLength::default();
    for value in parts.headers.get_all(CONTENT_LENGTH) {
        ensure(content_length.add(value.as_bytes()), ProxyError::BadRequest("invalid or conflicting Content-Length"))?;
    }
    let body = match content_length.0 {
        Some(n) => Framing::Length(n),
        None if end_of_stream => Framing::None,
        None => Framing::Chunked,
    };
    out.clear();
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    match parts.uri.path_and_query() {
        Some(target) if !target.as_str().is_empty() => out.extend_from_slice(target.as_str().as_bytes()),
        _ => out.push(b'/'),
    }
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    // Behind a trusted proxy, the host its client asked for (ingress-nginx's `$best_http_host`).
    let upstream_host = match facts.trusted_fields {
        true => forwarded_host(facts, values(&parts.headers)).unwrap_or(host.as_bytes()),
        false => host.as_bytes(),
    };
    out.extend_from_slice(upstream_host);
    out.extend_from_slice(b"\r\n");
    let mut cookies = 0;
    for (name, value) in &parts.headers {
        if name == COOKIE {
            cookies += 1;
            continue;
        }
        if is_consumed_request(name.as_str().as_bytes()) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if cookies > 0 {
        out.extend_from_slice(b"cookie: ");
        for (i, value) in parts.headers.get_all(COOKIE).iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(value.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    push_framing(out, body);
    push_forwarded(out, facts, client, values(&parts.headers), host.as_bytes());
    if parts.headers.contains_key("x-forwarded-for") || parts.headers.contains_key("x-forwarded-host") {
        push_originals(out, values(&parts.headers));
    }
    out.extend_from_slice(b"\r\n");
    Ok(body)
}

/// Parses an upstream response head (`Ok(None)`: incomplete) into the HTTP/2 response for it: the
/// status, the fields that pass (hop-by-hop and framing fields dropped, as for HTTP/1.1 clients),
/// and `content-length` when the length is known. Interim 1xx heads come back without fields.
pub(crate) fn response_head(data: &[u8], is_head: bool) -> Result<Option<(ResponseHead, Response<()>)>, ProxyError> {
    let mut headers = no_headers();
    let Some(inspected) = inspect(data, is_head, &mut headers)? else { return Ok(None) };
    let head = inspected.head.clone();
    let mut response = Response::new(());
    if (100..200).contains(&head.status) {
        return Ok(Some((head, response)));
    }
    *response.status_mut() = StatusCode::from_u16(head.status)
        .map_err(|_| ProxyError::Upstream(ramjet_shared::UpstreamErrorKind::Protocol))?;
    let fields = response.headers_mut();
    for field in inspected.fields() {
        // A field HTTP/2 cannot carry (a name with upper case is folded, not refused) is dropped.
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(field.name.as_bytes()), HeaderValue::from_bytes(field.value))
        {
            fields.append(name, value);
        }
    }
    if let Framing::Length(n) = inspected.advertised(is_head) {
        fields.insert(CONTENT_LENGTH, HeaderValue::from(n));
    }
    Ok(Some((head, response)))
}

/// The chunk-size line of a chunked request body piece.
pub(crate) fn push_chunk_size(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}
