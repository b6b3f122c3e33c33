//! One error type for the request path, and the one place that turns a failure into an answer.
//!
//! Every way a request can fail is a [`ProxyError`]: it knows which side failed ([`Side`]) and whether
//! the request may be sent again ([`ProxyError::retry_safe`]). A [`Failure`] adds what the log line
//! needs (the upstream address, the I/O error kind, whether the response had started). [`rescue`]
//! is the only function that maps an error to what the client sees: status and whether the
//! connection stays open. Nothing internal reaches the body of an answer.

use std::net::SocketAddr;

use ramjet_shared::UpstreamErrorKind;

/// Which side of the proxy failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client: malformed, too large, too slow, or gone.
    Downstream,
    /// The backend: refused, reset, too slow, or not speaking HTTP.
    Upstream,
    /// Ramjet's own configuration (no route).
    Internal,
}

/// What went wrong while serving a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The client sent something that is not acceptable HTTP/1.x (or that could smuggle a request).
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The client asked for something ramjet does not implement (a transfer coding other than chunked).
    #[error("not implemented: {0}")]
    NotImplemented(&'static str),
    /// The request head did not fit the buffer.
    #[error("request head too large")]
    HeadTooLarge,
    /// The request target is longer than allowed.
    #[error("request target too long")]
    UriTooLong,
    /// The client did not finish its request head in time.
    #[error("client too slow to send its request head")]
    HeaderTimeout,
    /// The client's address is not allowed on this route (ingress-nginx's source ranges).
    #[error("client address not allowed")]
    Forbidden,
    /// The client is over its route's per-client rate or concurrency limit (ingress-nginx's
    /// `limit-rps`, `limit-rpm`, `limit-connections`).
    #[error("client over the route's per-client limit")]
    OverLimit,
    /// The request body is larger than its route allows (ingress-nginx's `proxy-body-size`).
    #[error("request body larger than the route allows")]
    BodyTooLarge,
    /// The client stopped sending its request body for longer than the body timeout.
    #[error("client too slow to send its request body")]
    BodyTimeout,
    /// The client stopped reading the response for longer than the write timeout.
    #[error("client stopped reading the response")]
    ClientWriteTimeout,
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
    pub fn side(self) -> Side {
        match self {
            ProxyError::BadRequest(_)
            | ProxyError::NotImplemented(_)
            | ProxyError::HeadTooLarge
            | ProxyError::UriTooLong
            | ProxyError::HeaderTimeout
            | ProxyError::BodyTimeout
            | ProxyError::BodyTooLarge
            | ProxyError::Forbidden
            | ProxyError::OverLimit
            | ProxyError::ClientWriteTimeout
            | ProxyError::ClientGone => Side::Downstream,
            ProxyError::NoRoute => Side::Internal,
            ProxyError::Upstream(_) | ProxyError::StaleUpstream => Side::Upstream,
        }
    }

    /// Whether the backend cannot have seen the request, so that sending it again (to another
    /// endpoint, or on a fresh connection) cannot repeat its effects.
    pub fn retry_safe(self) -> bool {
        matches!(
            self,
            ProxyError::StaleUpstream
                | ProxyError::Upstream(UpstreamErrorKind::Connect)
                | ProxyError::Upstream(UpstreamErrorKind::Tls)
        )
    }

    pub fn upstream_kind(self) -> Option<UpstreamErrorKind> {
        match self {
            ProxyError::Upstream(k) => Some(k),
            ProxyError::StaleUpstream => Some(UpstreamErrorKind::Reset),
            _ => None,
        }
    }
}

/// A failed request, with the context its log line needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub error: ProxyError,
    /// The endpoint involved, if one was chosen.
    pub upstream: Option<SocketAddr>,
    /// The I/O error behind it, if there was one.
    pub io: Option<std::io::ErrorKind>,
    /// Part of the response had reached the client: nothing more can be said, only closed.
    pub response_started: bool,
}

impl From<ProxyError> for Failure {
    fn from(error: ProxyError) -> Self {
        Failure { error, upstream: None, io: None, response_started: false }
    }
}

impl Failure {
    pub fn at(mut self, upstream: SocketAddr) -> Self {
        self.upstream.get_or_insert(upstream);
        self
    }

