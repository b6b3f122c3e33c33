//! External authentication on the worker (ingress-nginx's `auth-url`, nginx's `auth_request`):
//! the sub-request that asks the authentication service about a request, and what its answer
//! means for the request.
//!
//! The sub-request carries the client's fields (not its body) and the fields ingress-nginx's auth
//! location sets (`X-Original-URL`, `X-Original-Method`, `X-Sent-From`, `X-Real-IP`,
//! `X-Forwarded-For`, `X-Auth-Request-Redirect`, `X-Request-ID`). It goes over the worker's pooled
//! upstream connections like any request: a small answer whose body is all there leaves its
//! connection in the pool.

use std::net::IpAddr;

use http::HeaderMap;
use ramjet_shared::external_auth::{expand, SigninRequest};
use ramjet_shared::{AuthService, ExternalAuth, RouteTable, UpstreamErrorKind};

use crate::base::deadline::Deadline;
use crate::base::watchdog::Watchdog;
use crate::codec::http1::Framing;
use crate::conn::CertFields;
use crate::error::{Failure, ProxyError};
use crate::observe::requests::Tally;
use crate::pipeline::exchange::{self, Attempt};
use crate::upstream::connect::UpstreamConn;
use crate::worker::Worker;

/// The client's fields the sub-request does not pass on: framing (no body goes), hop-by-hop,
/// and the ones it sets itself.
const NOT_PASSED: [&[u8]; 16] = [
    b"host",
    b"content-length",
    b"transfer-encoding",
    b"connection",
    b"keep-alive",
    b"upgrade",
    b"te",
    b"expect",
    b"x-forwarded-proto",
    b"x-request-id",
    b"x-original-url",
    b"x-original-method",
    b"x-sent-from",
    b"x-real-ip",
    b"x-forwarded-for",
    b"x-auth-request-redirect",
];

/// The request being authenticated.
pub(crate) struct Asking<'a> {
    pub method: &'a [u8],
    /// The target as the client sent it.
    pub target: &'a [u8],
    /// `Host` (or `:authority`) as sent.
    pub host: &'a [u8],
    pub peer: IpAddr,
    pub tls: bool,
    pub request_id: &'a [u8],
}

/// What the service's answer means for the request.
pub(crate) enum Verdict {
    Pass(Passed),
    Refuse(Refusal),
}

/// A 2xx answer: the request is proxied.
pub(crate) struct Passed {
    /// `auth-response-headers` set on the upstream head (an empty value removes the field).
    pub fields: Vec<(Box<str>, Vec<u8>)>,
    /// The answer's `Set-Cookie` values, for the client's response (ingress-nginx's
    /// `add_header Set-Cookie $auth_cookie`).
    pub cookies: Vec<Vec<u8>>,
}

/// The client's answer when the service refuses.
pub(crate) enum Refusal {
    /// 401 with `auth-signin`: `302` to this location.
    SignIn(Vec<u8>),
    /// 401 (with the service's challenge, if it sent one) or 403, or 500 for any other answer.
    Deny(u16, Option<Vec<u8>>),
}

/// Asks `auth` about the request, whose fields are `fields`: its verdict. On a host that checks
/// client certificates, `certificate` is what the backend is told of the client's: the service is
/// told the same (ingress-nginx's auth location sets `ssl-client-*` as its proxy location does).
pub(crate) async fn ask<'f>(
    worker: &Worker,
    table: &RouteTable,
    auth: &ExternalAuth,
    asking: &Asking<'_>,
    (fields, certificate): (impl Iterator<Item = (&'f [u8], &'f [u8])>, Option<&CertFields>),
) -> Verdict {
    let mut head = worker.out_buffers.take();
    sub_request(auth, asking, fields, certificate, &mut head);
    let answered = exchange_with(worker, table, auth, asking.host, &head).await;
    worker.out_buffers.give(head);
    match answered {
        Ok((status, fields)) if (200..300).contains(&status) => {
            let pass = auth
                .response_headers
                .iter()
                // A field the answer lacks is removed, as nginx's `proxy_set_header` with "": a
                // client cannot pass its own off as the service's.
                .map(|name| (name.clone(), fields.get(&**name).map_or(Vec::new(), |v| v.as_bytes().to_vec())))
                .collect();
            let cookies = fields.get_all(http::header::SET_COOKIE).iter().map(|v| v.as_bytes().to_vec()).collect();
            Verdict::Pass(Passed { fields: pass, cookies })
        }
        Ok((401, _)) if auth.signin.is_some() => {
            let mut location = Vec::new();
            let req = SigninRequest { tls: asking.tls, host: asking.host, target: asking.target };
            expand(auth.signin.as_deref().unwrap_or_default(), &req, &mut location);
            Verdict::Refuse(Refusal::SignIn(location))
        }
        Ok((401, fields)) => {
            let challenge = fields.get(http::header::WWW_AUTHENTICATE).map(|v| v.as_bytes().to_vec());
            Verdict::Refuse(Refusal::Deny(401, challenge))
        }
        Ok((403, _)) => Verdict::Refuse(Refusal::Deny(403, None)),
        Ok(_) | Err(_) => Verdict::Refuse(Refusal::Deny(500, None)),
    }
}

