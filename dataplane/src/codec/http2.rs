//! HTTP/2 at the protocol boundary: the fields of an HTTP/2 request turned into the HTTP/1.1 head
//! sent upstream and back ([`fields`]), and the adapter that lets the `h2` crate run over monoio's
//! streams ([`io`]).

pub mod fields;
pub mod io;
