//! Heads across the protocol boundary: the HTTP/1.1 request head ramjet writes upstream for an
//! HTTP/2 request, and the HTTP/2 response fields for an HTTP/1.1 response head. The same rule as
//! for HTTP/1.1 clients holds: **framing is ramjet's** — `Host`, `Content-Length` and
//! `Transfer-Encoding` upstream are written from what ramjet parsed, never copied.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, DATE, HOST, LOCATION};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use ramjet_shared::{DirectResponse, Redirect};

use crate::error::{canned, ProxyError};
use crate::http1::head::{
    ensure, inspect, is_consumed_request, push_forwarded, push_framing, valid_host, ContentLength, ResponseHead,
    MAX_HEADERS,
};
use crate::http1::{ConnFacts, Framing};

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

/// Writes the HTTP/1.1 head for `parts` into `out` and returns the framing of the body that
/// follows: the client's `content-length` when it gave one, none when the stream ended with its
/// headers, else chunked. Connection-specific and proxy-written fields are dropped (as for
/// HTTP/1.1 clients); `cookie` fields, which HTTP/2 may split, are joined (RFC 9113 §8.2.3).
pub(crate) fn upstream_head(
    parts: &Parts,
    host: &str,
    facts: &ConnFacts,
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
    out.extend_from_slice(host.as_bytes());
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
    push_forwarded(out, facts, host.as_bytes());
    out.extend_from_slice(b"\r\n");
    Ok(body)
}

/// Parses an upstream response head (`Ok(None)`: incomplete) into the HTTP/2 response for it: the
/// status, the fields that pass (hop-by-hop and framing fields dropped, as for HTTP/1.1 clients),
/// and `content-length` when the length is known. Interim 1xx heads come back without fields.
pub(crate) fn response_head(data: &[u8], is_head: bool) -> Result<Option<(ResponseHead, Response<()>)>, ProxyError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
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

/// An answer ramjet writes itself, as HTTP/2: the status, its fields and its body.
pub(crate) enum Answer<'a> {
    /// An error status from [`crate::error::rescue`] (404 included).
    Status(u16),
    /// `308` to the same host and target over HTTPS.
    HttpsRedirect { host: &'a str, target: &'a str },
    /// A route's configured response.
    Direct(&'a DirectResponse),
    /// `302` to `<scheme>://<host><path>` (ingress-nginx's `app-root`).
    AppRoot { https: bool, host: &'a str, path: &'a str },
    /// `308` to another host (`from-to-www-redirect`).
    HostRedirect { https: bool, host: &'a str, port: u16, target: &'a str },
    /// `204` to a CORS preflight.
    CorsPreflight { cors: &'a ramjet_shared::Cors, allow: &'a [u8] },
    /// `401` with a basic-auth challenge and the route's CORS fields.
    Unauthorized { challenge: &'a [u8], cors: Option<(&'a ramjet_shared::Cors, &'a [u8])> },
    /// `302` to a location built for this request (external auth's sign-in page).
    Found { location: &'a [u8] },
    /// A rule's redirect, built from the request (`tls`: how it came, its `Host` and target;
    /// `scratch`: the worker's rewrite memory).
    Redirect {
        redirect: &'a Redirect,
        tls: bool,
        host: &'a str,
        target: &'a str,
        scratch: &'a std::cell::RefCell<ramjet_shared::RewriteScratch>,
    },
}

impl Answer<'_> {
    /// The response head (with a `date`) and the body.
    pub fn render(&self, date: &[u8]) -> (Response<()>, Bytes) {
        let mut response = Response::new(());
        let fields = response.headers_mut();
        let (status, body) = match self {
            Answer::Status(status) => {
                let (_, body) = canned(*status);
                fields.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                fields.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
                (*status, Bytes::from_static(body.as_bytes()))
            }
            Answer::HttpsRedirect { host, target } => {
                let mut location = Vec::with_capacity(8 + host.len() + target.len());
                location.extend_from_slice(b"https://");
                location.extend_from_slice(host.as_bytes());
                location.extend_from_slice(if target.is_empty() { b"/" } else { target.as_bytes() });
                if let Ok(location) = HeaderValue::from_bytes(&location) {
                    fields.insert(LOCATION, location);
                }
                fields.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
                (308, Bytes::new())
            }
            Answer::AppRoot { https, host, path } => {
                let scheme = if *https { "https://" } else { "http://" };
                if let Ok(location) = HeaderValue::from_str(&format!("{scheme}{host}{path}")) {
                    fields.insert(LOCATION, location);
                }
                fields.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
                (302, Bytes::new())
            }
            Answer::HostRedirect { https, host, port, target } => {
                let mut location = Vec::with_capacity(16 + host.len() + target.len());
                crate::dispatch::host_redirect_location(*https, host, *port, target.as_bytes(), &mut location);
                if let Ok(location) = HeaderValue::from_bytes(&location) {
                    fields.insert(LOCATION, location);
                }
                fields.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
                (308, Bytes::new())
            }
            Answer::Found { location } => {
                if let Ok(location) = HeaderValue::from_bytes(location) {
                    fields.insert(LOCATION, location);
                }
                fields.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
                (302, Bytes::new())
            }
            Answer::Redirect { redirect, tls, host, target, scratch } => {
                let mut location = Vec::with_capacity(16 + host.len() + target.len());
                redirect.location(*tls, host, target, scratch, &mut location);
                if let Ok(location) = HeaderValue::from_bytes(&location) {
                    fields.insert(LOCATION, location);
                }
                fields.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
                (redirect.status(), Bytes::new())
            }
            Answer::CorsPreflight { cors, allow } => {
                for (name, value) in cors.fields(allow) {
                    if let Ok(value) = HeaderValue::from_bytes(value) {
                        fields.insert(HeaderName::from_static(name), value);
                    }
                }
                fields.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain charset=UTF-8"));
                fields.insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
                (204, Bytes::new())
            }
            Answer::Unauthorized { challenge, cors } => {
                if let Ok(value) = HeaderValue::from_bytes(challenge) {
                    fields.insert(http::header::WWW_AUTHENTICATE, value);
                }
                for (name, value) in cors.iter().flat_map(|(cors, allow)| cors.fields(allow)) {
                    if let Ok(value) = HeaderValue::from_bytes(value) {
                        fields.insert(HeaderName::from_static(name), value);
                    }
                }
                let (_, body) = canned(401);
                fields.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                fields.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
                (401, Bytes::from_static(body.as_bytes()))
            }
            Answer::Direct(direct) => {
                // The compiled head is HTTP/1.1 text: status line, then fields.
                let lines = direct.head.split(|&b| b == b'\n').skip(1);
                for line in lines.map(|l| l.strip_suffix(b"\r").unwrap_or(l)) {
                    let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
                    let value = line[colon + 1..].trim_ascii();
                    if let (Ok(name), Ok(value)) =
                        (HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(value))
                    {
                        fields.append(name, value);
                    }
                }
                (direct.status, direct.body.clone())
            }
        };
        if let Ok(date) = HeaderValue::from_bytes(date) {
            fields.insert(DATE, date);
        }
        *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        (response, body)
    }
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
