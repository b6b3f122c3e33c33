//! One error type for the request path, and the one place that turns it into an answer.

use ramjet_shared::UpstreamErrorKind;

/// What went wrong while serving a request, and whose fault it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The client sent something that is not acceptable HTTP/1.x (or that could smuggle a request).
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The request head did not fit the buffer.
    #[error("request head too large")]
    HeadTooLarge,
    /// The request target is longer than allowed.
    #[error("request target too long")]
    UriTooLong,
    /// The client did not finish its head in time.
    #[error("client too slow to send its request head")]
    HeaderTimeout,
    /// The client went away or its connection failed.
    #[error("client connection closed")]
    ClientGone,
    /// No rule matched and there is no default backend.
    #[error("no route")]
    NoRoute,
    /// Upstream failure of the given kind.
    #[error("upstream {}", .0.label())]
    Upstream(UpstreamErrorKind),
    /// The upstream closed or reset a reused (pooled) connection before answering: safe to retry on a
    /// fresh connection when the request can be sent again.
    #[error("reused upstream connection closed before the response")]
    StaleUpstream,
}

impl ProxyError {
    /// The status a client sees, or `None` when the connection is just closed (the client is gone,
    /// or the response had already started).
    pub fn status(self) -> Option<u16> {
        Some(match self {
            ProxyError::BadRequest(_) => 400,
            ProxyError::HeadTooLarge => 431,
            ProxyError::UriTooLong => 414,
            ProxyError::HeaderTimeout => 408,
            ProxyError::ClientGone => return None,
            ProxyError::NoRoute => 404,
            ProxyError::Upstream(UpstreamErrorKind::NoEndpoints) => 503,
            ProxyError::Upstream(UpstreamErrorKind::Timeout) => 504,
            ProxyError::Upstream(_) | ProxyError::StaleUpstream => 502,
        })
    }

    /// Whether the client connection can carry another request after this answer.
    pub fn keeps_connection(self) -> bool {
        matches!(self, ProxyError::NoRoute | ProxyError::Upstream(_) | ProxyError::StaleUpstream)
    }

    pub fn upstream_kind(self) -> Option<UpstreamErrorKind> {
        match self {
            ProxyError::Upstream(k) => Some(k),
            ProxyError::StaleUpstream => Some(UpstreamErrorKind::Reset),
            _ => None,
        }
    }
}

/// The canned response for a status: short plain text, nothing internal. `close` adds
/// `connection: close`.
pub fn error_response(status: u16, close: bool) -> &'static [u8] {
    macro_rules! canned {
        ($status:literal, $reason:literal, $len:literal, $body:literal) => {{
            macro_rules! with_connection {
                ($connection:literal) => {
                    concat!(
                        "HTTP/1.1 ",
                        $status,
                        " ",
                        $reason,
                        "\r\ncontent-type: text/plain\r\ncontent-length: ",
                        $len,
                        "\r\n",
                        $connection,
                        "\r\n",
                        $body
                    )
                    .as_bytes()
                };
            }
            if close {
                with_connection!("connection: close\r\n")
            } else {
                with_connection!("")
            }
        }};
    }
    match status {
        400 => canned!("400", "Bad Request", "12", "bad request\n"),
        404 => canned!("404", "Not Found", "10", "not found\n"),
        408 => canned!("408", "Request Timeout", "16", "request timeout\n"),
        414 => canned!("414", "URI Too Long", "13", "uri too long\n"),
        431 => canned!("431", "Request Header Fields Too Large", "32", "request header fields too large\n"),
        503 => canned!("503", "Service Unavailable", "20", "service unavailable\n"),
        504 => canned!("504", "Gateway Timeout", "16", "gateway timeout\n"),
        _ => canned!("502", "Bad Gateway", "12", "bad gateway\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_responses_have_correct_lengths() {
        for status in [400, 404, 408, 414, 431, 502, 503, 504] {
            for close in [false, true] {
                let text = std::str::from_utf8(error_response(status, close)).unwrap();
                let (head, body) = text.split_once("\r\n\r\n").unwrap();
                assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
                let len: usize =
                    head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().parse().unwrap();
                assert_eq!(len, body.len(), "{status}");
                assert_eq!(head.contains("connection: close"), close);
            }
        }
    }
}
