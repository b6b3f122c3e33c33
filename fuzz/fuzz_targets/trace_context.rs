//! Arbitrary bytes as a request's `traceparent` field (`codec::trace_context`):
//!
//! * `parse` never panics;
//! * what it accepts has non-zero ids, and written back (`format`, version 00) reads as the same
//!   context;
//! * a version-00 value it accepts is exactly what `format` writes for it (the input trimmed), so
//!   the upstream never gets a context other than the one read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ramjet_dataplane::codec::trace_context::{format, parse, TRACEPARENT_LEN};

fuzz_target!(|data: &[u8]| {
    let Some(ctx) = parse(data) else { return };
    assert_ne!(ctx.trace_id, [0; 16]);
    assert_ne!(ctx.span_id, [0; 8]);
    let written = format(&ctx);
    assert_eq!(parse(&written), Some(ctx));
    let trimmed = data.trim_ascii();
    if trimmed.starts_with(b"00-") {
        assert_eq!(trimmed.len(), TRACEPARENT_LEN);
        // Version, ids and dashes as read; of the flags only the sampled bit is kept.
        assert_eq!(&trimmed[..53], &written[..53]);
    }
});
