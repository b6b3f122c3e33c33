//! HTTP/2's spelling of the answers ramjet makes itself ([`LocalAnswer`]): a `Response` with the
//! answer's fields and a `date`, and the body to send after it (copied into the stream's send
//! buffer by the caller, as a backend's body is).

use http::header::{HeaderName, HeaderValue, DATE};
use http::{Response, StatusCode};

use crate::pipeline::answer::{AnswerHead, LocalAnswer};

/// Builds an answer's response head; `value` is scratch memory for values written in place.
struct H2Head {
    response: Response<()>,
    value: Vec<u8>,
}

impl H2Head {
    fn append(&mut self, name: &[u8], value: &[u8]) {
        // A field HTTP/2 cannot carry is dropped; the compiler only writes ones it can.
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            self.response.headers_mut().append(name, value);
        }
    }
}

impl AnswerHead for H2Head {
    fn status(&mut self, status: u16, _reason: &str) {
        *self.response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    }

    fn compiled(&mut self, status: u16, head: &[u8]) {
        self.status(status, "");
        // The status line, then fields.
        for line in head.split(|&b| b == b'\n').skip(1).map(|l| l.strip_suffix(b"\r").unwrap_or(l)) {
            if let Some(colon) = line.iter().position(|&b| b == b':') {
                self.append(&line[..colon], line[colon + 1..].trim_ascii());
            }
        }
    }

    fn compiled_with(&mut self, status: u16, write: impl FnOnce(&mut Vec<u8>)) {
        let mut head = std::mem::take(&mut self.value);
        head.clear();
        write(&mut head);
        self.compiled(status, &head);
        self.value = head;
    }

    fn field(&mut self, name: &'static str, value: &[u8]) {
        self.append(name.as_bytes(), value);
    }

    fn field_with(&mut self, name: &'static str, value: impl FnOnce(&mut Vec<u8>)) {
        let mut written = std::mem::take(&mut self.value);
        written.clear();
        value(&mut written);
        self.append(name.as_bytes(), &written);
        self.value = written;
    }
}

/// The response head (with a `date`) and the body of `answer`.
pub(crate) fn render<'a>(answer: &'a LocalAnswer<'_>, date: &[u8]) -> (Response<()>, &'a [u8]) {
    let mut head = H2Head { response: Response::new(()), value: Vec::new() };
    let body = answer.write(&mut head);
    if let Ok(date) = HeaderValue::from_bytes(date) {
        head.response.headers_mut().insert(DATE, date);
    }
    (head.response, body)
}
