//! Compiling Gateway API objects — GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes, TCPRoutes,
//! UDPRoutes, TLSRoutes, BackendTLSPolicies and ReferenceGrants — into the same draft table as
//! Ingresses (after them: on a conflict, the Ingress keeps the path). Nothing downstream knows
//! which API a route came from.
//!
//! In order:
//! 1. the GatewayClasses whose `controllerName` is ours, and the Gateways of those classes;
//! 2. each listener is judged: ramjet serves `HTTP` on its plain port, `HTTPS` (TLS terminated,
//!    certificates from Secrets through the same certificate store, client certificates validated
//!    as `spec.tls.frontend` says: [`frontend_tls`]) and `TLS` passthrough on its TLS port, and
//!    `TCP` and `UDP` on ports of their own; any other port, protocol or TLS mode is reported in
//!    the listener's conditions, never silently ignored;
//! 3. BackendTLSPolicies are judged ([`backend_tls`]): the Services they target are spoken to over
//!    TLS, verified as they say, by every route below;
//! 4. each HTTPRoute's `parentRefs` attach it to listeners (section name, port, the listener's
//!    `allowedRoutes` namespaces and kinds, hostname intersection), and its rules become
//!    [`Rule`]s: matches become path keys plus conditions, `backendRefs` weighted backends, filters
//!    the rule's filters;
//! 5. for every path key of a host, the rules of every match that covers that key, in the spec's
//!    precedence order (Exact, longest prefix, method, most headers, most query parameters, oldest
//!    route, route name, rule order), form the route's policy; a request no rule accepts gets 404;
//! 6. TCPRoutes and UDPRoutes become the port routes of their listeners' ports, TLSRoutes the
//!    names passed through or terminated on theirs ([`layer4`]);
//! 7. an HTTPRoute with `ramjet.dev/canary-auto-promote` becomes a [`CanaryPlan`] for the deciding
//!    replica: its rules with two `backendRefs` split between the first (primary) and the second
//!    (canary), at the weight `ramjet.dev/canary-state` holds once ramjet has written one
//!    ([`promotion`]; `docs/canaries.md`).
//!
//! The [`Report`] holds what status says about each object (conditions with the spec's reasons);
//! [`super::cluster::compile`] puts it in the draft beside the table it describes.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::IngressServiceBackend;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use ramjet_shared::{
    Backend, BackendKind, BackendProtocol, Certificate, ClientAuth, Condition, DirectResponse, Filter, HeaderEdits,
    Matcher, Mirror, ObjectRef, PathKind, PathRewrite, PortRoute, Redirect, Rewrite, RouteLimits, RouteOrigin,
    RoutePolicy, Rule, Source, TlsTarget, Transport, UpstreamTlsSpec, WeightedBackend,
};

use super::resolve::{PortRef, Resolver};
use super::snapshot::{namespace_of, ClusterSnapshot};
use super::status::{ClassReport, GatewayReport, ListenerReport, ParentReport, Report, RouteReport, StatusCondition};
use super::Draft;
use crate::canary::effective_total;
use crate::canary::promotion::{AutoPromote, CanaryKind, CanaryPlan, CanaryState, Phase, SETTINGS, STATE_ANNOTATION};
use crate::gateway_api::{
    Gateway, GrpcRoute, HttpBackendRef, HttpRoute, HttpRouteFilter, HttpRouteMatch, Listener, ObjectReference,
    ParentReference, ReferenceGrant, TcpRouteRule, TcpRouteSpec, TlsRoute, GROUP,
};
use crate::routes_file::validate_host;
use backend_tls::{BackendTls, BackendTlsPolicies};
use frontend_tls::Frontend;
use layer4::{port_routes, refuse_shared_l4_ports, tls_routes};

const HTTP_ROUTE: &str = "HTTPRoute";
const GRPC_ROUTE: &str = "GRPCRoute";
const TCP_ROUTE: &str = "TCPRoute";
const TLS_ROUTE: &str = "TLSRoute";
const UDP_ROUTE: &str = "UDPRoute";

/// A listener ramjet serves, with what routes need from it.
struct ServedListener<'s> {
    gateway: &'s Gateway,
    listener: &'s Listener,
    /// Index into the report's gateways and their listeners.
    at: (usize, usize),
    /// The listener's hostname, validated (`None`: any host).
    hostname: Option<String>,
    /// An HTTPS listener's certificate; a TLS listener's on a port of its own that terminates.
    certificate: Option<Arc<Certificate>>,
    /// Its client-certificate validation (HTTPS listeners of Gateways that ask).
    client_auth: Option<Arc<ClientAuth>>,
    /// A TLS listener on a port of its own (not one where ramjet serves HTTPS).
    own_tls_port: bool,
    /// The client certificate its Gateway presents to backends over TLS (`spec.tls.backend`).
    backend_certificate: Option<Arc<Certificate>>,
}

/// Compiles the Gateway API objects of our classes into `draft` and says what their status is.
pub(super) fn compile<'s>(snapshot: &'s ClusterSnapshot, resolver: &mut Resolver<'s, '_>, draft: &mut Draft) -> Report {
    let mut report = Report::default();
    let controller = snapshot.options.gateway_controller_name.as_str();
    let mut classes = BTreeSet::new();
    for class in &snapshot.gateway_classes {
        if class.spec.controller_name != controller {
            continue;
        }
        let name = class.metadata.name.clone().unwrap_or_default();
        classes.insert(name.clone());
        report.classes.push(ClassReport {
            name,
            generation: class.metadata.generation,
            conditions: vec![StatusCondition::new(
                "Accepted",
                true,
                "Accepted",
                "ramjet serves Gateways of this class",
            )],
        });
    }
    let grants = Grants::new(&snapshot.reference_grants);
    let mut gateways: Vec<&Gateway> =
        snapshot.gateways.iter().map(|g| &**g).filter(|g| classes.contains(&g.spec.gateway_class_name)).collect();
    gateways.sort_by(|a, b| age(&a.metadata).cmp(&age(&b.metadata)));
    let mut listeners = Vec::new();
    let mut closed = Vec::new();
    for &gateway in &gateways {
        let at = report.gateways.len();
        let (gateway_report, served, refused) = judge_gateway(gateway, at, snapshot, &grants, resolver, draft);
        report.gateways.push(gateway_report);
        listeners.extend(served);
        closed.extend(refused);
    }
    refuse_shared_l4_ports(&mut listeners, &snapshot.options.https_ports, &mut report, draft);
    let mut refs = Refs { grants, backend_tls: BackendTlsPolicies::judge(snapshot, resolver, draft) };
    let namespaces: HashMap<&str, &Namespace> =
        snapshot.namespaces.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, &**n))).collect();
    let attachable = Parents { listeners: &listeners, gateways: &gateways, namespaces: &namespaces };
    let mut routes: Vec<&HttpRoute> = snapshot.http_routes.iter().map(|r| &**r).collect();
    routes.sort_by(|a, b| age(&a.metadata).cmp(&age(&b.metadata)));
    let mut grpc_routes: Vec<&GrpcRoute> = snapshot.grpc_routes.iter().map(|r| &**r).collect();
    grpc_routes.sort_by(|a, b| age(&a.metadata).cmp(&age(&b.metadata)));
    // Each GRPCRoute as the HTTPRoute it means, its refused matches reported.
    let converted: Vec<(HttpRoute, &GrpcRoute)> = grpc_routes
        .into_iter()
        .map(|g| {
            let (route, problems) = grpc::as_http_route(g);
            let object = ObjectRef::new(
                GRPC_ROUTE,
                Some(namespace_of(&g.metadata.namespace)),
                g.metadata.name.as_deref().unwrap_or(""),
            );
            for (r, m, problem) in problems {
                draft.warn(&object, format!("spec.rules[{r}].matches[{m}]: {problem}; this match is ignored"));
            }
            (route, g)
        })
        .collect();
    let all = routes.into_iter().enumerate().map(|(order, r)| (HTTP_ROUTE, r, None, order));
    let all = all.chain(converted.iter().enumerate().map(|(order, (r, g))| (GRPC_ROUTE, r, Some(*g), order)));
    let mut entries = Vec::new();
    let mut promotions = Vec::new();
    for (kind, route, grpc, order) in all {
        let namespace = namespace_of(&route.metadata.namespace);
        let name = route.metadata.name.as_deref().unwrap_or("");
        let object = ObjectRef::new(kind, Some(namespace), name);
        let route_of = (kind, namespace, &route.spec.hostnames[..]);
        let (mut parents, found) =
            attachable.attach_all(route_of, &route.spec.parent_refs, &object, &mut report, draft);
        let attached_to: Vec<ParentReference> =
            parents.iter().filter(|p| p.conditions[0].status).map(|p| p.parent_ref.clone()).collect();
        // The client certificate of the route's Gateways for its backends over TLS. The route is
        // compiled once for all its Gateways: where they present different ones, that of the first
        // in its parentRefs is used, and the route is warned.
        let mut certificates = found.iter().filter_map(|(l, _)| l.backend_certificate.as_ref());
        let backend_certificate = certificates.next();
        if certificates.any(|c| Some(c.id) != backend_certificate.map(|b| b.id)) {
            let message = "its Gateways present different client certificates to backends (spec.tls.backend); \
                           the first parent's is used";
            draft.warn(&object, message);
        }
        let mut hosts: BTreeMap<String, Listening> = BTreeMap::new();
        for (listener, host) in found {
            let listening = hosts.entry(host).or_default();
            if listener.listener.protocol == "HTTPS" {
                listening.tls = true;
            } else {
                listening.plain = true;
            }
        }
        if parents.is_empty() {
            continue;
        }
        let reports = if grpc.is_some() { &mut report.grpc_routes } else { &mut report.routes };
        let report_at = reports.len();
        let target =
            Target { kind, grpc, order, hosts: &hosts, object: &object, report: report_at, backend_certificate };
        refs.backend_tls.used_by(route, &attached_to, resolver);
        let resolved = compile_rules(route, &target, &refs, resolver, draft, &mut entries, &mut promotions);
        for parent in &mut parents {
            parent.conditions.push(resolved.clone());
        }
        let generation = route.metadata.generation;
        reports.push(RouteReport { namespace: namespace.to_string(), name: name.to_string(), generation, parents });
    }
    for transport in [Transport::Tcp, Transport::Udp] {
        port_routes(transport, snapshot, attachable, &refs, resolver, draft, &mut report);
    }
    tls_routes(snapshot, attachable, &refs, resolver, draft, &mut report);
    // An HTTPS listener's certificate serves its hostname whether or not a route is attached (a
    // request for a host without routes gets its 404 over TLS); one without a hostname serves any
    // server name (`""`). The first listener to claim a name keeps it.
    // A listener's client-certificate validation is chosen by server name as its certificate is.
    let served = listeners.iter().filter(|l| l.listener.protocol == "HTTPS").filter_map(|l| {
        let cert = l.certificate.as_ref()?;
        let gateway = &l.gateway.metadata;
        let object =
            ObjectRef::new("Gateway", Some(namespace_of(&gateway.namespace)), gateway.name.as_deref().unwrap_or(""));
        Some((any_depth(l.hostname.clone().unwrap_or_default()), cert, l.client_auth.as_ref(), object))
    });
    let closed = closed.iter().map(|(host, cert, auth, object)| (host.clone(), cert, Some(auth), object.clone()));
    for (host, cert, auth, object) in served.chain(closed) {
        if draft.builder.add_tls_host(&host, cert.id) {
            draft.certificates.push(cert.clone());
        }
        if let Some(auth) = auth {
            if !draft.builder.add_client_auth(&host, auth.clone()) {
                let name = if host.is_empty() { "any server name" } else { host.as_str() };
                let message =
                    format!("{name}: client certificates are already validated as another listener or Ingress asks");
                draft.warn(&object, message);
            }
        }
    }
    add_routes(entries, resolver, draft, &mut promotions);
    report.backend_tls_policies = refs.backend_tls.reports();
    for promotion in promotions {
        let condition = promotion.finish(draft);
        for parent in &mut report.routes[promotion.report].parents {
            parent.conditions.push(condition.clone());
        }
    }
    report
}