/// The sub-request's head into `out`.
fn sub_request<'f>(
    auth: &ExternalAuth,
    asking: &Asking<'_>,
    fields: impl Iterator<Item = (&'f [u8], &'f [u8])>,
    certificate: Option<&CertFields>,
    out: &mut Vec<u8>,
) {
    let ours = certificate.map_or(&[][..], |c| &c[..]);
    out.clear();
    // nginx's subrequests are GETs unless `auth-method` says otherwise.
    out.extend_from_slice(auth.method.as_deref().map_or(&b"GET"[..], str::as_bytes));
    out.push(b' ');
    out.extend_from_slice(auth.target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    match &auth.service {
        AuthService::Backend { host, .. } => out.extend_from_slice(host.as_bytes()),
        AuthService::SameHost => out.extend_from_slice(asking.host),
    }
    out.extend_from_slice(b"\r\n");
    for (name, value) in fields {
        if NOT_PASSED.iter().any(|n| name.eq_ignore_ascii_case(n))
            || ours.iter().any(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
            || auth.set_headers.iter().any(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            continue;
        }
        push_field(out, name, value);
    }
    // `auth-proxy-set-headers`: nginx's `proxy_set_header` in the auth location.
    for (name, value) in auth.set_headers.iter() {
        push_field(out, name.as_bytes(), value.as_bytes());
    }
    // The client's own `ssl-client-*` fields were dropped above; an empty one of ours is not sent.
    for (name, value) in ours.iter().filter(|(_, v)| !v.is_empty()) {
        push_field(out, name.as_bytes(), value);
    }
    let scheme: &[u8] = if asking.tls { b"https" } else { b"http" };
    let mut url = Vec::with_capacity(16 + asking.host.len() + asking.target.len());
    url.extend_from_slice(scheme);
    url.extend_from_slice(b"://");
    url.extend_from_slice(asking.host);
    url.extend_from_slice(asking.target);
    push_field(out, b"x-original-url", &url);
    push_field(out, b"x-original-method", asking.method);
    if auth.method.is_some() {
        push_field(out, b"x-original-uri", asking.target);
        push_field(out, b"x-scheme", scheme);
    }
    push_field(out, b"x-sent-from", b"nginx-ingress-controller");
    let peer = asking.peer.to_string();
    push_field(out, b"x-real-ip", peer.as_bytes());
    push_field(out, b"x-forwarded-for", peer.as_bytes());
    let redirect = auth.request_redirect.as_deref().map_or(asking.target, str::as_bytes);
    push_field(out, b"x-auth-request-redirect", redirect);
    if !asking.request_id.is_empty() {
        push_field(out, b"x-request-id", asking.request_id);
    }
    out.extend_from_slice(b"\r\n");
}

fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Sends the sub-request `head` to the service and reads its answer's head: the status and the
/// fields. The answer's body is skipped when it is all there (the connection is pooled again),
/// else the connection is closed.
async fn exchange_with(
    worker: &Worker,
    table: &RouteTable,
    auth: &ExternalAuth,
    host: &[u8],
    head: &[u8],
) -> Result<(u16, HeaderMap), Failure> {
    let backend = match &auth.service {
        AuthService::Backend { backend, .. } => backend,
        AuthService::SameHost => {
            let host = std::str::from_utf8(host).unwrap_or("");
            let route = table.route(host, &auth.target).ok_or(ProxyError::NoRoute)?;
            &route.backend
        }
    };
    let to = Attempt::own_request(worker, backend)?;
    let timeout = to.connect_timeout;
    let mut tally = Tally::default();
    let mut request = worker.out_buffers.take();
    request.clear();
    request.extend_from_slice(head);
    let answered = exchange::attempt(worker, to, &mut tally, async |up: &mut UpstreamConn| {
        match worker.timeout(timeout, crate::base::buf::write_vec(&mut up.stream, &mut request)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(exchange::write_failed(up, Some(e.kind()))),
            Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
        }
        let watch = Watchdog::new(&worker.coarse_timer);
        exchange::read_response_head(up, &watch, timeout, Deadline::NONE, |data| {
            crate::codec::http2::fields::response_head(data, false)
        })
        .await
    })
    .await;
    worker.out_buffers.give(request);
    let (mut up, (response_head, response)) = answered?;
    up.buf.consume(response_head.head_len);
    let skipped = match response_head.body {
        Framing::None => true,
        Framing::Length(n) if up.buf.data().len() as u64 >= n => {
            up.buf.consume(n as usize);
            true
        }
        _ => false,
    };
    exchange::release(worker, up, skipped, &response_head);
    Ok((response_head.status, response.into_parts().0.headers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ramjet_shared::AuthService;

    #[test]
    fn the_sub_request_carries_the_fields_but_not_the_body() {
        let auth = ExternalAuth {
            service: AuthService::SameHost,
            url: "https://$host/oauth2/auth".into(),
            target: "/oauth2/auth".into(),
            method: None,
            response_headers: Box::new([]),
            signin: None,
            request_redirect: None,
            always_set_cookie: false,
            set_headers: Box::new([]),
        };
        let asking = Asking {
            method: b"POST",
            target: b"/cart?id=7",
            host: b"shop.test",
            peer: "10.0.0.9".parse().unwrap(),
            tls: true,
            request_id: b"abc",
        };
        let fields: [(&[u8], &[u8]); 4] = [
            (b"Host", b"shop.test"),
            (b"Cookie", b"_oauth2_proxy=x"),
            (b"Content-Length", b"4"),
            (b"X-Real-IP", b"1.2.3.4"),
        ];
        let mut out = Vec::new();
        sub_request(&auth, &asking, fields.into_iter(), None, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /oauth2/auth HTTP/1.1\r\nhost: shop.test\r\nCookie: _oauth2_proxy=x\r\n\
             x-original-url: https://shop.test/cart?id=7\r\nx-original-method: POST\r\n\
             x-sent-from: nginx-ingress-controller\r\nx-real-ip: 10.0.0.9\r\nx-forwarded-for: 10.0.0.9\r\n\
             x-auth-request-redirect: /cart?id=7\r\nx-request-id: abc\r\n\r\n"
        );
    }
}
