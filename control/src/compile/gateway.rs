//! Compiling Gateway API objects — GatewayClasses, Gateways, HTTPRoutes and ReferenceGrants — into
//! the same draft table as Ingresses. Nothing downstream knows which API a route came from.
//!
//! In order:
//! 1. the GatewayClasses whose `controllerName` is ours, and the Gateways of those classes;
//! 2. each listener is judged: ramjet serves `HTTP` on its plain port and `HTTPS` (TLS terminated,
//!    certificates from Secrets through the same certificate store) on its TLS port; any other port,
//!    protocol or TLS mode is reported in the listener's conditions, never silently ignored;
//! 3. each HTTPRoute's `parentRefs` attach it to listeners (section name, port, the listener's
//!    `allowedRoutes` namespaces and kinds, hostname intersection), and its rules become
//!    [`Rule`]s: matches become path keys plus conditions, `backendRefs` weighted backends, filters
//!    the rule's filters;
//! 4. for every path key of a host, the rules of every match that covers that key, in the spec's
//!    precedence order (Exact, longest prefix, method, most headers, most query parameters, oldest
//!    route, route name, rule order), form the route's policy; a request no rule accepts gets 404.
//!
//! The [`Report`] holds what status says about each object (conditions with the spec's reasons); the
//! cluster's status writer and the diagnostics both come from it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::IngressServiceBackend;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use ramjet_shared::{
    Backend, BackendKind, Certificate, Condition, DirectResponse, Filter, HeaderEdits, Matcher, Mirror, ObjectRef,
    PathKind, PathRewrite, Redirect, Rewrite, RoutePolicy, Rule, WeightedBackend,
};

use super::ingress::{namespace_of, ClusterSnapshot, PortRef, Resolver};
use super::Draft;
use crate::gateway_api::{
    Gateway, HttpBackendRef, HttpRoute, HttpRouteFilter, HttpRouteMatch, Listener, ParentReference, ReferenceGrant,
    GROUP,
};
use crate::routes_file::validate_host;

/// The default `--gateway-controller-name`.
pub const GATEWAY_CONTROLLER: &str = "ramjet.dev/gateway-controller";

/// One status condition as ramjet computes it (the writer adds times and generations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCondition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl StatusCondition {
    fn new(type_: &'static str, status: bool, reason: &'static str, message: impl Into<String>) -> Self {
        StatusCondition { type_, status, reason, message: message.into() }
    }
}

/// What status says about one of our GatewayClasses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassReport {
    pub name: String,
    pub generation: Option<i64>,
    pub conditions: Vec<StatusCondition>,
}

/// What status says about one listener of one of our Gateways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerReport {
    pub name: String,
    pub attached_routes: i32,
    /// The route kinds the listener admits and ramjet serves.
    pub supported_kinds: Vec<&'static str>,
    pub conditions: Vec<StatusCondition>,
}

/// What status says about one of our Gateways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayReport {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub conditions: Vec<StatusCondition>,
    pub listeners: Vec<ListenerReport>,
}

/// What one HTTPRoute's `status.parents` entry for one of our Gateways says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentReport {
    pub parent_ref: ParentReference,
    pub conditions: Vec<StatusCondition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteReport {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub parents: Vec<ParentReport>,
}

/// Everything the status writer needs, from one compile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub classes: Vec<ClassReport>,
    pub gateways: Vec<GatewayReport>,
    pub routes: Vec<RouteReport>,
}

const HTTP_ROUTE: &str = "HTTPRoute";

/// A listener ramjet serves, with what routes need from it.
struct ServedListener<'s> {
    gateway: &'s Gateway,
    listener: &'s Listener,
    /// Index into the report's gateways and their listeners.
    at: (usize, usize),
    /// The listener's hostname, validated (`None`: any host).
    hostname: Option<String>,
    certificate: Option<Arc<Certificate>>,
}

