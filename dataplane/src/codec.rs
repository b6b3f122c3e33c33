//! Wire formats, the bottom floor of the request path: HTTP/1 heads, chunked coding and body framing
//! (used by the client side and the upstream side alike), the HTTP/2 field conversions and I/O
//! adapter, gRPC's status trailers, the PROXY protocol header a balancer puts before a connection,
//! the forwarded fields (`X-Forwarded-For`, `X-Real-IP`, `Forwarded`) read from trusted proxies
//! and written upstream, and W3C trace context (`traceparent`). Nothing here routes, pools or keeps state across requests.

pub mod forwarded;
pub mod grpc;
pub mod http1;
pub mod http2;
pub mod proxy_protocol;
pub mod trace_context;
