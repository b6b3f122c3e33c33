//! What a TLS connection gets when a TLS route claims the server name of its ClientHello (on a TLS
//! route port, or on ramjet's HTTPS port beside HTTPS): one of the route's backends, drawn by
//! weight, then
//! - passed through: the session stays unopened, and the ClientHello and all that follows go to the
//!   backend as they came ([`super::passthrough`]);
//! - terminated: the handshake is done here with the route's certificate, and the plain bytes are
//!   relayed both ways as a TCP route's are ([`crate::base::buf::splice`], with its idle timeout).
//!
//! A terminated name's server configuration (one per certificate) is built on first use and kept
//! by the relay of the worker's accept loop.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use monoio::net::TcpStream;
use monoio_rustls::ServerTlsStream;
use ramjet_shared::{CertId, Published, TlsTarget};
use rustls::server::{Accepted, ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use super::handshake::handshake;
use super::{client_hello, passthrough, relay_backend};
use crate::worker::Worker;

/// The most server configurations a relay keeps (one per certificate it terminates with).
const CONFIGS: usize = 8;

/// Relays the TLS connections a TLS route target claims by server name (on a TLS route port, or
/// on ramjet's HTTPS port beside HTTPS), keeping the server configurations of the certificates it
/// terminates with.
pub(crate) struct TlsRelay {
    published: Arc<Published>,
    /// Server configurations by certificate, the most recently built last.
    configs: RefCell<Vec<(CertId, Arc<ServerConfig>)>>,
}

impl TlsRelay {
    /// `published`: where the certificates of the names it terminates are found.
    pub fn new(published: Arc<Published>) -> Self {
        TlsRelay { published, configs: RefCell::default() }
    }

    /// One connection whose ClientHello (`accepted`, after the bytes `seen`) chose `target`: one of
    /// its backends by weight, then the session passed through, or terminated here and its plain
    /// bytes relayed. Without a backend to take it, the connection is closed.
    pub async fn relay(
        &self,
        worker: &Rc<Worker>,
        mut client: TcpStream,
        accepted: Accepted,
        seen: Vec<u8>,
        target: &TlsTarget,
    ) {
        let Some(backend) = relay_backend::pick(worker, &target.route) else {
            return worker.counters().tls_handshake_failed();
        };
        let Some(certificate) = target.terminate else {
            return Box::pin(passthrough::splice(worker, client, seen, &backend)).await;
        };
        let Some(config) = self.config(certificate) else {
            // The store lacks a certificate its table names: cannot happen (published first).
            return worker.counters().tls_handshake_failed();
        };
        let handshake = async {
            let session = client_hello::continue_with(&mut client, accepted, config).await?;
            handshake(&mut client, session).await
        };
        let session = match worker.timeout(worker.settings.header_timeout, handshake).await {
            Ok(Ok(session)) => session,
            _ => return worker.counters().tls_handshake_failed(),
        };
        let Some(upstream) = relay_backend::connect(worker, &backend).await else { return };
        let idle = (&*worker.coarse_timer, worker.settings.tcp_idle_timeout);
        crate::base::buf::splice(ServerTlsStream::new(client, session), upstream, Some(idle)).await;
    }

    /// The server configuration that presents `certificate` (`None`: not in the published store).
    fn config(&self, certificate: CertId) -> Option<Arc<ServerConfig>> {
        let mut configs = self.configs.borrow_mut();
        if let Some((_, config)) = configs.iter().find(|(id, _)| *id == certificate) {
            return Some(config.clone());
        }
        let key = self.published.certs().load().get(&certificate)?.key.clone();
        let config = ServerConfig::builder().with_no_client_auth().with_cert_resolver(Arc::new(Presents(key)));
        let config = Arc::new(config);
        if configs.len() == CONFIGS {
            configs.remove(0);
        }
        configs.push((certificate, config.clone()));
        Some(config)
    }
}

/// Presents one certificate whatever the name (the port has already chosen it by name).
#[derive(Debug)]
struct Presents(Arc<CertifiedKey>);

impl ResolvesServerCert for Presents {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}