/// What status says about the Gateway API objects of `snapshot`, compiled on their own (the
/// table they compile to is thrown away).
pub fn report(snapshot: &ClusterSnapshot) -> Report {
    let mut compiler = super::Compiler::new();
    let mut resolver = Resolver::new(snapshot, &mut compiler);
    compile(snapshot, &mut resolver, &mut Draft::default())
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
    for gateway in gateways {
        let at = report.gateways.len();
        let (gateway_report, served) = judge_gateway(gateway, at, snapshot, &grants, resolver, draft);
        report.gateways.push(gateway_report);
        listeners.extend(served);
    }
    let namespaces: HashMap<&str, &Namespace> =
        snapshot.namespaces.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, &**n))).collect();
    let mut routes: Vec<&HttpRoute> = snapshot.http_routes.iter().map(|r| &**r).collect();
    routes.sort_by(|a, b| age(&a.metadata).cmp(&age(&b.metadata)));
    let mut entries = Vec::new();
    let mut tls_hosts: Vec<(String, Arc<Certificate>)> = Vec::new();
    for (order, route) in routes.into_iter().enumerate() {
        let namespace = namespace_of(&route.metadata.namespace);
        let name = route.metadata.name.as_deref().unwrap_or("");
        let object = ObjectRef::new(HTTP_ROUTE, Some(namespace), name);
        let mut parents = Vec::new();
        let mut hosts: BTreeMap<String, Listening> = BTreeMap::new();
        for parent in &route.spec.parent_refs {
            let Some(attached) = attach(route, parent, &listeners, &namespaces, &mut report) else { continue };
            match attached {
                Ok(found) => {
                    for (listener, host) in found {
                        if let Some(cert) = &listener.certificate {
                            tls_hosts.push((host.clone(), cert.clone()));
                        }
                        let listening = hosts.entry(host).or_default();
                        if listener.listener.protocol == "HTTPS" {
                            listening.tls = true;
                        } else {
                            listening.plain = true;
                        }
                    }
                    parents.push(ParentReport {
                        parent_ref: parent.clone(),
                        conditions: vec![StatusCondition::new("Accepted", true, "Accepted", "attached")],
                    });
                }
                Err(refused) => {
                    draft.warn(&object, format!("parentRef {}: {}", parent.name, refused.message));
                    parents.push(ParentReport { parent_ref: parent.clone(), conditions: vec![refused] });
                }
            }
        }
        if parents.is_empty() {
            continue;
        }
        let resolved = compile_rules(route, order, &hosts, &grants, resolver, &object, draft, &mut entries);
        for parent in &mut parents {
            parent.conditions.push(resolved.clone());
        }
        report.routes.push(RouteReport {
            namespace: namespace.to_string(),
            name: name.to_string(),
            generation: route.metadata.generation,
            parents,
        });
    }
    // A listener without a hostname whose routes have none either serves any host: no SNI name to
    // pick its certificate by, so only named hosts get it.
    for (host, cert) in tls_hosts.into_iter().filter(|(h, _)| !h.is_empty()) {
        if draft.builder.add_tls_host(&host, cert.id) {
            draft.certificates.push(cert);
        }
    }
    add_routes(entries, resolver, draft);
    report
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
) -> (GatewayReport, Vec<ServedListener<'s>>) {
    let namespace = namespace_of(&gateway.metadata.namespace);
    let name = gateway.metadata.name.as_deref().unwrap_or("");
    let object = ObjectRef::new("Gateway", Some(namespace), name);
    let options = &snapshot.options;
    let mut served = Vec::new();
    let mut reports = Vec::new();
    let mut seen: HashMap<(i32, Option<&str>), &str> = HashMap::new();
    for (i, listener) in gateway.spec.listeners.iter().enumerate() {
        let mut conditions = Vec::new();
        let mut refused = |conditions: &mut Vec<StatusCondition>, reason: &'static str, message: String| {
            draft.warn(&object, format!("listener {}: {message}", listener.name));
            conditions.push(StatusCondition::new("Accepted", false, reason, message.clone()));
            conditions.push(StatusCondition::new("Programmed", false, "Invalid", message));
        };
        let port = u16::try_from(listener.port).unwrap_or(0);
        let tls = match listener.protocol.as_str() {
            "HTTP" => false,
            "HTTPS" => true,
            other => {
                let message = format!("protocol {other} is not served by ramjet (HTTP and HTTPS are)");
                refused(&mut conditions, "UnsupportedProtocol", message);
                reports.push(listener_report(listener, Vec::new(), conditions));
                continue;
            }
        };
        let ports = if tls { &options.https_ports } else { &options.http_ports };
        if !ports.contains(&port) {
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
        if let Some(other) = seen.insert((listener.port, listener.hostname.as_deref()), &listener.name) {
            let message = format!("listener {other} has the same port and hostname");
            draft.warn(&object, format!("listener {}: {message}", listener.name));
            conditions.push(StatusCondition::new("Conflicted", true, "HostnameConflict", message.clone()));
            conditions.push(StatusCondition::new("Accepted", true, "Accepted", ""));
            conditions.push(StatusCondition::new("Programmed", false, "Invalid", message));
            reports.push(listener_report(listener, Vec::new(), conditions));
            continue;
        }
        // Kinds: HTTPRoute is the one kind ramjet serves on HTTP and HTTPS listeners.
        let mut kinds = Vec::new();
        let mut resolved = Ok(());
        match listener.allowed_routes.as_ref().and_then(|a| a.kinds.as_ref()) {
            None => kinds.push(HTTP_ROUTE),
            Some(asked) => {
                for kind in asked {
                    let group = kind.group.as_deref().unwrap_or(GROUP);
                    if group == GROUP && kind.kind == HTTP_ROUTE {
                        kinds.push(HTTP_ROUTE);
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
        if tls {
            match listener_certificate(gateway, listener, grants, resolver) {
                Ok(cert) => certificate = Some(cert),
                Err(e) => resolved = Err(e),
            }
        }
        let programmed = match &resolved {
            Ok(()) => {
                conditions.push(StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", ""));
                true
            }
            Err((reason, message)) => {
                draft.warn(&object, format!("listener {}: {message}", listener.name));
                conditions.push(StatusCondition::new("ResolvedRefs", false, reason, message.clone()));
                // Wrong kinds still leave the right ones served; a TLS listener without its certificate cannot serve.
                !tls || certificate.is_some()
            }
        };
        conditions.push(StatusCondition::new("Accepted", true, "Accepted", ""));
        conditions.push(StatusCondition::new("Conflicted", false, "NoConflicts", ""));
        if programmed {
            conditions.push(StatusCondition::new("Programmed", true, "Programmed", ""));
            served.push(ServedListener { gateway, listener, at: (at, i), hostname, certificate });
        } else {
            conditions.push(StatusCondition::new("Programmed", false, "Invalid", "the listener cannot be served"));
        }
        reports.push(listener_report(listener, kinds, conditions));
    }
    let valid = reports.iter().all(|l| l.conditions.iter().any(|c| c.type_ == "Programmed" && c.status));
    let mut conditions = vec![if valid {
        StatusCondition::new("Accepted", true, "Accepted", "")
    } else {
        StatusCondition::new("Accepted", true, "ListenersNotValid", "some listeners are not served")
    }];
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
    (report, served)
}

fn listener_report(listener: &Listener, kinds: Vec<&'static str>, conditions: Vec<StatusCondition>) -> ListenerReport {
    ListenerReport { name: listener.name.clone(), attached_routes: 0, supported_kinds: kinds, conditions }
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
        return Err(("InvalidCertificateRef", "an HTTPS listener needs tls.certificateRefs".to_string()));
    };
    let (group, kind) = (reference.group.as_deref().unwrap_or(""), reference.kind.as_deref().unwrap_or("Secret"));
    if !group.is_empty() || kind != "Secret" {
        return Err(("InvalidCertificateRef", format!("certificateRefs: {group}/{kind} is not a Secret")));
    }
    let own = namespace_of(&gateway.metadata.namespace);
    let namespace = reference.namespace.as_deref().unwrap_or(own);
    if namespace != own && !grants.allows(GROUP, "Gateway", own, "", "Secret", namespace, &reference.name) {
        return Err((
            "RefNotPermitted",
            format!("no ReferenceGrant in {namespace} lets Gateways of {own} use Secret {}", reference.name),
        ));
    }
    resolver.certificate(namespace, &reference.name).map_err(|e| ("InvalidCertificateRef", e))
}

/// The listeners a parentRef attaches the route to, with the hosts it gets on each; `None` when
/// the parent is not one of our Gateways (its status belongs to someone else); `Err` with the
/// `Accepted: False` condition when it is ours but nothing attaches.
#[allow(clippy::type_complexity)]
fn attach<'l, 's>(
    route: &HttpRoute,
    parent: &ParentReference,
    listeners: &'l [ServedListener<'s>],
    namespaces: &HashMap<&str, &Namespace>,
    report: &mut Report,
) -> Option<Result<Vec<(&'l ServedListener<'s>, String)>, StatusCondition>> {
    if parent.group.as_deref().unwrap_or(GROUP) != GROUP || parent.kind.as_deref().unwrap_or("Gateway") != "Gateway" {
        return None;
    }
    let route_namespace = namespace_of(&route.metadata.namespace);
    let parent_namespace = parent.namespace.as_deref().unwrap_or(route_namespace);
    let ours = report.gateways.iter().position(|g| g.namespace == parent_namespace && g.name == parent.name)?;
    let candidates: Vec<&ServedListener<'s>> = listeners
        .iter()
        .filter(|l| l.at.0 == ours)
        .filter(|l| parent.section_name.as_deref().is_none_or(|s| s == l.listener.name))
        .filter(|l| parent.port.is_none_or(|p| p == l.listener.port))
        .collect();
    if candidates.is_empty() {
        return Some(Err(StatusCondition::new(
            "Accepted",
            false,
            "NoMatchingParent",
            "no listener of the Gateway matches the sectionName and port",
        )));
    }
    let allowed: Vec<&ServedListener<'s>> =
        candidates.into_iter().filter(|l| admits(l, route_namespace, namespaces, report)).collect();
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
        let hosts = intersect(listener.hostname.as_deref(), &route.spec.hostnames);
        if !hosts.is_empty() {
            report.gateways[listener.at.0].listeners[listener.at.1].attached_routes += 1;
        }
        found.extend(hosts.into_iter().map(|h| (listener, h)));
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

/// Whether a listener's `allowedRoutes` admits an HTTPRoute from `namespace`.
fn admits(
    listener: &ServedListener<'_>,
    namespace: &str,
    namespaces: &HashMap<&str, &Namespace>,
    report: &Report,
) -> bool {
    let kinds = &report.gateways[listener.at.0].listeners[listener.at.1].supported_kinds;
    if !kinds.contains(&HTTP_ROUTE) {
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

/// The hosts a route serves on a listener: its hostnames intersected with the listener's (`""`: any
/// host). A wildcard matches names with one more label, as the table's wildcards do.
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
}

/// Compiles a route's rules into entries for each of its hosts; returns its `ResolvedRefs`.
#[allow(clippy::too_many_arguments)]
fn compile_rules(
    route: &HttpRoute,
    order: usize,
    hosts: &BTreeMap<String, Listening>,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'_, '_>,
    object: &ObjectRef,
    draft: &mut Draft,
    entries: &mut Vec<Entry>,
) -> StatusCondition {
    let namespace = namespace_of(&route.metadata.namespace);
    let source = format!("{namespace}/{}", route.metadata.name.as_deref().unwrap_or(""));
    let mut resolved = StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", "");
    let default_match = [HttpRouteMatch::default()];
    for (r, rule) in route.spec.rules.iter().enumerate() {
        let deadline = rule_deadline(rule.timeouts.as_ref()).unwrap_or_else(|e| {
            draft.warn(object, format!("spec.rules[{r}].timeouts: {e}; ramjet's upstream timeouts apply"));
            None
        });
        let (backends, filters) = match rule_action(rule, namespace, grants, resolver) {
            Ok(action) => action,
            Err(problem) => {
                draft.warn(object, format!("spec.rules[{r}]: {}; its requests get 500", problem.message));
                if resolved.status {
                    resolved = problem.condition();
                }
                (vec![WeightedBackend::new(error_backend(resolver), 1)], Vec::new())
            }
        };
        let matches = if rule.matches.is_empty() { &default_match[..] } else { &rule.matches[..] };
        for (m, found) in matches.iter().enumerate() {
            let (claim, conditions) = match compile_match(found) {
                Ok(compiled) => compiled,
                Err(e) => {
                    draft.warn(object, format!("spec.rules[{r}].matches[{m}]: {e}; this match is ignored"));
                    continue;
                }
            };
            let (exactness, length) = match &claim {
                PathClaim::Exact(p) => (0, p.len()),
                PathClaim::Pattern(p) => (1, p.len()),
                PathClaim::Prefix(p) => (2, p.len()),
            };
            let prefix_rewrite = |f: &Filter| match f {
                Filter::Rewrite(r) => matches!(r.path, Some(PathRewrite::Prefix { .. })),
                Filter::Redirect(r) => matches!(r.path, Some(PathRewrite::Prefix { .. })),
                _ => false,
            };
            if matches!(claim, PathClaim::Pattern(_)) && filters.iter().any(prefix_rewrite) {
                draft.warn(
                    object,
                    format!("spec.rules[{r}].matches[{m}]: ReplacePrefixMatch needs a PathPrefix match; this match is ignored"),
                );
                continue;
            }
            let rank = (
                exactness,
                Reverse(length),
                found.method.is_none(),
                Reverse(found.headers.len()),
                Reverse(found.query_params.len()),
                order,
                r,
                m,
            );
            let total = backends.iter().map(|b| b.weight).sum();
            let filters = for_match(&filters, &claim);
            for (host, listening) in hosts {
                let mut conditions = conditions.clone();
                conditions.extend(listening.scope());
                let rule = Rule::split(conditions, backends.clone(), total, false)
                    .with_filters(filters.clone())
                    .with_deadline(deadline);
                entries.push(Entry { host: host.clone(), claim: claim.clone(), rank, rule, source: source.clone() });
            }
        }
    }
    resolved
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
    (pieces >= 1 && pieces <= 4).then_some(total)
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
    namespace: &str,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'_, '_>,
) -> Result<(Vec<WeightedBackend>, Vec<Filter>), RuleProblem> {
    let mut filters = Vec::new();
    for filter in &rule.filters {
        filters.push(compile_filter(filter, namespace, grants, resolver)?);
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
        if !reference.filters.is_empty() {
            return Err(RuleProblem::new("UnsupportedValue", "filters on a backendRef are not supported"));
        }
        let weight = reference.weight.unwrap_or(1).max(0) as u32;
        backends.push(WeightedBackend::new(backend(reference, namespace, grants, resolver)?, weight));
    }
    if backends.iter().all(|b| b.weight == 0) {
        // Every weight 0: the spec answers 500.
        return Ok((vec![WeightedBackend::new(error_backend(resolver), 1)], filters));
    }
    Ok((backends, filters))
}

fn compile_filter(
    filter: &HttpRouteFilter,
    namespace: &str,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'_, '_>,
) -> Result<Filter, RuleProblem> {
    match filter.type_.as_str() {
        "RequestMirror" => {
            let Some(mirror) = &filter.request_mirror else {
                return Err(RuleProblem::new("UnsupportedValue", "RequestMirror without requestMirror"));
            };
            let reference = HttpBackendRef { backend: mirror.backend_ref.clone(), ..HttpBackendRef::default() };
            let target = backend(&reference, namespace, grants, resolver)?;
            let percent = match (&mirror.percent, &mirror.fraction) {
                (Some(p), _) => (*p).clamp(0, 100) as u8,
                (None, Some(f)) => {
                    let denominator = f.denominator.unwrap_or(100).max(1);
                    (f.numerator.max(0) as i64 * 100 / denominator as i64).clamp(0, 100) as u8
                }
                (None, None) => 100,
            };
            Ok(Filter::Mirror(Mirror { backend: target, percent, body: true, host: None }))
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
            Ok(Filter::Redirect(Redirect { scheme, host, port, path, status }))
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
            Filter::Redirect(r) => fill(&mut r.path),
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

/// A backendRef: a Service port, in another namespace only where a ReferenceGrant allows it.
fn backend(
    reference: &HttpBackendRef,
    namespace: &str,
    grants: &Grants<'_>,
    resolver: &mut Resolver<'_, '_>,
) -> Result<Arc<Backend>, RuleProblem> {
    let b = &reference.backend;
    let (group, kind) = (b.group.as_deref().unwrap_or(""), b.kind.as_deref().unwrap_or("Service"));
    if !group.is_empty() || kind != "Service" {
        return Err(RuleProblem::new("InvalidKind", format!("backendRef {group}/{kind} {} is not a Service", b.name)));
    }
    let target = b.namespace.as_deref().unwrap_or(namespace);
    if target != namespace && !grants.allows(GROUP, HTTP_ROUTE, namespace, "", "Service", target, &b.name) {
        return Err(RuleProblem::new(
            "RefNotPermitted",
            format!("no ReferenceGrant in {target} lets HTTPRoutes of {namespace} use Service {}", b.name),
        ));
    }
    let Some(port) = b.port else {
        return Err(RuleProblem::new("UnsupportedValue", format!("backendRef {} names no port", b.name)));
    };
    let service = IngressServiceBackend { name: b.name.clone(), port: None };
    resolver
        .resolve_backend(target, &service, PortRef::Number(port))
        .map_err(|e| RuleProblem::new("BackendNotFound", e))
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
/// in precedence order, and 404 when none holds.
fn add_routes(mut entries: Vec<Entry>, resolver: &mut Resolver<'_, '_>, draft: &mut Draft) {
    entries.sort_by(|a, b| a.host.cmp(&b.host).then(a.rank.cmp(&b.rank)));
    let not_found = not_found_backend(resolver);
    let mut start = 0;
    while start < entries.len() {
        let end = start + entries[start..].iter().take_while(|e| e.host == entries[start].host).count();
        let host = &entries[start..end];
        let keys: BTreeSet<(PathKind, &str)> = host.iter().map(|e| e.claim.key()).collect();
        for (kind, path) in keys {
            let rules: Vec<Rule> = host.iter().filter(|e| e.claim.covers(kind, path)).map(|e| e.rule.clone()).collect();
            let source = host.iter().find(|e| e.claim.key() == (kind, path)).map_or("", |e| e.source.as_str());
            let policy = Some(Arc::new(RoutePolicy::new(rules)));
            let route_path = if path.is_empty() { "/" } else { path };
            let added = draft.builder.add_route_with_policy(
                &entries[start].host,
                route_path,
                kind,
                not_found.clone(),
                policy,
                source,
            );
            if let Err(conflict) = added {
                let (namespace, name) = source.split_once('/').unwrap_or(("", source));
                draft.warn(
                    &ObjectRef::new(HTTP_ROUTE, Some(namespace), name),
                    format!("{} is already routed by {}; this path is ignored", conflict.key, conflict.kept),
                );
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

#[cfg(test)]
mod tests;
