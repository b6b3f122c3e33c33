//! Reading the static routes file (`--static-routes FILE`): backends, routes, TLS and a default
//! backend in YAML, with Kubernetes' vocabulary. Every mistake is refused with the file, line and
//! field. [`crate::compile::static_routes`] compiles what this module reads.
//!
//! ```yaml
//! backends:
//!   api:   { endpoints: ["127.0.0.1:9001", "127.0.0.1:9002"] }
//!   hello: { respond: { status: 200, body: "hello from ramjet\n" } }
//! defaultBackend: hello
//! routes:
//!   - { host: example.com, path: /api, pathType: Prefix, backend: api }
//!   - { path: /, backend: hello }
//! tls:
//!   - { hosts: [example.com], certFile: example.crt, keyFile: example.key }
//! ```
//!
//! Layer-4 entries (`tcp:`, `udp:`, `tlsPorts:`) are checked across the file too, as they are read:
//! a port is one `tcp:` entry's (one `udp:` entry's), or shared by `tlsPorts:` entries by server
//! name, and they relay only to plain `endpoints`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ramjet_shared::{BackendProtocol, Certificate, SubjectAltName, UpstreamTls, UpstreamTlsSpec};
use serde::de::{self, Deserializer};
use serde::Deserialize;

use crate::canary::CanarySpec;
use crate::certs::{is_expired, parse_ca_bundle, parse_certificate};

/// A static routes file, parsed and validated.
#[derive(Debug, Clone)]
pub struct StaticRoutes {
    pub backends: BTreeMap<String, BackendSpec>,
    pub default_backend: Option<String>,
    pub routes: Vec<RouteSpec>,
    pub tls: Vec<TlsSpec>,
    /// TCP routes: connections to a port relayed to backends split by weight.
    pub tcp: Vec<PortSpec>,
    /// UDP routes: flows to a port relayed the same way.
    pub udp: Vec<PortSpec>,
    /// TLS ports: connections to a port relayed by the server name of their ClientHello, passed
    /// through or terminated here.
    pub tls_ports: Vec<TlsPortSpec>,
    /// Non-fatal findings (an expired certificate).
    pub warnings: Vec<String>,
}

/// A `tcp:` or `udp:` entry: the port ramjet listens on (on the HTTP listener's address), and the
/// backends its connections (flows) are relayed to, with their weights.
///
/// ```yaml
/// tcp:
///   - { port: 15432, backend: db }
///   - { port: 16379, backends: [{ name: cache-a, weight: 3 }, { name: cache-b, weight: 1 }] }
/// udp:
///   - { port: 5353, backend: dns }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PortSpec {
    pub port: u16,
    pub backends: Vec<(String, u32)>,
}

/// A `tlsPorts:` entry: what a Gateway `TLS` listener on a port of its own and its TLSRoute do.
/// Connections to the port (on the HTTP listener's address) whose ClientHello names one of
/// `hostnames` are passed to the backends unopened (`mode: Passthrough`), or terminated here with
/// the entry's certificate and relayed in plain (`mode: Terminate`). Several entries share a port
/// by name; a name the port does not serve is refused.
///
/// ```yaml
/// tlsPorts:
///   - { port: 8883, hostnames: [mqtt.example.com], mode: Passthrough, backend: mqtt }
///   - port: 8883
///     hostnames: ["*.iot.example.com"]
///     mode: Terminate
///     certFile: iot.crt
///     keyFile: iot.key
///     backends: [{ name: iot-a, weight: 3 }, { name: iot-b, weight: 1 }]
/// ```
#[derive(Debug, Clone)]
pub struct TlsPortSpec {
    /// The port, and the backends its names' connections are relayed to.
    pub relay: PortSpec,
    /// The server names, lower case, `*.` matching one label; `[""]` (no `hostnames`): any name,
    /// and a ClientHello without one.
    pub hostnames: Vec<String>,
    /// `Some`: terminated here with this certificate; `None`: passed through.
    pub terminate: Option<Arc<Certificate>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum BackendSpec {
    /// Endpoints, the protocol they speak (`protocol:`, default `HTTP`) and, for `HTTPS` and
    /// `GRPCS`, how TLS to them goes (`tls:`).
    Endpoints(Vec<EndpointAddr>, BackendProtocol, Option<BackendTls>),
    Respond {
        status: u16,
        body: String,
    },
}

/// An endpoint as the file writes it: an address, or a DNS name and a port, resolved on the
/// control thread and kept fresh by its TTL ([`crate::dns`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointAddr {
    Addr(SocketAddr),
    /// The name in the form DNS answers are kept in ([`crate::dns::normalize`]).
    Name(String, u16),
}