/// What routes attach to: the listeners ramjet serves, and the Namespaces they admit routes by.
#[derive(Clone, Copy)]
struct Parents<'a, 's> {
    listeners: &'a [ServedListener<'s>],
    /// Our Gateways, as the report has them (the same index).
    gateways: &'a [&'s Gateway],
    namespaces: &'a HashMap<&'a str, &'a Namespace>,
}

impl<'a, 's> Parents<'a, 's> {
    /// Attaches a route (its kind, namespace and hostnames) by each of its `parentRefs`: the
    /// status entry of each parent that is ours (`Accepted`, or why not, which is warned), and
    /// every listener it attached to with the host it has there.
    #[allow(clippy::type_complexity)]
    fn attach_all(
        &self,
        (kind, namespace, hostnames): (&str, &str, &[String]),
        parent_refs: &[ParentReference],
        object: &ObjectRef,
        report: &mut Report,
        draft: &mut Draft,
    ) -> (Vec<ParentReport>, Vec<(&'a ServedListener<'s>, String)>) {
        let mut parents = Vec::new();
        let mut found = Vec::new();
        for parent in parent_refs {
            let Some(attached) = attach(kind, (namespace, hostnames), parent, self, report) else {
                continue;
            };
            let condition = match attached {
                Ok(listeners) => {
                    found.extend(listeners);
                    StatusCondition::new("Accepted", true, "Accepted", "attached")
                }
                Err(refused) => {
                    draft.warn(object, format!("parentRef {}: {}", parent.name, refused.message));
                    refused
                }
            };
            parents.push(ParentReport { parent_ref: parent.clone(), conditions: vec![condition] });
        }
        (parents, found)
    }
}

/// Oldest first, then namespace and name: the spec's tie-breakers.
fn age(meta: &ObjectMeta) -> (Option<&Time>, &str, &str) {
    (meta.creation_timestamp.as_ref(), namespace_of(&meta.namespace), meta.name.as_deref().unwrap_or(""))
}

