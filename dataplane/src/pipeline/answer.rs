//! Answers ramjet makes itself — errors, redirects, configured responses, CORS preflights, auth
//! challenges — as one protocol-neutral value. Each protocol's server writes it through an
//! [`AnswerHead`] of its own (HTTP/1.1 bytes, HTTP/2 fields), so what an answer says is decided here
//! once, and only how it is spelled differs.

use std::cell::RefCell;

use ramjet_shared::{normalize_host, Cors, DirectResponse, Redirect, RewriteScratch, TrailingSlash};

use crate::codec::http1::head::push_decimal;
use crate::error::canned;
use crate::policy::client_certs::CertRefusal;

/// An answer that does not come from a backend.
pub(crate) enum LocalAnswer<'a> {
    /// An error status from [`crate::error::rescue`] (404 included), with its canned body.
    Status(u16),
    /// `308` to the same host and target over HTTPS (the host normalized here: lower case, no
    /// port; a trusted proxy's `X-Forwarded-Host` when it sent one), the target's trailing `/` as
    /// `slash` says.
    HttpsRedirect { host: &'a str, target: &'a str, slash: TrailingSlash },
    /// A route's configured response; `https` and `host` (as the client sent it) for one whose
    /// `location` starts with the request's origin.
    Direct { response: &'a DirectResponse, https: bool, host: &'a str },
    /// `302` to `<scheme>://<host><path>` (ingress-nginx's `app-root`; `host` as the client sent it).
    AppRoot { https: bool, host: &'a str, path: &'a str },
    /// `308` to another host (`from-to-www-redirect`).
    HostRedirect { https: bool, host: &'a str, port: u16, target: &'a str },
    /// `204` to a CORS preflight (`OPTIONS` from an allowed origin).
    CorsPreflight { cors: &'a Cors, allow: &'a [u8] },
    /// `401` with a basic-auth challenge, and the route's CORS fields (ingress-nginx adds them to
    /// every answer).
    Unauthorized { challenge: &'a [u8], cors: Option<(&'a Cors, &'a [u8])> },
    /// `302` to a location built for this request (external auth's sign-in page, a client
    /// certificate's error page).
    Found { location: &'a [u8] },
    /// A request the host's client-certificate authentication refused, answered as nginx does.
    CertificateRefused(CertRefusal),
    /// A rule's redirect, built from the request (`tls`: how it came; its host and target;
    /// `scratch`: the worker's rewrite memory).
    Redirect { redirect: &'a Redirect, tls: bool, host: &'a str, target: &'a str, scratch: &'a RefCell<RewriteScratch> },
}

/// Where an answer's head is written: a protocol's spelling of a status and fields.
pub(crate) trait AnswerHead {
    /// The status (HTTP/1.1 writes its status line here).
    fn status(&mut self, status: u16, reason: &str);
    /// A head compiled in HTTP/1.1 form (status line, then fields, each line ending in CRLF): a
    /// route's configured answer is compiled that way for HTTP/1.1's sake.
    fn compiled(&mut self, status: u16, head: &[u8]);
    /// A head in the same form that `write` writes (a rule's redirect, finished per request).
    fn compiled_with(&mut self, status: u16, write: impl FnOnce(&mut Vec<u8>));
    /// One field.
    fn field(&mut self, name: &'static str, value: &[u8]);
    /// One field whose value is written in place by `value`.
    fn field_with(&mut self, name: &'static str, value: impl FnOnce(&mut Vec<u8>));
}

impl LocalAnswer<'_> {
    /// The status this answer has.
    pub fn status(&self) -> u16 {
        match self {
            LocalAnswer::Status(s) => *s,
            LocalAnswer::HttpsRedirect { .. } | LocalAnswer::HostRedirect { .. } => 308,
            LocalAnswer::AppRoot { .. } | LocalAnswer::Found { .. } => 302,
            LocalAnswer::Direct { response, .. } => response.status,
            LocalAnswer::CorsPreflight { .. } => 204,
            LocalAnswer::Unauthorized { .. } => 401,
            LocalAnswer::CertificateRefused(refusal) => certificate_refusal(*refusal).0,
            LocalAnswer::Redirect { redirect, .. } => redirect.status(),
        }
    }

    /// Writes the status and fields (framing included: each answer says its `content-length`) to
    /// `head`, and returns the body.
    pub fn write<'s>(&'s self, head: &mut impl AnswerHead) -> &'s [u8] {
        match self {
            LocalAnswer::Status(status) => {
                let (reason, body) = canned(*status);
                head.status(*status, reason);
                head.field("content-type", b"text/plain");
                head.field_with("content-length", |v| push_decimal(v, body.len() as u64));
                body.as_bytes()
            }
            LocalAnswer::HttpsRedirect { host, target, slash } => {
                head.status(308, "Permanent Redirect");
                head.field_with("location", |v| {
                    v.extend_from_slice(b"https://");
                    let mut buf = [0u8; 256];
                    v.extend_from_slice(normalize_host(host, &mut buf).unwrap_or(host).as_bytes());
                    // ingress-nginx drops the last byte of `$request_uri` when it is `/`.
                    let target = match slash {
                        TrailingSlash::Drop => target.strip_suffix('/').unwrap_or(target),
                        TrailingSlash::Keep if target.is_empty() => "/",
                        TrailingSlash::Keep => target,
                    };
                    v.extend_from_slice(target.as_bytes());
                });
                head.field("content-length", b"0");
                b""
            }
            LocalAnswer::AppRoot { https, host, path } => {
                head.status(302, "Found");
                head.field_with("location", |v| {
                    v.extend_from_slice(if *https { b"https://" } else { b"http://" });
                    v.extend_from_slice(host.as_bytes());
                    v.extend_from_slice(path.as_bytes());
                });
                head.field("content-length", b"0");
                b""
            }
            LocalAnswer::HostRedirect { https, host, port, target } => {
                head.status(308, "Permanent Redirect");
                head.field_with("location", |v| host_redirect_location(*https, host, *port, target.as_bytes(), v));
                head.field("content-length", b"0");
                b""
            }
            LocalAnswer::CorsPreflight { cors, allow } => {
                head.status(204, "No Content");
                for (name, value) in cors.fields(allow) {
                    head.field(name, value);
                }
                head.field("content-type", b"text/plain charset=UTF-8");
                head.field("content-length", b"0");
                b""
            }
            LocalAnswer::Unauthorized { challenge, cors } => {
                let (reason, body) = canned(401);
                head.status(401, reason);
                head.field("www-authenticate", challenge);
                for (name, value) in cors.iter().flat_map(|(cors, allow)| cors.fields(allow)) {
                    head.field(name, value);
                }
                head.field("content-type", b"text/plain");
                head.field_with("content-length", |v| push_decimal(v, body.len() as u64));
                body.as_bytes()
            }
            LocalAnswer::CertificateRefused(refusal) => {
                let (status, reason, body) = certificate_refusal(*refusal);
                head.status(status, reason);
                head.field("content-type", b"text/html");
                head.field_with("content-length", |v| push_decimal(v, body.len() as u64));
                body.as_bytes()
            }
            LocalAnswer::Found { location } => {
                head.status(302, "Found");
                head.field("location", location);
                head.field("content-length", b"0");
                b""
            }
            LocalAnswer::Redirect { redirect, tls, host, target, scratch } => {
                // Rendered when the table was built, as far as it does not depend on the request.
                head.compiled_with(redirect.status(), |out| redirect.head(*tls, host, target, scratch, out));
                b""
            }
            LocalAnswer::Direct { response, https, host } => {
                match response.on_request_host() {
                    None => head.compiled(response.status, &response.head),
                    Some(at) => head.compiled_with(response.status, |out| {
                        let (before, after) = response.head.split_at(at);
                        out.extend_from_slice(before);
                        out.extend_from_slice(if *https { b"https://" } else { b"http://" });
                        // nginx's `$host`: the name, lower case, without its port.
                        let mut buf = [0u8; 256];
                        out.extend_from_slice(normalize_host(host, &mut buf).unwrap_or_default().as_bytes());
                        out.extend_from_slice(after);
                    }),
                }
                &response.body
            }
        }
    }
}

