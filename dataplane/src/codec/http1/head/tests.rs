use super::*;
use crate::conn::ConnFacts;
use crate::error::ProxyError;

fn conn() -> ConnFacts {
    ConnFacts::new("10.1.2.3:5555".parse().unwrap(), false, 8080)
}

fn parse(raw: &str) -> Result<Option<(RequestHead, String)>, ProxyError> {
    let mut out = Vec::new();
    parse_request(raw.as_bytes(), &conn(), &mut out).map(|r| r.map(|h| (h, String::from_utf8(out).unwrap())))
}

fn bad(raw: &str) -> ProxyError {
    parse(raw).expect_err(raw)
}

#[test]
fn simple_get_is_forwarded_with_forwarded_headers() {
    let raw = "GET /a?b=1 HTTP/1.1\r\nHost: Example.com\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n";
    let (head, out) = parse(raw).unwrap().unwrap();
    assert_eq!(head.head_len, raw.len());
    assert_eq!(&raw[head.host.clone()], "Example.com");
    assert_eq!(&raw[head.target.clone()], "/a?b=1");
    assert!(head.keep_alive);
    assert_eq!(head.body, Framing::None);
    assert!(out.starts_with("GET /a?b=1 HTTP/1.1\r\nhost: Example.com\r\nAccept: */*\r\n"), "{out}");
    assert!(!out.to_ascii_lowercase().contains("connection"), "{out}");
    assert!(out.contains("x-forwarded-for: 10.1.2.3\r\n"));
    assert!(out.contains("x-forwarded-proto: http\r\n"));
    assert!(out.contains("x-forwarded-host: Example.com\r\n"));
    assert!(out.ends_with("\r\n\r\n"));
}

#[test]
fn partial_heads_ask_for_more() {
    assert!(parse("GET / HTTP/1.1\r\nHost: a").unwrap().is_none());
    assert!(parse("GE").unwrap().is_none());
}

/// Found by the `request_head` fuzz target (2026-12-06): the client's X-Forwarded-For and -Host go
/// on once, as ramjet's X-Original-Forwarded-For and -Host; a client's own fields of those names
/// never pass, so the backend never sees two lines, or a line the client wrote alone; and a second
/// hop through ramjet reads the first's head the same way.
#[test]
fn the_originals_are_ramjets_and_never_the_clients() {
    let raw = "T /ws HTTP/1.1\r\nHost: )\r\nX-Original-Forwarded-For: 6.6.6.6\r\nX-Forwarded-For: 1.2.3.4\r\n\
               x-original-forwarded-host: evil\r\n\r\n";
    let (_, out) = parse(raw).unwrap().unwrap();
    assert_eq!(out.matches("x-original-forwarded-for").count(), 1, "{out}");
    assert!(out.contains("x-original-forwarded-for: 1.2.3.4\r\n"), "{out}");
    assert!(!out.contains("6.6.6.6") && !out.contains("evil"), "{out}");
    let (_, again) = parse(&out).unwrap().unwrap();
    fn theirs(head: &str) -> Vec<&str> {
        head.lines().filter(|l| !l.starts_with("x-original-forwarded-")).collect()
    }
    assert_eq!(theirs(&again), theirs(&out));
    assert!(again.contains("x-original-forwarded-for: 10.1.2.3\r\n"), "the second hop names the first's: {again}");
}

#[test]
fn connection_named_headers_and_spoofed_forwarded_headers_are_dropped() {
    let raw = "GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Secret\r\nX-Secret: 1\r\nX-Forwarded-For: 6.6.6.6\r\nKeep-Alive: 5\r\nTE: trailers\r\n\r\n";
    let (head, out) = parse(raw).unwrap().unwrap();
    assert!(!head.keep_alive);
    assert!(!out.contains("X-Secret"));
    // The client's X-Forwarded-For goes on only as its own claim (ingress-nginx's name for it).
    assert!(out.contains("x-original-forwarded-for: 6.6.6.6\r\n"), "{out}");
    assert!(!out.replace("x-original-forwarded-for: 6.6.6.6\r\n", "").contains("6.6.6.6"), "{out}");
    assert!(!out.contains("Keep-Alive"));
    assert!(!out.contains("TE:"));
}

#[test]
fn http10_keep_alive_only_when_asked() {
    let (head, out) = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(!head.keep_alive);
    assert!(head.host.is_empty());
    assert!(!out.to_ascii_lowercase().contains("host:"), "the proxy adds the endpoint as Host: {out}");
    let (head, _) = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap().unwrap();
    assert!(head.keep_alive);
}