/// Judges one Gateway's listeners; returns its report and the listeners ramjet serves.
fn judge_gateway<'s>(
    gateway: &'s Gateway,
    at: usize,
    snapshot: &'s ClusterSnapshot,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'s, '_>,
    draft: &mut Draft,
) -> (GatewayReport, Vec<ServedListener<'s>>, Vec<Closed>) {
    let namespace = namespace_of(&gateway.metadata.namespace);
    let name = gateway.metadata.name.as_deref().unwrap_or("");
    let object = ObjectRef::new("Gateway", Some(namespace), name);
    let options = &snapshot.options;
    let mut served = Vec::new();
    let mut closed = Vec::new();
    let mut reports = Vec::new();
    // By port, UDP or not (TCP beneath all the others), and hostname.
    let mut seen: HashMap<(i32, bool, Option<&str>), (&str, &str)> = HashMap::new();
    let backend_certificate = backend_client_certificate(gateway, grants, resolver);
    if let Some(Err((_, message))) = &backend_certificate {
        draft.warn(&object, format!("spec.tls.backend: {message}; backends are not shown a client certificate"));
    }
    for (i, listener) in gateway.spec.listeners.iter().enumerate() {
        let mut conditions = Vec::new();
        let mut refused = |conditions: &mut Vec<StatusCondition>, reason: &'static str, message: String| {
            draft.warn(&object, format!("listener {}: {message}", listener.name));
            conditions.push(StatusCondition::new("Accepted", false, reason, message.clone()));
            conditions.push(StatusCondition::new("Programmed", false, "Invalid", message));
        };
        let port = u16::try_from(listener.port).unwrap_or(0);
        // `l4`: a port of its own, whose connections (flows) are relayed as they are. A TLS
        // listener passes connections through by name or terminates them, on a port of its own or
        // on ramjet's HTTPS port beside HTTPS.
        let https_port = options.https_ports.contains(&port);
        let (tls, l4, passthrough) = match listener.protocol.as_str() {
            "HTTP" => (false, None, false),
            "HTTPS" => (true, None, false),
            "TCP" => (false, Some(Transport::Tcp), false),
            "UDP" => (false, Some(Transport::Udp), false),
            "TLS" => (false, (!https_port).then_some(Transport::Tls), true),
            other => {
                let message = format!("protocol {other} is not served by ramjet (HTTP, HTTPS, TLS, TCP and UDP are)");
                refused(&mut conditions, "UnsupportedProtocol", message);
                reports.push(listener_report(listener, Vec::new(), conditions));
                continue;
            }
        };
        let mode = listener.tls.as_ref().and_then(|t| t.mode.as_deref()).unwrap_or("Terminate");
        let unserved = match (passthrough, mode) {
            (true, "Passthrough" | "Terminate") | (false, _) => None,
            (true, _) => Some(format!("TLS mode {mode} is not served (Passthrough and Terminate are)")),
        };
        if let Some(message) = unserved {
            refused(&mut conditions, "UnsupportedValue", message);
            reports.push(listener_report(listener, Vec::new(), conditions));
            continue;
        }
        let terminate = passthrough && mode == "Terminate";
        // A TCP (TLS) listener opens a port of its own: any but ramjet's HTTP and HTTPS ones (a
        // UDP port of the same number is another port).
        let own = options.http_ports.contains(&port) || https_port;
        if l4.is_some() && (port == 0 || (own && l4 != Some(Transport::Udp))) {
            let message = format!(
                "port {} is where ramjet serves HTTP or HTTPS; a {} listener needs its own",
                listener.port, listener.protocol
            );
            refused(&mut conditions, "PortUnavailable", message);
            reports.push(listener_report(listener, Vec::new(), conditions));
            continue;
        }
        let ports = if tls || passthrough { &options.https_ports } else { &options.http_ports };
        if l4.is_none() && !ports.contains(&port) {
            let listed: Vec<String> = ports.iter().map(u16::to_string).collect();
            let message = format!(
                "port {} is not one where ramjet serves {} (ports: {})",
                listener.port,
                listener.protocol,
                listed.join(", ")
            );
            refused(&mut conditions, "PortUnavailable", message);
            reports.push(listener_report(listener, Vec::new(), conditions));
            continue;
        }
        let hostname = match listener.hostname.as_deref().filter(|h| !h.is_empty()) {
            None => None,
            Some(h) => match validate_host(h) {
                Ok(h) => Some(h),
                Err(e) => {
                    refused(&mut conditions, "UnsupportedValue", e);
                    reports.push(listener_report(listener, Vec::new(), conditions));
                    continue;
                }
            },
        };
        let key = (listener.port, l4 == Some(Transport::Udp), listener.hostname.as_deref());
        if let Some((other, protocol)) = seen.insert(key, (&listener.name, &listener.protocol)) {
            let (reason, message) = if protocol == listener.protocol {
                ("HostnameConflict", format!("listener {other} has the same port and hostname"))
            } else {
                ("ProtocolConflict", format!("listener {other} has the same port and hostname, for {protocol}"))
            };
            draft.warn(&object, format!("listener {}: {message}", listener.name));
            conditions.push(StatusCondition::new("Conflicted", true, reason, message.clone()));
            conditions.push(StatusCondition::new("Accepted", true, "Accepted", ""));
            conditions.push(StatusCondition::new("Programmed", false, "Invalid", message));
            reports.push(listener_report(listener, Vec::new(), conditions));
            continue;
        }
        // Kinds: HTTPRoute and GRPCRoute are the kinds ramjet serves on HTTP and HTTPS listeners,
        // TCPRoute, UDPRoute and TLSRoute on TCP, UDP and TLS ones.
        let serves: &[&'static str] = match (l4, passthrough) {
            (Some(Transport::Tcp), _) => &[TCP_ROUTE],
            (Some(Transport::Udp), _) => &[UDP_ROUTE],
            (Some(Transport::Tls), _) | (None, true) => &[TLS_ROUTE],
            (None, false) => &[HTTP_ROUTE, GRPC_ROUTE],
        };
        let mut kinds = Vec::new();
        let mut resolved = Ok(());
        match listener.allowed_routes.as_ref().and_then(|a| a.kinds.as_ref()) {
            None => kinds.extend(serves),
            Some(asked) => {
                for kind in asked {
                    let group = kind.group.as_deref().unwrap_or(GROUP);
                    if let Some(served) = serves.iter().copied().find(|k| group == GROUP && kind.kind == *k) {
                        kinds.push(served);
                    } else {
                        resolved = Err((
                            "InvalidRouteKinds",
                            format!("route kind {group}/{} is not served by ramjet", kind.kind),
                        ));
                    }
                }
            }
        }
        let mut certificate = None;
        let mut frontend = None;
        if tls || terminate {
            match listener_certificate(gateway, listener, grants, resolver) {
                Ok(cert) => certificate = Some(cert),
                Err(e) => resolved = Err(e),
            }
        }
        if tls {
            frontend = frontend_tls::validation(gateway, listener, grants, resolver);
            if let (Ok(()), Some(Frontend { problem: Some(problem), .. })) = (&resolved, &frontend) {
                resolved = Err(problem.clone());
            }
        }
        let mut programmed = match &resolved {
            Ok(()) => {
                conditions.push(StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", ""));
                true
            }
            Err((reason, message)) => {
                draft.warn(&object, format!("listener {}: {message}", listener.name));
                conditions.push(StatusCondition::new("ResolvedRefs", false, reason, message.clone()));
                // Wrong kinds still leave the right ones served; a listener that terminates TLS
                // cannot serve without its certificate.
                !(tls || terminate) || certificate.is_some()
            }
        };
        match &frontend {
            Some(f) if !f.usable => {
                let message = "no CA certificate of its client-certificate validation can be used; its names refuse every handshake";
                draft.warn(&object, format!("listener {}: {message}", listener.name));
                conditions.push(StatusCondition::new("Accepted", false, "NoValidCACertificate", message));
                if let Some(cert) = &certificate {
                    let host = any_depth(hostname.clone().unwrap_or_default());
                    closed.push((host, cert.clone(), f.auth.clone(), object.clone()));
                }
                programmed = false;
            }
            _ => conditions.push(StatusCondition::new("Accepted", true, "Accepted", "")),
        }
        conditions.push(StatusCondition::new("Conflicted", false, "NoConflicts", ""));
        if programmed {
            conditions.push(StatusCondition::new("Programmed", true, "Programmed", ""));
            let client_auth = frontend.map(|f| f.auth);
            let own_tls_port = l4 == Some(Transport::Tls);
            served.push(ServedListener {
                gateway,
                listener,
                at: (at, i),
                hostname,
                certificate,
                client_auth,
                own_tls_port,
                backend_certificate: backend_certificate.as_ref().and_then(|c| c.as_ref().ok()).cloned(),
            });
        } else {
            conditions.push(StatusCondition::new("Programmed", false, "Invalid", "the listener cannot be served"));
        }
        let mut report = listener_report(listener, kinds, conditions);
        report.port = l4.filter(|_| programmed).map(|transport| (transport, port));
        reports.push(report);
    }
    let valid = reports.iter().all(|l| l.conditions.iter().any(|c| c.type_ == "Programmed" && c.status));
    let mut conditions = vec![if valid {
        StatusCondition::new("Accepted", true, "Accepted", "")
    } else {
        StatusCondition::new("Accepted", true, "ListenersNotValid", "some listeners are not served")
    }];
    if frontend_tls::insecure(gateway) {
        let message = "clients without a valid certificate are let through (AllowInsecureFallback)";
        conditions.push(StatusCondition::new("InsecureFrontendValidationMode", true, "ConfigurationChanged", message));
    }
    match backend_certificate {
        None => {}
        Some(Ok(_)) => conditions.push(StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", "")),
        Some(Err((reason, message))) => conditions.push(StatusCondition::new("ResolvedRefs", false, reason, message)),
    }
    conditions.push(if served.is_empty() {
        StatusCondition::new("Programmed", false, "Invalid", "no listener can be served")
    } else {
        StatusCondition::new("Programmed", true, "Programmed", "")
    });
    let report = GatewayReport {
        namespace: namespace.to_string(),
        name: name.to_string(),
        generation: gateway.metadata.generation,
        conditions,
        listeners: reports,
    };
    (report, served, closed)
}

/// The names of an HTTPS listener that cannot validate client certificates as asked: its
/// certificate, and an authentication that refuses every handshake.
type Closed = (String, Arc<Certificate>, Arc<ClientAuth>, ObjectRef);

fn listener_report(listener: &Listener, kinds: Vec<&'static str>, conditions: Vec<StatusCondition>) -> ListenerReport {
    ListenerReport { name: listener.name.clone(), attached_routes: 0, supported_kinds: kinds, conditions, port: None }
}

/// The certificate of an HTTPS listener: its first `certificateRefs` entry, a `kubernetes.io/tls`
/// Secret (in another namespace only where a ReferenceGrant allows it).
fn listener_certificate<'s>(
    gateway: &'s Gateway,
    listener: &'s Listener,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'s, '_>,
) -> Result<Arc<Certificate>, (&'static str, String)> {
    let tls = listener.tls.as_ref();
    if let Some(mode) = tls.and_then(|t| t.mode.as_deref()).filter(|m| *m != "Terminate") {
        return Err(("InvalidCertificateRef", format!("TLS mode {mode} is not supported (Terminate is)")));
    }
    let Some(reference) = tls.and_then(|t| t.certificate_refs.first()) else {
        return Err(("InvalidCertificateRef", "a listener that terminates TLS needs tls.certificateRefs".to_string()));
    };
    gateway_secret(gateway, reference, ("certificateRefs", "InvalidCertificateRef"), grants, resolver)
}

/// The client certificate a Gateway presents to backends over TLS (`spec.tls.backend
/// .clientCertificateRef`), if it names one; `Err`: the Gateway's `ResolvedRefs` reason and why.
fn backend_client_certificate<'s>(
    gateway: &'s Gateway,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'s, '_>,
) -> Option<Result<Arc<Certificate>, (&'static str, String)>> {
    let reference = gateway.spec.tls.as_ref()?.backend.as_ref()?.client_certificate_ref.as_ref()?;
    let field = ("clientCertificateRef", "InvalidClientCertificateRef");
    Some(gateway_secret(gateway, reference, field, grants, resolver))
}

/// The certificate and key of a `kubernetes.io/tls` Secret a Gateway refers to in `field` (in
/// another namespace only where a ReferenceGrant allows it); `Err`: `invalid` (or `RefNotPermitted`)
/// and why.
fn gateway_secret<'s>(
    gateway: &'s Gateway,
    reference: &'s ObjectReference,
    (field, invalid): (&str, &'static str),
    grants: &Grants<'_>,
    resolver: &mut Resolver<'s, '_>,
) -> Result<Arc<Certificate>, (&'static str, String)> {
    let (group, kind) = (reference.group.as_deref().unwrap_or(""), reference.kind.as_deref().unwrap_or("Secret"));
    if !group.is_empty() || kind != "Secret" {
        return Err((invalid, format!("{field}: {group}/{kind} is not a Secret")));
    }
    let own = namespace_of(&gateway.metadata.namespace);
    let namespace = reference.namespace.as_deref().unwrap_or(own);
    if namespace != own && !grants.allows(GROUP, "Gateway", own, "", "Secret", namespace, &reference.name) {
        return Err((
            "RefNotPermitted",
            format!("no ReferenceGrant in {namespace} lets Gateways of {own} use Secret {}", reference.name),
        ));
    }
    // The Gateway API's Secrets are of the TLS type (ingress-nginx's Opaque ones are for Ingresses).
    if resolver.is_tls_secret(namespace, &reference.name) == Some(false) {
        return Err((
            invalid,
            format!("{field}: Secret {namespace}/{} is not of type kubernetes.io/tls", reference.name),
        ));
    }
    resolver.certificate(namespace, &reference.name).map_err(|e| (invalid, e))
}

