//! Helpers shared by the fuzz targets: an independent reading of HTTP/1 framing (httparse's), and
//! test certificates. See `docs/fuzzing.md`.

use std::sync::OnceLock;

/// The field lines of a head that `httparse` accepts, as (name, value) pairs; `None` when httparse
/// refuses the head or finds it incomplete.
pub fn fields(head: &[u8], response: bool) -> Option<Vec<(String, Vec<u8>)>> {
    let mut headers = vec![httparse::EMPTY_HEADER; 256];
    let complete = if response {
        let mut r = httparse::Response::new(&mut headers);
        matches!(r.parse(head), Ok(httparse::Status::Complete(n)) if n == head.len())
    } else {
        let mut r = httparse::Request::new(&mut headers);
        matches!(r.parse(head), Ok(httparse::Status::Complete(n)) if n == head.len())
    };
    if !complete {
        return None;
    }
    Some(
        headers
            .iter()
            .take_while(|h| !h.name.is_empty())
            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
            .collect(),
    )
}

/// How many fields of `fields` are named `name` (lower case).
pub fn count(fields: &[(String, Vec<u8>)], name: &str) -> usize {
    fields.iter().filter(|(n, _)| n == name).count()
}

/// Every line of a head ramjet writes ends with CRLF: no bare CR or LF anywhere else.
pub fn lines_end_with_crlf(head: &[u8]) -> bool {
    head.iter().enumerate().all(|(i, &b)| match b {
        b'\n' => i > 0 && head[i - 1] == b'\r',
        b'\r' => head.get(i + 1) == Some(&b'\n'),
        _ => true,
    })
}

/// What a chunked body decodes to: bytes consumed, payload, and whether the body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub consumed: usize,
    pub payload: Vec<u8>,
    pub done: bool,
}

/// What a second parser makes of a chunked body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// It refuses the body: nothing is forwarded past it.
    Refused,
    /// It waits for more bytes: it would take what follows (the next request) as body.
    Incomplete,
    Complete(Decoded),
}

/// A second reading of a chunked body with httparse's chunk-size and field parsers: what another
/// proxy or server built on httparse (hyper, for one) takes as the end of the body.
pub fn reference_chunked(input: &[u8]) -> Reading {
    let mut at = 0;
    let mut payload = Vec::new();
    loop {
        let (size_len, size) = match httparse::parse_chunk_size(&input[at..]) {
            Ok(httparse::Status::Complete(c)) => c,
            Ok(httparse::Status::Partial) => return Reading::Incomplete,
            Err(_) => return Reading::Refused,
        };
        at += size_len;
        if size == 0 {
            break;
        }
        let Some(end) = usize::try_from(size).ok().and_then(|s| at.checked_add(s)) else {
            return Reading::Incomplete;
        };
        let Some(data) = input.get(at..end) else { return Reading::Incomplete };
        payload.extend_from_slice(data);
        match input.get(end..end + 2) {
            Some(b"\r\n") => at = end + 2,
            Some(_) => return Reading::Refused,
            None if input[end..].iter().all(|&b| b == b'\r') => return Reading::Incomplete,
            None => return Reading::Refused,
        }
    }
    // The trailer section: fields, then an empty line.
    let mut headers = vec![httparse::EMPTY_HEADER; 4096];
    match httparse::parse_headers(&input[at..], &mut headers) {
        Ok(httparse::Status::Complete((n, _))) => Reading::Complete(Decoded { consumed: at + n, payload, done: true }),
        Ok(httparse::Status::Partial) => Reading::Incomplete,
        Err(_) => Reading::Refused,
    }
}

/// Two certificate/key pairs (`a.test`, `*.b.test`) made once per process, in PEM, and the first
/// certificate in DER.
pub struct TestCerts {
    pub pems: [(String, String); 2],
    pub der: Vec<u8>,
}

pub fn test_certs() -> &'static TestCerts {
    static CERTS: OnceLock<TestCerts> = OnceLock::new();
    CERTS.get_or_init(|| {
        let make = |host: &str| rcgen::generate_simple_self_signed(vec![host.to_string()]).expect("rcgen");
        let a = make("a.test");
        let b = make("*.b.test");
        let der = a.cert.der().to_vec();
        TestCerts {
            pems: [(a.cert.pem(), a.signing_key.serialize_pem()), (b.cert.pem(), b.signing_key.serialize_pem())],
            der,
        }
    })
}

/// `der` as a PEM certificate block.
pub fn pem_certificate(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or(""));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}
