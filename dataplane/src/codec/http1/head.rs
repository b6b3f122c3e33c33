//! HTTP/1.x heads: parsing them in place and writing the head that goes to the other side.
//!
//! One pass of httparse over the read buffer (no per-header allocation), one pass over the fields to
//! learn the framing and the connection options and to refuse what RFC 9112 says enables request
//! smuggling, and one pass that copies the fields that need no change, byte for byte, into the head
//! for the other side. **Framing is ramjet's**: the fields that frame and route a message
//! (`Content-Length`, `Transfer-Encoding`, `Host`) are never copied as the peer sent them; ramjet
//! writes them from what it parsed, so nothing the peer meant differently can reach the next hop
//! (see `docs/http1-framing.md`).

mod common;
mod request;
mod response;

pub(crate) use request::{is_consumed as is_consumed_request, valid_host};
pub use request::{parse_request, RequestHead};
pub(crate) use response::inspect;
pub use response::{parse_response, ResponseHead, ResponsePlan};

pub(crate) use common::{ensure, no_headers, push_decimal, push_framing, text, ContentLength};
pub use common::{Framing, MAX_HEAD, MAX_URI};

#[cfg(test)]
mod tests;
