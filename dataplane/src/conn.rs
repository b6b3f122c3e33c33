//! What is known of a client connection once it is accepted (its PROXY protocol header read, if its
//! listener expects one, and its TLS handshake settled): the facts every request on it carries
//! upstream and into the access log, and the rules that say when a request's own fields may name
//! its client instead ([`AddressRules`]). The codecs, the pipeline and the servers all read them
//! from here.

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;

use ramjet_shared::client_auth::{escaped_pem, rfc2253, subject_and_issuer};
use ramjet_shared::{ClientAuth, IpBlock, Verdict};
use rustls::pki_types::{CertificateDer, UnixTime};

/// Per-connection facts added to every upstream head.
pub struct ConnFacts {
    /// The client's address as the connection tells it: the TCP peer, or the source a PROXY
    /// protocol header named. A request from a trusted proxy may name another
    /// (`codec::forwarded::request_client`).
    pub peer: SocketAddr,
    /// The client connection is TLS.
    pub tls: bool,
    /// The port the client connected to (nginx's `$server_port`; with a PROXY header, the
    /// destination port it names, nginx's `$proxy_protocol_server_port`).
    pub local_port: u16,
    /// What the TLS handshake settled, for the access log (`None` on a plain connection).
    pub tls_session: Option<TlsSession>,
    /// `x-forwarded-for`, `x-real-ip`, `x-forwarded-proto` and `x-forwarded-port` lines, rendered once
    /// per connection for `peer`.
    pub forwarded: Vec<u8>,
    /// Where the `x-forwarded-proto` line starts in `forwarded`.
    proto_at: usize,
    /// The rules its requests' fields are read by, only where they may change something: the
    /// peer is a trusted proxy, or the client's `X-Forwarded-For` is kept
    /// (`compute-full-forwarded-for`). `None` for every other connection, whose requests are not
    /// looked at for it.
    pub rules: Option<Rc<AddressRules>>,
    /// The peer is a trusted proxy: its requests' address field is believed.
    pub trusted: bool,
    /// ... and its `X-Forwarded-Host`, `-Proto` and `-Port` too (unless the rules believe only
    /// the address, [`AddressRules::address_only`]).
    pub trusted_fields: bool,
    /// A plain connection whose PROXY protocol header says the client connected to port 443: a
    /// balancer in front ended TLS, so its requests count as HTTPS (ingress-nginx's
    /// `$proxy_protocol_server_port = 443`): no HTTPS redirect, `X-Forwarded-Proto: https`.
    pub https_by_proxy: bool,
    /// The handshake's server name has a certificate of its own (not the default one): its
    /// answers carry `Strict-Transport-Security` when the table has it.
    pub own_certificate: bool,
    /// What the client's certificate came to, when its handshake was for a host that asks for one
    /// (boxed: every other connection pays a pointer for it).
    pub client_cert: Option<Box<PeerCertificate>>,
}

impl ConnFacts {
    pub fn new(peer: SocketAddr, tls: bool, local_port: u16) -> Self {
        use std::io::Write;
        let mut forwarded = Vec::with_capacity(128);
        let ip = peer.ip().to_canonical();
        let _ = write!(forwarded, "x-forwarded-for: {ip}\r\nx-real-ip: {ip}\r\n");
        let proto_at = forwarded.len();
        let proto = if tls { "https" } else { "http" };
        let _ = write!(forwarded, "x-forwarded-proto: {proto}\r\nx-forwarded-port: {local_port}\r\n");
        push_scheme_lines(&mut forwarded, proto.as_bytes());
        ConnFacts {
            peer,
            tls,
            local_port,
            tls_session: None,
            forwarded,
            proto_at,
            rules: None,
            trusted: false,
            trusted_fields: false,
            https_by_proxy: false,
            own_certificate: false,
            client_cert: None,
        }
    }

    /// The facts of a plain connection whose PROXY protocol header named the client `peer`, which
    /// connected to `port` of the balancer: port 443 means the balancer ended TLS for it.
    pub fn relayed(peer: SocketAddr, port: u16) -> Self {
        if port != 443 {
            return ConnFacts::new(peer, false, port);
        }
        let mut facts = ConnFacts::new(peer, true, port);
        facts.tls = false;
        facts.https_by_proxy = true;
        facts
    }

