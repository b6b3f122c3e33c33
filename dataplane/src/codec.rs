//! Wire formats, the bottom floor of the request path: HTTP/1 heads, chunked coding and body framing
//! (used by the client side and the upstream side alike), the HTTP/2 field conversions and I/O
//! adapter, and gRPC's status trailers. Nothing here routes, pools or keeps state across requests.

pub mod grpc;
pub mod http1;
pub mod http2;
