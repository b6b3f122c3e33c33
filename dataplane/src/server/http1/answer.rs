//! HTTP/1.1's spelling of the answers ramjet makes itself ([`LocalAnswer`]): a status line, the
//! answer's fields, then `x-request-id`, a `date` from the worker's clock and, when the connection
//! ends, `connection: close`.

use crate::codec::http1::head::push_decimal;
use crate::pipeline::answer::{AnswerHead, LocalAnswer};

/// Writes an answer's head as HTTP/1.1 text.
struct Http1Head<'o>(&'o mut Vec<u8>);

impl AnswerHead for Http1Head<'_> {
    fn status(&mut self, status: u16, reason: &str) {
        self.0.extend_from_slice(b"HTTP/1.1 ");
        push_decimal(self.0, u64::from(status));
        self.0.push(b' ');
        self.0.extend_from_slice(reason.as_bytes());
        self.0.extend_from_slice(b"\r\n");
    }

    fn compiled(&mut self, _status: u16, head: &[u8]) {
        self.0.extend_from_slice(head);
    }

    fn compiled_with(&mut self, _status: u16, write: impl FnOnce(&mut Vec<u8>)) {
        write(self.0);
    }

    fn field(&mut self, name: &'static str, value: &[u8]) {
        self.field_with(name, |out| out.extend_from_slice(value));
    }

    fn field_with(&mut self, name: &'static str, value: impl FnOnce(&mut Vec<u8>)) {
        self.0.extend_from_slice(name.as_bytes());
        self.0.extend_from_slice(b": ");
        value(self.0);
        self.0.extend_from_slice(b"\r\n");
    }
}

/// Renders `answer` into `out`: `close` adds `connection: close`, a non-empty `request_id` an
/// `x-request-id` field. The answer to a `HEAD` request (`is_head`) has no body (RFC 9110 §9.3.2):
/// its length is said, its bytes are not sent.
pub(crate) fn render(
    answer: &LocalAnswer<'_>,
    is_head: bool,
    close: bool,
    date: &[u8],
    request_id: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    let body = answer.write(&mut Http1Head(out));
    if !request_id.is_empty() {
        out.extend_from_slice(b"x-request-id: ");
        out.extend_from_slice(request_id);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(if close { b"\r\nconnection: close\r\n\r\n" } else { b"\r\n\r\n" });
    if !is_head {
        out.extend_from_slice(body);
    }
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
                render(&LocalAnswer::Status(status), false, close, date, b"", &mut out);
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
