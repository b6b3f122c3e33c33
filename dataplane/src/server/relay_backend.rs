//! The backend of a relayed connection or flow (TCP and TLS routes, passthrough, UDP routes): one of
//! a port route's backends drawn by weight, then one of its endpoints in turn.

use std::sync::Arc;

use monoio::net::TcpStream;
use ramjet_shared::{Backend, BackendKind, PortRoute, UpstreamErrorKind};

use crate::worker::Worker;

/// One of a port route's backends, drawn by weight (`None`: none has a weight).
pub(crate) fn pick(worker: &Worker, route: &PortRoute) -> Option<Arc<Backend>> {
    if route.rule.backends.is_empty() || route.rule.total == 0 {
        return None;
    }
    Some(route.rule.pick(worker.random() % route.rule.total).backend.clone())
}

/// A connection to one of `backend`'s endpoints (the next in turn; a refused one moves on once),
/// within the upstream connect timeout.
pub(crate) async fn connect(worker: &Worker, backend: &Backend) -> Option<TcpStream> {
    let BackendKind::Endpoints(endpoints) = &backend.kind else { return None };
    if endpoints.is_empty() {
        return None;
    }
    let first = worker.next_endpoint(backend.slot, endpoints.len());
    let timeout = worker.settings.upstream_timeout;
    for index in [first, (first + 1) % endpoints.len()].into_iter().take(endpoints.len().min(2)) {
        match worker.timeout(timeout, crate::upstream::connect::connect_tcp(endpoints[index])).await {
            Ok(Ok(stream)) => return Some(stream),
            _ => worker.counters().upstream_error(UpstreamErrorKind::Connect),
        }
    }
    None
}