#[test]
fn bodies_and_expect() {
    let (head, out) =
        parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n").unwrap().unwrap();
    assert_eq!(head.body, Framing::Length(5));
    assert!(head.expect_continue);
    assert!(!out.contains("Expect"));
    let (head, out) = parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap().unwrap();
    assert_eq!(head.body, Framing::Chunked);
    assert!(out.contains("transfer-encoding: chunked\r\n") && !out.contains("Transfer-Encoding"), "{out}");
    // Equal Content-Length values (repeated or as a list) are collapsed into the one ramjet writes.
    for raw in [
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n",
    ] {
        let (head, out) = parse(raw).unwrap().unwrap();
        assert_eq!(head.body, Framing::Length(3));
        assert_eq!(out.to_ascii_lowercase().matches("content-length").count(), 1, "{out}");
        assert!(out.contains("content-length: 3\r\n"), "{out}");
    }
    // An explicit empty body says so upstream.
    let (head, out) = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").unwrap().unwrap();
    assert!(!head.body.has_body());
    assert!(out.contains("content-length: 0\r\n"), "{out}");
}

#[test]
fn upgrade_is_forwarded() {
    let raw =
        "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: x\r\n\r\n";
    let (head, out) = parse(raw).unwrap().unwrap();
    assert!(head.upgrade);
    assert!(out.contains("connection: upgrade\r\nupgrade: websocket\r\n"));
    assert!(out.contains("Sec-WebSocket-Key: x"));
}

#[test]
fn absolute_form_takes_host_from_target() {
    let raw = "GET http://Example.com:80/p?q HTTP/1.1\r\nHost: other\r\n\r\n";
    let (head, out) = parse(raw).unwrap().unwrap();
    assert_eq!(&raw[head.host.clone()], "Example.com:80");
    assert_eq!(&raw[head.target.clone()], "/p?q");
    assert!(out.starts_with("GET /p?q HTTP/1.1\r\nhost: Example.com:80\r\n"), "{out}");
    assert!(!out.contains("other"), "the client's Host is replaced: {out}");
    let (head, out) = parse("GET HTTP://a.example?x=1 HTTP/1.1\r\n\r\n").unwrap().unwrap();
    assert_eq!(&"GET HTTP://a.example?x=1 HTTP/1.1\r\n\r\n"[head.host.clone()], "a.example");
    assert!(out.starts_with("GET /?x=1 HTTP/1.1\r\nhost: a.example\r\n"), "{out}");
}