    pub fn started(mut self) -> Self {
        self.response_started = true;
        self
    }
}

/// What the client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rescue {
    /// `None`: say nothing and close (the client is gone, or the response had started).
    pub status: Option<u16>,
    /// The connection may carry another request after this answer (if the request was read whole).
    pub keep: bool,
}

/// The one mapping from a failure to an answer: 400/408/413/414/431/501 for the client's fault,
/// 404 for no route, 502/503/504 for the upstream's.
pub fn rescue(failure: &Failure) -> Rescue {
    if failure.response_started {
        return Rescue { status: None, keep: false };
    }
    let (status, keep) = match failure.error {
        ProxyError::BadRequest(_) => (400, false),
        ProxyError::NotImplemented(_) => (501, false),
        ProxyError::HeadTooLarge => (431, false),
        ProxyError::UriTooLong => (414, false),
        // The rest of the body is not read: the connection cannot carry another request.
        ProxyError::BodyTooLarge => (413, false),
        ProxyError::Forbidden => (403, true),
        // ingress-nginx's limit-req-status-code and limit-conn-status-code default to 503.
        ProxyError::OverLimit => (503, true),
        ProxyError::HeaderTimeout | ProxyError::BodyTimeout => (408, false),
        ProxyError::ClientWriteTimeout | ProxyError::ClientGone => return Rescue { status: None, keep: false },
        ProxyError::NoRoute => (404, true),
        ProxyError::Upstream(UpstreamErrorKind::NoEndpoints) => (503, true),
        ProxyError::Upstream(UpstreamErrorKind::Timeout) => (504, true),
        ProxyError::Upstream(_) | ProxyError::StaleUpstream => (502, true),
    };
    Rescue { status: Some(status), keep }
}

/// Reason phrase and body of an answer ramjet writes itself: short plain text, nothing internal.
pub fn canned(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("Bad Request", "bad request\n"),
        401 => ("Unauthorized", "authorization required\n"),
        403 => ("Forbidden", "forbidden\n"),
        404 => ("Not Found", "not found\n"),
        408 => ("Request Timeout", "request timeout\n"),
        413 => ("Content Too Large", "content too large\n"),
        414 => ("URI Too Long", "uri too long\n"),
        431 => ("Request Header Fields Too Large", "request header fields too large\n"),
        500 => ("Internal Server Error", "internal server error\n"),
        501 => ("Not Implemented", "not implemented\n"),
        503 => ("Service Unavailable", "service unavailable\n"),
        504 => ("Gateway Timeout", "gateway timeout\n"),
        _ => ("Bad Gateway", "bad gateway\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_side_gets_its_statuses() {
        let status = |e: ProxyError| rescue(&e.into()).status;
        assert_eq!(status(ProxyError::BadRequest("x")), Some(400));
        assert_eq!(status(ProxyError::NotImplemented("x")), Some(501));
        assert_eq!(status(ProxyError::BodyTimeout), Some(408));
        assert_eq!(status(ProxyError::ClientGone), None);
        assert_eq!(status(ProxyError::NoRoute), Some(404));
        assert_eq!(status(ProxyError::OverLimit), Some(503));
        assert_eq!(status(ProxyError::Upstream(UpstreamErrorKind::Timeout)), Some(504));
        assert_eq!(status(ProxyError::Upstream(UpstreamErrorKind::NoEndpoints)), Some(503));
        assert_eq!(status(ProxyError::StaleUpstream), Some(502));
        let started = Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset)).started();
        assert_eq!(rescue(&started), Rescue { status: None, keep: false });
        assert!(ProxyError::StaleUpstream.retry_safe() && !ProxyError::Upstream(UpstreamErrorKind::Reset).retry_safe());
        // A failed handshake sent nothing of the request; it is a 502 like any unusable backend.
        assert!(ProxyError::Upstream(UpstreamErrorKind::Tls).retry_safe());
        assert_eq!(status(ProxyError::Upstream(UpstreamErrorKind::Tls)), Some(502));
        assert_eq!(ProxyError::BodyTimeout.side(), Side::Downstream);
        assert_eq!(ProxyError::StaleUpstream.side(), Side::Upstream);
    }
}
