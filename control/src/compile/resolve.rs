//! Looking objects of a [`ClusterSnapshot`] up by name, for one compile: Services and their ports,
//! ready endpoints through EndpointSlices, certificates from Secrets. Both the Ingress and the
//! Gateway API compilers resolve through the same [`Resolver`], so a Service or a Secret that both
//! name is resolved once.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::IngressServiceBackend;
use ramjet_shared::{Backend, BackendKind, BackendProtocol, CertId, Certificate, UpstreamTlsSpec};
use rustc_hash::FxHasher;

use super::snapshot::{namespace_of, ClusterSnapshot};
use super::Compiler;
use crate::certs::parse_certificate;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The Secret type that carries a certificate and key.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// The type of Secrets made by `kubectl create secret generic` (basic-auth users, CA bundles).
pub const OPAQUE_SECRET_TYPE: &str = "Opaque";

/// Where Gateway API CA certificate references find the certificates, in a ConfigMap or Secret.
pub const CA_CERTIFICATES: &str = "ca.crt";

/// Why a `caCertificateRefs` entry cannot be used.
pub enum CaRefProblem {
    /// It names no object, or one without usable CA certificates.
    Unusable(String),
    /// It names a kind that holds none.
    WrongKind(String),
}

/// How a backend names a Service port.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortRef<'a> {
    Number(i32),
    Name(&'a str),
}

impl fmt::Display for PortRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(n) => write!(f, "`{n}`"),
        }
    }
}

type BackendKey<'a> = (&'a str, &'a str, PortRef<'a>);
/// Lookups by name happen once per path: a fast hash, not a DoS-resistant one (the keys are ours).
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Looks objects up by name and remembers what it resolved, for one compile.
pub struct Resolver<'s, 'c> {
    pub compiler: &'c mut Compiler,
    services: FastMap<(&'s str, &'s str), &'s Service>,
    /// EndpointSlices by the namespace and name of their Service.
    slices: FastMap<(&'s str, &'s str), Vec<&'s EndpointSlice>>,
    secrets: FastMap<(&'s str, &'s str), &'s Secret>,
    config_maps: FastMap<(&'s str, &'s str), &'s ConfigMap>,
    backends: FastMap<BackendKey<'s>, Result<Arc<Backend>, String>>,
    certificates: FastMap<(&'s str, &'s str), Result<Arc<Certificate>, String>>,
    /// Names outside the cluster this compile needed ([`crate::dns`]).
    pub dns_names: std::collections::BTreeSet<String>,
    /// What to tell about them, by the object that named them (kind, namespace, name): an
    /// ExternalName Service, or the `Host` itself for an auth-url. The Ingresses that use them say
    /// it (their warnings are what users see, as Events).
    pub dns_notes: std::collections::BTreeMap<(&'static str, Option<String>, String), String>,
}

impl<'s, 'c> Resolver<'s, 'c> {
    pub fn new(snapshot: &'s ClusterSnapshot, compiler: &'c mut Compiler) -> Self {
        let key = |m: &'s k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            (namespace_of(&m.namespace), m.name.as_deref().unwrap_or(""))
        };
        let services = snapshot.services.iter().map(|s| (key(&s.metadata), &**s)).collect();
        let secrets = snapshot.secrets.iter().map(|s| (key(&s.metadata), &**s)).collect();
        let config_maps = snapshot.config_maps.iter().map(|c| (key(&c.metadata), &**c)).collect();
        let mut slices: FastMap<_, Vec<_>> = FastMap::default();
        for slice in &snapshot.endpoint_slices {
            let service = slice.metadata.labels.as_ref().and_then(|l| l.get(SERVICE_NAME_LABEL));
            if let Some(service) = service {
                slices.entry((namespace_of(&slice.metadata.namespace), service.as_str())).or_default().push(&**slice);
            }
        }
        Resolver {
            compiler,
            services,
            slices,
            secrets,
            config_maps,
            backends: FastMap::default(),
            certificates: FastMap::default(),
            dns_names: Default::default(),
            dns_notes: Default::default(),
        }
    }

