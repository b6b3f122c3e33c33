//! gRPC the way gRPC clients expect it: when ramjet answers a gRPC request itself (no route, no
//! endpoints, the backend down or too slow, a malformed request), the answer is a *trailers-only*
//! response — HTTP status 200, `content-type: application/grpc`, `grpc-status` and `grpc-message`
//! in the one HEADERS frame that ends the stream — not an HTTP error with a text body, which a gRPC
//! client can only report as "unexpected content-type" or a bare `UNKNOWN`.
//!
//! The status is still decided by [`crate::error::rescue`] (one mapping from failure to answer);
//! this module only renders it for gRPC, with the code gRPC's own HTTP-to-gRPC mapping gives
//! (`doc/http-grpc-status-mapping.md` in grpc/grpc), except that a timeout is
//! `DEADLINE_EXCEEDED`: ramjet's deadline for the backend ran out, which is what that code means.

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Response};

use crate::error::canned;

/// gRPC status codes ramjet can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Code {
    Unknown = 2,
    DeadlineExceeded = 4,
    ResourceExhausted = 8,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
}

/// Whether the request is gRPC: `content-type` `application/grpc`, alone or with a `+format` or
/// parameters (gRPC-Web, `application/grpc-web…`, is a different protocol and is not matched).
#[inline]
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE) else { return false };
    let value = value.as_bytes();
    let prefix = b"application/grpc";
    value.len() >= prefix.len()
        && value[..prefix.len()].eq_ignore_ascii_case(prefix)
        && matches!(value.get(prefix.len()), None | Some(b'+' | b';'))
}

/// The gRPC code for an HTTP status ramjet would have answered.
pub(crate) fn code(status: u16) -> Code {
    match status {
        400 => Code::Internal,
        404 | 501 => Code::Unimplemented,
        408 | 504 => Code::DeadlineExceeded,
        413 | 414 | 431 => Code::ResourceExhausted,
        502 | 503 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// The trailers-only response standing for the HTTP answer `status`; the message is the same
/// short text the HTTP answer would carry (nothing internal).
pub(crate) fn trailers_only(status: u16) -> Response<()> {
    let mut response = Response::new(());
    let fields = response.headers_mut();
    fields.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    fields.insert("grpc-status", HeaderValue::from(code(status) as u16));
    let message = canned(status).1.trim_end();
    fields.insert("grpc-message", HeaderValue::from_static(message));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types_are_recognised() {
        let with = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
            is_grpc(&headers)
        };
        for yes in ["application/grpc", "application/grpc+proto", "Application/GRPC+json", "application/grpc;x=1"] {
            assert!(with(yes), "{yes}");
        }
        for no in ["application/grpc-web", "application/grpc-web+proto", "application/json", "application/grp"] {
            assert!(!with(no), "{no}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn statuses_map_to_grpc_codes() {
        assert_eq!(code(404), Code::Unimplemented);
        assert_eq!(code(503), Code::Unavailable);
        assert_eq!(code(502), Code::Unavailable);
        assert_eq!(code(504), Code::DeadlineExceeded);
        assert_eq!(code(400), Code::Internal);
        let response = trailers_only(503);
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(response.headers()["grpc-message"], "service unavailable");
        assert_eq!(response.headers()["content-type"], "application/grpc");
    }
}
