//! TLS termination: rustls through monoio-rustls, the certificate chosen by SNI from the serving
//! generation.
//!
//! The resolver runs inside the handshake: it reads the SNI name, looks the host up in the current
//! table (exact host, then single-label wildcard, as routing does) and hands rustls the parsed key
//! from the published certificate store. Because the applier publishes the store before the table,
//! a table never names a certificate the store lacks, and a rotation is just another generation.
//!
//! The worker drives the handshake itself (rustls' `ServerConnection` over the socket) and only then
//! hands the session to monoio-rustls' stream: that is how the access log learns the negotiated version
//! and the SNI name, which the stream does not expose. Bytes the client sent after its Finished stay
//! inside the session, so the stream reads them first.

use std::fmt;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use arc_swap::ArcSwap;
use monoio::net::TcpStream;
use monoio_rustls::ServerTlsStream;
use ramjet_shared::{normalize_host, Published};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ProtocolVersion, ServerConfig, ServerConnection};

use super::client_auth::TlsConfigs;
use super::client_hello::{self, Hello};
use super::handshake::handshake;
use super::http1;
use super::http2;
use super::tls_relay::TlsRelay;
use crate::conn::{AddressRules, ConnFacts, PeerCertificate, TlsSession};
use crate::worker::Worker;

/// The certificate for names that have none: swapped whole when its files change
/// (`--default-certificate`), read by every handshake that needs it.
pub type DefaultCertificate = Arc<ArcSwap<CertifiedKey>>;

/// Picks the certificate for each handshake from what is published now.
pub struct SniResolver {
    published: Arc<Published>,
    default: DefaultCertificate,
}

impl fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SniResolver").finish_non_exhaustive()
    }
}

impl SniResolver {
    pub fn new(published: Arc<Published>, default: DefaultCertificate) -> Self {
        SniResolver { published, default }
    }

    /// The certificate for an SNI name (`None`: the client sent none), if the serving table has
    /// one for it.
    pub fn lookup(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let table = &self.published.generation().load().table;
        let id = match sni {
            Some(sni) => {
                let mut buf = [0u8; 256];
                table.certificate_for(normalize_host(sni, &mut buf)?)?
            }
            None => table.any_certificate()?,
        };
        self.published.certs().load().get(&id).map(|c| c.key.clone())
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // A host without a certificate in the table: the default certificate (the daemon passes
        // `--default-certificate`, else a self-signed one, so that the client gets an HTTP answer).
        self.lookup(hello.server_name()).or_else(|| Some(self.default.load_full()))
    }
}

/// Builds the server configuration shared by every worker: TLS 1.2 and 1.3 with rustls' safe
/// defaults, ALPN `h2` preferred and `http/1.1` offered, stateless session tickets.
pub fn server_config(
    published: Arc<Published>,
    default: DefaultCertificate,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver::new(published, default)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ticketer = rustls::crypto::ring::Ticketer::new()?;
    Ok(Arc::new(config))
}

/// A worker's handshaker.
pub(crate) struct TlsTerminator {
    configs: TlsConfigs,
    /// The names TLS routes claim on the HTTPS port.
    relay: TlsRelay,
}

impl TlsTerminator {
    /// `published`: where the certificates of the names TLS routes terminate are found.
    pub fn new(config: Arc<ServerConfig>, published: Arc<Published>) -> Rc<Self> {
        Rc::new(TlsTerminator { configs: TlsConfigs::new(config), relay: TlsRelay::new(published) })
    }

    /// Handshakes within the header timeout, then serves HTTP/2 over the TLS stream if the client
    /// chose it by ALPN, else HTTP/1.1.
    ///
    /// The handshake (and a passthrough's ClientHello) runs in a box of its own, and the HTTP/1.1
    /// future is made in a block that ends before it is awaited: what a connection holds while it
    /// waits for its next request is only the HTTP/1.1 state and the TLS stream, once (2.6 KB, not
    /// the 7.8 KB the handshake's futures needed).
    pub async fn serve(
        &self,
        worker: &Rc<Worker>,
        stream: TcpStream,
        peer: SocketAddr,
        local_port: u16,
        rules: Option<Rc<AddressRules>>,
    ) {
        let facts;
        let serving = {
            let Some(Established { tls, facts: established, h2 }) =
                Box::pin(self.establish(worker, stream, peer, local_port, rules)).await
            else {
                return;
            };
            if h2 {
                return Box::pin(http2::serve(worker.clone(), tls, None, established)).await;
            }
            facts = established;
            http1::serve(worker, tls, &facts)
        };
        serving.await
    }

