//! What is known of a client connection once it is accepted (and its TLS handshake settled): the
//! facts every request on it carries upstream and into the access log. The codecs, the pipeline and
//! the servers all read them from here.

/// Per-connection facts added to every upstream head.
pub struct ConnFacts {
    /// The client's address.
    pub peer: std::net::SocketAddr,
    /// The client connection is TLS.
    pub tls: bool,
    /// The port the client connected to (nginx's `$server_port`).
    pub local_port: u16,
    /// What the TLS handshake settled, for the access log (`None` on a plain connection).
    pub tls_session: Option<TlsSession>,
    /// `x-forwarded-for`, `x-real-ip`, `x-forwarded-proto` and `x-forwarded-port` lines, rendered once
    /// per connection.
    pub forwarded: Vec<u8>,
}

impl ConnFacts {
    pub fn new(peer: std::net::SocketAddr, tls: bool, local_port: u16) -> Self {
        use std::io::Write;
        let mut forwarded = Vec::with_capacity(128);
        let ip = peer.ip().to_canonical();
        let proto = if tls { "https" } else { "http" };
        let _ = write!(
            forwarded,
            "x-forwarded-for: {ip}\r\nx-real-ip: {ip}\r\nx-forwarded-proto: {proto}\r\nx-forwarded-port: {local_port}\r\n"
        );
        ConnFacts { peer, tls, local_port, tls_session: None, forwarded }
    }

    /// The facts of a TLS connection, once its handshake has settled the version and the name.
    pub fn with_tls_session(peer: std::net::SocketAddr, local_port: u16, session: TlsSession) -> Self {
        ConnFacts { tls_session: Some(session), ..ConnFacts::new(peer, true, local_port) }
    }
}

/// The negotiated TLS version and the SNI name the client sent.
pub struct TlsSession {
    /// `TLSv1.2` or `TLSv1.3`, spelled as nginx's `$ssl_protocol` does.
    pub version: &'static str,
    /// The server name from the ClientHello (empty when the client sent none).
    pub sni: Box<str>,
}
