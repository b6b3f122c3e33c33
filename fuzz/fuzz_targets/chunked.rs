//! Arbitrary bytes as a chunked body (request or response: both directions use the one decoder),
//! then the same bytes after a last chunk (`0\r\n`), so that the trailer section gets fuzzed on its
//! own. For each:
//!
//! * fed whole, fed one byte at a time, and fed in pseudo-random pieces, the decoder gives the same
//!   result: bytes consumed, payload bytes, done or the same error;
//! * when it accepts a complete body, httparse's chunk parser reads the bytes it consumed the same
//!   way (same end, same payload) or refuses them — it never waits for more, which would take the
//!   next request on the connection as body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ramjet_dataplane::codec::http1::{ChunkError, ChunkedDecoder};
use ramjet_fuzz::{reference_chunked, Decoded, Reading};

/// Feeds `input` in the pieces `sizes` yields (the last piece takes the rest), stopping at the end
/// of the body like the proxy does.
fn decode(input: &[u8], mut sizes: impl FnMut() -> usize) -> Result<Decoded, ChunkError> {
    let mut decoder = ChunkedDecoder::new();
    let mut payload = Vec::new();
    let mut at = 0;
    while at < input.len() && !decoder.is_done() {
        let piece = &input[at..at.saturating_add(sizes().max(1)).min(input.len())];
        let n = decoder.feed(piece, |a, b| payload.extend_from_slice(&piece[a..b]))?;
        assert!(n <= piece.len());
        if n < piece.len() {
            assert!(decoder.is_done(), "the decoder stops early only at the end of the body");
        }
        at += n;
    }
    Ok(Decoded { consumed: at, payload, done: decoder.is_done() })
}

fn check(input: &[u8]) {
    let whole = decode(input, || usize::MAX);
    let bytewise = decode(input, || 1);
    assert_eq!(whole, bytewise, "whole vs byte by byte");
    // xorshift, seeded from the input, for piece sizes 1..=16.
    let mut state = input.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let random = decode(input, || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 16) as usize + 1
    });
    assert_eq!(whole, random, "whole vs random pieces");

    if let Ok(decoded) = &whole {
        if decoded.done {
            match reference_chunked(&input[..decoded.consumed]) {
                Reading::Refused => {}
                Reading::Incomplete => panic!(
                    "ramjet ends the body after {} bytes, httparse waits for more: {:?}",
                    decoded.consumed,
                    String::from_utf8_lossy(&input[..decoded.consumed])
                ),
                Reading::Complete(reference) => assert_eq!(&reference, decoded, "httparse reads the body differently"),
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut trailers = b"0\r\n".to_vec();
    trailers.extend_from_slice(data);
    check(&trailers);
});
