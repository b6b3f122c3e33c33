//! TCP routes (Layer 4), and the accept loop TLS route ports share ([`super::tls_port`]): each
//! connection to a TCP route's port is relayed, bytes as they come, to one
//! of the route's backends chosen by weight, then to one of its endpoints in turn (a refused one
//! moves on once). Both directions are copied at once with backpressure (a side is read only as
//! fast as the other takes the bytes), and a side that finishes sending is half-closed on the
//! other (`shutdown(SHUT_WR)`), so protocols that end a request with EOF work; the relay ends when
//! both directions have.
//!
//! The route is looked up in the generation serving when the connection is accepted: a change to
//! the route applies to new connections, and running relays finish as they started. A relay with
//! no byte either way for [`Settings::tcp_idle_timeout`](crate::Settings) is closed, so idle
//! connections (a slowloris among them) do not hold sockets and backends for ever.

use std::rc::Rc;
use std::time::Duration;

use monoio::net::{TcpListener, TcpStream};
use ramjet_shared::Transport;

use super::relay_backend;
use super::tls_port::TlsPort;
use crate::base::drain::DrainSignal;
use crate::worker::Worker;

/// What a port's connections get.
pub(crate) enum Relay {
    /// A TCP route's port: relayed to the route's backends.
    Tcp(u16),
    /// A TLS route's port: by the ClientHello's server name, passed through or terminated.
    Tls(Rc<TlsPort>),
}

/// Accepts on a TCP (TLS) route's port until `stop` (the port closed) or the worker's drain.
pub(crate) async fn accept(worker: Rc<Worker>, listener: TcpListener, relay: Relay, stop: Rc<DrainSignal>) {
    let port = match &relay {
        Relay::Tcp(port) => *port,
        Relay::Tls(tls) => tls.port,
    };
    loop {
        let accepted = monoio::select! {
            r = listener.accept() => r,
            _ = stop.wait() => break,
            _ = worker.drain.wait() => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(worker = worker.id, port, error = %e, "accept failed on a TCP route's port");
                worker.sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let worker = worker.clone();
        let tls = match &relay {
            Relay::Tcp(_) => None,
            Relay::Tls(tls) => Some(tls.clone()),
        };
        super::contain::spawn(&worker.clone(), "TCP relay", async move {
            worker.connection_opened();
            match tls {
                None => self::relay(&worker, stream, port).await,
                Some(tls) => tls.serve(&worker, stream).await,
            }
            worker.connection_closed();
        });
    }
    // Dropping the listener closes this worker's socket of the port.
}

/// Relays one connection to the port's route, as the serving generation has it.
async fn relay(worker: &Worker, client: TcpStream, port: u16) {
    let backend = {
        let generation = worker.generation();
        let Some(route) = generation.table.port_route(Transport::Tcp, port) else { return };
        let Some(backend) = relay_backend::pick(worker, route) else { return };
        backend
    };
    if let Some(upstream) = relay_backend::connect(worker, &backend).await {
        let idle = (&*worker.coarse_timer, worker.settings.tcp_idle_timeout);
        crate::base::buf::splice(client, upstream, Some(idle)).await;
    }
}
