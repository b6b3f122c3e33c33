//! The server side of a TLS handshake, driven over the socket to its end by the worker (rustls'
//! `ServerConnection`, before monoio-rustls' stream takes the session): for HTTPS, and for the TLS
//! routes terminated on ramjet's ports.

use std::io;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use rustls::ServerConnection;

/// Bytes read from the client per step of a handshake. Small enough that what follows the client's
/// Finished always fits the session's plaintext buffer (16 KiB), so no byte is ever refused.
const HANDSHAKE_READ: usize = 4096;

/// Runs the server side of a handshake to its end, flushing everything the session has to say
/// (session tickets included) before returning it.
pub(crate) async fn handshake(io: &mut TcpStream, mut session: ServerConnection) -> io::Result<ServerConnection> {
    let mut input = Vec::with_capacity(HANDSHAKE_READ);
    let mut output = Vec::new();
    loop {
        while session.wants_write() {
            output.clear();
            session.write_tls(&mut output)?;
            let (written, buf) = io.write_all(output).await;
            output = buf;
            written?;
        }
        if !session.is_handshaking() {
            return Ok(session);
        }
        input.clear();
        let (read, buf) = io.read(input).await;
        input = buf;
        if read? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "client closed during the TLS handshake"));
        }
        let mut rest = &input[..];
        while !rest.is_empty() {
            if session.read_tls(&mut rest)? == 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "TLS session refused input"));
            }
            if let Err(e) = session.process_new_packets() {
                // The session has queued an alert saying why: send it, best effort.
                output.clear();
                if session.write_tls(&mut output).is_ok() {
                    let _ = io.write_all(output).await;
                }
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }
}
