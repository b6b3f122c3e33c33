//! What request and response heads share: the limits, the framing, `Connection` options and
//! transfer codings as parsed, and the small writers every head uses.

use std::ops::Range;

/// Most fields accepted in a request or response head.
pub const MAX_HEADERS: usize = 128;

/// Room for a head's fields, left uninitialised: httparse writes the ones it parses, and filling
/// 128 empty fields first cost more than parsing a short head.
pub(crate) type Headers<'b> = [std::mem::MaybeUninit<httparse::Header<'b>>; MAX_HEADERS];

pub(crate) const fn no_headers<'b>() -> Headers<'b> {
    [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS]
}
/// Longest request target accepted (414 beyond).
pub const MAX_URI: usize = 8 * 1024;
/// Largest request head accepted (431 beyond).
pub const MAX_HEAD: usize = 32 * 1024;
/// Most options a `Connection` field may name.
pub(crate) const MAX_CONNECTION_OPTIONS: usize = 16;

/// How a message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body, and no `Content-Length` to repeat.
    None,
    /// `Content-Length: n` (0 is kept, so that a `POST` with an empty body says so upstream).
    Length(u64),
    Chunked,
    /// Responses only: the body runs until the upstream closes.
    UntilClose,
}

impl Framing {
    /// Whether any body bytes follow the head.
    #[inline]
    pub fn has_body(self) -> bool {
        !matches!(self, Framing::None | Framing::Length(0))
    }
}

/// The options of `Connection` fields: the ones the proxy acts on, and the field names the sender
/// declared hop-by-hop.
#[derive(Default)]
pub(crate) struct ConnectionOptions<'a> {
    pub(crate) close: bool,
    pub(crate) keep_alive: bool,
    pub(crate) upgrade: bool,
    pub(crate) named: [&'a [u8]; MAX_CONNECTION_OPTIONS],
    pub(crate) count: usize,
}

impl<'a> ConnectionOptions<'a> {
    /// Adds the options of one `Connection` field; `false` when it names too many.
    pub(crate) fn add(&mut self, value: &'a [u8]) -> bool {
        for token in tokens(value) {
            if token.eq_ignore_ascii_case(b"close") {
                self.close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                self.keep_alive = true;
            } else if token.eq_ignore_ascii_case(b"upgrade") {
                self.upgrade = true;
            } else if self.count < MAX_CONNECTION_OPTIONS {
                self.named[self.count] = token;
                self.count += 1;
            } else {
                return false;
            }
        }
        true
    }

    /// Whether the sender named this field as hop-by-hop.
    pub(crate) fn names(&self, field: &[u8]) -> bool {
        self.named[..self.count].iter().any(|n| n.eq_ignore_ascii_case(field))
    }
}

/// The `Content-Length` fields of a head: every value (a list, or repeated fields) must be the same
/// number, which is then written once.
#[derive(Default)]
pub(crate) struct ContentLength(pub Option<u64>);

impl ContentLength {
    /// `false` when the value is not a number or differs from an earlier one.
    pub fn add(&mut self, value: &[u8]) -> bool {
        for token in value.split(|&b| b == b',').map(trim) {
            match parse_length(token) {
                Some(n) if self.0.is_none_or(|c| c == n) => self.0 = Some(n),
                _ => return false,
            }
        }
        true
    }
}

/// What the `Transfer-Encoding` fields of a head say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransferCoding {
    Absent,
    /// Exactly one field whose value is exactly `chunked`.
    Chunked,
    /// A coding other than chunked (gzip, identity, ...).
    Unsupported,
    /// Anything else: repeated fields, empty or repeated list elements.
    Malformed,
}

impl TransferCoding {
    pub(crate) fn add(self, value: &[u8]) -> TransferCoding {
        if self != TransferCoding::Absent {
            return TransferCoding::Malformed.max_with(self);
        }
        let value = trim(value);
        if value.eq_ignore_ascii_case(b"chunked") {
            return TransferCoding::Chunked;
        }
        if value.split(|&b| b == b',').map(trim).any(|t| !t.is_empty() && !t.eq_ignore_ascii_case(b"chunked")) {
            TransferCoding::Unsupported
        } else {
            TransferCoding::Malformed
        }
    }

    /// An unsupported coding anywhere wins over malformed (501 tells the client more than 400).
    pub(crate) fn max_with(self, other: TransferCoding) -> TransferCoding {
        if other == TransferCoding::Unsupported {
            other
        } else {
            self
        }
    }
}

/// `Ok` when `ok`, else `error`.
/// `bytes` as text when they are UTF-8. ASCII, what nearly every host and path is, is recognised
/// by a word-at-a-time scan: the full validation costs more than routing on short fields.
#[inline]
pub(crate) fn text(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        #[allow(unsafe_code)]
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

pub(crate) fn ensure(ok: bool, error: crate::error::ProxyError) -> Result<(), crate::error::ProxyError> {
    if ok {
        Ok(())
    } else {
        Err(error)
    }
}

/// The range `part` occupies within `base` (`part` must be a subslice of it).
pub(crate) fn offset(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

pub(crate) fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |e| e + 1);
    &v[start..end]
}

pub(crate) fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',').map(trim).filter(|t| !t.is_empty())
}

/// A `Content-Length` value: digits only, no sign, no overflow.
pub(crate) fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (b - b'0') as u64;
    }
    Some(n)
}

/// Appends the decimal digits of `n`.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Writes the framing fields of a message with this body.
pub(crate) fn push_framing(out: &mut Vec<u8>, body: Framing) {
    match body {
        Framing::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            push_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::None | Framing::UntilClose => {}
    }
}

/// Copies one field line (name, colon, value, as received) and its line end.
#[inline]
pub(crate) fn push_field(out: &mut Vec<u8>, data: &[u8], field: &httparse::Header<'_>) {
    let line = offset(data, field.name.as_bytes()).start..offset(data, field.value).end;
    out.extend_from_slice(&data[line]);
    out.extend_from_slice(b"\r\n");
}