/// The listeners a parentRef attaches the route to, with the hosts it gets on each; `None` when
/// the parent is not one of our Gateways (its status belongs to someone else); `Err` with the
/// `Accepted: False` condition when it is ours but nothing attaches.
#[allow(clippy::type_complexity)]
fn attach<'l, 's>(
    kind: &str,
    (route_namespace, hostnames): (&str, &[String]),
    parent: &ParentReference,
    to: &Parents<'l, 's>,
    report: &mut Report,
) -> Option<Result<Vec<(&'l ServedListener<'s>, String)>, StatusCondition>> {
    let (listeners, namespaces) = (to.listeners, to.namespaces);
    if parent.group.as_deref().unwrap_or(GROUP) != GROUP || parent.kind.as_deref().unwrap_or("Gateway") != "Gateway" {
        return None;
    }
    let parent_namespace = parent.namespace.as_deref().unwrap_or(route_namespace);
    let ours = report.gateways.iter().position(|g| g.namespace == parent_namespace && g.name == parent.name)?;
    let candidates: Vec<&ServedListener<'s>> = listeners
        .iter()
        .filter(|l| l.at.0 == ours)
        .filter(|l| parent.section_name.as_deref().is_none_or(|s| s == l.listener.name))
        .filter(|l| parent.port.is_none_or(|p| p == l.listener.port))
        .collect();
    if candidates.is_empty() {
        // Listeners the reference names (served or not) whose protocol cannot carry the kind: not
        // allowed, rather than missing.
        let named: Vec<&Listener> = to.gateways[ours]
            .spec
            .listeners
            .iter()
            .filter(|l| parent.section_name.as_deref().is_none_or(|s| s == l.name))
            .filter(|l| parent.port.is_none_or(|p| p == l.port))
            .collect();
        if !named.is_empty() && named.iter().all(|l| !carries(&l.protocol).contains(&kind)) {
            let message = format!("the listeners this parentRef names do not carry {kind}s");
            return Some(Err(StatusCondition::new("Accepted", false, "NotAllowedByListeners", message)));
        }
        return Some(Err(StatusCondition::new(
            "Accepted",
            false,
            "NoMatchingParent",
            "no listener of the Gateway matches the sectionName and port",
        )));
    }
    let allowed: Vec<&ServedListener<'s>> =
        candidates.into_iter().filter(|l| admits(l, kind, route_namespace, namespaces, report)).collect();
    if allowed.is_empty() {
        return Some(Err(StatusCondition::new(
            "Accepted",
            false,
            "NotAllowedByListeners",
            "the listeners' allowedRoutes do not admit this route",
        )));
    }
    let mut found = Vec::new();
    for listener in allowed {
        let hosts = intersect(listener.hostname.as_deref(), hostnames);
        if !hosts.is_empty() {
            report.gateways[listener.at.0].listeners[listener.at.1].attached_routes += 1;
        }
        found.extend(hosts.into_iter().map(|h| (listener, any_depth(h))));
    }
    if found.is_empty() {
        return Some(Err(StatusCondition::new(
            "Accepted",
            false,
            "NoMatchingListenerHostname",
            "no hostname of the route matches a listener's hostname",
        )));
    }
    Some(Ok(found))
}

/// The route kinds a listener's protocol carries, of those ramjet serves.
fn carries(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "HTTP" | "HTTPS" => &[HTTP_ROUTE, GRPC_ROUTE],
        "TCP" => &[TCP_ROUTE],
        "UDP" => &[UDP_ROUTE],
        "TLS" => &[TLS_ROUTE],
        _ => &[],
    }
}

/// Whether a listener's `allowedRoutes` admits a route of `kind` from `namespace`.
fn admits(
    listener: &ServedListener<'_>,
    kind: &str,
    namespace: &str,
    namespaces: &HashMap<&str, &Namespace>,
    report: &Report,
) -> bool {
    let kinds = &report.gateways[listener.at.0].listeners[listener.at.1].supported_kinds;
    if !kinds.contains(&kind) {
        return false;
    }
    let from = listener.listener.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref());
    match from.and_then(|f| f.from.as_deref()).unwrap_or("Same") {
        "All" => true,
        "Selector" => {
            let labels = namespaces.get(namespace).and_then(|n| n.metadata.labels.as_ref());
            from.and_then(|f| f.selector.as_ref()).is_some_and(|s| selects(s, labels))
        }
        _ => namespace_of(&listener.gateway.metadata.namespace) == namespace,
    }
}

/// Whether a label selector selects an object with these labels.
fn selects(selector: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k));
    let by_label = selector.match_labels.iter().flatten().all(|(k, v)| get(k) == Some(v));
    let by_expression = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => get(&e.key).is_some(),
            "DoesNotExist" => get(&e.key).is_none(),
            _ => false,
        }
    });
    by_label && by_expression
}

/// A Gateway API wildcard as the table declares it: `*.example.com` matches `a.b.example.com` too
/// (the spec's "one or more labels"), which the table spells `**.example.com`; an Ingress wildcard
/// matches one label only.
fn any_depth(host: String) -> String {
    if host.starts_with("*.") {
        format!("*{host}")
    } else {
        host
    }
}

/// The hosts a route serves on a listener: its hostnames intersected with the listener's (`""`: any
/// host). A wildcard covers names with one or more labels in its place.
fn intersect(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let route: Vec<String> = route.iter().filter_map(|h| validate_host(h).ok()).collect();
    match listener {
        None if route.is_empty() => vec![String::new()],
        None => route,
        Some(l) if route.is_empty() => vec![l.to_string()],
        Some(l) => {
            let mut out: Vec<String> = route
                .iter()
                .filter_map(|r| {
                    if r == l || wildcard_covers(l, r) {
                        Some(r.clone())
                    } else if wildcard_covers(r, l) {
                        Some(l.to_string())
                    } else {
                        None
                    }
                })
                .collect();
            out.sort();
            out.dedup();
            out
        }
    }
}

/// Whether `pattern` (`*.example.com`) covers `host` (`a.example.com` or `*.a.example.com`).
fn wildcard_covers(pattern: &str, host: &str) -> bool {
    let Some(suffix) = pattern.strip_prefix("*.") else { return false };
    let host = host.strip_prefix("*.").unwrap_or(host);
    host.len() > suffix.len() + 1 && host.ends_with(suffix) && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

/// A path a match claims.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum PathClaim {
    Exact(String),
    /// Without its trailing `/` (the root is `""`).
    Prefix(String),
    /// A `RegularExpression`: every path (its condition decides).
    Pattern(String),
}

impl PathClaim {
    /// Whether every request that reaches the table key `(kind, path)` is within this claim.
    fn covers(&self, kind: PathKind, path: &str) -> bool {
        match self {
            PathClaim::Exact(p) => kind == PathKind::Exact && p == path,
            PathClaim::Prefix(p) => {
                p.is_empty() || path == p || path.starts_with(p.as_str()) && path.as_bytes()[p.len()] == b'/'
            }
            PathClaim::Pattern(_) => true,
        }
    }

    fn key(&self) -> (PathKind, &str) {
        match self {
            PathClaim::Exact(p) => (PathKind::Exact, p),
            PathClaim::Prefix(p) => (PathKind::Prefix, p),
            PathClaim::Pattern(_) => (PathKind::Prefix, ""),
        }
    }
}

/// A match's place in the spec's precedence, first to last field: Exact, then RegularExpression
/// (its place is the implementation's to choose; Envoy Gateway's order), then PathPrefix; a longer
/// path or pattern; a method given, more headers, more query parameters, older route (then namespace/name:
/// the routes are numbered in that order), rule order, match order. Sorts ascending.
type Rank = (u8, Reverse<usize>, bool, Reverse<usize>, Reverse<usize>, usize, usize, usize);

/// Which kinds of listener a route is attached to for one host.
#[derive(Debug, Clone, Copy, Default)]
struct Listening {
    plain: bool,
    tls: bool,
}

impl Listening {
    /// The condition that keeps the route to the listeners it is attached to: the table serves a
    /// host on both ports, and a route attached only to an HTTP listener (often a redirect to
    /// HTTPS) must not answer requests that came over TLS, nor the other way round.
    fn scope(self) -> Option<Condition> {
        match (self.plain, self.tls) {
            (true, false) => Some(Condition::Tls(false)),
            (false, true) => Some(Condition::Tls(true)),
            _ => None,
        }
    }
}

/// One match of one rule, compiled, with its place in the spec's precedence.
struct Entry {
    host: String,
    claim: PathClaim,
    rank: Rank,
    rule: Rule,
    source: String,
    /// HTTPRoute or GRPCRoute.
    origin: RouteOrigin,
    /// The rule is the canary split of an auto-promoting route: the index of its [`Promotion`]
    /// and the canary's backend (whose requests on the table's route judge it).
    canary: Option<(usize, Arc<str>)>,
    /// Attached through an HTTPS listener (whose client-certificate validation then applies).
    tls: bool,
}

