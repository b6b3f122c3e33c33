//! TLS passthrough (ingress-nginx's `ssl-passthrough`): a TLS connection whose server name (SNI)
//! the serving table passes through is not terminated. Its bytes, the ClientHello first (read by
//! [`super::client_hello`]), go to one of the backend's endpoints as they came, and the two sides
//! are spliced until either closes.

use monoio::io::AsyncWriteRentExt;
use monoio::net::TcpStream;
use ramjet_shared::Backend;

use crate::worker::Worker;

/// Connects to one of `backend`'s endpoints (the next in turn; a refused one moves on once),
/// sends `hello`, and splices the two connections until either side closes.
pub(crate) async fn splice(worker: &Worker, client: TcpStream, hello: Vec<u8>, backend: &Backend) {
    let Some(mut upstream) = super::relay_backend::connect(worker, backend).await else { return };
    let (sent, _) = upstream.write_all(hello).await;
    if sent.is_err() {
        return;
    }
    let idle = (&*worker.coarse_timer, worker.settings.tcp_idle_timeout);
    crate::base::buf::splice(client, upstream, Some(idle)).await;
}
