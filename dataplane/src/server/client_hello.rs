//! The ClientHello, read before the handshake when the serving table decides something by the
//! server name the client asks for: a name that is not HTTPS (`ssl-passthrough`, a TLSRoute), or a host
//! that asks its clients for a certificate (which takes a server configuration of its own, as
//! rustls asks for client certificates per configuration, not per certificate).
//!
//! The ClientHello is read with rustls' `Acceptor`, which parses it and nothing more: a connection
//! to terminate carries on into the handshake from where the acceptor stopped, with nothing read
//! twice. Listeners of a table without either never come here; TLS route ports
//! ([`super::tls_port`]) always do.

use std::io;
use std::sync::Arc;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use ramjet_shared::{normalize_host, ClientAuth, RouteTable, TlsTarget};
use rustls::server::{Accepted, Acceptor};
use rustls::{ServerConfig, ServerConnection};

/// The content type of a TLS handshake record.
const HANDSHAKE_RECORD: u8 = 22;

/// The most bytes read before the ClientHello is whole (one record holds at most 16 KiB).
const MAX_HELLO: usize = 18 * 1024;

/// What the first bytes of a TLS connection asked for.
pub(crate) enum Hello {
    /// Terminate: the session has the ClientHello and carries on with the handshake; the host's
    /// client-certificate authentication, when its handshake asks for a certificate.
    Terminate(Box<ServerConnection>, Option<Arc<ClientAuth>>),
    /// Not HTTPS: a TLS route's target claims the name; the ClientHello as parsed, and the bytes
    /// read so far.
    Relay(Arc<TlsTarget>, Box<Accepted>, Vec<u8>),
}

/// Reads the ClientHello and decides by its server name; `config_for` gives the server
/// configuration for a host's client-certificate authentication (`None`: the host asks for none).
pub(crate) async fn read_hello(
    stream: &mut TcpStream,
    table: &RouteTable,
    config_for: impl FnOnce(Option<&Arc<ClientAuth>>) -> Arc<ServerConfig>,
) -> io::Result<Hello> {
    let (accepted, seen) = read(stream).await?;
    let name = accepted.client_hello().server_name().map(str::to_owned);
    if let Some(target) = name.as_deref().and_then(|n| table.passthrough(n)) {
        return Ok(Hello::Relay(target.clone(), Box::new(accepted), seen));
    }
    let auth = asking_auth(table, name.as_deref());
    let session = continue_with(stream, accepted, config_for(auth.as_ref())).await?;
    Ok(Hello::Terminate(Box::new(session), auth))
}

/// Reads a ClientHello whole: rustls' parse of it, and every byte read so far (the ClientHello
/// and whatever followed it in the same reads), for a connection passed on unopened.
pub(crate) async fn read(stream: &mut TcpStream) -> io::Result<(Accepted, Vec<u8>)> {
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
        // A TLS connection opens with a handshake record (type 22): anything else (plain HTTP
        // sent to a TLS port) is refused now, not once the length its first bytes seem to give
        // has arrived or the header timeout has run out.
        if seen[0] != HANDSHAKE_RECORD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a TLS handshake record"));
        }
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
            Ok(Some(accepted)) => return Ok((accepted, seen)),
            Err((e, mut alert)) => {
                send_alert(stream, &mut alert).await;
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }
}

/// The session that carries on from a read ClientHello with `config` (the handshake is still to
/// run); a ClientHello the configuration cannot serve gets its alert.
pub(crate) async fn continue_with(
    stream: &mut TcpStream,
    accepted: Accepted,
    config: Arc<ServerConfig>,
) -> io::Result<ServerConnection> {
    match accepted.into_connection(config) {
        Ok(session) => Ok(session),
        Err((e, mut alert)) => {
            send_alert(stream, &mut alert).await;
            Err(io::Error::new(io::ErrorKind::InvalidData, e))
        }
    }
}

/// The client-certificate authentication of the host a server name reaches (`None`: the client
/// sent none), when it asks for a certificate.
fn asking_auth(table: &RouteTable, name: Option<&str>) -> Option<Arc<ClientAuth>> {
    if !table.has_client_auth() {
        return None;
    }
    let mut buf = [0u8; 256];
    let host = match name {
        Some(name) => normalize_host(name, &mut buf)?,
        None => "",
    };
    table.client_auth_for(host).filter(|a| a.verify.asks()).cloned()
}

async fn send_alert(stream: &mut TcpStream, alert: &mut rustls::server::AcceptedAlert) {
    let mut out = Vec::new();
    if alert.write_all(&mut out).is_ok() && !out.is_empty() {
        let _ = stream.write_all(out).await;
    }
}