/// Where a route compiles to: its place among the routes, its hosts, its object and its index in
/// the report's routes.
struct Target<'a> {
    /// `HTTPRoute` or `GRPCRoute`.
    kind: &'static str,
    /// The GRPCRoute the route was made from ([`grpc::as_http_route`]): its matches rank as its
    /// spec orders them.
    grpc: Option<&'a GrpcRoute>,
    order: usize,
    hosts: &'a BTreeMap<String, Listening>,
    object: &'a ObjectRef,
    report: usize,
    /// The client certificate the route's Gateways present to backends over TLS.
    backend_certificate: Option<&'a Arc<Certificate>>,
}

/// One rule's deadline and what it does, before its matches become entries.
struct Action {
    deadline: Option<std::time::Duration>,
    backends: Vec<WeightedBackend>,
    filters: Vec<Filter>,
    /// Its backends and filters could be used (otherwise it answers 500).
    served: bool,
}

/// Compiles a route's rules into entries for each of its hosts; returns its `ResolvedRefs`. A route
/// that asks for auto-promotion adds its [`Promotion`] to `promotions`.
fn compile_rules(
    route: &HttpRoute,
    target: &Target<'_>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'_, '_>,
    draft: &mut Draft,
    entries: &mut Vec<Entry>,
    promotions: &mut Vec<Promotion>,
) -> StatusCondition {
    let (order, object) = (target.order, target.object);
    let namespace = namespace_of(&route.metadata.namespace);
    let source = format!("{namespace}/{}", route.metadata.name.as_deref().unwrap_or(""));
    let mut resolved = StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", "");
    let default_match = [HttpRouteMatch::default()];
    let mut actions = Vec::with_capacity(route.spec.rules.len());
    for (r, rule) in route.spec.rules.iter().enumerate() {
        let deadline = rule_deadline(rule.timeouts.as_ref()).unwrap_or_else(|e| {
            draft.warn(object, format!("spec.rules[{r}].timeouts: {e}; ramjet's upstream timeouts apply"));
            None
        });
        let from = Referrer { kind: target.kind, namespace, backend_certificate: target.backend_certificate };
        actions.push(match rule_action(rule, from, refs, resolver) {
            Ok((backends, filters)) => Action { deadline, backends, filters, served: true },
            Err(problem) => {
                draft.warn(object, format!("spec.rules[{r}]: {}; its requests get 500", problem.message));
                if resolved.status {
                    resolved = problem.condition();
                }
                let backends = vec![WeightedBackend::new(error_backend(resolver), 1)];
                Action { deadline, backends, filters: Vec::new(), served: false }
            }
        });
    }
    let at = promotions.len();
    // Auto-promotion is for HTTPRoutes (its state is written on one).
    let promoted = if target.grpc.is_none() { promotion(route, target, &mut actions, draft) } else { None };
    let canaries = match promoted {
        Some((promotion, canaries)) => {
            promotions.push(promotion);
            canaries
        }
        None => Vec::new(),
    };
    for (r, (rule, action)) in route.spec.rules.iter().zip(actions).enumerate() {
        let Action { deadline, backends, filters, .. } = action;
        let canary = canaries.get(r).cloned().flatten().map(|name| (at, name));
        let matches = if rule.matches.is_empty() { &default_match[..] } else { &rule.matches[..] };
        for (m, found) in matches.iter().enumerate() {
            let (claim, conditions) = match compile_match(found) {
                Ok(compiled) => compiled,
                Err(e) => {
                    draft.warn(object, format!("spec.rules[{r}].matches[{m}]: {e}; this match is ignored"));
                    continue;
                }
            };
            // 0 is the GRPCRoutes': on a host both kinds claim, gRPC calls match theirs first.
            let (exactness, length) = match &claim {
                PathClaim::Exact(p) => (1, p.len()),
                PathClaim::Pattern(p) => (2, p.len()),
                PathClaim::Prefix(p) => (3, p.len()),
            };
            let prefix_rewrite = |f: &Filter| match f {
                Filter::Rewrite(r) => matches!(r.path, Some(PathRewrite::Prefix { .. })),
                Filter::Redirect(r) => matches!(r.path(), Some(PathRewrite::Prefix { .. })),
                _ => false,
            };
            if matches!(claim, PathClaim::Pattern(_)) && filters.iter().any(prefix_rewrite) {
                draft.warn(
                    object,
                    format!("spec.rules[{r}].matches[{m}]: ReplacePrefixMatch needs a PathPrefix match; this match is ignored"),
                );
                continue;
            }
            let rank = match target.grpc {
                // The GRPCRoute spec's order: the longest service, the longest method, the most
                // header matches.
                Some(grpc) => {
                    let method =
                        grpc.spec.rules.get(r).and_then(|rule| rule.matches.get(m)).and_then(|m| m.method.as_ref());
                    let (service, method) = grpc::rank(method);
                    (0, Reverse(service), false, Reverse(method), Reverse(found.headers.len()), order, r, m)
                }
                None => (
                    exactness,
                    Reverse(length),
                    found.method.is_none(),
                    Reverse(found.headers.len()),
                    Reverse(found.query_params.len()),
                    order,
                    r,
                    m,
                ),
            };
            let total = backends.iter().map(|b| b.weight).sum();
            let filters = for_match(&filters, &claim);
            // A backendRef's own filters (carried in `filters` until here) come after the rule's.
            let backends: Vec<WeightedBackend> = backends
                .iter()
                .map(|b| {
                    let mut b = b.clone();
                    let own = std::mem::take(&mut b.filters);
                    b.with_own_filters(&filters, &own)
                })
                .collect();
            for (host, listening) in target.hosts {
                let mut conditions = conditions.clone();
                conditions.extend(listening.scope());
                let rule = Rule::split(conditions, backends.clone(), total, false)
                    .with_filters(filters.clone())
                    .with_deadline(deadline);
                let (host, claim, source, canary) = (host.clone(), claim.clone(), source.clone(), canary.clone());
                let origin = if target.grpc.is_some() { RouteOrigin::GrpcRoute } else { RouteOrigin::HttpRoute };
                entries.push(Entry { host, claim, rank, rule, source, origin, canary, tls: listening.tls });
            }
        }
    }
    resolved
}

/// The HTTPRoute status condition (on each of our parents) of a route that asks for auto-promotion:
/// `True` while ramjet moves its weights (the reason is where promotion stands), `False` with what
/// keeps it from doing so.
pub const AUTO_PROMOTE_CONDITION: &str = "ramjet.dev/CanaryAutoPromote";
/// The weight total of an HTTPRoute's auto-promotion (as `canary-weight-total` on a canary Ingress).
const WEIGHT_TOTAL: &str = "ramjet.dev/canary-weight-total";

/// An HTTPRoute's auto-promotion as its rules compiled: the plan for the deciding replica (its
/// series filled in as the table's routes are added), or why there is none.
struct Promotion {
    /// The route's index in the report's routes.
    report: usize,
    object: ObjectRef,
    plan: Option<CanaryPlan>,
    condition: StatusCondition,
}

impl Promotion {
    /// The plan goes to the draft, when some canary rule is served; the condition for the status.
    fn finish(&self, draft: &mut Draft) -> StatusCondition {
        let Some(plan) = &self.plan else { return self.condition.clone() };
        if plan.series.is_empty() {
            let message = "none of the canary rules is served (their paths are routed by other objects); the route is not auto-promoted";
            draft.warn(&self.object, message);
            return StatusCondition::new(AUTO_PROMOTE_CONDITION, false, "NotServed", message);
        }
        let mut plan = plan.clone();
        plan.series.sort();
        plan.series.dedup();
        draft.canaries.push(plan);
        self.condition.clone()
    }
}