    /// The handshake, within the header timeout; `None` when it failed or the connection was
    /// passed through (and is finished).
    async fn establish(
        &self,
        worker: &Rc<Worker>,
        mut stream: TcpStream,
        peer: SocketAddr,
        local_port: u16,
        rules: Option<Rc<AddressRules>>,
    ) -> Option<Established> {
        let generation = worker.generation();
        let (session, auth) = if generation.table.has_passthrough() || generation.table.has_client_auth() {
            // Some server names are passed through, or ask for a client certificate: the
            // ClientHello decides, read first.
            let configs = &self.configs;
            let hello = worker
                .timeout(
                    worker.settings.header_timeout,
                    client_hello::read_hello(&mut stream, &generation.table, |auth| configs.config_for(auth)),
                )
                .await;
            drop(generation);
            match hello {
                Ok(Ok(Hello::Terminate(session, auth))) => (*session, auth),
                Ok(Ok(Hello::Relay(target, accepted, seen))) => {
                    Box::pin(self.relay.relay(worker, stream, *accepted, seen, &target)).await;
                    return None;
                }
                Ok(Err(e)) => {
                    worker.counters().tls_handshake_failed();
                    tracing::debug!(worker = worker.id, error = %e, "TLS ClientHello refused");
                    return None;
                }
                Err(_) => {
                    worker.counters().tls_handshake_failed();
                    return None;
                }
            }
        } else {
            drop(generation);
            match ServerConnection::new(self.configs.base().clone()) {
                Ok(session) => (session, None),
                Err(e) => {
                    worker.counters().tls_handshake_failed();
                    tracing::warn!(worker = worker.id, error = %e, "TLS session could not be created");
                    return None;
                }
            }
        };
        let session = match worker.timeout(worker.settings.header_timeout, handshake(&mut stream, session)).await {
            Ok(Ok(session)) => session,
            Ok(Err(e)) => {
                worker.counters().tls_handshake_failed();
                tracing::debug!(worker = worker.id, error = %e, "TLS handshake failed");
                return None;
            }
            Err(_) => {
                worker.counters().tls_handshake_failed();
                return None;
            }
        };
        let mut facts = ConnFacts::with_tls_session(peer, local_port, settled(&session)).with_rules(rules.as_ref());
        if let Some(sni) = session.server_name() {
            let mut buf = [0u8; 256];
            let name = ramjet_shared::normalize_host(sni, &mut buf);
            facts.own_certificate = name.is_some_and(|n| worker.generation().table.has_own_certificate(n));
        }
        if let Some(auth) = auth {
            let chain = session.peer_certificates().map(|c| c.iter().map(|c| c.clone().into_owned()).collect());
            facts.client_cert = Some(Box::new(PeerCertificate::new(chain.unwrap_or_default(), &auth)));
        }
        let facts = Rc::new(facts);
        let h2 = session.alpn_protocol() == Some(b"h2");
        Some(Established { tls: ServerTlsStream::new(stream, session), facts, h2 })
    }
}

/// A finished handshake: the stream, what the access log records of it, and whether the client
/// chose HTTP/2.
struct Established {
    tls: ServerTlsStream<TcpStream>,
    facts: Rc<ConnFacts>,
    h2: bool,
}

/// What the access log records of a finished handshake.
fn settled(session: &ServerConnection) -> TlsSession {
    let version = match session.protocol_version() {
        Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
        _ => "TLS",
    };
    TlsSession { version, sni: session.server_name().unwrap_or_default().into() }
}
