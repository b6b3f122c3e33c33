//! Answers ramjet writes itself — errors, redirects, direct responses — rendered in one place, each
//! with a `Date` field from the worker's clock.

use ramjet_shared::{DirectResponse, Redirect};

use crate::error::canned;

/// An answer that does not come from a backend.
pub(crate) enum Reply<'a> {
    /// An error status from [`crate::error::rescue`] (404 included).
    Status(u16),
    /// `308` to the same host and target over HTTPS.
    HttpsRedirect { host: &'a [u8], target: &'a [u8] },
    /// A route's configured response.
    Direct { response: &'a DirectResponse, is_head: bool },
    /// `302` to `<scheme>://<host><path>` (ingress-nginx's `app-root`; `host` as the client sent it).
    AppRoot { https: bool, host: &'a [u8], path: &'a str },
    /// `308` to another host (`from-to-www-redirect`).
    HostRedirect { https: bool, host: &'a str, port: u16, target: &'a [u8] },
    /// `204` to a CORS preflight (`OPTIONS` from an allowed origin).
    CorsPreflight { cors: &'a ramjet_shared::Cors, allow: &'a [u8] },
    /// `401` with a basic-auth challenge (and the route's CORS fields, as ingress-nginx adds them
    /// to every answer).
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

impl Reply<'_> {
    pub fn status(&self) -> u16 {
        match self {
            Reply::Status(s) => *s,
            Reply::HttpsRedirect { .. } => 308,
            Reply::Direct { response, .. } => response.status,
            Reply::AppRoot { .. } => 302,
            Reply::HostRedirect { .. } => 308,
            Reply::CorsPreflight { .. } => 204,
            Reply::Unauthorized { .. } => 401,
            Reply::Found { .. } => 302,
            Reply::Redirect { redirect, .. } => redirect.status(),
        }
    }
}

/// Renders `reply` into `out`; `close` adds `connection: close`, a non-empty `request_id` an
/// `x-request-id` field.
pub(crate) fn render(reply: &Reply<'_>, close: bool, date: &[u8], request_id: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let body: &[u8] = match reply {
        Reply::Status(status) => {
            let (reason, body) = canned(*status);
            out.extend_from_slice(b"HTTP/1.1 ");
            super::head::push_decimal(out, u64::from(*status));
            out.push(b' ');
            out.extend_from_slice(reason.as_bytes());
            out.extend_from_slice(b"\r\ncontent-type: text/plain\r\ncontent-length: ");
            super::head::push_decimal(out, body.len() as u64);
            out.extend_from_slice(b"\r\n");
            body.as_bytes()
        }
        Reply::HttpsRedirect { host, target } => {
            out.extend_from_slice(b"HTTP/1.1 308 Permanent Redirect\r\nlocation: https://");
            out.extend_from_slice(host);
            out.extend_from_slice(if target.is_empty() { b"/" } else { target });
            out.extend_from_slice(b"\r\ncontent-length: 0\r\n");
            b""
        }
        Reply::AppRoot { https, host, path } => {
            out.extend_from_slice(b"HTTP/1.1 302 Found\r\nlocation: ");
            out.extend_from_slice(if *https { b"https://" } else { b"http://" });
            out.extend_from_slice(host);
            out.extend_from_slice(path.as_bytes());
            out.extend_from_slice(b"\r\ncontent-length: 0\r\n");
            b""
        }
        Reply::HostRedirect { https, host, port, target } => {
            out.extend_from_slice(b"HTTP/1.1 308 Permanent Redirect\r\nlocation: ");
            crate::dispatch::host_redirect_location(*https, host, *port, target, out);
            out.extend_from_slice(b"\r\ncontent-length: 0\r\n");
            b""
        }
        Reply::CorsPreflight { cors, allow } => {
            out.extend_from_slice(b"HTTP/1.1 204 No Content\r\n");
            for (name, value) in cors.fields(allow) {
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"content-type: text/plain charset=UTF-8\r\ncontent-length: 0\r\n");
            b""
        }
        Reply::Unauthorized { challenge, cors } => {
            out.extend_from_slice(b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: ");
            out.extend_from_slice(challenge);
            out.extend_from_slice(b"\r\n");
            for (name, value) in cors.iter().flat_map(|(cors, allow)| cors.fields(allow)) {
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
            let (_, body) = canned(401);
            out.extend_from_slice(b"content-type: text/plain\r\ncontent-length: ");
            super::head::push_decimal(out, body.len() as u64);
            out.extend_from_slice(b"\r\n");
            body.as_bytes()
        }
        Reply::Found { location } => {
            out.extend_from_slice(b"HTTP/1.1 302 Found\r\nlocation: ");
            out.extend_from_slice(location);
            out.extend_from_slice(b"\r\ncontent-length: 0\r\n");
            b""
        }
        Reply::Redirect { redirect, tls, host, target, scratch } => {
            // Rendered when the table was built, as far as it does not depend on the request.
            redirect.head(*tls, host, target, scratch, out);
            b""
        }
        Reply::Direct { response, is_head } => {
            out.extend_from_slice(&response.head);
            if *is_head {
                b""
            } else {
                &response.body
            }
        }
    };
    if !request_id.is_empty() {
        out.extend_from_slice(b"x-request-id: ");
        out.extend_from_slice(request_id);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(if close { b"\r\nconnection: close\r\n\r\n" } else { b"\r\n\r\n" });
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_answers_have_correct_lengths_and_a_date() {
        let date = b"Sun, 06 Nov 1994 08:49:37 GMT";
        for status in [400, 404, 408, 413, 414, 431, 501, 502, 503, 504] {
            for close in [false, true] {
                let mut out = Vec::new();
                render(&Reply::Status(status), close, date, b"", &mut out);
                let text = String::from_utf8(out).unwrap();
                let (head, body) = text.split_once("\r\n\r\n").unwrap();
                assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
                let len: usize =
                    head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().parse().unwrap();
                assert_eq!(len, body.len(), "{status}");
                assert!(head.contains("\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT"), "{head}");
                assert_eq!(head.contains("connection: close"), close);
            }
        }
    }
}