impl EndpointAddr {
    /// The host as written: the address, or the name (the TLS server name's default).
    pub fn host(&self) -> String {
        match self {
            EndpointAddr::Addr(addr) => addr.ip().to_string(),
            EndpointAddr::Name(name, _) => name.clone(),
        }
    }
}

/// A backend's `tls:` (for `HTTPS` and `GRPCS`): ingress-nginx's defaults are encrypt without
/// verifying and no SNI.
///
/// ```yaml
/// api:
///   endpoints: ["api.internal:8443"]
///   protocol: HTTPS
///   tls: { verify: true, caFile: ca.pem, serverName: api.internal, sni: true, certFile: c.crt, keyFile: c.key }
///   # or, verified by the names the certificate carries (the server name is then only the SNI):
///   tls: { verify: true, caFile: ca.pem, serverName: api.internal, sni: true, subjectAltNames: [spiffe://c/ns/a/sa/api] }
/// ```
#[derive(Debug, Clone)]
pub struct BackendTls(pub UpstreamTlsSpec);

impl PartialEq for BackendTls {
    fn eq(&self, other: &Self) -> bool {
        let key = |s: &UpstreamTlsSpec| {
            let cert = s.client_cert.as_ref().map(|c| c.id);
            (s.verify.as_ref().map(|b| b.id), s.server_name.clone(), s.sni, cert, s.subject_alt_names.clone())
        };
        key(&self.0) == key(&other.0)
    }
}

#[derive(Debug, Clone)]
pub struct RouteSpec {
    /// Lower case; `""` for any host; may start with `*.`.
    pub host: String,
    pub path: String,
    /// Exact, or Prefix (ImplementationSpecific is Prefix).
    pub exact: bool,
    pub backend: String,
    /// A canary sharing this route: its backend and policy.
    pub canary: Option<(String, CanarySpec)>,
    pub mirror: Option<MirrorSpec>,
}

/// A route's mirror in a static routes file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSpec {
    pub backend: String,
    pub percent: u8,
    pub body: bool,
    pub host: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TlsSpec {
    pub hosts: Vec<String>,
    pub certificate: Arc<Certificate>,
    pub ssl_redirect: bool,
}

/// A file that cannot be used, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: String,
    /// 1-based line and column, when known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{}:{}: {}", self.file, l, c, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

struct ParseContext {
    backends: BTreeSet<String>,
    /// The backends a Layer-4 entry can relay bytes to: plain `endpoints`.
    relayable: BTreeSet<String>,
    base_dir: PathBuf,
    warnings: Vec<String>,
    /// The Layer-4 entries read so far, by list: the index of the next one.
    read: BTreeMap<Layer4, usize>,
    /// Each port given so far, by (UDP or not, number): the entry that has it (`tcp`, 0).
    ports: BTreeMap<(bool, u16), (Layer4, usize)>,
    /// Each server name of a TLS port so far, by (port, name; `""`: any): the `tlsPorts` index.
    tls_names: BTreeMap<(u16, String), usize>,
}

thread_local! {
    /// What the typed pass needs to validate references: the backend names found by the first pass,
    /// and the directory relative certificate paths start from. Set only for the length of a parse.
    static CONTEXT: RefCell<Option<ParseContext>> = const { RefCell::new(None) };
}

/// Reads and validates a static routes file.
pub fn load(path: &Path) -> Result<StaticRoutes, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message: format!("cannot read: {e}"),
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, base, &path.display().to_string())
}

