//! TLS passthrough (ingress-nginx's `ssl-passthrough`): a TLS connection whose server name (SNI)
//! the serving table passes through is not terminated. Its bytes, the ClientHello first (read by
//! [`super::client_hello`]), go to one of the backend's endpoints as they came, and the two sides
//! are spliced until either closes.

use monoio::io::AsyncWriteRentExt;
use monoio::net::TcpStream;
use ramjet_shared::{Backend, BackendKind};

use crate::worker::Worker;

/// Connects to one of `backend`'s endpoints (the next in turn; a refused one moves on once),
/// sends `hello`, and splices the two connections until either side closes.
pub(crate) async fn splice(worker: &Worker, client: TcpStream, hello: Vec<u8>, backend: &Backend) {
    let BackendKind::Endpoints(endpoints) = &backend.kind else { return };
    if endpoints.is_empty() {
        return;
    }
    let first = worker.next_endpoint(backend.slot, endpoints.len());
    let timeout = worker.settings.upstream_timeout;
    let mut upstream = None;
    for index in [first, (first + 1) % endpoints.len()].into_iter().take(endpoints.len().min(2)) {
        match worker.timeout(timeout, crate::upstream::connect::connect_tcp(endpoints[index])).await {
            Ok(Ok(stream)) => {
                upstream = Some(stream);
                break;
            }
            _ => worker.counters().upstream_error(ramjet_shared::UpstreamErrorKind::Connect),
        }
    }
    let Some(mut upstream) = upstream else { return };
    let (sent, _) = upstream.write_all(hello).await;
    if sent.is_err() {
        return;
    }
    crate::base::buf::splice(client, upstream).await;
}
