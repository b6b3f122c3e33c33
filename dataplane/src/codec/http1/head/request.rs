//! The request head: what the client asked for, and the head ramjet sends upstream for it.

use std::ops::Range;

use super::common::{
    no_headers, offset, push_field, push_framing, trim, ConnectionOptions, ContentLength, Framing, TransferCoding,
    MAX_URI,
};
use crate::codec::forwarded::{forwarded_host, forwarded_https, push_forwarded, push_originals, request_client};
use crate::conn::ConnFacts;
use crate::error::ProxyError;

/// What the proxy needs to know about a parsed request; ranges index the buffer the head was parsed
/// from.
#[derive(Debug, Clone)]
pub struct RequestHead {
    pub head_len: usize,
    pub is_head: bool,
    /// HTTP/1.x minor version.
    pub minor: u8,
    pub body: Framing,
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// A protocol switch ramjet will relay if the upstream agrees (never h2c).
    pub upgrade: bool,
    /// The host the request is routed by and forwarded with: the target's authority, else the Host
    /// field. Empty only for an HTTP/1.0 request without either: the upstream head then has no Host
    /// line yet and the proxy adds the endpoint's address (as nginx's default `$proxy_host` does).
    pub host: Range<usize>,
    /// The request target in origin form (path and query); empty means `/`.
    pub target: Range<usize>,
    /// The method.
    pub method: Range<usize>,
    /// The `User-Agent` value (empty when there is none).
    pub user_agent: Range<usize>,
    /// The `Referer` value (empty when there is none), for the access log.
    pub referer: Range<usize>,
    /// The client's `X-Request-ID` value, if it sent one (never forwarded as it came: ramjet writes
    /// the id it keeps or makes).
    pub request_id: Option<Range<usize>>,
    /// The client's W3C `traceparent`, if it sent one (forwarded as it came unless ramjet traces
    /// the request: then the upstream gets ramjet's).
    pub traceparent: Option<Range<usize>>,
    /// The client the request names through its fields, believed because the connection's peer is
    /// a trusted proxy (`codec::forwarded`); `None`: the connection's peer.
    pub client: Option<std::net::SocketAddr>,
    /// A trusted proxy says the client came over HTTPS (`X-Forwarded-Proto: https`): routed as a
    /// TLS request (no HTTPS redirect for it).
    pub forwarded_https: bool,
    /// The host a trusted proxy's client asked for (its first `X-Forwarded-Host`), sent upstream
    /// as `Host` and named by an HTTPS redirect.
    pub forwarded_host: Option<Range<usize>>,
}

/// Field names the proxy consumes itself or writes itself; never forwarded as they came.
pub(crate) fn is_consumed(name: &[u8]) -> bool {
    let eq = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
    match name.len() {
        2 => eq("te"),
        4 => eq("host"),
        6 => eq("expect"),
        7 => eq("upgrade") || eq("trailer"),
        8 => eq("x-scheme"),
        9 => eq("x-real-ip"),
        10 => eq("connection") || eq("keep-alive"),
        12 => eq("x-request-id"),
        13 => eq("http2-settings"),
        14 => eq("content-length"),
        15 => eq("x-forwarded-for"),
        16 => eq("proxy-connection") || eq("x-forwarded-host") || eq("x-forwarded-port"),
        17 => eq("x-forwarded-proto") || eq("transfer-encoding"),
        18 => eq("x-forwarded-scheme"),
        // Ramjet's own (the client's X-Forwarded-For and -Host): never the client's of that name.
        24 => eq("x-original-forwarded-for"),
        25 => eq("x-original-forwarded-host"),
        _ => false,
    }
}

/// Whether a field's name is `lower` (a lower-case name): only the field's side is folded.
#[inline]
fn is_named(name: &[u8], lower: &str) -> bool {
    name.len() == lower.len() && name.iter().zip(lower.as_bytes()).all(|(&a, &b)| a.to_ascii_lowercase() == b)
}

/// The bytes of a reg-name: letters, digits, RFC 3986's unreserved and sub-delims but `,` (a list
/// is refused), `%` of pct-encoding, and the brackets. A table: one load a byte, where the
/// comparisons cost twenty instructions a byte of every request's host.
const REG_NAME: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(c, b'-' | b'.' | b'_' | b'~' | b'%' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+')
            || matches!(c, b';' | b'=' | b'[' | b']');
        b += 1;
    }
    table
};