/// Parses static routes from text; `base_dir` resolves relative certificate paths, `file` names the
/// origin in errors.
pub fn parse(text: &str, base_dir: &Path, file: &str) -> Result<StaticRoutes, ConfigError> {
    let error = |e: serde_yaml_ng::Error| {
        let location = e.location();
        ConfigError {
            file: file.to_string(),
            line: location.as_ref().map(|l| l.line()),
            column: location.as_ref().map(|l| l.column()),
            message: strip_location(&e.to_string()),
        }
    };
    // First pass: just the backend names, so references can be checked where they are written.
    #[derive(Deserialize)]
    struct Names {
        #[serde(default)]
        backends: Option<BTreeMap<String, serde_yaml_ng::Value>>,
    }
    let names: Names = serde_yaml_ng::from_str(text).map_err(error)?;
    let written = names.backends.unwrap_or_default();
    let relayable = written.iter().filter(|(_, spec)| relays_bytes(spec)).map(|(name, _)| name.clone()).collect();
    let context = ParseContext {
        backends: written.into_keys().collect(),
        relayable,
        base_dir: base_dir.to_path_buf(),
        warnings: Vec::new(),
        read: BTreeMap::new(),
        ports: BTreeMap::new(),
        tls_names: BTreeMap::new(),
    };
    CONTEXT.with(|c| *c.borrow_mut() = Some(context));
    let parsed: Result<File, _> = serde_yaml_ng::from_str(text);
    let warnings = CONTEXT.with(|c| c.borrow_mut().take()).map(|c| c.warnings).unwrap_or_default();
    let file_spec = parsed.map_err(error)?;
    if let Some(name) = &file_spec.default_backend {
        if !file_spec.backends.contains_key(name) {
            let line = text.lines().position(|l| l.starts_with("defaultBackend")).map(|i| i + 1);
            let defined: Vec<&str> = file_spec.backends.keys().map(String::as_str).collect();
            return Err(ConfigError {
                file: file.to_string(),
                line,
                column: line.map(|_| 1),
                message: format!(
                    "defaultBackend: unknown backend `{name}`; the backends defined are: {}",
                    defined.join(", ")
                ),
            });
        }
    }
    Ok(StaticRoutes {
        backends: file_spec.backends.into_iter().map(|(k, v)| (k, v.0)).collect(),
        default_backend: file_spec.default_backend,
        routes: file_spec
            .routes
            .into_iter()
            .map(|r| RouteSpec {
                host: r.host.map(|h| h.0).unwrap_or_default(),
                path: r.path.0,
                exact: r.path_type == PathType::Exact,
                backend: r.backend.0,
                canary: r.canary.map(|c| {
                    let spec = CanarySpec {
                        weight: c.weight,
                        weight_total: c.weight_total,
                        header: c.header,
                        header_value: c.header_value,
                        header_pattern: c.header_pattern.map(|p| p.0),
                        cookie: c.cookie,
                        sticky: c.sticky,
                        legacy_affinity: false,
                    };
                    (c.backend.0, spec)
                }),
                mirror: r.mirror.map(|m| MirrorSpec {
                    backend: m.backend.0,
                    percent: m.percent.0,
                    body: m.body,
                    host: m.host.map(|h| h.0),
                }),
            })
            .collect(),
        tls: file_spec
            .tls
            .into_iter()
            .map(|t| TlsSpec {
                hosts: t.hosts.into_iter().map(|h| h.0).collect(),
                certificate: t.files.0,
                ssl_redirect: t.ssl_redirect,
            })
            .collect(),
        tcp: file_spec.tcp.into_iter().map(|t| t.0).collect(),
        udp: file_spec.udp.into_iter().map(|t| t.0).collect(),
        tls_ports: file_spec.tls_ports.into_iter().map(|t| t.0).collect(),
        warnings,
    })
}

/// serde_yaml_ng appends " at line L column C" (carried separately here) and reports a custom error at
/// the enclosing entry (`routes[0]: …`); a field-tagged message (see [`field_error`]) names the field
/// itself: `routes[0].backend: …`.
fn strip_location(message: &str) -> String {
    let message = match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    match message.split_once(FIELD_TAG) {
        Some((prefix, rest)) => {
            let (field, text) = rest.split_once(FIELD_TAG).unwrap_or(("", rest));
            match prefix.strip_suffix(": ") {
                Some(path) if !path.is_empty() => format!("{path}.{field}: {text}"),
                _ => format!("{field}: {text}"),
            }
        }
        None => message.to_string(),
    }
}

const FIELD_TAG: char = '\u{1}';

/// A custom error that names the field it is about.
fn field_error<E: de::Error>(field: &str, message: impl fmt::Display) -> E {
    E::custom(format!("{FIELD_TAG}{field}{FIELD_TAG}{message}"))
}

/// Why a list entry is refused, and the field it is about (see [`entry`]).
struct Refusal {
    field: &'static str,
    message: String,
}