    /// The facts of a TLS connection, once its handshake has settled the version and the name.
    pub fn with_tls_session(peer: SocketAddr, local_port: u16, session: TlsSession) -> Self {
        ConnFacts { tls_session: Some(session), ..ConnFacts::new(peer, true, local_port) }
    }

    /// Keeps `rules` for this connection's requests where they can change anything for it (see
    /// [`ConnFacts::rules`]); a connection from anyone else is left as it is.
    pub fn with_rules(mut self, rules: Option<&Rc<AddressRules>>) -> Self {
        if let Some(rules) = rules {
            let trusted = rules.trusts(self.peer.ip());
            if trusted || rules.full_forwarded_for {
                self.rules = Some(rules.clone());
                self.trusted = trusted;
                self.trusted_fields = trusted && !rules.address_only;
            }
        }
        self
    }

    /// The `x-forwarded-proto`, `x-forwarded-port`, `x-forwarded-scheme` and `x-scheme` lines.
    pub fn proto_and_port_lines(&self) -> &[u8] {
        &self.forwarded[self.proto_at..]
    }
}

/// The fields a backend is told of the client's certificate (nginx's `ssl-client-*`), as the
/// external auth service's are: each replaces the client's own, and an empty value removes it.
pub type CertFields = Rc<[(Box<str>, Vec<u8>)]>;

/// The certificate chain a TLS client presented (possibly none) to a host asking for one, and
/// what it came to. It is checked at the handshake against that host's [`ClientAuth`]; a request
/// whose route has another (the configuration changed since) has it checked again, once.
pub struct PeerCertificate {
    chain: Vec<CertificateDer<'static>>,
    checked: RefCell<Checked>,
}

/// A chain's verdict under one host's authentication.
#[derive(Clone)]
pub struct Checked {
    pub auth: Arc<ClientAuth>,
    pub verdict: Verdict,
    /// The subject's distinguished name, RFC 2253 (empty without a certificate).
    pub subject: Rc<str>,
    pub fields: CertFields,
}

impl PeerCertificate {
    /// Checks `chain` (the client's own certificate first; empty: none was sent) against `auth`.
    pub fn new(chain: Vec<CertificateDer<'static>>, auth: &Arc<ClientAuth>) -> Self {
        let checked = check(&chain, auth);
        PeerCertificate { chain, checked: RefCell::new(checked) }
    }

    /// The verdict under `auth`: the one from the handshake when `auth` is what it was checked
    /// against, else checked now (and kept for the connection's next requests).
    pub fn checked_by(&self, auth: &Arc<ClientAuth>) -> Checked {
        let mut current = self.checked.borrow_mut();
        if !Arc::ptr_eq(&current.auth, auth) {
            // The compiler keeps an unchanged authentication's Arc across generations, so this is
            // a change, or the first request of a connection older than one.
            if *current.auth == **auth {
                current.auth = auth.clone();
            } else {
                *current = check(&self.chain, auth);
            }
        }
        current.clone()
    }
}

