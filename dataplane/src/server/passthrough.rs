//! TLS passthrough (ingress-nginx's `ssl-passthrough`): a TLS connection whose server name (SNI)
//! the serving table passes through is not terminated. Its bytes, the ClientHello first, go to one
//! of the backend's endpoints as they came, and the two sides are spliced until either closes.
//!
//! The ClientHello is read with rustls' `Acceptor`, which parses it and nothing more: a connection
//! for another name carries on into the handshake from where the acceptor stopped, with nothing
//! read twice. Listeners of a table without passthrough never come here.

use std::io;
use std::sync::Arc;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use ramjet_shared::{Backend, BackendKind, RouteTable};
use rustls::server::Acceptor;
use rustls::{ServerConfig, ServerConnection};

use crate::worker::Worker;

/// The most bytes read before the ClientHello is whole (one record holds at most 16 KiB).
const MAX_HELLO: usize = 18 * 1024;

/// What the first bytes of a TLS connection asked for.
pub(crate) enum Hello {
    /// Terminate: the session has the ClientHello and carries on with the handshake.
    Terminate(Box<ServerConnection>),
    /// Pass the connection to this backend, starting with these bytes.
    Pass(Arc<Backend>, Vec<u8>),
}

/// Reads the ClientHello and decides by its server name.
pub(crate) async fn read_hello(
    stream: &mut TcpStream,
    config: &Arc<ServerConfig>,
    table: &RouteTable,
) -> io::Result<Hello> {
    let mut acceptor = Acceptor::default();
    let mut seen = Vec::new();
    let mut input = Vec::with_capacity(4096);
    loop {
        input.clear();
        let (read, buf) = stream.read(input).await;
        input = buf;
        if read? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "client closed before its ClientHello"));
        }
        seen.extend_from_slice(&input);
        if seen.len() > MAX_HELLO {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "ClientHello too large"));
        }
        let mut rest = &input[..];
        while !rest.is_empty() {
            if acceptor.read_tls(&mut rest)? == 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "TLS acceptor refused input"));
            }
        }
        match acceptor.accept() {
            Ok(None) => continue,
            Ok(Some(accepted)) => {
                let name = accepted.client_hello().server_name().map(str::to_owned);
                if let Some(backend) = name.as_deref().and_then(|n| table.passthrough(n)) {
                    return Ok(Hello::Pass(backend.clone(), seen));
                }
                return match accepted.into_connection(config.clone()) {
                    Ok(session) => Ok(Hello::Terminate(Box::new(session))),
                    Err((e, mut alert)) => {
                        send_alert(stream, &mut alert).await;
                        Err(io::Error::new(io::ErrorKind::InvalidData, e))
                    }
                };
            }
            Err((e, mut alert)) => {
                send_alert(stream, &mut alert).await;
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }
}

async fn send_alert(stream: &mut TcpStream, alert: &mut rustls::server::AcceptedAlert) {
    let mut out = Vec::new();
    if alert.write_all(&mut out).is_ok() && !out.is_empty() {
        let _ = stream.write_all(out).await;
    }
}

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