impl Refusal {
    fn new(field: &'static str, message: impl Into<String>) -> Refusal {
        Refusal { field, message: message.into() }
    }
}

/// Reads a list entry (a mapping) as `R` and `check`s it while still inside it, so that a refusal
/// names the entry's own line and path (`tcp[1].backends: …`), not its list's.
fn entry<'de, D, R, T>(d: D, check: impl FnOnce(R) -> Result<T, Refusal>) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    R: Deserialize<'de>,
{
    struct Entry<R, F>(F, PhantomData<R>);

    impl<'de, R: Deserialize<'de>, T, F: FnOnce(R) -> Result<T, Refusal>> de::Visitor<'de> for Entry<R, F> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a mapping")
        }

        fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = R::deserialize(de::value::MapAccessDeserializer::new(map))?;
            (self.0)(raw).map_err(|r| field_error(r.field, r.message))
        }
    }

    d.deserialize_map(Entry(check, PhantomData))
}

/// The parse's context, when there is one (there is while [`parse`] runs).
fn with_context<T>(f: impl FnOnce(&mut ParseContext) -> T) -> Option<T> {
    CONTEXT.with(|c| c.borrow_mut().as_mut().map(f))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    #[serde(default)]
    backends: BTreeMap<String, BackendField>,
    #[serde(default)]
    default_backend: Option<String>,
    #[serde(default)]
    routes: Vec<RouteField>,
    #[serde(default)]
    tls: Vec<TlsField>,
    #[serde(default)]
    tcp: Vec<PortField<TCP>>,
    #[serde(default)]
    udp: Vec<PortField<UDP>>,
    #[serde(default)]
    tls_ports: Vec<TlsPortField>,
}

/// The lists of Layer-4 entries, which give out ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer4 {
    Tcp,
    Udp,
    TlsPorts,
}

impl Layer4 {
    /// The list's name in the file.
    fn name(self) -> &'static str {
        match self {
            Layer4::Tcp => "tcp",
            Layer4::Udp => "udp",
            Layer4::TlsPorts => "tlsPorts",
        }
    }
}

/// [`PortField`]'s list, as a const parameter.
const TCP: bool = false;
const UDP: bool = true;

/// A `tcp:` ([`TCP`]) or `udp:` ([`UDP`]) entry, checked where it is written (so an error has its
/// line).
struct PortField<const IS_UDP: bool>(PortSpec);

impl<'de, const IS_UDP: bool> Deserialize<'de> for PortField<IS_UDP> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            port: PortNumber,
            #[serde(default)]
            backend: Option<RelayRef>,
            #[serde(default)]
            backends: Option<Vec<WeightedRef>>,
        }
        entry(d, |raw: Raw| {
            claim_port(if IS_UDP { Layer4::Udp } else { Layer4::Tcp }, raw.port.0)?;
            let backends = weighted(raw.backend, raw.backends)?;
            Ok(PortField(PortSpec { port: raw.port.0, backends }))
        })
    }
}

/// A `tlsPorts:` entry, checked where it is written.
struct TlsPortField(TlsPortSpec);

impl<'de> Deserialize<'de> for TlsPortField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct Raw {
            port: PortNumber,
            #[serde(default)]
            hostnames: Option<Vec<HostName>>,
            mode: TlsMode,
            #[serde(default)]
            cert_file: Option<PathBuf>,
            #[serde(default)]
            key_file: Option<PathBuf>,
            #[serde(default)]
            backend: Option<RelayRef>,
            #[serde(default)]
            backends: Option<Vec<WeightedRef>>,
        }
        entry(d, |raw: Raw| {
            let port = raw.port.0;
            let index = claim_port(Layer4::TlsPorts, port)?;
            let hostnames = match raw.hostnames {
                None => vec![String::new()],
                Some(list) if list.is_empty() => {
                    return Err(Refusal::new("hostnames", "is empty: list the server names, or leave it out for any"))
                }
                Some(list) => list.into_iter().map(|h| h.0).collect(),
            };
            for host in &hostnames {
                claim_tls_name(index, port, host)?;
            }
            let terminate = match (raw.mode, raw.cert_file, raw.key_file) {
                (TlsMode::Terminate, Some(cert), Some(key)) => {
                    let base = with_context(|c| c.base_dir.clone()).unwrap_or_default();
                    Some(CertFiles::read(&base, &cert, &key).map_err(|e| Refusal::new("certFile", e))?.0)
                }
                (TlsMode::Terminate, None, None) => {
                    let why =
                        "mode Terminate needs certFile and keyFile: the certificate ramjet presents for these names";
                    return Err(Refusal::new("certFile", why));
                }
                (TlsMode::Terminate, _, _) => return Err(Refusal::new("certFile", "certFile and keyFile go together")),
                (TlsMode::Passthrough, None, None) => None,
                (TlsMode::Passthrough, cert, _) => {
                    let field = if cert.is_some() { "certFile" } else { "keyFile" };
                    let why = "mode Passthrough hands the TLS session to the backend unopened, so ramjet presents no \
                               certificate: leave certFile and keyFile out, or use mode Terminate";
                    return Err(Refusal::new(field, why));
                }
            };
            let backends = weighted(raw.backend, raw.backends)?;
            Ok(TlsPortField(TlsPortSpec { relay: PortSpec { port, backends }, hostnames, terminate }))
        })
    }
}

