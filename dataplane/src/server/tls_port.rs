//! TLS route ports (a Gateway TLS listener on a port of its own). Each connection's ClientHello is
//! read first ([`super::client_hello::read`]), and the server name it asks for picks the port's
//! entry in the serving table, which [`TlsRelay`] serves: passed through unopened, or terminated
//! and relayed, to one of the entry's backends by weight.
//!
//! A name the port does not serve, or one without a backend, is refused: the connection is closed
//! after its ClientHello, with no alert (as Envoy does when no filter chain matches; the Gateway
//! API's conformance suite wants the client to see the connection end).
//! The entry is read from the generation serving when the ClientHello arrives: a change applies
//! to new connections, and running ones finish as they started.

use std::rc::Rc;
use std::sync::Arc;

use monoio::net::TcpStream;
use ramjet_shared::Published;

use super::client_hello;
use super::tls_relay::TlsRelay;
use crate::worker::Worker;

/// One worker's accept loop of a TLS route port.
pub(crate) struct TlsPort {
    pub port: u16,
    relay: TlsRelay,
}

impl TlsPort {
    /// `published`: where the certificates of the names it terminates are found.
    pub fn new(port: u16, published: Arc<Published>) -> Rc<Self> {
        Rc::new(TlsPort { port, relay: TlsRelay::new(published) })
    }

    /// Serves one connection: its ClientHello within the header timeout, then as its name says.
    pub async fn serve(&self, worker: &Rc<Worker>, mut client: TcpStream) {
        let timeout = worker.settings.header_timeout;
        let (accepted, seen) = match worker.timeout(timeout, client_hello::read(&mut client)).await {
            Ok(Ok(read)) => read,
            _ => return worker.counters().tls_handshake_failed(),
        };
        let target = {
            let generation = worker.generation();
            let port = generation.table.tls_port(self.port);
            port.and_then(|port| port.target(accepted.client_hello().server_name())).cloned()
        };
        match target {
            Some(target) => self.relay.relay(worker, client, accepted, seen, &target).await,
            None => worker.counters().tls_handshake_failed(),
        }
    }
}
