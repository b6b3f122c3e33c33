//! HTTP/1.x on the wire: heads parsed in place and written for the other side ([`head`]), chunked
//! coding ([`chunked`]) and body framing ([`body`]). **Framing is ramjet's**: see `head`.

pub mod body;
pub mod chunked;
pub mod head;

pub use chunked::{ChunkError, ChunkedDecoder};
pub use head::{parse_request, parse_response, Framing, RequestHead, ResponsePlan, MAX_HEAD};

/// Client read buffer: the largest accepted head plus room for a small body or pipelined requests.
pub const CLIENT_BUFFER: usize = MAX_HEAD + 4096;
/// Upstream read buffer.
pub const UPSTREAM_BUFFER: usize = 32 * 1024;
