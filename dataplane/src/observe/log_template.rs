//! Access-log lines of the operator's own, as ingress-nginx's `log-format-upstream` writes them:
//! text and nginx variables (`$remote_addr`, `$status`, `$http_<name>`, `$upstream_addr`, …),
//! with nginx's escaping (`default`: `\xHH`; `json`; `none`).
//!
//! A record is made in two steps, as every access-log format is ([`super::access_log`]): when the
//! head has been read, the request's variables are kept in the record buffer, each as a length
//! and its bytes ([`begin`]); when the answer is done, the line is written from the template, the
//! kept values in their order and the response's figures ([`end`]). A variable ramjet does not
//! have is written as nginx writes an empty one, and named when the template is read.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::access_log::{push_addr, push_local_time, push_seconds, push_time, RequestFields, ResponseFields};
use super::text::json_escape;
use crate::codec::http1::head::push_decimal;
use ramjet_shared::log_line::{LinePart, RequestVar, ResponseVar};

/// How values are escaped (ingress-nginx's `log-format-escape-json` / `-none`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Escape {
    /// nginx's default: `"`, `\`, control and non-ASCII bytes as `\xHH`; an empty value is `-`.
    #[default]
    Default,
    /// JSON string escaping; an empty value is empty.
    Json,
    /// Values as they are.
    None,
}

/// A line template, read once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTemplate {
    parts: Vec<LinePart>,
    escape: Escape,
}

impl LogTemplate {
    /// Reads a template ([`ramjet_shared::log_line::parse`]); returns it and the variables it
    /// names that ramjet does not have.
    pub fn parse(template: &str, escape: Escape) -> (LogTemplate, Vec<String>) {
        let (parts, missing) = ramjet_shared::log_line::parse(template);
        (LogTemplate { parts, escape }, missing)
    }
}

/// Keeps the request's variables of `template` in `out` (emptied first): each a length (two
/// bytes) and its bytes, in the template's order.
pub(crate) fn begin(template: &LogTemplate, f: &RequestFields<'_>, out: &mut Vec<u8>) {
    out.clear();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    for part in &template.parts {
        let LinePart::Request(var) = part else { continue };
        // The value goes in place, its length written before it once known (a longer one is cut).
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        request_value(var, f, now, out);
        let len = (out.len() - at - 2).min(u16::MAX as usize);
        out.truncate(at + 2 + len);
        out[at..at + 2].copy_from_slice(&(len as u16).to_le_bytes());
    }
}

/// Writes the line into `out` (emptied first) from what [`begin`] kept in `kept`, with a newline.
/// Response values are figures and names ramjet writes itself: nothing in them needs escaping, so
/// they go in place.
pub(crate) fn end(template: &LogTemplate, f: &ResponseFields<'_>, kept: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut values = kept;
    let mut next_kept = move || {
        let (len, rest) = values.split_at_checked(2)?;
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let (value, rest) = rest.split_at_checked(len)?;
        values = rest;
        Some(value)
    };
    for part in &template.parts {
        match part {
            LinePart::Text(text) => out.extend_from_slice(text),
            LinePart::Request(_) => push_value(out, next_kept().unwrap_or_default(), template.escape),
            LinePart::Response(var) => {
                let at = out.len();
                response_value(*var, f, out);
                if out.len() == at {
                    push_value(out, b"", template.escape);
                }
            }
            LinePart::Missing => push_value(out, b"", template.escape),
        }
    }
    out.push(b'\n');
}

fn push_value(out: &mut Vec<u8>, value: &[u8], escape: Escape) {
    match escape {
        Escape::Default if value.is_empty() => out.push(b'-'),
        Escape::Default => super::access_log::nginx_value(out, value),
        Escape::Json => json_escape(out, value),
        Escape::None => out.extend_from_slice(value),
    }
}

