//! What every phase of one HTTP/2 stream reads, whether it is proxied over HTTP/1.1 (`stream`) or
//! HTTP/2 (`relay`).

use http::request::Parts;

use crate::conn::ConnFacts;
use crate::observe::requests::RequestId;
use crate::worker::Worker;

/// What every phase of one stream reads: the worker, the connection's facts, the request's head,
/// the host it is routed by (validated), and its id.
#[derive(Clone, Copy)]
pub(crate) struct StreamRequest<'s> {
    pub worker: &'s Worker,
    pub facts: &'s ConnFacts,
    pub parts: &'s Parts,
    pub host: &'s str,
    pub id: &'s RequestId,
}
