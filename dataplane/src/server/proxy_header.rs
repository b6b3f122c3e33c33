//! The PROXY protocol header on a listener that expects one (`--proxy-protocol`): read before
//! anything else on a connection, within `--proxy-protocol-timeout`, and exactly — never a byte of
//! what follows it, so the HTTP request or the TLS ClientHello behind it reaches its server whole,
//! however the header was cut into packets (see `codec::proxy_protocol`). A connection without a
//! valid header is closed without a word, counted (`ramjet_proxy_protocol_refused_total`) and
//! logged at debug level.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use monoio::buf::IoBufMut;
use monoio::io::AsyncReadRent;

use crate::codec::proxy_protocol::{self, Addresses, Header, Progress, Refused};
use crate::worker::Worker;

/// Why a connection got no further than its PROXY protocol header.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error(transparent)]
    Header(#[from] Refused),
    #[error("the connection closed before its PROXY protocol header was whole")]
    Closed,
    #[error("no whole PROXY protocol header within {0:?}")]
    Timeout(Duration),
    #[error("reading the PROXY protocol header failed: {0}")]
    Io(io::Error),
}

/// Reads the header at the start of `stream` into `buf`, each read asking for exactly as many
/// bytes as a valid header still needs at least.
pub(crate) async fn read<S: AsyncReadRent>(stream: &mut S, mut buf: Vec<u8>) -> (Result<Header, Refusal>, Vec<u8>) {
    buf.clear();
    loop {
        let more = match proxy_protocol::parse(&buf) {
            Ok(Progress::Complete(header)) => return (Ok(header), buf),
            Ok(Progress::Partial { more }) => more,
            Err(e) => return (Err(e.into()), buf),
        };
        let have = buf.len();
        buf.reserve(more);
        let (read, slice) = stream.read(buf.slice_mut(have..have + more)).await;
        buf = slice.into_inner();
        match read {
            Ok(0) => return (Err(Refusal::Closed), buf),
            Ok(_) => {}
            Err(e) => return (Err(Refusal::Io(e)), buf),
        }
    }
}

/// Where a connection on a listener that expects a PROXY header comes from: the client's address
/// and the port it connected to, as the header says (or the connection's own, `peer` and
/// `local_port`, for a LOCAL or UNKNOWN header). `None`: refused (counted and logged), or the worker
/// is draining; the caller closes the connection.
pub(crate) async fn origin<S: AsyncReadRent>(
    worker: &Worker,
    stream: &mut S,
    peer: SocketAddr,
    local_port: u16,
) -> Option<(SocketAddr, u16)> {
    let timeout = worker.settings.client_address.proxy_protocol_timeout;
    let read = monoio::select! {
        r = worker.timeout(timeout, read(stream, worker.out_buffers.take())) => r,
        _ = worker.drain.wait() => return None,
    };
    let refusal = match read {
        Ok((header, buf)) => {
            worker.out_buffers.give(buf);
            match header {
                Ok(Header { addresses: Addresses::Relayed { source, destination }, .. }) => {
                    return Some((source, destination.port()));
                }
                Ok(Header { addresses: Addresses::Own, .. }) => return Some((peer, local_port)),
                Err(e) => e,
            }
        }
        Err(_) => Refusal::Timeout(timeout),
    };
    worker.counters().proxy_protocol_refused();
    tracing::debug!(worker = worker.id, %peer, error = %refusal, "connection refused");
    None
}