    /// The Service `namespace/name`.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&'s Service> {
        self.services.get(&(namespace, name)).copied()
    }

    /// The ConfigMap `namespace/name`, if ramjet may list ConfigMaps and it exists.
    pub fn config_map(&self, namespace: &str, name: &str) -> Option<&'s ConfigMap> {
        self.config_maps.get(&(namespace, name)).copied()
    }

    /// The Secret `namespace/name` (of the types the watcher keeps).
    pub fn secret(&self, namespace: &str, name: &str) -> Option<&'s Secret> {
        self.secrets.get(&(namespace, name)).copied()
    }

    /// The PEM CA certificates (`ca.crt`) of a ConfigMap or Secret `namespace/name`, as a Gateway
    /// API `caCertificateRefs` entry (a BackendTLSPolicy's, a Gateway's frontend validation) names
    /// them; Secrets are ramjet's own extension.
    pub fn ca_certificates(
        &self,
        namespace: &str,
        group: &str,
        kind: &str,
        name: &str,
    ) -> Result<&'s [u8], CaRefProblem> {
        let missing =
            |what: &str| CaRefProblem::Unusable(format!("{what} {namespace}/{name} has no {CA_CERTIFICATES}"));
        match (group, kind) {
            ("", "ConfigMap") => {
                let Some(map) = self.config_maps.get(&(namespace, name)) else {
                    return Err(CaRefProblem::Unusable(format!("ConfigMap {namespace}/{name} does not exist")));
                };
                let text = map.data.as_ref().and_then(|d| d.get(CA_CERTIFICATES)).filter(|t| !t.trim().is_empty());
                text.map(|t| t.as_bytes()).ok_or_else(|| missing("ConfigMap"))
            }
            ("", "Secret") => {
                let Some(secret) = self.secrets.get(&(namespace, name)) else {
                    return Err(CaRefProblem::Unusable(format!("Secret {namespace}/{name} does not exist")));
                };
                let bytes = secret.data.as_ref().and_then(|d| d.get(CA_CERTIFICATES)).filter(|b| !b.0.is_empty());
                bytes.map(|b| b.0.as_slice()).ok_or_else(|| missing("Secret"))
            }
            (group, kind) => Err(CaRefProblem::WrongKind(format!(
                "{group}/{kind} {name}: only ConfigMaps and Secrets hold CA certificates"
            ))),
        }
    }

    /// [`Resolver::resolve_backend`] for `namespace/service` and `port`, resolved once per compile.
    pub fn service_backend(
        &mut self,
        namespace: &'s str,
        service: &'s IngressServiceBackend,
        port: PortRef<'s>,
    ) -> Result<Arc<Backend>, String> {
        let key = (namespace, service.name.as_str(), port);
        if let Some(known) = self.backends.get(&key) {
            return known.clone();
        }
        let resolved = self.resolve_backend(namespace, service, port);
        self.backends.insert(key, resolved.clone());
        resolved
    }

    /// The Service port, then its ready endpoints from the Service's EndpointSlices.
    pub fn resolve_backend(
        &mut self,
        namespace: &str,
        backend: &IngressServiceBackend,
        port: PortRef<'_>,
    ) -> Result<Arc<Backend>, String> {
        let name = backend.name.as_str();
        let Some(service) = self.services.get(&(namespace, name)) else {
            return Err(format!("Service {namespace}/{name} does not exist"));
        };
        let spec = service.spec.as_ref();
        let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
        if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            let external = spec.and_then(|s| s.external_name.as_deref()).unwrap_or_default();
            return self.external_name(namespace, name, external, ports, port);
        }
        let found = ports.iter().find(|p| match port {
            PortRef::Number(n) => p.port == n,
            PortRef::Name(n) => p.name.as_deref() == Some(n),
        });
        let Some(service_port) = found else {
            let known: Vec<String> = ports
                .iter()
                .map(|p| match &p.name {
                    Some(n) if !n.is_empty() => format!("{} ({n})", p.port),
                    _ => p.port.to_string(),
                })
                .collect();
            return Err(format!(
                "Service {namespace}/{name} has no port {port} (its ports: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ));
        };
        // EndpointSlice ports carry the Service port's name and the resolved target port.
        let port_name = service_port.name.as_deref().unwrap_or("");
        let mut endpoints = Vec::new();
        for slice in self.slices.get(&(namespace, name)).into_iter().flatten() {
            if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
                continue;
            }
            let target = slice
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref().unwrap_or("") == port_name)
                .and_then(|p| p.port)
                .and_then(|p| u16::try_from(p).ok());
            let Some(target) = target else { continue };
            for endpoint in &slice.endpoints {
                let conditions = endpoint.conditions.as_ref();
                let ready = conditions.and_then(|c| c.ready) != Some(false);
                let terminating = conditions.and_then(|c| c.terminating) == Some(true);
                if !ready || terminating {
                    continue;
                }
                if let Some(ip) = endpoint.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) {
                    endpoints.push(SocketAddr::new(ip, target));
                }
            }
        }
        endpoints.sort();
        endpoints.dedup();
        let backend_name = format!("{namespace}/{name}:{}", service_port.port);
        Ok(self.compiler.backend(&backend_name, BackendKind::Endpoints(endpoints.into_boxed_slice())))
    }

    /// An ExternalName Service's backend: the addresses its name resolves to (an IP address as it
    /// is), on the Service port's target port (its port when it has none; the port asked for when
    /// the Service lists none), as ingress-nginx connects to it.
    fn external_name(
        &mut self,
        namespace: &str,
        name: &str,
        external: &str,
        ports: &[k8s_openapi::api::core::v1::ServicePort],
        port: PortRef<'_>,
    ) -> Result<Arc<Backend>, String> {
        let found = ports.iter().find(|p| match port {
            PortRef::Number(n) => p.port == n,
            PortRef::Name(n) => p.name.as_deref() == Some(n),
        });
        let number = match (found, port) {
            (Some(p), _) => match &p.target_port {
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(t)) if *t > 0 => *t,
                _ => p.port,
            },
            (None, PortRef::Number(n)) if ports.is_empty() => n,
            (None, _) => return Err(format!("Service {namespace}/{name} has no port {port}")),
        };
        let number =
            u16::try_from(number).map_err(|_| format!("Service {namespace}/{name}: port {number} is out of range"))?;
        let addrs = if let Ok(ip) = external.parse::<IpAddr>() {
            vec![ip]
        } else {
            let host = crate::dns::normalize(external);
            crate::routes_file::validate_host(&host)
                .map_err(|e| format!("Service {namespace}/{name}: externalName `{external}`: {e}"))?;
            self.dns_names.insert(host.clone());
            let note = |message: String| (("Service", Some(namespace.to_string()), name.to_string()), message);
            match self.compiler.dns.get(&host) {
                None => {
                    let (key, message) =
                        note(format!("externalName {host} is being resolved; its requests answer 503 until it is"));
                    self.dns_notes.insert(key, message);
                    Vec::new()
                }
                Some(answer) => {
                    if answer.failing {
                        // Why is in the log: the diagnostic stays the same while the name fails.
                        let message = if answer.addrs.is_empty() {
                            format!("externalName {host} does not resolve; its requests answer 503 until it does")
                        } else {
                            format!("looking externalName {host} up fails; its last answer is kept")
                        };
                        let (key, message) = note(message);
                        self.dns_notes.insert(key, message);
                    }
                    answer.addrs.clone()
                }
            }
        };
        let endpoints: Vec<SocketAddr> = addrs.into_iter().map(|ip| SocketAddr::new(ip, number)).collect();
        let backend_name = format!("{namespace}/{name}:{number}");
        Ok(self.compiler.backend(&backend_name, BackendKind::Endpoints(endpoints.into_boxed_slice())))
    }

    /// The backend of a host outside the cluster (an auth service, a mirror), named `<purpose>:<host>:<port>`:
    /// `host`'s addresses (an IP address as it is, a name as DNS answers, [`crate::dns`]), over TLS
    /// verified against the Mozilla roots for `https`. A name without an answer yet has no endpoints.
    pub(crate) fn external_host(
        &mut self,
        purpose: &str,
        host: &str,
        port: i32,
        https: bool,
    ) -> Result<Arc<Backend>, String> {
        let port = u16::try_from(port).map_err(|_| format!("port {port} is out of range"))?;
        let addrs = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => {
                let name = crate::dns::normalize(host);
                crate::routes_file::validate_host(&name).map_err(|e| format!("`{host}`: {e}"))?;
                self.dns_names.insert(name.clone());
                let answer = self.compiler.dns.get(&name);
                if answer.is_some_and(|a| a.failing) {
                    let message =
                        format!("looking {name} up fails (the log says why); its last answer is kept, if any");
                    self.dns_notes.insert(("Host", None, name.clone()), message);
                }
                answer.map(|a| a.addrs.clone()).unwrap_or_default()
            }
        };
        let endpoints: Vec<SocketAddr> = addrs.into_iter().map(|ip| SocketAddr::new(ip, port)).collect();
        let kind = BackendKind::Endpoints(endpoints.into_boxed_slice());
        let name = format!("{purpose}:{host}:{port}");
        if !https {
            return Ok(self.compiler.backend(&name, kind));
        }
        let spec = UpstreamTlsSpec {
            verify: Some(crate::certs::mozilla_roots()),
            server_name: host.to_string(),
            sni: true,
            client_cert: None,
            subject_alt_names: Vec::new(),
        };
        let tls = self.compiler.upstream_tls(&spec)?;
        Ok(self.compiler.backend_over(&name, kind, BackendProtocol::Https, Some(tls)))
    }

    /// The `appProtocol` of a Service's port (by number), if it names one.
    pub fn app_protocol(&self, namespace: &str, name: &str, port: i32) -> Option<&'s str> {
        let service = self.services.get(&(namespace, name))?;
        let ports = service.spec.as_ref()?.ports.as_deref()?;
        ports.iter().find(|p| p.port == port)?.app_protocol.as_deref()
    }

    /// The name of a Service's port (by number), when it has one.
    pub fn port_name(&self, namespace: &str, name: &str, port: i32) -> Option<&'s str> {
        let service = self.services.get(&(namespace, name))?;
        let ports = service.spec.as_ref()?.ports.as_deref()?;
        ports.iter().find(|p| p.port == port)?.name.as_deref()
    }

    /// Whether the Secret `namespace/name` is of type `kubernetes.io/tls` (`None`: it does not exist).
    pub fn is_tls_secret(&self, namespace: &str, name: &str) -> Option<bool> {
        self.secrets.get(&(namespace, name)).map(|s| s.type_.as_deref() == Some(TLS_SECRET_TYPE))
    }

    pub fn certificate(&mut self, namespace: &'s str, name: &'s str) -> Result<Arc<Certificate>, String> {
        if let Some(known) = self.certificates.get(&(namespace, name)) {
            return known.clone();
        }
        let resolved = self.load_certificate(namespace, name);
        self.certificates.insert((namespace, name), resolved.clone());
        resolved
    }

    /// A `kubernetes.io/tls` Secret's certificate, or an `Opaque` one's with the same two keys:
    /// ingress-nginx serves any Secret holding `tls.crt` and `tls.key` (its own e2e fixtures make
    /// Opaque ones). Gateway API listeners ask for the TLS type ([`Resolver::is_tls_secret`]).
    fn load_certificate(&mut self, namespace: &str, name: &str) -> Result<Arc<Certificate>, String> {
        let Some(secret) = self.secrets.get(&(namespace, name)) else {
            return Err(format!(
                "Secret {namespace}/{name} does not exist (or is not of type {TLS_SECRET_TYPE} or {OPAQUE_SECRET_TYPE})"
            ));
        };
        if !matches!(secret.type_.as_deref(), Some(TLS_SECRET_TYPE | OPAQUE_SECRET_TYPE)) {
            return Err(format!("Secret {namespace}/{name} is not of type {TLS_SECRET_TYPE}"));
        }
        let data = secret.data.as_ref();
        let field = |key: &str| data.and_then(|d| d.get(key)).map(|b| b.0.as_slice());
        let (Some(chain), Some(key)) = (field("tls.crt"), field("tls.key")) else {
            return Err(format!("Secret {namespace}/{name} lacks tls.crt or tls.key"));
        };
        let id = CertId::of(chain, key);
        if let Some(known) = self.compiler.known_certificate(&id) {
            return Ok(known);
        }
        let parsed = parse_certificate(chain, key, &format!("{namespace}/{name}"))
            .map_err(|e| format!("Secret {namespace}/{name}: {e}"))?;
        Ok(self.compiler.certificate(&parsed))
    }
}