#[test]
fn connection_never_removes_framing_or_routing_fields() {
    let (head, out) =
        parse("POST / HTTP/1.1\r\nHost: localhost\r\nConnection: Content-Length\r\nContent-Length: 57\r\n\r\n")
            .unwrap()
            .unwrap();
    assert_eq!(head.body, Framing::Length(57));
    assert!(out.contains("content-length: 57\r\n"), "{out}");
    let (head, out) = parse(
        "POST / HTTP/1.1\r\nHost: a\r\nConnection: Transfer-Encoding, Host\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap()
    .unwrap();
    assert_eq!(head.body, Framing::Chunked);
    assert!(out.contains("transfer-encoding: chunked\r\n") && out.contains("host: a\r\n"), "{out}");
}

#[test]
fn hosts_are_validated() {
    for host in ["a, b", "a b", "", "user@a", "a:80x", "[::1", "a:123456", "a\\b"] {
        let raw = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert!(matches!(bad(&raw), ProxyError::BadRequest(_)), "{raw:?}");
    }
    for host in ["a", "a.example:8080", "[::1]:443", "127.0.0.1", "xn--bcher-kva.example", "a:"] {
        let raw = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert!(parse(&raw).is_ok(), "{raw:?}");
    }
    assert!(matches!(bad("GET http://user:pw@a/ HTTP/1.1\r\nHost: a\r\n\r\n"), ProxyError::BadRequest(_)));
    assert!(matches!(bad("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n"), ProxyError::BadRequest(_)));
}

#[test]
fn transfer_encoding_must_be_exactly_chunked() {
    for raw in [
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert!(matches!(bad(raw), ProxyError::BadRequest(_)), "{raw:?}");
    }
    for raw in [
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n",
    ] {
        assert!(matches!(bad(raw), ProxyError::NotImplemented(_)), "{raw:?}");
    }
    let (_, out) = parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  Chunked \r\n\r\n").unwrap().unwrap();
    assert!(out.contains("transfer-encoding: chunked\r\n"), "{out}");
}

#[test]
fn h2c_upgrades_are_not_relayed() {
    let raw = "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n";
    let (head, out) = parse(raw).unwrap().unwrap();
    assert!(!head.upgrade);
    let lower = out.to_ascii_lowercase();
    assert!(!lower.contains("upgrade") && !lower.contains("http2-settings"), "{out}");
}

#[test]
fn smuggling_vectors_are_refused() {
    for raw in [
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n two\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
        "GET nothost HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        assert!(matches!(bad(raw), ProxyError::BadRequest(_)), "{raw:?}");
    }
}

#[test]
fn size_limits() {
    let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(MAX_URI + 1));
    assert_eq!(bad(&long), ProxyError::UriTooLong);
    let many: String = (0..super::common::MAX_HEADERS + 1).map(|i| format!("X-{i}: v\r\n")).collect();
    assert_eq!(bad(&format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n")), ProxyError::HeadTooLarge);
}

fn respond(raw: &str, plan: ResponsePlan) -> (ResponseHead, bool, String) {
    let mut out = Vec::new();
    let (head, keep) = parse_response(raw.as_bytes(), &plan, &mut out).unwrap().unwrap();
    (head, keep, String::from_utf8(out).unwrap())
}

fn plan(minor: u8) -> ResponsePlan {
    ResponsePlan { is_head: false, client_minor: minor, keep_alive: true }
}

#[test]
fn responses_keep_framing_and_drop_hop_by_hop() {
    let (head, keep, out) =
        respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=5\r\nX-A: b\r\n\r\nok", plan(1));
    assert_eq!(head.body, Framing::Length(2));
    assert!(head.reusable && keep);
    assert_eq!(out, "HTTP/1.1 200 OK\r\nX-A: b\r\ncontent-length: 2\r\n\r\n");

    let (head, keep, out) = respond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", plan(1));
    assert_eq!(head.body, Framing::Chunked);
    assert!(keep);
    assert!(out.contains("transfer-encoding: chunked"));

    let (_, keep, out) = respond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", plan(0));
    assert!(!keep, "HTTP/1.0 clients get the body decoded and delimited by close");
    assert!(!out.contains("Transfer-Encoding") && out.contains("connection: close"));

    let (head, keep, _) = respond("HTTP/1.1 200 OK\r\n\r\n", plan(1));
    assert_eq!(head.body, Framing::UntilClose);
    assert!(!head.reusable && !keep);

    let (head, _, _) = respond("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", plan(1));
    assert_eq!(head.body, Framing::None);
    let (head, _, _) = respond(
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        ResponsePlan { is_head: true, client_minor: 1, keep_alive: true },
    );
    assert_eq!(head.body, Framing::None);

    let (head, _, out) =
        respond("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", plan(1));
    assert_eq!(head.status, 101);
    assert!(out.contains("Connection: Upgrade") && out.contains("Upgrade: websocket"));

    let (head, _, _) = respond("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", plan(1));
    assert!(!head.reusable);
}

/// Found by the `response_head` fuzz target: httparse skips empty lines before the status line, but
/// the status line copied for the client was the first line, so the client got `HTTP/1.1 \r\n`.
#[test]
fn empty_lines_before_the_status_line_are_skipped() {
    for (raw, status_line) in [
        ("\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200 OK\r\n"),
        ("\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 404 Not Found\r\n"),
    ] {
        let (_, _, out) = respond(raw, plan(1));
        assert!(out.starts_with(status_line), "{out:?}");
    }
}

#[test]
fn ambiguous_responses_are_refused() {
    let refused = |raw: &str| {
        let mut out = Vec::new();
        parse_response(raw.as_bytes(), &plan(1), &mut out).expect_err(raw)
    };
    for raw in [
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert_eq!(refused(raw), ProxyError::Upstream(ramjet_shared::UpstreamErrorKind::Protocol), "{raw:?}");
    }
    // Equal lengths collapse into one field.
    let (head, _, out) = respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", plan(1));
    assert_eq!(head.body, Framing::Length(2));
    assert_eq!(out.matches("content-length").count(), 1, "{out}");
    // Fields the upstream's Connection names are hop-by-hop too.
    let (_, _, out) =
        respond("HTTP/1.1 200 OK\r\nConnection: X-Internal\r\nX-Internal: 1\r\nContent-Length: 0\r\n\r\n", plan(1));
    assert!(!out.contains("X-Internal"), "{out}");
}