/// What a TLS port does with a name's connections.
#[derive(Clone, Copy)]
enum TlsMode {
    Passthrough,
    Terminate,
}

impl<'de> Deserialize<'de> for TlsMode {
    /// `Passthrough` or `Terminate`, as the Gateway API spells them; any case.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, |mode| match mode.to_ascii_lowercase().as_str() {
            "passthrough" => Ok(TlsMode::Passthrough),
            "terminate" => Ok(TlsMode::Terminate),
            _ => Err(format!("`{mode}` is not a mode: Passthrough or Terminate")),
        })
    }
}

/// Gives the next entry of `list` its index, and `port`: a TCP (UDP) port is one entry's, except
/// that `tlsPorts` entries share theirs by server name.
fn claim_port(list: Layer4, port: u16) -> Result<usize, Refusal> {
    with_context(|c| {
        let read = c.read.entry(list).or_default();
        let index = *read;
        *read += 1;
        let key = (list == Layer4::Udp, port);
        match c.ports.get(&key) {
            None => {
                c.ports.insert(key, (list, index));
                Ok(index)
            }
            Some(&(Layer4::TlsPorts, _)) if list == Layer4::TlsPorts => Ok(index),
            Some(&(held, at)) => {
                let why = if held == list {
                    "a port relays to one entry's backends"
                } else {
                    "a TCP port relays its connections as they come (`tcp:`) or by server name (`tlsPorts:`), not both"
                };
                let held = held.name();
                Err(Refusal::new("port", format!("port {port} is already given to {held}[{at}]: {why}")))
            }
        }
    })
    .unwrap_or(Ok(0))
}

/// Gives `host` (`""`: any name) on TLS `port` to the `tlsPorts` entry `index`: a name is one
/// entry's.
fn claim_tls_name(index: usize, port: u16, host: &str) -> Result<(), Refusal> {
    with_context(|c| match c.tls_names.get(&(port, host.to_string())) {
        None => {
            c.tls_names.insert((port, host.to_string()), index);
            Ok(())
        }
        Some(&at) => {
            let name =
                if host.is_empty() { "any server name (no `hostnames`)".to_string() } else { format!("`{host}`") };
            let whose =
                if at == index { "is listed twice".to_string() } else { format!("is already given to tlsPorts[{at}]") };
            Err(Refusal::new("hostnames", format!("{name} on port {port} {whose}: a name goes to one entry")))
        }
    })
    .unwrap_or(Ok(()))
}

/// A Layer-4 entry's backends as written, `backend: x` or `backends: [{ name, weight }]`, with
/// their weights; some weight must be above 0.
fn weighted(one: Option<RelayRef>, list: Option<Vec<WeightedRef>>) -> Result<Vec<(String, u32)>, Refusal> {
    let backends: Vec<(String, u32)> = match (one, list) {
        (Some(one), None) => vec![(one.0, 1)],
        (None, Some(list)) if !list.is_empty() => list.into_iter().map(|w| (w.name.0, w.weight)).collect(),
        _ => return Err(Refusal::new("backend", "give exactly one of `backend` or a non-empty `backends`")),
    };
    if backends.iter().all(|(_, weight)| *weight == 0) {
        return Err(Refusal::new("backends", "every weight is 0: no connection could be relayed"));
    }
    Ok(backends)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightedRef {
    name: RelayRef,
    #[serde(default = "one")]
    weight: u32,
}

/// A backend a Layer-4 entry relays bytes to: one of `backends`, with plain `endpoints`.
struct RelayRef(String);

impl<'de> Deserialize<'de> for RelayRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, |name| {
            known_backend(name)?;
            match with_context(|c| c.relayable.contains(name)) {
                Some(false) => Err(format!(
                    "backend `{name}` cannot be relayed to: a Layer-4 entry relays bytes to plain `endpoints` (no \
                     `respond`, no `protocol` but HTTP)"
                )),
                _ => Ok(RelayRef(name.to_string())),
            }
        })
    }
}