/// RFC 9112 §3.2 / RFC 3986 §3.2.2: `host [ ":" port ]`, where host is an IP literal in brackets or
/// a reg-name. Refused: empty, lists (`a, b`), whitespace, userinfo (`@`), a non-numeric port.
pub(crate) fn valid_host(h: &[u8]) -> bool {
    let (name, port) = if h.first() == Some(&b'[') {
        let Some(end) = h.iter().position(|&b| b == b']') else { return false };
        let literal = &h[1..end];
        if literal.is_empty() || !literal.iter().all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return false;
        }
        (&h[..=end], &h[end + 1..])
    } else {
        let colon = h.iter().position(|&b| b == b':').unwrap_or(h.len());
        (&h[..colon], &h[colon..])
    };
    if name.is_empty() || !(name[0] == b'[' || name.iter().all(|&b| REG_NAME[b as usize])) {
        return false;
    }
    match port {
        [] => true,
        [b':', digits @ ..] => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Splits an absolute-form target (`http://authority/path?query`) into authority and the rest;
/// `None` when the target is not in absolute form.
fn absolute_form(target: &[u8]) -> Option<(&[u8], &[u8])> {
    let scheme_len = if target.len() >= 7 && target[..7].eq_ignore_ascii_case(b"http://") {
        7
    } else if target.len() >= 8 && target[..8].eq_ignore_ascii_case(b"https://") {
        8
    } else {
        return None;
    };
    let rest = &target[scheme_len..];
    let end = rest.iter().position(|&b| b == b'/' || b == b'?' || b == b'#').unwrap_or(rest.len());
    Some((&rest[..end], &rest[end..]))
}

/// Parses the request head at the start of `data`. `Ok(None)`: incomplete, read more. On success,
/// `out` holds the head to send upstream.
pub fn parse_request<'c>(
    data: &[u8],
    conn: &'c ConnFacts,
    out: &mut Vec<u8>,
) -> Result<Option<RequestHead>, ProxyError> {
    let mut headers = no_headers();
    let mut req = httparse::Request::new(&mut []);
    let head_len = match req.parse_with_uninit_headers(data, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            // A request line that alone is longer than the URI limit will never fit.
            if !data.contains(&b'\n') && data.len() > MAX_URI + 64 {
                return Err(ProxyError::UriTooLong);
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(ProxyError::HeadTooLarge),
        Err(httparse::Error::Version) => return Err(ProxyError::BadRequest("unsupported HTTP version")),
        Err(_) => return Err(ProxyError::BadRequest("malformed request head")),
    };
    let method = req.method.unwrap_or("");
    let raw_target = req.path.unwrap_or("").as_bytes();
    let minor = req.version.unwrap_or(1);
    if raw_target.len() > MAX_URI {
        return Err(ProxyError::UriTooLong);
    }
    if method == "CONNECT" {
        return Err(ProxyError::BadRequest("CONNECT is not supported"));
    }

    // Absolute form (`GET http://host/path`): the authority replaces Host (RFC 9112 §3.2.2).
    let mut host: Option<&[u8]> = None;
    let target = if let Some((authority, rest)) = absolute_form(raw_target) {
        if authority.contains(&b'@') {
            return Err(ProxyError::BadRequest("userinfo in the request target"));
        }
        host = Some(authority);
        rest
    } else if raw_target.first() == Some(&b'/') || raw_target == b"*" {
        raw_target
    } else {
        return Err(ProxyError::BadRequest("request target is not origin form"));
    };

    let mut host_field: Option<&[u8]> = None;
    let mut content_length = ContentLength::default();
    let mut coding = TransferCoding::Absent;
    let mut connection = ConnectionOptions::default();
    let mut upgrade_value: Option<&[u8]> = None;
    let mut expect_continue = false;
    let mut user_agent: &[u8] = &[];
    let mut referer: &[u8] = &[];
    let mut request_id: Option<&[u8]> = None;
    let mut traceparent: Option<&[u8]> = None;

    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let value = h.value;
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                if host_field.is_some() {
                    return Err(ProxyError::BadRequest("more than one Host field"));
                }
                host_field = Some(trim(value));
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                super::common::ensure(
                    content_length.add(value),
                    ProxyError::BadRequest("invalid or conflicting Content-Length"),
                )?;
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => coding = coding.add(value),
            10 if name.eq_ignore_ascii_case(b"connection") => {
                super::common::ensure(connection.add(value), ProxyError::BadRequest("too many Connection options"))?;
            }
            7 if name.eq_ignore_ascii_case(b"upgrade") => {
                if upgrade_value.is_some() {
                    return Err(ProxyError::BadRequest("more than one Upgrade field"));
                }
                upgrade_value = Some(trim(value));
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                expect_continue = trim(value).eq_ignore_ascii_case(b"100-continue");
            }
            10 if name.eq_ignore_ascii_case(b"user-agent") => user_agent = value,
            7 if name.eq_ignore_ascii_case(b"referer") => referer = value,
            12 if name.eq_ignore_ascii_case(b"x-request-id") => request_id = Some(trim(value)),
            // Two `traceparent` fields are no context at all (W3C Trace Context): an empty value,
            // which no parser takes, so the request starts a trace of its own.
            11 if name.eq_ignore_ascii_case(b"traceparent") => {
                traceparent = Some(if traceparent.is_some() { &value[..0] } else { value })
            }
            _ => {}
        }
    }

    let body = match coding {
        TransferCoding::Absent => match content_length.0 {
            None => Framing::None,
            Some(n) => Framing::Length(n),
        },
        _ if content_length.0.is_some() => {
            return Err(ProxyError::BadRequest("both Content-Length and Transfer-Encoding"));
        }
        _ if minor == 0 => return Err(ProxyError::BadRequest("Transfer-Encoding in an HTTP/1.0 request")),
        TransferCoding::Chunked => Framing::Chunked,
        TransferCoding::Unsupported => return Err(ProxyError::NotImplemented("transfer coding other than chunked")),
        TransferCoding::Malformed => return Err(ProxyError::BadRequest("Transfer-Encoding is not exactly chunked")),
    };
    let host = match (host, host_field) {
        (Some(authority), _) => authority,
        (None, Some(field)) => field,
        (None, None) if minor == 0 => &[],
        (None, None) => return Err(ProxyError::BadRequest("missing Host field")),
    };
    if !(valid_host(host) || host.is_empty() && minor == 0) {
        return Err(ProxyError::BadRequest("invalid Host"));
    }
    // An h2c upgrade is never relayed: a tunnel of HTTP/2 past the proxy would skip its routing.
    let upgrade = match upgrade_value {
        Some(u) if connection.upgrade => !u.split(|&b| b == b',').map(trim).any(|t| t.eq_ignore_ascii_case(b"h2c")),
        _ => false,
    };
    let keep_alive = if minor == 0 { connection.keep_alive && !connection.close } else { !connection.close };
    // Only a connection with address rules looks at these fields again (`ConnFacts::rules`).
    let fields = |name: &'c str| req.headers.iter().filter(move |h| is_named(h.name.as_bytes(), name)).map(|h| h.value);
    let client = request_client(conn, fields);
    let forwarded_https = forwarded_https(conn, fields);

    // The upstream head: request line, Host, the fields that pass unchanged, then ours.
    out.clear();
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    // An absolute-form target without a path (`http://a?q`) is sent as `/?q`.
    if target.first() != Some(&b'/') && target != b"*" {
        out.push(b'/');
    }
    out.extend_from_slice(target);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    // Behind a trusted proxy, the host its client asked for (ingress-nginx's `$best_http_host`).
    let trusted_host = if conn.trusted_fields { forwarded_host(conn, fields) } else { None };
    let upstream_host = trusted_host.unwrap_or(host);
    if !upstream_host.is_empty() {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(upstream_host);
        out.extend_from_slice(b"\r\n");
    }
    // Only consumed names are looked at again, for the client's own X-Forwarded-For and -Host.
    let mut originals = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if !is_consumed(name) {
            if !connection.names(name) {
                push_field(out, data, h);
            }
        } else if matches!(name.len(), 15 | 16) {
            originals |= is_named(name, "x-forwarded-for") || is_named(name, "x-forwarded-host");
        }
    }
    push_framing(out, body);
    push_forwarded(out, conn, client, fields, host);
    if originals {
        push_originals(out, fields);
    }
    if let (true, Some(u)) = (upgrade, upgrade_value) {
        out.extend_from_slice(b"connection: upgrade\r\nupgrade: ");
        out.extend_from_slice(u);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");

    Ok(Some(RequestHead {
        head_len,
        is_head: method == "HEAD",
        minor,
        body,
        keep_alive,
        expect_continue: expect_continue && body.has_body() && minor == 1,
        upgrade,
        host: if host.is_empty() { 0..0 } else { offset(data, host) },
        target: offset(data, target),
        method: 0..method.len(),
        user_agent: if user_agent.is_empty() { 0..0 } else { offset(data, user_agent) },
        referer: if referer.is_empty() { 0..0 } else { offset(data, referer) },
        request_id: request_id.map(|id| offset(data, id)),
        traceparent: traceparent.map(|t| offset(data, t)),
        client,
        forwarded_https,
        forwarded_host: trusted_host.map(|h| offset(data, h)),
    }))
}
