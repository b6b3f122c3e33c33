//! Arbitrary bytes as an upstream response head, answered under every `ResponsePlan` (HEAD or not,
//! HTTP/1.0 or 1.1 client, keep-alive or not). `parse_response` never panics, and whatever it
//! accepts, the head written for the client is one httparse accepts, with CRLF line ends, at most one
//! framing field (never chunked towards HTTP/1.0), the framing ramjet relays, and `connection: close`
//! whenever the client connection will not be kept.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ramjet_dataplane::codec::http1::{parse_response, Framing, ResponsePlan};
use ramjet_fuzz::{count, fields, lines_end_with_crlf};

fuzz_target!(|data: &[u8]| {
    for is_head in [false, true] {
        for client_minor in [0, 1] {
            for keep_alive in [false, true] {
                let plan = ResponsePlan { is_head, client_minor, keep_alive };
                let mut out = Vec::new();
                let Ok(Some((head, keep_client))) = parse_response(data, &plan, &mut out) else { continue };
                let shown = String::from_utf8_lossy(&out);
                assert!(head.head_len <= data.len());
                assert!(lines_end_with_crlf(&out), "{shown:?}");
                let seen = fields(&out, true).unwrap_or_else(|| panic!("httparse refuses the client head {shown:?}"));
                let mut headers = [httparse::EMPTY_HEADER; 256];
                let mut parsed = httparse::Response::new(&mut headers);
                parsed.parse(&out).expect("parsed above");
                assert_eq!(parsed.code, Some(head.status), "{shown:?}");
                let lengths = count(&seen, "content-length");
                let chunked = count(&seen, "transfer-encoding");
                assert!(lengths + chunked <= 1, "{shown:?}");
                if client_minor == 0 {
                    assert_eq!(chunked, 0, "no chunked framing towards HTTP/1.0: {shown:?}");
                }
                let value = |name: &str| seen.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
                match head.body {
                    Framing::Length(n) => {
                        assert_eq!(value("content-length"), Some(n.to_string().into_bytes()), "{shown:?}")
                    }
                    Framing::Chunked if client_minor == 1 => assert_eq!(chunked, 1, "{shown:?}"),
                    Framing::Chunked | Framing::UntilClose => {
                        assert!(!keep_client, "a body delimited by close ends the connection");
                        assert_eq!(lengths + chunked, 0, "{shown:?}");
                    }
                    Framing::None => {}
                }
                if keep_client {
                    assert!(keep_alive && head.status != 101);
                } else if head.status != 101 {
                    let close = value("connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
                    assert!(close, "{shown:?}");
                }
                if head.reusable {
                    assert!(!matches!(head.body, Framing::UntilClose) && head.status != 101);
                }
            }
        }
    }
});
