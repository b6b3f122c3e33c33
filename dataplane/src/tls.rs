//! TLS termination: rustls through monoio-rustls, the certificate chosen by SNI from the serving
//! generation.
//!
//! The resolver runs inside the handshake: it reads the SNI name, looks the host up in the current
//! table (exact host, then single-label wildcard, as routing does) and hands rustls the parsed key
//! from the published certificate store. Because the applier publishes the store before the table,
//! a table never names a certificate the store lacks, and a rotation is just another generation.

use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use monoio::net::TcpStream;
use monoio_rustls::TlsAcceptor;
use ramjet_shared::{normalize_host, Published};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use crate::http1::{self, ConnFacts};
use crate::http2;
use crate::worker::Worker;

/// Picks the certificate for each handshake from what is published now.
pub struct SniResolver {
    published: Arc<Published>,
    default: Option<Arc<CertifiedKey>>,
}

impl fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SniResolver").field("default", &self.default.is_some()).finish()
    }
}

impl SniResolver {
    pub fn new(published: Arc<Published>, default: Option<Arc<CertifiedKey>>) -> Self {
        SniResolver { published, default }
    }

    /// The certificate for an SNI name, if the serving table has one for it.
    pub fn lookup(&self, sni: &str) -> Option<Arc<CertifiedKey>> {
        let mut buf = [0u8; 256];
        let host = normalize_host(sni, &mut buf)?;
        let id = self.published.generation().load().table.certificate_for(host)?;
        self.published.certs().load().get(&id).map(|c| c.key.clone())
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // No SNI, or a host without a certificate: the default certificate, else the handshake
        // fails with an alert.
        hello.server_name().and_then(|sni| self.lookup(sni)).or_else(|| self.default.clone())
    }
}

/// Builds the server configuration shared by every worker: TLS 1.2 and 1.3 with rustls' safe
/// defaults, ALPN `h2` preferred and `http/1.1` offered, stateless session tickets.
pub fn server_config(
    published: Arc<Published>,
    default: Option<Arc<CertifiedKey>>,
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
    acceptor: TlsAcceptor,
}

impl TlsTerminator {
    pub fn new(config: Arc<ServerConfig>) -> Rc<Self> {
        Rc::new(TlsTerminator { acceptor: TlsAcceptor::from(config) })
    }

    /// Handshakes within the header timeout, then serves HTTP/2 over the TLS stream if the client
    /// chose it by ALPN, else HTTP/1.1.
    pub async fn serve(&self, worker: &Rc<Worker>, stream: TcpStream, facts: &Rc<ConnFacts>) {
        let handshake = monoio::time::timeout(worker.settings.header_timeout, self.acceptor.accept(stream)).await;
        match handshake {
            Ok(Ok(tls)) if tls.alpn_protocol().as_deref() == Some(b"h2") => {
                http2::serve(worker.clone(), tls, None, facts.clone()).await
            }
            Ok(Ok(tls)) => http1::serve(worker, tls, facts).await,
            Ok(Err(e)) => {
                worker.counters().tls_handshake_failed();
                tracing::debug!(worker = worker.id, error = %e, "TLS handshake failed");
            }
            Err(_) => worker.counters().tls_handshake_failed(),
        }
    }
}
