use super::*;

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
    assert!(out.starts_with("GET /a?b=1 HTTP/1.1\r\nHost: Example.com\r\nAccept: */*\r\n"), "{out}");
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

#[test]
fn connection_named_headers_and_spoofed_forwarded_headers_are_dropped() {
    let raw = "GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Secret\r\nX-Secret: 1\r\nX-Forwarded-For: 6.6.6.6\r\nKeep-Alive: 5\r\nTE: trailers\r\n\r\n";
    let (head, out) = parse(raw).unwrap().unwrap();
    assert!(!head.keep_alive);
    assert!(!out.contains("X-Secret"));
    assert!(!out.contains("6.6.6.6"));
    assert!(!out.contains("Keep-Alive"));
    assert!(!out.contains("TE:"));
}

#[test]
fn http10_keep_alive_only_when_asked() {
    let (head, _) = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(!head.keep_alive);
    assert!(head.host.is_empty());
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
    assert!(out.contains("Transfer-Encoding: chunked\r\n"));
    let (head, _) =
        parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n").unwrap().unwrap();
    assert_eq!(head.body, Framing::Length(3));
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
    assert!(out.starts_with("GET /p?q HTTP/1.1\r\n"));
}

#[test]
fn smuggling_vectors_are_refused() {
    for raw in [
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n",
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
    let many: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{i}: v\r\n")).collect();
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
    assert_eq!(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\n");

    let (head, keep, out) = respond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", plan(1));
    assert_eq!(head.body, Framing::Chunked);
    assert!(keep);
    assert!(out.contains("Transfer-Encoding: chunked"));

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
