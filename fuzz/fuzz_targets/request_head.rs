//! Arbitrary bytes as a request head. `parse_request` never panics, and whatever it accepts, the
//! head it writes for the upstream (`out`) says the same thing to the next parser: re-parsed, it is
//! accepted with the same body framing, host and target, it is its own fixed point, and httparse
//! finds exactly one Host and at most one framing field in it. What ramjet forwards is unambiguous.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ramjet_dataplane::codec::http1::{parse_request, Framing};
use ramjet_dataplane::conn::ConnFacts;
use ramjet_dataplane::ProxyError;

/// Most fields `parse_request` accepts (`http1::head::MAX_HEADERS`, which is not exported).
const MAX_HEADERS: usize = 128;
use ramjet_fuzz::{count, fields, lines_end_with_crlf};

/// The endpoint the proxy names in the Host line it adds to an HTTP/1.0 request that had none.
const ENDPOINT_HOST: &[u8] = b"host: 192.0.2.7:8080\r\n";

fuzz_target!(|data: &[u8]| {
    let facts = ConnFacts::new("192.0.2.1:40000".parse().unwrap(), false, 8080);
    let mut out = Vec::new();
    let Ok(Some(head)) = parse_request(data, &facts, &mut out) else { return };
    assert!(head.head_len <= data.len());
    let host = &data[head.host.clone()];
    let target = &data[head.target.clone()];

    // The same head, with nothing after it, parses the same.
    let mut again = Vec::new();
    let exact = parse_request(&data[..head.head_len], &facts, &mut again).expect("the head alone").expect("complete");
    assert_eq!((exact.head_len, exact.body, &again), (head.head_len, head.body, &out));

    // The upstream head. Without a Host (HTTP/1.0), the proxy inserts the endpoint after the
    // request line (proxy.rs `insert_host`).
    let mut upstream = out.clone();
    if host.is_empty() {
        assert_eq!(head.minor, 0, "only HTTP/1.0 goes without a Host");
        let line_end = upstream.iter().position(|&b| b == b'\n').unwrap() + 1;
        upstream.splice(line_end..line_end, ENDPOINT_HOST.iter().copied());
    }
    assert!(lines_end_with_crlf(&upstream), "{:?}", String::from_utf8_lossy(&upstream));
    let seen = fields(&upstream, false)
        .unwrap_or_else(|| panic!("httparse refuses the upstream head {:?}", String::from_utf8_lossy(&upstream)));
    assert_eq!(count(&seen, "host"), 1, "{:?}", String::from_utf8_lossy(&upstream));
    let framing = count(&seen, "content-length") + count(&seen, "transfer-encoding");
    assert!(framing <= 1, "{:?}", String::from_utf8_lossy(&upstream));
    match head.body {
        Framing::None => assert_eq!(framing, 0),
        Framing::Length(_) | Framing::Chunked => assert_eq!(framing, 1),
        Framing::UntilClose => panic!("a request body is never delimited by close"),
    }

    // Ramjet itself reads the upstream head the same way, and would write it unchanged. (Except
    // when the client sent nearly MAX_HEADERS fields: with the ones ramjet adds, the upstream head
    // has more than ramjet's own limit; an upstream with that limit refuses it, which is no
    // ambiguity. httparse's reading above, with room for more, covers it.)
    let mut twice = Vec::new();
    let re = match parse_request(&upstream, &facts, &mut twice) {
        Ok(Some(re)) => re,
        Err(ProxyError::HeadTooLarge) if seen.len() > MAX_HEADERS => return,
        Ok(None) => panic!("the upstream head {:?} is incomplete", String::from_utf8_lossy(&upstream)),
        Err(e) => panic!("{e}: the upstream head {:?} is refused", String::from_utf8_lossy(&upstream)),
    };
    assert_eq!(re.head_len, upstream.len());
    assert_eq!(re.body, head.body, "{:?}", String::from_utf8_lossy(&upstream));
    assert_eq!(re.upgrade, head.upgrade);
    assert_eq!(re.is_head, head.is_head);
    assert_eq!(re.expect_continue, false, "Expect is answered by the proxy, never forwarded");
    if !host.is_empty() {
        assert_eq!(&upstream[re.host.clone()], host);
    }
    let expected_target: Vec<u8> =
        if target.first() == Some(&b'/') || target == b"*" { target.to_vec() } else { [b"/", target].concat() };
    assert_eq!(&upstream[re.target.clone()], &expected_target[..]);
    // The client's X-Forwarded-For and -Host go on as ramjet's X-Original-Forwarded-*, once each
    // (a client's own fields of those names never pass).
    assert!(count(&seen, "x-original-forwarded-for") <= 1, "{:?}", String::from_utf8_lossy(&upstream));
    assert!(count(&seen, "x-original-forwarded-host") <= 1, "{:?}", String::from_utf8_lossy(&upstream));
    if !host.is_empty() {
        // (With the Host the proxy added, the re-read adds its x-forwarded-host too; and a second
        // hop names the first hop's X-Forwarded-* as the originals, which are left out here.)
        let theirs = |head: &[u8]| -> Vec<u8> {
            let lines = head.split_inclusive(|&b| b == b'\n');
            lines.filter(|l| !l.starts_with(b"x-original-forwarded-")).flatten().copied().collect()
        };
        assert_eq!(theirs(&twice), theirs(&upstream), "the upstream head is a fixed point");
    }
});