/// What an HTTPRoute's `ramjet.dev/` canary annotations ask: `None` when it does not ask for
/// auto-promotion. The canary rules are those with exactly two `backendRefs`: the first is the
/// primary, the second the canary. A rule with more, or a Service that is the canary of one rule
/// and the primary of another, leaves the whole route unpromoted (reported, and said in status);
/// so does a route without such a rule. When `ramjet.dev/canary-state` holds a state for these
/// canaries, the canary rules serve its weight (the primary the rest of the total) in place of
/// their written weights, so every replica serves what the deciding replica wrote. Returns the
/// promotion and, per rule, its canary's backend.
fn promotion(
    route: &HttpRoute,
    target: &Target<'_>,
    actions: &mut [Action],
    draft: &mut Draft,
) -> Option<(Promotion, Vec<Option<Arc<str>>>)> {
    let object = target.object;
    let annotations = route.metadata.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key)).map(|v| v.trim());
    for key in annotations.into_iter().flat_map(|a| a.keys()) {
        let Some(name) = key.strip_prefix("ramjet.dev/").filter(|n| n.starts_with("canary-") || *n == "canary") else {
            continue;
        };
        if !SETTINGS.contains(&name) && key != WEIGHT_TOTAL && key != STATE_ANNOTATION {
            draft.warn(
                object,
                format!("{key} is not read on an HTTPRoute (its backendRefs' weights and matches say what a canary Ingress's annotations do); it is ignored"),
            );
        }
    }
    let asked = get("ramjet.dev/canary-auto-promote").is_some_and(|v| v != "false");
    if !asked {
        return None;
    }
    let mut weight_total = 100;
    if let Some(v) = get(WEIGHT_TOTAL) {
        match v.parse::<u32>() {
            Ok(n) if n > 0 => weight_total = n,
            _ => draft.warn(object, format!("{WEIGHT_TOTAL}: `{v}` is not a whole number above 0; 100 is used")),
        }
    }
    let total = effective_total(weight_total);
    let refused = |draft: &mut Draft, problems: Vec<String>| {
        for problem in &problems {
            draft.warn(object, format!("{problem}; the route is not auto-promoted"));
        }
        let message = format!("not auto-promoted: {}", problems.join("; "));
        let condition = StatusCondition::new(AUTO_PROMOTE_CONDITION, false, "Invalid", message);
        Some((Promotion { report: target.report, object: object.clone(), plan: None, condition }, Vec::new()))
    };
    let mut problems = Vec::new();
    let settings = AutoPromote::from_annotations(annotations, total, &mut problems);
    let Some(settings) = settings else {
        // The settings' own messages say "the canary is not auto-promoted".
        let problems =
            problems.into_iter().map(|p| p.trim_end_matches("; the canary is not auto-promoted").to_string());
        return refused(draft, problems.collect());
    };
    // The canary rules: (rule, primary, canary).
    let mut pairs: Vec<(usize, Arc<str>, Arc<str>)> = Vec::new();
    for (r, (rule, action)) in route.spec.rules.iter().zip(actions.iter()).enumerate() {
        match rule.backend_refs.len() {
            0 | 1 => {}
            // A rule that cannot be served (already reported) or that redirects uses no backend.
            2 if !action.served || action.backends.len() != 2 => {}
            2 => {
                let (primary, canary) = (&action.backends[0].backend.name, &action.backends[1].backend.name);
                if primary == canary {
                    problems.push(format!("spec.rules[{r}]: both backendRefs are {primary}, so there is no canary"));
                } else {
                    pairs.push((r, primary.clone(), canary.clone()));
                }
            }
            n => problems.push(format!(
                "spec.rules[{r}] has {n} backendRefs; the rules of an auto-promoted route have one, or two (the primary first, then the canary)"
            )),
        }
    }
    for (r, _, canary) in &pairs {
        if let Some((other, _, _)) = pairs.iter().find(|(_, primary, _)| primary == canary) {
            problems.push(format!("{canary} is the canary of spec.rules[{r}] and the primary of spec.rules[{other}]"));
        }
    }
    if pairs.is_empty() && problems.is_empty() {
        problems.push("no rule that can be served has two backendRefs (the primary first, then the canary)".into());
    }
    if !problems.is_empty() {
        problems.dedup();
        return refused(draft, problems);
    }
    let canaries: BTreeSet<&str> = pairs.iter().map(|(_, _, c)| &**c).collect();
    let backend = canaries.into_iter().collect::<Vec<_>>().join(",");
    let state = get(STATE_ANNOTATION).and_then(CanaryState::parse).filter(|s| s.backend == backend);
    let mut marks = vec![None; actions.len()];
    for (r, _, canary) in &pairs {
        if let Some(state) = &state {
            let weight = state.served_weight(total);
            let backends = &mut actions[*r].backends;
            backends[0].weight = total - weight;
            backends[1].weight = weight;
        }
        marks[*r] = Some(canary.clone());
    }
    let condition = match &state {
        None => StatusCondition::new(
            AUTO_PROMOTE_CONDITION,
            true,
            "Pending",
            format!("auto-promotion of {backend} starts when the Lease holder writes {STATE_ANNOTATION}; until then the backendRefs' weights are served"),
        ),
        Some(s) => {
            let (reason, message) = match s.phase {
                Phase::Progressing => (
                    "Progressing",
                    format!("{backend} at weight {}/{total} (step {}, {} failed checks)", s.weight.min(total), s.step, s.failures),
                ),
                Phase::Promoted => (
                    "Promoted",
                    format!("{backend} is promoted: it takes every request by weight; make it the rules' only backendRef, then remove the ramjet.dev/canary-* annotations"),
                ),
                Phase::Aborted => (
                    "Aborted",
                    format!("{backend} was aborted after {} failed checks: the primary takes every request by weight", s.failures),
                ),
            };
            StatusCondition::new(AUTO_PROMOTE_CONDITION, true, reason, message)
        }
    };
    let namespace = namespace_of(&route.metadata.namespace);
    let plan = CanaryPlan {
        kind: CanaryKind::HttpRoute,
        namespace: namespace.to_string(),
        name: route.metadata.name.clone().unwrap_or_default(),
        settings,
        total,
        backend,
        series: Vec::new(),
    };
    let promotion = Promotion { report: target.report, object: object.clone(), plan: Some(plan), condition };
    Some((promotion, marks))
}

/// A rule's `timeouts` as one deadline for the exchange with the backend: the shorter of `request`
/// and `backendRequest` (ramjet tries a second endpoint only after a refused connect, so one
/// deadline covers both); `0s` turns a timeout off, and none given is `None`.
fn rule_deadline(timeouts: Option<&BTreeMap<String, String>>) -> Result<Option<std::time::Duration>, String> {
    let mut deadline = None;
    let mut given = BTreeMap::new();
    for (name, value) in timeouts.into_iter().flatten() {
        if name != "request" && name != "backendRequest" {
            return Err(format!("`{name}` is not a timeout (request, backendRequest)"));
        }
        let d = gateway_duration(value)
            .ok_or_else(|| format!("{name} `{value}` is not a Gateway API duration (1h, 30s, 500ms, 1m30s)"))?;
        given.insert(name.as_str(), d);
        if !d.is_zero() {
            deadline = Some(deadline.map_or(d, |e: std::time::Duration| e.min(d)));
        }
    }
    if let (Some(request), Some(backend)) = (given.get("request"), given.get("backendRequest")) {
        if !request.is_zero() && (backend.is_zero() || backend > request) {
            return Err("backendRequest must not be longer than request".into());
        }
    }
    Ok(deadline)
}

/// A Gateway API duration (GEP-2257): one to four pieces of up to five digits and a unit (`h`,
/// `m`, `s`, `ms`), as `1h`, `500ms`, `1m30s`.
fn gateway_duration(text: &str) -> Option<std::time::Duration> {
    let mut rest = text.as_bytes();
    let (mut total, mut pieces) = (std::time::Duration::ZERO, 0);
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 5 {
            return None;
        }
        let n: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = match rest {
            [b'm', b's', ..] => (std::time::Duration::from_millis(1), 2),
            [b'h', ..] => (std::time::Duration::from_secs(3600), 1),
            [b'm', ..] => (std::time::Duration::from_secs(60), 1),
            [b's', ..] => (std::time::Duration::from_secs(1), 1),
            _ => return None,
        };
        rest = &rest[len..];
        total += unit * n as u32;
        pieces += 1;
    }
    (1..=4).contains(&pieces).then_some(total)
}

/// Why a rule's backends or filters cannot be used: its requests get 500.
struct RuleProblem {
    reason: &'static str,
    message: String,
}

impl RuleProblem {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        RuleProblem { reason, message: message.into() }
    }

    /// `ResolvedRefs: False` for reference problems; an unsupported filter is reported as one too,
    /// with the spec's `UnsupportedValue`.
    fn condition(&self) -> StatusCondition {
        StatusCondition::new("ResolvedRefs", false, self.reason, self.message.clone())
    }
}

/// A rule's weighted backends and filters.
fn rule_action(
    rule: &crate::gateway_api::HttpRouteRule,
    from: Referrer<'_>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'_, '_>,
) -> Result<(Vec<WeightedBackend>, Vec<Filter>), RuleProblem> {
    let mut filters = Vec::new();
    for filter in &rule.filters {
        filters.push(compile_filter(filter, from, refs, resolver)?);
    }
    let redirects = filters.iter().any(|f| matches!(f, Filter::Redirect(_)));
    if redirects && filters.iter().any(|f| matches!(f, Filter::Rewrite(_))) {
        return Err(RuleProblem::new("UnsupportedValue", "RequestRedirect and URLRewrite cannot be used together"));
    }
    if redirects {
        // Ramjet answers; the backends are never used.
        return Ok((vec![WeightedBackend::new(not_found_backend(resolver), 1)], filters));
    }
    if rule.backend_refs.is_empty() {
        return Err(RuleProblem::new("BackendNotFound", "the rule has no backendRefs"));
    }
    let mut backends = Vec::new();
    for reference in &rule.backend_refs {
        // Header edits for this backend only (HTTPRouteBackendRequestHeaderModification); the
        // other filters are the rule's business.
        let mut own = Vec::new();
        for filter in &reference.filters {
            if !matches!(filter.type_.as_str(), "RequestHeaderModifier" | "ResponseHeaderModifier") {
                let message =
                    format!("a {} filter on a backendRef is not supported (only header modifiers)", filter.type_);
                return Err(RuleProblem::new("UnsupportedValue", message));
            }
            own.push(compile_filter(filter, from, refs, resolver)?);
        }
        let weight = reference.weight.unwrap_or(1).max(0) as u32;
        let mut target = backend(reference, from, refs, resolver)?;
        if from.kind == GRPC_ROUTE {
            // A GRPCRoute's backends speak gRPC: HTTP/2 (h2c, or TLS with a BackendTLSPolicy),
            // errors answered the gRPC way.
            let protocol = if target.tls.is_some() { BackendProtocol::Grpcs } else { BackendProtocol::Grpc };
            target = resolver.compiler.speaking(&target, protocol, target.tls.clone());
        }
        let mut weighted = WeightedBackend::new(target, weight);
        weighted.filters = own.into_boxed_slice();
        backends.push(weighted);
    }
    if backends.iter().all(|b| b.weight == 0) {
        // Every weight 0: the spec answers 500.
        return Ok((vec![WeightedBackend::new(error_backend(resolver), 1)], filters));
    }
    Ok((backends, filters))
}