/// Whether a backend as written (`backends.NAME`) is plain `endpoints`: what a Layer-4 entry can
/// relay bytes to.
fn relays_bytes(spec: &serde_yaml_ng::Value) -> bool {
    let plain = spec
        .get("protocol")
        .is_none_or(|p| matches!(p.as_str().map(BackendProtocol::parse), Some(Ok(BackendProtocol::Http1))));
    spec.get("endpoints").is_some() && spec.get("respond").is_none() && plain
}

fn one() -> u32 {
    1
}

/// A port to listen on: 1 to 65535.
struct PortNumber(u16);

impl<'de> Deserialize<'de> for PortNumber {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Port;

        impl de::Visitor<'_> for Port {
            type Value = PortNumber;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a port (1 to 65535)")
            }

            // Checked here, while the number is read, so that the error has its own line.
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<PortNumber, E> {
                match u16::try_from(n) {
                    Ok(port) if port > 0 => Ok(PortNumber(port)),
                    _ => Err(E::custom(format!("{n} is not a port (1 to 65535)"))),
                }
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> Result<PortNumber, E> {
                Err(E::custom(format!("{n} is not a port (1 to 65535)")))
            }
        }

        d.deserialize_u64(Port)
    }
}

/// Reads a string and `check`s it while it is being read, so that a refusal names the value's own
/// line, column and path (`tlsPorts[0].hostnames[1]: …`), not those of the entry around it.
fn checked_str<'de, D: Deserializer<'de>, T>(
    d: D,
    check: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error> {
    struct Checked<F>(F);

    impl<T, F: FnOnce(&str) -> Result<T, String>> de::Visitor<'_> for Checked<F> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }

        fn visit_str<E: de::Error>(self, value: &str) -> Result<T, E> {
            (self.0)(value).map_err(E::custom)
        }
    }

    d.deserialize_str(Checked(check))
}

struct BackendField(BackendSpec);

impl<'de> Deserialize<'de> for BackendField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            endpoints: Option<Vec<Endpoint>>,
            respond: Option<Respond>,
            protocol: Option<String>,
            tls: Option<TlsOptions>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Respond {
            status: u16,
            #[serde(default)]
            body: String,
        }
        let raw = Raw::deserialize(d)?;
        let protocol = match (&raw.protocol, &raw.respond) {
            (None, _) => BackendProtocol::Http1,
            (Some(_), Some(_)) => return Err(de::Error::custom("`protocol` applies to `endpoints`, not `respond`")),
            (Some(p), None) => BackendProtocol::parse(p).map_err(de::Error::custom)?,
        };
        if raw.tls.is_some() && !protocol.is_tls() {
            return Err(field_error("tls", "applies to backends whose protocol is HTTPS or GRPCS"));
        }
        match (raw.endpoints, raw.respond) {
            (Some(e), None) => {
                let tls = match protocol.is_tls() {
                    // The name verified defaults to the first endpoint's host, as written.
                    true => Some(raw.tls.unwrap_or_default().spec(e.first().map(|e| e.0.host()).as_deref())?),
                    false => None,
                };
                Ok(BackendField(BackendSpec::Endpoints(e.into_iter().map(|e| e.0).collect(), protocol, tls)))
            }
            (None, Some(r)) if (200..=599).contains(&r.status) => {
                Ok(BackendField(BackendSpec::Respond { status: r.status, body: r.body }))
            }
            (None, Some(r)) => {
                Err(de::Error::custom(format!("respond.status {} is not between 200 and 599", r.status)))
            }
            _ => Err(de::Error::custom("a backend needs exactly one of `endpoints` or `respond`")),
        }
    }
}

