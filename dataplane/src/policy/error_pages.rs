//! Custom error pages (ingress-nginx's `custom-http-errors`): the request the error backend gets
//! in place of an answer with an intercepted status.
//!
//! Built from the upstream head as sent to the backend: the same method and fields, the path `/`
//! (nginx's `rewrite (.*) / break` in the error location), no body, and the fields that tell the
//! error backend what happened. The `x-code` line is added once the status is known.

use ramjet_shared::ErrorPages;

/// Fields of the upstream head the error request does not carry: its framing (no body is sent)
/// and the fields it sets itself.
const DROPPED: [&[u8]; 11] = [
    b"content-length",
    b"transfer-encoding",
    b"expect",
    b"x-code",
    b"x-format",
    b"x-original-uri",
    b"x-namespace",
    b"x-ingress-name",
    b"x-service-name",
    b"x-service-port",
    b"connection",
];

/// The error request's head into `out`, without its `x-code` line and the blank line: from
/// `head` (the upstream head, CRLF lines), `original` (the target as the client sent it, for
/// `x-original-uri`) and the client's `accept` (for `x-format`).
pub(crate) fn request_head(head: &[u8], original: &[u8], accept: Option<&[u8]>, pages: &ErrorPages, out: &mut Vec<u8>) {
    out.clear();
    let mut lines = head.split_inclusive(|&b| b == b'\n');
    let method = lines.next().and_then(|l| l.split(|&b| b == b' ').next()).unwrap_or(b"GET");
    out.extend_from_slice(method);
    out.extend_from_slice(b" / HTTP/1.1\r\n");
    for line in lines {
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        if line == b"\r\n" || DROPPED.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            continue;
        }
        out.extend_from_slice(line);
    }
    if let Some(accept) = accept {
        out.extend_from_slice(b"x-format: ");
        out.extend_from_slice(accept);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"x-original-uri: ");
    out.extend_from_slice(original);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(pages.identity.as_bytes());
}

/// Ends the error request's head with the intercepted status.
pub(crate) fn finish(out: &mut Vec<u8>, code: u16) {
    out.extend_from_slice(b"x-code: ");
    crate::codec::http1::head::push_decimal(out, u64::from(code));
    out.extend_from_slice(b"\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ramjet_shared::Backend;

    use super::*;

    #[test]
    fn the_error_request_keeps_the_fields_and_drops_the_body() {
        let pages = ErrorPages {
            codes: Box::new([404]),
            backend: Arc::new(Backend::respond("errors", 0, 200, "")),
            identity: ErrorPages::identity("shop", "web", "api", "80").into(),
        };
        let head = b"POST /api/v2?x=1 HTTP/1.1\r\nhost: shop.test\r\ncontent-length: 4\r\nx-code: 999\r\n\
                     accept: text/html\r\nx-request-id: abc\r\n\r\n";
        let mut out = Vec::new();
        request_head(head, b"/v2?x=1", Some(b"text/html"), &pages, &mut out);
        finish(&mut out, 404);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "POST / HTTP/1.1\r\nhost: shop.test\r\naccept: text/html\r\nx-request-id: abc\r\nx-format: text/html\r\n\
             x-original-uri: /v2?x=1\r\nx-namespace: shop\r\nx-ingress-name: web\r\nx-service-name: api\r\n\
             x-service-port: 80\r\nx-code: 404\r\n\r\n"
        );
    }
}