fn compile_filter(
    filter: &HttpRouteFilter,
    from: Referrer<'_>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'_, '_>,
) -> Result<Filter, RuleProblem> {
    match filter.type_.as_str() {
        "RequestMirror" => {
            let Some(mirror) = &filter.request_mirror else {
                return Err(RuleProblem::new("UnsupportedValue", "RequestMirror without requestMirror"));
            };
            let reference = HttpBackendRef { backend: mirror.backend_ref.clone(), ..HttpBackendRef::default() };
            let target = backend(&reference, from, refs, resolver)?;
            let percent = match (&mirror.percent, &mirror.fraction) {
                (Some(p), _) => (*p).clamp(0, 100) as u8,
                (None, Some(f)) => {
                    let denominator = f.denominator.unwrap_or(100).max(1);
                    (f.numerator.max(0) as i64 * 100 / denominator as i64).clamp(0, 100) as u8
                }
                (None, None) => 100,
            };
            Ok(Filter::Mirror(Mirror { backend: target, percent, body: true, host: None, path: None }))
        }
        "RequestHeaderModifier" | "ResponseHeaderModifier" => {
            let request = filter.type_ == "RequestHeaderModifier";
            let given = if request { &filter.request_header_modifier } else { &filter.response_header_modifier };
            let Some(given) = given else {
                return Err(RuleProblem::new("UnsupportedValue", format!("{} without its settings", filter.type_)));
            };
            let edits = header_edits(given).map_err(|e| RuleProblem::new("UnsupportedValue", e))?;
            Ok(if request { Filter::RequestHeaders(edits) } else { Filter::ResponseHeaders(edits) })
        }
        "URLRewrite" => {
            let Some(given) = &filter.url_rewrite else {
                return Err(RuleProblem::new("UnsupportedValue", "URLRewrite without urlRewrite"));
            };
            let host = match given.hostname.as_deref() {
                Some(h) => Some(validate_host(h).map_err(|e| RuleProblem::new("UnsupportedValue", e))?.into()),
                None => None,
            };
            let path = given.path.as_ref().map(path_rewrite).transpose()?;
            Ok(Filter::Rewrite(Rewrite { host, path }))
        }
        "RequestRedirect" => {
            let Some(given) = &filter.request_redirect else {
                return Err(RuleProblem::new("UnsupportedValue", "RequestRedirect without requestRedirect"));
            };
            let unsupported = |m: String| RuleProblem::new("UnsupportedValue", m);
            let scheme = match given.scheme.as_deref() {
                None => None,
                Some(s @ ("http" | "https")) => Some(s.into()),
                Some(other) => return Err(unsupported(format!("redirect scheme {other} (http or https)"))),
            };
            let host = match given.hostname.as_deref() {
                Some(h) => Some(validate_host(h).map_err(unsupported)?.into()),
                None => None,
            };
            let port = match given.port {
                None => None,
                Some(p) => {
                    Some(u16::try_from(p).ok().filter(|p| *p > 0).ok_or_else(|| unsupported(format!("port {p}")))?)
                }
            };
            let status = match given.status_code.unwrap_or(302) {
                code @ (301 | 302 | 303 | 307 | 308) => code,
                other => return Err(unsupported(format!("redirect status {other} (301, 302, 303, 307 or 308)"))),
            };
            let path = given.path.as_ref().map(path_rewrite).transpose()?;
            Ok(Filter::Redirect(Redirect::new(scheme, host, port, path, status)))
        }
        other => Err(RuleProblem::new("UnsupportedValue", format!("filter {other} is not supported"))),
    }
}

/// A path modifier; a `ReplacePrefixMatch`'s matched prefix is filled in per match ([`for_match`]).
fn path_rewrite(given: &crate::gateway_api::PathModifier) -> Result<PathRewrite, RuleProblem> {
    let valid = |p: &str| {
        p.starts_with('/')
            && !p.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'?' || b == b'#')
    };
    let (value, rewrite): (Option<&String>, fn(&str) -> PathRewrite) = match given.type_.as_str() {
        "ReplaceFullPath" => (given.replace_full_path.as_ref(), |p| PathRewrite::Full(p.into())),
        "ReplacePrefixMatch" => {
            (given.replace_prefix_match.as_ref(), |p| PathRewrite::Prefix { matched: "".into(), with: p.into() })
        }
        other => return Err(RuleProblem::new("UnsupportedValue", format!("path modifier {other}"))),
    };
    match value {
        Some(v) if valid(v) => Ok(rewrite(v)),
        _ => Err(RuleProblem::new("UnsupportedValue", format!("{} needs a path starting with `/`", given.type_))),
    }
}

/// The rule's filters for one of its matches: a `ReplacePrefixMatch` replaces that match's path.
fn for_match(filters: &[Filter], claim: &PathClaim) -> Vec<Filter> {
    let matched: &str = match claim {
        PathClaim::Exact(p) | PathClaim::Prefix(p) => p.trim_end_matches('/'),
        // Refused with a prefix rewrite (compile_rules).
        PathClaim::Pattern(_) => "",
    };
    let fill = |path: &mut Option<PathRewrite>| {
        if let Some(PathRewrite::Prefix { matched: m, .. }) = path {
            *m = matched.into();
        }
    };
    let mut filters = filters.to_vec();
    for filter in &mut filters {
        match filter {
            Filter::Rewrite(r) => fill(&mut r.path),
            Filter::Redirect(r) => *r = r.for_prefix(matched),
            _ => {}
        }
    }
    filters
}

/// Fields ramjet frames itself: no filter may set, add or remove them.
const FRAMING_FIELDS: [&str; 9] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
];

fn header_edits(given: &crate::gateway_api::HeaderModifier) -> Result<HeaderEdits, String> {
    let name = |n: &str| -> Result<Box<str>, String> {
        let lower = n.to_ascii_lowercase();
        let token = !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(format!("`{n}` is not a header name"));
        }
        if FRAMING_FIELDS.contains(&lower.as_str()) {
            return Err(format!("header {n} is ramjet's to write; filters cannot change it"));
        }
        Ok(lower.into())
    };
    let pair = |h: &crate::gateway_api::HeaderValue| -> Result<(Box<str>, Box<str>), String> {
        if h.value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(format!("the value for header {} has control characters", h.name));
        }
        Ok((name(&h.name)?, h.value.trim().into()))
    };
    Ok(HeaderEdits {
        set: given.set.iter().map(pair).collect::<Result<Vec<_>, _>>()?.into(),
        add: given.add.iter().map(pair).collect::<Result<Vec<_>, _>>()?.into(),
        remove: given.remove.iter().map(|n| name(n)).collect::<Result<Vec<_>, _>>()?.into(),
    })
}

/// The route a reference is made from: its kind (what a ReferenceGrant names) and namespace.
#[derive(Clone, Copy)]
struct Referrer<'a> {
    kind: &'static str,
    namespace: &'a str,
    /// The client certificate the route's Gateway presents to backends over TLS.
    backend_certificate: Option<&'a Arc<Certificate>>,
}

/// A backendRef: a Service port, in another namespace only where a ReferenceGrant allows it.
fn backend(
    reference: &HttpBackendRef,
    from: Referrer<'_>,
    refs: &Refs<'_>,
    resolver: &mut Resolver<'_, '_>,
) -> Result<Arc<Backend>, RuleProblem> {
    let namespace = from.namespace;
    let b = &reference.backend;
    let (group, kind) = (b.group.as_deref().unwrap_or(""), b.kind.as_deref().unwrap_or("Service"));
    if !group.is_empty() || kind != "Service" {
        return Err(RuleProblem::new("InvalidKind", format!("backendRef {group}/{kind} {} is not a Service", b.name)));
    }
    let target = b.namespace.as_deref().unwrap_or(namespace);
    if target != namespace && !refs.grants.allows(GROUP, from.kind, namespace, "", "Service", target, &b.name) {
        return Err(RuleProblem::new(
            "RefNotPermitted",
            format!("no ReferenceGrant in {target} lets {}s of {namespace} use Service {}", from.kind, b.name),
        ));
    }
    let Some(port) = b.port else {
        return Err(RuleProblem::new("UnsupportedValue", format!("backendRef {} names no port", b.name)));
    };
    let service = IngressServiceBackend { name: b.name.clone(), port: None };
    let resolved = resolver
        .resolve_backend(target, &service, PortRef::Number(port))
        .map_err(|e| RuleProblem::new("BackendNotFound", e))?;
    // A BackendTLSPolicy on the Service (or this port of it) decides TLS; then the Service
    // port's `appProtocol` (GEP-1911): `kubernetes.io/h2c` is HTTP/2 by prior knowledge.
    // TCPRoutes and TLSRoutes relay bytes as they come: no TLS of ramjet's, no HTTP protocol.
    if matches!(from.kind, TCP_ROUTE | UDP_ROUTE | TLS_ROUTE) {
        return Ok(resolved);
    }
    let port_name = resolver.port_name(target, &b.name, port).unwrap_or("");
    Ok(match (refs.backend_tls.for_backend(target, &b.name, port_name), resolver.app_protocol(target, &b.name, port)) {
        (Some(BackendTls::Verified(tls, spec)), _) => {
            let tls = match from.backend_certificate {
                None => Ok(tls),
                Some(cert) => {
                    let spec = UpstreamTlsSpec { client_cert: Some(cert.clone()), ..spec };
                    resolver.compiler.upstream_tls(&spec)
                }
            };
            match tls {
                Ok(tls) => resolver.compiler.speaking(&resolved, BackendProtocol::Https, Some(tls)),
                Err(e) => {
                    let kind = BackendKind::Respond(respond(502, "the backend's TLS cannot be set up\n"));
                    let name = format!("gateway:backend-tls-refused:{target}/{}: {e}", b.name);
                    resolver.compiler.backend(&name, kind)
                }
            }
        }
        // Why is in the policy's status and the diagnostics, not told to clients.
        (Some(BackendTls::Refused), _) => {
            let kind = BackendKind::Respond(respond(502, "the backend's TLS policy cannot be used\n"));
            resolver.compiler.backend(&format!("gateway:backend-tls-refused:{target}/{}", b.name), kind)
        }
        (None, Some("kubernetes.io/h2c")) => resolver.compiler.speaking(&resolved, BackendProtocol::H2c, None),
        (None, _) => resolved,
    })
}