/// A backend's `tls:` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TlsOptions {
    #[serde(default)]
    verify: bool,
    ca_file: Option<PathBuf>,
    server_name: Option<String>,
    #[serde(default)]
    sni: bool,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    /// Names the certificate must carry one of instead of `serverName`: a DNS name, or a URI
    /// (anything with `://`, a SPIFFE id say).
    #[serde(default)]
    subject_alt_names: Vec<String>,
}

impl TlsOptions {
    /// The settings; `host`: the first endpoint's host, the server name when none is given.
    fn spec<E: de::Error>(self, host: Option<&str>) -> Result<BackendTls, E> {
        let base = CONTEXT.with(|c| c.borrow().as_ref().map(|c| c.base_dir.clone())).unwrap_or_default();
        let verify = match (self.verify, &self.ca_file) {
            (false, _) => None,
            (true, None) => return Err(field_error("tls.verify", "needs caFile: the CA bundle to verify against")),
            (true, Some(ca)) => {
                let full = base.join(ca);
                let pem = std::fs::read(&full)
                    .map_err(|e| field_error("tls.caFile", format!("cannot read {}: {e}", full.display())))?;
                let source = full.display().to_string();
                Some(parse_ca_bundle(&pem, &source).map_err(|e| field_error("tls.caFile", format!("{source}: {e}")))?)
            }
        };
        let client_cert = match (&self.cert_file, &self.key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                let files = CertFiles::read(&base, cert, key).map_err(|e| field_error("tls.certFile", e))?;
                Some(files.0)
            }
            _ => return Err(field_error("tls.certFile", "certFile and keyFile go together")),
        };
        let server_name = self.server_name.or(host.map(str::to_string)).unwrap_or_else(|| "localhost".into());
        let subject_alt_names: Vec<SubjectAltName> = self
            .subject_alt_names
            .into_iter()
            .map(|n| if n.contains("://") { SubjectAltName::Uri(n) } else { SubjectAltName::Dns(n) })
            .collect();
        if !subject_alt_names.is_empty() && verify.is_none() {
            return Err(field_error("tls.subjectAltNames", "are verified: needs verify: true and caFile"));
        }
        let spec = UpstreamTlsSpec { verify, server_name, sni: self.sni, client_cert, subject_alt_names };
        // Checked here so that a bad name is refused with its line, not at compile time.
        UpstreamTls::new(&spec).map_err(|e| field_error("tls.serverName", e))?;
        Ok(BackendTls(spec))
    }
}

/// An endpoint as written: `ip:port` (`[v6]:port`), or `name:port`, its name checked here and
/// resolved later, on the control thread.
struct Endpoint(EndpointAddr);

impl<'de> Deserialize<'de> for Endpoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Endpoint(EndpointAddr::Addr(addr)));
        }
        let (host, port) =
            s.rsplit_once(':').ok_or_else(|| de::Error::custom(format!("endpoint `{s}` is not host:port")))?;
        let port = port.parse::<u16>().map_err(|_| de::Error::custom(format!("endpoint `{s}` has an invalid port")))?;
        if host.is_empty() {
            return Err(de::Error::custom(format!("endpoint `{s}` has no host")));
        }
        let name = crate::dns::normalize(host);
        validate_host(&name).map_err(|e| de::Error::custom(format!("endpoint `{s}`: {e}")))?;
        Ok(Endpoint(EndpointAddr::Name(name, port)))
    }
}

struct BackendRef(String);

impl<'de> Deserialize<'de> for BackendRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, |name| known_backend(name).map(|()| BackendRef(name.to_string())))
    }
}

/// `Err` says that `name` is not one of `backends`, and which are.
fn known_backend(name: &str) -> Result<(), String> {
    let known = CONTEXT.with(|c| {
        c.borrow().as_ref().map(|c| (c.backends.contains(name), c.backends.iter().cloned().collect::<Vec<_>>()))
    });
    match known {
        Some((false, names)) => Err(format!(
            "unknown backend `{name}`; the backends defined are: {}",
            if names.is_empty() { "(none)".to_string() } else { names.join(", ") }
        )),
        _ => Ok(()),
    }
}

/// A host as the Ingress spec allows it: DNS labels, optionally `*.` first; no port, no IP.
pub(crate) struct HostName(pub String);

impl<'de> Deserialize<'de> for HostName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, |raw| validate_host(raw).map(HostName))
    }
}

