use http::Request;

use super::answer::render;
use super::preface;
use crate::codec::http2::fields::{host, response_head, upstream_head};
use crate::error::ProxyError;
use crate::pipeline::answer::LocalAnswer;
use crate::{codec::http1::Framing, conn::ConnFacts};

#[test]
fn the_preface_is_recognised_whole_in_part_and_not_otherwise() {
    assert_eq!(preface(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04"), Some(true));
    assert_eq!(preface(b"PRI * HTTP/2.0\r\n"), None, "a partial preface asks for more");
    assert_eq!(preface(b"P"), None);
    assert_eq!(preface(b"POST / HTTP/1.1\r\n"), Some(false));
    assert_eq!(preface(b"PRI * HTTP/1.1\r\n\r\n"), Some(false));
}

fn head(request: Request<()>, end_of_stream: bool) -> Result<(Framing, String), ProxyError> {
    let facts = ConnFacts::new("10.1.2.3:5555".parse().unwrap(), true, 443);
    let (parts, ()) = request.into_parts();
    let host = host(&parts)?.to_string();
    let mut out = Vec::new();
    let framing = upstream_head(&parts, &host, (&facts, None), end_of_stream, &mut out)?;
    Ok((framing, String::from_utf8(out).unwrap()))
}

#[test]
fn the_upstream_head_is_written_by_ramjet() {
    let request = Request::post("https://Example.com:8443/a?b=1")
        .header("cookie", "a=1")
        .header("x-custom", "yes")
        .header("cookie", "b=2")
        .header("te", "trailers")
        .header("x-forwarded-for", "6.6.6.6")
        .header("host", "other.org")
        .body(())
        .unwrap();
    let (framing, out) = head(request, false).unwrap();
    assert_eq!(framing, Framing::Chunked, "no length and more to come: chunked");
    assert!(out.starts_with("POST /a?b=1 HTTP/1.1\r\nhost: Example.com:8443\r\n"), "{out}");
    assert!(out.contains("x-custom: yes\r\n") && out.contains("cookie: a=1; b=2\r\n"), "{out}");
    assert!(out.contains("transfer-encoding: chunked\r\n"), "{out}");
    assert!(out.contains("x-forwarded-proto: https\r\nx-forwarded-port: 443\r\n"), "{out}");
    assert!(out.contains("x-forwarded-host: Example.com:8443\r\n") && out.ends_with("\r\n\r\n"), "{out}");
    // The client's X-Forwarded-For goes on only as its own claim (ingress-nginx's name for it).
    assert!(out.contains("x-original-forwarded-for: 6.6.6.6\r\n"), "{out}");
    let out = out.replace("x-original-forwarded-for: 6.6.6.6\r\n", "");
    for gone in ["te:", "6.6.6.6", "other.org"] {
        assert!(!out.contains(gone), "{gone}: {out}");
    }
}

#[test]
fn the_body_framing_follows_what_the_client_declared() {
    let with_length = Request::put("http://h/x").header("content-length", "5").body(()).unwrap();
    let (framing, out) = head(with_length, false).unwrap();
    assert_eq!(framing, Framing::Length(5));
    assert_eq!(out.matches("content-length: 5\r\n").count(), 1, "{out}");
    let (framing, out) = head(Request::get("http://h/").body(()).unwrap(), true).unwrap();
    assert_eq!(framing, Framing::None);
    assert!(!out.contains("content-length") && !out.contains("transfer-encoding"), "{out}");
    let conflicting =
        Request::post("http://h/").header("content-length", "5").header("content-length", "6").body(()).unwrap();
    assert!(matches!(head(conflicting, false), Err(ProxyError::BadRequest(_))));
}

#[test]
fn bad_hosts_and_connect_are_refused() {
    let connect = Request::connect("h:443").body(()).unwrap();
    assert!(matches!(head(connect, true), Err(ProxyError::BadRequest(_))));
    let userinfo = Request::get("http://user@h/").body(()).unwrap();
    assert!(matches!(head(userinfo, true), Err(ProxyError::BadRequest(_))));
    let (parts, ()) = Request::get("/").body(()).unwrap().into_parts();
    assert!(matches!(host(&parts), Err(ProxyError::BadRequest(_))), "no :authority, no Host");
}

#[test]
fn response_fields_drop_hop_by_hop_and_keep_the_length() {
    let raw = b"HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nContent-Length: 3\r\nX-App: Yes\r\nSet-Cookie: a\r\nSet-Cookie: b\r\n\r\nabc";
    let (head, response) = response_head(raw, false).unwrap().unwrap();
    assert_eq!((head.status, head.body, head.reusable), (200, Framing::Length(3), false));
    let fields = response.headers();
    assert_eq!(fields.get("content-length").unwrap(), "3");
    assert_eq!(fields.get("x-app").unwrap(), "Yes");
    assert_eq!(fields.get_all("set-cookie").iter().count(), 2);
    for gone in ["connection", "x-hop", "keep-alive", "transfer-encoding"] {
        assert!(fields.get(gone).is_none(), "{gone}");
    }
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (head, response) = response_head(chunked, false).unwrap().unwrap();
    assert_eq!(head.body, Framing::Chunked);
    assert!(
        response.headers().get("transfer-encoding").is_none() && response.headers().get("content-length").is_none()
    );
    // HEAD keeps the length the full answer would have had; interim answers come back bare.
    let (head, response) = response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true).unwrap().unwrap();
    assert_eq!((head.body, response.headers().get("content-length").unwrap().to_str().unwrap()), (Framing::None, "9"));
    let (head, _) = response_head(b"HTTP/1.1 100 Continue\r\n\r\n", false).unwrap().unwrap();
    assert_eq!(head.status, 100);
    assert!(response_head(b"HTTP/1.1 200 OK\r\nContent-Le", false).unwrap().is_none());
}

#[test]
fn ramjets_own_answers_carry_length_type_and_date() {
    let date = b"Sun, 06 Nov 1994 08:49:37 GMT";
    let (response, body) = render(&LocalAnswer::Status(503), date);
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers().get("content-length").unwrap().to_str().unwrap(), body.len().to_string());
    assert_eq!(response.headers().get("date").unwrap(), "Sun, 06 Nov 1994 08:49:37 GMT");
    let (response, body) = render(
        &LocalAnswer::HttpsRedirect { host: "example.com", target: "/a?b", slash: ramjet_shared::TrailingSlash::Drop },
        date,
    );
    assert_eq!((response.status().as_u16(), body.len()), (308, 0));
    assert_eq!(response.headers().get("location").unwrap(), "https://example.com/a?b");
}
