//! The byte formatting the access log and the trace exporter share: JSON string contents and
//! lower-case hex.

/// JSON string contents: quotes, backslashes and control characters escaped; bytes above 0x7f
/// (obs-text, which HTTP/1.1 allows in field values) as `\u00XX`, so every line is valid JSON.
pub(crate) fn json_escape(out: &mut Vec<u8>, value: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in value {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 0xf) as usize]]),
        }
    }
}

/// `bytes` as lower-case hex, two digits each.
pub(crate) fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 0xf) as usize]]);
    }
}