/// Checks a host as the Ingress spec allows it and returns it in lower case.
pub fn validate_host(raw: &str) -> Result<String, String> {
    let host = raw.to_ascii_lowercase();
    let labels = host.strip_prefix("*.").unwrap_or(&host);
    let valid = !labels.is_empty()
        && labels.len() <= 253
        && labels.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if valid {
        Ok(host)
    } else {
        Err(format!("host `{raw}` is not a DNS name (labels of a-z, 0-9 and `-`, optionally starting with `*.`)"))
    }
}

struct PathValue(String);

impl<'de> Deserialize<'de> for PathValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let path = String::deserialize(d)?;
        if !path.starts_with('/') {
            return Err(field_error("path", format!("`{path}` must start with `/`")));
        }
        if path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'?' || b == b'#') {
            return Err(field_error("path", format!("`{path}` contains whitespace, `?` or `#`")));
        }
        Ok(PathValue(path))
    }
}

impl Default for PathValue {
    fn default() -> Self {
        PathValue("/".into())
    }
}

#[derive(Deserialize, PartialEq, Eq, Default)]
enum PathType {
    Exact,
    #[default]
    Prefix,
    ImplementationSpecific,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RouteField {
    #[serde(default)]
    host: Option<HostName>,
    #[serde(default)]
    path: PathValue,
    #[serde(default)]
    path_type: PathType,
    backend: BackendRef,
    #[serde(default)]
    canary: Option<CanaryField>,
    #[serde(default)]
    mirror: Option<MirrorField>,
}

/// `canary:` under a route: ingress-nginx's canary annotations, in the file's camelCase.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CanaryField {
    backend: BackendRef,
    #[serde(default)]
    weight: u32,
    #[serde(default = "hundred")]
    weight_total: u32,
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    header_value: Option<String>,
    #[serde(default)]
    header_pattern: Option<Pattern>,
    #[serde(default)]
    cookie: Option<String>,
    /// Keep each user on one side while the weight moves.
    #[serde(default)]
    sticky: bool,
}

fn hundred() -> u32 {
    100
}

/// `mirror:` under a route.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MirrorField {
    backend: BackendRef,
    #[serde(default)]
    percent: Percent,
    #[serde(default = "yes")]
    body: bool,
    #[serde(default)]
    host: Option<HostName>,
}

fn yes() -> bool {
    true
}

struct Percent(u8);

impl Default for Percent {
    fn default() -> Self {
        Percent(100)
    }
}

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        match u8::try_from(n) {
            Ok(p) if p <= 100 => Ok(Percent(p)),
            _ => Err(field_error("percent", format!("{n} is not between 0 and 100"))),
        }
    }
}

/// A header pattern, checked to compile.
struct Pattern(String);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let p = String::deserialize(d)?;
        ramjet_shared::Matcher::regex(&p).map_err(|e| field_error("headerPattern", e))?;
        Ok(Pattern(p))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TlsField {
    hosts: Vec<HostName>,
    #[serde(flatten)]
    files: CertFiles,
    #[serde(default)]
    ssl_redirect: bool,
}

struct CertFiles(Arc<Certificate>);

impl<'de> Deserialize<'de> for CertFiles {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Raw {
            cert_file: PathBuf,
            key_file: PathBuf,
        }
        let raw = Raw::deserialize(d)?;
        let base = CONTEXT.with(|c| c.borrow().as_ref().map(|c| c.base_dir.clone())).unwrap_or_default();
        CertFiles::read(&base, &raw.cert_file, &raw.key_file).map_err(|e| field_error("certFile", e))
    }
}

impl CertFiles {
    /// Reads and parses a chain and its key (paths relative to `base`); an expired certificate is
    /// a warning.
    fn read(base: &Path, cert_file: &Path, key_file: &Path) -> Result<CertFiles, String> {
        let read = |p: &Path| {
            let full = base.join(p);
            std::fs::read(&full).map_err(|e| format!("cannot read {}: {e}", full.display()))
        };
        let chain = read(cert_file)?;
        let key = read(key_file)?;
        let source = base.join(cert_file).display().to_string();
        let cert = parse_certificate(&chain, &key, &source)
            .map_err(|e| format!("{} / {}: {e}", cert_file.display(), key_file.display()))?;
        if is_expired(&cert) {
            CONTEXT.with(|c| {
                if let Some(c) = c.borrow_mut().as_mut() {
                    c.warnings.push(format!("certificate {source} has expired"));
                }
            });
        }
        Ok(CertFiles(cert))
    }
}

#[cfg(test)]
mod tests;