/// The verdict on a chain and what a backend is told of it.
fn check(chain: &[CertificateDer<'static>], auth: &Arc<ClientAuth>) -> Checked {
    let verdict = auth.check(chain, UnixTime::now());
    let names = chain.first().and_then(|leaf| subject_and_issuer(leaf));
    let (subject, issuer) = names.map_or((String::new(), String::new()), |(subject, issuer)| {
        (rfc2253(subject).unwrap_or_default(), rfc2253(issuer).unwrap_or_default())
    });
    let certificate = match chain.first() {
        Some(leaf) if auth.pass_certificate => escaped_pem(leaf),
        _ => String::new(),
    };
    let fields: Vec<(Box<str>, Vec<u8>)> = vec![
        ("ssl-client-verify".into(), verdict.as_field().into_bytes()),
        ("ssl-client-subject-dn".into(), subject.clone().into_bytes()),
        ("ssl-client-issuer-dn".into(), issuer.into_bytes()),
        ("ssl-client-cert".into(), certificate.into_bytes()),
    ];
    Checked { auth: auth.clone(), verdict, subject: subject.into(), fields: fields.into() }
}

thread_local! {
    /// What a backend is told of a request that came without a certificate: `NONE`, and none of
    /// the client's own `ssl-client-*` fields.
    static NO_CERTIFICATE: CertFields = vec![
        ("ssl-client-verify".into(), b"NONE".to_vec()),
        ("ssl-client-subject-dn".into(), Vec::new()),
        ("ssl-client-issuer-dn".into(), Vec::new()),
        ("ssl-client-cert".into(), Vec::new()),
    ]
    .into();
}

/// The fields for a request without a certificate (shared by every such request of the worker).
pub fn no_certificate_fields() -> CertFields {
    NO_CERTIFICATE.with(Rc::clone)
}

/// `x-forwarded-scheme` and `x-scheme`, which ingress-nginx sets to the scheme as
/// `x-forwarded-proto` (nginx's `$pass_access_scheme`); a client's own never go upstream.
pub fn push_scheme_lines(out: &mut Vec<u8>, scheme: &[u8]) {
    out.extend_from_slice(b"x-forwarded-scheme: ");
    out.extend_from_slice(scheme);
    out.extend_from_slice(b"\r\nx-scheme: ");
    out.extend_from_slice(scheme);
    out.extend_from_slice(b"\r\n");
}

/// The negotiated TLS version and the SNI name the client sent.
pub struct TlsSession {
    /// `TLSv1.2` or `TLSv1.3`, spelled as nginx's `$ssl_protocol` does.
    pub version: &'static str,
    /// The server name from the ClientHello (empty when the client sent none).
    pub sni: Box<str>,
}

/// Who may name a request's client, and how (what an operator sets: `--trusted-proxies`,
/// `--forwarded-for-header`, `--compute-full-forwarded-for`; ingress-nginx's `proxy-real-ip-cidr`,
/// `forwarded-for-header` and `compute-full-forwarded-for`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressRules {
    /// Peers whose requests' [`AddressRules::field`] is believed, walked from the right past
    /// every trusted address. Empty: nobody's.
    pub trusted: Box<[IpBlock]>,
    /// The field that names the client.
    pub field: AddressField,
    /// `X-Forwarded-For` upstream is the client's own with the peer appended, rather than the
    /// client's address alone.
    pub full_forwarded_for: bool,
    /// Only the client's address is believed from a trusted proxy (ingress-nginx's
    /// `enable-real-ip` without `use-forwarded-headers`): its `X-Forwarded-Host`, `-Proto` and
    /// `-Port` are replaced by ramjet's own, and never stop an HTTPS redirect.
    pub address_only: bool,
}

impl AddressRules {
    /// Whether `ip` is a trusted proxy (an IPv4-mapped IPv6 address counts as its IPv4 address).
    #[inline]
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.trusted.iter().any(|b| b.contains(ip))
    }

    /// Whether the rules can change anything for any request.
    pub fn is_active(&self) -> bool {
        !self.trusted.is_empty() || self.full_forwarded_for
    }
}

/// The request field that names the client when the peer is trusted: `X-Forwarded-For` (the
/// default), `X-Real-IP`, `Forwarded` (RFC 7239: its `for=` parameters), or any other field whose
/// value is a comma-separated list of addresses (`CF-Connecting-IP`, `True-Client-IP`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressField {
    /// Lower case.
    name: Box<str>,
}

impl AddressField {
    /// A field name (an HTTP token), or why it is not one.
    pub fn new(name: &str) -> Result<Self, String> {
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(token) {
            return Err(format!("`{name}` is not an HTTP field name"));
        }
        Ok(AddressField { name: name.to_ascii_lowercase().into() })
    }

    /// The name, in lower case.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// RFC 7239's `Forwarded`, whose elements carry the address in a `for=` parameter.
    pub fn is_forwarded(&self) -> bool {
        &*self.name == "forwarded"
    }
}

impl Default for AddressField {
    fn default() -> Self {
        AddressField { name: "x-forwarded-for".into() }
    }
}