/// The status, reason and body of a client-certificate refusal: nginx's own pages for its `400`s
/// and `421`, ingress-nginx's text for a subject that does not match.
fn certificate_refusal(refusal: CertRefusal) -> (u16, &'static str, &'static str) {
    match refusal {
        CertRefusal::Misdirected => (
            421,
            "Misdirected Request",
            "<html>\r\n<head><title>421 Misdirected Request</title></head>\r\n<body>\r\n\
             <center><h1>421 Misdirected Request</h1></center>\r\n</body>\r\n</html>\r\n",
        ),
        CertRefusal::NoCertificate => (
            400,
            "Bad Request",
            "<html>\r\n<head><title>400 No required SSL certificate was sent</title></head>\r\n<body>\r\n\
             <center><h1>400 Bad Request</h1></center>\r\n<center>No required SSL certificate was sent</center>\r\n\
             </body>\r\n</html>\r\n",
        ),
        CertRefusal::BadCertificate => (
            400,
            "Bad Request",
            "<html>\r\n<head><title>400 The SSL certificate error</title></head>\r\n<body>\r\n\
             <center><h1>400 Bad Request</h1></center>\r\n<center>The SSL certificate error</center>\r\n\
             </body>\r\n</html>\r\n",
        ),
        CertRefusal::Unauthorized => (403, "Forbidden", "client certificate unauthorized"),
    }
}

/// The `location` of a `from-to-www-redirect`: ingress-nginx's `ngx_srv_redirect.lua` writes
/// `<scheme>://<host>:<server port><request_uri>` with one trailing `/` of the request URI dropped.
fn host_redirect_location(https: bool, host: &str, port: u16, target: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(if https { b"https://" } else { b"http://" });
    out.extend_from_slice(host.as_bytes());
    out.push(b':');
    push_decimal(out, port.into());
    out.extend_from_slice(target.strip_suffix(b"/").unwrap_or(target));
}
