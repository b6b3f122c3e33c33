//! What every phase of one HTTP/2 stream reads, whether it is proxied over HTTP/1.1 (`stream`) or
//! HTTP/2 (`relay`).

use std::net::SocketAddr;

use http::request::Parts;

use crate::conn::ConnFacts;
use crate::observe::requests::RequestId;
use crate::worker::Worker;

/// What every phase of one stream reads: the worker, the connection's facts, the request's head,
/// the host it is routed by (validated), its id, and the client its fields named when the
/// connection's peer is a trusted proxy (`None`: the peer).
#[derive(Clone, Copy)]
pub(crate) struct StreamRequest<'s> {
    pub worker: &'s Worker,
    pub facts: &'s ConnFacts,
    pub parts: &'s Parts,
    pub host: &'s str,
    pub id: &'s RequestId,
    pub client: Option<SocketAddr>,
}

impl StreamRequest<'_> {
    /// The client's address: what its fields named, else the connection's peer.
    pub fn client_addr(&self) -> SocketAddr {
        self.client.unwrap_or(self.facts.peer)
    }
}