fn request_value(var: &RequestVar, f: &RequestFields<'_>, now: Duration, out: &mut Vec<u8>) {
    let (path, query) = match f.path.iter().position(|&b| b == b'?') {
        Some(q) => (&f.path[..q], &f.path[q + 1..]),
        None => (f.path, &b""[..]),
    };
    match var {
        RequestVar::RemoteAddr => push_addr(out, SocketAddr::new(f.client.ip(), 0)),
        RequestVar::RemotePort => push_decimal(out, u64::from(f.client.port())),
        RequestVar::RemoteUser => push_basic_user(out, f.field("authorization").unwrap_or_default()),
        RequestVar::TimeLocal => push_local_time(out, now),
        RequestVar::TimeIso8601 => push_time(out, Duration::from_secs(now.as_secs())),
        RequestVar::Msec => {
            push_decimal(out, now.as_secs());
            out.push(b'.');
            let ms = now.subsec_millis();
            out.extend_from_slice(&[b'0' + (ms / 100) as u8, b'0' + (ms / 10 % 10) as u8, b'0' + (ms % 10) as u8]);
        }
        RequestVar::Request => {
            out.extend_from_slice(f.method);
            out.push(b' ');
            out.extend_from_slice(f.path);
            out.push(b' ');
            out.extend_from_slice(f.protocol.as_bytes());
        }
        RequestVar::Method => out.extend_from_slice(f.method),
        RequestVar::RequestUri => out.extend_from_slice(f.path),
        RequestVar::Uri => out.extend_from_slice(path),
        RequestVar::Args => out.extend_from_slice(query),
        RequestVar::Protocol => out.extend_from_slice(f.protocol.as_bytes()),
        RequestVar::Host => {
            let host = f.host;
            let port_at = host.iter().rposition(|&b| b == b':').filter(|_| !host.ends_with(b"]"));
            out.extend(port_at.map_or(host, |i| &host[..i]).iter().map(u8::to_ascii_lowercase));
        }
        RequestVar::Scheme => out.extend_from_slice(if f.tls.is_some() { b"https" } else { b"http" }),
        RequestVar::RequestId => out.extend_from_slice(f.request_id),
        RequestVar::TraceId => {
            if let Some(id) = f.trace_id {
                super::text::push_hex(out, id);
            }
        }
        RequestVar::Field(name) => match name.as_str() {
            "referer" => out.extend_from_slice(f.referer),
            "user-agent" => out.extend_from_slice(f.user_agent),
            name => out.extend_from_slice(f.field(name).unwrap_or_default()),
        },
    }
}

/// The user of a `Basic` authorization, as nginx's `$remote_user`.
fn push_basic_user(out: &mut Vec<u8>, authorization: &[u8]) {
    use base64::Engine as _;
    let Some(encoded) = authorization.strip_prefix(b"Basic ") else { return };
    let at = out.len();
    // Decoded in place; nothing of a value that does not decode is kept.
    if base64::engine::general_purpose::STANDARD.decode_vec(encoded.trim_ascii(), out).is_err() {
        out.truncate(at);
        return;
    }
    if let Some(colon) = out[at..].iter().position(|&b| b == b':') {
        out.truncate(at + colon);
    }
}

fn response_value(var: ResponseVar, f: &ResponseFields<'_>, out: &mut Vec<u8>) {
    let upstream = f.upstream_status.is_some();
    match var {
        ResponseVar::Status => push_decimal(out, u64::from(f.status)),
        ResponseVar::BodyBytesSent | ResponseVar::BytesSent => push_decimal(out, f.bytes_out),
        ResponseVar::RequestLength => push_decimal(out, f.bytes_in),
        ResponseVar::RequestTime => push_seconds(out, Some(f.duration)),
        // ingress-nginx names an upstream `namespace-service-port`.
        ResponseVar::UpstreamName => {
            out.extend(f.backend.unwrap_or_default().bytes().map(|b| if b == b'/' || b == b':' { b'-' } else { b }))
        }
        ResponseVar::UpstreamAddr => {
            if let Some(addr) = f.upstream {
                push_addr(out, addr);
            }
        }
        ResponseVar::UpstreamStatus => {
            if let Some(status) = f.upstream_status {
                push_decimal(out, u64::from(status));
            }
        }
        ResponseVar::UpstreamResponseTime | ResponseVar::UpstreamHeaderTime if upstream => {
            push_seconds(out, f.upstream_header)
        }
        ResponseVar::UpstreamConnectTime if upstream => push_seconds(out, f.upstream_connect),
        ResponseVar::UpstreamResponseLength if upstream => push_decimal(out, f.bytes_out),
        ResponseVar::UpstreamResponseTime
        | ResponseVar::UpstreamHeaderTime
        | ResponseVar::UpstreamConnectTime
        | ResponseVar::UpstreamResponseLength => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_basic_users_name_is_remote_user() {
        let user = |authorization: &[u8]| {
            let mut out = b"kept".to_vec();
            push_basic_user(&mut out, authorization);
            out
        };
        assert_eq!(user(b"Basic dXNlcjpwYXNz"), b"keptuser");
        assert_eq!(user(b"Bearer x"), b"kept");
        assert_eq!(user(b"Basic !!!"), b"kept");
    }
}
