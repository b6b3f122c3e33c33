//! W3C Trace Context (level 2): the `traceparent` field a request carries into a trace and out of
//! it, read ([`parse`]) and written ([`format`]). What ramjet does with it is `observe::trace`'s.

/// A span's identity as `traceparent` carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
}

/// Length of a version-00 `traceparent`: `00-` 32 hex `-` 16 hex `-` 2 hex.
pub const TRACEPARENT_LEN: usize = 55;

/// Parses a W3C `traceparent` (Trace Context level 2): version `00` is exactly 55 characters; a
/// later version may add fields after them. Lower-case hex only; all-zero ids and version `ff` are
/// invalid. `None`: absent for every purpose (the request starts a trace of its own).
pub fn parse(value: &[u8]) -> Option<SpanContext> {
    let v = value.trim_ascii();
    if v.len() < TRACEPARENT_LEN || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    let version = hex_byte(&v[0..2])?;
    if version == 0xff || (version == 0 && v.len() != TRACEPARENT_LEN) || (v.len() > TRACEPARENT_LEN && v[55] != b'-') {
        return None;
    }
    let mut trace_id = [0u8; 16];
    for (i, b) in trace_id.iter_mut().enumerate() {
        *b = hex_byte(&v[3 + 2 * i..5 + 2 * i])?;
    }
    let mut span_id = [0u8; 8];
    for (i, b) in span_id.iter_mut().enumerate() {
        *b = hex_byte(&v[36 + 2 * i..38 + 2 * i])?;
    }
    let flags = hex_byte(&v[53..55])?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(SpanContext { trace_id, span_id, sampled: flags & 1 == 1 })
}

/// Each byte's value as a lower-case hex digit; 0xff: not one.
const NIBBLE: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Two lower-case hex digits as a byte: one table load each, the validity of both in one test.
#[inline]
fn hex_byte(two: &[u8]) -> Option<u8> {
    let (hi, lo) = (NIBBLE[usize::from(two[0])], NIBBLE[usize::from(two[1])]);
    ((hi | lo) < 16).then_some(hi << 4 | lo)
}

/// `span` as a version-00 `traceparent` value.
pub fn format(span: &SpanContext) -> [u8; TRACEPARENT_LEN] {
    let mut v = *b"00-00000000000000000000000000000000-0000000000000000-01";
    hex_into(&mut v[3..35], &span.trace_id);
    hex_into(&mut v[36..52], &span.span_id);
    if !span.sampled {
        v[54] = b'0';
    }
    v
}

/// `bytes` as lower-case hex into `out` (twice as long).
fn hex_into(out: &mut [u8], bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0xf)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_is_parsed_as_the_w3c_says() {
        let ctx = parse(VALID).unwrap();
        assert!(ctx.sampled);
        assert_eq!(ctx.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(!parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap().sampled);
        // A later version may carry more; version 00 may not.
        assert!(parse(b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra").is_some());
        for bad in [
            &b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"[..],
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            b"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"",
        ] {
            assert_eq!(parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn written_as_read() {
        let ctx = parse(VALID).unwrap();
        assert_eq!(&format(&ctx), VALID);
        let unsampled = SpanContext { sampled: false, ..ctx };
        assert_eq!(parse(&format(&unsampled)), Some(unsampled));
    }
}
