//! An HTTP/1.1 backend over TLS (rustls, blocking, a thread per connection) for the `HTTPS`
//! backend tests. It answers every request `200` with a body naming itself, the SNI the client
//! sent (`-` for none), the request target and the client certificate presented, if any, keeps connections alive, counts them, and can
//! require a client certificate issued by a given CA. A WebSocket upgrade is answered `101`, and the
//! connection then echoes what it reads.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

/// The SNI of each handshake, in order (`None`: the client sent none).
pub type Snis = Arc<Mutex<Vec<Option<String>>>>;

pub struct TlsBackend {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    snis: Snis,
}

/// Records the SNI of each handshake, and always answers with the one certificate.
#[derive(Debug)]
struct Recorder {
    key: Arc<CertifiedKey>,
    snis: Snis,
}

impl ResolvesServerCert for Recorder {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.snis.lock().unwrap().push(hello.server_name().map(str::to_string));
        Some(self.key.clone())
    }
}

impl TlsBackend {
    /// Serves `<dir>/<file>.crt` / `.key`; with `client_ca`, a client certificate issued by it is
    /// required. `alpn`: the protocols offered (empty: no ALPN).
    pub fn start(
        name: &'static str,
        pki: &crate::pki::Pki,
        file: &str,
        client_ca: Option<CertificateDer<'static>>,
    ) -> Self {
        TlsBackend::serve(name, TcpListener::bind("127.0.0.1:0").unwrap(), pki, file, client_ca)
    }

    /// [`TlsBackend::start`] on a listener of the caller's (one bound elsewhere than 127.0.0.1).
    pub fn serve(
        name: &'static str,
        listener: TcpListener,
        pki: &crate::pki::Pki,
        file: &str,
        client_ca: Option<CertificateDer<'static>>,
    ) -> Self {
        let config = server_config(pki, file, client_ca, &[b"http/1.1"]);
        let snis = config.1.clone();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let config = config.0;
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let config = config.clone();
                std::thread::spawn(move || {
                    let Ok(conn) = rustls::ServerConnection::new(config) else { return };
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    let mut reader = BufReader::new(&mut tls);
                    loop {
                        let mut target = None;
                        let mut line = String::new();
                        let mut length = 0usize;
                        let mut upgrade = false;
                        loop {
                            line.clear();
                            match reader.read_line(&mut line) {
                                Ok(0) | Err(_) => return,
                                Ok(_) => {}
                            }
                            if target.is_none() {
                                target = line.split_whitespace().nth(1).map(str::to_string);
                                continue;
                            }
                            let lower = line.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                            upgrade |= lower.starts_with("upgrade:") && lower.contains("websocket");
                            if line == "\r\n" {
                                break;
                            }
                        }
                        if upgrade {
                            return echo_after_switching(&mut reader);
                        }
                        let mut body = vec![0; length];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        let session = &reader.get_ref().conn;
                        let sni = session.server_name().unwrap_or("-").to_string();
                        let client = match session.peer_certificates().and_then(|chain| chain.first()) {
                            Some(cert) => format!(" client={}", certificate_id(cert)),
                            None => String::new(),
                        };
                        let text = format!("{name} sni={sni} target={}{client}\n", target.unwrap_or_default());
                        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{text}", text.len());
                        let stream = reader.get_mut();
                        if stream.write_all(answer.as_bytes()).and_then(|_| stream.flush()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        TlsBackend { addr, connections, snis }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The SNI of every handshake so far.
    pub fn snis(&self) -> Vec<Option<String>> {
        self.snis.lock().unwrap().clone()
    }
}

/// A short name for a certificate (a hash of its DER), as the backend's answers give the client
/// certificate a client presented (` client=<id>`).
pub fn certificate_id(der: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    der.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// [`certificate_id`] of the first certificate of a PEM file.
pub fn certificate_file_id(path: &std::path::Path) -> String {
    let der = CertificateDer::pem_file_iter(path).unwrap().next().unwrap().unwrap();
    certificate_id(&der)
}

/// Answers a WebSocket upgrade with `101`, then sends back every byte it reads until EOF.
fn echo_after_switching<S: Read + Write>(reader: &mut BufReader<S>) {
    let switched = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n";
    if reader.get_mut().write_all(switched).and_then(|_| reader.get_mut().flush()).is_err() {
        return;
    }
    let mut chunk = [0u8; 4096];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let stream = reader.get_mut();
        if stream.write_all(&chunk[..n]).and_then(|_| stream.flush()).is_err() {
            return;
        }
    }
}

/// A server configuration for `<file>.crt` / `.key` of `pki`, recording SNIs, requiring a client
/// certificate from `client_ca` when given, offering `alpn`.
pub fn server_config(
    pki: &crate::pki::Pki,
    file: &str,
    client_ca: Option<CertificateDer<'static>>,
    alpn: &[&[u8]],
) -> (Arc<ServerConfig>, Snis) {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(pki.path(&format!("{file}.crt"))).unwrap().collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{file}.key"))).unwrap();
    let signer = rustls::crypto::ring::sign::any_supported_type(&key).unwrap();
    let snis = Arc::new(Mutex::new(Vec::new()));
    let resolver = Arc::new(Recorder { key: Arc::new(CertifiedKey::new(chain, signer)), snis: snis.clone() });
    let builder = ServerConfig::builder();
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            roots.add(ca).unwrap();
            builder.with_client_cert_verifier(WebPkiClientVerifier::builder(Arc::new(roots)).build().unwrap())
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    (Arc::new(config), snis)
}
