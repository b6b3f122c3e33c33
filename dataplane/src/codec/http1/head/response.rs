//! The response head: what the upstream answered, and the head ramjet sends the client for it.

use ramjet_shared::UpstreamErrorKind;

use super::common::{
    no_headers, push_field, push_framing, ConnectionOptions, ContentLength, Framing, Headers, TransferCoding,
};
use crate::error::ProxyError;

/// What the proxy needs to know about an upstream response head.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    pub head_len: usize,
    pub status: u16,
    pub body: Framing,
    /// The upstream connection can carry another request after this response.
    pub reusable: bool,
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

/// Field names never copied to the client as the upstream sent them: hop-by-hop fields, and the
/// framing fields ramjet writes itself.
fn is_consumed(name: &[u8], switching: bool) -> bool {
    let eq = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
    match name.len() {
        2 => eq("te"),
        7 => (!switching && eq("upgrade")) || eq("trailer"),
        10 => (!switching && eq("connection")) || eq("keep-alive"),
        // ramjet returns the request's id itself.
        12 => eq("x-request-id"),
        14 => eq("content-length"),
        16 => eq("proxy-connection"),
        17 => eq("transfer-encoding"),
        _ => false,
    }
}

fn protocol_error() -> ProxyError {
    ProxyError::Upstream(UpstreamErrorKind::Protocol)
}

/// An upstream response head, parsed in place: what it says about framing and connection options,
/// and its fields. Both renderers start from it: [`parse_response`] writes an HTTP/1.1 head for
/// the client, and the HTTP/2 side builds its response fields from [`Inspected::fields`].
pub(crate) struct Inspected<'h, 'b> {
    pub head: ResponseHead,
    /// The status line after `HTTP/1.x ` (code and reason), as the upstream wrote it.
    pub status_line: &'b [u8],
    content_length: Option<u64>,
    coding: TransferCoding,
    connection: ConnectionOptions<'b>,
    headers: &'h [httparse::Header<'b>],
}

impl<'b> Inspected<'_, 'b> {
    /// The fields that pass to the client unchanged: neither hop-by-hop (by definition or because
    /// `Connection` names them) nor framing, which ramjet writes itself.
    pub fn fields(&self) -> impl Iterator<Item = &httparse::Header<'b>> {
        let switching = self.head.status == 101;
        self.headers.iter().filter(move |h| {
            let name = h.name.as_bytes();
            !is_consumed(name, switching) && !self.connection.names(name)
        })
    }

    /// The framing the client is told about. A HEAD or 304 answer keeps the length (or chunked
    /// coding) the full response would have had; 1xx and 204 carry none.
    pub fn advertised(&self, is_head: bool) -> Framing {
        let status = self.head.status;
        match self.head.body {
            Framing::None if status == 304 || (is_head && status >= 200 && status != 204) => {
                if self.coding == TransferCoding::Chunked {
                    Framing::Chunked
                } else {
                    self.content_length.map_or(Framing::None, Framing::Length)
                }
            }
            other => other,
        }
    }
}

/// Parses the response head at the start of `data` into `headers`. `Ok(None)`: incomplete.
///
/// Refused (502, the upstream connection is dropped): conflicting `Content-Length` values, both
/// `Content-Length` and `Transfer-Encoding`, and any `Transfer-Encoding` other than one `chunked`.
pub(crate) fn inspect<'h, 'b>(
    data: &'b [u8],
    is_head: bool,
    headers: &'h mut Headers<'b>,
) -> Result<Option<Inspected<'h, 'b>>, ProxyError> {
    let mut resp = httparse::Response::new(&mut []);
    let head_len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, data, headers)
    {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(protocol_error()),
    };
    let status = resp.code.unwrap_or(502);
    let minor = resp.version.unwrap_or(1);
    let headers: &'h [httparse::Header<'b>] = resp.headers;
    let mut content_length = ContentLength::default();
    let mut coding = TransferCoding::Absent;
    let mut connection = ConnectionOptions::default();
    for h in headers {
        let name = h.name.as_bytes();
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                super::common::ensure(content_length.add(h.value), protocol_error())?;
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => coding = coding.add(h.value),
            10 if name.eq_ignore_ascii_case(b"connection") => {
                super::common::ensure(connection.add(h.value), protocol_error())?;
            }
            _ => {}
        }
    }
    match coding {
        TransferCoding::Absent => {}
        TransferCoding::Chunked if content_length.0.is_none() => {}
        _ => return Err(protocol_error()),
    }
    let close = if minor == 0 { !connection.keep_alive || connection.close } else { connection.close };
    let bodiless = is_head || status == 204 || status == 304 || (100..200).contains(&status);
    let body = if bodiless {
        Framing::None
    } else if coding == TransferCoding::Chunked {
        Framing::Chunked
    } else if let Some(n) = content_length.0 {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    let reusable = !close && body != Framing::UntilClose && status != 101;
    // httparse skips empty lines before the status line (RFC 9112 §2.2); so does this copy of it.
    let line_start = data.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(0);
    let line_end = data[line_start..].iter().position(|&b| b == b'\n').map_or(line_start, |i| line_start + i);
    let status_line = &data[line_start..line_end];
    let status_line = status_line.strip_suffix(b"\r").unwrap_or(status_line);
    Ok(Some(Inspected {
        head: ResponseHead { head_len, status, body, reusable },
        status_line: status_line.get(9..).unwrap_or(b""),
        content_length: content_length.0,
        coding,
        connection,
        headers,
    }))
}

/// Parses an upstream response head and writes the head for the client into `out`. Returns the
/// response, and whether the client connection may stay open (framing permitting). Refuses what
/// [`inspect`] refuses.
pub fn parse_response(
    data: &[u8],
    plan: &ResponsePlan,
    out: &mut Vec<u8>,
) -> Result<Option<(ResponseHead, bool)>, ProxyError> {
    let mut headers = no_headers();
    let Some(response) = inspect(data, plan.is_head, &mut headers)? else { return Ok(None) };
    let body = response.head.body;
    let switching = response.head.status == 101;
    // Towards an HTTP/1.0 client a chunked body is sent decoded, delimited by closing.
    let dechunk = body == Framing::Chunked && plan.client_minor == 0;
    let keep_client = plan.keep_alive && body != Framing::UntilClose && !dechunk && !switching;

    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(response.status_line);
    out.extend_from_slice(b"\r\n");
    for h in response.fields() {
        push_field(out, data, h);
    }
    // The framing the client sees is the one ramjet relays.
    let advertised = match response.advertised(plan.is_head) {
        Framing::Chunked if dechunk => Framing::None,
        other => other,
    };
    if !(plan.client_minor == 0 && advertised == Framing::Chunked) {
        push_framing(out, advertised);
    }
    if !switching {
        if !keep_client {
            out.extend_from_slice(b"connection: close\r\n");
        } else if plan.client_minor == 0 {
            out.extend_from_slice(b"connection: keep-alive\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    Ok(Some((response.head, keep_client)))
}