/// What compiling a route's references consults: ReferenceGrants, and the BackendTLSPolicies of
/// the Services they name.
struct Refs<'s> {
    grants: Grants<'s>,
    backend_tls: BackendTlsPolicies<'s>,
}

/// The answer for requests whose rule cannot be served (a missing backend, an unsupported filter).
fn error_backend(resolver: &mut Resolver<'_, '_>) -> Arc<Backend> {
    let kind = BackendKind::Respond(respond(500, "the route's backend cannot be used\n"));
    resolver.compiler.backend("gateway:invalid-backend", kind)
}

/// What a request gets when a path is claimed but none of its matches holds.
fn not_found_backend(resolver: &mut Resolver<'_, '_>) -> Arc<Backend> {
    resolver.compiler.backend("gateway:no-match", BackendKind::Respond(respond(404, "no route matched\n")))
}

fn respond(status: u16, body: &'static str) -> DirectResponse {
    DirectResponse::text(status, body)
}

/// A match's path claim and its conditions.
fn compile_match(found: &HttpRouteMatch) -> Result<(PathClaim, Vec<Condition>), String> {
    let path = found.path.as_ref();
    let value = path.and_then(|p| p.value.as_deref()).unwrap_or("/");
    let pattern = path.and_then(|p| p.type_.as_deref()) == Some("RegularExpression");
    if !pattern && (!value.starts_with('/') || value.bytes().any(|b| b.is_ascii_whitespace() || b == b'?' || b == b'#'))
    {
        return Err(format!("path `{value}` must start with `/` and hold no whitespace, `?` or `#`"));
    }
    let mut conditions = Vec::new();
    let claim = match path.and_then(|p| p.type_.as_deref()).unwrap_or("PathPrefix") {
        "Exact" => PathClaim::Exact(value.to_string()),
        "PathPrefix" => PathClaim::Prefix(value.trim_end_matches('/').to_string()),
        "RegularExpression" => {
            // The table's keys are exact paths and prefixes: a pattern claims every path of its
            // hosts, and its condition decides.
            conditions.push(Condition::Path(matcher(Some("RegularExpression"), value)?));
            PathClaim::Pattern(value.to_string())
        }
        other => return Err(format!("path type {other} is not supported")),
    };
    if let Some(method) = &found.method {
        conditions.push(Condition::Method(method.as_str().into()));
    }
    let mut names = BTreeSet::new();
    for header in &found.headers {
        // The first match for a name counts; later ones for the same name are ignored, as the spec says.
        if names.insert(header.name.to_ascii_lowercase()) {
            let value = matcher(header.type_.as_deref(), &header.value)?;
            conditions.push(Condition::Header { name: header.name.to_ascii_lowercase().into(), value });
        }
    }
    let mut names = BTreeSet::new();
    for query in &found.query_params {
        if names.insert(query.name.clone()) {
            let value = matcher(query.type_.as_deref(), &query.value)?;
            conditions.push(Condition::Query { name: query.name.as_str().into(), value });
        }
    }
    Ok((claim, conditions))
}

/// `Exact` compares the whole value; `RegularExpression` must match the whole value too (as RE2's
/// full match in Envoy-based implementations).
fn matcher(type_: Option<&str>, value: &str) -> Result<Matcher, String> {
    match type_.unwrap_or("Exact") {
        "Exact" => Ok(Matcher::exact(value)),
        "RegularExpression" => Matcher::regex(&format!("^(?:{value})$")),
        other => Err(format!("match type {other} is not supported")),
    }
}

/// Puts the entries in the table: for each host and path key claimed, every entry covering that key,
/// in precedence order, and 404 when none holds. A canary rule that is served names, in its
/// promotion's plan, the table route (and so the counters) its requests are counted under.
fn add_routes(
    mut entries: Vec<Entry>,
    resolver: &mut Resolver<'_, '_>,
    draft: &mut Draft,
    promotions: &mut [Promotion],
) {
    entries.sort_by(|a, b| a.host.cmp(&b.host).then(a.rank.cmp(&b.rank)));
    let not_found = not_found_backend(resolver);
    let mut start = 0;
    while start < entries.len() {
        let end = start + entries[start..].iter().take_while(|e| e.host == entries[start].host).count();
        let host = &entries[start..end];
        let keys: BTreeSet<(PathKind, &str)> = host.iter().map(|e| e.claim.key()).collect();
        for (kind, path) in keys {
            let rules: Vec<Rule> = host.iter().filter(|e| e.claim.covers(kind, path)).map(|e| e.rule.clone()).collect();
            let first = host.iter().find(|e| e.claim.key() == (kind, path));
            let source = first.map_or("", |e| e.source.as_str());
            let origin = first.map_or(RouteOrigin::HttpRoute, |e| e.origin);
            // The handshake's validation, by the server name the host is (a Gateway listener's).
            let over_tls = host.iter().any(|e| e.tls && e.claim.covers(kind, path));
            let client_auth = match over_tls {
                true => draft.builder.client_auth_for(&entries[start].host).filter(|a| a.verify.tls_only()).cloned(),
                false => None,
            };
            let limits = RouteLimits { client_auth, ..RouteLimits::default() };
            let policy = Some(Arc::new(RoutePolicy::build(rules, Vec::new(), limits)));
            let route_path = if path.is_empty() { "/" } else { path };
            let added = draft.builder.add_route_with_policy(
                &entries[start].host,
                route_path,
                kind,
                not_found.clone(),
                policy,
                Source { origin, name: source },
            );
            match added {
                Ok(()) => {
                    let canaries = host.iter().filter(|e| e.claim.covers(kind, path)).filter_map(|e| e.canary.as_ref());
                    for (at, backend) in canaries {
                        if let Some(plan) = &mut promotions[*at].plan {
                            plan.series.push((source.to_string(), backend.to_string()));
                        }
                    }
                }
                Err(conflict) => {
                    let (namespace, name) = source.split_once('/').unwrap_or(("", source));
                    draft.warn(
                        &ObjectRef::new(HTTP_ROUTE, Some(namespace), name),
                        format!("{} is already routed by {}; this path is ignored", conflict.key, conflict.kept),
                    );
                }
            }
        }
        start = end;
    }
}

/// The ReferenceGrants, by the namespace they are in.
struct Grants<'s> {
    by_namespace: HashMap<&'s str, Vec<&'s ReferenceGrant>>,
}

impl<'s> Grants<'s> {
    fn new(grants: &'s [Arc<ReferenceGrant>]) -> Self {
        let mut by_namespace: HashMap<&str, Vec<&ReferenceGrant>> = HashMap::new();
        for grant in grants {
            by_namespace.entry(namespace_of(&grant.metadata.namespace)).or_default().push(grant);
        }
        Grants { by_namespace }
    }

    /// Whether a grant in `to_namespace` lets a `from_group/from_kind` of `from_namespace` refer to
    /// the `to_group/to_kind` named `to_name`.
    #[allow(clippy::too_many_arguments)]
    fn allows(
        &self,
        from_group: &str,
        from_kind: &str,
        from_namespace: &str,
        to_group: &str,
        to_kind: &str,
        to_namespace: &str,
        to_name: &str,
    ) -> bool {
        self.by_namespace.get(to_namespace).into_iter().flatten().any(|grant| {
            let from = grant
                .spec
                .from
                .iter()
                .any(|f| f.group == from_group && f.kind == from_kind && f.namespace == from_namespace);
            let to =
                grant.spec.to.iter().any(|t| {
                    t.group == to_group && t.kind == to_kind && t.name.as_deref().is_none_or(|n| n == to_name)
                });
            from && to
        })
    }
}

mod backend_tls;
mod frontend_tls;
mod grpc;
mod layer4;
#[cfg(test)]
mod tests;
