//! Parsing a request head in place and writing the head that goes upstream.
//!
//! One pass of httparse over the read buffer (no per-header allocation), one pass over the headers
//! to learn the framing and the connection options and to refuse what RFC 9112 says enables request
//! smuggling, and one pass that copies the headers that need no change, byte for byte, into the
//! upstream head.

use std::ops::Range;

use crate::error::ProxyError;

/// Most headers accepted in a request or response head.
pub const MAX_HEADERS: usize = 128;
/// Longest request target accepted (414 beyond).
pub const MAX_URI: usize = 8 * 1024;
/// Largest request head accepted (431 beyond).
pub const MAX_HEAD: usize = 32 * 1024;

/// How the message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
    /// Responses only: the body runs until the upstream closes.
    UntilClose,
}

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
    pub upgrade: bool,
    pub host: Range<usize>,
    /// The request target in origin form (path and query).
    pub target: Range<usize>,
}

/// Per-connection facts added to every upstream head.
pub struct ConnFacts {
    /// The client connection is TLS.
    pub tls: bool,
    /// `x-forwarded-for`, `x-real-ip`, `x-forwarded-proto` and `x-forwarded-port` lines, rendered once
    /// per connection.
    pub forwarded: Vec<u8>,
}

impl ConnFacts {
    pub fn new(peer: std::net::SocketAddr, tls: bool, local_port: u16) -> Self {
        use std::io::Write;
        let mut forwarded = Vec::with_capacity(128);
        let ip = peer.ip().to_canonical();
        let proto = if tls { "https" } else { "http" };
        let _ = write!(
            forwarded,
            "x-forwarded-for: {ip}\r\nx-real-ip: {ip}\r\nx-forwarded-proto: {proto}\r\nx-forwarded-port: {local_port}\r\n"
        );
        ConnFacts { tls, forwarded }
    }
}

fn offset(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |e| e + 1);
    &v[start..end]
}

fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(trim).filter(|t| !t.is_empty())
}

/// Header names the proxy consumes itself or replaces; never forwarded as they came.
fn is_hop_by_hop_request(name: &[u8]) -> bool {
    let eq = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
    match name.len() {
        2 => eq("te"),
        6 => eq("expect"),
        7 => eq("upgrade") || eq("trailer"),
        9 => eq("x-real-ip"),
        10 => eq("connection") || eq("keep-alive"),
        15 => eq("x-forwarded-for"),
        16 => eq("proxy-connection") || eq("x-forwarded-host") || eq("x-forwarded-port"),
        17 => eq("x-forwarded-proto"),
        _ => false,
    }
}

/// Parses the request head at the start of `data`. `Ok(None)`: incomplete, read more. On success,
/// `out` holds the head to send upstream.
pub fn parse_request(data: &[u8], conn: &ConnFacts, out: &mut Vec<u8>) -> Result<Option<RequestHead>, ProxyError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(data) {
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
    let raw_target = req.path.unwrap_or("");
    let minor = req.version.unwrap_or(1);
    if raw_target.len() > MAX_URI {
        return Err(ProxyError::UriTooLong);
    }
    if method == "CONNECT" {
        return Err(ProxyError::BadRequest("CONNECT is not supported"));
    }

    // Absolute form (`GET http://host/path`): the authority is the host, the rest the target.
    let mut host: Option<Range<usize>> = None;
    let mut target = offset(data, raw_target.as_bytes());
    if let Some(rest) = raw_target.strip_prefix("http://").or_else(|| raw_target.strip_prefix("https://")) {
        let slash = rest.find('/').unwrap_or(rest.len());
        let authority = &rest.as_bytes()[..slash];
        host = Some(offset(data, authority));
        target = if slash < rest.len() { offset(data, &rest.as_bytes()[slash..]) } else { 0..0 };
    } else if !raw_target.starts_with('/') && raw_target != "*" {
        return Err(ProxyError::BadRequest("request target is not origin form"));
    }

    let mut host_header: Option<&[u8]> = None;
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut upgrade_token = false;
    let mut upgrade_value: Option<&[u8]> = None;
    let mut expect_continue = false;
    // Headers named in `Connection` are hop-by-hop too; a handful is plenty.
    let mut connection_named: [&[u8]; 8] = [&[]; 8];
    let mut named = 0;

    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let value = h.value;
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                if host_header.is_some() {
                    return Err(ProxyError::BadRequest("more than one Host header"));
                }
                host_header = Some(trim(value));
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                for token in value.split(|&b| b == b',').map(trim) {
                    let n = parse_length(token).ok_or(ProxyError::BadRequest("invalid Content-Length"))?;
                    if content_length.is_some_and(|c| c != n) {
                        return Err(ProxyError::BadRequest("conflicting Content-Length headers"));
                    }
                    content_length = Some(n);
                }
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                transfer_encoding = true;
                // Only the final coding matters for framing; it must be chunked.
                chunked = false;
                for token in tokens(value) {
                    chunked = token.eq_ignore_ascii_case(b"chunked");
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in tokens(value) {
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive_token = true;
                    } else if token.eq_ignore_ascii_case(b"upgrade") {
                        upgrade_token = true;
                    } else if named < connection_named.len() {
                        connection_named[named] = token;
                        named += 1;
                    }
                }
            }
            7 if name.eq_ignore_ascii_case(b"upgrade") => upgrade_value = Some(value),
            6 if name.eq_ignore_ascii_case(b"expect") => {
                expect_continue = trim(value).eq_ignore_ascii_case(b"100-continue");
            }
            _ => {}
        }
    }

    if transfer_encoding {
        if content_length.is_some() {
            return Err(ProxyError::BadRequest("both Content-Length and Transfer-Encoding"));
        }
        if minor == 0 {
            return Err(ProxyError::BadRequest("Transfer-Encoding in an HTTP/1.0 request"));
        }
        if !chunked {
            return Err(ProxyError::BadRequest("Transfer-Encoding does not end in chunked"));
        }
    }
    let host = match (host, host_header) {
        (Some(h), _) => h,
        (None, Some(h)) => offset(data, h),
        (None, None) if minor == 0 => 0..0,
        (None, None) => return Err(ProxyError::BadRequest("missing Host header")),
    };
    let body = if chunked {
        Framing::Chunked
    } else {
        match content_length {
            Some(0) | None => Framing::None,
            Some(n) => Framing::Length(n),
        }
    };
    let upgrade = upgrade_token && upgrade_value.is_some();
    let keep_alive = if minor == 0 { keep_alive_token && !close } else { !close };

    // The upstream head: request line, the headers that pass unchanged, then ours.
    out.clear();
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(if target.is_empty() { b"/" } else { &data[target.clone()] });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if is_hop_by_hop_request(name) || connection_named[..named].iter().any(|n| n.eq_ignore_ascii_case(name)) {
            continue;
        }
        // Forward the whole header line as received: name, colon, value, as they are in the buffer.
        let line = offset(data, name).start..offset(data, h.value).end;
        out.extend_from_slice(&data[line]);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&conn.forwarded);
    if !host.is_empty() {
        out.extend_from_slice(b"x-forwarded-host: ");
        out.extend_from_slice(&data[host.clone()]);
        out.extend_from_slice(b"\r\n");
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
        expect_continue: expect_continue && body != Framing::None && minor == 1,
        upgrade,
        host,
        target,
    }))
}

/// A Content-Length value: digits only, no sign, no overflow.
fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (b - b'0') as u64;
    }
    Some(n)
}

/// What the proxy needs to know about an upstream response head.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    pub head_len: usize,
    pub status: u16,
    pub body: Framing,
    /// The upstream connection can carry another request after this response.
    pub reusable: bool,
}

fn is_hop_by_hop_response(name: &[u8], keep_upgrade: bool) -> bool {
    let eq = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
    match name.len() {
        2 => eq("te"),
        7 => (!keep_upgrade && eq("upgrade")) || eq("trailer"),
        10 => (!keep_upgrade && eq("connection")) || eq("keep-alive"),
        16 => eq("proxy-connection"),
        17 => eq("transfer-encoding"),
        _ => false,
    }
}

/// How the proxy answers the client, decided per request.
pub struct ResponsePlan {
    /// The client asked with HEAD.
    pub is_head: bool,
    /// The client is HTTP/1.0 (no chunked framing towards it).
    pub client_minor: u8,
    /// The proxy intends to keep the client connection open after this response.
    pub keep_alive: bool,
}

/// Parses an upstream response head and writes the head for the client into `out`. Returns the
/// response, and whether the client connection may stay open (framing permitting).
pub fn parse_response(
    data: &[u8],
    plan: &ResponsePlan,
    out: &mut Vec<u8>,
) -> Result<Option<(ResponseHead, bool)>, ProxyError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(data) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ProxyError::Upstream(ramjet_shared::UpstreamErrorKind::Protocol)),
    };
    let status = resp.code.unwrap_or(502);
    let minor = resp.version.unwrap_or(1);
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut close = minor == 0;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                let n = parse_length(trim(h.value))
                    .ok_or(ProxyError::Upstream(ramjet_shared::UpstreamErrorKind::Protocol))?;
                content_length = Some(n);
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                chunked = tokens(h.value).last().is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for t in tokens(h.value) {
                    if t.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") && minor == 0 {
                        close = false;
                    }
                }
            }
            _ => {}
        }
    }
    let switching = status == 101;
    let body = if plan.is_head || status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = content_length {
        if n == 0 {
            Framing::None
        } else {
            Framing::Length(n)
        }
    } else {
        Framing::UntilClose
    };
    let reusable = !close && body != Framing::UntilClose && !switching;
    // Towards an HTTP/1.0 client a chunked body is sent decoded, delimited by closing.
    let dechunk = body == Framing::Chunked && plan.client_minor == 0;
    let keep_client = plan.keep_alive && body != Framing::UntilClose && !dechunk && !switching;

    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    let line_end = data.iter().position(|&b| b == b'\n').unwrap_or(0);
    // Status code and reason phrase as the upstream wrote them.
    let status_part = &data[..line_end];
    let status_part = status_part.strip_suffix(b"\r").unwrap_or(status_part);
    out.extend_from_slice(status_part.get(9..).unwrap_or(b""));
    out.extend_from_slice(b"\r\n");
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        // Hop-by-hop headers go, except the chunked framing that is passed through unchanged.
        let passthrough_te = name.eq_ignore_ascii_case(b"transfer-encoding") && body == Framing::Chunked && !dechunk;
        if is_hop_by_hop_response(name, switching) && !passthrough_te {
            continue;
        }
        let line = offset(data, name).start..offset(data, h.value).end;
        out.extend_from_slice(&data[line]);
        out.extend_from_slice(b"\r\n");
    }
    if !switching {
        if !keep_client {
            out.extend_from_slice(b"connection: close\r\n");
        } else if plan.client_minor == 0 {
            out.extend_from_slice(b"connection: keep-alive\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    Ok(Some((ResponseHead { head_len, status, body, reusable }, keep_client)))
}

#[cfg(test)]
mod tests;
